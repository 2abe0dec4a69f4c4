//! The `plan` dump: the ranked space of one GEMM as a table (resources of
//! `000` §5, the estimate of §6), the chosen plan marked `*`, the rejected
//! candidates with their reasons, then the chosen plan in the Schedule DSL.

use std::fmt::Write;

use super::cost::{gemm_dims, Choice};
use super::resources::{self, block_tile, stages};
use super::{print_dsl, Plan, Problem, Target};

/// A GEMM plan's shape as the dump's columns: the block tile (`128x128x32`),
/// the warp tile (`64x64`), the stages, the vector width (`-` and 0 for
/// what the plan does not give) and `ws` for `warp_specialize`, `wsp`
/// for `warp_specialize persistent` (else `-`), followed by the CTAs per
/// cluster when not 1: `ws2` for `warp_specialize cluster=2`, `wsp2` for
/// `warp_specialize persistent cluster=2`.
pub fn plan_shape(plan: &Plan) -> [String; 5] {
    let t = block_tile(plan).map_or("-".into(), |[m, n, k]| format!("{m}x{n}x{k}"));
    let w = plan.warp_tile.as_ref().map_or("-".into(), |w| format!("{}x{}", w.value[0], w.value[1]));
    let v = plan.vectorize.as_ref().map_or(0, |v| v.value.width.value);
    let ws = match &plan.warp_specialize {
        None => "-".to_string(),
        Some(w) => {
            let form = if w.value.persistent { "wsp" } else { "ws" };
            let cluster = if w.value.cluster != 1 { w.value.cluster.to_string() } else { String::new() };
            format!("{form}{cluster}")
        }
    };
    [t, w, stages(plan).to_string(), v.to_string(), ws]
}

fn shape(plan: &Plan) -> String {
    let [t, w, st, v, ws] = plan_shape(plan);
    format!("{t:<12} {w:<7} {st:>2} {v:>3} {ws:>4}")
}

/// The dump of `choice` for `problem` on `target`.
pub fn dump(problem: &Problem, target: &Target, choice: &Choice) -> String {
    let mut s = String::new();
    let [m, n, k] = gemm_dims(problem).unwrap_or([0, 0, 0]);
    let flops = 2.0 * m as f64 * n as f64 * k as f64;
    let _ = writeln!(s, "GEMM M={m} N={n} K={k} {} on {} ({})", problem.dtype, target.name, target.part);
    if choice.candidates.iter().any(|(_, e)| e.limit == crate::plan::cost::Limit::Measured) {
        let _ = writeln!(s, "times measured on a GPU by `tgc tune --target` (limit `measured`), not estimates");
    } else {
        let _ = writeln!(s, "estimates of the analytic model (000 §5, §6), not measurements");
    }
    let _ = writeln!(
        s,
        "  {:<12} {:<7} {:>2} {:>3} {:>4} {:>9} {:>4} {:>4} {:>12} {:>5} {:>10} {:>12}  limit",
        "tile", "warp", "st", "vec", "ws", "smem_B", "regs", "thr", "CTA/SM", "occ", "est_us", "est_TFLOP/s"
    );
    for (i, (plan, e)) in choice.candidates.iter().enumerate() {
        let mark = if choice.best == Some(i) { '*' } else { ' ' };
        let Some(r) = resources::of(plan, problem.dtype, target) else { continue };
        let cta = format!("{} ({})", r.ctas_per_sm, r.cta_limit.as_str());
        let _ = writeln!(
            s,
            "{mark} {} {:>9} {:>4} {:>4} {cta:>12} {:>5.3} {:>10.1} {:>12.1}  {}",
            shape(plan),
            r.smem_per_cta,
            r.regs_per_thread,
            r.threads_per_cta,
            r.occupancy,
            e.time_s * 1e6,
            flops / e.time_s / 1e12,
            e.limit.as_str()
        );
    }
    if !choice.rejected.is_empty() {
        let _ = writeln!(s, "rejected ({}):", choice.rejected.len());
        for (plan, why) in &choice.rejected {
            let _ = writeln!(s, "  {}  {}", shape(plan), why.join("; "));
        }
    }
    match choice.best() {
        Some((plan, _)) => {
            let _ = writeln!(s, "chosen plan (Schedule DSL):");
            s.push_str(&print_dsl(plan));
        }
        None => {
            let _ = writeln!(s, "no candidate is valid for {}", target.name);
        }
    }
    s
}
