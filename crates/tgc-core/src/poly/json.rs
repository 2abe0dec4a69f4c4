//! The JSON form of Poly-View (`000` §12.3), every polyhedral object in isl
//! notation, and its reader.
//!
//! ```json
//! {"poly_view": {
//!   "name": "gemm", "params": ["M", "K", "N"], "context": "[M, K, N] -> { : … }",
//!   "blocks": [{"name": "n8", "kind": "contraction_pattern",
//!               "domain": {"i0": ["0", "M - 1"], "i1": ["0", "N - 1"], "i2": ["0", "K - 1"]},
//!               "axis_kinds": ["iter", "iter", "reduce"],
//!               "domain_isl": "[M, K, N] -> { S_n8[i0, i1, i2] : … }",
//!               "write": "…", "accesses": [{"tensor": "n7", "map": "…"}], "fills": [],
//!               "attrs": {"pattern": null, "lhs": "n0", "lhs_idx": ["i0", "i2"], …}}],
//!   "edges": [{"from": "n7", "to": "n8", "deps": {"true": ["…"], "anti": [], "output": []}}]}}
//! ```
//!
//! Beyond §12.3: `domain` keeps §12.3's per-axis `[lower, upper]` box and
//! `domain_isl` the exact set; `write`, `fills` (`PAD` pieces), `non_scop`
//! (the reason a block has no isl objects), the `leaf` kind, and in `attrs`
//! the operand tensors and their composed maps (`lhs_map`, `rhs_map`). Maps
//! and fills are gisted against the block's domain, as in the text dump;
//! [`from_json`] intersects them with it again, so a round trip gives equal
//! isl objects.

use serde::{Deserialize, Serialize};

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::DResult;
use crate::index_book::{AxisKind, AxisVar};
use crate::sym::Dim;
use crate::tiny::NodeId;
use crate::DType;

use super::contraction::{Contraction, Operand, Window};
use super::from_index_book::{simplify_map, simplify_set};
use super::isl::{Ctx, IslResult};
use super::text::{set_on_domain, Gists};
use super::{Block, BlockKind, Body, Deps, Edge, Fill, PolyView, Read, Scop};

/// `{"poly_view": …}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Document {
    pub poly_view: ViewJson,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ViewJson {
    pub name: String,
    /// isl parameter names, in order.
    pub params: Vec<String>,
    /// The graph symbol of each parameter, where it differs from the name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub renamed: Vec<(String, String)>,
    pub context: String,
    pub blocks: Vec<BlockJson>,
    pub edges: Vec<EdgeJson>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlockJson {
    pub name: String,
    pub kind: String,
    /// The element type (`fp32`, …; beyond §12.3).
    pub dtype: String,
    /// `axis → [lower, upper]` (inclusive), in axis order.
    pub domain: serde_json::Map<String, serde_json::Value>,
    pub axis_kinds: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_isl: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<String>,
    pub accesses: Vec<AccessJson>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fills: Vec<FillJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub non_scop: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attrs: Option<AttrsJson>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AccessJson {
    pub tensor: String,
    pub map: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FillJson {
    pub set: String,
    pub value: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttrsJson {
    pub pattern: Option<String>,
    /// Output axes that index both operands (`contraction::PatternInfo`).
    #[serde(default)]
    pub batch_idx: Vec<String>,
    /// `{"at", "out", "reduce", "stride", "dilation", "grouped"}` per window.
    #[serde(default)]
    pub windows: Vec<serde_json::Value>,
    pub mul: String,
    pub lhs: String,
    pub rhs: String,
    pub lhs_idx: Vec<String>,
    pub rhs_idx: Vec<String>,
    pub out_idx: Vec<String>,
    pub reduce_idx: Vec<String>,
    pub affine_offsets: serde_json::Map<String, serde_json::Value>,
    pub lhs_map: String,
    pub rhs_map: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EdgeJson {
    pub from: String,
    pub to: String,
    /// `null` when an end is not in the SCoP.
    pub deps: Option<DepsJson>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DepsJson {
    #[serde(rename = "true")]
    pub flow: Vec<String>,
    pub anti: Vec<String>,
    pub output: Vec<String>,
}

/// The view as its §12.3 document.
pub fn to_document<'c>(view: &PolyView<'c>) -> IslResult<Document> {
    let name = |id: NodeId| view.block(id).map_or_else(|| format!("n{}", id.0), |b| b.name.clone());
    let mut gists = Gists::<'c>::default();
    let mut blocks = Vec::new();
    for b in &view.blocks {
        let domain = b
            .axes
            .iter()
            .map(|a| (a.name.clone(), serde_json::json!(["0", (&a.size - &Dim::int(1)).to_string()])))
            .collect();
        let mut j = BlockJson {
            name: b.name.clone(),
            kind: b.kind.name().to_string(),
            dtype: b.dtype.json_name().to_string(),
            domain,
            axis_kinds: b.axes.iter().map(|a| a.kind.name().to_string()).collect(),
            domain_isl: None,
            write: None,
            accesses: Vec::new(),
            fills: Vec::new(),
            non_scop: None,
            attrs: None,
        };
        match &b.body {
            Body::NonScop(why) => j.non_scop = Some(why.clone()),
            Body::Scop(s) => {
                j.domain_isl = Some(s.domain.to_isl()?);
                j.write = Some(gists.on_domain(&s.write, &s.domain)?);
                for r in &s.reads {
                    j.accesses.push(AccessJson { tensor: name(r.src), map: gists.on_domain(&r.map, &s.domain)? });
                }
                for f in &s.fills {
                    j.fills.push(FillJson { set: set_on_domain(&f.set, &s.domain)?, value: f.value });
                }
                if let Some(c) = &b.contraction {
                    let idx = |o: &Operand<'_>| o.idx.iter().map(|e| e.to_string()).collect();
                    j.attrs = Some(AttrsJson {
                        pattern: c.pattern.as_ref().map(|p| p.kind.name().to_string()),
                        batch_idx: c.pattern.as_ref().map(|p| p.batch_idx.clone()).unwrap_or_default(),
                        windows: c.pattern.iter().flat_map(|p| &p.windows).map(window_json).collect(),
                        mul: name(c.mul),
                        lhs: name(c.lhs.src),
                        rhs: name(c.rhs.src),
                        lhs_idx: idx(&c.lhs),
                        rhs_idx: idx(&c.rhs),
                        out_idx: c.out_idx.clone(),
                        reduce_idx: c.reduce_idx.clone(),
                        affine_offsets: c.affine_offsets.iter().map(|(k, v)| (k.clone(), v.clone().into())).collect(),
                        lhs_map: gists.on_domain(&c.lhs.map, &s.domain)?,
                        rhs_map: gists.on_domain(&c.rhs.map, &s.domain)?,
                    });
                }
            }
        }
        blocks.push(j);
    }
    let mut edges = Vec::new();
    for e in &view.edges {
        let deps = match &e.deps {
            None => None,
            Some(d) => {
                let all = |ms: &[super::Map<'_>]| ms.iter().map(|m| m.to_isl()).collect::<IslResult<Vec<_>>>();
                Some(DepsJson { flow: all(&d.flow)?, anti: all(&d.anti)?, output: all(&d.output)? })
            }
        };
        edges.push(EdgeJson { from: name(e.from), to: name(e.to), deps });
    }
    Ok(Document {
        poly_view: ViewJson {
            name: view.name.clone(),
            params: view.params.iter().map(|(_, n)| n.clone()).collect(),
            renamed: view.params.iter().filter(|(s, n)| s != n).map(|(s, n)| (n.clone(), s.clone())).collect(),
            context: view.context.to_isl()?,
            blocks,
            edges,
        },
    })
}

/// The view as pretty JSON.
pub fn to_json(view: &PolyView<'_>) -> IslResult<String> {
    let doc = to_document(view)?;
    Ok(serde_json::to_string_pretty(&doc).unwrap_or_default())
}

/// Reads a document written by [`to_json`] back into isl objects of `ctx`.
///
/// Errors: `Unsupported` for malformed JSON, an unknown kind or tensor name,
/// or isl text isl rejects.
pub fn from_json<'c>(ctx: &'c Ctx, text: &str) -> DResult<PolyView<'c>> {
    let doc: Document = serde_json::from_str(text).map_err(|e| diag!(Unsupported, "Poly-View JSON: {e}"))?;
    let v = doc.poly_view;
    let bad = |m: String| diag!(Unsupported, "Poly-View JSON: {m}");
    let isl = |e: super::IslError| bad(e.to_string());
    let id_of = |name: &str| {
        v.blocks
            .iter()
            .position(|b| b.name == name)
            .map(|k| NodeId(k as u32))
            .ok_or_else(|| bad(format!("no block `{name}`")))
    };
    let mut blocks = Vec::new();
    for (k, b) in v.blocks.iter().enumerate() {
        let kind = BlockKind::from_name(&b.kind).ok_or_else(|| bad(format!("unknown kind `{}`", b.kind)))?;
        let axes = axes(b).map_err(bad)?;
        let body = match (&b.non_scop, &b.domain_isl, &b.write) {
            (Some(why), _, _) => Body::NonScop(why.clone()),
            (None, Some(d), Some(w)) => {
                let domain = ctx.set(d).map_err(isl)?;
                let on = |t: &str| simplify_map(&ctx.map(t).and_then(|m| m.intersect_domain(&domain)).map_err(isl)?);
                let write = on(w)?;
                let reads = b
                    .accesses
                    .iter()
                    .map(|a| Ok(Read { src: id_of(&a.tensor)?, map: on(&a.map)? }))
                    .collect::<DResult<_>>()?;
                let fills = b
                    .fills
                    .iter()
                    .map(|f| {
                        let set = simplify_set(&ctx.set(&f.set).and_then(|s| s.intersect(&domain)).map_err(isl)?)?;
                        Ok(Fill { set, value: f.value })
                    })
                    .collect::<DResult<_>>()?;
                Body::Scop(Scop { domain, write, reads, fills })
            }
            _ => return Err(bad(format!("block `{}` has neither isl objects nor a non_scop reason", b.name))),
        };
        let contraction = match (&b.attrs, body_domain(&body)) {
            (Some(a), Some(domain)) => {
                let on = |t: &str| simplify_map(&ctx.map(t).and_then(|m| m.intersect_domain(domain)).map_err(isl)?);
                let idx = |v: &[String]| v.iter().map(|s| AffExpr::parse(s).map_err(&bad)).collect::<DResult<Vec<_>>>();
                let mut c = Contraction {
                    mul: id_of(&a.mul)?,
                    lhs: Operand { src: id_of(&a.lhs)?, idx: idx(&a.lhs_idx)?, map: on(&a.lhs_map)? },
                    rhs: Operand { src: id_of(&a.rhs)?, idx: idx(&a.rhs_idx)?, map: on(&a.rhs_map)? },
                    out_idx: a.out_idx.clone(),
                    reduce_idx: a.reduce_idx.clone(),
                    affine_offsets: a
                        .affine_offsets
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                        .collect(),
                    pattern: None,
                };
                // Derived from the indices: recomputed, and checked against
                // the document.
                c.pattern = super::contraction::pattern(&c);
                if c.pattern.as_ref().map(|p| p.kind.name()) != a.pattern.as_deref() {
                    return Err(bad(format!(
                        "block `{}`: pattern {:?} does not follow its indices",
                        b.name, a.pattern
                    )));
                }
                Some(c)
            }
            _ => None,
        };
        let dtype =
            DType::parse(&b.dtype).ok_or_else(|| bad(format!("block `{}`: unknown dtype `{}`", b.name, b.dtype)))?;
        blocks.push(Block { node: NodeId(k as u32), name: b.name.clone(), kind, dtype, axes, body, contraction });
    }
    let mut edges = Vec::new();
    for e in &v.edges {
        let deps = match &e.deps {
            None => None,
            Some(d) => {
                let all = |ms: &[String]| ms.iter().map(|m| ctx.map(m).map_err(isl)).collect::<DResult<Vec<_>>>();
                Some(Deps { flow: all(&d.flow)?, anti: all(&d.anti)?, output: all(&d.output)? })
            }
        };
        edges.push(Edge { from: id_of(&e.from)?, to: id_of(&e.to)?, deps });
    }
    let renamed = |n: &String| v.renamed.iter().find(|(i, _)| i == n).map_or_else(|| n.clone(), |(_, s)| s.clone());
    Ok(PolyView {
        name: v.name.clone(),
        params: v.params.iter().map(|n| (renamed(n), n.clone())).collect(),
        context: ctx.set(&v.context).map_err(isl)?,
        blocks,
        edges,
    })
}

fn body_domain<'a, 'c>(b: &'a Body<'c>) -> Option<&'a super::Set<'c>> {
    match b {
        Body::Scop(s) => Some(&s.domain),
        Body::NonScop(_) => None,
    }
}

/// The axes of a block from its box and kinds.
fn axes(b: &BlockJson) -> Result<Vec<AxisVar>, String> {
    if b.axis_kinds.len() != b.domain.len() {
        return Err(format!("block `{}`: {} axis kinds for {} axes", b.name, b.axis_kinds.len(), b.domain.len()));
    }
    let mut out = Vec::new();
    for (k, ((name, bounds), kind)) in b.domain.iter().zip(&b.axis_kinds).enumerate() {
        if name != &format!("i{k}") {
            return Err(format!("block `{}`: axis {k} is `{name}`, not i{k}", b.name));
        }
        let upper = bounds.get(1).and_then(|u| u.as_str()).ok_or_else(|| format!("axis {name}: no upper bound"))?;
        let size = &Dim::parse(upper)? + &Dim::int(1);
        let kind = match kind.as_str() {
            "iter" => AxisKind::Iter,
            "reduce" => AxisKind::Reduce,
            "broadcast" => AxisKind::Broadcast,
            other => return Err(format!("axis {name}: unknown kind `{other}`")),
        };
        out.push(AxisVar::new(k as u32, size, kind));
    }
    Ok(out)
}

fn window_json(w: &Window) -> serde_json::Value {
    serde_json::json!({
        "at": w.at, "out": format!("i{}", w.out), "reduce": format!("i{}", w.reduce),
        "stride": w.stride, "dilation": w.dilation, "grouped": w.grouped,
    })
}
