//! The numeric rules of `docs/numerics.md` held on every backend that runs
//! here: the reference interpreter, the C and the Rust printers (the CPU
//! backend and `kernel!`) and the SIMT template in the GPU emulator — sizes
//! at the ends of `i64`, `CAST` to i32, and the CPU backend's error bounds
//! at the extremes of f32.

use super::harness::{compile, data};
use crate::pipeline::{self, Format};
use crate::tiny::Graph;
use crate::DType;

fn load(src: &str) -> Graph {
    pipeline::load(src, Format::Dsl, None).unwrap_or_else(|d| panic!("{}\n{src}", d.render("test"))).graph
}

/// The outputs of `g`'s SIMT program run in the GPU emulator.
fn emulated(g: &Graph, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let prog = crate::gpu::driver::lower_program(g).unwrap();
    crate::gpu::program::emulate(&prog, &[], inputs).unwrap()
}

/// `slice(x, [[lo, 10, i64::MAX]])` keeps NumPy's one element `x[lo]` on
/// every backend: the size `(hi − lo + step − 1) / step` is computed
/// exactly, where a saturating one would give 0 and sum nothing.
#[test]
fn a_slice_step_at_the_i64_limit_keeps_one_element_on_every_backend() {
    let g = load(
        "graph s(x: f32[10]) -> (a: f32[], m: f32[], y: f32[1]) {
            y = slice(x, [[0, 10, 9223372036854775807]])
            a = sum(y)
            m = max(slice(x, [[3, 10, 9223372036854775807]]))
            return a, m, y
        }",
    );
    let x: Vec<f64> = (1..=10).map(f64::from).collect();
    let want = vec![vec![1.0], vec![4.0], vec![1.0]];
    let lib = compile(&g);
    assert_eq!(
        lib.interp(std::slice::from_ref(&x), &[]).expect("the interpreter accepts the dims"),
        want,
        "interpreter"
    );
    let (c, r) = lib.run(std::slice::from_ref(&x), &[]);
    assert_eq!((c.rc, c.outputs), (0, want.clone()), "C");
    assert_eq!((r.rc, r.outputs), (0, want.clone()), "Rust");
    assert_eq!(emulated(&g, &[x]), want, "SIMT emulator");
}

/// `CAST` to i32 by the one rule of `tgc_runtime::DType::cast`: truncation
/// toward zero, saturating, NaN to 0 — the same table from f32, f16 and
/// bf16 on the interpreter, C, Rust and the emulator (not a wrap through
/// i64, which gives inf → −1, −inf → 0, 3e9 → −1294967296), and NVRTC
/// compiles the CUDA printer's form of it.
#[test]
fn cast_to_i32_is_one_rule_on_every_backend() {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let (max, min) = (i32::MAX as f64, i32::MIN as f64);
    // (source dtype, value, i32 result); each value exact in its dtype.
    let table: &[(DType, f64, f64)] = &[
        (DType::F32, inf, max),
        (DType::F32, -inf, min),
        (DType::F32, nan, 0.0),
        (DType::F32, 3e9, max),
        (DType::F32, -3e9, min),
        (DType::F32, 2147483648.0, max),
        (DType::F32, -2147483648.0, min),
        (DType::F32, -2147483904.0, min),
        (DType::F32, 2147483520.0, 2147483520.0),
        (DType::F32, -2147483520.0, -2147483520.0),
        (DType::F32, 2.75, 2.0),
        (DType::F32, -2.75, -2.0),
        (DType::F32, -0.0, 0.0),
        (DType::F16, inf, max),
        (DType::F16, -inf, min),
        (DType::F16, nan, 0.0),
        (DType::F16, 65504.0, 65504.0),
        (DType::F16, -65504.0, -65504.0),
        (DType::F16, -2.5, -2.0),
        (DType::BF16, inf, max),
        (DType::BF16, -inf, min),
        (DType::BF16, nan, 0.0),
        (DType::BF16, 2147483648.0, max),
        (DType::BF16, -3.0 * 2f64.powi(31), min),
        (DType::BF16, 2139095040.0, 2139095040.0),
        (DType::BF16, -2139095040.0, -2139095040.0),
        (DType::BF16, 1.5, 1.0),
    ];
    for dt in [DType::F32, DType::F16, DType::BF16] {
        let rows: Vec<&(DType, f64, f64)> = table.iter().filter(|r| r.0 == dt).collect();
        let n = rows.len();
        let g = load(&format!(
            "graph c(x: {0}[{n}]) -> (y: i32[{n}]) {{\n    y = cast(x, i32)\n    return y\n}}",
            dt.dsl_name()
        ));
        let x: Vec<f64> = rows.iter().map(|r| r.1).collect();
        let want: Vec<f64> = rows.iter().map(|r| r.2).collect();
        let lib = compile(&g);
        let (c, r) = lib.run(std::slice::from_ref(&x), &[]);
        assert_eq!(
            lib.interp(std::slice::from_ref(&x), &[]).expect("the interpreter accepts the dims"),
            vec![want.clone()],
            "interpreter from {dt} of {x:?}"
        );
        assert_eq!((c.rc, &c.outputs[0]), (0, &want), "C from {dt} of {x:?}");
        assert_eq!((r.rc, &r.outputs[0]), (0, &want), "Rust from {dt} of {x:?}");
        assert_eq!(emulated(&g, std::slice::from_ref(&x)), vec![want], "SIMT emulator from {dt} of {x:?}");
        // The CUDA of the same program compiles, its cast the one `cvt` that saturates.
        let prog = crate::gpu::driver::lower_program(&g).unwrap();
        let tc = crate::gpu::toolchain::Toolchain::locate().unwrap_or_else(|e| panic!("scripts/setup.sh's CUDA: {e}"));
        let (_, compiled) = crate::emit::cuda::compile(&tc, &prog.kernels(), &prog.name).unwrap();
        assert!(compiled.ptx.contains("cvt.rzi.s32.f32"), "{}", compiled.ptx);
    }
}

/// The ops of the error-bound table of `docs/numerics.md`, each as a DSL
/// expression of the inputs `x`, `y` (`f32[N]`) and `s` (`f32[M]`, for
/// the reduction).
const OPS: &[(&str, &str)] = &[
    ("+", "x + y"),
    ("-", "x - y"),
    ("*", "x * y"),
    ("/", "x / y"),
    ("sqrt", "sqrt(x)"),
    ("recip", "recip(x)"),
    ("rsqrt", "rsqrt(x)"),
    ("exp2", "exp2(x)"),
    ("log2", "log2(x)"),
    ("exp", "exp(x)"),
    ("log", "log(x)"),
    ("sigmoid", "sigmoid(x)"),
    ("silu", "silu(x)"),
    ("tanh", "tanh(x)"),
    ("erf", "erf(x)"),
    ("gelu", "gelu(x)"),
    ("gelu_tanh", "gelu_tanh(x)"),
    ("sin", "sin(x)"),
    ("cos", "cos(x)"),
    ("tan", "tan(x)"),
    ("asin", "asin(x)"),
    ("acos", "acos(x)"),
    ("atan", "atan(x)"),
    ("sinh", "sinh(x)"),
    ("cosh", "cosh(x)"),
    ("asinh", "asinh(x)"),
    ("acosh", "acosh(x)"),
    ("atanh", "atanh(x)"),
    ("sum", "sum(s)"),
];

/// A bound of the table: `ulp` units in the last place of the reference
/// value (rounded to f32; subnormal spacing below 2^-126), plus `abs`, plus
/// `rel` times the reference's magnitude.
#[derive(Debug, Default)]
struct Bound {
    ulp: f64,
    abs: f64,
    rel: f64,
}

impl Bound {
    /// Parses the bound column: terms `N ulp`, `E absolute`, `R relative`
    /// joined by ` + ` (`sum`'s `(n − 1)·2^-24·Σ|s|` is its own form).
    fn parse(text: &str) -> Bound {
        let mut b = Bound::default();
        for term in text.split(" + ") {
            let (num, unit) = term.trim().split_once(' ').unwrap_or_else(|| panic!("bound term `{term}`"));
            let v: f64 = num.parse().unwrap_or_else(|_| panic!("bound number `{num}`"));
            match unit {
                "ulp" => b.ulp += v,
                "absolute" => b.abs += v,
                "relative" => b.rel += v,
                _ => panic!("bound unit `{unit}` in `{text}`"),
            }
        }
        b
    }

    fn width(&self, want: f64) -> f64 {
        self.ulp * ulp(want) + self.abs + self.rel * want.abs()
    }
}

/// The spacing of f32 at `v` (rounded to f32 first).
fn ulp(v: f64) -> f64 {
    let a = (v as f32).abs();
    if !a.is_finite() {
        return f64::INFINITY;
    }
    let e = if a < f32::MIN_POSITIVE { -126 } else { a.log2().floor() as i32 };
    2f64.powi(e.max(-126) - 23)
}

/// Whether the f32 `got` is within `width` of the exact `want`; an infinity
/// is within when the interval around `want` reaches past the largest f32
/// (round to nearest overflows there), NaN only against NaN.
fn within(got: f64, want: f64, width: f64) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if got == want {
        return true;
    }
    if got.is_infinite() {
        return got.signum() * want + width >= f32::MAX as f64;
    }
    (got - want).abs() <= width
}

/// The rows of the error-bound table: op name and bound text.
fn bound_table() -> Vec<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/numerics.md");
    let page = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let section =
        page.split("## Error bounds of the CPU backend").nth(1).unwrap_or_else(|| panic!("{path}: no bounds"));
    section
        .lines()
        .skip_while(|l| !l.starts_with("| op"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let row = l.trim().trim_start_matches("| ").trim_end_matches(" |");
            let cells: Vec<&str> = row.split(" | ").collect();
            (cells[0].trim_matches('`').to_string(), cells[1].to_string())
        })
        .collect()
}

/// f32 values at the extremes of every op of [`OPS`]: signed zeros,
/// subnormals, the normal range's ends, exp's and exp2's overflow and
/// underflow thresholds, sigmoid's saturation, ±inf and NaN, and a sweep.
fn extremes() -> Vec<f64> {
    let mut v = vec![0.0, 1.0, 2.0, 3.0, 0.5, 1.0 + f32::EPSILON as f64, 1.0 - f32::EPSILON as f64 / 2.0];
    for m in [
        1.4e-45,
        1e-40,
        1.1754942e-38,
        1.1754944e-38,
        1e-30,
        1e-7,
        1e-3,
        0.1,
        0.7,
        5.0,
        10.0,
        15.0,
        30.0,
        50.0,
        87.0,
        87.33,
        87.34,
        88.0,
        88.5,
        88.72,
        88.73,
        89.0,
        100.0,
        103.0,
        103.9,
        104.0,
        125.9,
        126.0,
        126.5,
        127.0,
        127.99,
        128.0,
        140.0,
        149.0,
        149.5,
        150.0,
        1e10,
        1e19,
        1e30,
        8.5e37,
        1e38,
        3.4e38,
    ] {
        v.extend([m, -m]);
    }
    v.extend([f64::INFINITY, f64::NEG_INFINITY, f64::NAN]);
    v.extend(data(71, 400, -110.0, 110.0, DType::F32));
    v.extend(data(72, 200, -1.0, 1.0, DType::F32).into_iter().map(|u| 2f64.powf(u * 120.0)));
    v.into_iter().map(|x| x as f32 as f64).collect()
}

/// The CPU backend (C and Rust) stays within the error bound that
/// `docs/numerics.md` states for each op, against the interpreter's f64
/// values, at the extremes of f32 (`exp` near 88, `sigmoid` at ±100, the
/// subnormals): the table and this test read the same rows.
#[test]
fn the_cpu_backend_keeps_the_stated_error_bounds_at_the_extremes() {
    let table = bound_table();
    let named: Vec<&str> = table.iter().map(|(op, _)| op.as_str()).collect();
    let tested: Vec<&str> = OPS.iter().map(|(op, _)| *op).collect();
    assert_eq!(named, tested, "docs/numerics.md's table and this test list the same ops");
    let x = extremes();
    let n = x.len();
    // `y` pairs each `x` with an extreme of another kind, and a value in [-4, 4).
    let y: Vec<f64> = (0..n)
        .map(|i| if i % 2 == 0 { x[(i * 7 + 3) % n] } else { data(73 + i as u64, 1, -4.0, 4.0, DType::F32)[0] })
        .collect();
    // Mixed signs and magnitudes, no partial sum near overflow.
    let mut s = data(74, 999, -1.0, 1.0, DType::F32);
    s.extend([1e30, -1e30, 3e-39, 1e-7]);
    let outs: Vec<String> =
        (0..OPS.len()).map(|k| format!("o{k}: f32[{}]", if OPS[k].0 == "sum" { "" } else { "N" })).collect();
    let body: Vec<String> = OPS.iter().enumerate().map(|(k, (_, e))| format!("    o{k} = {e}")).collect();
    let names: Vec<String> = (0..OPS.len()).map(|k| format!("o{k}")).collect();
    let src = format!(
        "graph<N, M> bounds(x: f32[N], y: f32[N], s: f32[M]) -> ({}) {{\n{}\n    return {}\n}}",
        outs.join(", "),
        body.join("\n"),
        names.join(", ")
    );
    let g = load(&src);
    let lib = compile(&g);
    let ins = [x.clone(), y.clone(), s.clone()];
    let dims = [n as i64, s.len() as i64];
    let want = lib.interp(&ins, &dims).expect("the interpreter accepts the dims");
    let (c, r) = lib.run_unchecked(&ins, &dims);
    assert_eq!((c.rc, r.rc), (0, 0));
    let mut failures = Vec::new();
    for (k, ((op, text), want)) in table.iter().zip(&want).enumerate() {
        let width = |w: f64| match op.as_str() {
            // (n − 1)·u·Σ|s_i| (Higham, Accuracy and Stability, 2002, §4.2).
            "sum" => {
                assert_eq!(text, "(n − 1)·2^-24·Σ\\|s\\|", "sum's bound");
                (s.len() - 1) as f64 * 2f64.powi(-24) * s.iter().map(|v| v.abs()).sum::<f64>()
            }
            _ => Bound::parse(text).width(w),
        };
        for (who, run) in [("C", &c), ("Rust", &r)] {
            let outside = run.outputs[k].iter().zip(want).enumerate().filter(|(_, (&g, &w))| !within(g, w, width(w)));
            let count = outside.clone().count();
            // The worst case of each op, and how many there are.
            let worst = outside.max_by(|a, b| {
                let ratio =
                    |(g, w): (&f64, &f64)| if g.is_finite() { (g - w).abs() / width(*w) } else { f64::INFINITY };
                ratio(a.1).total_cmp(&ratio(b.1))
            });
            if let Some((i, (got, w))) = worst {
                let at = if op == "sum" { String::new() } else { format!(" at x = {:e}, y = {:e}", x[i], y[i]) };
                failures.push(format!(
                    "{who} `{op}`: {count} outside {text}; worst{at}: {got:e}, the interpreter {w:e} ({:.3e} off, ulp {:e})",
                    (got - w).abs(),
                    ulp(*w)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{} outside the bound:\n{}", failures.len(), failures.join("\n"));
}
