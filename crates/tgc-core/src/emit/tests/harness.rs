//! Compiles generated code and runs it on test data: C with the system `cc`,
//! Rust with `rustc` against the `half` rlib of this test build; both loaded
//! with `libloading`.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::interp;
use crate::tiny::Graph;
use crate::DType;

/// A scratch directory removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "tgc-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Values as f64, stored in a buffer of `dtype`.
pub fn encode(values: &[f64], dt: DType) -> Vec<u8> {
    let mut out = Vec::new();
    for &v in values {
        match dt {
            DType::F16 => out.extend(half::f16::from_f64(v).to_bits().to_le_bytes()),
            DType::BF16 => out.extend(half::bf16::from_f64(v).to_bits().to_le_bytes()),
            DType::F32 => out.extend((v as f32).to_le_bytes()),
            DType::I32 => out.extend((v as i32).to_le_bytes()),
            DType::Bool => out.push((v != 0.0) as u8),
        }
    }
    out
}

pub fn decode(bytes: &[u8], dt: DType) -> Vec<f64> {
    let n = dt.size_bytes();
    bytes
        .chunks(n)
        .map(|c| match dt {
            DType::F16 => half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f64(),
            DType::BF16 => half::bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f64(),
            DType::F32 => f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            DType::I32 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            DType::Bool => c[0] as f64,
        })
        .collect()
}

/// Element counts of the outputs at `dims` (in `g.symbols` order).
fn output_lens(g: &Graph, dims: &[i64]) -> Vec<usize> {
    let bind = |s: &str| g.symbols.iter().position(|x| x.name == s).map(|k| dims[k]);
    g.outputs
        .iter()
        .map(|o| g.shape(o.node).iter().map(|d| d.eval(&bind).unwrap()).product::<i64>().max(0) as usize)
        .collect()
}

fn input_dtypes(g: &Graph) -> Vec<DType> {
    g.inputs().into_iter().map(|i| g.dtype(i)).collect()
}

/// The f32 bits of output values (each an f32 widened to f64): the way
/// tests compare two outputs bit for bit.
pub fn f32_bits(v: &[f64]) -> Vec<u32> {
    v.iter().map(|x| (*x as f32).to_bits()).collect()
}

/// A compiled graph: the C library and the Rust library.
///
/// Dropped without a panic under way, it asserts that at least one call was
/// compared with the interpreter ([`Compiled::run`]'s check, or an answer of
/// [`Compiled::interp`] for a test that compares by hand): a test whose every
/// call the interpreter refused compared C with Rust only.
pub struct Compiled {
    c: libloading::Library,
    rust: libloading::Library,
    symbol: String,
    pub c_src: String,
    pub rust_src: String,
    ins: Vec<DType>,
    outs: Vec<DType>,
    graph: Graph,
    /// Calls the interpreter answered (each compared with it).
    compared: std::cell::Cell<usize>,
    _dir: Scratch,
}

impl Drop for Compiled {
    fn drop(&mut self) {
        if !std::thread::panicking() && self.compared.get() == 0 {
            panic!("`{}`: no call was compared with the interpreter", self.graph.name);
        }
    }
}

/// The interpreter's refusal of a call's dims: a symbol below 1, sizes that
/// break a shape rule (`AxisSizeMismatch` from `Graph::resolve_dims` or
/// `Graph::bind`), or an input whose size is negative at the dims. The one
/// answer of [`Compiled::interp`] after which [`Compiled::run`] compares no
/// outputs (it asserts that C and Rust refuse the dims too); every other
/// interpreter error fails the test.
#[derive(Debug)]
pub struct DimsRefused(pub crate::diag::Diagnostic);

type CEntry =
    unsafe extern "C" fn(*const *const c_void, *const *mut c_void, *const i64, *const tgc_runtime::cpu_rt::Rt) -> i32;
type RustEntry =
    unsafe extern "C" fn(*const *const u8, *const usize, *const *mut u8, *const usize, *const i64, usize) -> i32;

/// The `half` rlib this test binary was built with, and its dependency folder.
fn half_rlib() -> (PathBuf, PathBuf) {
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    (newest_rlib(&deps, "libhalf-"), deps)
}

/// The newest `PREFIX*.rlib` in `deps` (the test build's dependencies).
fn newest_rlib(deps: &std::path::Path, prefix: &str) -> PathBuf {
    let mut rlibs: Vec<PathBuf> = std::fs::read_dir(deps)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix) && n.ends_with(".rlib"))
        })
        .collect();
    rlibs.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    rlibs.pop().unwrap_or_else(|| panic!("no {prefix}*.rlib in {}", deps.display()))
}

/// The test wrapper: an `extern "C"` entry calling the generated `body`.
fn rust_wrapper(g: &Graph) -> String {
    let ty = |dt: DType| match dt {
        DType::F16 => "tgc::half::f16",
        DType::BF16 => "tgc::half::bf16",
        DType::F32 => "f32",
        DType::I32 => "i32",
        DType::Bool => "bool",
    };
    let tuple = |v: Vec<String>| if v.len() == 1 { format!("({},)", v[0]) } else { format!("({})", v.join(", ")) };
    let ins: Vec<String> = input_dtypes(g)
        .iter()
        .enumerate()
        .map(|(k, dt)| format!("std::slice::from_raw_parts(*ins.add({k}) as *const {}, *in_lens.add({k}))", ty(*dt)))
        .collect();
    let outs: Vec<String> = g
        .outputs
        .iter()
        .enumerate()
        .map(|(k, o)| {
            format!(
                "std::slice::from_raw_parts_mut(*outs.add({k}) as *mut {}, *out_lens.add({k}))",
                ty(g.dtype(o.node))
            )
        })
        .collect();
    format!(
        "#[allow(unused_imports)]\nmod tgc {{ pub use ::half; pub use ::tgc_runtime::scratch; pub mod __private {{ pub use ::tgc_runtime::cpu_rt; }} }}\n\
         #[no_mangle]\n\
         pub unsafe extern \"C\" fn run(ins: *const *const u8, in_lens: *const usize, outs: *const *mut u8, out_lens: *const usize, dims: *const i64, ndims: usize) -> i32 {{\n\
         \x20   match body({}, {}, std::slice::from_raw_parts(dims, ndims)) {{ Ok(()) => 0, Err(_) => 2 }}\n\
         }}\n",
        tuple(ins),
        tuple(outs)
    )
}

/// Emits, compiles and loads both printers' output for `g`.
pub fn compile(g: &Graph) -> Compiled {
    compile_with(g, &crate::cpu::Options::default())
}

/// [`compile`], lowering under `opts` (tile sizes then follow the symbols
/// in the `dims` of [`Compiled::run`]).
pub fn compile_with(g: &Graph, opts: &crate::cpu::Options) -> Compiled {
    compile_edited(g, opts, &|c| c)
}

/// [`compile_with`], the C source passed through `edit` before it is
/// compiled (a test forcing one of a dispatcher's paths).
pub fn compile_edited(g: &Graph, opts: &crate::cpu::Options, edit: &dyn Fn(String) -> String) -> Compiled {
    let dir = Scratch::new("emit");
    let symbol = format!("tgc_test_{}", g.name);
    let c_src = edit(super::super::c::emit_c_units_with(&[(g, &symbol)], opts).unwrap());
    let c_path = dir.0.join("k.c");
    std::fs::write(&c_path, &c_src).unwrap();
    let c_lib = dir.0.join("libk.so");
    // The runtime's flags, and every warning as an error.
    let cc = Command::new("cc")
        .args(tgc_runtime::cpu::cflags())
        .args(["-Wall", "-Wextra", "-Wno-unknown-pragmas", "-Werror"])
        .arg("-o")
        .arg(&c_lib)
        .arg(&c_path)
        .arg("-lm")
        .output()
        .unwrap();
    assert!(cc.status.success(), "cc failed:\n{}\n{c_src}", String::from_utf8_lossy(&cc.stderr));

    let rust_src = super::super::rust::emit_rust_with(g, "crate::tgc", opts).unwrap();
    let rs_path = dir.0.join("k.rs");
    std::fs::write(&rs_path, format!("{rust_src}\n{}", rust_wrapper(g))).unwrap();
    let (half, deps) = half_rlib();
    let rs_lib = dir.0.join("libkr.so");
    let rc = Command::new("rustc")
        .args(["--edition", "2021", "--crate-type", "cdylib", "-C", "opt-level=1", "-D", "warnings", "-o"])
        .arg(&rs_lib)
        .arg("-L")
        .arg(format!("dependency={}", deps.display()))
        .arg("--extern")
        .arg(format!("half={}", half.display()))
        .arg("--extern")
        .arg(format!("tgc_runtime={}", newest_rlib(&deps, "libtgc_runtime-").display()))
        .arg(&rs_path)
        .output()
        .unwrap();
    assert!(rc.status.success(), "rustc failed:\n{}\n{rust_src}", String::from_utf8_lossy(&rc.stderr));

    // SAFETY: the libraries were just built from generated code; loading runs no initialisers of ours.
    let (c, rust) = unsafe { (libloading::Library::new(&c_lib).unwrap(), libloading::Library::new(&rs_lib).unwrap()) };
    let outs = g.outputs.iter().map(|o| g.dtype(o.node)).collect();
    Compiled {
        c,
        rust,
        symbol,
        c_src,
        rust_src,
        ins: input_dtypes(g),
        outs,
        graph: g.clone(),
        compared: std::cell::Cell::new(0),
        _dir: dir,
    }
}

/// What one run returns: status and output values.
#[derive(Debug)]
pub struct Run {
    pub rc: i32,
    pub outputs: Vec<Vec<f64>>,
}

impl Compiled {
    /// Runs the C and the Rust code on the same inputs (values per input, in
    /// `Graph::inputs()` order) and dims, and asserts that both agree with
    /// the reference interpreter (each output within [`Tol::of`] its
    /// dtype); where the interpreter refuses the dims ([`DimsRefused`]),
    /// that both refuse them too. Any other interpreter error fails the
    /// test ([`Compiled::interp`]).
    pub fn run(&self, inputs: &[Vec<f64>], dims: &[i64]) -> (Run, Run) {
        let tols: Vec<Tol> = self.outs.iter().map(|dt| Tol::of(*dt)).collect();
        self.run_within(inputs, dims, &tols)
    }

    /// [`Compiled::run`] with output `k` compared within `tols[k]`: for an
    /// output whose op states a looser bound than its dtype's
    /// ([`Tol::of`]), named where the caller gives it.
    pub fn run_within(&self, inputs: &[Vec<f64>], dims: &[i64], tols: &[Tol]) -> (Run, Run) {
        assert_eq!(tols.len(), self.outs.len(), "one tolerance per output");
        let (c, r) = self.run_unchecked(inputs, dims);
        match self.interp(inputs, dims) {
            Ok(want) => {
                for (run, who) in [(&c, "C"), (&r, "Rust")] {
                    assert_eq!(run.rc, 0, "{who}: the interpreter accepts dims {dims:?}");
                    for (k, (got, want)) in run.outputs.iter().zip(&want).enumerate() {
                        assert_within(
                            got,
                            want,
                            tols[k],
                            &format!("{who} output {k} vs the interpreter at dims {dims:?}"),
                        );
                    }
                }
            }
            Err(DimsRefused(e)) => {
                for (run, who) in [(&c, "C"), (&r, "Rust")] {
                    assert_ne!(run.rc, 0, "{who} runs dims {dims:?}, which the interpreter refuses: {e}");
                }
            }
        }
        (c, r)
    }

    /// [`Compiled::run`] without the comparison with the interpreter (for a
    /// test with its own tolerance).
    pub fn run_unchecked(&self, inputs: &[Vec<f64>], dims: &[i64]) -> (Run, Run) {
        assert_eq!(inputs.len(), self.ins.len(), "one value list per input");
        // Empty buffers still get an allocation: a `Vec`'s dangling pointer
        // is not aligned for the wider element types the wrapper views.
        let ins: Vec<Vec<u8>> = inputs
            .iter()
            .zip(&self.ins)
            .map(|(v, dt)| {
                let mut b = encode(v, *dt);
                b.reserve(8);
                b
            })
            .collect();
        let lens = output_lens(&self.graph, dims);
        let fresh = || -> Vec<Vec<u8>> {
            lens.iter()
                .zip(&self.outs)
                .map(|(n, dt)| {
                    let mut b = vec![0u8; n * dt.size_bytes()];
                    b.reserve(8);
                    b
                })
                .collect()
        };
        let in_ptrs: Vec<*const u8> = ins.iter().map(|b| b.as_ptr()).collect();
        let in_lens: Vec<usize> = inputs.iter().map(|v| v.len()).collect();

        let mut c_out = fresh();
        let c_ptrs: Vec<*mut u8> = c_out.iter_mut().map(|b| b.as_mut_ptr()).collect();
        // SAFETY: buffers have the sizes of the graph's shapes at `dims`, as the entry requires.
        let c_rc = unsafe {
            let f: libloading::Symbol<CEntry> = self.c.get(self.symbol.as_bytes()).unwrap();
            let rt = tgc_runtime::cpu_rt::Rt::current();
            f(in_ptrs.as_ptr() as *const *const c_void, c_ptrs.as_ptr() as *const *mut c_void, dims.as_ptr(), &rt)
        };
        let mut r_out = fresh();
        let r_ptrs: Vec<*mut u8> = r_out.iter_mut().map(|b| b.as_mut_ptr()).collect();
        // SAFETY: as above; the wrapper builds slices of the given lengths.
        let r_rc = unsafe {
            let f: libloading::Symbol<RustEntry> = self.rust.get(b"run").unwrap();
            f(in_ptrs.as_ptr(), in_lens.as_ptr(), r_ptrs.as_ptr(), lens.as_ptr(), dims.as_ptr(), dims.len())
        };
        let dec = |bufs: Vec<Vec<u8>>| bufs.iter().zip(&self.outs).map(|(b, dt)| decode(b, *dt)).collect();
        (Run { rc: c_rc, outputs: dec(c_out) }, Run { rc: r_rc, outputs: dec(r_out) })
    }

    /// The reference interpreter's outputs, or its refusal of the dims; a
    /// call it answers counts as compared (the caller compares by hand).
    ///
    /// Panics, failing the test, on every other interpreter error (an input
    /// of the wrong length or dtype, a symbol without a value, a tensor past
    /// `interp::MAX_ELEMENTS`, an `Internal` error of the interpreter).
    pub fn interp(&self, inputs: &[Vec<f64>], dims: &[i64]) -> Result<Vec<Vec<f64>>, DimsRefused> {
        let g = &self.graph;
        let map: BTreeMap<String, i64> = g.symbols.iter().zip(dims).map(|(s, v)| (s.name.clone(), *v)).collect();
        let bind = |s: &str| map.get(s).copied();
        let failed = |e: &dyn std::fmt::Display| -> ! {
            panic!("`{}`: the interpreter fails at dims {dims:?}, which is no dims refusal: {e}", g.name)
        };
        let mut tensors = Vec::new();
        for (id, v) in g.inputs().into_iter().zip(inputs) {
            let mut shape = Vec::new();
            for d in g.shape(id) {
                let n = d.eval(&bind).unwrap_or_else(|e| failed(&e));
                let n = usize::try_from(n).map_err(|_| {
                    DimsRefused(crate::diag!(AxisSizeMismatch, "an input has size {n}").at_node(g.node(id)))
                })?;
                shape.push(n);
            }
            tensors.push(interp::Tensor::new(g.dtype(id), &shape, v.clone()).unwrap_or_else(|e| failed(&e)));
        }
        match interp::run(g, &map, &tensors) {
            Ok(outs) => {
                self.compared.set(self.compared.get() + 1);
                Ok(outs.into_iter().map(|t| t.data).collect())
            }
            Err(e) if e.name == crate::diag::ErrorName::AxisSizeMismatch => Err(DimsRefused(e)),
            Err(e) => failed(&e),
        }
    }
}

/// How far an output may be from the interpreter's value `w`:
/// `|got − w| ≤ atol + rtol·|w|`.
#[derive(Clone, Copy, Debug)]
pub struct Tol {
    pub rtol: f64,
    pub atol: f64,
}

impl Tol {
    /// f32: 1e-5 relative, about 84 units in the last place (2^-23 ≈
    /// 1.2e-7 of the value): room for the few-ulp bounds of
    /// `docs/numerics.md`'s ops along a chain and for a sum's rounding in
    /// another order, not for a wrong constant or approximation (an `exp`
    /// or `erf` off by 1e-4). The floor, 1e-5 absolute, is that relative
    /// error of a term of magnitude 1 — the tests' inputs lie in [-1, 1)
    /// or near it: an element that a sum cancels to near 0 carries the
    /// rounding of its terms (about √n·2^-24 of their magnitude for n
    /// terms), not of itself.
    pub const F32: Tol = Tol { rtol: 1e-5, atol: 1e-5 };

    /// The tolerance of an output of `dt`: [`Tol::F32`]; for f16 and bf16
    /// 1e-3 absolute and two units in the last place relative (the output
    /// rounded to the other side of a boundary when an f32 sum differs in
    /// its last bits); i32 and bool exact.
    pub fn of(dt: DType) -> Tol {
        match dt {
            DType::F32 => Tol::F32,
            DType::F16 => Tol { rtol: 2.0 * 2f64.powi(-10), atol: 1e-3 },
            DType::BF16 => Tol { rtol: 2.0 * 2f64.powi(-7), atol: 1e-3 },
            DType::I32 | DType::Bool => Tol { rtol: 0.0, atol: 0.0 },
        }
    }
}

/// Asserts `got ≈ want` elementwise within [`Tol::of`]`(dt)`; NaN only
/// where `want` is NaN.
pub fn assert_close(got: &[f64], want: &[f64], dt: DType, what: &str) {
    assert_within(got, want, Tol::of(dt), what);
}

/// Asserts `got ≈ want` elementwise within `tol`; NaN only where `want`
/// is NaN.
pub fn assert_within(got: &[f64], want: &[f64], tol: Tol, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol.atol + tol.rtol * w.abs() || (g.is_nan() && w.is_nan()) || g == w;
        assert!(ok, "{what}: element {i}: got {g}, want {w} ({:.2e} off, {tol:?})", (g - w).abs());
    }
}

/// One vector of [`data`] in `[-1, 1)` per input of `g` (concrete shapes,
/// f32 values), input `k` seeded `seed + k`.
pub fn f32_inputs(g: &crate::tiny::Graph, seed: u64) -> Vec<Vec<f64>> {
    g.inputs()
        .into_iter()
        .enumerate()
        .map(|(k, id)| {
            let n: i64 = g.shape(id).iter().map(|d| d.as_int().expect("a concrete shape")).product();
            data(seed + k as u64, n as usize, -1.0, 1.0, DType::F32)
        })
        .collect()
}

/// Deterministic pseudo-random values in `[lo, hi)`, rounded to `dt`.
pub fn data(seed: u64, n: usize, lo: f64, hi: f64, dt: DType) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            dt.round(lo + (hi - lo) * ((x >> 11) as f64 / (1u64 << 53) as f64))
        })
        .collect()
}
