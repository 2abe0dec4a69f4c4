//! GPU plan tuning (`000` §6 on sm80 and sm90): each template's plan space
//! measured on a GPU, the winner recorded in the tuning cache's
//! [`SUBDIR`], read by builds through the [`cost::Estimator`] seam.
//!
//! **A decision** is one cost-model problem of the program's tensor-core
//! templates ([`Problem`]: its axes and extents, dtype, operands and
//! distinct elements) with the `algo_choice` keys its plans carry (a
//! convolution's `conv`, an attention's `attention`; none for a GEMM):
//! every plan a template asks the estimator to cost for that problem is a
//! candidate. [`decisions`] finds them by lowering the graph once with an
//! estimator that notes what it is asked.
//!
//! **Measuring** ([`tune`]) runs on [`units`]: the graph when a template
//! takes it whole, else each region a template takes, as a graph of its
//! own. For each decision of a unit in turn, each candidate is pinned
//! ([`Choices`]: the earlier decisions' winners stay pinned), the unit is
//! lowered again, and the caller's `measure` runs its program (its check
//! against a reference first, then warm-up and timed runs); a candidate
//! the template does not launch when pinned (it rejected the plan after
//! costing it) is noted as not taken. The winner is the least median. The
//! time is the unit's program's, so a decision is measured in the region
//! it serves, epilogue included; two decisions of one unit (a convolution's
//! two algorithms) are tuned one after the other, not jointly.
//!
//! **Reading** ([`Recorded`]): a problem with a record gets its candidates'
//! measured medians as estimates (a plan the record did not measure is not
//! costed); a problem without one gets the inner estimator's estimate and
//! is noted as a miss. Measured and analytic seconds meet only where one
//! template compares two problems (a convolution's implicit GEMM against
//! Winograd's batched GEMM, which adds its transforms' estimate to the
//! measured whole-program time).
//!
//! **The key** hashes the tgc version, the target row's name (`sm80`,
//! `sm90`), NVRTC's version (the toolchain accepts only 13.0:
//! [`NVRTC`]) and the decision's text ([`decision_text`]). The record's
//! machine names the device it was measured on: an sm80 record measured on
//! an H200 serves an A100 build too, as the analytic model would.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{sha256_hex, Entry};
use crate::diag::DResult;
use crate::gpu::driver;
use crate::gpu::program::GpuProgram;
use crate::plan::cost::{self, Estimate, Estimator, Limit};
use crate::plan::{Plan, Problem, Target};
use crate::tiny::Graph;

/// The record format of GPU records; another is refused.
pub const GPU_SCHEMA: &str = "tgc-tune-gpu/1";

/// The tuning cache's folder of GPU records: `<cache>/gpu/<key>.json`
/// (the CPU records are `<cache>/<key>.json`).
pub const SUBDIR: &str = "gpu";

/// The compiler of every GPU key: the toolchain refuses any NVRTC but 13.0
/// (`gpu::toolchain`'s invariants), so its version is a constant.
pub const NVRTC: &str = "NVRTC 13.0";

/// What a GPU record's key is the hash of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuKeyInputs {
    /// `CARGO_PKG_VERSION` of tgc-core.
    pub tgc: String,
    /// The target row's name: `sm80` or `sm90`.
    pub target: String,
    /// [`NVRTC`].
    pub compiler: String,
    /// [`decision_text`].
    pub decision: String,
}

impl GpuKeyInputs {
    /// The inputs of `problem`'s decision (its plans' `algo_choice` keys
    /// those of `plan`) on `target`.
    pub fn of(problem: &Problem, plan: &Plan, target: &Target) -> GpuKeyInputs {
        GpuKeyInputs {
            tgc: env!("CARGO_PKG_VERSION").to_string(),
            target: target.name.to_string(),
            compiler: NVRTC.to_string(),
            decision: decision_text(problem, plan),
        }
    }

    /// The key: lowercase hex SHA-256 of the inputs' JSON.
    pub fn key(&self) -> String {
        sha256_hex(serde_json::to_string(self).expect("GpuKeyInputs serialises").as_bytes())
    }
}

/// The canonical text of the decision `plan` is a candidate of: the
/// problem's dtype, axes with extents, operands and distinct elements, and
/// the plan's `algo_choice` keys (sorted; their values are what the
/// candidates differ in), e.g. `f16 m=256 n=256 k=64; A, B; distinct 16384,
/// 16384; algo []`.
pub fn decision_text(problem: &Problem, plan: &Plan) -> String {
    let axes: Vec<String> = problem
        .axes
        .iter()
        .map(|a| format!("{}={}", a.name, a.extent.map_or_else(|| "?".to_string(), |e| e.to_string())))
        .collect();
    let keys: BTreeSet<&str> = plan.algo_choice.iter().map(|a| a.value.key().name()).collect();
    format!(
        "{} {}; {}; distinct {}, {}; algo [{}]",
        problem.dtype,
        axes.join(" "),
        problem.tensors.join(", "),
        problem.distinct[0],
        problem.distinct[1],
        keys.into_iter().collect::<Vec<_>>().join(", ")
    )
}

/// One candidate's outcome in a [`GpuRecord`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuTiming {
    /// The plan in the Schedule DSL ([`crate::plan::print_dsl`]).
    pub plan: String,
    /// The median of the timed runs of the whole program, in nanoseconds;
    /// `None` when the candidate was not measured (`failed` says why).
    pub median_ns: Option<u64>,
    /// Why it has no time: its results differed from the interpreter, it
    /// did not compile or launch, or the template did not take it.
    pub failed: Option<String>,
}

/// Where a GPU record was measured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuMachine {
    /// The device's name as the driver reports it.
    pub device: String,
    /// Its architecture, `10 * major + minor`.
    pub sm: u32,
    /// Timed runs per candidate (after the warm-up runs).
    pub repetitions: usize,
}

/// One tuned decision: its key and inputs, the chosen plan, the analytic
/// model's choice and every candidate's outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuRecord {
    /// [`GPU_SCHEMA`].
    pub schema: String,
    pub key: String,
    pub inputs: GpuKeyInputs,
    /// The chosen plan (DSL): the candidate of the least median.
    pub plan: String,
    /// The analytic model's choice (DSL), for comparison.
    pub analytic: Option<String>,
    /// Every candidate, in the order measured.
    pub timings: Vec<GpuTiming>,
    /// The graph and ShapeSet point measured, e.g. `gemm at M=256`.
    pub measured_on: String,
    pub machine: GpuMachine,
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub date: String,
    /// SHA-256 of the record's JSON with this field empty.
    pub digest: String,
}

impl GpuRecord {
    /// The measured median of `plan` in seconds, if the record measured it.
    pub fn seconds(&self, plan: &Plan) -> Option<f64> {
        let text = crate::plan::print_dsl(plan);
        let t = self.timings.iter().find(|t| t.plan == text)?;
        Some(t.median_ns? as f64 * 1e-9)
    }
}

impl Entry for GpuRecord {
    fn key(&self) -> &str {
        &self.key
    }

    fn digest(&self) -> &str {
        &self.digest
    }

    fn set_digest(&mut self, digest: String) {
        self.digest = digest;
    }

    const SCHEMA: &'static str = GPU_SCHEMA;

    fn schema(&self) -> &str {
        &self.schema
    }

    fn inputs_key(&self) -> String {
        self.inputs.key()
    }

    fn plan_fault(&self) -> Option<String> {
        for t in &self.timings {
            if let Err(d) = crate::plan::parse_dsl(&t.plan) {
                return Some(format!("a candidate's plan does not parse: {}", d.message));
            }
            if t.median_ns.is_some() == t.failed.is_some() {
                return Some("a candidate has both a time and a failure, or neither".into());
            }
        }
        let best = self.timings.iter().filter_map(|t| Some((t.median_ns?, &t.plan))).min_by_key(|(ns, _)| *ns);
        match best {
            Some((ns, _)) if self.timings.iter().any(|t| t.plan == self.plan && t.median_ns == Some(ns)) => None,
            _ => Some("its plan is not the measured candidate of the least median".into()),
        }
    }
}

/// The inner estimator's estimate for every plan, noting each
/// `(problem, plan)` it is asked about: the candidates of each decision.
struct Collect<'e> {
    inner: &'e dyn Estimator,
    seen: RefCell<Vec<Decision>>,
}

impl Estimator for Collect<'_> {
    fn estimate(&self, plan: &Plan, problem: &Problem, target: &Target) -> DResult<Estimate> {
        let e = self.inner.estimate(plan, problem, target)?;
        let inputs = GpuKeyInputs::of(problem, plan, target);
        let mut seen = self.seen.borrow_mut();
        let at = match seen.iter().position(|d| d.inputs == inputs) {
            Some(at) => at,
            None => {
                seen.push(Decision { inputs, problem: problem.clone(), candidates: Vec::new(), analytic: None });
                seen.len() - 1
            }
        };
        if !seen[at].candidates.contains(plan) {
            seen[at].candidates.push(plan.clone());
        }
        Ok(e)
    }
}

/// A problem of a program's tensor-core templates and the plans that
/// compete for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub inputs: GpuKeyInputs,
    pub problem: Problem,
    /// The plans the templates costed, in the order they asked.
    pub candidates: Vec<Plan>,
    /// The candidate the analytic lowering launched, if one.
    pub analytic: Option<Plan>,
}

impl Decision {
    pub fn key(&self) -> String {
        self.inputs.key()
    }

    /// The bytes its problem reads and writes once: the distinct operand
    /// elements and the output (`M·N` of a GEMM, `b·M·dv` of an
    /// attention), in its dtype.
    pub fn bytes(&self) -> u64 {
        let e = self.problem.dtype.size_bytes() as u64;
        let out = match (cost::gemm_dims(&self.problem), cost::attention_dims(&self.problem)) {
            (Ok([m, n, _]), _) => m.saturating_mul(n),
            (_, Ok([b, m, _, _, dv])) => b.saturating_mul(m).saturating_mul(dv),
            _ => 0,
        };
        self.problem.distinct.iter().fold(out, |s, &d| s.saturating_add(d)).saturating_mul(e)
    }

    /// The multiply-adds of its problem: `M·N·K` of a GEMM, `b·M·N·(d +
    /// dv)` of an attention (its two products); 0 for a problem without
    /// known extents.
    pub fn macs(&self) -> u64 {
        if let Ok([m, n, k]) = cost::gemm_dims(&self.problem) {
            return m.saturating_mul(n).saturating_mul(k);
        }
        match cost::attention_dims(&self.problem) {
            Ok([b, m, n, d, dv]) => b.saturating_mul(m).saturating_mul(n).saturating_mul(d + dv),
            Err(_) => 0,
        }
    }
}

/// The plans of `p`'s tensor-core launches as the estimator saw them (the
/// epilogue is the template's, added after the choice).
pub fn launched_plans(p: &GpuProgram) -> Vec<Plan> {
    p.launches.iter().filter_map(|l| Some(Plan { epilogue: Vec::new(), ..l.plan.clone()? })).collect()
}

/// A graph tuning measures ([`units`]) and the decisions it measures there.
#[derive(Clone, Debug)]
pub struct Unit {
    /// The graph's name, or the region's kernel (`k3`).
    pub name: String,
    pub graph: Graph,
    pub decisions: Vec<Decision>,
}

/// The graphs tuning measures for the bound graph `g` on `target` (module
/// doc): `g` itself when a template takes it whole
/// ([`crate::gpu::driver::lower`]), else each of its regions a template
/// takes, as a graph of its own ([`crate::gpu::driver::regions::region_graphs`]),
/// named by its kernel — so a candidate of a model's layer compiles and
/// runs that layer's few launches, not the whole model. A decision whose
/// key is in `seen` is left out, and each one kept is added: regions of
/// the same problem (a model's layers) are measured once. Units left
/// without decisions are dropped.
///
/// Errors: those of the lowering.
pub fn units(g: &Graph, target: &Target, seen: &mut BTreeSet<String>) -> DResult<Vec<Unit>> {
    let graphs = match crate::gpu::driver::lower(g, target, &cost::Analytic) {
        Some(Ok(_)) => vec![(g.name.clone(), g.clone())],
        _ => crate::gpu::driver::regions::region_graphs(g, target, &cost::Analytic)?,
    };
    let mut out = Vec::new();
    for (name, graph) in graphs {
        let mut ds = decisions(&graph, target)?;
        ds.retain(|d| seen.insert(d.key()));
        if !ds.is_empty() {
            out.push(Unit { name, graph, decisions: ds });
        }
    }
    Ok(out)
}

/// The decisions of the bound graph `g` on `target`, found by lowering it
/// with [`cost::Analytic`] ([`driver::lower_program_with`]); each with the
/// plan that lowering launched. A graph no tensor-core template takes has
/// none.
///
/// Errors: those of the lowering.
pub fn decisions(g: &Graph, target: &Target) -> DResult<Vec<Decision>> {
    let collect = Collect { inner: &cost::Analytic, seen: RefCell::new(Vec::new()) };
    let program = driver::lower_program_with(g, target, &collect)?;
    let launched = launched_plans(&program);
    let mut out = collect.seen.into_inner();
    for d in &mut out {
        d.analytic = d.candidates.iter().find(|c| launched.contains(c)).cloned();
    }
    Ok(out)
}

/// An estimate below any other: a pinned plan wins even where a template
/// adds its own terms (Winograd's transforms) to the estimate.
pub const PINNED_S: f64 = -1.0;

/// Pins one plan per decision and costs the rest with `inner`: a pinned
/// plan is estimated at [`PINNED_S`], the other candidates of its decision
/// at 1 s, so the template launches the pinned one wherever it accepts it.
pub struct Choices<'e> {
    /// `(decision key, plan)` pairs.
    pub pinned: Vec<(String, Plan)>,
    pub inner: &'e dyn Estimator,
}

impl Estimator for Choices<'_> {
    fn estimate(&self, plan: &Plan, problem: &Problem, target: &Target) -> DResult<Estimate> {
        let key = GpuKeyInputs::of(problem, plan, target).key();
        match self.pinned.iter().find(|(k, _)| *k == key) {
            Some((_, p)) => Ok(Estimate { time_s: if p == plan { PINNED_S } else { 1.0 }, limit: Limit::Measured }),
            None => self.inner.estimate(plan, problem, target),
        }
    }
}

/// A candidate's measurement: the median nanoseconds, or why there is none.
pub type Outcome = Result<u64, String>;

/// One decision after [`tune`]: its candidates' outcomes and the winner.
#[derive(Clone, Debug, PartialEq)]
pub struct TunedDecision {
    pub decision: Decision,
    /// Each candidate with its outcome, in [`Decision::candidates`] order.
    pub outcomes: Vec<(Plan, Outcome)>,
    /// The index of the least median in `outcomes`; `None` when no
    /// candidate was measured.
    pub best: Option<usize>,
}

impl TunedDecision {
    /// The record of this decision (digest empty: [`super::Cache::put`]
    /// fills it), or `None` when no candidate was measured.
    pub fn record(&self, measured_on: String, machine: GpuMachine, date: String) -> Option<GpuRecord> {
        let best = &self.outcomes[self.best?].0;
        Some(GpuRecord {
            schema: GPU_SCHEMA.to_string(),
            key: self.decision.key(),
            inputs: self.decision.inputs.clone(),
            plan: crate::plan::print_dsl(best),
            analytic: self.decision.analytic.as_ref().map(crate::plan::print_dsl),
            timings: self
                .outcomes
                .iter()
                .map(|(p, o)| GpuTiming {
                    plan: crate::plan::print_dsl(p),
                    median_ns: o.as_ref().ok().copied(),
                    failed: o.as_ref().err().cloned(),
                })
                .collect(),
            measured_on,
            machine,
            date,
            digest: String::new(),
        })
    }
}

/// Measures every candidate of every decision of the bound graph `g` on
/// `target` (module doc): `measure` gets the program with the candidate
/// pinned and returns its outcome (`Err(E)` stops the tuning: no device,
/// a lost context); `progress` gets `(done, total)` candidates.
///
/// A candidate whose pinned lowering fails, or that the template does not
/// launch, gets that as its outcome; `measure` is not called for it.
///
/// Errors: `measure`'s own, which stop the tuning.
pub fn tune<E>(
    g: &Graph,
    target: &Target,
    decisions: Vec<Decision>,
    measure: &mut dyn FnMut(&GpuProgram) -> Result<Outcome, E>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<TunedDecision>, E> {
    let total: usize = decisions.iter().map(|d| d.candidates.len()).sum();
    let mut done = 0;
    let mut pinned: Vec<(String, Plan)> = Vec::new();
    let mut out = Vec::new();
    for decision in decisions {
        let key = decision.key();
        let mut outcomes = Vec::new();
        for plan in &decision.candidates {
            let mut choices = Choices { pinned: pinned.clone(), inner: &cost::Analytic };
            choices.pinned.push((key.clone(), plan.clone()));
            let outcome = match driver::lower_program_with(g, target, &choices) {
                Err(d) => Err(format!("does not lower: {}", d.message)),
                Ok(p) if !launched_plans(&p).contains(plan) => {
                    Err("not taken: the template rejected it after costing".to_string())
                }
                Ok(p) => measure(&p)?,
            };
            outcomes.push((plan.clone(), outcome));
            done += 1;
            progress(done, total);
        }
        let best = outcomes
            .iter()
            .enumerate()
            .filter_map(|(i, (_, o))| Some((i, *o.as_ref().ok()?)))
            .min_by_key(|&(_, ns)| ns)
            .map(|(i, _)| i);
        if let Some(b) = best {
            pinned.push((key, outcomes[b].0.clone()));
        }
        out.push(TunedDecision { decision, outcomes, best });
    }
    Ok(out)
}

/// The GPU records of the tuning cache folder `dir` (its [`SUBDIR`]).
///
/// Errors: those of [`super::Cache::open`].
pub fn open(dir: &Path) -> Result<super::Cache<GpuRecord>, super::CacheError> {
    super::Cache::open(&dir.join(SUBDIR))
}

/// Costs a problem with a record by its measured medians, the rest with
/// `inner` (module doc, "Reading"); the keys without a record are kept for
/// the build's note ([`Recorded::misses`]). Without a cache (a build not
/// asked to read one) every plan is `inner`'s and nothing is a miss.
pub struct Recorded<'a> {
    pub cache: Option<&'a super::Cache<GpuRecord>>,
    pub inner: &'a dyn Estimator,
    misses: RefCell<BTreeSet<(String, String)>>,
}

impl<'a> Recorded<'a> {
    pub fn new(cache: Option<&'a super::Cache<GpuRecord>>, inner: &'a dyn Estimator) -> Recorded<'a> {
        Recorded { cache, inner, misses: RefCell::new(BTreeSet::new()) }
    }

    /// The decisions looked up and not found so far: `(key, decision
    /// text)`, in key order.
    pub fn misses(&self) -> Vec<(String, String)> {
        self.misses.borrow().iter().cloned().collect()
    }

    /// The note a build prints for the misses of graph `graph`, if any.
    pub fn miss_note(&self, graph: &str) -> Option<String> {
        let misses = self.misses.borrow();
        let (key, text) = misses.iter().next()?;
        let count = misses.len();
        Some(format!(
            "graph `{graph}`: no GPU tuning record for {count} plan decision{} (first: {text}, key {}): analytic \
             plans; run `tgc tune --target` on a GPU",
            if count == 1 { "" } else { "s" },
            &key[..16]
        ))
    }
}

impl Estimator for Recorded<'_> {
    fn estimate(&self, plan: &Plan, problem: &Problem, target: &Target) -> DResult<Estimate> {
        let Some(cache) = self.cache else {
            return self.inner.estimate(plan, problem, target);
        };
        let inputs = GpuKeyInputs::of(problem, plan, target);
        let key = inputs.key();
        match cache.get(&key) {
            Some(r) => match r.seconds(plan) {
                Some(time_s) => Ok(Estimate { time_s, limit: Limit::Measured }),
                None => Err(crate::diag!(
                    Unsupported,
                    "not measured by tuning record {} (it failed there, or was not a candidate)",
                    &key[..16]
                )),
            },
            None => {
                self.misses.borrow_mut().insert((key, inputs.decision));
                self.inner.estimate(plan, problem, target)
            }
        }
    }
}
