use std::collections::BTreeMap;

use super::*;
use crate::diag::ErrorName;
use crate::tiny::load_json;

/// Runs a node-format graph whose first node is `x`, a `dtype` INPUT of
/// `shape`, on `data`, and returns its single output.
fn run1(dtype: &str, shape: &str, data: Vec<f64>, uops: &[&str]) -> Tensor {
    let text = format!(
        "{{\"uops\": [{{\"id\":\"x\",\"uop\":\"INPUT\",\"arg\":{{\"tensor_id\":\"X\",\"dtype\":\"{dtype}\",\"shape\":{shape}}}}},\n{}]}}",
        uops.join(",\n")
    );
    let g = load_json(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let in_shape: Vec<usize> = serde_json::from_str(shape).unwrap();
    let t = Tensor::new(DType::parse(dtype).unwrap(), &in_shape, data).unwrap();
    let mut out = run(&g, &BTreeMap::new(), &[t]).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(out.len(), 1);
    out.remove(0)
}

fn iota(n: usize) -> Vec<f64> {
    (0..n).map(|v| v as f64).collect()
}

#[test]
fn movement_ops_follow_their_definitions() {
    let x = || iota(6); // [[0,1,2],[3,4,5]]
    let t = run1("fp32", "[2,3]", x(), &[r#"{"id":"y","uop":"PERMUTE","src":["x"],"arg":{"perm":[1,0]}}"#]);
    assert_eq!((t.shape.as_slice(), t.data.as_slice()), (&[3, 2][..], &[0., 3., 1., 4., 2., 5.][..]));
    let t = run1("fp32", "[2,3]", x(), &[r#"{"id":"y","uop":"RESHAPE","src":["x"],"arg":{"result_shape":[3,1,2]}}"#]);
    assert_eq!((t.shape.as_slice(), t.data), (&[3, 1, 2][..], x()));
    let t =
        run1("fp32", "[2,1]", vec![7., 8.], &[r#"{"id":"y","uop":"EXPAND","src":["x"],"arg":{"result_shape":[2,3]}}"#]);
    assert_eq!(t.data, [7., 7., 7., 8., 8., 8.]);
    let t = run1("fp32", "[2,3]", x(), &[r#"{"id":"y","uop":"FLIP","src":["x"],"arg":{"axes":[0,1]}}"#]);
    assert_eq!(t.data, [5., 4., 3., 2., 1., 0.]);
    let t = run1(
        "fp32",
        "[2,3]",
        x(),
        &[r#"{"id":"y","uop":"SHRINK","src":["x"],"arg":{"lo":[1,0],"hi":[2,3],"step":[1,2]}}"#],
    );
    assert_eq!((t.shape.as_slice(), t.data.as_slice()), (&[1, 2][..], &[3., 5.][..]));
    let t =
        run1("fp32", "[2,3]", x(), &[r#"{"id":"y","uop":"PAD","src":["x"],"arg":{"pad":[[1,0],[0,1]],"value":-1}}"#]);
    assert_eq!(t.shape, [3, 4]);
    assert_eq!(t.data, [-1., -1., -1., -1., 0., 1., 2., -1., 3., 4., 5., -1.]);
}

#[test]
fn views_gather_by_their_index_map() {
    // Affine: sliding windows of 2 over [0,1,2,3] with stride 1.
    let t = run1(
        "fp32",
        "[4]",
        iota(4),
        &[r#"{"id":"y","uop":"VIEW","src":["x"],"arg":{"result_shape":[3,2],"index_map":["i0 + i1"]}}"#],
    );
    assert_eq!(t.data, [0., 1., 1., 2., 2., 3.]);
    // With a floor division: every element twice.
    let t = run1(
        "fp32",
        "[3]",
        iota(3),
        &[r#"{"id":"y","uop":"VIEW","src":["x"],"arg":{"result_shape":[6],"index_map":["floor(i0 / 2)"]}}"#],
    );
    assert_eq!(t.data, [0., 0., 1., 1., 2., 2.]);
    // POOL 2x2 stride 2 over a 4x4 image, then max over the window.
    let t = run1(
        "fp32",
        "[4,4]",
        iota(16),
        &[
            r#"{"id":"w","uop":"POOL","src":["x"],"arg":{"kernel":[2,2],"stride":[2,2]}}"#,
            r#"{"id":"y","uop":"REDUCE","src":["w"],"arg":{"op":"MAX","axes":[2,3],"dtype":"fp32"}}"#,
        ],
    );
    assert_eq!((t.shape.as_slice(), t.data.as_slice()), (&[2, 2][..], &[5., 7., 13., 15.][..]));
}

#[test]
fn reduce_accumulates_exactly_then_rounds_to_the_accumulator() {
    let t = run1(
        "fp32",
        "[2,3]",
        iota(6),
        &[r#"{"id":"y","uop":"REDUCE","src":["x"],"arg":{"op":"SUM","axes":[0],"dtype":"fp32"}}"#],
    );
    assert_eq!(t.data, [3., 5., 7.]);
    let t = run1(
        "fp32",
        "[2,3]",
        iota(6),
        &[r#"{"id":"y","uop":"REDUCE","src":["x"],"arg":{"op":"MIN","axes":[1],"dtype":"fp32"}}"#],
    );
    assert_eq!(t.data, [0., 3.]);
    // 2048 + 1 + 1: fp16 holds 2048 and 2050 but not 2049; the sum is exact in
    // f64 and rounded once at the end.
    let t = run1(
        "fp16",
        "[3]",
        vec![2048., 1., 1.],
        &[r#"{"id":"y","uop":"REDUCE","src":["x"],"arg":{"op":"SUM","axes":[0],"dtype":"fp16"}}"#],
    );
    assert_eq!((t.dtype, t.shape.len(), t.data.as_slice()), (DType::F16, 0, &[2050.][..]));
}

#[test]
fn elementwise_ops_compute_in_f64_and_round_only_at_cast() {
    let t = run1("fp32", "[4]", vec![-2., 0.25, 1., 4.], &[r#"{"id":"y","uop":"EXP2","src":["x"]}"#]);
    assert_eq!(t.data, [0.25, 2f64.powf(0.25), 2., 16.]);
    let t = run1("fp32", "[3]", vec![0.25, 1., 4.], &[r#"{"id":"y","uop":"RSQRT","src":["x"]}"#]);
    assert_eq!(t.data, [2., 1., 0.5]);
    let t = run1(
        "fp32",
        "[3]",
        vec![-1.5, 0., 2.],
        &[r#"{"id":"y","uop":"RELU","src":["x"]}"#, r#"{"id":"z","uop":"NEG","src":["y"]}"#],
    );
    assert_eq!(t.data, [0., 0., -2.]);
    // RECIP is not rounded to fp16: (1/3)·3 is exactly 1.
    let t = run1(
        "fp16",
        "[1]",
        vec![3.],
        &[r#"{"id":"r","uop":"RECIP","src":["x"]}"#, r#"{"id":"m","uop":"MUL","src":["r",3]}"#],
    );
    assert_eq!(t.data, [1.0]);
    let t = run1("fp32", "[3]", vec![-2.7, 0.5, 3.9], &[r#"{"id":"y","uop":"CAST","src":["x"],"arg":{"to":"i32"}}"#]);
    assert_eq!((t.dtype, t.data.as_slice()), (DType::I32, &[-2., 0., 3.][..]));
    let t = run1(
        "fp32",
        "[3]",
        vec![1., 1.0 + 1.0 / 4096.0, 3.],
        &[r#"{"id":"y","uop":"CAST","src":["x"],"arg":{"to":"fp16"}}"#],
    );
    assert_eq!(t.data, [1., 1., 3.]);
}

#[test]
fn comparisons_give_flags_that_where_selects_on() {
    let t = run1(
        "fp32",
        "[4]",
        vec![-1., 2., 0., 5.],
        &[
            r#"{"id":"c","uop":"CMPLT","src":["x",1]}"#,
            r#"{"id":"e","uop":"CMPEQ","src":["x",5]}"#,
            r#"{"id":"f","uop":"CAST","src":["e"],"arg":{"to":"fp32"}}"#,
            r#"{"id":"y","uop":"WHERE","src":["c","x","f"]}"#,
        ],
    );
    assert_eq!(t.data, [-1., 0., 0., 1.]);
}

#[test]
fn outputs_come_in_graph_order() {
    let text = r#"{"uops":[
        {"id":"x","uop":"INPUT","arg":{"tensor_id":"X","dtype":"fp32","shape":["N"]}},
        {"id":"n","uop":"NEG","src":["x"]},
        {"id":"s","uop":"REDUCE","src":["n"],"arg":{"op":"SUM","axes":["N"],"dtype":"fp32"}}],
      "outputs":[{"name":"total","id":"s"},{"name":"neg","id":"n"},{"name":"again","id":"s"}]}"#;
    let g = load_json(text).unwrap();
    let t = Tensor::new(DType::F32, &[3], vec![1., 2., 3.]).unwrap();
    let out = run(&g, &BTreeMap::new(), &[t]).unwrap();
    assert_eq!(out.iter().map(|t| t.data.clone()).collect::<Vec<_>>(), [vec![-6.], vec![-1., -2., -3.], vec![-6.]]);
}

#[test]
fn bad_inputs_are_clear_errors() {
    let text = r#"{"uops":[
        {"id":"x","uop":"INPUT","arg":{"tensor_id":"X","dtype":"fp16","shape":["M",4]}},
        {"id":"y","uop":"INPUT","arg":{"tensor_id":"Y","dtype":"fp16","shape":["P"]}},
        {"id":"n","uop":"NEG","src":["x"]}]}"#;
    let g = load_json(text).unwrap();
    let none = BTreeMap::new();
    let x = Tensor::new(DType::F16, &[2, 4], vec![0.; 8]).unwrap();
    let y = Tensor::new(DType::F16, &[3], vec![0.; 3]).unwrap();
    let name = |r: DResult<Vec<Tensor>>| r.unwrap_err().name;
    assert_eq!(name(run(&g, &none, std::slice::from_ref(&x))), ErrorName::Io);
    let x32 = Tensor { dtype: DType::F32, ..x.clone() };
    assert_eq!(name(run(&g, &none, &[x32, y.clone()])), ErrorName::DTypeMismatch);
    let x5 = Tensor::new(DType::F16, &[2, 5], vec![0.; 10]).unwrap();
    assert_eq!(name(run(&g, &none, &[x5, y.clone()])), ErrorName::AxisSizeMismatch);
    let short = Tensor { data: vec![0.; 7], ..x.clone() };
    assert_eq!(name(run(&g, &none, &[short, y.clone()])), ErrorName::Io);
    let m3: BTreeMap<String, i64> = [("M".to_string(), 3)].into();
    assert_eq!(name(run(&g, &m3, &[x.clone(), y.clone()])), ErrorName::AxisSizeMismatch);
    assert!(Tensor::new(DType::F16, &[2], vec![1.0]).is_err());
    assert!(Tensor::new(DType::F16, &[1 << 40, 1 << 40], vec![]).is_err());
    let huge: BTreeMap<String, i64> = [("M".to_string(), 1 << 40)].into();
    let big = Tensor { shape: vec![1 << 40, 4], ..x.clone() };
    assert_eq!(name(run(&g, &huge, &[big, y.clone()])), ErrorName::Io);
    assert_eq!(run(&g, &none, &[x, y]).unwrap().len(), 2, "outputs are the sinks `y` and `n`");
}

#[test]
fn a_node_too_large_to_hold_is_unsupported_not_a_crash() {
    let text = r#"{"uops":[
        {"id":"x","uop":"INPUT","arg":{"tensor_id":"X","dtype":"fp32","shape":[1,2]}},
        {"id":"e","uop":"EXPAND","src":["x"],"arg":{"result_shape":["M",2]}}]}"#;
    let g = load_json(text).unwrap();
    let m: BTreeMap<String, i64> = [("M".to_string(), 1 << 40)].into();
    let e = run(&g, &m, &[Tensor::new(DType::F32, &[1, 2], vec![1., 2.]).unwrap()]).unwrap_err();
    assert_eq!((e.name, e.node.as_deref()), (ErrorName::Unsupported, Some("e")));
}
