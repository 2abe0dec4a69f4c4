//! `tgc tune`: measure, record, check (`tgc_core::tune`).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use indicatif::{ProgressBar, ProgressStyle};
use tgc_core::pipeline;
use tgc_core::tune::report::{self, PointReport, Roofline};
use tgc_core::tune::{self, Cache, Machine, Record, Timing, Toolchain, TuneOptions};

use crate::commands::{parse_dims, scratch_dir, write_file, Failure};

/// What `tgc tune` was asked.
pub struct TuneArgs<'a> {
    pub graph: &'a Path,
    pub entry: Option<&'a str>,
    pub points: &'a [String],
    pub dims: &'a [String],
    pub cache: &'a Path,
    pub check: bool,
    pub warmup: usize,
    pub repetitions: usize,
    pub report: Option<&'a Path>,
    /// `cpu`: the packed kernels' block sizes; `sm80`/`sm90`: the GPU
    /// templates' plans, measured on GPU 0.
    pub target: crate::cli::Target,
}

type Result<T> = std::result::Result<T, Failure>;

/// A point's label (`B=8, S=128`) and its bound graph.
pub(crate) struct Point {
    pub label: String,
    pub graph: tgc_core::tiny::Graph,
}

pub fn tune(a: &TuneArgs) -> Result<()> {
    let path = a.graph;
    let loaded = crate::commands::load(path, a.entry)?;
    let g = &loaded.graph;
    let shared = parse_dims(a.dims)?;
    let mut specs: Vec<BTreeMap<String, i64>> = Vec::new();
    for p in a.points {
        let dims: Vec<String> = p.split(',').map(str::to_string).filter(|s| !s.trim().is_empty()).collect();
        let mut point = shared.clone();
        for (k, v) in parse_dims(&dims).map_err(|f| Failure::user(format!("--point `{p}`: {}", f.message)))? {
            point.insert(k, v);
        }
        specs.push(point);
    }
    if specs.is_empty() {
        specs.push(shared);
    }
    let mut points = Vec::new();
    for mut given in specs {
        for s in &g.symbols {
            if let (false, Some(v)) = (given.contains_key(&s.name), s.default) {
                given.insert(s.name.clone(), v);
            }
        }
        let label = tune::point_label(&given);
        let graph = g.bind(&given).map_err(|d| Failure::diag(path, &d))?;
        if !graph.symbols.is_empty() {
            let open: Vec<&str> = graph.symbols.iter().map(|s| s.name.as_str()).collect();
            return Err(Failure::user(format!(
                "point `{label}` leaves {} open: give them in --point or --dim",
                open.join(", ")
            )));
        }
        points.push(Point { label, graph });
    }
    let target = match a.target {
        crate::cli::Target::Cpu => None,
        crate::cli::Target::Sm80 => Some(&tgc_core::plan::target::SM80),
        crate::cli::Target::Sm90 => Some(&tgc_core::plan::target::SM90),
    };
    if let Some(target) = target {
        return crate::tune_gpu::tune(path, &g.name, &points, a, target);
    }
    let mut cache = Cache::open(a.cache).map_err(|e| Failure::user(e.to_string()))?;
    let tc = Toolchain::host().map_err(Failure::user)?;
    if a.check {
        return check(path, &points, &cache, &tc);
    }

    let work = scratch_dir("tune")?;
    if cfg!(debug_assertions) {
        eprintln!(
            "warning: this tgc is a debug build: the runtime's micro-kernel is unoptimised and the timings mean \
             little; build it with `cargo build --release -p tgc-cli`"
        );
    }
    let threads = tgc_runtime::cpu_rt::threads();
    let machine = Machine::this(threads);
    let mut results = Vec::new();
    // Each point as `tgc compile` lowers it (fused by Poly Core), then as
    // a build without feature `poly` does (the build helper's), where that
    // has kernels the first left unrecorded.
    let runs = points.iter().enumerate().flat_map(|(i, pt)| [(i, pt, true), (i, pt, false)]);
    for (i, pt, fuse) in runs {
        let lowering = if fuse { "" } else { " (unfused, as builds without feature `poly` lower it)" };
        if !fuse {
            let mut p = tune::lowered(&pt.graph, false).map_err(|d| Failure::diag(path, &d))?;
            if tune::apply(&mut p, &cache, &tc).is_empty() {
                continue;
            }
        }
        let opts = TuneOptions {
            warmup: a.warmup,
            repetitions: a.repetitions,
            work_dir: work.path().to_path_buf(),
            interpreter_bytes: 2 << 30,
            fuse,
        };
        let bar = progress_bar("{prefix} {msg:<22} [{bar:30}] {pos}/{len} {elapsed}", i, points.len(), &pt.label);
        let mut progress = |p: tune::Progress| {
            bar.set_message(p.stage);
            bar.set_length(p.total as u64);
            bar.set_position(p.done as u64);
        };
        let result = tune::tune_point(&pt.graph, &tc, &opts, &mut progress).map_err(|e| match e {
            pipeline::RunError::Diag(d) => Failure::diag(path, &d),
            pipeline::RunError::Runtime(e) => Failure::from(e),
        })?;
        bar.finish_and_clear();
        let date = tune::utc_date(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()));
        println!(
            "{} at {}{lowering} ({} kernel thread{}):",
            g.name,
            pt.label,
            threads,
            if threads == 1 { "" } else { "s" }
        );
        if result.units.is_empty() {
            println!("  no packed kernel: nothing to tune");
        }
        for u in &result.units {
            let chosen = if u.best == u.analytic { "analytic kept" } else { "tuned" };
            let (base, best) = u.round1_ns();
            let (base, best) = (base.unwrap_or(0), best.unwrap_or(0));
            let (confirm_base, confirm_won) = u.confirm_ns;
            println!(
                "  {:<18} {:>9.1} µs → {:>9.1} µs ({:.2}×, {chosen}: {}; round 2, winner against analytic: {:.2}×)",
                u.kernels.join(" "),
                base as f64 / 1e3,
                best as f64 / 1e3,
                base as f64 / best.max(1) as f64,
                u.best,
                confirm_base as f64 / confirm_won.max(1) as f64,
            );
            let record = Record {
                schema: tune::SCHEMA.to_string(),
                key: u.key.clone(),
                inputs: u.inputs.clone(),
                plan: u.best,
                analytic: u.analytic,
                timings: u
                    .candidates
                    .iter()
                    .filter_map(|c| {
                        Some(Timing { blocks: c.blocks, median_ns: c.median_ns?, repetitions: a.repetitions })
                    })
                    .collect(),
                measured_on: format!("{} {} at {}", g.name, u.kernels.join(", "), pt.label),
                machine: machine.clone(),
                date: date.clone(),
                digest: String::new(),
            };
            cache.put(record).map_err(|e| Failure::user(e.to_string()))?;
        }
        if !result.units.is_empty() {
            let (base, won) = result.graph_ns;
            println!(
                "  whole graph: analytic {:.2} ms, round-1 winners {:.2} ms ({:.2}×, round 2, {} runs each)",
                base as f64 / 1e6,
                won as f64 / 1e6,
                base as f64 / won.max(1) as f64,
                a.repetitions
            );
        }
        let label = if fuse { pt.label.clone() } else { format!("{} unfused", pt.label) };
        results.push((label, result));
    }
    drop(work);
    println!("tuning cache {}: {} records", cache.dir().display(), cache.len());
    if let Some(file) = a.report {
        let reports: Vec<PointReport> =
            results.iter().map(|(label, r)| PointReport { graph: &g.name, point: label, result: r, threads }).collect();
        let roof = Roofline::this_machine(threads);
        write_file(file, report::csv(&reports, &roof).as_bytes())?;
        write_file(&file.with_extension("svg"), report::svg(&reports, &roof).as_bytes())?;
    }
    Ok(())
}

/// `--check`: every packed kernel of every point has a record.
fn check(path: &Path, points: &[Point], cache: &Cache, tc: &Toolchain) -> Result<()> {
    let mut missing = 0;
    for pt in points {
        // Both lowerings' kernels, by key: `tgc compile`'s and the build
        // helper's (without feature `poly`).
        let mut keys = std::collections::BTreeMap::new();
        for fuse in [true, false] {
            let p = tune::lowered(&pt.graph, fuse).map_err(|d| Failure::diag(path, &d))?;
            for (_, k) in tune::tunable(&p) {
                keys.entry(tune::key_inputs(&p, k, tc).key()).or_insert_with(|| k.name.clone());
            }
        }
        let total = keys.len();
        let misses: Vec<(String, String)> = keys.into_iter().filter(|(key, _)| cache.get(key).is_none()).collect();
        if misses.is_empty() {
            println!("{}: {total} packed kernel key{} recorded", pt.label, if total == 1 { "" } else { "s" });
        } else {
            missing += misses.len();
            for (key, kernel) in &misses {
                println!("{}: kernel {kernel} has no record (key {key})", pt.label);
            }
        }
    }
    if missing > 0 {
        return Err(Failure::user(format!(
            "{missing} kernel{} of {} have no tuning record in {}: run `tgc tune` without --check (the graph, tgc or \
             the C compiler changed since it was tuned, or it never was)",
            if missing == 1 { "" } else { "s" },
            path.display(),
            cache.dir().display()
        )));
    }
    Ok(())
}

/// The bar of point `i` of `count` (`[i+1/count] LABEL`) in `template`
/// (`indicatif`'s), of length 1 until the work is known.
pub(crate) fn progress_bar(template: &str, i: usize, count: usize, label: &str) -> ProgressBar {
    let bar = ProgressBar::new(1);
    bar.set_style(ProgressStyle::with_template(template).expect("a valid template").progress_chars("=> "));
    bar.set_prefix(format!("[{}/{count}] {label}", i + 1));
    bar
}
