//! Fuzz targets (issue 18): one function per input format a user can hand
//! to tgc, each taking arbitrary bytes. A target returns normally for every
//! input; it panics only on a tgc bug — a panic inside the front end, or an
//! `Internal` diagnostic, which by the contract of [`crate::diag`] means a
//! verifier failed after a pass.
//!
//! The coverage-guided driver (AFL++ through cargo-afl, which builds on the
//! stable toolchain) lives in `fuzz/` outside the workspace and calls these
//! functions; `scripts/fuzz.sh` runs it. Every corpus file and every crash
//! found under `fuzz/corpus/<target>/` is replayed through the same
//! functions by `crates/tgc-core/tests/fuzz_corpus.rs` in the test command.

use crate::diag::{Diagnostic, ErrorName};
use crate::pipeline::{self, Format};

/// A fuzz target: arbitrary bytes in, a panic only on a tgc bug.
pub type Target = fn(&[u8]);

/// The fuzz targets by name, as `fuzz/` and the corpus folders name them.
pub const TARGETS: [(&str, Target); 6] = [
    ("dsl", dsl),
    ("tiny_json", tiny_json),
    ("plan_dsl", plan_dsl),
    ("plan_json", plan_json),
    ("npy", npy),
    ("safetensors", safetensors),
];

/// Panics on an `Internal` diagnostic: a user error is a fine answer to
/// hostile input, a verifier failure is not.
fn user_error_only<T>(what: &str, r: Result<T, Diagnostic>) {
    if let Err(d) = r {
        assert!(d.name != ErrorName::Internal, "{what}: internal error on fuzz input: {d}");
    }
}

/// The graph language: decode, parse, resolve and lower to Tiny IR (what
/// `tgc check` does), then build the IndexBook of the result.
pub fn dsl(data: &[u8]) {
    graph(data, Format::Dsl, "dsl");
}

/// Tiny IR JSON, both the node format and the op list (`ops`).
pub fn tiny_json(data: &[u8]) {
    graph(data, Format::Json, "tiny_json");
}

fn graph(data: &[u8], format: Format, what: &str) {
    let Ok(text) = crate::diag::decode_source(data.to_vec()) else { return };
    let built = pipeline::load(&text, format, None).and_then(|l| crate::index_book::build(&l.graph));
    user_error_only(what, built);
}

/// The Schedule Plan DSL (`000` §12.5's text form).
pub fn plan_dsl(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        user_error_only("plan_dsl", crate::plan::parse_dsl(text));
    }
}

/// The Schedule Plan JSON (`000` §12.5).
pub fn plan_json(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        user_error_only("plan_json", crate::plan::from_json(text));
    }
}

/// The `.npy` reader of `tgc run --input` (every failure is a
/// `tgc_runtime::Error`, so only a panic is a finding).
pub fn npy(data: &[u8]) {
    let _ = tgc_runtime::npy::read_npy_bytes(data);
}

/// The `.safetensors` reader of `tgc run --input x=FILE:x` (every failure
/// is a `tgc_runtime::Error`, so only a panic is a finding).
pub fn safetensors(data: &[u8]) {
    let _ = tgc_runtime::safetensors_io::read_safetensors_tensor_bytes(data, "x");
}
