//! Checks a [`Plan`] against a [`Target`] and the loop axes of the problem
//! it schedules. Every violation is reported, each at the span of the plan
//! element at fault:
//!
//! - `arch`, when given, names the target validated against (`Unsupported`).
//! - Loop steps: `split`, `fuse` and `unroll` act on a live axis (one not yet
//!   split or fused away), `fuse` makes a new name, `reorder` names live
//!   axes once each; factors are ≥ 1 (`InvalidAxis`, `InvalidPermutation`,
//!   `Unsupported`).
//! - Every axis `bind`, `pipeline`, `cache_read`, `vectorize` and
//!   `predicate_tail` name exists: a caller's axis, one a loop step made, or
//!   an implicit warp-level axis (below) (`InvalidAxis`).
//! - No axis is bound twice and no target has two axes (`InvalidAxis`).
//! - `stages ∈ {2, 3}` (`000` §1.7) (`Unsupported`).
//! - Block tile and warp tile (`000` §1.7, §5): the block tile `[BM, BN, BK]`
//!   is `tile`, else the `split` factors of `m`, `n`, `k`; both given must
//!   agree; `tile` alone stands for those splits (§12.5's JSON names `m.o`,
//!   `n.i.i` with no split written); `BM`, `BN` are multiples of the warp tile's `WM`, `WN`; `WM`,
//!   `WN`, `BK` are multiples of the target's `mma.sync` shape for the dtype
//!   (m16n8k16 for f16/bf16) (`AxisSizeMismatch`; `Unsupported` when the
//!   target has no tensor-core shape for the dtype).
//! - Resources (`000` §5 `smem_per_CTA = (BM*BK + BK*BN) * sizeof(T) *
//!   stages`, a synchronous plan counting one stage): shared memory within
//!   the target's per-block limit, `(BM/WM)·(BN/WN)` warps within its
//!   threads per block (`ResourceExceeded`).
//! - `vectorize`: `width × sizeof(T)` is 4, 8 or 16 bytes (the sizes of one
//!   `cp.async` copy and of a vector `ld/st.global` up to 128 bits, PTX ISA;
//!   `000` §1.7, §5), and divides the axis's extent when known
//!   (`Unsupported`).
//! - `warp_specialize` only where the target's template issues `wgmma`
//!   (sm90), `cluster=2` included, and its cluster 1 or 2 (`Unsupported`).
//! - `cache_read` tensors are the problem's, when it names them
//!   (`UnknownName`); `local_edges` depths are 2 or 3 (`Unsupported`).
//!
//! Epilogue op and `algo_choice` names are not checked here: the readers
//! parse them into [`Epilogue`] and [`AlgoChoice`], with positioned
//! errors listing the accepted names.
//!
//! Axis naming follows §1.7's example: `split a F` makes `a.o` and `a.i`;
//! the MMA template splits each remaining `X.i` once more into `X.i.o` (the
//! warp index) and `X.i.i` (inside a warp) — by `WM` for axes rooted at
//! `m`, `WN` for `n` and the MMA `k` for `k` — so a plan may name those
//! without splitting them itself (§1.7 reorders `m.i.o … k.i.i` after
//! three splits).

use std::collections::{BTreeMap, HashMap};

use crate::diag;
use crate::diag::{Diagnostic, Span};
use crate::DType;

use super::*;

/// One loop axis of the problem: a name and its extent, when known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopAxis {
    pub name: String,
    pub extent: Option<u64>,
}

/// What a plan schedules: the loop axes (for the MMA template `m`, `n`,
/// `k`), the operand dtype, and the tensors `cache_read` may name (none
/// listed: any).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub axes: Vec<LoopAxis>,
    pub dtype: DType,
    pub tensors: Vec<String>,
    /// The distinct elements of `A` and `B` in memory: `M·K` and `K·N` for
    /// a plain GEMM; fewer for an implicit GEMM, whose `A` (a
    /// convolution's im2col view) reads each input element up to `R·S`
    /// times. The cost model's DRAM traffic counts these.
    pub distinct: [u64; 2],
}

impl Problem {
    /// A GEMM `[M,K]·[K,N]` in `dtype` over axes `m`, `n`, `k` with tensors `A`, `B`.
    pub fn gemm(m: u64, n: u64, k: u64, dtype: DType) -> Problem {
        let ax = |name: &str, e| LoopAxis { name: name.to_string(), extent: Some(e) };
        Problem {
            axes: vec![ax("m", m), ax("n", n), ax("k", k)],
            dtype,
            tensors: vec!["A".into(), "B".into()],
            distinct: [m * k, k * n],
        }
    }

    /// An attention `softmax(Q·Kᵀ)·V` in `dtype` (`000` §7.3) over axes
    /// `b` (batch points), `m` (queries), `n` (keys), `d` (head) and `dv`
    /// (value), with tensors `Q`, `K`, `V`; `distinct` counts `Q` and `K`
    /// with `V`.
    pub fn attention(b: u64, m: u64, n: u64, d: u64, dv: u64, dtype: DType) -> Problem {
        let ax = |name: &str, e| LoopAxis { name: name.to_string(), extent: Some(e) };
        Problem {
            axes: vec![ax("b", b), ax("m", m), ax("n", n), ax("d", d), ax("dv", dv)],
            dtype,
            tensors: vec!["Q".into(), "K".into(), "V".into()],
            distinct: [b * m * d, b * n * (d + dv)],
        }
    }
}

/// Every violation of the rules in this module's doc, in plan order.
pub fn validate(plan: &Plan, target: &Target, problem: &Problem) -> Vec<Diagnostic> {
    let mut v = Validator { errs: Vec::new(), live: BTreeMap::new(), known: BTreeMap::new() };
    if let Some(a) = &plan.arch {
        if a.value != target.name {
            v.errs.push(
                diag!(Unsupported, "the plan is for `{}` but is checked for `{}`", a.value, target.name).or_at(a.span),
            );
        }
    }
    for a in &problem.axes {
        v.live.insert(a.name.clone(), a.extent);
    }
    v.known = v.live.clone();
    let tiles = tiles(plan, target, problem, &mut v.errs);
    // `tile` stands for the splits of `m`, `n`, `k` a plan does not write.
    if let Some(t) = &plan.tile {
        for (root, f) in ["m", "n", "k"].into_iter().zip(t.value) {
            let written =
                plan.loops.iter().any(|s| matches!(&s.value, LoopStep::Split { axis, .. } if axis.value == root));
            if !written && v.live.contains_key(root) {
                let axis = Spanned { value: root.to_string(), span: t.span };
                v.step(&LoopStep::Split { axis, factor: Spanned { value: f, span: t.span } }, tiles.as_ref());
            }
        }
    }
    for step in &plan.loops {
        v.step(&step.value, tiles.as_ref());
    }
    v.add_implicit(tiles.as_ref());
    v.binds(&plan.bind);
    if let Some(p) = &plan.pipeline {
        if let Some(a) = &p.value.axis {
            v.axis(a);
        }
        // 000 §1.7 fixes {2, 3} for the mma.sync pipeline; the wgmma
        // template's mbarrier ring takes up to 5 (the sm90 space; the
        // reference kernel of docs/design/sm90_gemm.md runs 4).
        let (most, source) =
            if target.issues_wgmma(problem.dtype) { (5, "the sm90 wgmma space") } else { (3, "000 §1.7") };
        if !(2..=most).contains(&p.value.stages.value) {
            let e = diag!(Unsupported, "stages = {} is outside 2 to {most} ({source})", p.value.stages.value);
            v.errs.push(e.or_at(p.value.stages.span));
        }
    }
    if let Some(w) = &plan.warp_specialize {
        let cluster = w.value.cluster;
        if !target.issues_wgmma(problem.dtype) {
            let what = if cluster == 2 { "warp_specialize cluster=2" } else { "warp_specialize" };
            let e =
                diag!(Unsupported, "{what} needs a target whose template issues wgmma (sm90), not `{}`", target.name);
            v.errs.push(e.or_at(w.span));
        } else if !(1..=2).contains(&cluster) {
            let e = diag!(Unsupported, "warp_specialize cluster={cluster}: a cluster is cluster=1 or 2 CTAs");
            v.errs.push(e.or_at(w.span));
        }
    }
    for c in &plan.cache {
        v.axis(&c.value.at);
        let t = &c.value.tensor;
        if !problem.tensors.is_empty() && !problem.tensors.contains(&t.value) {
            let e = diag!(UnknownName, "unknown tensor `{}`; the problem has {}", t.value, problem.tensors.join(", "));
            v.errs.push(e.or_at(t.span));
        }
    }
    if let Some(vec) = &plan.vectorize {
        v.vectorize(&vec.value, problem.dtype);
    }
    for a in &plan.predicate_tail {
        v.axis(a);
    }
    for e in &plan.local_edges {
        if let Some(d) = e.value.depth.filter(|d| !(2..=3).contains(d)) {
            v.errs.push(diag!(Unsupported, "local edge depth {d} is outside {{2, 3}} (000 §1.7)").or_at(e.span));
        }
    }
    v.errs
}

/// The block tile, warp tile and MMA `k` the template will use.
struct Tiles {
    block: [u64; 3],
    warp: Option<[u64; 2]>,
    mma_k: Option<u64>,
}

/// Checks the tile rules and the resources they imply (module doc).
fn tiles(plan: &Plan, target: &Target, problem: &Problem, errs: &mut Vec<Diagnostic>) -> Option<Tiles> {
    let split_of = |root: &str| {
        plan.loops.iter().find_map(|s| match &s.value {
            LoopStep::Split { axis, factor } if axis.value == root => Some((factor.value, s.span)),
            _ => None,
        })
    };
    let splits = ["m", "n", "k"].map(split_of);
    let from_splits = match splits {
        [Some(m), Some(n), Some(k)] => Some(([m.0, n.0, k.0], m.1)),
        _ => None,
    };
    if let Some(t) = &plan.tile {
        for ((root, split), f) in ["m", "n", "k"].into_iter().zip(splits).zip(t.value) {
            if let Some((s, _)) = split.filter(|(s, _)| *s != f) {
                let e = diag!(AxisSizeMismatch, "tile gives {root} = {f} but the plan writes `split {root} {s}`");
                errs.push(e.or_at(t.span));
            }
        }
    }
    let (block, block_span) = match (&plan.tile, from_splits) {
        (Some(t), _) => (t.value, t.span),
        (None, Some((s, sp))) => (s, sp),
        (None, None) => return None,
    };
    let [bm, bn, bk] = block;
    let dtype = problem.dtype;
    let warp = plan.warp_tile.as_ref();
    let mma = target.template_shape(dtype);
    if mma.is_none() {
        let e = diag!(Unsupported, "{} has no tensor-core shape for {dtype} operands", target.name);
        errs.push(e.or_at(warp.and_then(|w| w.span).or(block_span)));
    }
    if let Some(w) = warp {
        let [wm, wn] = w.value;
        if wm == 0 || wn == 0 || bm % wm != 0 || bn % wn != 0 {
            errs.push(
                diag!(AxisSizeMismatch, "block tile {bm}x{bn} is not divisible by warp tile {wm}x{wn}").or_at(w.span),
            );
        } else {
            let group = mma.map_or(target.warp_size, |s| s.threads);
            let threads = (bm / wm) * (bn / wn) * group;
            if threads > target.max_threads_per_block {
                let e = diag!(
                    ResourceExceeded,
                    "{} {} of {group} threads exceed {}'s {} threads per block",
                    threads / group,
                    if group == target.warp_size { "warps" } else { "warpgroups" },
                    target.name,
                    target.max_threads_per_block
                );
                errs.push(e.or_at(w.span));
            }
        }
        if let Some(s) = mma {
            if wm % s.m != 0 || wn % s.n != 0 {
                let e = diag!(
                    AxisSizeMismatch,
                    "warp tile {wm}x{wn} is not divisible by the {} shape m{}n{}k{}",
                    s.instr,
                    s.m,
                    s.n,
                    s.k
                );
                errs.push(e.or_at(w.span));
            }
        }
    }
    // 000 §4.2: on SM90 a tile outside what TMA and wgmma take is a STOP:
    // the warpgroup tile is m64 by at most n256 (PTX ISA, wgmma shapes),
    // and a k-tile row is one 128-byte swizzle row (TMA's 128-byte swizzle
    // spans 128 bytes; the descriptors of `MatrixDesc` assume it).
    if let (Some(s), Some(w)) = (mma.filter(|s| s.instr == "wgmma"), warp) {
        let [wm, wn] = w.value;
        if wm != s.m || wn > 256 || bk * dtype.size_bytes() as u64 != 128 {
            let e = diag!(
                Unsupported,
                "{}'s wgmma template takes a warpgroup tile of {} x (8 to 256) and BK of 128 bytes, not {wm}x{wn}                  with BK = {bk}",
                target.name,
                s.m
            );
            errs.push(e.or_at(w.span));
        }
    }
    if let Some(s) = mma {
        if bk % s.k != 0 {
            let e = diag!(AxisSizeMismatch, "BK = {bk} is not a multiple of the {} k = {}", s.instr, s.k);
            errs.push(e.or_at(block_span));
        }
    }
    let stages = plan.pipeline.as_ref().map_or(1, |p| p.value.stages.value);
    let elem = dtype.size_bytes() as u64;
    let smem = (bm * bk + bk * bn).saturating_mul(elem).saturating_mul(stages);
    if smem > target.smem_per_block_max {
        let e = diag!(
            ResourceExceeded,
            "shared memory {smem} B = {stages} stages x ({bm}x{bk} + {bk}x{bn}) x {elem} B (000 §5) exceeds {}'s {} B per block",
            target.name,
            target.smem_per_block_max
        );
        errs.push(e.or_at(block_span));
    }
    Some(Tiles { block, warp: warp.map(|w| w.value), mma_k: mma.map(|s| s.k) })
}

struct Validator {
    errs: Vec<Diagnostic>,
    /// Axes a loop step may still act on, with extents.
    live: BTreeMap<String, Option<u64>>,
    /// Every axis that has existed, with extents.
    known: BTreeMap<String, Option<u64>>,
}

impl Validator {
    fn unknown(&mut self, a: &Axis, set: &BTreeMap<String, Option<u64>>, what: &str) {
        let names: Vec<&str> = set.keys().map(String::as_str).collect();
        let e = diag!(InvalidAxis, "unknown axis `{}`; {what}: {}", a.value, names.join(", "));
        self.errs.push(e.or_at(a.span));
    }

    /// Checks that `a` exists; returns its extent.
    fn axis(&mut self, a: &Axis) -> Option<u64> {
        match self.known.get(&a.value) {
            Some(e) => *e,
            None => {
                let known = self.known.clone();
                self.unknown(a, &known, "the axes are");
                None
            }
        }
    }

    /// Takes a live axis out for a split or fuse.
    fn take(&mut self, a: &Axis) -> Option<Option<u64>> {
        let r = self.live.remove(&a.value);
        if r.is_none() {
            let live = self.live.clone();
            self.unknown(a, &live, "a split or fuse takes one of the live axes");
        }
        r
    }

    fn make(&mut self, name: &str, extent: Option<u64>, at: &Axis) {
        if self.known.contains_key(name) {
            let e = diag!(InvalidAxis, "axis `{name}` already exists");
            self.errs.push(e.or_at(at.span));
        }
        self.live.insert(name.to_string(), extent);
        self.known.insert(name.to_string(), extent);
    }

    fn factor(&mut self, f: &Spanned<u64>) {
        if f.value == 0 {
            self.errs.push(diag!(Unsupported, "a factor must be at least 1").or_at(f.span));
        }
    }

    fn step(&mut self, step: &LoopStep, tiles: Option<&Tiles>) {
        match step {
            LoopStep::Split { axis, factor } => {
                self.factor(factor);
                if let Some(e) = self.take(axis) {
                    let f = factor.value.max(1);
                    self.make(&format!("{}.o", axis.value), e.map(|e| e.div_ceil(f)), axis);
                    self.make(&format!("{}.i", axis.value), Some(f), axis);
                }
            }
            LoopStep::Fuse { outer, inner, into } => {
                let (a, b) = (self.take(outer), self.take(inner));
                if let (Some(a), Some(b)) = (a, b) {
                    let e = a.zip(b).map(|(a, b)| a.saturating_mul(b));
                    self.make(&into.value, e, into);
                }
            }
            LoopStep::Unroll { axis, factor } => {
                self.factor(factor);
                self.axis(axis);
            }
            LoopStep::Reorder { axes } => {
                let mut scope = self.live.clone();
                scope.extend(implicit(&self.live, tiles));
                let mut seen: HashMap<&str, Option<Span>> = HashMap::new();
                for a in axes {
                    if !scope.contains_key(&a.value) {
                        self.unknown(a, &scope, "reorder takes the live axes");
                    } else if seen.insert(&a.value, a.span).is_some() {
                        let e = diag!(InvalidPermutation, "axis `{}` appears twice in reorder", a.value);
                        self.errs.push(e.or_at(a.span));
                    }
                }
            }
        }
    }

    fn add_implicit(&mut self, tiles: Option<&Tiles>) {
        let imp = implicit(&self.live, tiles);
        for (k, e) in imp {
            self.known.entry(k).or_insert(e);
        }
    }

    fn binds(&mut self, binds: &[Spanned<Bind>]) {
        let mut axes: HashMap<&str, ()> = HashMap::new();
        let mut targets: HashMap<BindTarget, &str> = HashMap::new();
        for b in binds {
            let (axis, t) = (&b.value.axis, &b.value.target);
            self.axis(axis);
            if axes.insert(&axis.value, ()).is_some() {
                self.errs.push(diag!(InvalidAxis, "axis `{}` is bound twice", axis.value).or_at(axis.span));
            } else if let Some(prev) = targets.insert(t.value, &axis.value) {
                let e = diag!(InvalidAxis, "`{}` is bound to both `{prev}` and `{}`", t.value, axis.value);
                self.errs.push(e.or_at(t.span));
            }
        }
    }

    fn vectorize(&mut self, v: &Vectorize, dtype: DType) {
        let extent = self.axis(&v.axis);
        let w = v.width.value;
        let bytes = w.saturating_mul(dtype.size_bytes() as u64);
        if ![4, 8, 16].contains(&bytes) {
            let e = diag!(
                Unsupported,
                "vector width {w} x {dtype} = {bytes} B; one access moves 4, 8 or 16 B (cp.async, ld/st.global.v*)"
            );
            self.errs.push(e.or_at(v.width.span));
        } else if let Some(e) = extent.filter(|e| e % w != 0) {
            let e = diag!(
                Unsupported,
                "vector width {w} breaks alignment: it does not divide `{}`'s extent {e}",
                v.axis.value
            );
            self.errs.push(e.or_at(v.width.span));
        }
    }
}

/// The template's warp-level axes `X.i.o`, `X.i.i` of every live `X.i`
/// (module doc), with extents when the tiles give them.
fn implicit(live: &BTreeMap<String, Option<u64>>, tiles: Option<&Tiles>) -> Vec<(String, Option<u64>)> {
    let mut out = Vec::new();
    for (name, extent) in live {
        let Some(root) = name.strip_suffix(".i") else { continue };
        let inner = tiles.and_then(|t| match root.split('.').next() {
            Some("m") => t.warp.map(|w| w[0]),
            Some("n") => t.warp.map(|w| w[1]),
            Some("k") => t.mma_k.filter(|_| t.block[2] > 0),
            _ => None,
        });
        let outer = extent.zip(inner).and_then(|(e, i)| (i > 0).then(|| e.div_ceil(i)));
        out.push((format!("{name}.o"), outer));
        out.push((format!("{name}.i"), inner));
    }
    out
}
