//! The model `mlp` (`build.rs`: `.model(&["x"])`) from Rust: its weights
//! loaded once into a ConstPool, from typed slices, from a `.safetensors`
//! file by name and from a folder of `.npy` files, and `Model::run` giving
//! the bits of the module's `run` with the weights passed by hand.

use tgc::model::{write_weight, ConstPool, Npy, Safetensors, WeightSpec, POOL_ALIGN};
use tgc::{DType, HostTensor};
use tgc_build_demo::mlp;

/// Deterministic values in [-1, 1).
fn values(seed: u32, n: usize) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            (s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

/// Each weight's values, by its index in `mlp::WEIGHTS`.
fn weights() -> Vec<Vec<f32>> {
    mlp::WEIGHTS.iter().enumerate().map(|(i, w)| values(i as u32 + 1, w.elements().unwrap())).collect()
}

#[test]
fn the_model_runs_as_the_module_with_its_weights() {
    let w = weights();
    let model = mlp::Model::init(&mut |spec: &WeightSpec, dst: &mut [u8]| {
        let k = mlp::WEIGHTS.iter().position(|s| s == spec).unwrap();
        write_weight(spec, dst, &w[k])
    })
    .unwrap();
    let pool: &ConstPool = model.const_pool();
    assert_eq!(pool.specs().iter().map(|s| s.name).collect::<Vec<_>>(), ["w1", "b1", "w2", "b2"]);
    assert!((0..4).all(|k| pool.offset(k).is_multiple_of(POOL_ALIGN)));
    for b in [4, 3] {
        let x = values(99, b * 16);
        let (mut got, mut want) = (vec![0.0f32; b * 8], vec![0.0f32; b * 8]);
        model.run(&x, &mut got, b).unwrap();
        mlp::run(&x, &w[0], &w[1], &w[2], &w[3], &mut want, b).unwrap();
        assert_eq!(got, want, "B = {b}");
    }
    // The run's own checks.
    let e = model.run(&[0.0; 15], &mut [0.0; 8], 1).unwrap_err();
    assert!(matches!(e, tgc::Error::LengthMismatch { .. }), "{e}");
}

#[test]
fn weights_load_from_safetensors_by_name() {
    let w = weights();
    let bytes: Vec<Vec<u8>> = w.iter().map(|v| v.iter().flat_map(|x| x.to_le_bytes()).collect()).collect();
    let views = mlp::WEIGHTS.iter().zip(&bytes).map(|(spec, b)| {
        let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, spec.shape.to_vec(), b).unwrap();
        (format!("mlp.{}", spec.name), view)
    });
    let file = safetensors::serialize(views, &None).unwrap();
    let model = mlp::Model::init(&mut Safetensors::new(&file).rename(|n| format!("mlp.{n}"))).unwrap();
    for (k, values) in w.iter().enumerate() {
        assert_eq!(model.const_pool().get::<f32>(k), values.as_slice());
    }
    let e = mlp::Model::init(&mut Safetensors::new(&file)).err().expect("no tensor `w1`");
    assert!(e.to_string().contains("no tensor `w1`"), "{e}");
}

/// `Model::init` from `DIR/<weight>.npy` and from a `.safetensors` file on
/// disk, as a user crate reads them through the facade alone; a file of
/// the wrong shape or a missing one is an error naming the file and the
/// weight.
#[test]
fn weights_load_from_npy_and_safetensors_files() {
    let w = weights();
    let dir = std::env::temp_dir().join(format!("tgc-build-demo-npy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tensors: Vec<(String, HostTensor)> = mlp::WEIGHTS
        .iter()
        .zip(&w)
        .map(|(spec, v)| (spec.name.to_string(), HostTensor::from_f32(DType::F32, spec.shape, v).unwrap()))
        .collect();
    for (name, t) in &tensors {
        tgc::npy::write_npy(dir.join(format!("{name}.npy")), t).unwrap();
    }
    let file = dir.join("mlp.safetensors");
    std::fs::write(&file, tgc::safetensors_io::to_safetensors(&tensors, &[]).unwrap()).unwrap();
    let x = values(99, 3 * 16);
    let mut want = vec![0.0f32; 3 * 8];
    mlp::run(&x, &w[0], &w[1], &w[2], &w[3], &mut want, 3).unwrap();
    let from_npy = mlp::Model::init(&mut Npy::dir(&dir)).unwrap();
    let from_file = mlp::Model::init(&mut Safetensors::file(&file)).unwrap();
    for model in [from_npy, from_file] {
        let mut got = vec![0.0f32; 3 * 8];
        model.run(&x, &mut got, 3).unwrap();
        assert_eq!(got, want);
    }

    let w1 = &mlp::WEIGHTS[0];
    let (rows, cols) = (w1.shape[0], w1.shape[1]);
    let transposed = HostTensor::from_f32(DType::F32, &[cols, rows], &w[0]).unwrap();
    tgc::npy::write_npy(dir.join("w1.npy"), &transposed).unwrap();
    let e = mlp::Model::init(&mut Npy::dir(&dir)).err().expect("a transposed w1");
    let want = format!(
        "`{}` for weight `w1`: expected w1: f32[{rows}, {cols}], got f32[{cols}, {rows}]",
        dir.join("w1.npy").display()
    );
    assert_eq!(e.to_string(), want);
    tgc::npy::write_npy(dir.join("w1.npy"), &tensors[0].1).unwrap();
    std::fs::rename(dir.join("b2.npy"), dir.join("mlp.b2.npy")).unwrap();
    let e = mlp::Model::init(&mut Npy::dir(&dir)).err().expect("no b2.npy");
    let missing = dir.join("b2.npy").display().to_string();
    assert!(matches!(&e, tgc::Error::Io(m) if m.contains(&missing)), "{e}");
    let renamed = |w: &str| if w == "b2" { "mlp.b2.npy".to_string() } else { format!("{w}.npy") };
    assert!(mlp::Model::init(&mut Npy::dir(&dir).rename(renamed)).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_model_is_shared_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<mlp::Model>();
}
