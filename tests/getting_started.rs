//! README.md's "Getting started" holds: the crate it lays out, built from
//! the README's own blocks (its `Cargo.toml`, the graph file, `build.rs`,
//! `src/lib.rs`) in a folder outside the workspace, builds offline against
//! this checkout and runs. A block that drifts (a dependency line, a method
//! of the build helper, a path) fails here.
//!
//! The crate's `Cargo.toml` is the README's but for the checkout's place:
//! its `path = "../tgc…"` (a checkout named `tgc` beside the crate) reads
//! this checkout's absolute path, so the crate's dependencies are the
//! workspace's own packages and Cargo reuses their artifacts from the
//! workspace's target folder, where it builds; the workspace's `Cargo.lock`
//! pins the registry crates to the ones already downloaded.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// The section of README.md under `## Getting started`, up to the next
/// `## ` heading.
fn getting_started() -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let start = readme.find("\n## Getting started\n").expect("README.md has a Getting started section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 4);
    rest[..end].to_string()
}

/// The fenced blocks of `text` whose info string is `info`, in order.
fn blocks<'a>(text: &'a str, info: &str) -> Vec<&'a str> {
    let fence = format!("```{info}\n");
    text.split(fence.as_str()).skip(1).map(|b| b.split("\n```").next().unwrap_or("")).map(|b| b.trim_end()).collect()
}

/// The one block of `text` with `info` that starts with `first`.
fn block<'a>(text: &'a str, info: &str, first: &str) -> &'a str {
    let found: Vec<&str> = blocks(text, info).into_iter().filter(|b| b.starts_with(first)).collect();
    assert_eq!(found.len(), 1, "README.md's Getting started has {} ```{info} blocks opening `{first}`", found.len());
    found[0]
}

/// Writes `text` to `path` unless it holds it already (an unchanged file
/// keeps its time, so Cargo's fingerprints stay fresh between runs).
fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).unwrap();
    }
}

/// The target folder this test was built in: the executable is
/// `<target>/<profile>/deps/getting_started-<hash>`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).expect("the test runs from <target>/<profile>/deps").to_path_buf()
}

#[test]
fn the_readme_crate_builds_outside_the_workspace_and_runs() {
    let text = getting_started();
    let toml = block(&text, "toml", "[package]");
    let checkout = repo().canonicalize().unwrap();
    let checkout = checkout.to_str().unwrap();
    // The README's dependencies, each with `path = "../tgc…"`.
    for line in ["tgc = { path = \"../tgc\" }", "tgc-core = { path = \"../tgc/crates/tgc-core\" }"] {
        assert!(toml.lines().any(|l| l.starts_with(line)), "README.md's Cargo.toml has no `{line}`:\n{toml}");
    }
    let manifest = toml.replace("path = \"../tgc", &format!("path = \"{checkout}"));
    let graph = block(&text, "tgc", "graph<M, N, K> gemm_bias_relu(");
    let build = block(&text, "rust,no_run", "// build.rs");
    let lib = block(&text, "rs", "// src/lib.rs");
    // The layout's tree names these files.
    let tree = block(&text, "text", "my-kernels/");
    for file in ["Cargo.toml", "build.rs", "gemm_bias_relu.tgc", "lib.rs"] {
        assert!(tree.contains(file), "the layout names no {file}:\n{tree}");
    }

    // Outside the workspace (a crate under the checkout would be taken for
    // a member of its workspace), at a place fixed for this checkout.
    let id: u64 = checkout.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    let krate = std::env::temp_dir().join(format!("tgc-getting-started-{id:016x}")).join("my-kernels");
    assert!(!krate.starts_with(checkout), "the crate must lie outside the workspace");
    write(&krate.join("Cargo.toml"), &format!("{manifest}\n"));
    write(&krate.join("build.rs"), &format!("{build}\n"));
    write(&krate.join("graphs/gemm_bias_relu.tgc"), &format!("{graph}\n"));
    write(&krate.join("src/lib.rs"), &format!("{lib}\n"));
    std::fs::copy(repo().join("Cargo.lock"), krate.join("Cargo.lock")).unwrap();
    // A test of ours that calls the README's function: the C library
    // links and both kernels run.
    write(
        &krate.join("tests/layer.rs"),
        "#[test]\nfn layer_runs() {\n    let (m, n, k) = (2, 3, 4);\n    let mut y = vec![0.0f32; m * n];\n    \
         my_kernels::layer(&vec![1.0; m * k], &vec![0.5; k * n], &vec![-1.0; n], &mut y, m, n, k).unwrap();\n    \
         assert_eq!(y, vec![2.0; m * n]);\n}\n",
    );

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.args(["test", "--offline", "--quiet", "--test", "layer"]).current_dir(&krate);
    command.env("CARGO_TARGET_DIR", target_dir());
    // What Cargo set for this test's own package is not the crate's.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("CARGO_PKG_") || key.starts_with("CARGO_CRATE_") || key == "CARGO_MANIFEST_DIR" {
            command.env_remove(key);
        }
    }
    let started = std::time::Instant::now();
    let o = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "cargo test in {}:\n{stderr}\n{}", krate.display(), String::from_utf8_lossy(&o.stdout));
    eprintln!("the README's crate built and ran in {:.1} s", started.elapsed().as_secs_f64());
}
