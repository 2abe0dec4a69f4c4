//! Measuring candidate plans of one bound graph (`tgc tune`'s work at one
//! ShapeSet point).
//!
//! The candidates of a packed kernel are its analytic block sizes and
//! variants of them ([`space`]): `kc`, `mc` and `nc` each halved or doubled
//! alone, two diagonal moves and, with more than one kernel thread, the
//! analytic sizes on one thread — at most 13, the `000` §6 budget of 10–20
//! measured points. Kernels with the same key (one product over other
//! buffers) are one tuning unit: their times add up.
//!
//! Round 1 compiles one copy of the program per candidate index (copy `r`
//! gives each unit its `r`-th candidate, or its analytic sizes when it has
//! fewer), in as many C libraries as there are cores, compiled side by
//! side; the copies' entry points report each call to a clock
//! ([`crate::emit::c::emit_c_marked`]). Every copy first runs
//! once and its outputs are compared with the interpreter's (`000` §9:
//! `rtol = atol = 1e-3`, widened for 16-bit outputs as `close` says) —
//! or, for a graph too large for the interpreter
//! ([`TuneOptions::interpreter_bytes`]), with the analytic copy's, which the block sizes do not change (each
//! step of a sum is one fused multiply-add in the nest's order, whatever
//! the blocks); a copy that differs is dropped. Then each copy runs
//! `warmup` times, then `repetitions` rounds of one run of every copy in
//! turn (interleaved, so drift in clock speed spreads over all), and a
//! unit's time under a candidate is the sum over its kernels of the median
//! of their calls. Round 2 measures the analytic program against the
//! program of round 1's winners head to head, whole graph included, and a
//! unit keeps its winner only when round 2 confirms it ([`MIN_GAIN`]).

use std::path::PathBuf;
use std::time::Instant;

use crate::cpu::packed::{self, Blocks, MR, NR};
use crate::cpu::Program;
use crate::pipeline::{self, RunError};
use crate::tiny::Graph;
use crate::{diag, emit};
use tgc_runtime::HostTensor;

use super::{key_inputs, tunable, KeyInputs, Toolchain};

/// How much faster than the analytic sizes round 2 must find a winner for
/// it to be kept: 2%. Round 2 interleaves its two programs, so slow drift
/// hits both alike, but single medians still move: on the two-core EPYC
/// this was built on, the analytic 128×3072×768 GEMM measured 6.68 ms in
/// round 1 and 6.87 ms in round 2, and a winner 5% ahead in round 1 was
/// 0.3% ahead in round 2. Below the margin a record keeps the analytic
/// sizes rather than flip on noise.
pub const MIN_GAIN: f64 = 0.02;

/// How a point is measured.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// Untimed runs of each candidate before the timed ones.
    pub warmup: usize,
    /// Timed runs of each candidate (≥ 1); the median is kept.
    pub repetitions: usize,
    /// Where the measured libraries are compiled.
    pub work_dir: PathBuf,
    /// The most bytes the interpreter may hold for the reference run
    /// ([`pipeline::check_run_bytes`]); past it, the candidates are checked
    /// against the analytic program's outputs instead.
    pub interpreter_bytes: u64,
    /// Whether the program tuned is the fused one ([`crate::cpu::lower`]:
    /// Poly Core's compute-at fusions, with feature `poly`) or the
    /// grouping's alone (what a build without feature `poly` lowers, such
    /// as the build helper's; [`crate::cpu::Options::fuse`]).
    pub fuse: bool,
}

/// What [`tune_point`] is doing, for a progress bar: `done` of `total`
/// steps of the current stage.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub stage: &'static str,
    pub done: usize,
    pub total: usize,
}

/// One candidate's time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    pub blocks: Blocks,
    /// Round 1's median, summed over the unit's kernels, in nanoseconds;
    /// `None` when the candidate's results differed from the interpreter.
    pub median_ns: Option<u64>,
}

/// One tuning unit (the kernels of one key) at one point.
#[derive(Clone, Debug)]
pub struct Tuned {
    pub inputs: KeyInputs,
    pub key: String,
    /// The kernels' names (`k5`).
    pub kernels: Vec<String>,
    /// The analytic model's sizes as the problem bounds them: the first
    /// candidate.
    pub analytic: Blocks,
    pub candidates: Vec<Measured>,
    /// The chosen sizes: round 1's winner when round 2 found it at least
    /// [`MIN_GAIN`] faster, else the analytic ones.
    pub best: Blocks,
    /// Round 2's medians (summed over the kernels): analytic, then round 1's
    /// winner, in nanoseconds.
    pub confirm_ns: (u64, u64),
    /// Floating-point operations of one run of the unit's kernels.
    pub flops: f64,
    /// Bytes the unit's kernels read and write (each buffer once).
    pub bytes: f64,
}

impl Tuned {
    /// Round 1's medians of the analytic sizes and of the chosen ones, in
    /// nanoseconds (`None` for sizes whose results differed): the numbers
    /// the console line, the report's CSV rows and its picture all show.
    pub fn round1_ns(&self) -> (Option<u64>, Option<u64>) {
        let of = |b: Blocks| self.candidates.iter().find(|c| c.blocks == b).and_then(|c| c.median_ns);
        (of(self.analytic), of(self.best))
    }
}

/// What [`tune_point`] measured.
#[derive(Clone, Debug)]
pub struct PointResult {
    pub units: Vec<Tuned>,
    /// Round 2's whole-graph medians: the analytic program, then the
    /// program of round 1's winners, in nanoseconds (0, 0 with no unit).
    pub graph_ns: (u64, u64),
}

/// Tunes the packed kernels of the bound graph `g` as lowered with
/// `opts.fuse` (see the module doc).
///
/// Errors: those of [`crate::cpu::lower`], [`pipeline::sample_inputs`] and
/// [`pipeline::run_interp`]; the C compiler's or the kernels' failures;
/// `Internal` when the analytic program itself differs from the
/// interpreter.
pub fn tune_point(
    g: &Graph,
    tc: &Toolchain,
    opts: &TuneOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<PointResult, RunError> {
    let p = lowered(g, opts.fuse).map_err(RunError::Diag)?;
    let calls = p.calls();
    let call_of = |k: usize| calls.iter().position(|c| c.contains(&k)).expect("every kernel is in a call");
    // The units: kernels grouped by key, in kernel order.
    let mut units: Vec<Tuned> = Vec::new();
    let mut members: Vec<Vec<usize>> = Vec::new();
    let mut spaces: Vec<Vec<Blocks>> = Vec::new();
    for (i, k) in tunable(&p) {
        let inputs = key_inputs(&p, k, tc);
        let key = inputs.key();
        let at = match units.iter().position(|u| u.key == key) {
            Some(at) => at,
            None => {
                let space = space(&p, i, tgc_runtime::cpu_rt::threads());
                let analytic = space[0];
                spaces.push(space);
                units.push(Tuned {
                    inputs,
                    key,
                    kernels: Vec::new(),
                    analytic,
                    candidates: Vec::new(),
                    best: analytic,
                    confirm_ns: (0, 0),
                    flops: 0.0,
                    bytes: 0.0,
                });
                members.push(Vec::new());
                units.len() - 1
            }
        };
        let (flops, bytes) = work(&p, i);
        units[at].kernels.push(k.name.clone());
        units[at].flops += flops;
        units[at].bytes += bytes;
        members[at].push(i);
    }
    if units.is_empty() {
        return Ok(PointResult { units, graph_ns: (0, 0) });
    }
    let inputs = pipeline::sample_inputs(g).map_err(RunError::Diag)?;
    let reference = match pipeline::check_run_bytes(g, 0, opts.interpreter_bytes) {
        Ok(_) => Some(pipeline::run_interp(g, &inputs).map_err(RunError::Diag)?),
        Err(_) => None,
    };
    let bench = Bench { g, inputs: &inputs, reference: reference.as_deref(), opts };

    // Round 1.
    let runs = spaces.iter().map(Vec::len).max().unwrap_or(1);
    let programs: Vec<Program> = (0..runs)
        .map(|r| with_blocks(&p, &members, |u| spaces[u].get(r).copied().unwrap_or(units[u].analytic)))
        .collect();
    let round1 = bench.measure(programs, "round 1: candidates", progress)?;
    if round1[0].is_none() {
        return Err(RunError::Diag(diag!(
            Internal,
            "the analytic program of `{}` differs from the interpreter beyond `000` §9's tolerance",
            g.name
        )));
    }
    let mut winners = Vec::new();
    for (u, unit) in units.iter_mut().enumerate() {
        for (r, blocks) in spaces[u].iter().enumerate() {
            let ns = round1[r].as_ref().map(|per_call| members[u].iter().map(|&k| per_call[call_of(k)]).sum());
            unit.candidates.push(Measured { blocks: *blocks, median_ns: ns });
        }
        let best = unit.candidates.iter().filter_map(|m| Some((m.median_ns?, m.blocks))).min_by_key(|&(ns, _)| ns);
        winners.push(best.map_or(unit.analytic, |(_, b)| b));
    }

    // Round 2: analytic against round 1's winners.
    let programs = vec![with_blocks(&p, &members, |u| units[u].analytic), with_blocks(&p, &members, |u| winners[u])];
    let round2 = bench.measure(programs, "round 2: confirm", progress)?;
    let (Some(base), Some(won)) = (&round2[0], &round2[1]) else {
        return Err(RunError::Diag(diag!(Internal, "round 2 of `{}` differs from the interpreter", g.name)));
    };
    for (u, unit) in units.iter_mut().enumerate() {
        let sum = |per_call: &[u64]| members[u].iter().map(|&k| per_call[call_of(k)]).sum::<u64>();
        unit.confirm_ns = (sum(base), sum(won));
        let faster = (unit.confirm_ns.1 as f64) < (1.0 - MIN_GAIN) * unit.confirm_ns.0 as f64;
        unit.best = if faster { winners[u] } else { unit.analytic };
    }
    Ok(PointResult { units, graph_ns: (base.iter().sum(), won.iter().sum()) })
}

/// The graph, its sample inputs and the interpreter's outputs for them.
struct Bench<'a> {
    g: &'a Graph,
    inputs: &'a [HostTensor],
    /// `None`: the graph is too large for the interpreter.
    reference: Option<&'a [HostTensor]>,
    opts: &'a TuneOptions,
}

impl Bench<'_> {
    /// Compiles `programs` (one C library a core) and measures each (see
    /// the module doc): per program, the median nanoseconds of each call of
    /// [`Program::calls`], or `None` when its outputs differ from the
    /// interpreter's.
    fn measure(
        &self,
        programs: Vec<Program>,
        stage: &'static str,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<Option<Vec<u64>>>, RunError> {
        let n = programs.len();
        let reps = self.opts.repetitions.max(1);
        let total = 1 + n * (1 + self.opts.warmup + reps);
        let mut done = 0;
        progress(Progress { stage, done, total });
        let calls = programs[0].calls().len();
        let symbols: Vec<String> = (0..n).map(|r| format!("tgc_tune_{r}")).collect();
        // The copies in as many C units as there are cores (at most one a
        // copy), compiled side by side: the compiler is most of the time.
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let per_unit = n.div_ceil(cores.clamp(1, n));
        let mut sources = Vec::new();
        let mut copies = programs.into_iter().zip(&symbols).peekable();
        while copies.peek().is_some() {
            let unit: Vec<(&Graph, Program, &str)> =
                copies.by_ref().take(per_unit).map(|(p, s)| (self.g, p, s.as_str())).collect();
            sources.push(emit::c::emit_c_marked(&unit).map_err(RunError::Diag)?);
        }
        let work_dir = &self.opts.work_dir;
        let paths: Vec<Result<PathBuf, tgc_runtime::Error>> = std::thread::scope(|scope| {
            let jobs: Vec<_> = sources
                .iter()
                .map(|src| {
                    scope.spawn(move || {
                        let stem = format!("tune_{}", &super::sha256_hex(src.as_bytes())[..16]);
                        tgc_runtime::cpu::compile_shared(src, work_dir, &stem)
                    })
                })
                .collect();
            jobs.into_iter().map(|j| j.join().expect("compiling does not panic")).collect()
        });
        let mut libs = Vec::new();
        for path in paths {
            let path = path.map_err(RunError::Runtime)?;
            // SAFETY: generated from these programs with the marked ABI.
            libs.push(unsafe { tgc_runtime::cpu::CpuLibrary::load(&path) }.map_err(RunError::Runtime)?);
        }
        done += 1;
        progress(Progress { stage, done, total });

        let in_bytes: Vec<&[u8]> = self.inputs.iter().map(|t| t.bytes()).collect();
        let shape = |id| -> Vec<usize> { self.g.shape(id).iter().map(|d| d.as_int().unwrap_or(0) as usize).collect() };
        let mut outputs: Vec<HostTensor> = self
            .g
            .outputs
            .iter()
            .map(|o| HostTensor::zeros(self.g.dtype(o.node), &shape(o.node)))
            .collect::<Result<_, _>>()
            .map_err(RunError::Runtime)?;
        let mut first: Option<Vec<HostTensor>> = None;
        let mut stamps: Vec<(i64, Instant)> = Vec::with_capacity(calls + 1);
        let run = |r: usize, outputs: &mut [HostTensor], stamps: &mut Vec<(i64, Instant)>| {
            stamps.clear();
            let mut out_bytes: Vec<&mut [u8]> = outputs.iter_mut().map(|t| t.bytes_mut()).collect();
            let mut mark = |call: i64| stamps.push((call, Instant::now()));
            let lib = &libs[r / per_unit];
            // SAFETY: the entry point was generated from the bound graph
            // whose outputs' shapes these are; the graph has no symbols.
            unsafe { lib.call_marked(&symbols[r], &in_bytes, &mut out_bytes, &[], &mut mark) }
                .map_err(RunError::Runtime)
        };
        let mut ok = vec![true; n];
        for (r, ok) in ok.iter_mut().enumerate() {
            run(r, &mut outputs, &mut stamps)?;
            // The interpreter's outputs, else the first (analytic) program's.
            let reference = match (self.reference, &first) {
                (Some(r), _) => r,
                (None, Some(f)) => f.as_slice(),
                (None, None) => first.insert(outputs.clone()).as_slice(),
            };
            *ok = outputs.iter().zip(reference).all(|(a, b)| close(a, b));
            for _ in 0..self.opts.warmup {
                run(r, &mut outputs, &mut stamps)?;
            }
            done += 1 + self.opts.warmup;
            progress(Progress { stage, done, total });
        }
        let mut samples: Vec<Vec<Vec<u64>>> = vec![vec![Vec::with_capacity(reps); calls]; n];
        for _ in 0..reps {
            for (r, per_call) in samples.iter_mut().enumerate() {
                run(r, &mut outputs, &mut stamps)?;
                for (c, w) in stamps.windows(2).enumerate() {
                    debug_assert_eq!(w[1].0, c as i64);
                    per_call[c].push(w[1].1.duration_since(w[0].1).as_nanos() as u64);
                }
                done += 1;
                progress(Progress { stage, done, total });
            }
        }
        Ok(samples
            .into_iter()
            .zip(ok)
            .map(|(per_call, ok)| ok.then(|| per_call.into_iter().map(median).collect()))
            .collect())
    }
}

/// `p` with unit `u`'s kernels `members[u]` given `blocks(u)`.
fn with_blocks(p: &Program, members: &[Vec<usize>], blocks: impl Fn(usize) -> Blocks) -> Program {
    let mut q = p.clone();
    for (u, ks) in members.iter().enumerate() {
        for &k in ks {
            q.kernels[k].packed.as_mut().expect("tunable kernels are packed").blocks = blocks(u);
        }
    }
    q
}

/// The candidates of packed kernel `k` of `p` (see the module doc), its
/// analytic sizes first, each clamped to the problem (so that two that act
/// alike are measured once; `mc` ≤ M and `nc` ≤ N rounded up to `MR` and
/// `NR`, `kc` ≤ K); with a pool of `threads` > 1, last, the analytic sizes
/// on the caller's thread alone (`threads: 1`), for a kernel too small to
/// gain from the split.
pub fn space(p: &Program, k: usize, threads: usize) -> Vec<Blocks> {
    let kernel = &p.kernels[k];
    let pk = kernel.packed.as_ref().expect("a packed kernel");
    let c = packed::of(kernel).expect("a packed kernel has its contraction");
    let int = |d: crate::sym::Dim| d.as_int().unwrap_or(i64::MAX).max(1) as usize;
    let (m, n) = (int(packed::extent(kernel, &pk.m)), int(packed::extent(kernel, &pk.n)));
    let kk = c.k_loops.iter().map(|d| int(d.clone())).fold(1usize, usize::saturating_mul);
    let up = |x: usize, q: usize| x.div_ceil(q).max(1) * q;
    let clamp = |mc: usize, nc: usize, kc: usize| Blocks {
        mc: up(mc, MR).min(up(m, MR)),
        nc: up(nc, NR).min(up(n, NR)),
        kc: kc.clamp(1, kk),
        threads: 0,
    };
    // Moves from the analytic sizes as the problem bounds them, so that a
    // small problem still gets smaller blocks to try.
    let b = clamp(pk.blocks.mc, pk.blocks.nc, pk.blocks.kc);
    let moves = [
        (b.mc, b.nc, b.kc),
        (b.mc, b.nc, b.kc / 2),
        (b.mc, b.nc, b.kc * 2),
        (b.mc, b.nc, b.kc * 4),
        (b.mc / 4, b.nc, b.kc),
        (b.mc / 2, b.nc, b.kc),
        (b.mc * 2, b.nc, b.kc),
        (b.mc, b.nc / 4, b.kc),
        (b.mc, b.nc / 2, b.kc),
        (b.mc, b.nc * 2, b.kc),
        (b.mc / 2, b.nc / 2, b.kc * 2),
        (b.mc * 2, b.nc * 2, b.kc / 2),
    ];
    let mut out: Vec<Blocks> = Vec::new();
    for (mc, nc, kc) in moves {
        let cand = clamp(mc, nc, kc);
        if !out.contains(&cand) {
            out.push(cand);
        }
    }
    if threads > 1 {
        out.push(Blocks { threads: 1, ..b });
    }
    out
}

/// FLOPs (a multiply and an add per step of the sum) and bytes (each
/// buffer read or written, once) of one run of kernel `k` of `p`.
fn work(p: &Program, k: usize) -> (f64, f64) {
    let kernel = &p.kernels[k];
    let int = |d: &crate::sym::Dim| d.as_int().unwrap_or(0) as f64;
    let flops = packed::of(kernel).map_or(0.0, |c| {
        let outputs: f64 = kernel.loops.iter().map(int).product();
        let pooled: f64 = if c.packed.pooled {
            kernel.reduce.as_ref().map_or(1.0, |r| r.loops.iter().map(int).product())
        } else {
            1.0
        };
        2.0 * outputs * pooled * c.k_loops.iter().map(int).product::<f64>()
    });
    let mut bufs = kernel.reads();
    bufs.push(kernel.out);
    bufs.sort();
    bufs.dedup();
    let bytes = bufs
        .iter()
        .map(|&b| {
            let buf = p.buffer(b);
            buf.shape.iter().map(int).product::<f64>() * buf.dtype.size_bytes() as f64
        })
        .sum();
    (flops, bytes)
}

/// Whether `a` matches the reference `b` within `000` §9's tolerance
/// (`|a − b| ≤ atol + rtol·|b|`, both 1e-3; NaN only where `b` is NaN),
/// `rtol` widened by two units in the last place of a 16-bit float output:
/// an f16 or bf16 intermediate rounds to the other side of a boundary when
/// two f32 sums differ in their last bits (fused against separate
/// multiply-adds), as the analytic f16 GEMM 128×3072×768 did against the
/// interpreter at 2 of its 393216 outputs (2.5546875 against 2.55078125).
pub fn close(a: &HostTensor, b: &HostTensor) -> bool {
    let ulp = match b.dtype() {
        tgc_runtime::DType::F16 => 2f64.powi(-10),
        tgc_runtime::DType::BF16 => 2f64.powi(-7),
        tgc_runtime::DType::F32 | tgc_runtime::DType::I32 | tgc_runtime::DType::Bool => 0.0,
    };
    let rtol = 1e-3 + 2.0 * ulp;
    let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
    a.len() == b.len()
        && a.iter().zip(&b).all(|(&x, &y)| if y.is_nan() { x.is_nan() } else { (x - y).abs() <= 1e-3 + rtol * y.abs() })
}

/// `g`'s CPU program, fused or not ([`TuneOptions::fuse`]).
///
/// Errors: those of [`crate::cpu::lower_with`].
pub fn lowered(g: &Graph, fuse: bool) -> crate::diag::DResult<Program> {
    crate::cpu::lower_with(g, &crate::cpu::Options { fuse, ..crate::cpu::Options::default() })
}

/// The median (the lower of the middle two for an even count).
fn median(mut xs: Vec<u64>) -> u64 {
    xs.sort_unstable();
    xs.get((xs.len().max(1) - 1) / 2).copied().unwrap_or(0)
}
