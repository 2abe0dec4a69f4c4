//! Hostile input: each reproducer of the reliability probe ends
//! with exit 1 and a positioned message, or exit 0 with a correct result
//! where the input is valid — never an abort, a hang, an internal error or
//! a write outside the folder the user named.

use std::path::Path;
use std::process::{Command, Output};

mod common;
use common::{stderr, temp, tgc};

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
    let dir = temp("hostile-chain");
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
    let dir = temp("hostile-reshape");
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

/// A chain of `n` links `t = reshape(permute(reshape(t, [2, 2]), [1, 0]), [4])`.
fn link_chain(n: usize) -> String {
    let links = "    t = reshape(permute(reshape(t, [2, 2]), [1, 0]), [4])\n".repeat(n);
    format!("graph main(x: f32[4]) -> (y: f32[4]) {{\n    t = x\n{links}    y = t\n    return y\n}}\n")
}

/// 3. Composed movement chains grew ×1.5 per link (> 20 s at 20 links);
///    each link is an involution and now folds as it is composed: 21 links
///    run on the CPU backend in well under a second and give the one swap.
#[test]
fn a_movement_chain_composes_in_linear_time() {
    let dir = temp("hostile-links");
    let file = write(&dir, "links.tgc", &link_chain(21));
    let x = tgc_runtime::HostTensor::from_f64(tgc_runtime::DType::F32, &[4], &[10.0, 11.0, 12.0, 13.0]).unwrap();
    let x_file = dir.join("x.npy");
    tgc_runtime::npy::write_npy(&x_file, &x).unwrap();
    let out = dir.join("out");
    let start = std::time::Instant::now();
    let o = tgc(&[
        "run",
        &file,
        "--backend",
        "cpu",
        "--input",
        &format!("x={}", x_file.display()),
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let y = tgc_runtime::npy::read_npy(out.join("y.npy")).unwrap();
    assert_eq!(y.to_f64_vec(), [10.0, 12.0, 11.0, 13.0], "an odd number of swaps of the middle two");
    let c = tgc(&["check", &file, "--dump", "c"]);
    let text = String::from_utf8_lossy(&c.stdout);
    assert!(text.contains("out0[i0] = in0[2*i0 - 3*floord(i0, 2)];"), "one link's index, not 21 nested: {text}");
    // The C compile dominates; the chain itself used to take > 20 s.
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
}

/// Writes `x.npy` in `dir`, an f32 tensor of `shape` filled with `value`,
/// and returns `x=PATH`.
fn input(dir: &Path, shape: &[usize], value: f64) -> String {
    let n = shape.iter().product();
    let x = tgc_runtime::HostTensor::from_f64(tgc_runtime::DType::F32, shape, &vec![value; n]).unwrap();
    let file = dir.join("x.npy");
    tgc_runtime::npy::write_npy(&file, &x).unwrap();
    format!("x={}", file.display())
}

/// [`input`] of one f32 1.0.
fn one_input(dir: &Path) -> String {
    input(dir, &[1], 1.0)
}

/// 5. A 16 GiB output aborted `run --backend cpu` ("memory allocation …
///    failed"); under a 3 GB address-space limit (so that the allocator
///    refuses whatever the machine's overcommit policy) it is now exit 1
///    naming the tensor.
#[test]
fn an_output_too_large_to_allocate_is_an_error_not_an_abort() {
    let dir = temp("hostile-oom");
    let file = write(
        &dir,
        "big.tgc",
        "graph main(x: f32[1]) -> (y: f32[65536, 65536]) {\n    y = expand(reshape(x, [1, 1]), [65536, 65536])\n    return y\n}\n",
    );
    let out = dir.join("out");
    let script = format!(
        "ulimit -v 3000000 && exec \"$0\" run {file} --backend cpu --input {} --output-dir {}",
        one_input(&dir),
        out.display()
    );
    let o = Command::new("sh").arg("-c").arg(script).arg(env!("CARGO_BIN_EXE_tgc")).output().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("cannot allocate 17179869184 bytes for a f32 tensor of shape [65536, 65536]"), "{e}");
    assert!(!e.contains("panicked") && !e.contains("memory allocation of"), "{e}");
}

/// 6. An output named `../../escaped` made `tgc run` write outside
///    `--output-dir`; names that become file names or code are now held to
///    the graph language's identifier rule when the JSON is loaded.
#[test]
fn output_names_that_are_not_plain_names_are_refused() {
    let dir = temp("hostile-escape");
    let x = one_input(&dir);
    for name in ["../../escaped", "/tmp/anywhere", "", "1x"] {
        let json = format!(
            "{{\"uops\": [\n  {{\"id\": \"n0\", \"uop\": \"INPUT\", \"arg\": {{\"tensor_id\": \"x\", \"dtype\": \"fp32\", \"shape\": [1]}}}},\n  {{\"id\": \"n1\", \"uop\": \"RELU\", \"src\": [\"n0\"]}}\n],\n \"outputs\": [{{\"name\": {name:?}, \"id\": \"n1\"}}]}}\n"
        );
        let file = write(&dir, "g.json", &json);
        let out = dir.join("deep/out");
        let o = tgc(&["run", &file, "--backend", "interp", "--input", &x, "--output-dir", out.to_str().unwrap()]);
        let e = assert_user_error(&o, &format!("{file}:5:23"), "SyntaxError");
        assert!(e.contains("is not a plain name"), "{e}");
        assert!(!dir.join("escaped.npy").exists() && !dir.join("deep").exists(), "{name:?}: nothing written");
    }
}

/// 8. JSON schema errors named a path but no position, and a non-UTF-8
///    `.tgc` file had no position at all; both now give line:column (the
///    path stays in the message).
#[test]
fn json_schema_errors_and_bad_encodings_have_positions() {
    let dir = temp("hostile-positions");
    let id = write(&dir, "id.json", "{\"uops\": [\n  {\"id\": 5, \"uop\": \"INPUT\"}\n]}\n");
    let e = assert_user_error(&tgc(&["check", &id]), &format!("{id}:2:10"), "SyntaxError");
    assert!(e.contains("`uops[0].id` must be a string"), "{e}");
    let shape = write(
        &dir,
        "shape.json",
        "{\"uops\": [\n  {\"id\": \"n0\", \"uop\": \"INPUT\", \"arg\": {\"tensor_id\": \"x\", \"dtype\": \"fp32\", \"shape\": [2, \"M+\"]}}\n]}\n",
    );
    let e = assert_user_error(&tgc(&["check", &shape]), &format!("{shape}:2:88"), "SyntaxError");
    assert!(e.contains("`uops[0].arg.shape[1]`"), "{e}");
    let missing = write(&dir, "missing.json", "{\n  \"name\": \"g\"\n}\n");
    assert_user_error(&tgc(&["check", &missing]), &format!("{missing}:1:1"), "SyntaxError");

    let path = dir.join("latin1.tgc");
    std::fs::write(&path, b"graph main(x: f32[4]) -> (y: f32[4]) {\n    y = x \xff\n    return y\n}\n").unwrap();
    let file = path.to_str().unwrap();
    let e = assert_user_error(&tgc(&["check", file]), &format!("{file}:2:11"), "SyntaxError");
    assert!(e.contains("not UTF-8: byte 0xff"), "{e}");
}

/// 9. `graph<M=128, …>` defaults were ignored by `compile --target sm80`
///    without `--dim` (`UnboundSymbol`); they are now used, and the note
///    says so. A `--dim` still overrides its symbol.
#[test]
fn graph_header_defaults_bind_the_sm80_compile() {
    let graph = "examples/graphs/gemm_bias_relu.tgc";
    let o = tgc(&["compile", graph, "--target", "sm80", "--dump", "plan"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(e.contains("note: M=128, N=256, K=64 from the graph header's defaults"), "{e}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("GEMM M=128 N=256 K=64"));
    let o = tgc(&["compile", graph, "--target", "sm80", "--dump", "plan", "--dim", "M=512"]);
    assert!(stderr(&o).contains("note: N=256, K=64 from"), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("GEMM M=512 N=256 K=64"));
}

/// 7. `compile --target sm80` accepted sizes its kernel cannot launch
///    (`int K` overflows, `grid.y` past 65535) and blamed the plan space for
///    an f32 GEMM; the tensor-core template now refuses each with
///    `Unsupported` at the contraction, naming the size and the limit, and
///    the graph compiles to its SIMT kernels with that as a note.
#[test]
fn sm80_launch_limits_and_operand_dtypes_are_checked_at_compile_time() {
    let refused = |args: &[&str], at: &str| -> String {
        let o = tgc(args);
        let e = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {e}");
        let note = "note: falls back to SIMT kernels because the tensor-core templates refuse it: ";
        assert!(e.contains(&format!("{at}: {note}")), "{args:?}: {e}");
        assert!(!e.contains("error["), "a note names no error: {e}");
        assert!(!e.contains("panicked"), "{e}");
        e
    };
    let graph = "examples/graphs/gemm_bias_relu.tgc";
    let at = "examples/graphs/gemm_bias_relu.tgc:4:11";
    // The block count depends on the chosen tile (BM of 64 to 256): at
    // M = 2^24 every tile of the space needs more than 65535 blocks.
    for (dim, says) in [
        ("K=2147483648", &["K = 2147483648 does not fit the sm80 kernel's 32-bit `int K` parameter"][..]),
        ("M=16777216", &["blocks along y (⌈M/", "⌉), more than the 65535 sm80 allows"][..]),
    ] {
        let e = refused(&["compile", graph, "--target", "sm80", "--dim", dim], at);
        assert!(says.iter().all(|s| e.contains(s)), "{dim}: {e}");
    }
    let dir = temp("hostile-f32gemm");
    let file = write(
        &dir,
        "f32.tgc",
        "graph<M=64, N=64, K=64> main(x: f32[M, K], w: f32[K, N]) -> (y: f32[M, N]) {\n    y = matmul(x, w)\n    return y\n}\n",
    );
    let e = refused(&["compile", &file, "--target", "sm80"], &format!("{file}:2:9"));
    assert!(e.contains("sm80 has no tensor-core MMA for f32 operands (it takes f16, bf16)"), "{e}");
}

/// `tiny::graph::MAX_SYMBOLS`: a header of 64 symbols checks, the 65th
/// symbol is `ResourceExceeded` where it is declared.
#[test]
fn the_symbol_limit_holds_at_its_value() {
    let dir = temp("hostile-symbols");
    let graph = |n: usize| {
        let syms: Vec<String> = (0..n).map(|k| format!("S{k}=1")).collect();
        format!("graph<{}> main(x: f32[S0]) -> (y: f32[S0]) {{\n    y = x + x\n    return y\n}}\n", syms.join(", "))
    };
    let ok = write(&dir, "max.tgc", &graph(64));
    let o = tgc(&["check", &ok]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = graph(65);
    let col = text.find("S64=").unwrap() + 1;
    let file = write(&dir, "over.tgc", &text);
    let e = assert_user_error(&tgc(&["check", &file]), &format!("{file}:1:{col}"), "ResourceExceeded");
    assert!(e.contains("MAX_SYMBOLS"), "{e}");
}

/// `tiny::graph::MAX_RANK`: a rank-16 graph runs on the CPU backend, a
/// rank-17 parameter is `ResourceExceeded` at its declaration.
#[test]
fn the_rank_limit_holds_at_its_value() {
    let dir = temp("hostile-rank");
    let graph = |rank: usize| {
        let dims = vec!["1"; rank].join(", ");
        format!("graph main(x: f32[{dims}]) -> (y: f32[{dims}]) {{\n    y = x + x\n    return y\n}}\n")
    };
    let x = input(&dir, &[1; 16], 1.5);
    let ok = write(&dir, "max.tgc", &graph(16));
    let out = dir.join("out");
    let o = tgc(&["run", &ok, "--backend", "cpu", "--input", &x, "--output-dir", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let y = tgc_runtime::npy::read_npy(out.join("y.npy")).unwrap();
    assert_eq!((y.shape(), y.to_f64_vec()), (&[1; 16][..], vec![3.0]));
    let file = write(&dir, "over.tgc", &graph(17));
    let e = assert_user_error(&tgc(&["check", &file]), &format!("{file}:1:12"), "ResourceExceeded");
    assert!(e.contains("MAX_RANK"), "{e}");
}

/// `diag::MAX_SOURCE_BYTES`: a graph file of exactly 64 MiB checks, one
/// byte more is `ResourceExceeded` at 1:1 (and the file is not read past
/// the limit).
#[test]
fn the_source_size_limit_holds_at_its_value() {
    let dir = temp("hostile-size");
    let graph = "graph main(x: f32[4]) -> (y: f32[4]) {\n    y = x + x\n    return y\n}\n";
    let limit = tgc_core::diag::MAX_SOURCE_BYTES as usize;
    let mut text = graph.to_string();
    text.push_str(&"\n".repeat(limit - graph.len()));
    let ok = write(&dir, "max.tgc", &text);
    let o = tgc(&["check", &ok]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    text.push('\n');
    let file = write(&dir, "over.tgc", &text);
    let e = assert_user_error(&tgc(&["check", &file]), &format!("{file}:1:1"), "ResourceExceeded");
    assert!(e.contains("MAX_SOURCE_BYTES"), "{e}");
}

/// A graph of one 4-byte input whose nodes are larger than its buffers
/// (an expand of a reshape, added to itself), written to the test folder
/// `name` with its input; returns the graph's path and a runner of `tgc run
/// --backend BACKEND --max-memory BUDGET` on it.
fn budget_runs(name: &str, backend: &'static str) -> (String, impl Fn(&str) -> Output) {
    let dir = temp(name);
    let file = write(
        &dir,
        "budget.tgc",
        "graph main(x: f32[1]) -> (y: f32[32, 32]) {\n    e = expand(reshape(x, [1, 1]), [32, 32])\n    y = e + e\n    return y\n}\n",
    );
    let x = one_input(&dir);
    let out = dir.join("out").to_str().unwrap().to_owned();
    let graph = file.clone();
    let run = move |budget: &str| {
        tgc(&["run", &graph, "--backend", backend, "--input", &x, "--output-dir", &out, "--max-memory", budget])
    };
    (file, run)
}

/// `tgc run --max-memory`: a budget of exactly the bytes the run holds
/// (every node's value and the input files' data) runs, one byte less is `ResourceExceeded` at the
/// expression of the largest tensor, before anything is allocated.
#[test]
fn the_run_budget_holds_at_its_value() {
    // x: 4 B, reshape: 4 B, expand: 4·1024 B, add: 4·1024 B.
    let (file, run) = budget_runs("hostile-budget", "interp");
    // With the 4 bytes of x.npy's data, which the reader holds.
    let need = 4 + 4 + 4 + 2 * 4 * 1024;
    let o = run(&need.to_string());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = assert_user_error(&run(&(need - 1).to_string()), &format!("{file}:2:9"), "ResourceExceeded");
    assert!(e.contains(&format!("needs up to {need} bytes of tensors (4 of them the data read from its input")), "{e}");
    let o = run("1T");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("`1T` is not a byte count"), "{}", stderr(&o));
}

/// `tgc run --backend cpu --max-memory`: the CPU backend is held to the
/// buffers its program allocates (here x and y: the reshape, the expand and
/// the sum are fused into y's kernel), not to every node's value, so a
/// graph whose views are larger than its buffers (a convolution's window,
/// VGG-19's first layers) still runs.
#[test]
fn the_cpu_budget_counts_the_buffers_of_its_program() {
    let (_, run) = budget_runs("hostile-cpu-budget", "cpu");
    // x's buffer, y's buffer, and x.npy's 4 bytes of data.
    let need = 4 + 4 * 1024 + 4;
    let o = run(&need.to_string());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&(need - 1).to_string());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains(&format!("needs up to {need} bytes")) && e.contains("buffer `y` of shape [32, 32]"), "{e}");
}

/// Runs `tgc ARGS` under a 3 GB address-space limit (so that a reader that
/// grows without bound fails instead of taking the machine's memory) and
/// kills it after 20 s (so that one that blocks fails instead of hanging
/// the test); returns its output and how long it ran.
fn tgc_bounded(args: &[String]) -> (Output, std::time::Duration) {
    let start = std::time::Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 3000000 && exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_tgc"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() && start.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    (out, start.elapsed())
}

/// `tgc run GRAPH --backend interp --input SPEC --output-dir OUT` as [`tgc_bounded`] runs it.
fn run_bounded(graph: &str, spec: &str, out: &Path, more: &[&str]) -> (Output, std::time::Duration) {
    let mut args: Vec<String> =
        ["run", graph, "--backend", "interp", "--input", spec, "--output-dir"].iter().map(|s| s.to_string()).collect();
    args.push(out.display().to_string());
    args.extend(more.iter().map(|s| s.to_string()));
    tgc_bounded(&args)
}

/// Issue 54, 4. An input that is a link to `/dev/zero` was read until
/// memory ran out, and a FIFO blocked `tgc run` until a writer came: an
/// input must be a regular file, checked before a byte is read (as `.npy`
/// and as `.safetensors`).
#[test]
fn inputs_that_are_not_regular_files_are_refused_at_once() {
    let dir = temp("hostile-not-files");
    let graph = write(&dir, "g.tgc", "graph<N=4> main(x: f32[N]) -> (y: f32[N]) {\n    y = x + x\n    return y\n}\n");
    let fifo = |name: &str| {
        let path = dir.join(name);
        let ok = Command::new("mkfifo").arg(&path).status().unwrap().success();
        assert!(ok, "mkfifo {}", path.display());
        path
    };
    let cases = [
        (dir.join("zero.npy"), "a character device"),
        (dir.join("zero.safetensors"), "a character device"),
        (fifo("fifo.npy"), "a FIFO"),
        (fifo("fifo.safetensors"), "a FIFO"),
        (dir.join("dir.npy"), "a directory"),
    ];
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.npy")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.safetensors")).unwrap();
    std::fs::create_dir_all(dir.join("dir.npy")).unwrap();
    for (path, kind) in cases {
        let tensor = if path.extension().unwrap() == "safetensors" { ":x" } else { "" };
        let (o, took) = run_bounded(&graph, &format!("x={}{tensor}", path.display()), &dir.join("out"), &[]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{}: {e}", path.display());
        let want = format!("cannot read `{}`: it is {kind}, not a regular file", path.display());
        assert!(e.contains(&want), "want {want}, got {e}");
        assert!(took.as_secs_f64() < 1.0, "{}: {took:?}", path.display());
    }
}

/// Issue 54, 4. Input files were read whole before any check, so a file
/// whose header declared 1 TiB of data was read (or allocated) before the
/// run's budget refused the tensors; the data is now counted against
/// `--max-memory` from the header, before it is read. The files are sparse:
/// 1 TiB long, a few blocks on disk.
#[test]
fn input_data_is_counted_against_the_budget_before_it_is_read() {
    let dir = temp("hostile-huge-input");
    let graph = write(&dir, "g.tgc", "graph<N=4> main(x: f32[N]) -> (y: f32[N]) {\n    y = x + x\n    return y\n}\n");
    let n: u64 = 1 << 38;
    let sparse = |name: &str, header: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, header).unwrap();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(header.len() as u64 + 4 * n).unwrap();
        path
    };
    let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({n},), }}\n");
    let npy =
        sparse("huge.npy", &[&b"\x93NUMPY\x01\x00"[..], &(dict.len() as u16).to_le_bytes(), dict.as_bytes()].concat());
    let json = format!(r#"{{"x":{{"dtype":"F32","shape":[{n}],"data_offsets":[0,{}]}}}}"#, 4 * n);
    let st = sparse("huge.safetensors", &[&(json.len() as u64).to_le_bytes()[..], json.as_bytes()].concat());
    for spec in [format!("x={}", npy.display()), format!("x={}:x", st.display())] {
        let (o, took) = run_bounded(&graph, &spec, &dir.join("out"), &["--max-memory", "1G"]);
        let e = assert_user_error(&o, &format!("{graph}:1:17"), "ResourceExceeded");
        let want =
            format!("needs up to {} bytes of tensors ({} of them the data read from its input files)", 12 * n, 4 * n);
        assert!(e.contains(&want), "{spec}: want {want}, got {e}");
        assert!(took.as_secs_f64() < 1.0, "{spec}: {took:?}");
    }
}
