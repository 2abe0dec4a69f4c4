//! Snapshot tests of every `--dump` stage this build has, for every example
//! graph of the specification (`tests/spec/*.json`) and every example graph
//! of the repository (`examples/graphs/*.tgc`).
//!
//! Each snapshot is a file `tests/snapshots/<graph file>.<stage>`, the text
//! `tgc compile --dump <stage>` prints for that graph (symbols left
//! symbolic). The stage list comes from `pipeline::STAGES`, so a stage that
//! gets built later needs its snapshots before this test passes again.
//!
//! A change to a dump shows up here as a diff. When the change is intended,
//! regenerate the files and review them in `git diff`:
//!
//! ```text
//! UPDATE_EXPECT=1 cargo test -p tgc-core --test snapshots
//! ```

use std::path::{Path, PathBuf};

use expect_test::expect_file;
use tgc_core::pipeline::{self, Format};

/// `dir/*.ext` under the repository root, sorted.
fn graph_files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .{ext} files in {}", root.display());
    files
}

/// Checks every built stage of one graph file against its snapshots.
fn check_stages(path: &Path) {
    let name = path.file_name().unwrap().to_str().unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let format = Format::of(path, &text);
    let loaded = pipeline::load(&text, format, None).unwrap_or_else(|d| panic!("{}", d.render(name)));
    let artifacts =
        pipeline::compile_cpu(&loaded.graph, &mut Default::default()).unwrap_or_else(|d| panic!("{}", d.render(name)));
    for &(stage, built) in pipeline::STAGES {
        // Region formation asks Poly Core only with feature `poly`; the
        // `region`, `dot_regions`, `dot_kernels` and `c` snapshots are those of that build.
        let formed = matches!(stage, "region" | "dot_regions" | "dot_kernels" | "c");
        // The GPU stages need a concrete GEMM and a GPU target
        // (`pipeline::compile_gpu`; gpu/lower_tests.rs and the CLI test).
        if !built
            || pipeline::is_gpu_stage(stage)
            || (stage == "frontend" && format == Format::Json)
            || (formed && !cfg!(feature = "poly"))
        {
            continue;
        }
        let dump = pipeline::dump_stage(stage, &loaded, &loaded.graph, &artifacts)
            .unwrap_or_else(|d| panic!("{name} --dump {stage}: {}", d.render(name)));
        expect_file![format!("snapshots/{name}.{stage}")].assert_eq(&dump);
    }
}

#[test]
fn spec_example_dumps() {
    for path in graph_files("tests/spec", "json") {
        check_stages(&path);
    }
}

#[test]
fn example_graph_dumps() {
    for path in graph_files("examples/graphs", "tgc") {
        check_stages(&path);
    }
}
