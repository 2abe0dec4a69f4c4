//! `tgc tune --target sm80|sm90`: the GPU templates' plans measured on GPU
//! 0 and recorded in the cache's `gpu/` folder (`tgc_core::tune::gpu`).
//!
//! Each candidate is a unit (`tune::gpu::units`: the graph when a template
//! takes it whole, else the region the decision serves, as a graph of its
//! own) with that plan pinned: compiled, run once and compared with the
//! interpreter (`000` §9's tolerance; above `INTERPRETER_MACS`, with
//! tgc's CPU backend), then
//! run `--warmup` times and timed `--repetitions` times; the median is
//! kept. A timed repetition is a batch of back-to-back runs lasting about
//! `BATCH_NS` (at most `MAX_BATCH` runs; `bench_gpu` times the same
//! way) between two stream synchronisations, wall clock, divided by the
//! batch; temporaries are allocated per run, as `tgc run` does.

use std::path::Path;

use tgc_core::plan::Target;
use tgc_core::tune::gpu::{self as tg, GpuRecord};
use tgc_core::tune::Cache;

use crate::commands::Failure;
use crate::tune::{Point, TuneArgs};

type Result<T> = std::result::Result<T, Failure>;

/// The most multiply-adds of a point's tensor-core problems whose
/// reference is the interpreter (about 10 s of it in a release build);
/// above, tgc's CPU backend computes the reference.
#[cfg(feature = "cuda")]
pub const INTERPRETER_MACS: u64 = 1 << 28;
/// The wall time one timed repetition aims at, in nanoseconds.
#[cfg(feature = "cuda")]
pub const BATCH_NS: u64 = 200_000;
/// The most runs in one timed repetition.
#[cfg(feature = "cuda")]
pub const MAX_BATCH: u64 = 100;

pub fn tune(path: &Path, graph: &str, points: &[Point], a: &TuneArgs, target: &'static Target) -> Result<()> {
    let cache = tg::open(a.cache).map_err(|e| Failure::user(e.to_string()))?;
    let mut decided = Vec::new();
    for pt in points {
        let ds = tg::decisions(&pt.graph, target).map_err(|d| Failure::diag(path, &d))?;
        decided.push(ds);
    }
    if a.check {
        return check(path, points, &decided, &cache);
    }
    measure(path, graph, points, decided, cache, a, target)
}

/// `--check`: every decision of every point has a record. Needs no GPU.
fn check(path: &Path, points: &[Point], decided: &[Vec<tg::Decision>], cache: &Cache<GpuRecord>) -> Result<()> {
    let mut missing = 0;
    for (pt, ds) in points.iter().zip(decided) {
        let misses: Vec<&tg::Decision> = ds.iter().filter(|d| cache.get(&d.key()).is_none()).collect();
        if ds.is_empty() {
            println!("{}: no plan decision: no tensor-core template takes it", pt.label);
        } else if misses.is_empty() {
            println!("{}: {} plan decision{} recorded", pt.label, ds.len(), if ds.len() == 1 { "" } else { "s" });
        }
        for d in &misses {
            println!("{}: decision {} has no record (key {})", pt.label, d.inputs.decision, d.key());
        }
        missing += misses.len();
    }
    if missing > 0 {
        return Err(Failure::user(format!(
            "{missing} plan decision{} of {} ha{} no GPU tuning record in {}: run `tgc tune --target` on a GPU \
             without --check (the graph or tgc changed since it was tuned, or it never was)",
            if missing == 1 { "" } else { "s" },
            path.display(),
            if missing == 1 { "s" } else { "ve" },
            cache.dir().display()
        )));
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn measure(
    _: &Path,
    _: &str,
    _: &[Point],
    _: Vec<Vec<tg::Decision>>,
    _: Cache<GpuRecord>,
    _: &TuneArgs,
    target: &'static Target,
) -> Result<()> {
    Err(Failure::user(format!(
        "tgc tune --target {} measures on a GPU, and this tgc was built without feature `cuda`",
        target.name
    )))
}

#[cfg(feature = "cuda")]
fn measure(
    path: &Path,
    graph: &str,
    points: &[Point],
    decided: Vec<Vec<tg::Decision>>,
    mut cache: Cache<GpuRecord>,
    a: &TuneArgs,
    target: &'static Target,
) -> Result<()> {
    use std::time::{SystemTime, UNIX_EPOCH};

    use tgc_core::{pipeline, tune};
    use tgc_runtime::cuda::Gpu;

    use crate::gpu::{Compiled, GpuError};

    let gpu =
        Gpu::new(0).map_err(|e| Failure::user(format!("tgc tune --target {} measures on a GPU: {e}", target.name)))?;
    if target.name == "sm90" && gpu.sm() / 10 != 9 {
        return Err(Failure::user(format!(
            "--target sm90 runs sm_90a kernels, which need a 9.x device; device 0 is sm_{}",
            gpu.sm()
        )));
    }
    let machine = tg::GpuMachine {
        device: gpu.name().unwrap_or_else(|_| "unknown".into()),
        sm: gpu.sm(),
        repetitions: a.repetitions,
    };
    let failure = |e: GpuError| match e {
        GpuError::Diag(d) => Failure::diag(path, &d),
        GpuError::Runtime(e) => Failure::from(e),
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut work = Vec::new();
    for (i, (pt, ds)) in points.iter().zip(decided).enumerate() {
        if ds.is_empty() {
            println!("{graph} at {}: no tensor-core template takes it on {}: nothing to tune", pt.label, target.name);
            continue;
        }
        for u in tg::units(&pt.graph, target, &mut seen).map_err(|d| Failure::diag(path, &d))? {
            work.push((i, pt, u));
        }
    }
    let mut reports = Vec::new();
    for (i, pt, tg::Unit { name, graph: unit, decisions: ds }) in work {
        let label = if unit.name == graph { pt.label.clone() } else { format!("{} ({name})", pt.label) };
        let inputs = pipeline::sample_inputs(&unit).map_err(|d| Failure::diag(path, &d))?;
        pipeline::check_run_bytes(&unit, 0, pipeline::MAX_RUN_BYTES).map_err(|d| Failure::diag(path, &d))?;
        let macs: u64 = ds.iter().map(tg::Decision::macs).sum();
        let want = if macs <= INTERPRETER_MACS {
            pipeline::run_interp(&unit, &inputs).map_err(|d| Failure::diag(path, &d))?
        } else {
            eprintln!(
                "note: {graph} at {label}: {macs} multiply-adds are too many for the interpreter; the reference is \
                 tgc's CPU backend (itself checked against the interpreter by the test suite)"
            );
            let dir = crate::commands::scratch_dir("tune")?;
            pipeline::run_cpu(&unit, &inputs, dir.path()).map_err(|e| match e {
                pipeline::RunError::Diag(d) => Failure::diag(path, &d),
                pipeline::RunError::Runtime(e) => Failure::from(e),
            })?
        };
        let bar = crate::tune::progress_bar("{prefix} [{bar:30}] {pos}/{len} plans {elapsed}", i, points.len(), &label);
        let mut n = 0;
        let mut run = |prog: &tgc_core::gpu::program::GpuProgram| -> Result<tg::Outcome> {
            n += 1;
            let mut c = match Compiled::from_program(&gpu, &unit, prog.clone(), &format!("tune{i}.{name}.{n}")) {
                Ok(c) => c,
                Err(GpuError::Diag(d)) => return Ok(Err(format!("does not compile: {}", d.message))),
                Err(e) => return Err(failure(e)),
            };
            c.upload(&inputs).map_err(failure)?;
            c.run().map_err(failure)?;
            let got = c.download().map_err(failure)?;
            if let Some(o) = got.iter().zip(&want).position(|(g, w)| !tune::search::close(g, w)) {
                return Ok(Err(format!("output {o} differs from the reference beyond 000 §9's tolerance")));
            }
            for _ in 0..a.warmup {
                c.run().map_err(failure)?;
            }
            gpu.synchronize().map_err(Failure::from)?;
            // Runs per timed repetition: enough for about BATCH_NS, so a
            // short kernel's time is not the synchronisation's.
            let start = std::time::Instant::now();
            c.run().map_err(failure)?;
            gpu.synchronize().map_err(Failure::from)?;
            let once = start.elapsed().as_nanos().max(1) as u64;
            let batch = BATCH_NS.div_ceil(once).clamp(1, MAX_BATCH);
            let mut times = Vec::with_capacity(a.repetitions);
            for _ in 0..a.repetitions {
                let start = std::time::Instant::now();
                for _ in 0..batch {
                    c.run().map_err(failure)?;
                }
                gpu.synchronize().map_err(Failure::from)?;
                times.push(start.elapsed().as_nanos() as u64 / batch);
            }
            times.sort_unstable();
            Ok(Ok(times[(times.len() - 1) / 2]))
        };
        let tuned = tg::tune(&unit, target, ds, &mut run, &mut |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        })?;
        bar.finish_and_clear();
        let date = tune::utc_date(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()));
        println!("{graph} at {label} on {} ({}, {} timed runs):", target.name, machine.device, a.repetitions);
        for t in &tuned {
            let time = |p: Option<&tgc_core::plan::Plan>| {
                let at = t.outcomes.iter().position(|(c, _)| Some(c) == p)?;
                t.outcomes[at].1.as_ref().ok().copied()
            };
            let shape = |p: &tgc_core::plan::Plan| tgc_core::plan::plan_shape(p).join(" ");
            let measured = t.outcomes.iter().filter(|(_, o)| o.is_ok()).count();
            let best = t.best.map(|b| &t.outcomes[b].0);
            match (best, time(best)) {
                (Some(b), Some(won)) => {
                    let base = time(t.decision.analytic.as_ref());
                    let speedup = base.map_or_else(
                        || "the analytic plan was not measured".to_string(),
                        |base| format!("analytic {:.1} µs, {:.2}×", base as f64 / 1e3, base as f64 / won.max(1) as f64),
                    );
                    println!(
                        "  {}: {measured}/{} plans measured, best {} at {:.1} µs ({speedup})",
                        t.decision.inputs.decision,
                        t.outcomes.len(),
                        shape(b),
                        won as f64 / 1e3
                    );
                }
                _ => {
                    let why = t.outcomes.iter().find_map(|(_, o)| o.as_ref().err()).cloned().unwrap_or_default();
                    println!("  {}: no plan measured ({why})", t.decision.inputs.decision);
                }
            }
            if let Some(record) = t.record(format!("{graph} at {label}"), machine.clone(), date.clone()) {
                cache.put(record).map_err(|e| Failure::user(e.to_string()))?;
            }
        }
        reports.push((label, tuned));
    }
    if let Some(file) = a.report {
        let units: Vec<tune::report::GpuUnitReport> =
            reports.iter().map(|(label, tuned)| tune::report::GpuUnitReport { graph, point: label, tuned }).collect();
        crate::commands::write_file(file, tune::report::gpu_csv(&units).as_bytes())?;
        crate::commands::write_file(&file.with_extension("svg"), tune::report::gpu_svg(&units).as_bytes())?;
    }
    println!("GPU tuning records {}: {}", cache.dir().display(), cache.len());
    Ok(())
}
