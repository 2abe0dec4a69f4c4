//! ONNX's operator test cases (the `onnx` wheel's `backend/test/case/node`,
//! written to `.toolchain/onnx-node` by `scripts/setup.sh`) through the
//! importer and the reference interpreter, against the outputs the cases
//! record, and against the committed expectation `tests/onnx/node.expect`
//! (one line per case: name, status, reason). Any difference from the
//! expectation fails — a case that stopped passing, or one that started;
//! `UPDATE_EXPECT=1` rewrites the file.
//!
//! Statuses: `pass`; `fail` (outputs differ beyond [`tolerance`] or in
//! shape); `unsupported`
//! (the importer refused the model, with its error); `error` (imported, but
//! binding or running failed). Inputs of type int64 are fixed at import
//! (`load_onnx`'s `fixed`): in these cases they carry the shapes, axes and
//! pads a real model holds as initializers. A case is *in scope* when every input and
//! output is of a type tgc computes in (f32, f16, bf16, i32, i64 narrowed,
//! bool); the summary line gives the pass rate of those.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tgc_core::frontend::onnx::{self, proto};
use tgc_core::pipeline;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The case folder: `TGC_ONNX_NODE_DATA`, else `.toolchain/onnx-node`.
fn data_dir() -> PathBuf {
    std::env::var_os("TGC_ONNX_NODE_DATA").map_or_else(|| root().join(".toolchain/onnx-node"), PathBuf::from)
}

/// Reads `dir/{kind}_K.pb` for K = 0, 1, … as tensors.
fn tensors(dir: &Path, kind: &str) -> Vec<onnx_protobuf::TensorProto> {
    (0..)
        .map(|k| dir.join(format!("{kind}_{k}.pb")))
        .take_while(|p| p.exists())
        .map(|p| proto::decode_tensor(&std::fs::read(&p).unwrap()).unwrap())
        .collect()
}

fn in_scope(ts: &[onnx_protobuf::TensorProto]) -> bool {
    ts.iter().all(|t| proto::runtime_dtype(t.data_type).is_some())
}

/// `(rtol, atol)` for outputs of `dtype`: ONNX's backend tests' rtol 1e-3
/// for f32; for f16 and bf16 about two units in the last place of a value
/// near 1 (2^-10 and 2^-7), since the case's reference rounds once and a
/// decomposition may round again.
fn tolerance(dtype: tgc_runtime::DType) -> (f64, f64) {
    match dtype {
        tgc_runtime::DType::F16 => (2e-3, 2e-3),
        tgc_runtime::DType::BF16 => (1.6e-2, 1.6e-2),
        _ => (1e-3, 1e-5),
    }
}

/// One case's status and reason.
fn run_case(dir: &Path) -> (String, String, bool) {
    let data = dir.join("test_data_set_0");
    let (inputs, outputs) = (tensors(&data, "input"), tensors(&data, "output"));
    let scope = in_scope(&inputs) && in_scope(&outputs);
    let short = |d: &tgc_core::Diagnostic| {
        let mut s = format!("{}: {}", d.name, d.message);
        s.truncate(160);
        s.replace(['\n', '\t'], " ")
    };
    // Integer inputs feed shapes, axes and pads in these cases, which a real
    // model holds as initializers: fixed at import, as those would be.
    let fixed: Vec<_> = inputs.iter().filter(|t| t.data_type == proto::code::INT64).cloned().collect();
    let loaded = match pipeline::load_onnx(&dir.join("model.onnx"), &fixed) {
        Ok(l) => l,
        Err(d) => return ("unsupported".into(), short(&d), scope),
    };
    let g = &loaded.graph;
    let mut given: BTreeMap<String, tgc_runtime::HostTensor> = BTreeMap::new();
    for t in inputs.iter().filter(|t| !fixed.contains(t)) {
        match onnx::host_tensor(t, None) {
            Ok(h) => {
                given.insert(loaded.name_of(&t.name).to_string(), h);
            }
            Err(d) => return ("unsupported".into(), short(&d), scope),
        }
    }
    for (name, t) in &loaded.weights {
        given.entry(name.clone()).or_insert_with(|| t.clone());
    }
    let mut ordered = Vec::new();
    for name in pipeline::input_names(g) {
        match given.remove(&name) {
            Some(t) => ordered.push(t),
            None => return ("error".into(), format!("no data for input `{name}`"), scope),
        }
    }
    let shapes: Vec<Vec<usize>> = ordered.iter().map(|t| t.shape().to_vec()).collect();
    let bound = match g.resolve_dims(&BTreeMap::new(), Some(&shapes)).and_then(|v| g.bind(&v)) {
        Ok(b) => b,
        Err(d) => return ("error".into(), short(&d), scope),
    };
    let got = match pipeline::run_interp(&bound, &ordered) {
        Ok(o) => o,
        Err(d) => return ("error".into(), short(&d), scope),
    };
    for (k, (want, got)) in outputs.iter().zip(&got).enumerate() {
        let want = match proto::read_values(want, None) {
            Ok(v) => v,
            Err(d) => return ("unsupported".into(), short(&d), scope),
        };
        if want.shape != got.shape() {
            return (
                "fail".into(),
                format!("output {k} has shape {:?}, expected {:?}", got.shape(), want.shape),
                scope,
            );
        }
        let wv: Vec<f64> = match want.data {
            proto::Data::Float(f) => f,
            proto::Data::Int(i) => i.into_iter().map(|v| v as f64).collect(),
        };
        let (rtol, atol) = tolerance(got.dtype());
        let mut worst = 0.0f64;
        for (w, g) in wv.iter().zip(got.to_f64_vec()) {
            let same = (w.is_nan() && g.is_nan()) || w == &g || (w - g).abs() <= atol + rtol * w.abs();
            if !same {
                worst = worst.max((w - g).abs()).max(if g.is_nan() { f64::INFINITY } else { 0.0 });
            }
        }
        if worst > 0.0 {
            return ("fail".into(), format!("output {k} differs by up to {worst:.3e}"), scope);
        }
    }
    if got.len() != outputs.len() {
        return ("fail".into(), format!("{} outputs, expected {}", got.len(), outputs.len()), scope);
    }
    ("pass".into(), String::new(), scope)
}

#[test]
fn onnx_node_cases_match_their_expectation() {
    let dir = data_dir();
    let mut cases: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(r) => r.map(|e| e.unwrap().path()).filter(|p| p.join("model.onnx").exists()).collect(),
        Err(e) => panic!("{}: {e}; scripts/setup.sh writes ONNX's node cases there", dir.display()),
    };
    cases.sort();
    assert!(cases.len() > 1000, "only {} cases in {}", cases.len(), dir.display());
    let mut lines = Vec::new();
    let (mut scope_n, mut scope_pass, mut counts) = (0, 0, BTreeMap::<String, usize>::new());
    let mut reasons = BTreeMap::<String, usize>::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let (status, reason, scope) = run_case(case);
        if scope {
            scope_n += 1;
            scope_pass += usize::from(status == "pass");
            if status != "pass" {
                // The reason without the names that vary between cases.
                let mut parts = reason.split('`');
                let general: String =
                    parts.next().into_iter().chain(parts.skip(1).step_by(2)).collect::<Vec<_>>().join("_");
                *reasons.entry(format!("{status}: {general}")).or_default() += 1;
            }
        }
        *counts.entry(status.clone()).or_default() += 1;
        lines.push(format!("{name}\t{status}\t{reason}"));
    }
    let text = lines.join("\n") + "\n";
    let summary: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    println!(
        "ONNX node cases: {scope_pass} of {scope_n} in scope pass ({:.1}%); all {}: {}",
        100.0 * scope_pass as f64 / scope_n.max(1) as f64,
        cases.len(),
        summary.join(", ")
    );
    let mut by_count: Vec<(usize, String)> = reasons.into_iter().map(|(r, n)| (n, r)).collect();
    by_count.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    println!("in-scope cases that do not pass, by reason:");
    for (n, r) in &by_count {
        println!("{n:5}  {r}");
    }
    let expect = root().join("crates/tgc-core/tests/onnx/node.expect");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::create_dir_all(expect.parent().unwrap()).unwrap();
        std::fs::write(&expect, &text).unwrap();
        return;
    }
    let old = std::fs::read_to_string(&expect).unwrap_or_default();
    let old: BTreeMap<&str, &str> = old.lines().filter_map(|l| l.split_once('\t')).collect();
    let mut diffs = Vec::new();
    for l in &lines {
        let (name, rest) = l.split_once('\t').unwrap();
        match old.get(name) {
            Some(o) if o == &rest => {}
            Some(o) => diffs.push(format!("{name}: expected `{o}`, got `{rest}`")),
            None => diffs.push(format!("{name}: new case, got `{rest}`")),
        }
    }
    assert!(
        diffs.is_empty(),
        "{} ONNX node cases differ from tests/onnx/node.expect (UPDATE_EXPECT=1 rewrites it):\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}
