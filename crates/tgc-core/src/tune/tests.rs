use std::collections::BTreeMap;

use super::*;
use crate::cpu::packed::Blocks;
use crate::pipeline::{self, Format};

/// A graph of two matmuls of the same shape over other buffers (as two
/// layers of a model), then a third of another shape.
const TWO_LAYERS: &str =
    "graph<M=64, K=32> layers(x: f32[M, K], w0: f32[K, K], w1: f32[K, K], w2: f32[K, 48]) -> (y: f32[M, 48]) {
    h = matmul(x, w0)
    h2 = matmul(relu(h), w1)
    y = matmul(h2, w2)
    return y
}";

fn bound(text: &str, dims: &[(&str, i64)]) -> crate::tiny::Graph {
    let g = pipeline::load(text, Format::Dsl, None).unwrap().graph;
    let dims: BTreeMap<String, i64> = dims.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    g.bind(&dims).unwrap()
}

fn toolchain() -> Toolchain {
    Toolchain { target: "cpu-test".into(), compiler: "(test) 1.0".into() }
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tgc-tune-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The keys of the packed kernels of `g`, in kernel order.
fn keys(g: &crate::tiny::Graph) -> Vec<String> {
    let p = crate::cpu::lower(g).unwrap();
    tunable(&p).map(|(_, k)| key_inputs(&p, k, &toolchain()).key()).collect()
}

#[test]
fn the_same_kernel_over_other_buffers_has_one_key_and_another_shape_another() {
    let k = keys(&bound(TWO_LAYERS, &[("M", 64), ("K", 32)]));
    assert_eq!(k.len(), 3, "three packed matmuls");
    assert_eq!(k[0].len(), 64);
    assert_ne!(k[1], k[2], "another shape, another key");
    // The first matmul reads an input, the second a ReLU of a temporary:
    // their texts differ, but the same graph at the same point gives the
    // same keys every time.
    assert_eq!(k, keys(&bound(TWO_LAYERS, &[("M", 64), ("K", 32)])));
    let other = keys(&bound(TWO_LAYERS, &[("M", 128), ("K", 32)]));
    assert!(k.iter().all(|key| !other.contains(key)), "another point changes every key: {k:?} {other:?}");
}

#[test]
fn kernel_text_renumbers_buffers_by_first_use() {
    let a = "graph g(x: f32[8, 4], w: f32[4, 16], v: f32[4, 16]) -> (y: f32[8, 16], z: f32[8, 16]) {
        y = matmul(x, w)
        z = matmul(x, v)
        return y, z
    }";
    let k = keys(&bound(a, &[]));
    assert_eq!(k.len(), 2);
    assert_eq!(k[0], k[1], "the same product over other buffers is one tuning unit");
    let tc2 = Toolchain { compiler: "(test) 2.0".into(), ..toolchain() };
    let p = crate::cpu::lower(&bound(a, &[])).unwrap();
    let k0 = &p.kernels[tunable(&p).next().unwrap().0];
    assert_ne!(key_inputs(&p, k0, &tc2).key(), k[0], "another compiler, another key");
}

fn record_for(g: &crate::tiny::Graph, plan: Blocks) -> Record {
    let p = crate::cpu::lower(g).unwrap();
    let (_, k) = tunable(&p).next().unwrap();
    let inputs = key_inputs(&p, k, &toolchain());
    Record {
        schema: SCHEMA.into(),
        key: inputs.key(),
        inputs,
        plan,
        analytic: k.packed.as_ref().unwrap().blocks,
        timings: vec![Timing { blocks: plan, median_ns: 1000, repetitions: 3 }],
        measured_on: "test".into(),
        machine: Machine::this(1),
        date: utc_date(0),
        digest: String::new(),
    }
}

#[test]
fn a_build_takes_the_recorded_block_sizes_and_notes_a_miss() {
    let g = bound(TWO_LAYERS, &[("M", 64), ("K", 32)]);
    let dir = temp("apply");
    let mut cache = Cache::open(&dir).unwrap();
    assert!(cache.is_empty(), "a missing folder is an empty cache");
    let plan = Blocks { mc: 12, nc: 32, kc: 7, threads: 0 };
    cache.put(record_for(&g, plan)).unwrap();
    let cache = Cache::open(&dir).unwrap();
    assert_eq!(cache.len(), 1);
    let tuning = Tuning { cache, toolchain: toolchain() };
    let mut p = crate::cpu::lower(&g).unwrap();
    let note = tuning.apply(&mut p, "layers", " at M=64").expect("two kernels have no record");
    assert!(
        note.contains("no tuning record for 2 packed kernels (k")
            && note.contains("at M=64")
            && note.contains("tgc tune"),
        "{note}"
    );
    let blocks: Vec<Blocks> = tunable(&p).map(|(_, k)| k.packed.as_ref().unwrap().blocks).collect();
    assert_eq!(blocks[0], plan);
    assert_ne!(blocks[1], plan);
    let c = crate::emit::c::emit_c_programs(&[(&g, p, "layers")]).unwrap();
    assert!(c.contains("pk_ctx.kc = 7;") && c.contains("pk_mc = 12;"), "the C has the recorded sizes");
    assert!(!c.contains("The plan's thread cap"), "no thread cap in the plan, none in the C");
    let mut p = crate::cpu::lower(&g).unwrap();
    let (first, _) = tunable(&p).next().unwrap();
    p.kernels[first].packed.as_mut().unwrap().blocks.threads = 1;
    let c = crate::emit::c::emit_c_programs(&[(&g, p, "layers")]).unwrap();
    assert_eq!(c.matches("if (pk_pool.threads > 1) pk_pool.threads = 1;").count(), 1, "one kernel capped");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A record is written whole: a link planted at its file
/// name is replaced, and the file it points to keeps its content.
#[cfg(unix)]
#[test]
fn a_record_replaces_a_link_planted_at_its_name() {
    let g = bound(TWO_LAYERS, &[("M", 64), ("K", 32)]);
    let dir = temp("link");
    let record = record_for(&g, Blocks { mc: 12, nc: 32, kc: 8, threads: 0 });
    let path = dir.join(format!("{}.json", record.key()));
    std::fs::create_dir_all(&dir).unwrap();
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "the user's file\n").unwrap();
    let mut cache = Cache::open(&dir).unwrap();
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    assert_eq!(cache.put(record).unwrap(), path);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the user's file\n");
    assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_file());
    assert_eq!(Cache::<Record>::open(&dir).unwrap().len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes a good record, lets `edit` change its file, and returns
/// `Cache::open`'s error.
fn refusal(name: &str, edit: impl Fn(&Path, &str) -> Option<(PathBuf, String)>) -> String {
    let g = bound(TWO_LAYERS, &[("M", 64), ("K", 32)]);
    let dir = temp(name);
    let mut cache = Cache::open(&dir).unwrap();
    let path = cache.put(record_for(&g, Blocks { mc: 12, nc: 32, kc: 8, threads: 0 })).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    if let Some((to, text)) = edit(&path, &text) {
        std::fs::remove_file(&path).unwrap();
        std::fs::write(to, text).unwrap();
    }
    let err = Cache::<Record>::open(&dir).expect_err("refused").to_string();
    let _ = std::fs::remove_dir_all(&dir);
    err
}

#[test]
fn a_corrupted_or_hand_edited_record_is_refused_with_its_reason() {
    let edited = refusal("plan", |p, t| Some((p.to_path_buf(), t.replacen("\"kc\": 8", "\"kc\": 16", 1))));
    assert!(edited.contains("refused") && edited.contains("digest"), "{edited}");
    let broken = refusal("json", |p, t| Some((p.to_path_buf(), t[..t.len() / 2].to_string())));
    assert!(broken.contains("not a record"), "{broken}");
    let unknown = refusal("field", |p, t| Some((p.to_path_buf(), t.replacen('{', "{\"extra\": 1,", 1))));
    assert!(unknown.contains("unknown field"), "{unknown}");
    let schema = refusal("schema", |p, t| Some((p.to_path_buf(), t.replacen("tgc-tune/1", "tgc-tune/0", 1))));
    assert!(schema.contains("schema"), "{schema}");
    let renamed = refusal("name", |p, t| Some((p.with_file_name(format!("{}.json", "0".repeat(64))), t.into())));
    assert!(renamed.contains("file name"), "{renamed}");
    let rekeyed = refusal("key", |p, t| Some((p.to_path_buf(), t.replacen("cpu-test", "cpu-other", 1))));
    assert!(rekeyed.contains("hash of its inputs"), "{rekeyed}");
}

#[test]
fn tuning_a_small_gemm_measures_every_candidate_and_keeps_a_measured_one() {
    let g = bound(TWO_LAYERS, &[("M", 64), ("K", 32)]);
    let dir = temp("point");
    std::fs::create_dir_all(&dir).unwrap();
    let opts = TuneOptions { warmup: 0, repetitions: 2, work_dir: dir.clone(), interpreter_bytes: 1 << 30, fuse: true };
    let mut steps = 0;
    let result = tune_point(&g, &toolchain(), &opts, &mut |p| {
        assert!(p.done <= p.total);
        steps += 1;
    })
    .unwrap();
    assert!(steps > 4, "progress was reported");
    assert_eq!(result.units.len(), 3);
    for u in &result.units {
        assert_eq!(u.candidates[0].blocks, u.analytic, "the analytic sizes come first");
        assert!(u.candidates.len() >= 2, "{:?}", u.candidates);
        assert!(u.candidates.iter().all(|c| c.median_ns.is_some_and(|n| n > 0)), "every candidate checked and timed");
        // With a pool (CI's two cores), the plan capped to one thread is
        // among them: its kernels computed what the interpreter did.
        let capped = u.candidates.iter().any(|c| c.blocks.threads == 1);
        assert_eq!(capped, tgc_runtime::cpu_rt::threads() > 1, "{:?}", u.candidates);
        assert!(u.best == u.analytic || u.candidates.iter().any(|c| c.blocks == u.best));
        assert!(u.flops > 0.0 && u.bytes > 0.0);
    }
    assert_eq!(result.units[0].flops, 2.0 * 64.0 * 32.0 * 32.0);
    assert!(result.graph_ns.0 > 0 && result.graph_ns.1 > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn utc_dates_follow_the_civil_calendar() {
    assert_eq!(utc_date(0), "1970-01-01T00:00:00Z");
    assert_eq!(utc_date(1_700_000_000), "2023-11-14T22:13:20Z");
    assert_eq!(utc_date(951_782_400), "2000-02-29T00:00:00Z");
}

/// The contents of `svg`'s `<text>` elements, in order (a `<title>` inside
/// one is left out).
fn svg_texts(svg: &str) -> Vec<&str> {
    svg.split("<text").skip(1).filter_map(|t| t.split_once('>')?.1.split('<').next()).collect()
}

/// The width of the bar whose hover title starts with `title`.
fn bar_width(svg: &str, title: &str) -> f64 {
    let rect = svg.lines().find(|l| l.starts_with("<rect x=") && l.contains(&format!("<title>{title}"))).unwrap();
    rect.split("width=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap()
}

#[test]
fn the_report_has_a_csv_line_and_a_labelled_bar_per_candidate() {
    let b = |mc, nc, kc| Blocks { mc, nc, kc, threads: 0 };
    let inputs = KeyInputs { tgc: "0".into(), target: "cpu-test".into(), compiler: "c".into(), kernel: "k".into() };
    let unit = Tuned {
        key: inputs.key(),
        inputs,
        kernels: vec!["k3".into(), "k9".into()],
        analytic: b(12, 64, 128),
        candidates: vec![
            Measured { blocks: b(12, 64, 128), median_ns: Some(1000) },
            Measured { blocks: b(12, 64, 64), median_ns: None },
            Measured { blocks: b(24, 64, 128), median_ns: Some(816) },
            Measured { blocks: Blocks { threads: 1, ..b(6, 64, 128) }, median_ns: Some(800) },
        ],
        best: Blocks { threads: 1, ..b(6, 64, 128) },
        confirm_ns: (1000, 820),
        flops: 2e6,
        bytes: 1e5,
    };
    let result = PointResult { units: vec![unit], graph_ns: (2000, 1800) };
    let points = [report::PointReport { graph: "g<&>", point: "M=8, N=4", result: &result, threads: 4 }];
    let roof = report::Roofline { peak_flops: 1e9, bandwidth: 1e9 };
    assert_eq!(roof.estimate_ns(2e6, 1e5), 2e6);
    let csv = report::csv(&points, &roof);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], report::CSV_HEADER);
    assert_eq!(lines.len(), 5, "a line per candidate: {csv}");
    assert!(lines[1].ends_with(",12,64,128,4,1000,true,false"), "an uncapped plan ran on the pool's 4: {}", lines[1]);
    assert!(lines[2].contains(",12,64,64,4,,false,false"), "a refused candidate has no time: {}", lines[2]);
    assert!(lines[4].ends_with(",6,64,128,1,800,false,true"), "{}", lines[4]);
    assert!(lines[1].contains(",\"M=8, N=4\",") && lines[1].contains(",k3 k9,2000000,100000,2000000,"));

    let svg = report::svg(&points, &roof);
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<rect").count(), 4, "the background and three timed candidates: {svg}");
    assert!(svg.contains("fill=\"#2a2\"><title>mc=6 nc=64 kc=128 threads=1: 800 ns"), "the chosen bar is green");
    assert!(svg.contains("g&lt;&amp;&gt;") && !svg.contains("g<&>"), "names are escaped");
    // Every candidate is named in a <text>, with the CSV's time or why it has none.
    let texts = svg_texts(&svg);
    let line_of =
        |name: &str| texts.iter().position(|t| t.starts_with(name)).unwrap_or_else(|| panic!("{name}: {texts:?}"));
    for (name, then) in [
        ("mc=12 nc=64 kc=128 (analytic)", ["1.0 µs", "» +25.0%"]),
        ("mc=24 nc=64 kc=128", ["0.8 µs", "+2.0%"]),
        ("mc=6 nc=64 kc=128 threads=1 (chosen)", ["0.8 µs", "fastest"]),
    ] {
        let at = line_of(name);
        assert_eq!(&texts[at + 1..at + 3], &then[..], "{name}: {texts:?}");
    }
    assert_eq!(texts[line_of("mc=12 nc=64 kc=64") + 1], "✗ results differed from the interpreter");
    // The picture's numbers are the CSV's: 1000 ns / 800 ns, not round 2's 1000 / 820.
    assert_eq!(result.units[0].round1_ns(), (Some(1000), Some(800)));
    assert!(texts.iter().any(|t| t.contains("chosen: 1.25× the analytic · 0.8 µs")), "{texts:?}");
    assert!(!svg.contains("1.22×"), "round 1's speed-up, not round 2's: {svg}");
    // The axis starts at the fastest candidate, not at 0 ns: a 2% slower
    // candidate's bar is tens of pixels longer than the fastest one's, the
    // 25% slower one is cut at the axis' end (+20%).
    let (fast, near, slow) = (bar_width(&svg, "mc=6 "), bar_width(&svg, "mc=24 "), bar_width(&svg, "mc=12 "));
    assert!(fast <= 2.0 && near - fast >= 20.0 && slow > 5.0 * near, "{fast} {near} {slow}");
    let ticks: Vec<&&str> =
        texts.iter().filter(|t| t.starts_with('+') && t.ends_with('%') && !t.contains('.')).collect();
    assert_eq!(ticks.first().map(|t| **t), Some("+0%"), "{texts:?}");
    assert!(ticks.iter().any(|t| **t == format!("+{}%", report::SVG_SPAN_MAX_PERCENT)), "{ticks:?}");
}

/// With every candidate within 1% of the fastest, the axis spans 1%: a
/// 0.5% difference is half its width.
#[test]
fn the_reports_axis_narrows_to_the_candidates_spread() {
    let b = |mc| Blocks { mc, nc: 64, kc: 128, threads: 0 };
    let inputs = KeyInputs { tgc: "0".into(), target: "cpu-test".into(), compiler: "c".into(), kernel: "k".into() };
    let unit = Tuned {
        key: inputs.key(),
        inputs,
        kernels: vec!["k0".into()],
        analytic: b(12),
        candidates: vec![
            Measured { blocks: b(12), median_ns: Some(100_500) },
            Measured { blocks: b(24), median_ns: Some(100_000) },
        ],
        best: b(12),
        confirm_ns: (100_500, 100_000),
        flops: 1e6,
        bytes: 1e4,
    };
    let result = PointResult { units: vec![unit], graph_ns: (100_500, 100_000) };
    let points = [report::PointReport { graph: "g", point: "", result: &result, threads: 1 }];
    let svg = report::svg(&points, &report::Roofline { peak_flops: 1e12, bandwidth: 1e11 });
    let (fast, slow) = (bar_width(&svg, "mc=24 "), bar_width(&svg, "mc=12 "));
    assert!(fast <= 2.0 && slow > 100.0, "{fast} {slow}: {svg}");
    let texts = svg_texts(&svg);
    assert!(texts.contains(&"+1%") && texts.contains(&"+0.5%") && !texts.contains(&"+2%"), "{texts:?}");
}

#[test]
fn the_space_holds_the_analytic_sizes_first_and_on_one_thread_last_when_there_are_threads() {
    let g = bound(TWO_LAYERS, &[("M", 64), ("K", 32)]);
    let p = crate::cpu::lower(&g).unwrap();
    let (k, kernel) = tunable(&p).next().unwrap();
    let analytic = kernel.packed.as_ref().unwrap().blocks;
    let two = search::space(&p, k, 2);
    assert_eq!(two[0].threads, 0);
    assert_eq!(two.last(), Some(&Blocks { threads: 1, ..two[0] }), "{two:?}");
    assert!(two.len() <= 13, "the `000` §6 budget: {two:?}");
    let one = search::space(&p, k, 1);
    assert_eq!(one, two[..two.len() - 1], "one thread: nothing to cap");
    // The problem bounds the sizes: M = 64 rows, N = 32 columns, K = 32.
    assert!(two.iter().all(|b| b.mc <= 66 && b.nc <= 32 && b.kc <= 32), "{two:?} (analytic {analytic:?})");
}

#[test]
fn a_record_without_a_thread_cap_reads_as_every_thread_and_a_cap_round_trips() {
    let plain: Blocks = serde_json::from_str(r#"{"mc": 12, "nc": 32, "kc": 8}"#).unwrap();
    assert_eq!(plain.threads, 0);
    assert_eq!(
        serde_json::to_string(&plain).unwrap(),
        r#"{"mc":12,"nc":32,"kc":8}"#,
        "records of before keep their digest"
    );
    let capped = Blocks { threads: 1, ..plain };
    assert_eq!(serde_json::from_str::<Blocks>(&serde_json::to_string(&capped).unwrap()).unwrap(), capped);
    assert_eq!(capped.to_string(), "mc=12 nc=32 kc=8 threads=1");
}
