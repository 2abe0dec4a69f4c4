//! ONNX's backend test cases through the importer and the reference
//! interpreter, against the outputs the cases record: the operator cases
//! (the `onnx` wheel's `backend/test/case/node`, written to
//! `.toolchain/onnx-node` by `scripts/setup.sh`) and the wheel's own
//! `pytorch-converted`, `pytorch-operator` and `simple` suites (in
//! `.toolchain/onnx`); and against the committed expectation
//! `tests/onnx/node.expect` (one line per case: suite/name, status,
//! reason). Any difference from the
//! expectation fails — a case that stopped passing, or one that started;
//! `UPDATE_EXPECT=1` rewrites the file.
//!
//! Statuses: `pass` (the interpreter and then the CPU backend, whose
//! cases are compiled in batches, both give the recorded outputs); `fail`
//! (the interpreter's outputs differ beyond [`tolerance`] or in shape);
//! `fail-cpu` (the interpreter's match, the CPU backend's do not); `unsupported`
//! (the importer refused the model, with its error); `error` (imported, but
//! binding or running failed). Inputs of type int64 and integer scalars are
//! fixed at import (`load_onnx`'s `fixed`): in these cases they carry the
//! shapes, axes, pads and sizes a real model holds as initializers; so is an input the importer
//! reports it needs at import time (`Resize`'s scales). A case is *in scope* when every input and
//! output is of a type tgc computes in (f32, f16, bf16, i32, i64 narrowed,
//! bool); the summary line gives the pass rate of those.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tgc_core::frontend::onnx::{self, proto};
use tgc_core::pipeline;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The suites: `(name, folder of case folders)`; the operator cases in
/// `TGC_ONNX_NODE_DATA`, else `.toolchain/onnx-node`.
fn suites() -> Vec<(&'static str, PathBuf)> {
    let node =
        std::env::var_os("TGC_ONNX_NODE_DATA").map_or_else(|| root().join(".toolchain/onnx-node"), PathBuf::from);
    let data = root().join(".toolchain/onnx/onnx/backend/test/data");
    vec![
        ("node", node),
        ("pytorch-converted", data.join("pytorch-converted")),
        ("pytorch-operator", data.join("pytorch-operator")),
        ("simple", data.join("simple")),
    ]
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

/// A case's outcome: status, reason, whether it is in scope, and for a
/// case the interpreter passed, what the CPU stage runs.
struct Outcome {
    status: &'static str,
    reason: String,
    scope: bool,
    cpu: Option<CpuRun>,
}

/// A case for the CPU backend: the bound graph, its inputs, the expected
/// outputs.
struct CpuRun {
    graph: tgc_core::tiny::Graph,
    inputs: Vec<tgc_runtime::HostTensor>,
    want: Vec<proto::Values>,
}

fn short(d: &tgc_core::Diagnostic) -> String {
    let mut s = format!("{}: {}", d.name, d.message);
    s.truncate(160);
    s.replace(['\n', '\t'], " ")
}

/// `Err(reason)` when `got` differs from `want` beyond [`tolerance`].
fn compare(want: &[proto::Values], got: &[tgc_runtime::HostTensor]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} outputs, expected {}", got.len(), want.len()));
    }
    for (k, (want, got)) in want.iter().zip(got).enumerate() {
        if want.shape != got.shape() {
            return Err(format!("output {k} has shape {:?}, expected {:?}", got.shape(), want.shape));
        }
        let wv: Vec<f64> = match &want.data {
            proto::Data::Float(f) => f.clone(),
            proto::Data::Int(i) => i.iter().map(|&v| v as f64).collect(),
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
            return Err(format!("output {k} differs by up to {worst:.3e}"));
        }
    }
    Ok(())
}

/// Imports one case and runs it on the interpreter.
fn run_case(dir: &Path) -> Outcome {
    let data = dir.join("test_data_set_0");
    let (mut inputs, outputs) = (tensors(&data, "input"), tensors(&data, "output"));
    // `input_K.pb` is the model's K-th input that is not an initializer;
    // older suites leave the tensors' names empty.
    let model = proto::decode_model(&std::fs::read(dir.join("model.onnx")).unwrap()).unwrap();
    let graph = model.graph.as_ref().unwrap();
    let run_inputs = graph.input.iter().filter(|i| !graph.initializer.iter().any(|t| t.name == i.name));
    for (t, decl) in inputs.iter_mut().zip(run_inputs) {
        t.name = decl.name.clone();
    }
    let scope = in_scope(&inputs) && in_scope(&outputs);
    let end = |status, reason| Outcome { status, reason, scope, cpu: None };
    // Int64 inputs and integer scalars feed shapes, axes, pads and sizes in
    // these cases, which a real model holds as initializers: fixed at
    // import, as those would be; and so is any other input the importer
    // says it needs at import time (`Resize`'s float scales).
    let shape_like = |t: &&onnx_protobuf::TensorProto| {
        t.data_type == proto::code::INT64 || (proto::is_int(t.data_type) && t.dims.is_empty())
    };
    let mut fixed: Vec<_> = inputs.iter().filter(shape_like).cloned().collect();
    let loaded = loop {
        match pipeline::load_onnx(&dir.join("model.onnx"), &fixed) {
            Ok(l) => break l,
            Err(d) => {
                let needed =
                    d.message.contains("is computed at run time").then(|| d.message.split('`').nth(1)).flatten();
                match inputs.iter().find(|t| Some(t.name.as_str()) == needed && !fixed.contains(t)) {
                    Some(t) => fixed.push(t.clone()),
                    None => return end("unsupported", short(&d)),
                }
            }
        }
    };
    let g = &loaded.graph;
    let mut given: BTreeMap<String, tgc_runtime::HostTensor> = BTreeMap::new();
    for t in inputs.iter().filter(|t| !fixed.contains(t)) {
        match onnx::host_tensor(t, None) {
            Ok(h) => {
                given.insert(loaded.name_of(&t.name).to_string(), h);
            }
            Err(d) => return end("unsupported", short(&d)),
        }
    }
    for (name, t) in &loaded.weights {
        given.entry(name.clone()).or_insert_with(|| t.clone());
    }
    let mut ordered = Vec::new();
    for name in pipeline::input_names(g) {
        match given.remove(&name) {
            Some(t) => ordered.push(t),
            None => return end("error", format!("no data for input `{name}`")),
        }
    }
    let want = match outputs.iter().map(|t| proto::read_values(t, None)).collect::<Result<Vec<_>, _>>() {
        Ok(w) => w,
        Err(d) => return end("unsupported", short(&d)),
    };
    let shapes: Vec<Vec<usize>> = ordered.iter().map(|t| t.shape().to_vec()).collect();
    let bound = match g.resolve_dims(&BTreeMap::new(), Some(&shapes)).and_then(|v| g.bind(&v)) {
        Ok(b) => b,
        Err(d) => return end("error", short(&d)),
    };
    match pipeline::run_interp(&bound, &ordered) {
        Err(d) => end("error", short(&d)),
        Ok(got) => match compare(&want, &got) {
            Err(why) => end("fail", why),
            Ok(()) => Outcome {
                status: "pass",
                reason: String::new(),
                scope,
                cpu: Some(CpuRun { graph: bound, inputs: ordered, want }),
            },
        },
    }
}

/// Cases compiled into one C library by the CPU stage.
const CPU_BATCH: usize = 64;

/// Runs the cases the interpreter passed on the CPU backend, [`CPU_BATCH`]
/// to one C compiler run; a case the CPU backend gets wrong becomes
/// `fail-cpu`. A batch whose compilation or run fails is run again case by
/// case, so that one case cannot hide the others.
fn cpu_stage(outcomes: &mut [Outcome]) {
    let work = std::env::temp_dir().join(format!("tgc-onnx-node-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let todo: Vec<usize> = (0..outcomes.len()).filter(|&i| outcomes[i].cpu.is_some()).collect();
    for (k, &i) in todo.iter().enumerate() {
        // Distinct C symbols within a batch.
        outcomes[i].cpu.as_mut().unwrap().graph.name = format!("case{k}");
    }
    let run = |outcomes: &[Outcome], cases: &[usize]| {
        let runs: Vec<_> =
            cases.iter().map(|&i| outcomes[i].cpu.as_ref().unwrap()).map(|c| (&c.graph, &c.inputs[..])).collect();
        pipeline::run_cpu_batch(&runs, &work).map_err(|e| match e {
            pipeline::RunError::Diag(d) => short(&d),
            pipeline::RunError::Runtime(e) => e.to_string().replace(['\n', '\t'], " ").chars().take(160).collect(),
        })
    };
    let judge = |batch: &[usize]| -> Vec<Result<(), String>> {
        let want = |i: usize| &outcomes[i].cpu.as_ref().unwrap().want;
        match run(outcomes, batch) {
            Ok(results) => batch.iter().zip(results).map(|(&i, got)| compare(want(i), &got)).collect(),
            Err(_) => {
                batch.iter().map(|&i| run(outcomes, &[i]).and_then(|mut r| compare(want(i), &r.remove(0)))).collect()
            }
        }
    };
    // Two workers, each compiling every other batch: the C compiler is
    // most of the time and runs on one core.
    let batches: Vec<&[usize]> = todo.chunks(CPU_BATCH).collect();
    let verdicts: Vec<(usize, Result<(), String>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let (batches, judge) = (&batches, &judge);
                s.spawn(move || {
                    batches.iter().skip(w).step_by(2).flat_map(|b| b.iter().copied().zip(judge(b))).collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    for (i, verdict) in verdicts {
        if let Err(why) = verdict {
            outcomes[i].status = "fail-cpu";
            outcomes[i].reason = why;
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn onnx_backend_cases_match_their_expectation() {
    let mut cases: Vec<(String, PathBuf)> = Vec::new();
    for (suite, dir) in suites() {
        let mut found: Vec<PathBuf> = match std::fs::read_dir(&dir) {
            Ok(r) => r.map(|e| e.unwrap().path()).filter(|p| p.join("model.onnx").exists()).collect(),
            Err(e) => panic!("{}: {e}; scripts/setup.sh installs ONNX's test cases", dir.display()),
        };
        assert!(found.len() >= 10, "only {} cases in {}", found.len(), dir.display());
        found.sort();
        for case in found {
            let name = case.file_name().unwrap().to_string_lossy().into_owned();
            cases.push((format!("{suite}/{name}"), case));
        }
    }
    // The interpreter runs of the cases, on every core: worker `w` takes
    // every `workers`-th case.
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut outcomes: Vec<Option<Outcome>> = (0..cases.len()).map(|_| None).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let cases = &cases;
                s.spawn(move || {
                    (w..cases.len()).step_by(workers).map(|i| (i, run_case(&cases[i].1))).collect::<Vec<_>>()
                })
            })
            .collect();
        for (i, o) in handles.into_iter().flat_map(|h| h.join().unwrap()) {
            outcomes[i] = Some(o);
        }
    });
    let mut outcomes: Vec<Outcome> = outcomes.into_iter().map(Option::unwrap).collect();
    cpu_stage(&mut outcomes);
    let mut lines = Vec::new();
    let (mut scope_n, mut scope_pass, mut counts) = (0, 0, BTreeMap::<String, usize>::new());
    let mut reasons = BTreeMap::<String, usize>::new();
    for ((name, _), o) in cases.iter().zip(&outcomes) {
        let Outcome { status, reason, scope, .. } = o;
        if *scope {
            scope_n += 1;
            scope_pass += usize::from(*status == "pass");
            if *status != "pass" {
                // The reason without the names that vary between cases.
                let mut parts = reason.split('`');
                let general: String =
                    parts.next().into_iter().chain(parts.skip(1).step_by(2)).collect::<Vec<_>>().join("_");
                *reasons.entry(format!("{status}: {general}")).or_default() += 1;
            }
        }
        *counts.entry(status.to_string()).or_default() += 1;
        lines.push(format!("{name}\t{status}\t{reason}"));
    }
    let text = lines.join("\n") + "\n";
    let summary: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    println!(
        "ONNX backend cases: {scope_pass} of {scope_n} in scope pass ({:.1}%); all {}: {}",
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
        "{} ONNX backend cases differ from tests/onnx/node.expect (UPDATE_EXPECT=1 rewrites it):\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}
