//! What generated CPU kernels call at run time: the thread pool that runs
//! their tiles, the register-blocked GEMM micro-kernel of the packed
//! contraction template (`tgc_core::cpu::packed`), and their scratch
//! memory ([`crate::scratch`]: no kernel calls `malloc`).
//!
//! Generated C reaches both through a [`Rt`] passed to its entry point
//! (`int32_t SYMBOL(inputs, outputs, dims, const tgc_rt* rt)`, the C
//! declaration is [`C_DECL`]); generated Rust calls [`ukernel`] directly
//! (and runs its blocks on the caller's thread: sharing an output between
//! threads would need `unsafe` in the user's crate). So there is one pool
//! per process and one micro-kernel, whichever printer made the kernel.
//!
//! **The pool.** One [`crate::pool::Pool`], made on first use with one
//! worker per available core (less the caller, who works too). It is ours,
//! not `rayon-core`'s, because a rayon scope allocates a job per spawned
//! task and a model run must not allocate (`000` §8). A call
//! [`Rt::parallel_for`]`(n, body)` runs `body(t)` for every task
//! `t ∈ [0, n)` on at most [`threads`] threads, the caller's included, and
//! returns when all are done; with one thread or one task it runs on the
//! caller's thread and touches no pool. Tasks are handed out one by one
//! from an atomic counter, so uneven tasks balance.
//!
//! **The micro-kernel** (the BLIS micro-kernel, Van Zee & van de Geijn,
//! "BLIS: A Framework for Rapidly Instantiating BLAS Functionality", ACM
//! TOMS 41(3), 2015, §3): `C[MR×NR] = C + A·B` over `kc` steps from packed
//! panels, the `MR × NR` accumulators in vector registers. Each step is one
//! fused multiply-add, `acc = fma(a, b, acc)` (one rounding), and `k` runs
//! in order, so a contraction computed by it gives the bits of the plain
//! loop nest that both printers print for it (`fmaf` in C, `mul_add` in
//! Rust: `tgc_core::cpu::packed::fused_sum`, the printers' invariant of
//! `tgc_core::cpu::loop_ir`). An FMA is one instruction where a multiply
//! and an add are two: on the AVX-512 Xeon of the benchmarks,
//! `bench_cpu --only gemm` at 1024³ on one thread takes 30–46 ms with a
//! multiply and an add per step, and 19.7 ms with the FMA (NumPy: 22.6 ms
//! in the same run; `docs/results.md`). The variant is chosen
//! at run time from [`Isa::ALL`] (the CPU's features detected once with
//! `is_x86_feature_detected!`, the choice capped by [`set_max_isa`], which
//! runs a narrower variant on a wider CPU): AVX-512F (the whole
//! `MR × NR` tile in twelve `zmm` accumulators), AVX with FMA (the tile as
//! two `MR × 16` halves in twelve `ymm` each), else the portable loop over
//! `f32::mul_add` (fused on every target: an instruction where the target
//! has one — aarch64 always —, else the C library's correctly rounded
//! `fmaf`, slow but exact), in the same halves. Every variant gives the
//! same bits.

use std::ffi::c_void;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::pool::Pool;

/// Rows of the micro-kernel's register tile.
pub const MR: usize = 6;
/// Columns of the micro-kernel's register tile: two 16-lane AVX-512
/// vectors. Measured on an AVX-512 Xeon, one thread, the tile
/// alone in a loop (`kc` 128, intrinsics in C): about 68 GFLOP/s for
/// `6 × 32` with AVX-512 against 33 for the `6 × 16` AVX tile and 36–46 for
/// a `6 × 16` AVX-512 one (six accumulators, too few to hide the adds'
/// latency); `bench_cpu --only gemm` at 1024³ went from 42.5 to 30.1 ms.
pub const NR: usize = 32;

/// The columns one half-tile of the AVX and portable variants covers.
const HALF: usize = 16;

/// The C declaration of [`Rt`], printed into every generated C unit.
pub const C_DECL: &str = "/* The runtime of tgc-runtime's cpu_rt: its thread pool and GEMM micro-kernel. */
typedef struct tgc_rt {
    /* Runs body(ctx, t) for t in [0, n) on the pool; returns when all are done. */
    void (*parallel_for)(const struct tgc_rt* rt, int64_t n, void (*body)(void* ctx, int64_t t), void* ctx);
    /* c[i*ldc + j] (+)= sum_p a[p*MR + i] * b[p*NR + j], i < MR, j < NR (or fewer: at least cols); c starts at 0 when accumulate == 0. */
    void (*ukernel)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t cols, int32_t accumulate);
    /* The same with a read in place: a[min(i, rows - 1)*lda + p] for a[p*MR + i], 1 <= rows <= MR. */
    void (*ukernel_direct)(int64_t kc, const float* a, int64_t lda, int64_t rows, const float* b, float* c, int64_t ldc, int64_t cols, int32_t accumulate);
    /* Threads parallel_for may use (>= 1). */
    int64_t threads;
    /* Points ptrs[i] at n uninitialised scratch buffers of bytes[i] bytes (64-byte aligned) on the calling thread's stack; returns the handle for scratch_release, 0 when they cannot be had. */
    int64_t (*scratch_acquire)(const struct tgc_rt* rt, int64_t n, const int64_t* bytes, void** ptrs);
    /* Gives back the buffers of scratch_acquire's handle (and of any acquired after it) on the same thread. */
    void (*scratch_release)(const struct tgc_rt* rt, int64_t handle);
} tgc_rt;
";

/// A task body as generated C passes it: `body(ctx, t)`.
pub type CTask = unsafe extern "C" fn(ctx: *mut c_void, t: i64);

/// The runtime table generated C receives (layout: [`C_DECL`]).
#[repr(C)]
pub struct Rt {
    /// [`Rt::parallel_for`] for C callers.
    pub parallel_for: unsafe extern "C" fn(rt: *const Rt, n: i64, body: CTask, ctx: *mut c_void),
    /// [`ukernel`] for C callers.
    pub ukernel:
        unsafe extern "C" fn(kc: i64, a: *const f32, b: *const f32, c: *mut f32, ldc: i64, cols: i64, accumulate: i32),
    /// [`ukernel_direct`] for C callers.
    pub ukernel_direct: unsafe extern "C" fn(
        kc: i64,
        a: *const f32,
        lda: i64,
        rows: i64,
        b: *const f32,
        c: *mut f32,
        ldc: i64,
        cols: i64,
        accumulate: i32,
    ),
    /// The threads [`Rt::parallel_for`] may use (≥ 1).
    pub threads: i64,
    /// [`crate::scratch::acquire`] for C callers: `(rt, n, bytes, ptrs)`,
    /// the handle or 0.
    pub scratch_acquire: unsafe extern "C" fn(rt: *const Rt, n: i64, bytes: *const i64, ptrs: *mut *mut c_void) -> i64,
    /// [`crate::scratch::release`] for C callers.
    pub scratch_release: unsafe extern "C" fn(rt: *const Rt, handle: i64),
}

static THREADS: AtomicUsize = AtomicUsize::new(0);

/// Sets the number of threads generated kernels use from now on (`n ≥ 1`;
/// 0 means the default: `$TGC_NUM_THREADS` when it is a positive integer,
/// else the available cores). The pool is made once; a count above its
/// size queues tasks on it, it does not grow it.
pub fn set_threads(n: usize) {
    THREADS.store(n, Ordering::Relaxed);
}

/// The number of threads generated kernels use: [`set_threads`]'s value,
/// else `$TGC_NUM_THREADS`, else the available cores.
pub fn threads() -> usize {
    match THREADS.load(Ordering::Relaxed) {
        0 => default_threads(),
        n => n,
    }
}

fn default_threads() -> usize {
    static DEFAULT: OnceLock<usize> = OnceLock::new();
    *DEFAULT.get_or_init(|| {
        std::env::var("TGC_NUM_THREADS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n >= 1)
            .unwrap_or_else(cores)
    })
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The pool: one worker per core but one (the caller of `parallel_for`
/// works too), at least one. `None` when the system refuses threads: then
/// every task runs on the caller's thread.
fn pool() -> Option<&'static Pool> {
    static POOL: OnceLock<Option<&'static Pool>> = OnceLock::new();
    *POOL.get_or_init(|| Pool::start(cores().saturating_sub(1).max(1), "tgc-cpu"))
}

impl Rt {
    /// The table for the current thread count ([`threads`]).
    pub fn current() -> Rt {
        Rt {
            parallel_for: c_parallel_for,
            ukernel: c_ukernel,
            ukernel_direct: c_ukernel_direct,
            threads: threads() as i64,
            scratch_acquire: c_scratch_acquire,
            scratch_release: c_scratch_release,
        }
    }

    /// Runs `body(t)` for every `t` in `0..n` on at most `self.threads`
    /// threads (the caller's included) and returns when all are done.
    pub fn parallel_for(&self, n: i64, body: &(dyn Fn(i64) + Sync)) {
        let workers = (self.threads.max(1)).min(n.max(0)) as usize;
        let pool = if workers > 1 { pool() } else { None };
        let Some(pool) = pool else {
            (0..n).for_each(body);
            return;
        };
        let next = AtomicI64::new(0);
        pool.run(workers - 1, &|| loop {
            let t = next.fetch_add(1, Ordering::Relaxed);
            if t >= n {
                break;
            }
            body(t);
        });
    }

    /// [`Rt::parallel_for`] over the `chunk`-element pieces of `buf`: task
    /// `t` gets `buf[t·chunk .. (t+1)·chunk]` (the last piece may be
    /// shorter), mutably and alone, so safe code (the Rust printer's
    /// packed kernels) can fill disjoint parts of one buffer on the pool.
    /// Nothing runs for an empty `buf` or a `chunk` of 0.
    pub fn parallel_chunks(&self, buf: &mut [f32], chunk: usize, body: &(dyn Fn(i64, &mut [f32]) + Sync)) {
        if buf.is_empty() || chunk == 0 {
            return;
        }
        let (len, base) = (buf.len(), SendPtr(buf.as_mut_ptr().cast()));
        self.parallel_for(len.div_ceil(chunk) as i64, &|t| {
            let base = &base;
            let at = t as usize * chunk;
            // SAFETY: `parallel_for` gives each `t` to one call, so the
            // pieces `at..at + n` are disjoint, in bounds of `buf`, which
            // is borrowed mutably for the whole call.
            let piece = unsafe { std::slice::from_raw_parts_mut(base.0.cast::<f32>().add(at), chunk.min(len - at)) };
            body(t, piece);
        });
    }
}

/// How a packed contraction's output is cut into tasks (the rule the C
/// printer prints into its kernels, `tgc_core::emit::c`): each task is a
/// batch point × `mpart` rows × `nc` columns, starting from all `m` rows
/// (rounded up to [`MR`]) and `min(n, nc_max)` columns (rounded up to
/// [`NR`]); while there are fewer tasks than `threads`, one side is halved
/// first, then the other, down to one micro-tile; then the parts are
/// evened out. Every task packs the whole of its other side's panel, so
/// the side halved first is the one whose split packs less twice: the
/// rows (each task packing all of `b`) when `m > n`, the columns
/// otherwise — and always the columns when `a` is read in place
/// (`a_in_place`, nothing of it packed): two threads split a convolution's
/// pixels, each packing half its im2col, instead of its channels, each
/// packing all of it (the conv of `bench_cpu` at 256 channels, 14×14, ran
/// no faster on two threads than on one). Returns `(mpart, nc)`, multiples
/// of `MR` and `NR`; `m`, `n`, `batch` ≥ 1. `threads` is the most threads
/// to feed: callers pass [`split_threads`]'s.
pub fn packed_tasks(m: i64, n: i64, batch: i64, nc_max: i64, threads: i64, a_in_place: bool) -> (i64, i64) {
    let (mr, nr) = (MR as i64, NR as i64);
    let up = |x: i64, q: i64| (x + q - 1) / q * q;
    let (mut mpart, mut nc) = (up(m, mr), up(n, nr).min(nc_max));
    for side in 0..2 {
        let rows = (side == 0) == (!a_in_place && m > n);
        while batch * ((m + mpart - 1) / mpart) * ((n + nc - 1) / nc) < threads
            && (if rows { mpart > mr } else { nc > nr })
        {
            if rows {
                mpart = up(mpart / 2, mr);
            } else {
                nc = up(nc / 2, nr);
            }
        }
    }
    let (mparts, nparts) = ((m + mpart - 1) / mpart, (n + nc - 1) / nc);
    (up((m + mparts - 1) / mparts, mr), up((n + nparts - 1) / nparts, nr))
}

/// The row stride, in floats, of a packed task's sums buffer whose rows
/// hold `np` columns (a multiple of [`NR`]): `np` when it is an odd number
/// of `NR`-column groups, else `np + NR`. The rule the C printer prints
/// too. An odd number of 128-byte groups puts the [`MR`] rows of a
/// micro-tile (two 64-byte lines each) in distinct sets of a 64-set L1
/// cache: with `np` = 1024 every row of a tile fell in the same two sets,
/// 4 KiB apart, and the AVX2 kernel ran 5–10% slower on its tiles (a
/// micro-kernel loop on an AVX2 EPYC).
pub fn sums_stride(np: i64) -> i64 {
    let nr = NR as i64;
    if np / nr % 2 == 1 {
        np
    } else {
        np + nr
    }
}

/// The least work, in multiply-adds, worth a task of its own on another
/// thread: 2^16, about 4 µs of the micro-kernel at 32 GFLOP/s — the order
/// of waking a parked worker (`crate::pool`). A contraction with less work
/// per thread runs on fewer threads, one for less than twice this.
pub const MIN_TASK_MACS: f64 = 65536.0;

/// The threads a packed contraction of `macs` multiply-adds (`batch · M ·
/// N · K`) is split across: at most `threads`, each with at least
/// [`MIN_TASK_MACS`], at least one. The C printer prints the same rule.
pub fn split_threads(macs: f64, threads: i64) -> i64 {
    ((macs / MIN_TASK_MACS) as i64).clamp(1, threads.max(1))
}

/// A raw context pointer that may cross threads: the generated task body
/// only reads it and writes disjoint parts of the buffers it points to.
struct SendPtr(*mut c_void);
// SAFETY: see the type's doc; `c_parallel_for`'s caller promises it.
unsafe impl Sync for SendPtr {}

/// [`Rt::parallel_for`] with a C body.
///
/// # Safety
/// `rt` points to a live [`Rt`]; `body(ctx, t)` may be called from several
/// threads at once for distinct `t`, which the generated code allows.
unsafe extern "C" fn c_parallel_for(rt: *const Rt, n: i64, body: CTask, ctx: *mut c_void) {
    let ctx = SendPtr(ctx);
    // SAFETY: the caller passes the table it was given.
    let rt = unsafe { &*rt };
    rt.parallel_for(n, &|t| {
        let ctx = &ctx;
        // SAFETY: as the function's contract says.
        unsafe { body(ctx.0, t) }
    });
}

/// [`crate::scratch::acquire`] for C callers.
///
/// # Safety
/// `bytes` and `ptrs` point to `n` elements each (nothing is read for
/// `n ≤ 0`).
unsafe extern "C" fn c_scratch_acquire(_rt: *const Rt, n: i64, bytes: *const i64, ptrs: *mut *mut c_void) -> i64 {
    let n = usize::try_from(n).unwrap_or(0);
    if n == 0 || bytes.is_null() || ptrs.is_null() {
        return 0;
    }
    // SAFETY: the caller passes `n` sizes and room for `n` pointers.
    let (bytes, ptrs) =
        unsafe { (std::slice::from_raw_parts(bytes, n), std::slice::from_raw_parts_mut(ptrs.cast(), n)) };
    crate::scratch::acquire(bytes, ptrs).map_or(0, |h| h as i64)
}

/// [`crate::scratch::release`] for C callers.
extern "C" fn c_scratch_release(_rt: *const Rt, handle: i64) {
    if let Ok(h) = usize::try_from(handle) {
        crate::scratch::release(h);
    }
}

/// [`ukernel`] for C callers.
///
/// # Safety
/// As [`ukernel_raw`].
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn c_ukernel(
    kc: i64,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: i64,
    cols: i64,
    accumulate: i32,
) {
    // SAFETY: forwarded contract.
    unsafe {
        ukernel_raw(kc.max(0) as usize, a, b, c, ldc as usize, cols.clamp(1, NR as i64) as usize, accumulate != 0)
    }
}

/// [`ukernel_direct`] for C callers.
///
/// # Safety
/// As [`ukernel_direct_raw`].
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn c_ukernel_direct(
    kc: i64,
    a: *const f32,
    lda: i64,
    rows: i64,
    b: *const f32,
    c: *mut f32,
    ldc: i64,
    cols: i64,
    accumulate: i32,
) {
    let rows = rows.clamp(1, MR as i64) as usize;
    let cols = cols.clamp(1, NR as i64) as usize;
    // SAFETY: forwarded contract.
    unsafe {
        ukernel_direct_raw(kc.max(0) as usize, a, lda.max(0) as usize, rows, b, c, ldc as usize, cols, accumulate != 0)
    }
}

/// `2^x` within 2 ulp of the correctly rounded value, in operations a
/// vectoriser packs (no call, no branch): the generated kernels' `EXP2`.
/// The C printer's `tgc_exp2f` is the same operations in the same order, so
/// the C and Rust paths give the same bits.
///
/// `2^x = 2^n · 2^r` with `n` = `x` rounded to the nearest integer and `r =
/// x - n ∈ [-1/2, 1/2]`, after `|x|` is clamped to 160 (which changes no
/// finite result; a minimum whose NaN operand wins, so NaN runs through
/// the arithmetic and comes out NaN without a select). The rounding adds
/// and subtracts `1.5·2^23`, whose sum also holds `n` in its low bits (no
/// float-to-int conversion, undefined for NaN in C). `2^r` is the minimax
/// polynomial of degree 6 for the relative error on `[-1/2, 1/2]` (Remez
/// exchange; `1.9·10⁻⁹` with exact coefficients) in fused Horner steps
/// (`f32::mul_add`, one rounding each: within 1 ulp of glibc's `exp2f` for
/// every f32, checked exhaustively), and `2^n` two
/// exponent-field scalings, so a result below `2^-126` rounds once into
/// the subnormals.
///
/// Inlined into its caller, with the caller's instruction set: a fused
/// multiply-add is one instruction where the caller is compiled with FMA
/// (the generated kernels run inside [`with_fma`]; any aarch64 code),
/// else the C library's correctly rounded `fmaf`, much slower but the
/// same bits.
#[inline(always)]
pub fn exp2(x: f32) -> f32 {
    let a = x.abs();
    let c = (if 160.0 < a { 160.0 } else { a }).copysign(x);
    // 1.5·2^23: adding it rounds to an integer, ties to even, kept in the
    // low mantissa bits of `t`.
    let t = c + 12_582_912.0;
    let r = c - (t - 12_582_912.0);
    let mut p = 1.534_581_2e-4_f32;
    for k in [1.339_993_1e-3, 9.618_489e-3, 5.550_328_6e-2, 2.402_264_6e-1, 6.931_472e-1, 1.0] {
        p = p.mul_add(r, k);
    }
    let n = t.to_bits().wrapping_sub(0x4b40_0000) as i32;
    let (n1, n2) = (n >> 1, n.wrapping_sub(n >> 1));
    let s1 = f32::from_bits((n1.wrapping_add(127) as u32) << 23);
    let s2 = f32::from_bits((n2.wrapping_add(127) as u32) << 23);
    (p * s1) * s2
}

/// Runs `f` compiled for x86-64 with AVX2 and FMA when the CPU has both
/// (detected once; then a cached test per call), else as it is — the
/// Rust printer's counterpart of the C kernels' `target_clones`
/// (`tgc_core::emit::c`'s `TGC_CLONES`). The printed Rust kernels run their
/// bodies, and their pool tasks, inside it: `f` and what it inlines (the
/// printed kernel, [`exp2`], `f32::mul_add`) are then compiled as part of
/// one function that has those features, so a fused multiply-add is one
/// instruction and the loops vectorise 8 wide instead of 4. Without it, a
/// build for the default x86-64 target would call the C library's `fmaf`
/// for every step of a fused sum and of [`exp2`]. Same bits either way.
///
/// That relies on `f` being inlined, as a closure called once is; a
/// closure that is not still runs, with the default instruction set.
#[inline]
pub fn with_fma<R, F: FnOnce() -> R>(f: F) -> R {
    #[cfg(all(target_arch = "x86_64", not(all(target_feature = "avx2", target_feature = "fma"))))]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn with_features<R, F: FnOnce() -> R>(f: F) -> R {
            f()
        }
        // SAFETY: the CPU has AVX2 and FMA, the features the function
        // is compiled with.
        return unsafe { with_features(f) };
    }
    f()
}

/// `c[i*ldc + j] = (accumulate ? c[i*ldc + j] : 0) + Σ_p a[p*MR + i]·b[p*NR + j]`
/// for `i < MR`, `j < NR`, `p` from 0 to `kc - 1` in order, each step one
/// fused multiply-add (`acc = fma(a, b, acc)`, one rounding): `a` and `b`
/// are packed panels. Only the
/// columns `j < cols` are needed: a variant may skip whole vectors past
/// them (the AVX-512 one computes 16 columns when `cols ≤ 16`), leaving
/// those columns of `c` as they were.
///
/// Panics unless `1 ≤ cols ≤ NR`, or when a slice is shorter than that
/// needs (`a`: `kc·MR`, `b`: `kc·NR`, `c`: `(MR-1)·ldc + NR`, `ldc ≥ NR`).
pub fn ukernel(kc: usize, a: &[f32], b: &[f32], c: &mut [f32], ldc: usize, cols: usize, accumulate: bool) {
    assert!(a.len() >= kc * MR && b.len() >= kc * NR && ldc >= NR && c.len() >= (MR - 1) * ldc + NR);
    assert!((1..=NR).contains(&cols));
    // SAFETY: the lengths were checked above.
    unsafe { ukernel_raw(kc, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), ldc, cols, accumulate) }
}

/// [`ukernel`] with the `a` factor read in place instead of from a packed
/// panel: row `i` of the tile is `a[r·lda .. r·lda + kc]` with `r = min(i,
/// rows - 1)` (rows past `rows` repeat the last one; the caller ignores
/// them). The packed template uses it for a factor that already has unit
/// stride along `K` (`tgc_core::cpu::packed::PackOrder::Direct`), so its
/// panel need not be copied. Same bits as [`ukernel`] on the packed panel.
///
/// Panics unless `1 ≤ rows ≤ MR`, `a` holds `(rows-1)·lda + kc` floats,
/// and `b`, `c`, `ldc`, `cols` are as for [`ukernel`].
#[allow(clippy::too_many_arguments)]
pub fn ukernel_direct(
    kc: usize,
    a: &[f32],
    lda: usize,
    rows: usize,
    b: &[f32],
    c: &mut [f32],
    ldc: usize,
    cols: usize,
    accumulate: bool,
) {
    assert!((1..=MR).contains(&rows) && a.len() >= (rows - 1) * lda + kc);
    assert!(b.len() >= kc * NR && ldc >= NR && c.len() >= (MR - 1) * ldc + NR && (1..=NR).contains(&cols));
    // SAFETY: the lengths were checked above.
    unsafe { ukernel_direct_raw(kc, a.as_ptr(), lda, rows, b.as_ptr(), c.as_mut_ptr(), ldc, cols, accumulate) }
}

/// [`ukernel`] on raw pointers.
///
/// # Safety
/// `a` holds `kc·MR` floats, `b` `kc·NR`, `c` rows `i < MR` of `NR` floats
/// at `c + i·ldc`, none of `c`'s overlapping `a` or `b`; `1 ≤ cols ≤ NR`.
pub unsafe fn ukernel_raw(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    cols: usize,
    accumulate: bool,
) {
    let rows = std::array::from_fn(|i| a.wrapping_add(i));
    let tile = Tile { kc, rows, step: MR, b, c, ldc, halves: cols.div_ceil(HALF), accumulate };
    // SAFETY: forwarded contract; row i's step p is a[p·MR + i].
    unsafe { best()(&tile) }
}

/// [`ukernel_direct`] on raw pointers.
///
/// # Safety
/// `1 ≤ rows ≤ MR`; `a` holds `(rows-1)·lda + kc` floats; `b`, `c` as for
/// [`ukernel_raw`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn ukernel_direct_raw(
    kc: usize,
    a: *const f32,
    lda: usize,
    rows: usize,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    cols: usize,
    accumulate: bool,
) {
    let rows = std::array::from_fn(|i| a.wrapping_add(i.min(rows - 1) * lda));
    let tile = Tile { kc, rows, step: 1, b, c, ldc, halves: cols.div_ceil(HALF), accumulate };
    // SAFETY: forwarded contract; row i's step p is rows[i][p].
    unsafe { best()(&tile) }
}

/// One call of a micro-kernel variant.
#[derive(Clone, Copy)]
struct Tile {
    kc: usize,
    /// Row `i`'s `a` value of step `p` is at `rows[i] + p·step`.
    rows: [*const f32; MR],
    step: usize,
    /// The packed panel, `kc·NR` floats.
    b: *const f32,
    /// Row `i` of the tile at `c + i·ldc`.
    c: *mut f32,
    ldc: usize,
    /// The tile's first `halves` (1 or 2) halves of `HALF` columns are
    /// computed, the other columns of `c` untouched.
    halves: usize,
    accumulate: bool,
}

/// A micro-kernel variant.
type Kernel = unsafe fn(&Tile);

/// An instruction set that the CPU code dispatches on, narrowest first:
/// the micro-kernel's variants ([`ukernel`]; capped by [`set_max_isa`])
/// and the generated C's copies and clones (`tgc_core::emit::c`; capped
/// when the library is compiled, by the macro `TGC_MAX_ISA` set to an
/// [`Isa::level`]). Every one gives the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// The target's baseline: the portable loops.
    Portable,
    /// AVX2 with FMA (x86-64-v3): vectors of 8 floats.
    Avx2,
    /// AVX-512F: vectors of 16 floats.
    Avx512,
}

impl Isa {
    /// Every instruction set, narrowest first: the list the dispatchers
    /// choose from.
    pub const ALL: [Isa; 3] = [Isa::Portable, Isa::Avx2, Isa::Avx512];

    /// Its name: `portable`, `avx2`, `avx512`.
    pub const fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Its position in [`Isa::ALL`]: the value of `TGC_MAX_ISA` that caps
    /// generated C at it.
    pub const fn level(self) -> usize {
        self as usize
    }

    /// The instruction set named `name` ([`Isa::name`]), if any.
    pub fn by_name(name: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|i| i.name() == name)
    }

    /// Whether this CPU runs it: `Portable` everywhere; on x86-64 `Avx2`
    /// with FMA (what the micro-kernel's AVX variant needs; the generated
    /// C's AVX2 copies test for x86-64-v3 themselves) and `Avx512` with
    /// AVX-512F; neither elsewhere.
    pub fn available(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::arch::is_x86_feature_detected!("fma"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 | Isa::Avx512 => false,
        }
    }
}

/// [`set_max_isa`]'s cap as an [`Isa::level`]; `usize::MAX`: none.
static MAX_ISA: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Caps the micro-kernel's variant at `isa` from now on, for the whole
/// process (`None` lifts the cap): a way to run the narrower paths on a
/// CPU that has wider ones, with the same bits. Generated C's own copies
/// are capped when it is compiled (`-DTGC_MAX_ISA=`[`Isa::level`]).
///
/// Errors: [`Error::Kernel`](crate::Error::Kernel) naming `isa` when this
/// CPU cannot run it ([`Isa::available`]); the cap is then unchanged.
pub fn set_max_isa(isa: Option<Isa>) -> crate::Result<()> {
    if let Some(isa) = isa.filter(|i| !i.available()) {
        return Err(crate::Error::Kernel(format!(
            "cannot run the CPU kernels as {}: this CPU does not have it (it has {})",
            isa.name(),
            Isa::ALL.iter().filter(|i| i.available()).map(|i| i.name()).collect::<Vec<_>>().join(", ")
        )));
    }
    MAX_ISA.store(isa.map_or(usize::MAX, Isa::level), Ordering::Relaxed);
    Ok(())
}

/// The instruction set of the micro-kernel's variant now: the widest this
/// CPU has (detected once), at most [`set_max_isa`]'s.
pub fn ukernel_isa() -> Isa {
    static WIDEST: OnceLock<Isa> = OnceLock::new();
    let widest = *WIDEST.get_or_init(|| Isa::ALL.into_iter().rfind(|i| i.available()).unwrap_or(Isa::Portable));
    let cap = MAX_ISA.load(Ordering::Relaxed);
    Isa::ALL.into_iter().rfind(|i| *i <= widest && i.level() <= cap).unwrap_or(Isa::Portable)
}

/// The variant of instruction set `isa` (the dispatcher's table).
fn variant(isa: Isa) -> Kernel {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => ukernel_avx512,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => ukernel_fma,
        _ => ukernel_portable,
    }
}

/// The variant to run: [`ukernel_isa`]'s.
fn best() -> Kernel {
    variant(ukernel_isa())
}

/// The portable micro-kernel: columns `j0..j0 + HALF` for both halves, the
/// accumulators in an array, each step `f32::mul_add` (NEON's `fmla` on
/// aarch64, which the compiler vectorises; a call of the C library's
/// `fmaf` on an x86-64 without FMA).
///
/// # Safety
/// Row `i` of `a` holds `kc` values at `rows[i] + p·step`; `b` and `c` as
/// for [`ukernel_raw`].
unsafe fn ukernel_portable(t: &Tile) {
    let Tile { kc, rows, step, b, c, ldc, halves, accumulate } = *t;
    for j0 in (0..halves * HALF).step_by(HALF) {
        let mut acc = [[0.0f32; HALF]; MR];
        if accumulate {
            for (i, row) in acc.iter_mut().enumerate() {
                // SAFETY: row i of c holds NR floats.
                row.copy_from_slice(unsafe { std::slice::from_raw_parts(c.add(i * ldc + j0), HALF) });
            }
        }
        for p in 0..kc {
            // SAFETY: b holds kc·NR floats; row i of a holds kc values.
            let bp = unsafe { &*(b.add(p * NR + j0) as *const [f32; HALF]) };
            for i in 0..MR {
                let ai = unsafe { *rows[i].add(p * step) };
                for j in 0..HALF {
                    acc[i][j] = ai.mul_add(bp[j], acc[i][j]);
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            // SAFETY: row i of c holds NR floats and overlaps neither panel.
            unsafe { std::slice::from_raw_parts_mut(c.add(i * ldc + j0), HALF) }.copy_from_slice(row);
        }
    }
}

/// The AVX micro-kernel with FMA, one `MR × 16` half of the tile at a time: 12
/// accumulators of 8 lanes (6 rows × 2 vectors), one broadcast of `a` and
/// two vectors of `b` per step — 15 of the 16 `ymm` registers.
///
/// # Safety
/// As [`ukernel_portable`], on a CPU with AVX and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,fma")]
unsafe fn ukernel_fma(t: &Tile) {
    let Tile { kc, rows, step, b, c, ldc, halves, accumulate } = *t;
    use std::arch::x86_64::*;
    // SAFETY (whole body): the pointer ranges of the function's contract.
    unsafe {
        prefetch_next_tile(c, ldc);
        for j0 in (0..halves * HALF).step_by(HALF) {
            let mut acc = [[_mm256_setzero_ps(); 2]; MR];
            if accumulate {
                for (i, row) in acc.iter_mut().enumerate() {
                    row[0] = _mm256_loadu_ps(c.add(i * ldc + j0));
                    row[1] = _mm256_loadu_ps(c.add(i * ldc + j0 + 8));
                }
            }
            let mut a = rows;
            for p in 0..kc {
                let b0 = _mm256_loadu_ps(b.add(p * NR + j0));
                let b1 = _mm256_loadu_ps(b.add(p * NR + j0 + 8));
                for (row, ai) in acc.iter_mut().zip(a.iter_mut()) {
                    let av = _mm256_broadcast_ss(&**ai);
                    *ai = ai.wrapping_add(step);
                    row[0] = _mm256_fmadd_ps(av, b0, row[0]);
                    row[1] = _mm256_fmadd_ps(av, b1, row[1]);
                }
            }
            for (i, row) in acc.iter().enumerate() {
                _mm256_storeu_ps(c.add(i * ldc + j0), row[0]);
                _mm256_storeu_ps(c.add(i * ldc + j0 + 8), row[1]);
            }
        }
    }
}

/// Asks the cache for the `MR × NR` tile of sums below the one at `c` (rows
/// `MR..2·MR` at `c + i·ldc`), the caller's next: the packed template's
/// `ir` loop walks down the rows of one `NR`-column sliver. The sums of a
/// whole task outgrow L2 (4 MiB for a 1024 × 1024 task), so without it
/// each call waited on its tile's first loads: about a quarter of the
/// AVX2 kernel's samples in `perf record` of a 1024³ GEMM on an AVX2 EPYC.
/// `c` is not dereferenced: a prefetch never faults, whatever
/// the address.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_next_tile(c: *const f32, ldc: usize) {
    use std::arch::x86_64::*;
    for i in 0..MR {
        let next = c.wrapping_add((MR + i) * ldc) as *const i8;
        // SAFETY: a prefetch reads nothing the program sees (SSE, which
        // every x86-64 has).
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(next);
            _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(64));
        }
    }
}

/// The AVX-512 micro-kernel: [`ukernel_avx512_v`] over the whole tile, or
/// over its first 16 columns when only those are needed.
///
/// # Safety
/// As [`ukernel_portable`], on a CPU with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn ukernel_avx512(t: &Tile) {
    // SAFETY: forwarded contract.
    unsafe {
        if t.halves == 1 {
            ukernel_avx512_v::<1>(t)
        } else {
            ukernel_avx512_v::<2>(t)
        }
    }
}

/// `MR × 16·V` columns with AVX-512: `MR·V` accumulators of 16 lanes, one
/// broadcast of `a` and `V` vectors of `b` per step.
///
/// # Safety
/// As [`ukernel_portable`], on a CPU with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn ukernel_avx512_v<const V: usize>(t: &Tile) {
    let Tile { kc, rows, step, b, c, ldc, accumulate, .. } = *t;
    use std::arch::x86_64::*;
    // SAFETY (whole body): the pointer ranges of the function's contract.
    unsafe {
        prefetch_next_tile(c, ldc);
        let mut acc = [[_mm512_setzero_ps(); V]; MR];
        if accumulate {
            for (i, row) in acc.iter_mut().enumerate() {
                for (v, x) in row.iter_mut().enumerate() {
                    *x = _mm512_loadu_ps(c.add(i * ldc + 16 * v));
                }
            }
        }
        let mut a = rows;
        for p in 0..kc {
            let mut bv = [_mm512_setzero_ps(); V];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = _mm512_loadu_ps(b.add(p * NR + 16 * v));
            }
            for (row, ai) in acc.iter_mut().zip(a.iter_mut()) {
                let av = _mm512_set1_ps(**ai);
                *ai = ai.wrapping_add(step);
                for (x, bx) in row.iter_mut().zip(&bv) {
                    *x = _mm512_fmadd_ps(av, *bx, *x);
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            for (v, x) in row.iter().enumerate() {
                _mm512_storeu_ps(c.add(i * ldc + 16 * v), *x);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `exp2` against libm's `exp2f` (correctly rounded on glibc) on a
    /// sweep of every exponent and sign, and on the edges: within 2 ulp;
    /// NaN stays NaN, overflow gives +inf, underflow 0, subnormal results
    /// survive.
    #[test]
    fn exp2_is_within_two_ulp_of_libm() {
        let ulps = |a: f32, b: f32| (a.to_bits() as i64 - b.to_bits() as i64).abs();
        let mut worst = 0;
        for bits in (0..=u32::MAX).step_by(4099) {
            let x = f32::from_bits(bits);
            let (got, want) = (exp2(x), x.exp2());
            if x.is_nan() {
                assert!(got.is_nan(), "{x}");
                continue;
            }
            worst = worst.max(ulps(got, want));
            assert!(ulps(got, want) <= 2, "exp2({x:e}) = {got:e}, libm {want:e}");
        }
        assert!(worst >= 1, "the sweep reached inputs where the polynomial rounds differently");
        for (x, want) in [(0.0, 1.0), (1.0, 2.0), (-1.0, 0.5), (10.0, 1024.0), (f32::INFINITY, f32::INFINITY)] {
            assert_eq!(exp2(x), want, "{x}");
        }
        assert_eq!(exp2(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp2(128.0), f32::INFINITY);
        assert_eq!(exp2(-150.5), 0.0);
        assert!(exp2(-140.0) > 0.0 && exp2(-140.0) < f32::MIN_POSITIVE);
        assert!(ulps(exp2(-140.3), (-140.3f32).exp2()) <= 2);
        assert!(exp2(f32::NAN).is_nan());
    }

    /// The plain nest `acc = fma(a, b, acc)` in `k` order, the bits the
    /// micro-kernel promises.
    fn naive(kc: usize, a: &[f32], b: &[f32], c0: &[f32], ldc: usize, accumulate: bool) -> Vec<f32> {
        let mut c = c0.to_vec();
        for i in 0..MR {
            for j in 0..NR {
                let mut acc = if accumulate { c[i * ldc + j] } else { 0.0 };
                for p in 0..kc {
                    acc = a[p * MR + i].mul_add(b[p * NR + j], acc);
                }
                c[i * ldc + j] = acc;
            }
        }
        c
    }

    fn data(n: usize, seed: u32) -> Vec<f32> {
        let mut x = seed.wrapping_mul(2654435761).max(1);
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    /// Every variant, packed or in place, over the whole tile or its
    /// first `cols` columns: the plain nest's bits in the columns it
    /// computes (all, or the first 16 when `cols ≤ 16`), the other columns
    /// untouched.
    #[test]
    fn every_variant_gives_the_plain_nests_bits() {
        for (kc, ldc, accumulate) in
            [(0, NR, true), (1, NR, false), (7, NR + 4, true), (300, NR + 17, false), (64, NR, true)]
        {
            for cols in [NR, HALF, 5] {
                let halves = cols.div_ceil(HALF);
                let a = data(kc * MR, 1);
                let b = data(kc * NR, 2);
                let c0 = data((MR - 1) * ldc + NR, 3);
                let mut want = naive(kc, &a, &b, &c0, ldc, accumulate);
                for i in 0..MR {
                    for j in halves * HALF..NR {
                        want[i * ldc + j] = c0[i * ldc + j];
                    }
                }
                let mut got = c0.clone();
                ukernel(kc, &a, &b, &mut got, ldc, cols, accumulate);
                // The same panel read in place: row i of `a` transposed to
                // `a_rows[i·lda ..]`, every row valid.
                let lda = kc + 3;
                let mut a_rows = vec![f32::NAN; MR * lda];
                for p in 0..kc {
                    for i in 0..MR {
                        a_rows[i * lda + p] = a[p * MR + i];
                    }
                }
                let mut direct = c0.clone();
                ukernel_direct(kc, &a_rows, lda, MR, &b, &mut direct, ldc, cols, accumulate);
                let mut variants: Vec<(&str, Kernel)> = vec![("portable", ukernel_portable)];
                #[cfg(target_arch = "x86_64")]
                {
                    if std::arch::is_x86_feature_detected!("fma") {
                        variants.push(("fma", ukernel_fma));
                    }
                    if std::arch::is_x86_feature_detected!("avx512f") {
                        variants.push(("avx512", ukernel_avx512));
                    }
                }
                let mut outs = vec![("dispatched", got), ("direct", direct)];
                let rows = std::array::from_fn(|i| a.as_ptr().wrapping_add(i));
                for (who, k) in variants {
                    let mut v = c0.clone();
                    let (b, c) = (b.as_ptr(), v.as_mut_ptr());
                    let tile = Tile { kc, rows, step: MR, b, c, ldc, halves, accumulate };
                    // SAFETY: the lengths are those `ukernel` checks; the variant's features were detected.
                    unsafe { k(&tile) };
                    outs.push((who, v));
                }
                for (who, v) in &outs {
                    // Columns past NR in each row are not the kernel's: untouched.
                    assert_eq!(
                        v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                        want.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                        "{who} kc={kc} ldc={ldc} cols={cols} accumulate={accumulate}"
                    );
                }
            }
        }
    }

    /// The ISA paths' report (`tests/support/isa_paths.rs`).
    mod isa_report {
        use crate::cpu_rt::Isa;
        include!("../../../tests/support/isa_paths.rs");
    }

    /// Each instruction set of [`Isa::ALL`] this CPU has, forced with
    /// [`set_max_isa`] and reached through the dispatcher as generated C
    /// reaches it (`Rt::current()`'s `ukernel` and `ukernel_direct`), gives
    /// the plain nest's bits, each from its own variant; one the CPU lacks
    /// is refused, naming it, and counted as skipped. Other tests of this
    /// binary may run meanwhile on the forced variant: the same bits.
    #[test]
    fn every_isa_forced_through_the_dispatcher_gives_the_plain_nests_bits() {
        let (kc, ldc) = (53, NR + 3);
        let a = data(kc * MR, 11);
        let b = data(kc * NR, 12);
        let c0 = data((MR - 1) * ldc + NR, 13);
        let want = naive(kc, &a, &b, &c0, ldc, true);
        let mut a_rows = vec![f32::NAN; MR * kc];
        for p in 0..kc {
            for i in 0..MR {
                a_rows[i * kc + p] = a[p * MR + i];
            }
        }
        let (mut ran, mut skipped, mut kernels) = (Vec::new(), Vec::new(), Vec::new());
        for isa in Isa::ALL {
            if !isa.available() {
                let e = set_max_isa(Some(isa)).unwrap_err().to_string();
                assert!(e.contains(&format!("as {}: this CPU does not have it", isa.name())), "{e}");
                skipped.push(isa);
                continue;
            }
            set_max_isa(Some(isa)).unwrap();
            assert_eq!(ukernel_isa(), isa);
            let rt = Rt::current();
            let mut got = c0.clone();
            let mut direct = c0.clone();
            // SAFETY: the lengths are those `ukernel` and `ukernel_direct` check.
            unsafe {
                (rt.ukernel)(kc as i64, a.as_ptr(), b.as_ptr(), got.as_mut_ptr(), ldc as i64, NR as i64, 1);
                let (ap, bp, dp) = (a_rows.as_ptr(), b.as_ptr(), direct.as_mut_ptr());
                (rt.ukernel_direct)(kc as i64, ap, kc as i64, MR as i64, bp, dp, ldc as i64, NR as i64, 1);
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{} through Rt::ukernel", isa.name());
            assert_eq!(bits(&direct), bits(&want), "{} through Rt::ukernel_direct", isa.name());
            kernels.push(variant(isa) as usize);
            ran.push(isa);
        }
        set_max_isa(None).unwrap();
        kernels.dedup();
        assert_eq!(kernels.len(), ran.len(), "each forced ISA runs its own variant");
        isa_report::isa_paths("tgc-runtime micro-kernel", &ran, &skipped);
    }

    /// Fewer valid rows than `MR`: the valid rows are those of the padded
    /// packed panel, and nothing past row `rows - 1` of `a` is read (the
    /// slice ends there, so a read past it would panic or fault).
    #[test]
    fn direct_reads_only_the_valid_rows() {
        let (kc, lda) = (37, 41);
        for rows in 1..=MR {
            let a_rows = data((rows - 1) * lda + kc, 6);
            let mut panel = vec![0.0; kc * MR];
            for p in 0..kc {
                for i in 0..rows {
                    panel[p * MR + i] = a_rows[i * lda + p];
                }
            }
            let b = data(kc * NR, 7);
            let mut got = vec![0.0; MR * NR];
            ukernel_direct(kc, &a_rows, lda, rows, &b, &mut got, NR, NR, false);
            let want = naive(kc, &panel, &b, &vec![0.0; MR * NR], NR, false);
            let bits = |v: &[f32]| v[..rows * NR].iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "rows {rows}");
        }
    }

    #[test]
    fn small_contractions_run_on_fewer_threads() {
        assert_eq!(split_threads(40.0 * 48.0 * 24.0, 8), 1, "46k multiply-adds: one thread");
        assert_eq!(split_threads(3.0 * MIN_TASK_MACS, 8), 3);
        assert_eq!(split_threads(1e12, 8), 8);
        assert_eq!(split_threads(1e12, 0), 1);
    }

    #[test]
    fn parallel_chunks_gives_each_task_its_own_piece() {
        for threads in [1, 2, 3] {
            let rt = Rt { threads, ..Rt::current() };
            let mut buf = vec![0.0f32; 10];
            rt.parallel_chunks(&mut buf, 4, &|t, piece| {
                assert_eq!(piece.len(), if t == 2 { 2 } else { 4 }, "task {t}");
                piece.iter_mut().for_each(|x| *x += t as f32 + 1.0);
            });
            assert_eq!(buf, [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 3.0, 3.0], "threads {threads}");
            rt.parallel_chunks(&mut [], 4, &|_, _| panic!("no task for an empty buffer"));
            rt.parallel_chunks(&mut buf, 0, &|_, _| panic!("no task for empty pieces"));
        }
    }

    /// Every row of a micro-tile of sums, two 64-byte lines each, in its
    /// own pair of sets of a 64-set L1 cache, at every width; the padding
    /// at most one `NR` group.
    #[test]
    fn the_sums_stride_spreads_a_tiles_rows_over_the_l1_sets() {
        for np in (1..=96).map(|g| g * NR as i64) {
            let ldc = sums_stride(np);
            assert!(ldc == np || ldc == np + NR as i64, "np {np}: {ldc}");
            let mut sets: Vec<i64> = (0..MR as i64).flat_map(|i| [0, 1].map(|l| (i * ldc * 4 / 64 + l) % 64)).collect();
            sets.sort_unstable();
            sets.dedup();
            assert_eq!(sets.len(), 2 * MR, "np {np}, stride {ldc}: rows share a set");
        }
    }

    #[test]
    fn packed_tasks_split_the_larger_side_until_every_thread_has_one() {
        // One thread: all rows (rounded up to MR), nc_max columns.
        assert_eq!(packed_tasks(100, 1000, 1, 256, 1, false), (102, 256));
        // Many rows, few columns: rows split first, then evened out.
        let (mpart, nc) = packed_tasks(1000, 64, 1, 256, 4, false);
        assert_eq!(((1000 + mpart - 1) / mpart * ((64 + nc - 1) / nc), mpart % MR as i64, nc), (4, 0, 64));
        // 16 rows, 384 columns, 2 threads: the columns are split.
        let (mpart, nc) = packed_tasks(16, 384, 1, 1536, 2, false);
        assert_eq!((mpart, nc), (18, 192));
        // Batches count: 8 batch points are enough tasks already.
        assert_eq!(packed_tasks(64, 64, 8, 256, 4, false), (66, 64));
        // A single micro-tile cannot be split.
        assert_eq!(packed_tasks(3, 5, 1, 256, 8, false), (6, 32));
    }

    /// With `a` read in place, the columns are split first whatever the
    /// sizes (a 3×3 convolution of 256 channels at 14×14: 256 rows, 196
    /// pixels), then the rows once the columns are one panel wide.
    #[test]
    fn packed_tasks_split_the_columns_first_when_a_is_read_in_place() {
        assert_eq!(packed_tasks(256, 196, 1, 2048, 2, true), (258, 128));
        assert_eq!(packed_tasks(256, 196, 1, 2048, 2, false), (132, 224));
        let (mpart, nc) = packed_tasks(1000, 64, 1, 256, 4, true);
        assert_eq!((nc, (1000 + mpart - 1) / mpart), (32, 2));
    }

    #[test]
    fn parallel_for_runs_every_task_once_on_the_asked_threads() {
        for threads in [1, 2, 3, 8] {
            let rt = Rt { threads, ..Rt::current() };
            for n in [0, 1, 2, 5, 100] {
                let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                rt.parallel_for(n as i64, &|t| {
                    hits[t as usize].fetch_add(1, Ordering::Relaxed);
                });
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1), "threads {threads}, n {n}");
            }
        }
    }

    #[test]
    fn one_thread_runs_on_the_callers_thread() {
        let rt = Rt { threads: 1, ..Rt::current() };
        let me = std::thread::current().id();
        rt.parallel_for(4, &|_| assert_eq!(std::thread::current().id(), me));
    }

    #[test]
    fn the_c_entry_points_forward() {
        extern "C" fn body(ctx: *mut c_void, t: i64) {
            // SAFETY: ctx is the counter array below, t < its length.
            let hits = unsafe { &*(ctx as *const [AtomicUsize; 9]) };
            hits[t as usize].fetch_add(1, Ordering::Relaxed);
        }
        let rt = Rt { threads: 2, ..Rt::current() };
        let hits: [AtomicUsize; 9] = Default::default();
        // SAFETY: rt is live; body only touches its own slot.
        unsafe { (rt.parallel_for)(&rt, 9, body, &hits as *const _ as *mut c_void) };
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        let (a, b) = (data(3 * MR, 4), data(3 * NR, 5));
        let mut c = vec![0.0f32; MR * NR];
        // SAFETY: the panels and the tile have the sizes the contract names.
        unsafe { (rt.ukernel)(3, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), NR as i64, NR as i64, 0) };
        let want = naive(3, &a, &b, &vec![0.0; MR * NR], NR, false);
        assert_eq!(c, want);
        // The panel's rows in place (lda 3): rows 0..MR of a 3-column matrix.
        let a_rows: Vec<f32> = (0..MR).flat_map(|i| (0..3).map(move |p| (i, p))).map(|(i, p)| a[p * MR + i]).collect();
        let mut d = vec![0.0f32; MR * NR];
        // SAFETY: a_rows holds (MR-1)·3 + 3 floats; b and the tile as above.
        unsafe {
            (rt.ukernel_direct)(3, a_rows.as_ptr(), 3, MR as i64, b.as_ptr(), d.as_mut_ptr(), NR as i64, NR as i64, 0)
        };
        assert_eq!(d, want);
    }
}
