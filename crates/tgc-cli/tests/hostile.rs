//! Hostile input (issue 18): each reproducer of the reliability probe ends
//! with exit 1 and a positioned message, or exit 0 with a correct result
//! where the input is valid — never an abort, a hang, an internal error or
//! a write outside the folder the user named.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tgc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tgc")).args(args).current_dir(repo()).output().expect("the tgc binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh directory for one test.
fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tgc-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes `text` to `dir/name` and returns the path as a string.
fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Asserts exit 1 and a message that starts with `FILE:LINE:COL: error[NAME]`.
#[track_caller]
fn assert_user_error(o: &Output, position: &str, name: &str) -> String {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains(&format!("{position}: error[{name}]")), "want {position}: error[{name}], got {e}");
    assert!(!e.contains("panicked") && !e.contains("Internal"), "{e}");
    e
}

/// 1. A chain of 15,000 binary operators aborted with a stack overflow in
///    the resolver; it is now a positioned `SyntaxError` at the parser.
#[test]
fn a_long_operator_chain_is_refused_not_a_stack_overflow() {
    let dir = temp("chain");
    let text =
        format!("graph<N=4> main(x: f32[N]) -> (y: f32[N]) {{\n    y = x{}\n    return y\n}}\n", " + x".repeat(15_000));
    let file = write(&dir, "chain.tgc", &text);
    let e = assert_user_error(&tgc(&["check", &file]), &format!("{file}:2:523"), "SyntaxError");
    assert!(e.contains("split it into statements"), "{e}");
}

/// 2. A `RESHAPE` between symbolic sizes equal only under the bound values
///    failed the Poly-View verifier (`Internal`); the shape fact now reaches
///    the context and the dump succeeds.
#[test]
fn a_reshape_equal_only_by_constraint_has_a_poly_view() {
    let dir = temp("reshape");
    let file = write(
        &dir,
        "reshape.tgc",
        "graph<N=4, K=4, J=4> main(b: f32[J, N]) -> (y: f32[N, K]) {\n    y = reshape(permute(b, [1, 0]), [N, K])\n    return y\n}\n",
    );
    let o = tgc(&["check", &file, "--dump", "poly_view"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("J = K"), "{out}");
}
