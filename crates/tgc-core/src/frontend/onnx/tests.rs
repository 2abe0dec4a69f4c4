//! Tests of the ONNX importer on models built here (ONNX's own operator
//! cases run in `tests/onnx_node.rs`).

use std::collections::BTreeMap;

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::tensor_shape_proto::{dimension, Dimension};
use onnx_protobuf::type_proto::{self, Tensor as TensorType};
use onnx_protobuf::{
    AttributeProto, GraphProto, Message, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use protobuf::{EnumOrUnknown, MessageField};

use super::proto::code;
use super::*;
use crate::diag::ErrorName;

fn value_info(name: &str, elem: i32, dims: &[Result<i64, &str>]) -> ValueInfoProto {
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
        elem_type: elem,
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

fn floats(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: code::FLOAT,
        float_data: v.to_vec(),
        ..Default::default()
    }
}

fn int64s(name: &str, v: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: vec![v.len() as i64],
        data_type: code::INT64,
        int64_data: v.to_vec(),
        ..Default::default()
    }
}

fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto { name: name.into(), type_: EnumOrUnknown::new(AttributeType::INT), i: v, ..Default::default() }
}

fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: format!("{op}_{}", outputs.first().unwrap_or(&"")),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

struct M {
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<&'static str>,
    inits: Vec<TensorProto>,
    opset: i64,
}

impl M {
    fn new(nodes: Vec<NodeProto>, inputs: Vec<ValueInfoProto>, outputs: &[&'static str]) -> M {
        M { nodes, inputs, outputs: outputs.to_vec(), inits: Vec::new(), opset: 17 }
    }

    fn bytes(&self) -> Vec<u8> {
        let graph = GraphProto {
            name: "g".into(),
            node: self.nodes.clone(),
            input: self.inputs.clone(),
            output: self.outputs.iter().map(|o| ValueInfoProto { name: o.to_string(), ..Default::default() }).collect(),
            initializer: self.inits.clone(),
            ..Default::default()
        };
        let model = ModelProto {
            ir_version: 8,
            opset_import: vec![OperatorSetIdProto { domain: String::new(), version: self.opset, ..Default::default() }],
            graph: MessageField::some(graph),
            ..Default::default()
        };
        model.write_to_bytes().unwrap()
    }

    /// Imports the model; an import also prints in the graph language and
    /// reads back (`raise::to_source` checks it).
    fn import(&self) -> DResult<Imported> {
        let imported = import(&self.bytes(), None, &[])?;
        crate::frontend::raise::to_source(&imported.program).unwrap_or_else(|d| panic!("{}", d.message));
        Ok(imported)
    }
}

/// Runs an imported program on the interpreter with its weights and `x`.
fn run(imp: &Imported, x: &[HostTensor]) -> Vec<HostTensor> {
    let g = crate::frontend::to_tiny::lower_program(&imp.program, None).unwrap();
    let mut ins: Vec<HostTensor> = x.to_vec();
    ins.extend(imp.weights.iter().map(|(_, t)| t.clone()));
    let shapes: Vec<Vec<usize>> = ins.iter().map(|t| t.shape().to_vec()).collect();
    let bound = g.bind(&g.resolve_dims(&BTreeMap::new(), Some(&shapes)).unwrap()).unwrap();
    crate::pipeline::run_interp(&bound, &ins).unwrap()
}

#[test]
fn a_shape_chain_over_a_symbol_folds_to_one_reshape() {
    // y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])): PyTorch's
    // `x.view(x.size(0), -1)`.
    let nodes = vec![
        node("Shape", &["x"], &["s"], vec![]),
        node("Gather", &["s", "zero"], &["b"], vec![int_attr("axis", 0)]),
        node("Unsqueeze", &["b", "axes0"], &["b1"], vec![]),
        node("Concat", &["b1", "minus1"], &["shape"], vec![int_attr("axis", 0)]),
        node("Reshape", &["x", "shape"], &["y"], vec![]),
    ];
    let mut m = M::new(nodes, vec![value_info("x", code::FLOAT, &[Err("batch"), Ok(4), Ok(6)])], &["y"]);
    m.inits = vec![
        TensorProto { name: "zero".into(), data_type: code::INT64, int64_data: vec![0], ..Default::default() },
        int64s("axes0", &[0]),
        int64s("minus1", &[-1]),
    ];
    let imp = m.import().unwrap();
    let fg = &imp.program.graphs[0];
    assert_eq!(fg.syms, vec![("batch".to_string(), None)]);
    assert_eq!(fg.params.len(), 1, "the shape constants are folded, not weights");
    let ops: Vec<String> = fg.body.iter().map(|s| s.op.name()).collect();
    assert_eq!(ops, ["reshape"]);
    assert_eq!(fg.results[0].shape, vec![Dim::sym("batch"), Dim::int(24)]);
    let x = HostTensor::from_f64(DType::F32, &[2, 4, 6], &(0..48).map(f64::from).collect::<Vec<_>>()).unwrap();
    let y = run(&imp, &[x]);
    assert_eq!(y[0].shape(), &[2, 24]);
    assert_eq!(y[0].to_f64_vec()[30], 30.0);
}

#[test]
fn gemm_bias_relu_matches_a_hand_computation() {
    let nodes =
        vec![node("Gemm", &["x", "w", "b"], &["h"], vec![int_attr("transB", 1)]), node("Relu", &["h"], &["y"], vec![])];
    let mut m = M::new(nodes, vec![value_info("x", code::FLOAT, &[Ok(2), Ok(3)])], &["y"]);
    // w is [N=2, K=3] (transB), b [2].
    m.inits = vec![floats("w", &[2, 3], &[1.0, 0.0, -1.0, 0.5, 0.5, 0.5]), floats("b", &[2], &[0.5, -10.0])];
    let imp = m.import().unwrap();
    assert_eq!(imp.weights.len(), 2);
    let x = HostTensor::from_f64(DType::F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let y = run(&imp, &[x]);
    // Row 0: [1-3+0.5, relu(3-10)] ; row 1: [4-6+0.5, relu(7.5-10)].
    assert_eq!(y[0].to_f64_vec(), vec![0.0, 0.0, 0.0, 0.0]);
    let x = HostTensor::from_f64(DType::F32, &[2, 3], &[3.0, 0.0, 1.0, 10.0, 10.0, 2.0]).unwrap();
    let y = run(&imp, &[x]);
    assert_eq!(y[0].to_f64_vec(), vec![2.5, 0.0, 8.5, 1.0]);
}

#[test]
fn dead_nodes_identity_and_dropout_make_no_statement() {
    let nodes = vec![
        node("Identity", &["x"], &["a"], vec![]),
        node("Dropout", &["a"], &["b"], vec![]),
        node("NotAnOperator", &["x"], &["unused"], vec![]),
        node("Relu", &["b"], &["y"], vec![]),
    ];
    let m = M::new(nodes, vec![value_info("x", code::FLOAT, &[Ok(3)])], &["y"]);
    let imp = m.import().unwrap();
    let ops: Vec<String> = imp.program.graphs[0].body.iter().map(|s| s.op.name()).collect();
    assert_eq!(ops, ["relu"]);
}

#[test]
fn onnx_names_become_identifiers_and_map_back() {
    let nodes = vec![node("Relu", &["input.1"], &["output:0"], vec![])];
    let m = M::new(nodes, vec![value_info("input.1", code::FLOAT, &[Ok(3)])], &["output:0"]);
    let imp = m.import().unwrap();
    let fg = &imp.program.graphs[0];
    assert_eq!(fg.params[0].name, "input_1");
    assert_eq!(fg.results[0].name, "output_0");
    assert_eq!(imp.tgc_name("input.1"), "input_1");
    assert_eq!(imp.tgc_name("output:0"), "output_0");
}

/// The error of importing `m`, with its node, as rendered.
fn error(m: &M) -> (ErrorName, String) {
    let d = m.import().unwrap_err();
    (d.name, d.render("model.onnx"))
}

#[test]
fn bad_models_are_refused_naming_the_node_or_tensor() {
    let relu = || vec![node("Relu", &["x"], &["y"], vec![])];
    let x = || vec![value_info("x", code::FLOAT, &[Ok(3)])];

    let d = import(b"\xff\xff\xff not a model", None, &[]).unwrap_err();
    assert_eq!(d.name, ErrorName::SyntaxError);
    let bytes = M::new(relu(), x(), &["y"]).bytes();
    let d = import(&bytes[..bytes.len() / 2], None, &[]).unwrap_err();
    assert_eq!(d.name, ErrorName::SyntaxError, "a truncated model: {d}");

    let mut m = M::new(relu(), x(), &["y"]);
    m.opset = 5;
    let (name, text) = error(&m);
    assert_eq!(name, ErrorName::Unsupported);
    assert!(text.contains("opset 5"), "{text}");

    let mut m = M::new(relu(), x(), &["y"]);
    m.nodes[0].domain = "com.microsoft".into();
    let (name, text) = error(&m);
    assert_eq!(name, ErrorName::Unsupported);
    assert!(text.contains("com.microsoft") && text.contains("(node #0 `Relu_y` (Relu, opset 17))"), "{text}");

    // A cycle: a is read before any node defines it.
    let nodes = vec![node("Relu", &["a"], &["b"], vec![]), node("Relu", &["b"], &["a"], vec![])];
    let (name, text) = error(&M::new(nodes, x(), &["a"]));
    assert_eq!(name, ErrorName::UnknownName);
    assert!(text.contains("`a`") && text.contains("#0"), "{text}");

    let nodes = vec![node("Add", &["x", "missing"], &["y"], vec![])];
    let (name, text) = error(&M::new(nodes, x(), &["y"]));
    assert_eq!(name, ErrorName::UnknownName);
    assert!(text.contains("`missing`"), "{text}");

    let nodes = vec![node("Add", &["x", "w"], &["y"], vec![])];
    let mut m = M::new(nodes, x(), &["y"]);
    m.inits = vec![TensorProto {
        name: "w".into(),
        dims: vec![3],
        data_type: code::FLOAT,
        raw_data: vec![0; 8],
        ..Default::default()
    }];
    let (name, text) = error(&m);
    assert_eq!(name, ErrorName::AxisSizeMismatch);
    assert!(text.contains("tensor `w`") && text.contains("needs 12 bytes but holds 8"), "{text}");

    let nodes = vec![node("Add", &["i", "w"], &["y"], vec![])];
    let mut m = M::new(nodes, vec![value_info("i", code::INT64, &[Ok(3)])], &["y"]);
    m.inits = vec![int64s("w", &[1, 1 << 40, 2])];
    let (name, text) = error(&m);
    assert_eq!(name, ErrorName::Unsupported);
    assert!(text.contains("`w`") && text.contains("1099511627776"), "{text}");

    let nodes = vec![node("Relu", &["x"], &["y"], vec![int_attr("alpha", 2)])];
    let (name, text) = error(&M::new(nodes, x(), &["y"]));
    assert_eq!(name, ErrorName::Unsupported);
    assert!(text.contains("attribute `alpha` of Relu"), "{text}");

    let nodes = vec![node("StringNormalizer", &["x"], &["y"], vec![])];
    let (name, text) = error(&M::new(nodes, x(), &["y"]));
    assert_eq!(name, ErrorName::Unsupported);
    assert!(text.contains("operator StringNormalizer"), "{text}");

    let nodes = vec![node("Reshape", &["x", "x"], &["y"], vec![])];
    let (name, text) = error(&M::new(nodes, x(), &["y"]));
    assert_eq!(name, ErrorName::Unsupported);
    assert!(text.contains("computed at run time"), "{text}");
}

fn str_attr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::STRING),
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}

#[test]
fn loss_norm_one_hot_and_scatter_forms_not_taken_are_refused_naming_them() {
    let x = |dims: &[i64]| value_info("x", code::FLOAT, &dims.iter().map(|&d| Ok(d)).collect::<Vec<_>>());
    let t = || value_info("t", code::INT32, &[Ok(2)]);
    let at = |m: &mut M, opset| {
        m.opset = opset;
        error(m)
    };

    let nodes = vec![node("NegativeLogLikelihoodLoss", &["x", "t"], &["y"], vec![str_attr("reduction", "max")])];
    let (name, text) = at(&mut M::new(nodes, vec![x(&[2, 3]), t()], &["y"]), 13);
    assert_eq!(name, ErrorName::Unsupported);
    assert!(text.contains("reduction=`max`") && text.contains("NegativeLogLikelihoodLoss"), "{text}");

    // A target that is not [N, d1, ...] of scores [N, C, d1, ...].
    let nodes = vec![node("SoftmaxCrossEntropyLoss", &["x", "t"], &["y"], vec![])];
    let (name, text) = at(&mut M::new(nodes, vec![x(&[3, 2]), t()], &["y"]), 13);
    assert_eq!(name, ErrorName::AxisSizeMismatch);
    assert!(text.contains("target of shape"), "{text}");

    let nodes = vec![node("LpNormalization", &["x"], &["y"], vec![int_attr("p", 3)])];
    let (name, text) = at(&mut M::new(nodes, vec![x(&[2, 3])], &["y"]), 13);
    assert_eq!(name, ErrorName::Unsupported);
    assert!(text.contains("p=3"), "{text}");

    // OneHot's depth sizes its result: it must be known at import.
    let nodes = vec![node("OneHot", &["t", "d", "v"], &["y"], vec![])];
    let inputs = vec![t(), value_info("d", code::FLOAT, &[]), value_info("v", code::FLOAT, &[Ok(2)])];
    let (name, text) = at(&mut M::new(nodes, inputs, &["y"]), 13);
    assert_eq!(name, ErrorName::Unsupported);
    assert!(text.contains("depth") && text.contains("computed at run time"), "{text}");

    let nodes = vec![node("ScatterND", &["x", "i", "x"], &["y"], vec![])];
    let inputs = vec![x(&[4, 3]), value_info("i", code::INT32, &[Ok(2), Ok(1)])];
    let (name, text) = at(&mut M::new(nodes, inputs, &["y"]), 18);
    assert_eq!(name, ErrorName::AxisSizeMismatch);
    assert!(text.contains("ScatterND") && text.contains("updates of shape"), "{text}");
}

fn external(name: &str, location: &str) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: vec![3],
        data_type: code::FLOAT,
        data_location: EnumOrUnknown::from_i32(1),
        external_data: vec![
            StringStringEntryProto { key: "location".into(), value: location.into(), ..Default::default() },
            StringStringEntryProto { key: "offset".into(), value: "4".into(), ..Default::default() },
        ],
        ..Default::default()
    }
}

#[test]
fn external_data_is_read_inside_the_model_folder_only() {
    let dir = std::env::temp_dir().join(format!("tgc-onnx-ext-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("m")).unwrap();
    let bytes: Vec<u8> = [9.0f32, 1.0, 2.0, 3.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(dir.join("m/w.data"), &bytes).unwrap();
    std::fs::write(dir.join("outside.data"), &bytes).unwrap();
    let model = |loc: &str| {
        let mut m = M::new(
            vec![node("Add", &["x", "w"], &["y"], vec![])],
            vec![value_info("x", code::FLOAT, &[Ok(3)])],
            &["y"],
        );
        m.inits = vec![external("w", loc)];
        m.bytes()
    };
    let m_dir = dir.join("m");
    let imp = import(&model("w.data"), Some(&m_dir), &[]).unwrap();
    let x = HostTensor::from_f64(DType::F32, &[3], &[10.0, 20.0, 30.0]).unwrap();
    assert_eq!(run(&imp, &[x])[0].to_f64_vec(), vec![11.0, 22.0, 33.0]);
    for loc in ["../outside.data", "/etc/passwd", "sub/../../outside.data"] {
        let d = import(&model(loc), Some(&m_dir), &[]).unwrap_err();
        assert_eq!(d.name, ErrorName::Io, "{loc}: {d}");
        assert!(d.message.contains("inside the model's folder"), "{loc}: {d}");
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(dir.join("outside.data"), m_dir.join("link.data")).unwrap();
        let d = import(&model("link.data"), Some(&m_dir), &[]).unwrap_err();
        assert!(d.message.contains("resolves outside"), "{d}");
    }
    let d = import(&model("w.data"), None, &[]).unwrap_err();
    assert_eq!(d.name, ErrorName::Unsupported);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_operator_list_is_sorted() {
    assert!(ops::OPERATORS.windows(2).all(|w| w[0].name < w[1].name), "binary search needs a sorted list");
}

/// `docs/onnx_operators.md` from [`ops::OPERATORS`].
fn operator_table() -> String {
    let mut s = String::from(
        "# ONNX operators the importer takes\n\n\
         Generated from `tgc_core::frontend::onnx::ops::OPERATORS` (a test of \
         `frontend/onnx/tests.rs` holds this file to it; `UPDATE_EXPECT=1` rewrites it).\n\n\
         Every operator is of the default domain and every model must import an opset from \
         6 to 28. No operator takes tensors with a zero-size axis or of a type tgc does not \
         compute in (f32, f16, bf16, i32, bool; int64 is computed as int32, each value checked). \
         An operator or attribute not listed is refused with an error naming the node.\n\n\
         | operator | opsets | limits |\n| --- | --- | --- |\n",
    );
    for o in ops::OPERATORS {
        let first = o.since.max(MIN_OPSET);
        let limits = if o.limits.is_empty() { "—" } else { o.limits };
        s.push_str(&format!("| {} | {first}–{MAX_OPSET} | {limits} |\n", o.name));
    }
    s
}

#[test]
fn the_operator_table_in_docs_is_the_importers_list() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/onnx_operators.md");
    let table = operator_table();
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&path, &table).unwrap();
        return;
    }
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(doc == table, "docs/onnx_operators.md is not the importer's list; UPDATE_EXPECT=1 rewrites it");
}

#[test]
fn symbolic_range_runs_as_an_iota() {
    // positions = Range(0, Shape(x)[1], 1): BERT's position ids.
    let nodes = vec![
        node("Shape", &["x"], &["s"], vec![]),
        node("Gather", &["s", "one"], &["len"], vec![int_attr("axis", 0)]),
        node("Range", &["zero", "len", "one"], &["pos"], vec![]),
        node("Cast", &["pos"], &["y"], vec![int_attr("to", code::FLOAT as i64)]),
    ];
    let mut m = M::new(nodes, vec![value_info("x", code::FLOAT, &[Ok(1), Err("seq")])], &["y"]);
    let scalar = |n: &str, v: i64| TensorProto {
        name: n.into(),
        data_type: code::INT64,
        int64_data: vec![v],
        ..Default::default()
    };
    m.inits = vec![scalar("zero", 0), scalar("one", 1)];
    let imp = m.import().unwrap();
    let x = HostTensor::zeros(DType::F32, &[1, 5]).unwrap();
    assert_eq!(run(&imp, &[x])[0].to_f64_vec(), vec![0.0, 1.0, 2.0, 3.0, 4.0]);
}

/// A `Scan` node over `body` (nodes, input names, output names).
fn scan_node(inputs: &[&str], outputs: &[&str], body: (Vec<NodeProto>, &[&str], &[&str]), m: i64) -> NodeProto {
    let names = |v: &[&str]| v.iter().map(|n| ValueInfoProto { name: n.to_string(), ..Default::default() }).collect();
    let g = GraphProto {
        name: "body".into(),
        node: body.0,
        input: names(body.1),
        output: names(body.2),
        ..Default::default()
    };
    let body = AttributeProto {
        name: "body".into(),
        type_: EnumOrUnknown::new(AttributeType::GRAPH),
        g: MessageField::some(g),
        ..Default::default()
    };
    node("Scan", inputs, outputs, vec![body, int_attr("num_scan_inputs", m)])
}

#[test]
fn a_scan_body_binds_its_names_afresh_each_step() {
    // The body's state is named `c`, like a weight of the enclosing graph
    // that `Mul` has already made a run-time tensor: each step must read
    // the state, not the weight.
    let body = (
        vec![node("Add", &["c", "xt"], &["next"], vec![]), node("Identity", &["next"], &["out"], vec![])],
        &["c", "xt"][..],
        &["next", "out"][..],
    );
    let nodes = vec![node("Mul", &["x", "c"], &["m"], vec![]), scan_node(&["s0", "x"], &["y", "z"], body, 1)];
    let mut m = M::new(nodes, vec![value_info("x", code::FLOAT, &[Ok(3), Ok(2)])], &["m", "y", "z"]);
    m.inits = vec![floats("c", &[2], &[10.0, 20.0]), floats("s0", &[2], &[0.0, 0.0])];
    let imp = m.import().unwrap();
    let x = HostTensor::from_f64(DType::F32, &[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let out = run(&imp, &[x]);
    assert_eq!(out[0].to_f64_vec(), vec![10.0, 40.0, 30.0, 80.0, 50.0, 120.0]);
    assert_eq!(out[1].to_f64_vec(), vec![9.0, 12.0]);
    assert_eq!(out[2].to_f64_vec(), vec![1.0, 2.0, 4.0, 6.0, 9.0, 12.0]);
}

#[test]
fn recurrent_forms_not_taken_are_refused_by_name() {
    let x = || vec![value_info("x", code::FLOAT, &[Err("T"), Ok(1), Ok(2)])];
    let body = || (vec![node("Identity", &["xt"], &["out"], vec![])], &["xt"][..], &["out"][..]);
    let (name, text) = error(&M::new(vec![scan_node(&["x"], &["z"], body(), 1)], x(), &["z"]));
    assert_eq!(name, ErrorName::Unsupported);
    assert!(text.contains("Scan over the symbolic length `T`") && text.contains("(Scan, opset 17)"), "{text}");

    let strings = |name: &str, v: &[&str]| AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::STRINGS),
        strings: v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        ..Default::default()
    };
    let rnn = |attrs: Vec<AttributeProto>| {
        let mut m = M::new(
            vec![node("RNN", &["x", "w", "r"], &["", "h"], attrs)],
            vec![value_info("x", code::FLOAT, &[Ok(3), Ok(1), Ok(2)])],
            &["h"],
        );
        m.inits = vec![floats("w", &[1, 4, 2], &[0.5; 8]), floats("r", &[1, 4, 4], &[0.25; 16])];
        m
    };
    let (name, text) = error(&rnn(vec![strings("activations", &["Elu"])]));
    assert_eq!(name, ErrorName::Unsupported);
    assert!(text.contains("RNN activation `Elu`"), "{text}");
    let (name, text) = error(&rnn(vec![int_attr("hidden_size", 3)]));
    assert_eq!(name, ErrorName::AxisSizeMismatch);
    assert!(text.contains("R must be [1, 3, 3]") || text.contains("R [1, 3, 3]"), "{text}");
    assert!(rnn(vec![int_attr("hidden_size", 4)]).import().is_ok());
}

#[test]
fn a_dft_over_the_complex_axis_is_refused() {
    let x = vec![value_info("x", code::FLOAT, &[Ok(1), Ok(8), Ok(2)])];
    let mut m = M::new(vec![node("DFT", &["x"], &["y"], vec![int_attr("axis", 2)])], x, &["y"]);
    m.opset = 19;
    let (name, text) = error(&m);
    assert_eq!(name, ErrorName::InvalidAxis);
    assert!(text.contains("DFT axis 2 of a rank-3 input") && text.contains("(DFT, opset 19)"), "{text}");
    m.nodes[0].attribute = vec![int_attr("axis", 1)];
    assert!(m.import().is_ok());
}

#[test]
fn resizes_and_samplings_the_importer_cannot_compute_are_refused() {
    let resize = |scales: &[f32], dims: &[Result<i64, &'static str>]| {
        let nodes = vec![node("Resize", &["x", "", "scales"], &["y"], vec![])];
        let mut m = M::new(nodes, vec![value_info("x", code::FLOAT, dims)], &["y"]);
        m.inits = vec![floats("scales", &[scales.len() as i64], scales)];
        error(&m)
    };
    // A fractional scale of a symbolic size: the output size is unknown.
    let (name, text) = resize(&[1.0, 1.5], &[Ok(1), Err("w")]);
    assert_eq!(name, ErrorName::Unsupported);
    assert!(text.contains("symbolic size `w` by 1.5"), "{text}");
    // A scale whose tables would be huge is refused before they are made.
    let (name, text) = resize(&[1.0, 1e9], &[Ok(1), Ok(3)]);
    assert_eq!(name, ErrorName::ResourceExceeded);
    assert!(text.contains("Resize's interpolation table"), "{text}");
    // So is an antialias filter as wide as a tiny scale makes it.
    let mode = |m: &str| AttributeProto {
        name: "mode".into(),
        type_: EnumOrUnknown::new(AttributeType::STRING),
        s: m.as_bytes().to_vec(),
        ..Default::default()
    };
    let attrs = vec![mode("linear"), int_attr("antialias", 1)];
    let nodes = vec![node("Resize", &["x", "", "scales"], &["y"], attrs)];
    let mut m = M::new(nodes, vec![value_info("x", code::FLOAT, &[Ok(1), Ok(1 << 20)])], &["y"]);
    m.inits = vec![floats("scales", &[2], &[1.0, 1e-5])];
    m.opset = 18;
    let (name, text) = error(&m);
    assert_eq!(name, ErrorName::ResourceExceeded);
    assert!(text.contains("Resize's interpolation table"), "{text}");

    let nodes = vec![node("GridSample", &["x", "grid"], &["y"], vec![mode("cubic")])];
    let inputs = vec![
        value_info("x", code::FLOAT, &[Ok(1), Ok(1), Ok(2), Ok(2), Ok(2)]),
        value_info("grid", code::FLOAT, &[Ok(1), Ok(2), Ok(2), Ok(2), Ok(3)]),
    ];
    let mut m = M::new(nodes, inputs, &["y"]);
    m.opset = 20;
    let (name, text) = error(&m);
    assert_eq!(name, ErrorName::Unsupported);
    assert!(text.contains("GridSample mode `cubic` over 3 spatial axes"), "{text}");
}

#[test]
fn run_time_floor_ceil_and_round_are_exact_at_the_edges() {
    // Ties, signed zeros, the last fractional f32s below 2^23, integral
    // values above it, infinities and NaN.
    let x: Vec<f32> = vec![
        -0.0,
        0.5,
        1.5,
        2.5,
        -2.5,
        -0.4,
        0.4,
        -1.5,
        8_388_607.5,
        -8_388_607.5,
        16_777_216.0,
        -3.0e9,
        1.0e30,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    let cases = [("Floor", f32::floor as fn(f32) -> f32), ("Ceil", f32::ceil), ("Round", f32::round_ties_even)];
    for (op, want) in cases {
        let nodes = vec![node(op, &["x"], &["y"], vec![])];
        let imp = M::new(nodes, vec![value_info("x", code::FLOAT, &[Ok(x.len() as i64)])], &["y"]).import().unwrap();
        let input = HostTensor::from_f64(DType::F32, &[x.len()], &x.iter().map(|&v| v as f64).collect::<Vec<_>>());
        let got = run(&imp, &[input.unwrap()])[0].to_f64_vec();
        for (k, &v) in x.iter().enumerate() {
            let (w, g) = (want(v), got[k] as f32);
            assert!(w.to_bits() == g.to_bits() || (w.is_nan() && g.is_nan()), "{op}({v:?}) = {g:?}, not {w:?}");
        }
    }
}

#[test]
fn mod_of_known_values_takes_the_sign_fmod_asks_for() {
    let a = [-7.0, 7.0, -7.0, 7.0, 6.0];
    let b = [3.0, -3.0, -3.0, 3.0, -3.0];
    // fmod=0: floored (sign of the divisor); fmod=1: truncated (of the dividend).
    let cases: [(i32, i64, [f64; 5]); 3] = [
        (code::INT64, 0, [2.0, -2.0, -1.0, 1.0, 0.0]),
        (code::INT64, 1, [-1.0, 1.0, -1.0, 1.0, 0.0]),
        (code::FLOAT, 0, [2.0, -2.0, -1.0, 1.0, 0.0]),
    ];
    for (elem, fmod, want) in cases {
        let nodes = vec![
            node("Mod", &["a", "b"], &["m"], vec![int_attr("fmod", fmod)]),
            node("Cast", &["m"], &["c"], vec![int_attr("to", code::FLOAT as i64)]),
            node("Add", &["x", "c"], &["y"], vec![]),
        ];
        let mut m = M::new(nodes, vec![value_info("x", code::FLOAT, &[Ok(5)])], &["y"]);
        m.opset = 13;
        m.inits = if elem == code::INT64 {
            vec![int64s("a", &a.map(|v| v as i64)), int64s("b", &b.map(|v| v as i64))]
        } else {
            vec![floats("a", &[5], &a.map(|v| v as f32)), floats("b", &[5], &b.map(|v| v as f32))]
        };
        let imp = m.import().unwrap();
        let got = run(&imp, &[HostTensor::zeros(DType::F32, &[5]).unwrap()])[0].to_f64_vec();
        assert_eq!(got, want.to_vec(), "Mod of type {elem} with fmod={fmod}");
    }
    // A tensor computed at run time is refused, naming the operator.
    let nodes = vec![node("Mod", &["x", "x"], &["y"], vec![int_attr("fmod", 1)])];
    let mut m = M::new(nodes, vec![value_info("x", code::FLOAT, &[Ok(5)])], &["y"]);
    m.opset = 13;
    let (name, text) = error(&m);
    assert_eq!(name, ErrorName::Unsupported);
    assert!(text.contains("Mod of a tensor computed at run time"), "{text}");
}

#[test]
fn attention_refuses_half_a_cache() {
    let q = || value_info("q", code::FLOAT, &[Ok(1), Ok(1), Ok(2), Ok(4)]);
    let pk = value_info("pk", code::FLOAT, &[Ok(1), Ok(1), Ok(3), Ok(4)]);
    let nodes = vec![node("Attention", &["q", "q", "q", "", "pk"], &["y"], vec![])];
    let mut m = M::new(nodes, vec![q(), pk], &["y"]);
    m.opset = 23;
    let (name, text) = error(&m);
    assert_eq!(name, ErrorName::SyntaxError);
    assert!(text.contains("past_key and past_value must be given together") && text.contains("Attention"), "{text}");
}
