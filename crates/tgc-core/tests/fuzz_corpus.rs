//! Replays every committed fuzz input (`fuzz/corpus/<target>/*`: the seeds,
//! what the fuzzer kept, and every crash it found once fixed) through its
//! target in `tgc_core::fuzz`, so a regression fails the test command
//! without the fuzzer; the `graphs` corpus also through the CPU backend,
//! which the fuzz target itself skips.

use std::path::{Path, PathBuf};

use tgc_core::fuzz::{self, gen};

/// Cases compiled into one C library by [`graphs_corpus_runs_alike_on_the_cpu_backend`].
const BATCH: usize = 40;

#[test]
fn every_corpus_input_is_handled_without_a_panic_or_an_internal_error() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    for (name, target) in tgc_core::fuzz::TARGETS {
        let dir = root.join(name);
        let files = files_in(&dir);
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

/// The `graphs` target's cases (`fuzz/corpus/graphs`, or the folder
/// `TGC_FUZZ_QUEUE` names for the target `TGC_FUZZ_TARGET`, `graphs` or
/// `graphs_mma`, default `graphs`: `scripts/fuzz.sh` sets both to a run's
/// queue after it) compute on the CPU backend what the interpreter does:
/// bit for bit for a movement case, within the op's bound for a numeric one
/// (`fuzz::same_outputs`). The committed `graphs_mma` corpus replays
/// through its own target only: its ops are among `graphs`' numeric cases,
/// and its convolutions and attentions take the C compiler about three
/// times as long per case as the rest of this corpus.
#[test]
fn graphs_corpus_runs_alike_on_the_cpu_backend() {
    let (target, dir) = match std::env::var_os("TGC_FUZZ_QUEUE") {
        Some(q) => (std::env::var("TGC_FUZZ_TARGET").unwrap_or_else(|_| "graphs".into()), PathBuf::from(q)),
        None => ("graphs".into(), Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/graphs")),
    };
    cpu_matches_the_interpreter(&target, &dir);
}

/// The case a `graphs` or `graphs_mma` input describes.
fn decode(target: &str, file: &Path) -> gen::Case {
    let data = std::fs::read(file).unwrap();
    let case = match target {
        "graphs" => gen::from_bytes(&data),
        "graphs_mma" => gen::mma_from_bytes(&data),
        other => panic!("TGC_FUZZ_TARGET={other}: not graphs or graphs_mma"),
    };
    case.unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// Every input of `dir` (for `target`) on the CPU backend, in batches.
fn cpu_matches_the_interpreter(target: &str, dir: &Path) {
    let files = files_in(dir);
    assert!(!files.is_empty(), "no inputs in {}", dir.display());
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz_{target}-{}", std::process::id()));
    let mut failed = Vec::new();
    for chunk in files.chunks(BATCH) {
        let cases: Vec<gen::Case> = chunk.iter().map(|f| decode(target, f)).collect();
        for ((file, case), cpu) in chunk.iter().zip(&cases).zip(fuzz::run_cpu(&cases, &work)) {
            let check = fuzz::interpret(case).and_then(|want| fuzz::same_outputs(case, "CPU backend", &cpu?, &want));
            if let Err(e) = check {
                eprintln!("---- {} ----\n{e}\n{}", file.display(), tgc_core::tiny::text::dump(&case.graph));
                failed.push(file.display().to_string());
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    eprintln!("{} cases of {} checked on the CPU backend", files.len(), dir.display());
    assert!(failed.is_empty(), "{} of {} cases differ on the CPU backend: {failed:?}", failed.len(), files.len());
}

/// The generated C and CUDA of every `graphs` case stay about the size of
/// their index expressions once preprocessed: a helper that repeats an
/// argument (`floord` was such a macro, and the SIMT template's floor
/// division such a tree) makes nested divisions grow as 3^depth, and
/// `fuzz/corpus/graphs/slow-cc-nested-floord` then took GCC over a minute.
#[test]
fn graphs_corpus_sources_do_not_grow_when_preprocessed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/graphs");
    for f in files_in(&dir) {
        let case = decode("graphs", &f);
        let c = tgc_core::emit::c::emit_c(&case.graph, "tgc_case").unwrap();
        let body: String = c.lines().filter(|l| !l.starts_with("#include")).map(|l| format!("{l}\n")).collect();
        let expanded = preprocess(&body);
        assert!(
            expanded.len() <= body.len() + body.len() / 4,
            "{}: the C grows from {} to {} bytes when preprocessed",
            f.display(),
            body.len(),
            expanded.len()
        );
        let prog = tgc_core::gpu::driver::lower_program(&case.graph).unwrap();
        let cuda = tgc_core::emit::cuda::print_unit(&prog.kernels()).unwrap();
        // The CUDA prints the same index expressions, fully parenthesised:
        // about 3× the C on this corpus (9.6 MB, 300×, with the old tree).
        assert!(
            cuda.len() <= 8 * body.len(),
            "{}: {} bytes of CUDA for {} bytes of C",
            f.display(),
            cuda.len(),
            body.len()
        );
    }
}

/// The files of `dir`, sorted by name.
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// `src` after the C preprocessor (`cc -E -P`).
fn preprocess(src: &str) -> String {
    use std::io::Write;
    use std::process::Stdio;
    let mut cc = tgc_runtime::cpu::c_compiler()
        .1
        .args(["-E", "-P", "-x", "c", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the C compiler runs");
    cc.stdin.take().unwrap().write_all(src.as_bytes()).unwrap();
    let out = cc.wait_with_output().unwrap();
    assert!(out.status.success(), "cc -E fails: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}
