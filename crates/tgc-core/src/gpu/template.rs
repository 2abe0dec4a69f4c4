//! The seam where a whole graph meets a tensor-core template (issue 13;
//! `000` §4 step 7: "`algo_choice` は Poly-View の `pattern` に基づく").
//!
//! [`pattern_of`] says what a graph is by its contractions (the
//! IndexBook's recogniser, [`crate::index_book::contraction`], which
//! Poly-View reads too): one contraction and its epilogue, or the two of
//! an attention chain. [`TEMPLATES`] lists every template with the pattern
//! it takes, the `algo_choice` it implements (`000` §1.7: `matmul`/`conv`
//! `implicit_gemm`, `attention` `online_softmax` and
//! `streaming_softmax_2pass`) and its architecture; [`lower`] tries every
//! template of the graph's pattern and the target's architecture and
//! keeps the one whose program the [`Estimator`] costs least (the analytic
//! model, or a measured or pinned one). A new template is its module plus
//! one entry here: a function that lowers a graph of its pattern to a
//! one-launch [`GpuProgram`] with its estimate, or says why not.
//!
//! A graph no template takes runs as the SIMT kernels of its regions
//! (`simt::lower_program`); the refusal is the note `tgc compile` prints.

use std::collections::BTreeMap;

use crate::cpu::loop_ir::{BufId, Buffer, Kernel, Program, Role};
use crate::diag;
use crate::diag::{DResult, Diagnostic};
use crate::frontend::ops::recognise::recognise;
use crate::index_book::contraction::is_contraction;
use crate::plan::cost::{Estimate, Estimator};
use crate::plan::{AlgoChoice, ConvAlgo, Target};
use crate::tiny::{Graph, NodeId};

use super::ir::{Arch, ParamId};
use super::lower::EPILOGUE_ACTIVATIONS;
use super::simt::{Form, GpuProgram, Launch, LaunchArg};
use super::sm80::attention::Algorithm;

/// What a whole graph is to the templates, by its contractions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphPattern {
    /// One contraction (`000` §3.5's `matmul` or `conv`) and its epilogue.
    Contraction,
    /// Two contractions: the attention chain `matmul → softmax → matmul`.
    Attention,
}

/// A tensor-core template.
pub struct Template {
    /// Its name, for dumps and notes.
    pub name: &'static str,
    /// The graphs it takes.
    pub pattern: GraphPattern,
    /// The `algo_choice` it implements (`000` §1.7); the GEMM templates'
    /// is given as a convolution's (`conv implicit_gemm`), a plain GEMM's
    /// being the same algorithm under `matmul`.
    pub algo_choice: AlgoChoice,
    pub arch: Arch,
    /// Tried only when no other template of the pattern and architecture
    /// takes the graph (its estimate is not comparable with theirs: the
    /// sm80 kernels that sm90 runs where its own branch has none).
    pub fallback: bool,
    /// The graph's one-launch program and its estimate, or why the
    /// template does not take it (a positioned `Unsupported` or
    /// `UnboundSymbol`).
    pub lower: fn(&Graph, &Target, &dyn Estimator) -> DResult<Lowered>,
}

/// A template's program for a graph and the estimator's time for it,
/// which [`lower`] ranks the templates of one pattern by.
pub struct Lowered {
    pub program: GpuProgram,
    pub estimate: Estimate,
}

/// Every template, in the order [`lower`] tries them.
pub const TEMPLATES: &[Template] = &[
    Template {
        name: "sm80 GEMM (plain or implicit)",
        pattern: GraphPattern::Contraction,
        algo_choice: AlgoChoice::Conv(ConvAlgo::ImplicitGemm),
        arch: Arch::Sm80,
        fallback: false,
        lower: gemm,
    },
    Template {
        name: "sm90 GEMM (TMA + wgmma)",
        pattern: GraphPattern::Contraction,
        algo_choice: AlgoChoice::Conv(ConvAlgo::ImplicitGemm),
        arch: Arch::Sm90,
        fallback: false,
        lower: gemm,
    },
    Template {
        name: "sm80 Winograd F(2×2, 3×3) convolution",
        pattern: GraphPattern::Contraction,
        algo_choice: super::winograd::ALGO,
        arch: Arch::Sm80,
        fallback: false,
        lower: super::winograd::lower,
    },
    Template {
        name: "sm90 Winograd F(2×2, 3×3) convolution",
        pattern: GraphPattern::Contraction,
        algo_choice: super::winograd::ALGO,
        arch: Arch::Sm90,
        fallback: false,
        lower: super::winograd::lower,
    },
    Template {
        name: "sm80 attention (FlashAttention-2)",
        pattern: GraphPattern::Attention,
        algo_choice: AlgoChoice::Attention(Algorithm::OnlineSoftmax),
        arch: Arch::Sm80,
        fallback: false,
        lower: |g, t, e| attention(g, t, e, Algorithm::OnlineSoftmax),
    },
    Template {
        name: "sm80 attention (two-pass softmax)",
        pattern: GraphPattern::Attention,
        algo_choice: AlgoChoice::Attention(Algorithm::StreamingSoftmax2Pass),
        arch: Arch::Sm80,
        fallback: false,
        lower: |g, t, e| attention(g, t, e, Algorithm::StreamingSoftmax2Pass),
    },
    Template {
        name: "sm90 attention (FlashAttention-2 on wgmma)",
        pattern: GraphPattern::Attention,
        algo_choice: AlgoChoice::Attention(Algorithm::OnlineSoftmax),
        arch: Arch::Sm90,
        fallback: false,
        lower: |g, t, e| attention(g, t, e, Algorithm::OnlineSoftmax),
    },
    Template {
        name: "sm90 attention (two-pass softmax on wgmma)",
        pattern: GraphPattern::Attention,
        algo_choice: AlgoChoice::Attention(Algorithm::StreamingSoftmax2Pass),
        arch: Arch::Sm90,
        fallback: false,
        lower: |g, t, e| attention(g, t, e, Algorithm::StreamingSoftmax2Pass),
    },
    // sm90 runs the sm80 templates' mma.sync kernels where its wgmma
    // branches refuse the graph (split-K, which plan choice does not pick
    // today; an attention whose head or value dimension is not a multiple
    // of 64), planned and estimated on the sm80 row: an sm_80 kernel
    // compiles for sm_90a unchanged.
    Template {
        name: "sm80 GEMM (mma.sync) on sm90",
        pattern: GraphPattern::Contraction,
        algo_choice: AlgoChoice::Conv(ConvAlgo::ImplicitGemm),
        arch: Arch::Sm90,
        fallback: true,
        lower: |g, _, e| gemm(g, &crate::plan::target::SM80, e),
    },
    Template {
        name: "sm80 attention (FlashAttention-2) on sm90",
        pattern: GraphPattern::Attention,
        algo_choice: AlgoChoice::Attention(Algorithm::OnlineSoftmax),
        arch: Arch::Sm90,
        fallback: true,
        lower: |g, _, e| attention(g, &crate::plan::target::SM80, e, Algorithm::OnlineSoftmax),
    },
    Template {
        name: "sm80 attention (two-pass softmax) on sm90",
        pattern: GraphPattern::Attention,
        algo_choice: AlgoChoice::Attention(Algorithm::StreamingSoftmax2Pass),
        arch: Arch::Sm90,
        fallback: true,
        lower: |g, _, e| attention(g, &crate::plan::target::SM80, e, Algorithm::StreamingSoftmax2Pass),
    },
];

/// `g`'s pattern: one contraction (`REDUCE SUM` of a `MUL`,
/// [`is_contraction`]), two (an attention), or none a
/// template takes.
pub fn pattern_of(g: &Graph) -> Option<GraphPattern> {
    match g.ids().filter(|&id| is_contraction(g, id)).count() {
        1 => Some(GraphPattern::Contraction),
        2 => Some(GraphPattern::Attention),
        _ => None,
    }
}

/// The program of the template of `g`'s pattern for `target`'s
/// architecture that takes it with the least estimated time (the earlier
/// in [`TEMPLATES`] on a tie; the fallback templates only when no other
/// takes it); `Some(Err)` with the first refusal when none does; `None`
/// when no template has `g`'s pattern.
pub fn lower(g: &Graph, target: &Target, estimator: &dyn Estimator) -> Option<DResult<GpuProgram>> {
    let mut refusal: Option<Diagnostic> = None;
    for fallback in [false, true] {
        let mut tried = candidates(g, target, estimator, fallback)?;
        if let Some(i) = best(&tried) {
            return tried.swap_remove(i).1.ok().map(|l| Ok(l.program));
        }
        for (_, r) in tried {
            if let Err(d) = r {
                refusal.get_or_insert(d);
            }
        }
    }
    refusal.map(Err)
}

/// Each template of `g`'s pattern and `target`'s architecture (the
/// fallback ones when `fallback`, else the others), in [`TEMPLATES`]
/// order, with its program and estimate or its refusal: what [`lower`]
/// ranks, and the `plan` dump prints. `None` when no template has `g`'s
/// pattern or the target has no templates.
pub fn candidates(
    g: &Graph,
    target: &Target,
    estimator: &dyn Estimator,
    fallback: bool,
) -> Option<Vec<(&'static Template, DResult<Lowered>)>> {
    let pattern = pattern_of(g)?;
    let arch = Arch::parse(target.name)?;
    let chosen = TEMPLATES.iter().filter(|t| t.pattern == pattern && t.arch == arch && t.fallback == fallback);
    Some(chosen.map(|t| (t, (t.lower)(g, target, estimator))).collect())
}

/// The index of the lowered candidate with the least estimate (the
/// earlier on a tie), if any lowered.
pub fn best(candidates: &[(&'static Template, DResult<Lowered>)]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, (_, r)) in candidates.iter().enumerate() {
        if let Ok(l) = r {
            if best.is_none_or(|(_, t)| l.estimate.time_s < t) {
                best = Some((i, l.estimate.time_s));
            }
        }
    }
    best.map(|b| b.0)
}

/// How the CPU back end's lowering forms regions for the templates
/// (`simt`'s program and the `plan` dump read the same): element-wise
/// values a contraction reads through a broadcast stored
/// ([`crate::region::Grouping::store_operands`]), and no compute-at fusion
/// (a template cannot compute a producer at its reads).
pub fn region_options() -> crate::cpu::from_tiny::Options {
    let grouping = crate::region::Grouping { store_operands: true };
    crate::cpu::from_tiny::Options { grouping, fuse: false, ..Default::default() }
}

/// The launches of region kernel `k` of `p` (the CPU back end's lowering
/// of the bound graph `g`, [`region_options`], its stored values
/// `stored`) on the template that takes the region as a graph of its own
/// ([`region_graph`]) with the least estimate, bound to `p`'s buffers; the
/// template's temporaries become new buffers numbered from `first_temp`.
/// `None` when the region has no template's pattern (no contraction);
/// `Some(Err)` with the templates' refusal.
pub fn lower_region(
    g: &Graph,
    p: &Program,
    stored: &BTreeMap<NodeId, BufId>,
    k: &Kernel,
    target: &Target,
    estimator: &dyn Estimator,
    first_temp: u32,
) -> Option<DResult<RegionLaunches>> {
    let (sub, reads) = match region_graph(g, p, stored, k)? {
        Ok(x) => x,
        Err(d) => return Some(Err(d)),
    };
    let prog = match lower(&sub, target, estimator)? {
        Ok(prog) => prog,
        Err(d) => return Some(Err(d)),
    };
    // The region graph's program: its inputs (`reads`), its output, then
    // its temporaries.
    let temps: Vec<Buffer> = prog.buffers.iter().skip(reads.len() + 1).cloned().collect();
    let to_parent = |b: BufId| match (b.0 as usize).checked_sub(reads.len()) {
        None => reads[b.0 as usize],
        Some(0) => k.out,
        Some(t) => BufId(first_temp + t as u32 - 1),
    };
    let launches: DResult<Vec<Launch>> = prog
        .launches
        .into_iter()
        .map(|l| {
            let region = if l.region.is_empty() { Vec::new() } else { k.nodes.clone() };
            rebind(l, &to_parent, region)
        })
        .collect();
    let temps = temps
        .into_iter()
        .enumerate()
        .map(|(i, b)| Buffer { name: format!("tmp{}", first_temp as usize + i), ..b })
        .collect();
    Some(launches.map(|launches| RegionLaunches { launches, temps }))
}

/// A region's launches on a template ([`lower_region`]) and the
/// temporaries they add to the program, in buffer-id order from the
/// `first_temp` they were bound with.
pub struct RegionLaunches {
    pub launches: Vec<Launch>,
    pub temps: Vec<Buffer>,
}

/// A launch of a region graph ([`subgraph`]) bound to the program's
/// buffers by `to_parent`; `region` the nodes it computes.
///
/// Errors: `Internal` for an argument that reads a symbol (a region graph
/// is bound).
fn rebind(launch: Launch, to_parent: &dyn Fn(BufId) -> BufId, region: Vec<NodeId>) -> DResult<Launch> {
    let args = launch
        .args
        .iter()
        .map(|a| match a {
            LaunchArg::Buffer(b) => Ok(LaunchArg::Buffer(to_parent(*b))),
            LaunchArg::Int(v) => Ok(LaunchArg::Int(*v)),
            LaunchArg::TensorMap => Ok(LaunchArg::TensorMap),
            LaunchArg::Dim(_) => Err(diag!(Internal, "a template's region kernel reads a symbol of its bound graph")),
        })
        .collect::<DResult<_>>()?;
    let outs = launch.outs.iter().map(|&b| to_parent(b)).collect();
    Ok(Launch { args, region, outs, ..launch })
}

/// Region kernel `k` of `p` (lowered from `g`, its stored values
/// `stored`) as a graph of its own: the nodes `k` computes, every stored
/// value it reads (a graph input or another kernel's output) an input of
/// that graph, in node order, with the buffers they are; the nodes keep
/// `g`'s labels and positions, so that a refusal points into the user's
/// source. `None` for a kernel with no node.
pub fn region_graph(
    g: &Graph,
    p: &Program,
    stored: &BTreeMap<NodeId, BufId>,
    k: &Kernel,
) -> Option<DResult<(Graph, Vec<BufId>)>> {
    let root = *k.nodes.first()?;
    let inside = ancestors(g, root, &|s| stored.contains_key(&s));
    subgraph(g, p, stored, root, &inside, &format!("{}_{}", g.name, k.name))
}

/// The stored values of `p` (lowered from `g`): graph inputs and kernel
/// outputs, by node, with their buffers.
pub fn stored_values(g: &Graph, p: &Program) -> BTreeMap<NodeId, BufId> {
    let mut stored: BTreeMap<NodeId, BufId> = BTreeMap::new();
    for (i, id) in g.inputs().into_iter().enumerate() {
        if let Some(b) = p.buffers.iter().position(|b| b.role == Role::Input(i)) {
            stored.insert(id, BufId(b as u32));
        }
    }
    for kk in &p.kernels {
        if let Some(&r) = kk.nodes.first() {
            stored.insert(r, kk.out);
        }
    }
    stored
}

/// `root` and its ancestors short of the nodes `stop` holds, as a mask.
fn ancestors(g: &Graph, root: NodeId, stop: &dyn Fn(NodeId) -> bool) -> Vec<bool> {
    let mut inside = vec![false; g.len()];
    let mut stack = vec![root];
    inside[root.index()] = true;
    while let Some(n) = stack.pop() {
        for &s in &g.node(n).src {
            if !inside[s.index()] && !stop(s) {
                inside[s.index()] = true;
                stack.push(s);
            }
        }
    }
    inside
}

/// The nodes `inside` as a graph named `name` whose output is `root`, every
/// stored value they read an input (in node order, with its buffer); the
/// nodes keep `g`'s labels and positions, so that a refusal points into
/// the user's source. `None` when they read a value that is not stored.
fn subgraph(
    g: &Graph,
    p: &Program,
    stored: &BTreeMap<NodeId, BufId>,
    root: NodeId,
    inside: &[bool],
    name: &str,
) -> Option<DResult<(Graph, Vec<BufId>)>> {
    let mut read = vec![false; g.len()];
    for id in g.ids().filter(|i| inside[i.index()]) {
        for &s in &g.node(id).src {
            read[s.index()] |= !inside[s.index()];
        }
    }
    let mut sub = Graph::new(name);
    let mut map: BTreeMap<NodeId, NodeId> = BTreeMap::new();
    let mut reads: Vec<BufId> = Vec::new();
    for id in g.ids() {
        let n = g.node(id);
        sub.cur_span = n.span;
        let new = if read[id.index()] {
            let b = *stored.get(&id)?;
            reads.push(b);
            sub.input(&p.buffers[b.0 as usize].name, g.dtype(id), g.shape(id))
        } else if inside[id.index()] {
            let src: Option<Vec<NodeId>> = n.src.iter().map(|s| map.get(s).copied()).collect();
            sub.push(n.op.clone(), src?, Some(g.dtype(id)), Some(g.shape(id)))
        } else {
            continue;
        };
        let labelled = new.and_then(|x| if inside[id.index()] { sub.set_label(x, &n.label).map(|_| x) } else { Ok(x) });
        match labelled {
            Ok(x) => map.insert(id, x),
            Err(d) => return Some(Err(d)),
        };
    }
    sub.outputs.push(crate::tiny::Output { name: "out".into(), node: *map.get(&root)? });
    Some(Ok((sub, reads)))
}

/// The attentions inside `g` (lowered to `p`), each fused into one launch
/// of the attention template: for two contractions `r1` before `r2` with
/// `r2` reading `r1`, the region of `r2`'s kernel grown back through every
/// value that depends on `r1` (the scores, the softmax's reductions and
/// weights, stored or not) down to the values `r1`'s operands read; when
/// that graph is an attention the template takes and no kernel outside it
/// reads a value inside, its launch replaces the kernels whose roots it
/// holds ([`FusedRegion`]). Refusals are not errors: those regions
/// stay as they are.
pub fn attention_regions(
    g: &Graph,
    p: &Program,
    stored: &BTreeMap<NodeId, BufId>,
    target: &Target,
    estimator: &dyn Estimator,
) -> Vec<FusedRegion> {
    let contractions: Vec<NodeId> = g.ids().filter(|&id| is_contraction(g, id)).collect();
    let consumers = g.consumers();
    let mut out: Vec<FusedRegion> = Vec::new();
    for (i, &r1) in contractions.iter().enumerate() {
        // The values that depend on r1.
        let mut after = vec![false; g.len()];
        after[r1.index()] = true;
        for id in g.ids().skip(r1.index() + 1) {
            after[id.index()] = g.node(id).src.iter().any(|s| after[s.index()]);
        }
        for &r2 in contractions[i + 1..].iter().filter(|r| after[r.index()]) {
            let Some(k2) =
                p.kernels.iter().find(|k| k.nodes.contains(&r2) || k.reduce.as_ref().is_some_and(|r| r.node == r2))
            else {
                continue;
            };
            let Some(&root) = k2.nodes.first() else { continue };
            let inside = ancestors(g, root, &|s| stored.contains_key(&s) && !after[s.index()]);
            let kernels: Vec<usize> = (0..p.kernels.len())
                .filter(|&k| p.kernels[k].nodes.first().is_some_and(|r| inside[r.index()]))
                .collect();
            // Nothing outside may read a value that depends on r1 (stored
            // or inlined, the fused kernel computes it only in registers);
            // the rest (movements of the operands, constants) reads only
            // values stored outside and may be recomputed there.
            let escapes = g.ids().any(|id| {
                inside[id.index()] && id != root && after[id.index()] && {
                    consumers[id.index()].iter().any(|c| !inside[c.index()])
                }
            });
            let taken = out.iter().any(|f| f.kernels.iter().any(|k| kernels.contains(k)));
            if escapes || taken || g.outputs.iter().any(|o| inside[o.node.index()] && o.node != root) {
                continue;
            }
            let fused = Fusion { root, inside: &inside, last: k2, kernels, pattern: GraphPattern::Attention };
            out.extend(fused.lower(g, p, stored, target, estimator));
        }
    }
    out
}

/// A contraction + epilogue inside a larger graph whose only reader is a
/// kernel the GEMM template can fuse into its epilogue (a 2×2 max pool,
/// `sm80::Implicit::pool`: `003`'s convolution → pool fusion done on the
/// output tile), as one launch: for each kernel `k2` reading the stored
/// result of a contraction's kernel `k1` that nothing else reads, the
/// region of `k2` grown back through `k1`'s; when the template takes that
/// graph whole as one launch, it replaces both. Refusals are not errors:
/// those regions stay as they are.
pub fn pooled_regions(
    g: &Graph,
    p: &Program,
    stored: &BTreeMap<NodeId, BufId>,
    target: &Target,
    estimator: &dyn Estimator,
) -> Vec<FusedRegion> {
    let consumers = g.consumers();
    let root_of = |k: &Kernel| k.nodes.first().copied();
    // The stored values each kernel's region reads, computed once.
    let read_by: Vec<Vec<NodeId>> = p
        .kernels
        .iter()
        .map(|k| {
            let Some(root) = root_of(k) else { return Vec::new() };
            let inside = ancestors(g, root, &|s| stored.contains_key(&s));
            let read = |s: &NodeId| !inside[s.index()] && consumers[s.index()].iter().any(|c| inside[c.index()]);
            stored.keys().copied().filter(read).collect()
        })
        .collect();
    let mut out: Vec<FusedRegion> = Vec::new();
    for (i1, k1) in p.kernels.iter().enumerate() {
        let Some(r1) = root_of(k1) else { continue };
        let has_contraction = k1.nodes.iter().any(|&n| is_contraction(g, n))
            || k1.reduce.as_ref().is_some_and(|r| is_contraction(g, r.node));
        if !has_contraction || g.outputs.iter().any(|o| o.node == r1) {
            continue;
        }
        // The one kernel that reads r1.
        let readers: Vec<usize> = (0..p.kernels.len()).filter(|&k| read_by[k].contains(&r1)).collect();
        let [i2] = readers[..] else { continue };
        let Some(r2) = root_of(&p.kernels[i2]) else { continue };
        if i2 <= i1 || p.rows.iter().any(|r| r.kernels.contains(&i2)) {
            continue;
        }
        let inside = ancestors(g, r2, &|s| stored.contains_key(&s) && s != r1);
        if consumers[r1.index()].iter().any(|c| !inside[c.index()]) {
            continue;
        }
        let last = &p.kernels[i2];
        let fused =
            Fusion { root: r2, inside: &inside, last, kernels: vec![i1, i2], pattern: GraphPattern::Contraction };
        out.extend(fused.lower(g, p, stored, target, estimator));
    }
    out
}

/// A contraction + epilogue inside a larger graph followed by an
/// activation the epilogue computes ([`super::lower::EPILOGUE_ACTIVATIONS`]),
/// whose steps the GPU's region formation stores apart (the decomposition
/// reads its input more than once), as one launch: for each kernel `k1`
/// of a contraction whose stored result `r1` is the input of an
/// activation the graph computes whole ([`recognise`]), the region of the
/// kernel computing the activation's result grown back through its stored
/// steps and `k1`'s region; when nothing outside reads a value inside but
/// that kernel's and
/// the template takes that graph whole as one launch, it replaces those
/// kernels. Refusals are not errors: those regions stay as they are.
pub fn activation_regions(
    g: &Graph,
    p: &Program,
    stored: &BTreeMap<NodeId, BufId>,
    target: &Target,
    estimator: &dyn Estimator,
) -> Vec<FusedRegion> {
    let consumers = g.consumers();
    let mut out: Vec<FusedRegion> = Vec::new();
    for k1 in &p.kernels {
        let Some(r1) = k1.nodes.first().copied() else { continue };
        let has_contraction = k1.nodes.iter().any(|&n| is_contraction(g, n))
            || k1.reduce.as_ref().is_some_and(|r| is_contraction(g, r.node));
        if !has_contraction || g.outputs.iter().any(|o| o.node == r1) {
            continue;
        }
        let Some(act) = recognise(g, &consumers, r1, &EPILOGUE_ACTIVATIONS) else { continue };
        // The kernel computing the result (its root may be a rounding or
        // a movement of it, which the epilogue chain takes).
        let Some(last) = p.kernels.iter().find(|k| k.nodes.contains(&act.root)) else { continue };
        let Some(root) = last.nodes.first().copied() else { continue };
        let step = |s: NodeId| s == r1 || act.nodes.contains(&s);
        let inside = ancestors(g, root, &|s| stored.contains_key(&s) && !step(s));
        let read_outside = |n: NodeId| consumers[n.index()].iter().any(|c| !inside[c.index()]);
        if g.ids().any(|n| inside[n.index()] && n != root && read_outside(n)) {
            continue;
        }
        let kernels =
            (0..p.kernels.len()).filter(|&k| p.kernels[k].nodes.first().is_some_and(|r| inside[r.index()])).collect();
        let fused = Fusion { root, inside: &inside, last, kernels, pattern: GraphPattern::Contraction };
        out.extend(fused.lower(g, p, stored, target, estimator));
    }
    out
}

/// Region kernels of a larger graph to fuse: the nodes `inside` (a mask
/// over the graph, the root `root`), which replace `kernels` and write
/// the output of `last`, the last of them.
struct Fusion<'a> {
    root: NodeId,
    inside: &'a [bool],
    last: &'a Kernel,
    kernels: Vec<usize>,
    pattern: GraphPattern,
}

impl Fusion<'_> {
    /// The nodes as a graph of their own ([`subgraph`]) lowered to one
    /// launch of a template of `pattern` and bound to `p`'s buffers; `None`
    /// where the graph has another pattern or no template takes it as one
    /// launch.
    fn lower(
        self,
        g: &Graph,
        p: &Program,
        stored: &BTreeMap<NodeId, BufId>,
        target: &Target,
        estimator: &dyn Estimator,
    ) -> Option<FusedRegion> {
        let name = format!("{}_{}", g.name, self.last.name);
        let (sub, reads) = subgraph(g, p, stored, self.root, self.inside, &name)?.ok()?;
        if pattern_of(&sub) != Some(self.pattern) {
            return None;
        }
        let prog = lower(&sub, target, estimator)?.ok()?;
        let [launch] = <[Launch; 1]>::try_from(prog.launches).ok()?;
        let to_parent = |b: BufId| reads.get(b.0 as usize).copied().unwrap_or(self.last.out);
        let region = g.ids().filter(|id| self.inside[id.index()]).collect();
        let launch = rebind(launch, &to_parent, region).ok()?;
        Some(FusedRegion { launch, kernels: self.kernels, name: self.last.name.clone(), graph: sub })
    }
}

/// The fused launches of `p`'s regions: its attentions
/// ([`attention_regions`]), then the contractions pooled on their tile
/// ([`pooled_regions`]) and those with an activation after them
/// ([`activation_regions`]) that share no kernel with those before.
pub fn fused_regions(
    g: &Graph,
    p: &Program,
    stored: &BTreeMap<NodeId, BufId>,
    target: &Target,
    estimator: &dyn Estimator,
) -> Vec<FusedRegion> {
    let mut fused = attention_regions(g, p, stored, target, estimator);
    let contractions = pooled_regions(g, p, stored, target, estimator);
    for f in contractions.into_iter().chain(activation_regions(g, p, stored, target, estimator)) {
        if !fused.iter().any(|x| x.kernels.iter().any(|k| f.kernels.contains(k))) {
            fused.push(f);
        }
    }
    fused
}

/// Regions of a larger graph fused into one launch of a template: an
/// attention ([`attention_regions`]) or a contraction with the pool
/// ([`pooled_regions`]) or the activation ([`activation_regions`]) after
/// it.
pub struct FusedRegion {
    /// The launch, bound to the program's buffers.
    pub launch: Launch,
    /// The indices in `p.kernels` of the region kernels it replaces,
    /// increasing.
    pub kernels: Vec<usize>,
    /// The name of the last kernel it replaces, whose output it writes.
    pub name: String,
    /// The fused regions as a graph of their own, what the template took.
    pub graph: Graph,
}

/// The regions of `g` (lowered as for the GPU's templates,
/// [`region_options`]) that have a template's pattern, each as a graph of
/// its own named by its kernel, as `target`'s lowering forms them: an
/// attention fused from several regions ([`attention_regions`], ranked by
/// `estimator`) as its attention graph in place of those regions, every
/// other region as [`region_graph`] makes it. What the `plan` dump ranks
/// for a graph no template takes whole.
///
/// Errors: those of the CPU back end's lowering and of [`region_graph`].
pub fn region_graphs(g: &Graph, target: &Target, estimator: &dyn Estimator) -> DResult<Vec<(String, Graph)>> {
    let p = crate::cpu::from_tiny::lower_with(g, &region_options())?;
    let stored = stored_values(g, &p);
    let mut fused = fused_regions(g, &p, &stored, target, estimator);
    let mut out = Vec::new();
    for (i, k) in p.kernels.iter().enumerate() {
        if let Some(f) = fused.iter().position(|f| f.kernels.contains(&i)) {
            if fused[f].kernels.last() == Some(&i) {
                let f = fused.remove(f);
                out.push((f.name, f.graph));
            }
            continue;
        }
        if let Some(r) = region_graph(g, &p, &stored, k) {
            let (sub, _) = r?;
            if pattern_of(&sub).is_some() {
                out.push((k.name.clone(), sub));
            }
        }
    }
    Ok(out)
}

/// The GEMM template ([`super::lower::build_with`]) as a program, with
/// its chosen plan's estimate.
pub(super) fn gemm(g: &Graph, target: &Target, estimator: &dyn Estimator) -> DResult<Lowered> {
    let gk = super::lower::build_with(g, target, estimator, &format!("{}_gemm", g.name))?;
    let estimate = gk.estimate;
    let program = gemm_program(g, gk).ok_or_else(|| {
        diag!(
            Unsupported,
            "the GEMM kernel's parameters do not bind to the program's buffers (one input as both operands, or a \
             split-K workspace)"
        )
    })?;
    Ok(Lowered { program, estimate })
}

/// The attention template ([`super::attention::build`]) with `algo` as a
/// program, with `estimator`'s time for its plan.
///
/// Errors: those of the build, and the estimator's when it cannot cost the
/// plan.
fn attention(g: &Graph, target: &Target, estimator: &dyn Estimator, algo: Algorithm) -> DResult<Lowered> {
    let ak = super::attention::build(g, target, algo, estimator, &format!("{}_attention", g.name))?;
    let problem = super::sm80::attention::problem(&ak.graph.attention);
    let at = g.node(ak.graph.scores).span;
    let estimate = estimator.estimate(&ak.plan, &problem, target).map_err(|d| d.or_at(at))?;
    Ok(Lowered { program: attention_program(g, ak)?, estimate })
}

/// The buffers of a one-kernel program of `g`: one per graph input, in
/// order (`in{i}`), then the output (`out0`).
pub(super) fn whole_graph_buffers(g: &Graph) -> Vec<Buffer> {
    let mut buffers = Vec::new();
    for (i, id) in g.inputs().into_iter().enumerate() {
        let t = g.ty(id);
        let label = match &g.node(id).op {
            crate::tiny::Op::Input { name } => name.clone(),
            _ => g.node(id).label.clone(),
        };
        buffers.push(Buffer {
            name: format!("in{i}"),
            label,
            dtype: t.dtype,
            shape: t.shape.clone(),
            role: Role::Input(i),
        });
    }
    if let Some(out) = g.outputs.first() {
        let t = g.ty(out.node);
        buffers.push(Buffer {
            name: "out0".into(),
            label: out.name.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
            role: Role::Output(0),
        });
    }
    buffers
}

/// The one-launch program of the attention graph `g` with its fused
/// kernel `ak` ([`super::attention::build`]).
///
/// Errors: `Internal` when a kernel parameter is left unbound.
fn attention_program(g: &Graph, ak: super::attention::AttentionKernel) -> DResult<GpuProgram> {
    use super::attention::Role as R;
    let buffers = whole_graph_buffers(g);
    let out = BufId(buffers.len() as u32 - 1);
    let tensor_biases: Vec<ParamId> = ak.params.biases.iter().flatten().copied().collect();
    let mut bind: Vec<(ParamId, LaunchArg)> = vec![(ak.params.o, LaunchArg::Buffer(out))];
    for &(role, i) in &ak.graph.inputs {
        let param = match role {
            R::Q => Some(ak.params.q),
            R::K => Some(ak.params.k),
            R::V => Some(ak.params.v),
            R::Bias(b) => tensor_biases.get(b).copied(),
        };
        if let Some(p) = param {
            bind.push((p, LaunchArg::Buffer(BufId(i as u32))));
        }
    }
    bind.sort_by_key(|b| b.0);
    if bind.iter().map(|b| b.0 .0 as usize).ne(0..ak.kernel.params.len()) {
        return Err(diag!(Internal, "the attention kernel's parameters do not bind one to one to the graph's buffers"));
    }
    let launch = Launch {
        kernel: ak.kernel,
        form: Form::Attention,
        args: bind.into_iter().map(|b| b.1).collect(),
        region: g.ids().collect(),
        outs: vec![out],
        plan: Some(ak.plan),
    };
    Ok(GpuProgram { name: g.name.clone(), symbols: Vec::new(), checks: Vec::new(), buffers, launches: vec![launch] })
}

/// The one-launch program of the GEMM graph `g` with its tensor-core
/// kernel `gk` ([`super::lower::build_with`]), when it needs no split-K.
fn gemm_program(g: &Graph, gk: super::lower::GpuKernel) -> Option<GpuProgram> {
    use super::lower::Operand;
    let ps = &gk.params;
    // Split-K's workspace and locks are not buffers of a program (plan
    // choice never splits K today: `lower::build` builds `split_k: 1`).
    if ps.workspace.is_some() || ps.locks.is_some() || g.outputs.len() != 1 {
        return None;
    }
    let [m, n, k] = gk.graph.sizes;
    let ldb = if gk.graph.gemm.b_layout == super::sm80::BLayout::KN { n } else { k };
    // A pool on the columns stores a quarter of each row (`Implicit::pool`).
    let pooled_n = gk.graph.gemm.implicit.as_ref().is_some_and(|im| im.pool == Some(super::sm80::Axis::N));
    let ldc = if pooled_n { n / 4 } else { n };
    let buffers = whole_graph_buffers(g);
    let role_buf: Vec<(Operand, BufId)> =
        gk.graph.inputs.iter().enumerate().map(|(i, (_, role))| (*role, BufId(i as u32))).collect();
    let c = BufId(buffers.len() as u32 - 1);
    let role = |r: Operand| role_buf.iter().find(|x| x.0 == r).map(|x| x.1);
    let mut bind: Vec<(ParamId, LaunchArg)> = vec![
        (ps.a, LaunchArg::Buffer(role(Operand::A)?)),
        (ps.b, LaunchArg::Buffer(role(Operand::B)?)),
        (ps.c, LaunchArg::Buffer(c)),
        (ps.m, LaunchArg::Int(m)),
        (ps.n, LaunchArg::Int(n)),
        (ps.k, LaunchArg::Int(k)),
        (ps.lda, LaunchArg::Int(k)),
        (ps.ldb, LaunchArg::Int(ldb)),
        (ps.ldc, LaunchArg::Int(ldc)),
    ];
    if let Some(p) = ps.bias {
        bind.push((p, LaunchArg::Buffer(role(Operand::Bias)?)));
    }
    if let Some(p) = ps.residual {
        bind.push((p, LaunchArg::Buffer(role(Operand::Residual)?)));
    }
    for p in ps.tensor_maps.into_iter().flatten() {
        bind.push((p, LaunchArg::TensorMap));
    }
    let mut args = Vec::new();
    for i in 0..gk.kernel.params.len() {
        args.push(bind.iter().find(|(p, _)| p.0 as usize == i)?.1);
    }
    let launch = Launch {
        kernel: gk.kernel,
        form: Form::Gemm,
        args,
        region: g.ids().collect(),
        outs: vec![c],
        plan: Some(gk.plan),
    };
    Some(GpuProgram { name: g.name.clone(), symbols: Vec::new(), checks: Vec::new(), buffers, launches: vec![launch] })
}
