//! Helpers shared by the CLI's integration tests (`cli.rs`, `hostile.rs`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root, where `tgc` runs (graph paths are relative to it).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the `tgc` binary with `args` in the repository root.
pub fn tgc(args: &[&str]) -> Output {
    tgc_in(&repo(), args)
}

/// Runs the `tgc` binary with `args` in `dir`.
pub fn tgc_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tgc")).args(args).current_dir(dir).output().expect("the tgc binary runs")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A directory of this test process for one test, created if missing.
pub fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tgc-cli-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
