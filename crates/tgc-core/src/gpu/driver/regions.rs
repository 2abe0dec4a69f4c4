//! The regions of a larger graph on the templates: each region kernel of
//! the CPU back end's lowering (formed as [`region_options`] says) as a
//! graph of its own ([`region_graph`], its stored inputs the graph's
//! inputs), lowered by the driver's ranking ([`super::templates::lower`]) and bound
//! back to the program's buffers; and the regions fused across kernels
//! into one template launch ([`fused_regions`]: an attention, a
//! contraction with the 2×2 pool after it).

use std::collections::BTreeMap;

use crate::cpu::loop_ir::{BufId, Buffer, Kernel, Program, Role};
use crate::diag;
use crate::diag::DResult;
use crate::frontend::ops::recognise::recognise;
use crate::gpu::mma::recognise::EPILOGUE_ACTIVATIONS;
use crate::index_book::contraction::is_contraction;
use crate::plan::cost::Estimator;
use crate::plan::Target;
use crate::tiny::{Graph, NodeId};

use crate::gpu::program::{Launch, LaunchArg};
use crate::gpu::template::{pattern_of, GraphPattern};

use super::templates::lower;

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
/// activation the epilogue computes ([`crate::gpu::mma::recognise::EPILOGUE_ACTIVATIONS`]),
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
