//! Replays every committed fuzz input (`fuzz/corpus/<target>/*`: the seeds,
//! what the fuzzer kept, and every crash it found once fixed) through its
//! target in `tgc_core::fuzz`, so a regression fails the test command
//! without the fuzzer.

use std::path::Path;

#[test]
fn every_corpus_input_is_handled_without_a_panic_or_an_internal_error() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    for (name, target) in tgc_core::fuzz::TARGETS {
        let dir = root.join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no corpus for target `{name}` in {}", dir.display());
        for file in files {
            let data = std::fs::read(&file).unwrap();
            let run = std::panic::catch_unwind(|| target(&data));
            assert!(run.is_ok(), "target `{name}` failed on {}", file.display());
        }
    }
}

/// User errors (malformed JSON, bytes that are not UTF-8, a syntax error)
/// are answers, not findings: the targets return.
#[test]
fn user_errors_are_not_findings() {
    let plan_json = tgc_core::fuzz::TARGETS.iter().find(|(n, _)| *n == "plan_json").unwrap().1;
    plan_json(b"{ not json");
    plan_json(&[0xff, 0xfe]);
    let dsl = tgc_core::fuzz::TARGETS.iter().find(|(n, _)| *n == "dsl").unwrap().1;
    dsl(b"graph main(x: f32[4]) -> (y: f32[4]) {\n    y = x @\n    return y\n}\n");
}
