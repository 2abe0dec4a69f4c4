//! `tgc import MODEL.onnx --out DIR` and `tgc run --inputs PATH`: an ONNX
//! model written here, imported, and run from its `.tgc` with its
//! `weights.safetensors` gives the outputs `tgc run` gives on the model
//! itself, bit for bit.

use std::path::{Path, PathBuf};

use onnx_protobuf::tensor_shape_proto::{dimension, Dimension};
use onnx_protobuf::type_proto::{self, Tensor as TensorType};
use onnx_protobuf::{
    AttributeProto, GraphProto, Message, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto,
    TypeProto, ValueInfoProto,
};
use protobuf::MessageField;
use tgc_runtime::{npy, safetensors_io, DType, HostTensor};

mod common;
use common::{stderr, temp, tgc};

const FLOAT: i32 = 1;
const INT64: i32 = 7;

fn tensor_info(name: &str, dims: &[Result<i64, &str>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Ok(v) => dimension::Value::DimValue(*v),
                Err(p) => dimension::Value::DimParam(p.to_string()),
            }),
            ..Default::default()
        })
        .collect();
    let tensor = TensorType {
        elem_type: FLOAT,
        shape: MessageField::some(TensorShapeProto { dim, ..Default::default() }),
        ..Default::default()
    };
    ValueInfoProto {
        name: name.into(),
        type_: MessageField::some(TypeProto {
            value: Some(type_proto::Value::TensorType(tensor)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(op: &str, inputs: &[&str], output: &str, attribute: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: format!("{op}_{output}"),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        attribute,
        ..Default::default()
    }
}

/// `out = relu(input.1 · fc.weight + fc.bias)` over a symbolic batch, and
/// `picked`, columns 2 and 0 of `out` (an int64 initializer, an i32 weight).
fn model(op: &str) -> Vec<u8> {
    let w: Vec<f32> = (0..12).map(|k| (k as f32 - 5.5) / 3.0).collect();
    let inits = vec![
        TensorProto {
            name: "fc.weight".into(),
            dims: vec![4, 3],
            data_type: FLOAT,
            float_data: w,
            ..Default::default()
        },
        TensorProto {
            name: "fc.bias".into(),
            dims: vec![3],
            data_type: FLOAT,
            float_data: vec![0.25, -0.5, 0.125],
            ..Default::default()
        },
        TensorProto {
            name: "idx".into(),
            dims: vec![2],
            data_type: INT64,
            int64_data: vec![2, 0],
            ..Default::default()
        },
    ];
    let axis = AttributeProto {
        name: "axis".into(),
        type_: protobuf::EnumOrUnknown::new(onnx_protobuf::attribute_proto::AttributeType::INT),
        i: 1,
        ..Default::default()
    };
    let nodes = vec![
        node("MatMul", &["input.1", "fc.weight"], "h", vec![]),
        node("Add", &["h", "fc.bias"], "z", vec![]),
        node(op, &["z"], "out", vec![]),
        node("Gather", &["out", "idx"], "picked", vec![axis]),
    ];
    let input = tensor_info("input.1", &[Err("batch"), Ok(4)]);
    model_bytes("tiny mlp", nodes, input, &["out", "picked"], inits, 17)
}

fn model_bytes(
    name: &str,
    node: Vec<NodeProto>,
    input: ValueInfoProto,
    outputs: &[&str],
    initializer: Vec<TensorProto>,
    opset: i64,
) -> Vec<u8> {
    let graph = GraphProto {
        name: name.into(),
        node,
        input: vec![input],
        output: outputs.iter().map(|o| ValueInfoProto { name: o.to_string(), ..Default::default() }).collect(),
        initializer,
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: opset, ..Default::default() }],
        graph: MessageField::some(graph),
        ..Default::default()
    };
    model.write_to_bytes().unwrap()
}

/// A folder with `model.onnx` and `x.npy` (a batch of 5).
fn setup(name: &str) -> PathBuf {
    let dir = temp(name);
    std::fs::write(dir.join("model.onnx"), model("Relu")).unwrap();
    let x: Vec<f64> = (0..20).map(|k| (k as f64 * 0.37).sin() * 2.0).collect();
    npy::write_npy(dir.join("x.npy"), &HostTensor::from_f64(DType::F32, &[5, 4], &x).unwrap()).unwrap();
    dir
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// Runs `tgc` and asserts it succeeded; returns stdout.
fn ok(args: &[&str]) -> String {
    let o = tgc(args);
    assert!(o.status.success(), "tgc {args:?}: {}", stderr(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// Runs `tgc` and asserts it failed with exit code 1; returns stderr.
fn fails(args: &[&str]) -> String {
    let o = tgc(args);
    assert_eq!(o.status.code(), Some(1), "tgc {args:?}: {}", stderr(&o));
    stderr(&o)
}

fn outputs(dir: &Path) -> Vec<Vec<u8>> {
    ["out", "picked"].iter().map(|o| std::fs::read(dir.join(format!("{o}.npy"))).unwrap()).collect()
}

#[test]
fn an_imported_model_runs_from_its_text_and_weights_like_the_model() {
    let dir = setup("import-run");
    let out = dir.join("imported");
    let said = ok(&["import", &path(&dir.join("model.onnx")), "--out", &path(&out)]);
    assert!(said.contains("tiny_mlp.tgc") && said.contains("weights.safetensors (3 tensors"), "{said}");
    let text = std::fs::read_to_string(out.join("tiny_mlp.tgc")).unwrap();
    assert!(text.starts_with("// Imported by `tgc import` from model.onnx (ONNX opset 17)."), "{text}");
    assert!(text.contains("// `input_1` is the model's `input.1`."), "{text}");
    assert!(text.contains("graph<batch> tiny_mlp(input_1: f32[batch, 4], fc_weight: f32[4, 3]"), "{text}");
    let w = safetensors_io::read_safetensors_tensor(out.join("weights.safetensors"), "idx").unwrap();
    assert_eq!((w.dtype(), w.to_f64_vec()), (DType::I32, vec![2.0, 0.0]));

    let x = format!("input.1={}", path(&dir.join("x.npy")));
    let (from_text, from_model) = (dir.join("from_text"), dir.join("from_model"));
    let weights = path(&out.join("weights.safetensors"));
    ok(&[
        "run",
        &path(&out.join("tiny_mlp.tgc")),
        "--inputs",
        &weights,
        "--input",
        &x.replace("input.1", "input_1"),
        "--output-dir",
        &path(&from_text),
    ]);
    ok(&["run", &path(&dir.join("model.onnx")), "--input", &x, "--output-dir", &path(&from_model)]);
    assert_eq!(outputs(&from_text), outputs(&from_model));
    let picked = npy::read_npy(from_model.join("picked.npy")).unwrap();
    assert_eq!(picked.shape(), [5, 2]);

    // The model's own weights can be overridden from a file too.
    let both = fails(&[
        "run",
        &path(&dir.join("model.onnx")),
        "--inputs",
        &weights,
        "--input",
        &format!("fc.bias={}", path(&dir.join("x.npy"))),
    ]);
    assert!(both.contains("input `fc_bias` is given twice"), "{both}");
}

#[test]
fn inputs_come_from_a_folder_of_npy_files() {
    let dir = setup("import-folder");
    let out = dir.join("imported");
    ok(&["import", &path(&dir.join("model.onnx")), "--out", &path(&out)]);
    let folder = dir.join("inputs");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::copy(dir.join("x.npy"), folder.join("input_1.npy")).unwrap();
    for name in ["fc_weight", "fc_bias", "idx"] {
        let t = safetensors_io::read_safetensors_tensor(out.join("weights.safetensors"), name).unwrap();
        npy::write_npy(folder.join(format!("{name}.npy")), &t).unwrap();
    }
    std::fs::write(folder.join("notes.txt"), "not an input").unwrap();
    let graph = path(&out.join("tiny_mlp.tgc"));
    let (a, b) = (dir.join("a"), dir.join("b"));
    ok(&["run", &graph, "--inputs", &path(&folder), "--backend", "interp", "--output-dir", &path(&a)]);
    let weights = path(&out.join("weights.safetensors"));
    let x = format!("input_1={}", path(&dir.join("x.npy")));
    ok(&["run", &graph, "--inputs", &weights, "--input", &x, "--backend", "interp", "--output-dir", &path(&b)]);
    assert_eq!(outputs(&a), outputs(&b));

    let e = fails(&["run", &graph, "--inputs", &path(&folder), "--input", &x]);
    assert!(e.contains("input `input_1` is given twice"), "{e}");
    std::fs::copy(dir.join("x.npy"), folder.join("extra.npy")).unwrap();
    let e = fails(&["run", &graph, "--inputs", &path(&folder)]);
    assert!(e.contains("the graph has no input `extra`"), "{e}");
    let e = fails(&["run", &graph, "--inputs", &path(&folder.join("notes.txt"))]);
    assert!(e.contains("expected a folder of NAME.npy files or a .safetensors file"), "{e}");
}

#[test]
fn a_model_that_does_not_import_writes_nothing_and_names_the_node() {
    let dir = temp("import-bad");
    let bad = dir.join("bad.onnx");
    std::fs::write(&bad, model("NoSuchOp")).unwrap();
    let out = dir.join("never");
    let e = fails(&["import", &path(&bad), "--out", &path(&out)]);
    assert!(e.contains("bad.onnx") && e.contains("#2 `NoSuchOp_out` (NoSuchOp, opset 17)"), "{e}");
    let bytes = model("Relu");
    std::fs::write(&bad, &bytes[..bytes.len() / 2]).unwrap();
    let e = fails(&["import", &path(&bad), "--out", &path(&out)]);
    assert!(e.contains("bad.onnx") && e.contains("error[SyntaxError]"), "{e}");
    // Imported, but with no graph-language text: refused naming the node.
    let dilations = AttributeProto {
        name: "dilations".into(),
        type_: protobuf::EnumOrUnknown::new(onnx_protobuf::attribute_proto::AttributeType::INTS),
        ints: vec![2],
        ..Default::default()
    };
    let kernel = AttributeProto { name: "kernel_shape".into(), ints: vec![2], ..dilations.clone() };
    let pool = node("AveragePool", &["x"], "y", vec![kernel, dilations]);
    std::fs::write(&bad, model_bytes("pool", vec![pool], tensor_info("x", &[Ok(1), Ok(1), Ok(8)]), &["y"], vec![], 19))
        .unwrap();
    let e = fails(&["import", &path(&bad), "--out", &path(&out)]);
    assert!(e.contains("#0 `AveragePool_y` (AveragePool, opset 19)") && e.contains("dilated average pool"), "{e}");
    assert!(!out.exists(), "a failed import created {}", out.display());
}
