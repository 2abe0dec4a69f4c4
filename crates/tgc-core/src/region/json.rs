//! The JSON form of Region Buffer SSA (`000` §12.4), written beside the C
//! source by `tgc compile` as `region.json`.
//!
//! ```json
//! {"graph": "gemm", "former": "grouping + poly core",
//!  "regions": [{"region": {
//!    "name": "r0",
//!    "inputs": [{"name": "A", "dtype": "fp16",
//!                "memref": {"shape": ["M", "K"], "strides": ["K", 1], "alignment": 2, "noalias": true}}],
//!    "outputs": [{"name": "C", "dtype": "fp16", "dest": "output 0",
//!                 "memref": {…}, "materialize": "gmem"}],
//!    "body": [{"let": "acc", "op": {"id": "acc", "uop": "REDUCE", "src": ["p"], "arg": {…}},
//!              "materialize": "deferred", "how": "accumulate"},
//!             {"yield": ["C -> C"]}],
//!    "local_edges": [{"from": "n11", "to": "y", "buffer": "reg", "bytes": 16}]}}],
//!  "stops": [{"producer": "n9", "consumer": "n12", "reason": "…"}]}
//! ```
//!
//! Beyond §12.4: `dtype` on memrefs (§12.4 leaves the element type to the
//! Tiny op), `dest` (`"output K"` or `"temp"`), `how` per let
//! (`inline`, `accumulate`, `compute_at`), the region's `local_edges`
//! (§4.1 step 6; `buffer` is `reg` or `smem_ring` with `depth`), and the
//! fusions region formation rejected, with their reasons as the `region`
//! dump prints them. `op` is the let's node in Tiny IR's node format
//! ([`crate::tiny::json`]). Names are node labels, except that an output's
//! name is the graph output's. Sizes are integers or, when symbolic,
//! strings in [`Dim::parse`](crate::sym::Dim::parse) syntax.
//!
//! This form is written, not read: the CLI and tests consume it; nothing in
//! tgc parses it back.

use serde_json::{json, Value};

use crate::sym::Dim;
use crate::tiny::{json::node_value, Graph, NodeId};

use super::{Dest, EdgeBuffer, Former, How, Materialize, MemRef, Regions};

fn dim(d: &Dim) -> Value {
    match d.as_int() {
        Some(v) => Value::from(v),
        None => Value::from(d.to_string()),
    }
}

fn memref(m: &MemRef) -> Value {
    json!({
        "shape": m.shape.iter().map(dim).collect::<Vec<_>>(),
        "strides": m.strides.iter().map(dim).collect::<Vec<_>>(),
        "alignment": m.alignment,
        "noalias": m.noalias,
    })
}

fn materialize(m: Materialize) -> &'static str {
    match m {
        Materialize::Deferred => "deferred",
        Materialize::Gmem => "gmem",
    }
}

/// Renders `rs` (the regions of `g`) as pretty-printed JSON.
pub fn to_json(g: &Graph, rs: &Regions) -> String {
    let label = |v: NodeId| g.node(v).label.clone();
    let dtype = |v: NodeId| g.dtype(v).json_name();
    let regions: Vec<Value> = rs
        .regions
        .iter()
        .map(|r| {
            let inputs: Vec<Value> = r
                .inputs
                .iter()
                .map(|i| json!({"name": label(i.node), "dtype": dtype(i.node), "memref": memref(&i.memref)}))
                .collect();
            let out_name = |node: NodeId, dest: Dest| match dest {
                Dest::GraphOutput(k) => g.outputs[k].name.clone(),
                Dest::Temp => label(node),
            };
            let outputs: Vec<Value> = r
                .outputs
                .iter()
                .map(|o| {
                    let dest = match o.dest {
                        Dest::GraphOutput(k) => format!("output {k}"),
                        Dest::Temp => "temp".to_string(),
                    };
                    json!({
                        "name": out_name(o.node, o.dest),
                        "dtype": dtype(o.node),
                        "dest": dest,
                        "memref": memref(&o.memref),
                        "materialize": materialize(o.materialize),
                    })
                })
                .collect();
            let mut body: Vec<Value> = r
                .body
                .iter()
                .map(|l| {
                    let how = match l.how {
                        How::Inline => "inline",
                        How::Accumulate => "accumulate",
                        How::ComputeAt => "compute_at",
                        How::Scan => "scan",
                    };
                    json!({
                        "let": label(l.node),
                        "op": node_value(g, l.node),
                        "materialize": materialize(l.materialize),
                        "how": how,
                    })
                })
                .collect();
            let yields: Vec<String> =
                r.outputs.iter().map(|o| format!("{} -> {}", label(o.node), out_name(o.node, o.dest))).collect();
            body.push(json!({ "yield": yields }));
            let edges: Vec<Value> = r
                .local_edges
                .iter()
                .map(|e| {
                    let mut v = json!({"from": label(e.producer), "to": label(e.consumer)});
                    match e.buffer {
                        EdgeBuffer::Reg => v["buffer"] = json!("reg"),
                        EdgeBuffer::SmemRing { depth } => {
                            v["buffer"] = json!("smem_ring");
                            v["depth"] = json!(depth);
                        }
                    }
                    v["bytes"] = e.bytes.map_or(Value::Null, Value::from);
                    v
                })
                .collect();
            json!({"region": {
                "name": r.name,
                "inputs": inputs,
                "outputs": outputs,
                "body": body,
                "local_edges": edges,
            }})
        })
        .collect();
    let stops: Vec<Value> = rs
        .stops
        .iter()
        .map(|s| {
            json!({
                "producer": label(s.producer),
                "consumer": s.consumer.map(label),
                "reason": s.reason.to_string(),
            })
        })
        .collect();
    let former = match rs.former {
        Former::Grouping => "grouping",
        Former::PolyCore => "grouping + poly core",
    };
    let doc = json!({"graph": rs.graph, "former": former, "regions": regions, "stops": stops});
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_graphs::gemm_bias_relu;
    use crate::DType;

    /// GEMM + bias + ReLU: one region, §12.4's keys, the accumulator and
    /// the yield to the graph output.
    #[test]
    fn gemm_epilogue_region_in_12_4_form() {
        let g = gemm_bias_relu(DType::F16, "M", "N", "K");
        let book = crate::index_book::build(&g).unwrap();
        let rs = super::super::form(&g, &book).unwrap();
        let v: Value = serde_json::from_str(&to_json(&g, &rs)).unwrap();
        let regions = v["regions"].as_array().unwrap();
        assert_eq!(regions.len(), 1, "{v:#}");
        let r = &regions[0]["region"];
        assert_eq!(r["name"], "r0");
        let ins: Vec<&str> = r["inputs"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
        assert_eq!(ins.len(), 3, "{ins:?}");
        let a = &r["inputs"][0]["memref"];
        assert_eq!(a["shape"], json!(["M", "K"]));
        assert_eq!(a["strides"], json!(["K", 1]));
        assert_eq!((a["alignment"].as_u64(), a["noalias"].as_bool()), (Some(2), Some(true)));
        let out = &r["outputs"][0];
        assert_eq!((out["materialize"].as_str(), out["dest"].as_str()), (Some("gmem"), Some("output 0")));
        let body = r["body"].as_array().unwrap();
        let acc: Vec<&Value> = body.iter().filter(|l| l["how"] == "accumulate").collect();
        assert_eq!(acc.len(), 1);
        assert_eq!(acc[0]["op"]["uop"], "REDUCE");
        assert_eq!(acc[0]["materialize"], "deferred");
        let last = body.last().unwrap();
        let root = g.node(g.outputs[0].node).label.clone();
        assert_eq!(last["yield"], json!([format!("{root} -> {}", g.outputs[0].name)]));
        assert!(body[..body.len() - 1].iter().all(|l| l["let"].is_string() && l["op"]["id"] == l["let"]));
    }
}
