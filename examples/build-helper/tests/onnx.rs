//! The ONNX model `small_cnn` (`build.rs`: `.onnx(..)`): imported at build
//! time, its initializers embedded, run through the generated C; its
//! outputs against the reference interpreter on the same `.onnx` file.

use std::path::Path;

use tgc_build_demo::small_cnn;
use tgc_runtime::{DType, HostTensor};

fn input(batch: usize) -> Vec<f32> {
    tgc_runtime::tensor::sample_values(7, batch * 3 * 8 * 8).into_iter().map(|v| v as f32).collect()
}

/// The interpreter's logits for `x`, from the model file itself.
fn reference(x: &[f32], batch: usize) -> Vec<f32> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/small_cnn.onnx");
    let loaded = tgc_core::pipeline::load_onnx(&path, &[]).unwrap();
    let g = &loaded.graph;
    let mut ins = vec![HostTensor::from_f32(DType::F32, &[batch, 3, 8, 8], x).unwrap()];
    ins.extend(loaded.weights.iter().map(|(_, t)| t.clone()));
    let shapes: Vec<Vec<usize>> = ins.iter().map(|t| t.shape().to_vec()).collect();
    let bound = g.bind(&g.resolve_dims(&Default::default(), Some(&shapes)).unwrap()).unwrap();
    tgc_core::pipeline::run_interp(&bound, &ins).unwrap()[0].to_f32_vec()
}

#[test]
fn the_embedded_onnx_model_matches_the_interpreter() {
    let model = small_cnn::Model::embedded().unwrap();
    let names: Vec<&str> = small_cnn::WEIGHTS.iter().map(|w| w.name).collect();
    assert_eq!(names[0], "conv_weight", "the initializers are the weights, by their ONNX names made identifiers");
    for batch in [1, 3] {
        let x = input(batch);
        let mut y = vec![0.0f32; batch * 10];
        model.run(&x, &mut y, batch).unwrap();
        let want = reference(&x, batch);
        for (k, (g, w)) in y.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "batch {batch}, logit {k}: {g} vs {w}");
        }
    }
}
