//! The files `tgc` writes: its scratch folders
//! are fresh, private and gone after the command, a planted folder with a
//! link inside is never used; its object cache is private and refused when
//! others can write it; an output is written whole or not at all;
//! a name the file system would refuse is refused when the graph is loaded.
//!
//! Each test gives `tgc` its own temp root (`TMPDIR`), so that what is left
//! there is this test's alone.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{repo, stderr, temp};
use tgc_runtime::{npy, DType, HostTensor};

const RELU: &str = "graph main(x: f32[4]) -> (y: f32[4]) {\n    y = relu(x)\n    return y\n}\n";

/// A fresh folder for test `name`, with an empty temp root `tmp` inside.
fn fresh(name: &str) -> (PathBuf, PathBuf) {
    let dir = temp(name);
    let _ = std::fs::remove_dir_all(&dir);
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    (dir, tmp)
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

fn write_input(dir: &Path, values: &[f64]) -> String {
    let file = dir.join("x.npy");
    npy::write_npy(&file, &HostTensor::from_f64(DType::F32, &[values.len()], values).unwrap()).unwrap();
    format!("x={}", file.display())
}

/// A C compiler that logs the mode and path of the folder of the C file it
/// is given (`MODE DIR/FILE.c`), then runs `cc`.
fn spy_cc(dir: &Path) -> (PathBuf, PathBuf) {
    let log = dir.join("cc.log");
    let spy = dir.join("spy-cc.sh");
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in *.c) echo \"$(stat -c %a \"$(dirname \"$a\")\") $a\" >> '{}';; \
         esac; done\nexec cc \"$@\"\n",
        log.display()
    );
    std::fs::write(&spy, script).unwrap();
    std::fs::set_permissions(&spy, std::fs::Permissions::from_mode(0o755)).unwrap();
    (spy, log)
}

/// `sh -c SCRIPT tgc` with the temp root `tmp`, the C compiler `cc` and no
/// object cache: the script `exec`s `"$0"` (tgc), which keeps the shell's
/// process id.
fn sh_tgc(script: &str, tmp: &Path, cc: &Path) -> std::process::Output {
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_tgc"))
        .current_dir(repo())
        .env("TMPDIR", tmp)
        .env("CC", cc)
        .env("TGC_CACHE_DIR", "")
        .output()
        .unwrap()
}

/// `tgc run --backend cpu` keeps what it compiled in the object cache
/// (`TGC_CACHE_DIR`, made mode 0700): a second run of the same graph runs
/// no compile, a changed graph compiles, and a cache folder others can
/// write is refused with a message that names it.
#[test]
fn a_second_run_compiles_nothing_from_the_private_object_cache() {
    let (dir, tmp) = fresh("files-cache");
    let cache = dir.join("cache");
    let input = write_input(&dir, &[-1.0, 2.0, -3.0, 4.0]);
    let (cc, log) = spy_cc(&dir);
    let run = |graph: &str| {
        let path = dir.join("g.tgc");
        std::fs::write(&path, graph).unwrap();
        let out = dir.join("out");
        let o = Command::new(env!("CARGO_BIN_EXE_tgc"))
            .args(["run", path.to_str().unwrap(), "--backend", "cpu", "--input", &input, "--output-dir"])
            .arg(&out)
            .env("TMPDIR", &tmp)
            .env("CC", &cc)
            .env("TGC_CACHE_DIR", &cache)
            .output()
            .unwrap();
        let compiles = std::fs::read_to_string(&log).map_or(0, |l| l.lines().count());
        (o, compiles, npy::read_npy(out.join("y.npy")).map(|y| y.to_f32_vec()))
    };
    let (o, compiles, y) = run(RELU);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!((compiles, y.unwrap()), (1, vec![0.0, 2.0, 0.0, 4.0]));
    assert_eq!(std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777, 0o700);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.starts_with(&format!("700 {}/", cache.display())), "{logged}");

    let (o, compiles, y) = run(RELU);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!((compiles, y.unwrap()), (1, vec![0.0, 2.0, 0.0, 4.0]), "the second run compiled");

    let (o, compiles, y) = run(&RELU.replace("relu(x)", "neg(x)"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!((compiles, y.unwrap()), (2, vec![1.0, -2.0, 3.0, -4.0]), "a changed graph compiles");
    assert_eq!(entries(&tmp), Vec::<String>::new());

    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (o, compiles, _) = run(RELU);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains(&cache.display().to_string()) && e.contains("can be written by others"), "{e}");
    assert!(e.contains("TGC_CACHE_DIR="), "{e}");
    assert_eq!(compiles, 2);
}

/// Item 1: `tgc run --backend cpu` compiled into `/tmp/tgc-run-<pid>`,
/// accepting a folder planted there under that name and writing the C file
/// through a link planted in it. Now the folder is new (random name, mode
/// 0700), the planted one is left alone with the file its link points to,
/// and nothing of tgc's remains in the temp root.
#[test]
fn run_compiles_in_a_fresh_private_folder_and_removes_it() {
    let (dir, tmp) = fresh("files-run");
    let graph = dir.join("relu.tgc");
    std::fs::write(&graph, RELU).unwrap();
    let input = write_input(&dir, &[-1.0, 2.0, -3.0, 4.0]);
    let out = dir.join("out");
    let (cc, log) = spy_cc(&dir);
    let run =
        format!("exec \"$0\" run {} --backend cpu --input {input} --output-dir {}", graph.display(), out.display());

    let o = sh_tgc(&run, &tmp, &cc);
    assert!(o.status.success(), "{}", stderr(&o));
    let logged = std::fs::read_to_string(&log).unwrap();
    let (mode, c_file) = logged.trim().split_once(' ').unwrap();
    let c_file = Path::new(c_file);
    let folder = c_file.parent().unwrap();
    assert_eq!(mode, "700", "{logged}");
    assert_eq!(folder.parent(), Some(tmp.as_path()), "{logged}");
    let name = folder.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("tgc-run-") && !name[8..].bytes().all(|b| b.is_ascii_digit()), "{name}: not a pid");
    assert_eq!(entries(&tmp), Vec::<String>::new(), "the scratch folder is removed");
    assert_eq!(npy::read_npy(out.join("y.npy")).unwrap().to_f32_vec(), [0.0, 2.0, 0.0, 4.0]);

    // The old attack: a folder named as the old scheme named this
    // process's (`tgc-run-$$`, kept by `exec`), a link in it named as the C
    // file pointing to a file of the victim's.
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "the victim's file\n").unwrap();
    let stem = c_file.file_name().unwrap().to_str().unwrap();
    let attack =
        format!("d=\"$TMPDIR/tgc-run-$$\" && mkdir \"$d\" && ln -s {} \"$d/{stem}\" && {run}", victim.display());
    let o = sh_tgc(&attack, &tmp, &cc);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the victim's file\n");
    let planted = entries(&tmp);
    assert!(planted.len() == 1 && planted[0].starts_with("tgc-run-"), "{planted:?}: only the planted folder");
    assert_eq!(entries(&tmp.join(&planted[0])), [stem], "the planted folder is not used");
}

/// Item 1 for `tgc tune`: it compiled in `/tmp/tgc-tune-<pid>` made with
/// the umask's mode, left behind when the tuning failed. Now the folder is
/// private and removed either way.
#[test]
fn tune_compiles_in_a_private_folder_and_leaves_nothing_in_the_temp_root() {
    let (dir, tmp) = fresh("files-tune");
    std::fs::write(
        dir.join("gemm.tgc"),
        "graph<M=16, N=16, K=16> gemm(x: f32[M, K], w: f32[K, N]) -> (y: f32[M, N]) {\n    y = matmul(x, w)\n    \
         return y\n}\n",
    )
    .unwrap();
    let (spy, log) = spy_cc(&dir);
    let tune = |cc: &Path| {
        Command::new(env!("CARGO_BIN_EXE_tgc"))
            .args([
                "tune",
                "gemm.tgc",
                "--cache",
                "tgc-tune",
                "--point",
                "M=16,N=16,K=16",
                "--warmup",
                "0",
                "--repetitions",
                "1",
            ])
            .current_dir(&dir)
            .env("TMPDIR", &tmp)
            .env("CC", cc)
            .output()
            .unwrap()
    };
    let o = tune(&spy);
    assert!(o.status.success(), "{}", stderr(&o));
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.lines().all(|l| l.starts_with(&format!("700 {}/tgc-tune-", tmp.display()))), "{logged}");
    assert_eq!(entries(&tmp), Vec::<String>::new());
    let records = entries(&dir.join("tgc-tune"));
    assert!(!records.is_empty() && records.iter().all(|r| r.ends_with(".json")), "{records:?}");

    let o = tune(Path::new("false"));
    assert_eq!(o.status.code(), Some(1), "the C compiler fails: {}", stderr(&o));
    assert_eq!(entries(&tmp), Vec::<String>::new(), "removed after a failure too");
}

/// Item 5: a second run into the same `--output-dir`, killed while writing
/// `y.npy` (here by a file-size limit: SIGXFSZ after 1 MiB of a 4 MiB
/// output), truncated the good file in place. Now the earlier `y.npy`
/// still loads, unchanged.
#[test]
fn a_run_killed_while_writing_leaves_the_earlier_output_whole() {
    let (dir, tmp) = fresh("files-killed");
    let graph = dir.join("wide.tgc");
    std::fs::write(
        &graph,
        "graph main(x: f32[1]) -> (y: f32[1024, 1024]) {\n    y = expand(reshape(x, [1, 1]), [1024, 1024])\n    \
         return y\n}\n",
    )
    .unwrap();
    let out = dir.join("out");
    let run = |value: f64, limit: &str| {
        let input = write_input(&dir, &[value]);
        let script = format!(
            "{limit} exec \"$0\" run {} --backend interp --input {input} --output-dir {}",
            graph.display(),
            out.display()
        );
        sh_tgc(&script, &tmp, Path::new("cc"))
    };
    let o = run(1.0, "");
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(2.0, "ulimit -f 2048 &&");
    assert_eq!(o.status.signal(), Some(libc_sigxfsz()), "killed while writing: {:?} {}", o.status, stderr(&o));
    let y = npy::read_npy(out.join("y.npy")).unwrap_or_else(|e| panic!("the earlier y.npy: {e}"));
    assert_eq!(y.shape(), [1024, 1024]);
    assert!(y.to_f32_vec().iter().all(|&v| v == 1.0), "the earlier values");
}

/// SIGXFSZ, "file size limit exceeded", on Linux.
fn libc_sigxfsz() -> i32 {
    25
}

/// Item 5: `compile --out` wrote through a link planted at a file name it
/// writes; now the link is replaced and the file it points to kept.
#[test]
fn compile_out_replaces_a_planted_link() {
    let (dir, _) = fresh("files-compile");
    let graph = dir.join("relu.tgc");
    std::fs::write(&graph, RELU).unwrap();
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "the victim's file\n").unwrap();
    std::os::unix::fs::symlink(&victim, out.join("tgc_main.c")).unwrap();
    let o = common::tgc(&["compile", graph.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the victim's file\n");
    assert!(std::fs::read_to_string(out.join("tgc_main.c")).unwrap().starts_with("/* Generated by tgc"));
    assert!(std::fs::symlink_metadata(out.join("tgc_main.c")).unwrap().file_type().is_file());
}

/// Item 5: `compile --target sm80 --out` of a graph with no tensor-core
/// kernel into a folder where an earlier compile wrote `plan.json` left
/// that plan beside the new cubin. (NVRTC runs; no GPU is needed.)
#[test]
fn compile_out_removes_the_plan_of_an_earlier_compile() {
    let (out, _) = fresh("files-plan");
    let o = common::tgc(&[
        "compile",
        "examples/graphs/gemm_bias_relu.tgc",
        "--target",
        "sm80",
        "--out",
        out.to_str().unwrap(),
        "--dim",
        "M=128",
        "--dim",
        "N=128",
        "--dim",
        "K=64",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.join("plan.json").exists());
    let o = common::tgc(&["compile", "tests/spec/002_gemm.json", "--target", "sm80", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let wrote = String::from_utf8_lossy(&o.stdout);
    assert!(wrote.contains(".cubin") && !wrote.contains("plan.json\n"), "a SIMT program: {wrote}");
    assert!(!out.join("plan.json").exists(), "{:?}", entries(&out));
}

/// Item 6: an output named with 300 letters computed everything, wrote
/// the other outputs, then failed with "File name too long". Now the name
/// is refused where it stands, before anything is written, in both
/// source formats.
#[test]
fn an_over_long_output_name_is_refused_before_anything_is_written() {
    let (dir, _) = fresh("files-long-name");
    let input = write_input(&dir, &[1.0, 2.0, 3.0, 4.0]);
    let long = "y".repeat(300);
    let dsl = dir.join("long.tgc");
    std::fs::write(
        &dsl,
        format!("graph main(x: f32[4]) -> (a: f32[4], {long}: f32[4]) {{\n    a = relu(x)\n    {long} = neg(x)\n    return a, {long}\n}}\n"),
    )
    .unwrap();
    let json = dir.join("long.json");
    std::fs::write(
        &json,
        format!(
            "{{\"uops\": [\n  {{\"id\": \"n0\", \"uop\": \"INPUT\", \"arg\": {{\"tensor_id\": \"x\", \"dtype\": \"fp32\", \"shape\": [4]}}}},\n  {{\"id\": \"n1\", \"uop\": \"RELU\", \"src\": [\"n0\"]}}\n],\n \"outputs\": [{{\"name\": \"a\", \"id\": \"n1\"}}, {{\"name\": \"{long}\", \"id\": \"n1\"}}]}}\n"
        ),
    )
    .unwrap();
    for (file, at) in [(&dsl, ":1:38:"), (&json, ":5:50:")] {
        let out = dir.join("out");
        let f = file.to_str().unwrap();
        let o =
            common::tgc(&["run", f, "--backend", "interp", "--input", &input, "--output-dir", out.to_str().unwrap()]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(e.starts_with(&format!("{f}{at} error[SyntaxError]: ")), "{e}");
        assert!(e.contains("is 300 bytes, more than the 128 a name may have"), "{e}");
        assert!(!out.exists(), "nothing written");
    }
}
