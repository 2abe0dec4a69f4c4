//! What a new user meets first: pipeable DOT dumps, the one-box-per-region
//! picture, the tuning cache's place, GPU dumps that name the architecture
//! they were compiled for.

mod common;

use common::{stderr, temp, tgc, tgc_in};

fn stdout_of(args: &[&str]) -> String {
    let o = tgc(args);
    assert!(o.status.success(), "tgc {args:?}: {}", stderr(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// A DOT stage dumped alone is bare DOT text (`| dot -Tpng` reads it);
/// with several stages each is headed.
#[test]
fn a_dot_dump_alone_pipes_into_graphviz() {
    let graph = "examples/minilm/graphs/minilm.tgc";
    for stage in ["dot", "dot_regions", "dot_kernels"] {
        let out = stdout_of(&["compile", graph, "--dump", stage]);
        assert!(out.starts_with("digraph \"main\" {\n") && out.ends_with("}\n"), "{stage}: {}", &out[..80]);
    }
    let both = stdout_of(&["compile", graph, "--dump", "tiny,dot"]);
    assert!(both.starts_with("=== tiny ===\n") && both.contains("=== dot ===\ndigraph"), "{}", &both[..80]);
}

/// `dot_kernels` draws each region once: as many boxes as `dot_regions` has
/// clusters.
#[test]
fn dot_kernels_has_one_box_per_region() {
    let graph = "examples/minilm/graphs/minilm.tgc";
    let clusters = stdout_of(&["compile", graph, "--dump", "dot_regions"]).matches("subgraph cluster_").count();
    let kernels = stdout_of(&["compile", graph, "--dump", "dot_kernels"]);
    let boxes =
        kernels.lines().filter(|l| l.starts_with("  r") && l.contains(" [label=") && !l.contains(" -> ")).count();
    assert!(clusters > 10);
    assert_eq!(boxes, clusters, "{kernels}");
    assert!(!kernels.contains("subgraph"), "{kernels}");
}

/// `tgc tune` without `--cache` writes nowhere: the cache's folder is the
/// user's to name, never the folder they happen to stand in.
#[test]
fn tune_needs_a_cache_folder() {
    let dir = temp("tune-no-cache");
    std::fs::write(
        dir.join("g.tgc"),
        "graph main(x: f32[8, 8], w: f32[8, 8]) -> (y: f32[8, 8]) {\n    y = matmul(x, w)\n    return y\n}\n",
    )
    .unwrap();
    let o = tgc_in(&dir, &["tune", "g.tgc", "--warmup", "0", "--repetitions", "1"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--cache <DIR>"), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "only g.tgc is there");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The console line of `tgc tune` shows the CSV's numbers (round 1's
/// medians of the analytic and the chosen sizes), the CSV's `threads`
/// says how many threads a candidate ran on, and the picture labels each
/// candidate with the CSV's time.
#[test]
fn tune_console_and_csv_agree() {
    let dir = temp("tune-agree");
    std::fs::write(
        dir.join("g.tgc"),
        "graph main(x: f32[64, 64], w: f32[64, 64]) -> (y: f32[64, 64]) {\n    y = matmul(x, w)\n    return y\n}\n",
    )
    .unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tgc"))
        .args(["tune", "g.tgc", "--cache", "c", "--warmup", "0", "--repetitions", "3", "--report", "log.csv"])
        .current_dir(&dir)
        .env("TGC_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    let line = out.lines().find(|l| l.contains(" µs → ")).unwrap_or_else(|| panic!("{out}"));
    let shown: Vec<f64> =
        line.split(" µs").take(2).map(|t| t.split_whitespace().last().unwrap().parse().unwrap()).collect();
    let csv = std::fs::read_to_string(dir.join("log.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().skip(1).map(|l| l.rsplit(',').collect()).collect();
    // Reversed columns: chosen, analytic, measured_ns, threads, …
    let measured = |col: usize| rows.iter().find(|r| r[col] == "true").unwrap()[2].parse::<f64>().unwrap() / 1e3;
    for (i, col) in [1, 0].into_iter().enumerate() {
        assert!((measured(col) - shown[i]).abs() < 0.051, "console {line} against CSV:\n{csv}");
    }
    assert!(rows.iter().all(|r| r[3] == "1"), "one pool thread:\n{csv}");
    // The picture names every candidate as text, with the CSV's time as
    // the console prints it.
    let svg = std::fs::read_to_string(dir.join("log.svg")).unwrap();
    for r in &rows {
        let name = format!(">mc={} nc={} kc={}", r[6], r[5], r[4]);
        assert!(svg.contains(&name), "{name} in:\n{svg}");
        if let Ok(ns) = r[2].parse::<f64>() {
            assert!(svg.contains(&format!(">{:.1} µs</text>", ns / 1e3)), "{ns} ns in:\n{svg}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The section of `=== stage ===` in `out`, up to the next banner.
fn section<'a>(out: &'a str, stage: &str) -> &'a str {
    let head = format!("=== {stage} ===\n");
    let at = out.find(&head).unwrap_or_else(|| panic!("no {stage} dump")) + head.len();
    let rest = &out[at..];
    &rest[..rest.find("\n=== ").map_or(rest.len(), |e| e + 1)]
}

/// Every GPU dump opens with the architecture its unit was compiled for.
/// An f32 GEMM on `--target sm90` falls back to SIMT kernels, which are
/// sm_80 code: each dump says so, and why (the fallback's note), before
/// cuobjdump's `code for sm_80`; an f16 GEMM gets sm_90a on sm90, and
/// sm_80 on sm80.
#[test]
fn gpu_dumps_name_the_architecture_compiled_for() {
    let dir = temp("compiled-for");
    let graph = dir.join("gemm_f32.tgc");
    std::fs::write(
        &graph,
        "graph<M=64, N=64, K=64> main(x: f32[M, K], w: f32[K, N]) -> (y: f32[M, N]) {\n    y = matmul(x, w)\n    \
         return y\n}\n",
    )
    .unwrap();
    let out = stdout_of(&["compile", graph.to_str().unwrap(), "--target", "sm90", "--dump", "gpu,cu,ptx,sass"]);
    let why = format!(
        "// {}:2:9: note: falls back to SIMT kernels because the tensor-core templates refuse it: ",
        graph.display()
    );
    for stage in ["gpu", "cu", "ptx", "sass"] {
        let text = section(&out, stage);
        let lines: Vec<&str> = text.lines().take(2).collect();
        assert!(
            lines[0].starts_with("// compiled for sm_80, not the sm_90a of --target sm90: no kernel needs sm_90a")
                && lines[1].starts_with(&why)
                && lines[1].contains("f32"),
            "{stage}:\n{text}"
        );
    }
    assert!(section(&out, "sass").contains("code for sm_80"), "{out}");
    assert!(section(&out, "ptx").contains(".target sm_80"), "{out}");

    let f16 = "examples/graphs/gemm_bias_relu.tgc";
    for (target, arch) in [("sm90", "sm_90a"), ("sm80", "sm_80")] {
        let out = stdout_of(&["compile", f16, "--target", target, "--dump", "gpu,sass"]);
        for stage in ["gpu", "sass"] {
            let head = format!("// compiled for {arch} (--target {target})\n");
            assert!(section(&out, stage).starts_with(&head), "{target} {stage}:\n{out}");
        }
        assert!(section(&out, "sass").contains(&format!("code for {arch}")), "{out}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `kernel!` and the build helper lower through
/// `tgc_core::emit::api::kernel_module`, the CLI through
/// `pipeline::compile_cpu`: with feature `poly` on both sides (this test's
/// tgc-core has it, as the binary's) the build helper's C is `tgc compile
/// --dump c` byte for byte. Without `poly` (the facade's default, and a
/// build script's plain `tgc-core`) the regions are the grouping's, which
/// `--regions grouping` prints: Conv → ReLU → MaxPool is one kernel with
/// Poly Core and two without it (docs/kernels.md, "`kernel!` and the CLI").
#[test]
fn the_build_helper_and_the_cli_give_the_same_kernels() {
    use tgc_core::emit::api::{kernel_module, Backend};
    let path = "examples/graphs/conv_relu_pool.tgc";
    let text = std::fs::read_to_string(common::repo().join(path)).unwrap();
    let g = tgc_core::pipeline::load(&text, tgc_core::pipeline::Format::Dsl, None).unwrap().graph;
    let backend = Backend::C { symbol: format!("tgc_{}", g.name), tuning: None };
    let helper = kernel_module("conv_relu_pool", &g, &[], &backend).unwrap();
    let cli = stdout_of(&["compile", path, "--dump", "c"]);
    assert_eq!(cli, format!("=== c ===\n{}", helper.c_units[0].source));

    // One C function per kernel: `static … tgc_k<i>_<symbol>(…)`.
    let kernels =
        |c: &str| c.lines().filter(|l| l.starts_with("static ") && l.contains("_tgc_conv_relu_pool(")).count();
    let grouping = stdout_of(&["compile", path, "--regions", "grouping", "--dump", "region,c"]);
    assert!(grouping.contains("regions conv_relu_pool (grouping)\n"), "{grouping}");
    assert_eq!((kernels(&cli), kernels(&grouping)), (1, 2), "{cli}\n{grouping}");
    let fused = stdout_of(&["compile", path, "--regions", "poly-core", "--dump", "region"]);
    assert!(fused.contains("regions conv_relu_pool (grouping + poly core)\n"), "{fused}");
    let o = tgc(&["compile", path, "--target", "sm80", "--regions", "grouping"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--regions applies to --target cpu only"), "{}", stderr(&o));
}
