//! `tgc tune` (`tgc_core::tune`): it writes a cache, `--check` passes on it
//! and fails after a graph edit, `compile --tuning` reads it the same way
//! twice, and a hand-edited record is refused.

mod common;
use common::{stderr, temp, tgc, tgc_in};

const GEMM: &str = "// f32 GEMM + bias + ReLU.
graph<M=96, N=64, K=48> gemm(x: f32[M, K], w: f32[K, N], bias: f32[N]) -> (y: f32[M, N]) {
    y = relu(matmul(x, w) + bias)
    return y
}
";

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn tune_writes_a_cache_that_check_and_compile_read_and_an_edit_invalidates() {
    let dir = temp("tune");
    let _ = std::fs::remove_dir_all(dir.join("tgc-tune"));
    std::fs::write(dir.join("gemm.tgc"), GEMM).unwrap();
    let point = ["--point", "M=96,N=64,K=48"];

    // Nothing tuned yet: --check fails and names the kernel.
    let o = tgc_in(&dir, &["tune", "gemm.tgc", "--cache", "tgc-tune", point[0], point[1], "--check"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("kernel k0 has no record") && stderr(&o).contains("run `tgc tune`"), "{}", stdout(&o));

    let o = tgc_in(
        &dir,
        &[
            "tune",
            "gemm.tgc",
            "--cache",
            "tgc-tune",
            point[0],
            point[1],
            "--warmup",
            "0",
            "--repetitions",
            "2",
            "--report",
            "log.csv",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("gemm at K=48, M=96, N=64") && out.contains("whole graph: analytic"), "{out}");
    let records: Vec<_> = std::fs::read_dir(dir.join("tgc-tune")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(records.len(), 1, "one packed kernel, one record");
    let csv = std::fs::read_to_string(dir.join("log.csv")).unwrap();
    assert!(csv.starts_with("graph,point,key,kernels,flops,bytes,estimate_ns"), "{csv}");
    assert!(csv.lines().count() >= 3 && csv.contains(",true,"), "candidates, the analytic one marked: {csv}");
    let svg = std::fs::read_to_string(dir.join("log.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("<rect") && svg.trim_end().ends_with("</svg>"));

    let o = tgc_in(&dir, &["tune", "gemm.tgc", "--cache", "tgc-tune", point[0], point[1], "--check"]);
    assert!(o.status.success() && stdout(&o).contains("1 packed kernel key recorded"), "{}", stderr(&o));

    // Two builds from the cache print the same C, with the recorded kc.
    let record: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&records[0]).unwrap()).unwrap();
    let kc = record["plan"]["kc"].as_u64().unwrap();
    let compile = || {
        let o = tgc_in(
            &dir,
            &[
                "compile", "gemm.tgc", "--dim", "M=96", "--dim", "N=64", "--dim", "K=48", "--tuning", "tgc-tune",
                "--dump", "c",
            ],
        );
        assert!(o.status.success() && !stderr(&o).contains("no tuning record"), "{}", stderr(&o));
        stdout(&o)
    };
    let c = compile();
    assert_eq!(c, compile(), "a build from the cache is reproducible");
    assert!(c.contains(&format!("pk_ctx.kc = {kc};")), "the C has the recorded kc = {kc}");

    // Another point: its kernel has no record; compile notes it.
    let o = tgc_in(
        &dir,
        &[
            "compile", "gemm.tgc", "--dim", "M=32", "--dim", "N=64", "--dim", "K=48", "--tuning", "tgc-tune", "--dump",
            "c",
        ],
    );
    assert!(o.status.success() && stderr(&o).contains("no tuning record for 1 packed kernel (k0;"), "{}", stderr(&o));

    // An edit of the graph changes the kernel: --check fails again.
    std::fs::write(dir.join("gemm.tgc"), GEMM.replace("relu(", "sigmoid(")).unwrap();
    let o = tgc_in(&dir, &["tune", "gemm.tgc", "--cache", "tgc-tune", point[0], point[1], "--check"]);
    assert_eq!(o.status.code(), Some(1), "a stale record does not pass: {}", stdout(&o));

    // A hand edit of the plan is refused, by check and by compile.
    let text = std::fs::read_to_string(&records[0]).unwrap();
    std::fs::write(&records[0], text.replacen(&format!("\"kc\": {kc}"), &format!("\"kc\": {}", kc + 1), 1)).unwrap();
    for args in [
        &["tune", "gemm.tgc", "--cache", "tgc-tune", point[0], point[1], "--check"][..],
        &["compile", "gemm.tgc", "--tuning", "tgc-tune", "--dump", "c"][..],
    ] {
        let o = tgc_in(&dir, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains("is refused: its digest does not match"), "{args:?}: {}", stderr(&o));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tune_rejects_a_point_that_leaves_a_symbol_open_or_names_no_symbol() {
    let dir = temp("tune-bad");
    std::fs::write(
        dir.join("g.tgc"),
        "graph<M, N, K> g(x: f32[M, K], w: f32[K, N]) -> (y: f32[M, N]) {\n    y = matmul(x, w)\n    return y\n}\n",
    )
    .unwrap();
    let o = tgc_in(&dir, &["tune", "g.tgc", "--cache", "tgc-tune", "--point", "M=8,K=8"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("leaves N open"), "{}", stderr(&o));
    let o = tgc_in(&dir, &["tune", "g.tgc", "--cache", "tgc-tune", "--point", "M=8,K"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--point `M=8,K`"), "{}", stderr(&o));
    assert!(!dir.join("tgc-tune").exists(), "a refused command writes nothing");
}

#[test]
fn tune_help_shows_examples_and_the_flags() {
    let o = tgc(&["tune", "--help"]);
    assert!(o.status.success());
    let help = stdout(&o);
    for want in ["--point", "--check", "--report", "--repetitions", "tgc tune graphs/gemm.tgc --point M=256"] {
        assert!(help.contains(want), "`{want}` in:\n{help}");
    }
}

/// A graph that Poly Core fuses (ReLU of one GEMM computed at the next) is
/// lowered differently by builds without feature `poly` (the build
/// helper's): `tgc tune` tunes both programs, so `--check` and both kinds
/// of build find every key.
#[test]
fn tune_records_the_unfused_program_too() {
    let dir = temp("tune-unfused");
    let _ = std::fs::remove_dir_all(dir.join("tgc-tune"));
    let mlp =
        "graph<B=4> main(x: f32[B, 16], w1: f32[16, 32], b1: f32[32], w2: f32[32, 8], b2: f32[8]) -> (y: f32[B, 8]) {
    h = relu(matmul(x, w1) + b1)
    y = matmul(h, w2) + b2
    return y
}
";
    std::fs::write(dir.join("mlp.tgc"), mlp).unwrap();
    let o = tgc_in(&dir, &["tune", "mlp.tgc", "--cache", "tgc-tune", "--warmup", "0", "--repetitions", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("main at B=4 (unfused, as builds without feature `poly` lower it)"), "{out}");
    let records = std::fs::read_dir(dir.join("tgc-tune")).unwrap().count();
    assert_eq!(records, 3, "the fused program's kernel and the unfused program's two: {out}");
    let o = tgc_in(&dir, &["tune", "mlp.tgc", "--cache", "tgc-tune", "--check"]);
    assert!(o.status.success() && stdout(&o).contains("3 packed kernel keys recorded"), "{}", stdout(&o));
}

const GEMM_F16: &str = "// f16 GEMM + bias + ReLU for the tensor-core templates.
graph<M=256> gemm(x: f16[M, 64], w: f16[64, 192], b: f16[192]) -> (y: f16[M, 192]) {
    y = relu(matmul(x, w) + b)
    return y
}
";

/// Whether GPU 0 can be opened; with `TGC_GPU=1` (scripts/gpu_tests.sh) it
/// must be.
fn gpu_present() -> bool {
    let present = tgc_runtime::cuda::Gpu::new(0).is_ok();
    assert!(present || !gpu_tier::required(), "TGC_GPU=1 but GPU 0 cannot be opened");
    present
}

/// The GPU tier's rules (`scripts/gpu_tests.sh`).
mod gpu_tier {
    include!("../../../tests/support/gpu_tier.rs");
}

/// The tensor-core plan `compile --target sm80 --out DIR` wrote, without
/// its epilogue (as the records hold it).
fn written_plan(dir: &std::path::Path) -> tgc_core::plan::Plan {
    let text = std::fs::read_to_string(dir.join("plan.json")).unwrap();
    let plan = tgc_core::plan::from_json(&text).unwrap_or_else(|d| panic!("{}", d.message));
    tgc_core::plan::Plan { epilogue: Vec::new(), ..plan }
}

/// `tgc tune --target sm80` measures on a GPU: without one it says so and
/// writes nothing. `--check` needs no GPU: it fails until the plan
/// decision has a record (written here through the library, as the
/// measuring run writes it, with a stand-in timing that prefers a plan the
/// analytic model does not choose), then passes; `compile --tuning` then
/// builds the recorded plan, and notes a decision without one.
#[test]
fn gpu_tuning_records_are_checked_without_a_gpu_and_compile_builds_their_plan() {
    use tgc_core::tune::gpu as tg;
    let dir = temp("tune-gpu");
    let _ = std::fs::remove_dir_all(dir.join("tgc-tune"));
    std::fs::write(dir.join("gemm.tgc"), GEMM_F16).unwrap();
    if !gpu_present() {
        let o = tgc_in(&dir, &["tune", "gemm.tgc", "--cache", "tgc-tune", "--target", "sm80"]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("tgc tune --target sm80 measures on a GPU: no GPU device available"),
            "{}",
            stderr(&o)
        );
        assert!(!dir.join("tgc-tune").exists(), "nothing written");
    }
    let o = tgc_in(&dir, &["tune", "gemm.tgc", "--cache", "tgc-tune", "--target", "sm80", "--check"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stdout(&o)
            .contains("M=256: decision f16 m=256 n=192 k=64; A, B; distinct 16384, 12288; algo [matmul] has no record"),
        "{}",
        stdout(&o)
    );
    assert!(stderr(&o).contains("1 plan decision of gemm.tgc has no GPU tuning record"), "{}", stderr(&o));

    let g = tgc_core::pipeline::load(GEMM_F16, tgc_core::pipeline::Format::Dsl, None).unwrap().graph;
    let g = g.bind(&[("M".to_string(), 256)].into_iter().collect()).unwrap();
    let target = &tgc_core::plan::target::SM80;
    let ds = tg::decisions(&g, target).unwrap();
    let analytic = ds[0].analytic.clone().unwrap();
    let last = ds[0].candidates.last().unwrap().clone();
    assert_ne!(analytic, last);
    let mut stand_in = |p: &tgc_core::gpu::program::GpuProgram| {
        Ok::<_, ()>(Ok(if tg::launched_plans(p).contains(&last) { 5 } else { 50 }))
    };
    let tuned = tg::tune(&g, target, ds, &mut stand_in, &mut |_, _| {}).unwrap();
    let machine = tg::GpuMachine { device: "a stand-in".into(), sm: 80, repetitions: 1 };
    let record = tuned[0].record("gemm at M=256".into(), machine, "2026-11-29T00:00:00Z".into()).unwrap();
    let mut cache = tg::open(&dir.join("tgc-tune")).unwrap();
    cache.put(record).unwrap();

    let o = tgc_in(&dir, &["tune", "gemm.tgc", "--cache", "tgc-tune", "--target", "sm80", "--check"]);
    assert!(o.status.success() && stdout(&o).contains("M=256: 1 plan decision recorded"), "{}", stderr(&o));
    let o = tgc_in(&dir, &["compile", "gemm.tgc", "--target", "sm80", "--tuning", "tgc-tune", "--out", "tuned"]);
    assert!(o.status.success() && !stderr(&o).contains("no GPU tuning record"), "{}", stderr(&o));
    assert_eq!(written_plan(&dir.join("tuned")), last, "the recorded plan is built");
    let o = tgc_in(&dir, &["compile", "gemm.tgc", "--target", "sm80", "--tuning", "tgc-tune", "--dump", "plan"]);
    assert!(stdout(&o).contains("times measured on a GPU by `tgc tune --target`"), "{}", stdout(&o));
    let o = tgc_in(&dir, &["compile", "gemm.tgc", "--target", "sm80", "--out", "analytic"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(written_plan(&dir.join("analytic")), analytic, "without --tuning, the analytic plan");

    // Another point has no record: the analytic plan, with a note.
    let o = tgc_in(&dir, &["compile", "gemm.tgc", "--target", "sm80", "--dim", "M=128", "--tuning", "tgc-tune"]);
    assert!(o.status.success() && stderr(&o).contains("no GPU tuning record for 1 plan decision"), "{}", stderr(&o));

    // `run` reads the records on the GPU only.
    let o = tgc_in(&dir, &["run", "gemm.tgc", "--backend", "cpu", "--tuning", "tgc-tune"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--tuning applies to --backend cuda only"), "{}", stderr(&o));

    // A hand edit of the GPU record is refused by check and compile.
    let file = std::fs::read_dir(dir.join("tgc-tune/gpu")).unwrap().next().unwrap().unwrap().path();
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replacen("\"a stand-in\"", "\"another device\"", 1)).unwrap();
    for args in [
        &["tune", "gemm.tgc", "--cache", "tgc-tune", "--target", "sm80", "--check"][..],
        &["compile", "gemm.tgc", "--target", "sm80", "--tuning", "tgc-tune"][..],
    ] {
        let o = tgc_in(&dir, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains("is refused: its digest does not match"), "{args:?}: {}", stderr(&o));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// On a GPU (gated: skipped without one, a failure under `TGC_GPU=1`):
/// `tgc tune --target` for the device measures every plan of the GEMM,
/// records the fastest, `--check` passes and `compile --tuning` builds it.
#[test]
fn gpu_tuning_on_a_gpu_measures_and_records_the_fastest_plan() {
    if !gpu_present() {
        eprintln!("gpu_tuning_on_a_gpu: skipped, GPU 0 cannot be opened");
        return;
    }
    let sm = tgc_runtime::cuda::Gpu::new(0).unwrap().sm();
    let target = if sm / 10 == 9 { "sm90" } else { "sm80" };
    let dir = temp("tune-gpu-device");
    let _ = std::fs::remove_dir_all(dir.join("tgc-tune"));
    std::fs::write(dir.join("gemm.tgc"), GEMM_F16).unwrap();
    let o = tgc_in(
        &dir,
        &["tune", "gemm.tgc", "--cache", "tgc-tune", "--target", target, "--warmup", "1", "--repetitions", "5"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    println!("{}", stdout(&o));
    assert!(stdout(&o).contains("plans measured, best"), "{}", stdout(&o));
    let o = tgc_in(&dir, &["tune", "gemm.tgc", "--cache", "tgc-tune", "--target", target, "--check"]);
    assert!(o.status.success(), "{}", stdout(&o));
    let records: Vec<_> = std::fs::read_dir(dir.join("tgc-tune/gpu")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(records.len(), 1);
    let record: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&records[0]).unwrap()).unwrap();
    let chosen = tgc_core::plan::parse_dsl(record["plan"].as_str().unwrap()).unwrap();
    let o = tgc_in(&dir, &["compile", "gemm.tgc", "--target", target, "--tuning", "tgc-tune", "--out", "tuned"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(written_plan(&dir.join("tuned")), chosen);
    let _ = std::fs::remove_dir_all(&dir);
    gpu_tier::compared(&format!("tune: tgc tune --target {target} measured, recorded and built"));
}
