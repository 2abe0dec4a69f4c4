//! `tgc import MODEL.onnx --out DIR`: an ONNX model as a graph-language
//! program and its weights, to read, edit and run without the model.
//!
//! - `DIR/<graph>.tgc`: the imported program printed by
//!   `frontend::raise::to_source` (which checks that the text reads back
//!   as the imported program), after a header comment naming the model,
//!   its opset, the inputs and outputs whose ONNX names differ, and the
//!   command that runs it;
//! - `DIR/weights.safetensors`: every weight (an initializer the program
//!   takes as a parameter) under its parameter name, in its dtype.
//!
//! Nothing is written unless the model imports and prints; each file is
//! written under a temporary name in `DIR` and renamed into place.

use std::fmt::Write as _;
use std::path::Path;

use tgc_core::frontend::onnx::{read_model, Imported};
use tgc_core::frontend::raise::to_source;

use crate::commands::Failure;
use crate::progress::Stages;

/// The name of the weights file in the output folder.
pub(crate) const WEIGHTS_FILE: &str = "weights.safetensors";

/// Imports `model` and writes its program and weights into `out` (created
/// if missing), printing each file written.
///
/// Errors: the importer's and the printer's diagnostics, rendered at the
/// model (naming the node or tensor); a folder or file that cannot be
/// written.
pub(crate) fn import(model: &Path, out: &Path) -> Result<(), Failure> {
    let stages = Stages::start(&format!("importing {}", model.display()));
    let imported = read_model(model, &[]).map_err(|d| Failure::diag(model, &d))?;
    stages.stage("printing the program");
    let text = to_source(&imported.program).map_err(|d| Failure::diag(model, &imported.locate(d)))?;
    let graph = &imported.program.graphs[0];
    stages.stage("collecting the weights");
    let weights = weights_bytes(model, &imported)?;
    stages.clear();
    std::fs::create_dir_all(out).map_err(|e| Failure::user(format!("cannot create {}: {e}", out.display())))?;
    let program = out.join(format!("{}.tgc", graph.name));
    write_file(&program, format!("{}{text}", header(model, out, &imported)).as_bytes())?;
    println!("wrote {} (graph `{}`, {} statements)", program.display(), graph.name, graph.body.len());
    let weights_path = out.join(WEIGHTS_FILE);
    write_file(&weights_path, &weights)?;
    let bytes: usize = imported.weights.iter().map(|(_, t)| t.bytes().len()).sum();
    println!("wrote {} ({} tensors, {bytes} bytes)", weights_path.display(), imported.weights.len());
    Ok(())
}

/// The comment lines before the program.
fn header(model: &Path, out: &Path, imported: &Imported) -> String {
    let g = &imported.program.graphs[0];
    let file = model.file_name().map_or_else(|| model.display().to_string(), |f| f.to_string_lossy().into_owned());
    let mut s = String::new();
    let _ = writeln!(s, "// Imported by `tgc import` from {} (ONNX opset {}).", file.escape_debug(), imported.opset);
    let _ = writeln!(
        s,
        "// Its {} weights are parameters too, in {WEIGHTS_FILE} next to this file.",
        imported.weights.len()
    );
    let weight: Vec<&str> = imported.weights.iter().map(|(n, _)| n.as_str()).collect();
    let inputs: Vec<&str> = g.params.iter().map(|p| p.name.as_str()).filter(|n| !weight.contains(n)).collect();
    for (tgc, onnx) in &imported.onnx_names {
        if !weight.contains(&tgc.as_str()) {
            let _ = writeln!(s, "// `{tgc}` is the model's `{}`.", onnx.escape_debug());
        }
    }
    let dir = out.display().to_string();
    let given: Vec<String> = inputs.iter().map(|n| format!(" --input {n}={n}.npy")).collect();
    let _ = writeln!(
        s,
        "// Run: tgc run {}/{}.tgc --inputs {}/{WEIGHTS_FILE}{}",
        dir.escape_debug(),
        g.name,
        dir.escape_debug(),
        given.concat()
    );
    s.push('\n');
    s
}

/// The weights as a `.safetensors` file, with the model's name and opset
/// in its metadata.
fn weights_bytes(model: &Path, imported: &Imported) -> Result<Vec<u8>, Failure> {
    let source = model.file_name().map_or_else(String::new, |f| f.to_string_lossy().into_owned());
    let opset = imported.opset.to_string();
    let meta = [("source", source.as_str()), ("opset", opset.as_str())];
    tgc_runtime::safetensors_io::to_safetensors(&imported.weights, &meta).map_err(Failure::from)
}

/// Writes `bytes` to `path` whole or not at all (`files::write_atomic`).
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    tgc_runtime::files::write_atomic(path, bytes)
        .map_err(|e| Failure::user(format!("cannot write {}: {e}", path.display())))
}
