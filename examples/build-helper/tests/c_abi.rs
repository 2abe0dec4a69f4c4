//! The C ABI of the model `mlp` from a C program: `tests/c/mlp.c` is
//! compiled against the generated header `$OUT_DIR/tgc_kernels.h`, linked
//! with this crate's cdylib and run; it checks its results against its own
//! plain C computation and the ABI's error statuses, and prints `ok`.

use std::path::PathBuf;
use std::process::Command;

/// The directory of this crate's cdylib: `<profile>/deps`, beside the test
/// binary, where a test build leaves it (`cargo build` also copies it up
/// to `<profile>`).
fn cdylib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    let deps = exe.parent().expect("the binary is in <profile>/deps").to_path_buf();
    match deps.join("libtgc_build_demo.so").exists() {
        true => deps,
        false => deps.parent().map_or(deps.clone(), |p| p.to_path_buf()),
    }
}

#[test]
#[cfg(target_os = "linux")]
fn a_c_program_runs_the_model() {
    let lib_dir = cdylib_dir();
    let lib = lib_dir.join("libtgc_build_demo.so");
    assert!(lib.exists(), "{} is missing: the crate's cdylib is built with the test", lib.display());
    let work = std::env::temp_dir().join(format!("tgc-c-abi-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let exe = work.join("mlp");
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/mlp.c");
    let (cc, mut command) = tgc_runtime::cpu::c_compiler();
    let out = command
        .args(["-std=c11", "-Wall", "-Werror", "-O1", "-I", env!("OUT_DIR")])
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib_dir.display()))
        .arg("-ltgc_build_demo")
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .arg("-lm")
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    assert!(out.status.success(), "`{cc}` failed on {}:\n{}", source.display(), String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).output().expect("the C program starts");
    let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    let _ = std::fs::remove_dir_all(&work);
    assert!(run.status.success() && stdout.trim() == "ok", "the C program failed:\n{stdout}{stderr}");
}
