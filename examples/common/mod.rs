//! Shared by the examples: deterministic inputs and the check against the
//! reference interpreter (`tgc_core::interp`), run on the kernel's own Tiny IR.

use std::collections::BTreeMap;

use tgc_core::interp::{self, Tensor};
use tgc_core::DType;

pub use tgc_runtime::tensor::sample_values as values;

/// Runs `tiny_json` on the interpreter and compares output `k` with `got`
/// within its dtype's tolerance (absolute and relative): 1e-5 for f32 (about
/// 84 units in the last place; the emit harness's `Tol::F32`, for the same
/// reasons: the few-ulp bounds of `docs/numerics.md` and a sum in another
/// order, its floor that relative error of the inputs' terms in [-1, 1)),
/// 1e-3 for f16 and bf16 (`spec/000` §9), exact for i32 and bool; returns
/// the max abs error.
pub fn check(tiny_json: &str, dims: &[(&str, i64)], inputs: Vec<Tensor>, got: &[f64], k: usize) -> f64 {
    let g = tgc_core::tiny::json::load_json(tiny_json).expect("the kernel's Tiny IR loads");
    let dims: BTreeMap<String, i64> = dims.iter().map(|(s, v)| (s.to_string(), *v)).collect();
    let want = interp::run(&g, &dims, &inputs).expect("the interpreter runs");
    let tol = match want[k].dtype {
        DType::F32 => 1e-5,
        DType::F16 | DType::BF16 => 1e-3,
        DType::I32 | DType::Bool => 0.0,
    };
    let want = &want[k].data;
    assert_eq!(want.len(), got.len());
    let mut max_err = 0.0f64;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        assert!(err <= tol + tol * w.abs(), "element {i}: kernel {g} vs interpreter {w} (tolerance {tol:e})");
        max_err = max_err.max(err);
    }
    max_err
}

/// An interpreter tensor from f64 values (rounded to `dtype`).
pub fn tensor(dtype: DType, shape: &[usize], data: &[f64]) -> Tensor {
    Tensor::new(dtype, shape, data.to_vec()).expect("valid tensor")
}
