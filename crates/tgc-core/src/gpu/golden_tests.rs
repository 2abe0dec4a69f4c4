//! Golden `gpu` and `cu` dumps: every template of the driver's list at one
//! fixed problem of its pattern, and every SIMT form, as the GPU dialect
//! text ([`dialect::Kernel`]'s `Display`, one `// {form} form` line before each
//! launch) and the CUDA C unit of the program's kernels (what the `cu`
//! dump prints). `UPDATE_EXPECT=1` rewrites `snapshots/golden/`; a change
//! there is a change of generated code and is reviewed as one.

use super::dialect;
use super::driver::TEMPLATES;
use super::driver::{lower_program, lower_program_with};
use super::program::GpuProgram;
use super::template::GraphPattern;
use crate::emit::cuda;
use crate::pipeline::{self, Format};
use crate::plan::cost::Analytic;
use crate::plan::target::{SM80, SM90};
use crate::tiny::Graph;

fn load(src: &str) -> Graph {
    pipeline::load(src, Format::Dsl, None).unwrap_or_else(|e| panic!("{e}\n{src}")).graph
}

/// A GEMM with a bias and a ReLU, 128 × 128 × 64 in f16.
const GEMM: &str = "graph gemm(x: f16[128, 64], w: f16[64, 128], b: f16[128]) -> (y: f16[128, 128]) {\n    y = \
                    relu(matmul(x, w) + b)\n    return y\n}\n";

/// A 3×3 stride-1 convolution with a bias and a ReLU (NCHW, f16): the
/// implicit GEMM of the GEMM templates, and what Winograd takes.
const CONV: &str = "graph conv(x: f16[2, 16, 8, 8], w: f16[32, 16, 3, 3], b: f16[32]) -> (y: f16[2, 32, 8, 8]) {\n    \
                    c = conv2d(x, w, bias=b, stride=[1, 1], pad=[1, 1, 1, 1], dilation=[1, 1], groups=1)\n    y = \
                    relu(c)\n    return y\n}\n";

/// An attention with head and value dimension 64 (f16).
const ATTENTION: &str = "graph att(q: f16[1, 2, 64, 64], k: f16[1, 2, 64, 64], v: f16[1, 2, 64, 64]) -> (o: f16[1, \
                         2, 64, 64]) {\n    o = attention(q, k, v)\n    return o\n}\n";

/// The `gpu` dump of `prog`'s launches: each kernel's text after a line
/// naming its form.
fn gpu_text(prog: &GpuProgram) -> String {
    let mut out = String::new();
    for l in &prog.launches {
        out.push_str(&format!("// {:?} form\n", l.form));
        out.push_str(&l.kernel.to_string());
    }
    out
}

/// Checks `prog`'s `gpu` and `cu` dumps against `snapshots/golden/{name}.gpu`
/// and `.cu`.
fn check(name: &str, prog: &GpuProgram) {
    let cu = cuda::print_unit(&prog.kernels()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/gpu/snapshots/golden");
    expect_test::expect_file![dir.join(format!("{name}.gpu"))].assert_eq(&gpu_text(prog));
    expect_test::expect_file![dir.join(format!("{name}.cu"))].assert_eq(&cu);
}

/// `name` in lower case with every run of other characters one `_`.
fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_matches('_').to_string()
}

/// Every template entry on the fixed problems of its pattern: a GEMM
/// template on the GEMM and the convolution (its implicit loader),
/// Winograd on the convolution, attention on the attention.
#[test]
fn every_template_at_a_fixed_problem() {
    let gemm = load(GEMM);
    let conv = load(CONV);
    let att = load(ATTENTION);
    for t in TEMPLATES {
        let target = match t.arch {
            dialect::Arch::Sm80 => &SM80,
            dialect::Arch::Sm90 => &SM90,
        };
        let problems: Vec<(&str, &Graph)> = match (t.pattern, t.algo_choice) {
            (GraphPattern::Contraction, super::winograd::ALGO) => vec![("conv", &conv)],
            (GraphPattern::Contraction, _) => vec![("gemm", &gemm), ("conv", &conv)],
            (GraphPattern::Attention, _) => vec![("att", &att)],
        };
        let fallback = if t.fallback { "_fallback" } else { "" };
        for (problem, g) in problems {
            let lowered = (t.lower)(g, target, &Analytic).unwrap_or_else(|e| panic!("{}: {e}", t.name));
            check(&format!("{}{fallback}_{problem}", slug(t.name)), &lowered.program);
        }
    }
}

/// The SIMT forms of the driver's programs: element-wise (vectorised and
/// scalar), a warp reduction, a serial reduction, the row forms (in
/// registers, in shared memory, in global memory), a scan in one tile and
/// in three passes; and a larger graph whose contraction regions take the
/// GEMM template and whose softmax the rows.
#[test]
fn every_simt_form_at_a_fixed_problem() {
    let simt: [(&str, &str); 9] = [
        (
            "elementwise_vec",
            "graph e(x: f32[8, 64], y: f32[64]) -> (z: f32[8, 64]) {\n    z = gelu(x + y)\n    return z\n}\n",
        ),
        (
            "elementwise_scalar",
            "graph e(x: f16[7, 5]) -> (z: f16[5, 7]) {\n    z = permute(x, [1, 0]) * 2\n    return z\n}\n",
        ),
        ("warp_reduce", "graph r(x: f32[6, 1000]) -> (s: f32[6]) {\n    s = sum(x, [1])\n    return s\n}\n"),
        ("serial", "graph r(x: f32[6, 5, 3]) -> (s: f32[6, 3]) {\n    s = max(x, [1])\n    return s\n}\n"),
        ("rows_registers", "graph s(x: f16[5, 72]) -> (y: f16[5, 72]) {\n    y = softmax(x * 3)\n    return y\n}\n"),
        (
            "rows_shared",
            "graph l(x: bf16[3, 264], g: bf16[264], b: bf16[264]) -> (y: bf16[3, 264]) {\n    y = layernorm(x, g, b, \
             -1)\n    return y\n}\n",
        ),
        ("rows_global", "graph s(x: f32[2, 8192]) -> (y: f32[2, 8192]) {\n    y = softmax(x)\n    return y\n}\n"),
        ("scan_tile", "graph t(x: f32[3, 300]) -> (y: f32[3, 300]) {\n    y = cumsum(x, -1)\n    return y\n}\n"),
        ("scan_passes", "graph t(x: f32[2, 5000]) -> (y: f32[2, 5000]) {\n    y = cumsum(x, -1)\n    return y\n}\n"),
    ];
    for (name, src) in simt {
        let prog = lower_program(&load(src)).unwrap_or_else(|e| panic!("{name}: {e}"));
        check(&format!("simt_{name}"), &prog);
    }
    let mlp = "graph mlp(x: f16[40, 32], w1: f16[32, 64], b1: f16[64], w2: f16[64, 24]) -> (y: f16[40, 24]) {\n    h \
               = relu(matmul(x, w1) + b1)\n    y = softmax(matmul(h, w2), -1)\n    return y\n}\n";
    let g = load(mlp);
    for (arch, target) in [("sm80", &SM80), ("sm90", &SM90)] {
        let prog = lower_program_with(&g, target, &Analytic).unwrap_or_else(|e| panic!("{e}"));
        check(&format!("regions_{arch}_mlp_softmax"), &prog);
    }
}
