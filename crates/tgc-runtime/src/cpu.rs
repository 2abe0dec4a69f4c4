//! Running generated C kernels on the CPU: compile C source to a shared
//! library, load it, call its entry points.
//!
//! # The kernel ABI (the contract with the C code generator)
//!
//! Every entry point of a generated C library has this signature:
//!
//! ```c
//! int32_t SYMBOL(const void* const* inputs, void* const* outputs, const int64_t* dims, const tgc_rt* rt);
//! ```
//!
//! - `inputs[i]` points to the i-th graph input, in graph-input order;
//!   `outputs[i]` to the i-th graph output, in graph-output order.
//! - Each buffer is dense and row-major in its dtype's storage (f32, i32,
//!   f16/bf16 as 16-bit patterns, bool as one byte 0/1, see [`HostTensor`](crate::HostTensor)),
//!   aligned to its element size, and holds exactly the elements its shape
//!   needs once the symbolic dims are bound.
//! - `dims[j]` is the value of the j-th symbolic dimension, in the graph's
//!   symbol order; the kernel derives every shape from them.
//! - A kernel compiled with a tile plan (symbolic tiling, `spec/003`) reads
//!   its run-time tile sizes from `dims` after the symbols:
//!   `dims[symbols + j]` is tile size `j` (named in the generated C's header
//!   comment, `dims[k] = tile<j>`), and it returns 2 (writing nothing) when
//!   one is below 1. Results do not depend on the tile sizes. A kernel
//!   compiled without one (every kernel of `tgc compile`, the build helper
//!   and `kernel!`) reads exactly the symbols, as before.
//! - `rt` is the runtime table [`crate::cpu_rt::Rt`] (declared in C by
//!   [`crate::cpu_rt::C_DECL`]): the thread pool, micro-kernel and
//!   scratch memory the kernels call (every temporary, panel and row
//!   buffer comes from the calling thread's scratch stack,
//!   [`crate::scratch`]; no kernel calls `malloc`, so a warm kernel
//!   allocates nothing). [`CpuLibrary::call`] passes
//!   [`crate::cpu_rt::Rt::current`].
//! - Output buffers do not overlap each other or any input; inputs may
//!   overlap each other (they are only read).
//! - The return value is 0 on success, 1 when the kernel could not allocate
//!   scratch memory, and any other value for another failure; the kernel
//!   reports through this value only (no printing, no `exit`).
//!
//! The caller checks lengths, dtypes and alignment before calling (the
//! generated Rust functions do, reporting [`Error`]); [`CpuLibrary::call`]
//! cannot, which is why it is `unsafe`.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::objcache::ObjectCache;
use crate::{Error, Result};

/// The C compiler flags that decide how generated kernels compute, for
/// every compile of them (this module's, the build helper's, the tests'):
/// `-ffp-contract=off` keeps the compiler from fusing `a*b+c` into an FMA,
/// so a kernel gives the same bits in every clone and as its Rust print
/// (generated code calls `fmaf` where it wants a fused operation: the
/// steps of a contraction, `tgc_core::cpu::packed::fused_factors`, and
/// `tgc_exp2f`'s polynomial); `-fno-trapping-math` and
/// `-fno-math-errno` say that no kernel reads the floating-point exception
/// flags or `errno`, which lets the vectoriser turn the branch-free
/// selects of `tgc_exp2f` and the clamps into vector blends and inline
/// `sqrtf`. None of them changes a computed value.
pub const VALUE_CFLAGS: &[&str] = &["-ffp-contract=off", "-fno-trapping-math", "-fno-math-errno"];

/// The optimisation flags beyond `-O2` for every compile of generated
/// kernels (this module's, the build helper's, the tests'), which change
/// no computed value: `-fpeel-loops` (one part of GCC's `-O3`) lets GCC
/// unroll completely a loop of small constant trip count after
/// vectorising it, so the 32 split accumulators of a row reduction
/// (`tgc_core::cpu::lanes`, four AVX vectors) stay in registers instead of
/// being loaded and stored at every chunk. `bash scripts/bench_cpu.sh 9
/// --threads 1,2 --only layernorm` went from 1.45 to 0.96 ms with one
/// thread and from 0.81 to 0.44 ms with two (4096×384), `--only softmax`
/// from 7.71 to 7.09 ms with one (2-core AMD EPYC).
pub const OPT_CFLAGS: &[&str] = &["-fpeel-loops"];

/// Flags for every kernel library, with [`OPT_CFLAGS`] and [`VALUE_CFLAGS`]. No
/// `-march=native`: a library built on one machine behaves the same on
/// another. Not `-O3`: GCC 12.2's `-O3` loop vectoriser miscompiles some
/// generated reductions (see `tgc_core::build`'s `c_opt_level`).
const CFLAGS: &[&str] = &["-O2", "-shared", "-fPIC", "-std=c11"];

/// The flags [`compile_shared`] passes the C compiler (`-O2 -shared -fPIC -std=c11`, then
/// [`OPT_CFLAGS`] and [`VALUE_CFLAGS`]), for a record of how a library was built.
pub fn cflags() -> Vec<&'static str> {
    CFLAGS.iter().chain(OPT_CFLAGS).chain(VALUE_CFLAGS).copied().collect()
}

/// The C type of a kernel entry point (see the module doc).
type KernelFn =
    unsafe extern "C" fn(*const *const c_void, *const *mut c_void, *const i64, *const crate::cpu_rt::Rt) -> i32;

/// The C type of an entry point with a clock callback (`tgc_core`'s
/// `emit::c::emit_c_marked`): the kernel ABI, then `mark` and its context.
type MarkedFn = unsafe extern "C" fn(
    *const *const c_void,
    *const *mut c_void,
    *const i64,
    *const crate::cpu_rt::Rt,
    unsafe extern "C" fn(*mut c_void, i64),
    *mut c_void,
) -> i32;

/// The C compiler [`compile_shared`] runs: `$CC` when set (split on
/// whitespace, so `ccache gcc` works), else `cc`; returned as written (for
/// messages) and as a command with its leading words, ready for arguments.
pub fn c_compiler() -> (String, Command) {
    let cc = std::env::var("CC").ok().filter(|cc| !cc.trim().is_empty()).unwrap_or_else(|| "cc".into());
    let mut words = cc.split_whitespace();
    let mut command = Command::new(words.next().unwrap_or("cc"));
    command.args(words);
    (cc, command)
}

/// Writes `c_source` to `dir/stem.c` and compiles it into the shared library
/// `dir/stem.<so|dylib|dll>`, whose path is returned.
///
/// The compiler is [`c_compiler`]'s. The library is built under a temporary name and renamed into
/// place, so a process that already mapped an older library of the same name
/// keeps a valid mapping. A process that already loaded `dir/stem.so` gets the
/// old library back from the dynamic loader when it loads the path again:
/// give different sources different stems (a hash of the source, say). The C
/// file is written by [`crate::files::write_atomic`] (a link planted at its
/// name is replaced, not followed).
///
/// `dir` must be a folder only this user can write, such as a
/// [`crate::files::scratch_dir`]: the library is loaded from it, and another
/// user who can rename files there can swap in their own between build and load.
///
/// Errors: [`Error::Io`] when `dir` cannot be written; [`Error::Kernel`] when
/// the compiler cannot be run or fails (the message holds its stderr).
pub fn compile_shared(c_source: &str, dir: &Path, stem: &str) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
    let source = dir.join(format!("{stem}.c"));
    crate::files::write_atomic(&source, c_source.as_bytes()).map_err(|e| Error::io("write", &source, e))?;
    let library = dir.join(format!("{stem}.{}", std::env::consts::DLL_EXTENSION));
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let partial = dir.join(format!("{stem}.{}-{n}.partial", std::process::id()));

    let mut command = c_compiler().1;
    command.args(cflags()).arg("-o").arg(&partial).arg(&source).arg("-lm");
    run_compiler(command, &source, &partial)?;
    std::fs::rename(&partial, &library).map_err(|e| Error::io("create", &library, e))?;
    Ok(library)
}

/// [`compile_shared`] through the object cache: the shared library of
/// `c_source` from `cache` when it holds one built by the same compiler
/// command, compiler version ([`compiler_version`]) and [`cflags`], else
/// built into it (the C file kept beside it as `KEY.c`). Returns the
/// library's path in `cache`.
///
/// Errors: as [`compile_shared`]; [`Error::Io`] when the cache holds the
/// entry but it is not private ([`ObjectCache::lookup`]).
pub fn compile_cached(c_source: &str, cache: &ObjectCache) -> Result<PathBuf> {
    let (cc, _) = c_compiler();
    let version = compiler_version()?;
    let flags = cflags().join(" ");
    let key = ObjectCache::key(&[c_source.as_bytes(), cc.as_bytes(), version.as_bytes(), flags.as_bytes()]);
    let ext = std::env::consts::DLL_EXTENSION;
    if let Some(library) = cache.lookup(&key, ext)? {
        return Ok(library);
    }
    let source = cache.path(&key, "c");
    crate::files::write_atomic(&source, c_source.as_bytes()).map_err(|e| Error::io("write", &source, e))?;
    let partial = cache.partial(&key, ext);
    let mut command = c_compiler().1;
    command.args(cflags()).arg("-o").arg(&partial).arg(&source).arg("-lm");
    run_compiler(command, &source, &partial)?;
    cache.store(&partial, &key, ext)
}

/// The translation units `units` (C sources that together define the
/// library's entry points, as `tgc_core`'s `emit::c::emit_c_parts` prints
/// them) compiled into one shared library through `cache`: each unit's
/// object (`-c`, with [`cflags`] but `-shared`) from the cache or
/// compiled, up to the machine's threads at once, then the library of
/// those objects (`-shared`) from the cache or linked. One unit is
/// [`compile_cached`]. Returns the library's path in `cache`.
///
/// Errors: as [`compile_cached`], for the first unit that fails.
pub fn compile_units(units: &[String], cache: &ObjectCache) -> Result<PathBuf> {
    if let [unit] = units {
        return compile_cached(unit, cache);
    }
    let (cc, _) = c_compiler();
    let version = compiler_version()?;
    let object_flags: Vec<&str> = cflags().into_iter().filter(|f| *f != "-shared").chain(["-c"]).collect();
    let flags = object_flags.join(" ");
    let mut objects = Vec::new();
    let mut missing = Vec::new();
    for unit in units {
        let key = ObjectCache::key(&[unit.as_bytes(), cc.as_bytes(), version.as_bytes(), flags.as_bytes()]);
        if cache.lookup(&key, "o")?.is_none() {
            missing.push((unit, key.clone()));
        }
        objects.push(key);
    }
    let next = AtomicUsize::new(0);
    let compile = || -> Result<()> {
        while let Some((unit, key)) = missing.get(next.fetch_add(1, Ordering::Relaxed)) {
            let source = cache.path(key, "c");
            crate::files::write_atomic(&source, unit.as_bytes()).map_err(|e| Error::io("write", &source, e))?;
            let partial = cache.partial(key, "o");
            let mut command = c_compiler().1;
            command.args(&object_flags).arg("-o").arg(&partial).arg(&source);
            run_compiler(command, &source, &partial)?;
            cache.store(&partial, key, "o")?;
        }
        Ok(())
    };
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get()).min(missing.len());
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..jobs).map(|_| scope.spawn(compile)).collect();
        let done: Vec<Result<()>> =
            workers.into_iter().map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect();
        done.into_iter().collect::<Result<()>>()
    })?;
    const LINK_FLAGS: [&str; 2] = ["-shared", "-fPIC"];
    let link_flags = LINK_FLAGS.join(" ");
    let mut parts: Vec<&[u8]> = vec![cc.as_bytes(), version.as_bytes(), link_flags.as_bytes()];
    parts.extend(objects.iter().map(|k| k.as_bytes()));
    let key = ObjectCache::key(&parts);
    let ext = std::env::consts::DLL_EXTENSION;
    if let Some(library) = cache.lookup(&key, ext)? {
        return Ok(library);
    }
    let partial = cache.partial(&key, ext);
    let mut command = c_compiler().1;
    command.args(LINK_FLAGS).arg("-o").arg(&partial);
    for object in &objects {
        let path = cache.lookup(object, "o")?.ok_or_else(|| {
            Error::Kernel(format!("the object `{}` left the cache during the build", cache.path(object, "o").display()))
        })?;
        command.arg(path);
    }
    command.arg("-lm");
    run_compiler(command, &cache.path(&objects[0], "o"), &partial)?;
    cache.store(&partial, &key, ext)
}

/// What `CC --version` prints ([`c_compiler`]'s command), which names the
/// compiler and its version: part of an object cache key, so an upgraded
/// compiler builds anew. Run once per process and compiler command.
///
/// Errors: [`Error::Kernel`] when the compiler cannot be run or fails.
pub fn compiler_version() -> Result<String> {
    static SEEN: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());
    let (cc, mut command) = c_compiler();
    if let Some(v) = SEEN.lock().unwrap_or_else(|e| e.into_inner()).get(&cc) {
        return Ok(v.clone());
    }
    let output = command.arg("--version").output().map_err(|e| cannot_run(&cc, &e))?;
    if !output.status.success() {
        return Err(Error::Kernel(format!("`{cc} --version` failed ({})", output.status)));
    }
    let version = String::from_utf8_lossy(&output.stdout).into_owned();
    SEEN.lock().unwrap_or_else(|e| e.into_inner()).insert(cc, version.clone());
    Ok(version)
}

/// The error of a C compiler `cc` that cannot be started.
fn cannot_run(cc: &str, e: &std::io::Error) -> Error {
    Error::Kernel(format!("cannot run the C compiler `{cc}`: {e} (install a C compiler or set CC)"))
}

/// Runs `command`, the C compiler writing `output_file` from `source` (a
/// failed run removes `output_file`; its error names `source` and holds
/// the compiler's stderr).
fn run_compiler(mut command: Command, source: &Path, output_file: &Path) -> Result<()> {
    let (cc, _) = c_compiler();
    let output = command.output().map_err(|e| cannot_run(&cc, &e))?;
    if !output.status.success() {
        let _ = std::fs::remove_file(output_file);
        return Err(Error::Kernel(format!(
            "the C compiler `{cc}` failed ({}) on `{}`:\n{}",
            output.status,
            source.display(),
            String::from_utf8_lossy(&output.stderr).trim_end()
        )));
    }
    Ok(())
}

/// A loaded shared library of generated C kernels (see the module doc for
/// the ABI of its entry points). Unloaded when dropped.
#[derive(Debug)]
pub struct CpuLibrary {
    library: libloading::Library,
    path: PathBuf,
}

impl CpuLibrary {
    /// Loads the shared library at `path`.
    ///
    /// Errors: [`Error::Kernel`] when the dynamic loader fails (its message
    /// included).
    ///
    /// # Safety
    ///
    /// Loading runs the library's initialisation code: `path` must be a library
    /// built by [`compile_shared`] from tgc-generated C (or other code whose
    /// initialisers are sound to run).
    pub unsafe fn load(path: impl AsRef<Path>) -> Result<CpuLibrary> {
        let path = path.as_ref();
        // SAFETY: the caller vouches for the library's initialisers.
        let library = unsafe { libloading::Library::new(path) }
            .map_err(|e| Error::Kernel(format!("cannot load kernel library `{}`: {e}", path.display())))?;
        Ok(CpuLibrary { library, path: path.to_path_buf() })
    }

    /// The path the library was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Calls the entry point `symbol` with the kernel ABI of the module doc:
    /// `inputs` in graph-input order, `outputs` in graph-output order, `dims`
    /// in the graph's symbol order, then any tile sizes.
    ///
    /// Errors: [`Error::Kernel`] when `symbol` is missing, when the kernel
    /// returns 1 ("out of memory") or another non-zero status.
    ///
    /// # Safety
    ///
    /// `symbol` must be a kernel entry point with the ABI of the module doc,
    /// and every buffer must have the length, dtype and alignment that this
    /// kernel derives from `dims`: the kernel trusts them and reads and writes
    /// through raw pointers.
    pub unsafe fn call(&self, symbol: &str, inputs: &[&[u8]], outputs: &mut [&mut [u8]], dims: &[i64]) -> Result<()> {
        // SAFETY: the caller guarantees that `symbol` has the type `KernelFn`.
        let kernel = unsafe { self.library.get::<KernelFn>(symbol.as_bytes()) }
            .map_err(|e| Error::Kernel(format!("no kernel `{symbol}` in `{}`: {e}", self.path.display())))?;
        let input_ptrs: Vec<*const c_void> = inputs.iter().map(|b| b.as_ptr().cast()).collect();
        let output_ptrs: Vec<*mut c_void> = outputs.iter_mut().map(|b| b.as_mut_ptr().cast()).collect();
        // SAFETY: the pointer arrays and `dims` live across the call; the
        // caller guarantees the ABI and the buffers' sizes; `outputs` are
        // exclusive borrows, so no output overlaps another buffer.
        let rt = crate::cpu_rt::Rt::current();
        let status = unsafe { kernel(input_ptrs.as_ptr(), output_ptrs.as_ptr(), dims.as_ptr(), &rt) };
        crate::checks::status(symbol, status)
    }

    /// [`CpuLibrary::call`] for an entry point with a clock callback: the
    /// kernel calls `mark(-1)` before its first function and `mark(c)` after
    /// function `c`, on the calling thread.
    ///
    /// Errors: as [`CpuLibrary::call`].
    ///
    /// # Safety
    ///
    /// As [`CpuLibrary::call`], and `symbol` must have the marked ABI.
    pub unsafe fn call_marked(
        &self,
        symbol: &str,
        inputs: &[&[u8]],
        outputs: &mut [&mut [u8]],
        dims: &[i64],
        mark: &mut dyn FnMut(i64),
    ) -> Result<()> {
        unsafe extern "C" fn trampoline(ctx: *mut c_void, call: i64) {
            // SAFETY: `ctx` is the `&mut &mut dyn FnMut(i64)` below, alive
            // and exclusive for the whole kernel call.
            let mark = unsafe { &mut *ctx.cast::<&mut dyn FnMut(i64)>() };
            mark(call);
        }
        // SAFETY: the caller guarantees that `symbol` has the type `MarkedFn`.
        let kernel = unsafe { self.library.get::<MarkedFn>(symbol.as_bytes()) }
            .map_err(|e| Error::Kernel(format!("no kernel `{symbol}` in `{}`: {e}", self.path.display())))?;
        let input_ptrs: Vec<*const c_void> = inputs.iter().map(|b| b.as_ptr().cast()).collect();
        let output_ptrs: Vec<*mut c_void> = outputs.iter_mut().map(|b| b.as_mut_ptr().cast()).collect();
        let rt = crate::cpu_rt::Rt::current();
        let mut mark: &mut dyn FnMut(i64) = mark;
        let ctx = (&mut mark as *mut &mut dyn FnMut(i64)).cast::<c_void>();
        // SAFETY: as in `call`; `ctx` outlives the call.
        let status = unsafe { kernel(input_ptrs.as_ptr(), output_ptrs.as_ptr(), dims.as_ptr(), &rt, trampoline, ctx) };
        crate::checks::status(symbol, status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::TempDir;
    use crate::{DType, HostTensor};

    /// Two kernels with the tgc ABI: `add` (out = a + b over dims[0] f32s) and
    /// `fail` (returns dims[0]).
    const ADD_C: &str = r#"
#include <stdint.h>
#include <stdlib.h>

int32_t add(const void* const* inputs, void* const* outputs, const int64_t* dims, const void* rt) {
    (void)rt;
    const float* a = (const float*)inputs[0];
    const float* b = (const float*)inputs[1];
    float* out = (float*)outputs[0];
    for (int64_t i = 0; i < dims[0]; i++) out[i] = a[i] + b[i];
    return 0;
}

int32_t fail(const void* const* inputs, void* const* outputs, const int64_t* dims, const void* rt) {
    (void)rt;
    (void)inputs; (void)outputs;
    return (int32_t)dims[0];
}
"#;

    #[test]
    fn compiles_loads_and_calls_a_kernel() {
        let dir = TempDir::new("cpu");
        let path = compile_shared(ADD_C, dir.path(), "add").unwrap();
        assert!(path.exists() && dir.path().join("add.c").exists());
        let lib = unsafe { CpuLibrary::load(&path) }.unwrap();
        assert_eq!(lib.path(), path);

        let a = HostTensor::from_f32(DType::F32, &[3], &[1.0, 2.0, 3.0]).unwrap();
        let b = HostTensor::from_f32(DType::F32, &[3], &[0.5, -2.0, 10.0]).unwrap();
        let mut out = HostTensor::zeros(DType::F32, &[3]).unwrap();
        unsafe { lib.call("add", &[a.bytes(), b.bytes()], &mut [out.bytes_mut()], &[3]) }.unwrap();
        assert_eq!(out.to_f32_vec(), [1.5, 0.0, 13.0]);

        let status = |s| unsafe { lib.call("fail", &[], &mut [], &[s]) }.unwrap_err().to_string();
        assert!(status(1).contains("out of memory"), "{}", status(1));
        assert!(status(7).contains("failed with status 7"), "{}", status(7));
        let missing = unsafe { lib.call("nope", &[], &mut [], &[]) }.unwrap_err();
        assert!(matches!(&missing, Error::Kernel(m) if m.contains("no kernel `nope`")), "{missing}");
    }

    #[test]
    fn compiler_errors_carry_the_compiler_output() {
        let dir = TempDir::new("cpu-bad");
        let e = compile_shared("int f( { return 0; }", dir.path(), "bad").unwrap_err();
        let Error::Kernel(msg) = &e else { panic!("expected a kernel error, got {e:?}") };
        assert!(msg.contains("bad.c") && msg.contains("error"), "{msg}");
        assert!(!dir.path().join(format!("bad.{}", std::env::consts::DLL_EXTENSION)).exists());
    }

    /// A link planted at `stem.c` is replaced: the file it points to keeps
    /// its content (the C source is not written through it).
    #[cfg(unix)]
    #[test]
    fn a_link_planted_at_the_c_file_is_not_followed() {
        let dir = TempDir::new("cpu-link");
        let victim = dir.path().join("victim.txt");
        std::fs::write(&victim, "the user's file\n").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("add.c")).unwrap();
        compile_shared(ADD_C, dir.path(), "add").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the user's file\n");
        assert_eq!(std::fs::read_to_string(dir.path().join("add.c")).unwrap(), ADD_C);
    }

    /// The second compile of the same C is the first's library: the test
    /// puts another library in its place, and the second call returns it
    /// without compiling. Other C is compiled anew.
    #[test]
    fn the_object_cache_returns_what_it_built() {
        let dir = TempDir::new("cpu-cache");
        let cache = ObjectCache::open(&dir.path().join("cache")).unwrap();
        let first = compile_cached(ADD_C, &cache).unwrap();
        assert!(first.starts_with(cache.dir()) && first.with_extension("c").exists());
        let other_c = ADD_C.replace("a[i] + b[i]", "a[i] - b[i]");
        let other = compile_cached(&other_c, &cache).unwrap();
        assert_ne!(first, other);
        std::fs::copy(&other, &first).unwrap();
        assert_eq!(compile_cached(ADD_C, &cache).unwrap(), first);
        let lib = unsafe { CpuLibrary::load(&first) }.unwrap();
        let a = HostTensor::from_f32(DType::F32, &[1], &[1.0]).unwrap();
        let mut out = HostTensor::zeros(DType::F32, &[1]).unwrap();
        unsafe { lib.call("add", &[a.bytes(), a.bytes()], &mut [out.bytes_mut()], &[1]) }.unwrap();
        assert_eq!(out.to_f32_vec(), [0.0], "the cached library (the subtracting one) was loaded");
    }

    /// Two units, the entry point in one and the function it calls in the
    /// other, link into one library; after the second unit changes, the
    /// first's object is the one built before (the same file), and the new
    /// library computes with the new function.
    #[cfg(unix)]
    #[test]
    fn units_compile_apart_and_link_into_one_library() {
        use std::os::unix::fs::MetadataExt;
        const ENTRY: &str = "#include <stdint.h>\nfloat twice(float x);\nint32_t dbl(const void* const* inputs, \
                             void* const* outputs, const int64_t* dims, const void* rt) {\n    (void)rt;\n    \
                             for (int64_t i = 0; i < dims[0]; i++) ((float*)outputs[0])[i] = \
                             twice(((const float*)inputs[0])[i]);\n    return 0;\n}\n";
        let twice = |body: &str| format!("float twice(float x) {{ return {body}; }}\n");
        let dir = TempDir::new("cpu-units");
        let cache = ObjectCache::open(&dir.path().join("cache")).unwrap();
        let run = |units: &[String]| {
            let path = compile_units(units, &cache).unwrap();
            let lib = unsafe { CpuLibrary::load(&path) }.unwrap();
            let x = HostTensor::from_f32(DType::F32, &[2], &[1.5, -2.0]).unwrap();
            let mut y = HostTensor::zeros(DType::F32, &[2]).unwrap();
            unsafe { lib.call("dbl", &[x.bytes()], &mut [y.bytes_mut()], &[2]) }.unwrap();
            y.to_f32_vec()
        };
        let objects = || {
            let mut inodes: Vec<(String, u64)> = std::fs::read_dir(cache.dir())
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension() == Some("o".as_ref()))
                .map(|p| (p.display().to_string(), std::fs::metadata(&p).unwrap().ino()))
                .collect();
            inodes.sort();
            inodes
        };
        assert_eq!(run(&[ENTRY.to_string(), twice("2.0f * x")]), [3.0, -4.0]);
        let before = objects();
        assert_eq!(before.len(), 2);
        assert_eq!(run(&[ENTRY.to_string(), twice("x + x + x")]), [4.5, -6.0]);
        let after = objects();
        assert_eq!(after.len(), 3);
        assert_eq!(before.iter().filter(|o| after.contains(o)).count(), 2, "the entry's object is kept: {after:?}");
    }

    #[test]
    fn loading_a_missing_library_is_a_kernel_error() {
        let dir = TempDir::new("cpu-missing");
        let e = unsafe { CpuLibrary::load(dir.path().join("none.so")) }.unwrap_err();
        assert!(matches!(&e, Error::Kernel(m) if m.contains("none.so")), "{e}");
    }
}
