//! Property test: random graphs of movement ops (`RESHAPE`, `PERMUTE`,
//! `EXPAND`, `PAD` with zero and non-zero values, `SHRINK` with steps,
//! `FLIP`, sliding-window and floor-division `VIEW`s, the frontend's `tile` and
//! `reflect`/`edge` `pad` (a `concat` of border pieces), and `GATHER` at
//! generated indices in and out of range) feeding a binary op or
//! `CMPLT` + `WHERE`, an optional `REDUCE` (SUM, MAX, MIN over random axes)
//! and an optional movement tail, drawn by `tgc_core::fuzz::gen` (the
//! structure-aware fuzz target's generator). For every graph four evaluators
//! must agree bit for bit (the generated values keep every result exact in
//! f32): the CPU backend (generated C compiled with the system compiler,
//! [`BATCH`] cases to one library through `fuzz::run_cpu`), the reference
//! interpreter, the SIMT template run in the GPU emulator, and the naive
//! evaluator of `naive.rs`.
//!
//! The naive evaluator is independent of what it checks: it reads only the
//! graph's nodes and maps each output index back through each op by the
//! op's definition (`tiny/op.rs`), without `interp.rs`, the IndexBook or
//! `AffExpr::eval`. The generator predicts every node's shape from the op
//! definitions too, so it also checks the shape rules of `tiny::infer`.
//!
//! Cases are drawn from a fixed seed, so every run checks the same graphs.
//! `TGC_PROP_SEED` (decimal or `0x…`) picks another seed, `TGC_PROP_CASES`
//! another count; a failure prints its seed and case index, and
//! `TGC_PROP_SEED=<seed> TGC_PROP_CASE=<index> cargo test -p tgc-core --test
//! movement_prop` replays that one case (each case depends only on the pair).

mod naive;

use std::collections::BTreeMap;
use std::path::PathBuf;

use tgc_core::affine::{AffAtom, AffExpr};
use tgc_core::fuzz::{self, gen};
use tgc_core::sym::Dim;
use tgc_core::tiny::text::dump;
use tgc_core::tiny::{Graph, Op, Output};
use tgc_core::DType;

const DEFAULT_SEED: u64 = 0x7467_6370_726f_7030;
const DEFAULT_CASES: u64 = 500;
/// Cases compiled into one C library: one compiler run per batch.
const BATCH: usize = 30;
/// How many failing cases are printed in full.
const SHOWN_FAILURES: usize = 3;
/// What a run of at least [`COVERAGE_CASES`] cases must have exercised (see
/// [`tally`]), so that the generator cannot quietly stop making something.
const MUST_COVER: &[&str] = &[
    "i32",
    "f32",
    "RESHAPE",
    "PERMUTE",
    "EXPAND",
    "PAD",
    "PAD value≠0",
    "SHRINK",
    "SHRINK step>1",
    "FLIP",
    "VIEW window",
    "VIEW floordiv",
    "VIEW general",
    "tile",
    "pad reflect",
    "pad edge",
    "GATHER",
    "CONST",
    "ADD",
    "SUB",
    "MUL",
    "MAX",
    "MIN",
    "CMPLT",
    "WHERE",
    "REDUCE SUM",
    "REDUCE MAX",
    "REDUCE MIN",
    "SCAN",
    "two outputs",
    "fan-out",
];
const COVERAGE_CASES: usize = 100;

#[test]
fn cpu_backend_interpreter_and_naive_evaluation_agree_on_random_movement_graphs() {
    let (seed, cases) = gen::seed_and_cases(DEFAULT_SEED, DEFAULT_CASES);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("movement_prop-{}", std::process::id()));
    let mut failed = Vec::new();
    let mut fail = |i: u64, report: String| {
        if failed.len() < SHOWN_FAILURES {
            eprintln!("---- seed {seed:#x}, case {i} ----\n{report}");
        }
        failed.push(i);
    };
    let mut counts = BTreeMap::new();
    for batch in cases.chunks(BATCH) {
        let mut checked = Vec::new();
        for &i in batch {
            match Checked::new(seed, i, &mut counts) {
                Ok(c) => checked.push(c),
                Err(report) => fail(i, report),
            }
        }
        let cases: Vec<gen::Case> = checked.iter().map(|c| c.case.clone()).collect();
        for (c, cpu) in checked.iter().zip(fuzz::run_cpu(&cases, &dir)) {
            if let Err(report) = c.check(&cpu) {
                fail(c.index, report);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("{} cases (seed {seed:#x}) exercised {counts:?}", cases.len());
    assert!(
        failed.is_empty(),
        "{} of {} cases failed (seed {seed:#x}): {failed:?}; the first {} are printed above. Replay one with \
         TGC_PROP_SEED={seed:#x} TGC_PROP_CASE={} cargo test -p tgc-core --test movement_prop",
        failed.len(),
        cases.len(),
        failed.len().min(SHOWN_FAILURES),
        failed[0]
    );
    if cases.len() >= COVERAGE_CASES {
        let missing: Vec<&str> = MUST_COVER.iter().copied().filter(|k| !counts.contains_key(*k)).collect();
        assert!(missing.is_empty(), "{} cases never exercised {missing:?}", cases.len());
    }
}

/// Forty links `reshape(permute(reshape(t, [2, 3]), [1, 0]), [6])`: each
/// doubles the composed index (a transpose of a 2×3 array is no involution,
/// and `floor`/`mod` terms nest), so the chain cannot be read through as one
/// access. Region formation stores it part way (`grouping::MAX_FOLDED_ATOMS`)
/// and all four evaluators agree; before, the CPU backend and the SIMT
/// lowering failed with `ResourceExceeded`.
#[test]
fn movement_chains_that_do_not_fold_are_stored_part_way() {
    let mut g = Graph::new("links");
    let six = |v: &[i64]| v.iter().map(|&d| Dim::int(d)).collect::<Vec<_>>();
    let x = g.input("x", DType::F32, &six(&[6])).unwrap();
    let mut t = x;
    for _ in 0..40 {
        let r = g.reshape(t, &six(&[2, 3])).unwrap();
        let p = g.permute(r, &[1, 0]).unwrap();
        t = g.reshape(p, &six(&[6])).unwrap();
    }
    g.outputs.push(Output { name: "y".into(), node: t });
    let book = tgc_core::index_book::build(&g).unwrap();
    let kernels = tgc_core::region::form(&g, &book).unwrap().regions.len();
    assert!((2..40).contains(&kernels), "{kernels} kernels: stored part way, not at every link");
    let case = gen::Case { graph: g, dtype: DType::F32, inputs: vec![(0..6).map(f64::from).collect()], bound: None };
    let checked = Checked::of(0, case.clone()).unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("movement_links-{}", std::process::id()));
    let cpu = fuzz::run_cpu(&[case], &dir).pop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    checked.check(&cpu).unwrap();
}

/// Whether `e` uses the index variable `i<j>`.
fn mentions(e: &AffExpr, j: u32) -> bool {
    e.terms().any(|(a, _)| match a {
        AffAtom::Var(k) => *k == j,
        AffAtom::FloorDiv(inner, _) => mentions(inner, j),
    })
}

/// A generated case with its naive, interpreted and emulated results.
struct Checked {
    index: u64,
    case: gen::Case,
    want: Vec<naive::Value>,
    interp: Result<Vec<Vec<f64>>, String>,
    emulated: Result<Vec<Vec<f64>>, String>,
}

impl Checked {
    /// Generates case `index`, tallies it, and evaluates it ([`Checked::of`]).
    ///
    /// Errors: a report when generation or the naive evaluation fails.
    fn new(seed: u64, index: u64, counts: &mut BTreeMap<&'static str, usize>) -> Result<Checked, String> {
        let case = gen::case(seed, index)?;
        tally(&case.graph, case.dtype, counts);
        Checked::of(index, case)
    }

    /// Evaluates `case` naively, on the interpreter and on the SIMT emulator.
    ///
    /// Errors: a report when the naive evaluation fails.
    fn of(index: u64, case: gen::Case) -> Result<Checked, String> {
        let g = &case.graph;
        let want = naive::evaluate(g, &case.inputs).map_err(|e| with_graph(g, format!("naive evaluator: {e}")))?;
        let interp = fuzz::interpret(&case);
        let emulated = fuzz::emulate(&case);
        Ok(Checked { index, case, want, interp, emulated })
    }

    /// Compares the interpreter's, the SIMT emulator's and the CPU backend's
    /// outputs with the naive evaluation.
    ///
    /// Errors: a report with every evaluator that fails or differs (so one
    /// sees whether the backends agree with each other), and the Tiny IR.
    fn check(&self, cpu: &Result<Vec<Vec<f64>>, String>) -> Result<(), String> {
        let g = &self.case.graph;
        let mut errors = Vec::new();
        for (who, outs) in [("interpreter", &self.interp), ("SIMT emulator", &self.emulated), ("CPU backend", cpu)] {
            match outs {
                Err(e) => errors.push(e.clone()),
                Ok(outs) => {
                    for ((o, got), want) in g.outputs.iter().zip(outs).zip(&self.want) {
                        if let Err(e) = compare(got, want) {
                            errors.push(format!("{who}, output `{}`: {e}", o.name));
                        }
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(with_graph(g, errors.join("\n")))
        }
    }
}

fn with_graph(g: &Graph, what: String) -> String {
    format!("{what}\n{}", dump(g))
}

/// Counts what `g` exercises into `counts`: its dtype and whether it has two
/// outputs once per case, each node's op name and the argument features of
/// [`MUST_COVER`] once per node.
fn tally(g: &Graph, dtype: DType, counts: &mut BTreeMap<&'static str, usize>) {
    let mut seen = vec![if dtype == DType::I32 { "i32" } else { "f32" }];
    if g.outputs.len() > 1 {
        seen.push("two outputs");
    }
    let readers = g.consumers();
    if g.ids().any(|id| readers[id.index()].len() > 1 && !matches!(g.node(id).op, Op::Input { .. })) {
        seen.push("fan-out");
    }
    for n in g.nodes() {
        seen.push(n.op.name());
        match &n.op {
            Op::Pad { value, .. } if *value != 0.0 => seen.push("PAD value≠0"),
            Op::Shrink { step, .. } if step.iter().any(|s| !s.is_one()) => seen.push("SHRINK step>1"),
            Op::View { map } => {
                let floordiv = map.iter().any(|e| e.terms().any(|(a, _)| matches!(a, AffAtom::FloorDiv(..))));
                seen.push(if floordiv { "VIEW floordiv" } else { "VIEW window" });
                // An output axis read by no input axis or by several.
                let uses = |j: u32| map.iter().filter(|e| mentions(e, j)).count();
                if (0..n.ty.shape.len() as u32).any(|j| uses(j) != 1) {
                    seen.push("VIEW general");
                }
            }
            // `tile` / `repeat_interleave`: a RESHAPE merging an EXPANDed
            // axis into its neighbour.
            Op::Reshape
                if n.src.first().is_some_and(|&s| {
                    matches!(g.node(s).op, Op::Expand) && g.node(s).ty.shape.len() == n.ty.shape.len() + 1
                }) =>
            {
                seen.push("tile")
            }
            // `concat` (and so `pad` in `reflect`/`edge` mode) selects each
            // piece, PADded into place, with WHERE: a FLIPped border piece
            // is `reflect`, an EXPANDed one `edge`.
            Op::Where => {
                let piece = g.node(n.src[1]);
                let border = |op: fn(&Op) -> bool| matches!(piece.op, Op::Pad { .. }) && op(&g.node(piece.src[0]).op);
                if border(|o| matches!(o, Op::Flip { .. })) {
                    seen.push("pad reflect");
                } else if border(|o| matches!(o, Op::Expand)) {
                    seen.push("pad edge");
                }
            }
            Op::Scan { .. } => seen.push("SCAN"),
            Op::Reduce { op, .. } => seen.push(match op.name() {
                "SUM" => "REDUCE SUM",
                "MAX" => "REDUCE MAX",
                _ => "REDUCE MIN",
            }),
            _ => {}
        }
    }
    for k in seen {
        *counts.entry(k).or_insert(0) += 1;
    }
}

/// Exact equality: every generated value is exact in f32 (see
/// `tgc_core::fuzz::gen`), so every evaluator must agree bit for bit.
fn compare(got: &[f64], want: &naive::Value) -> Result<(), String> {
    if got.len() != want.data.len() {
        return Err(format!("{} elements, the naive evaluator gives shape {:?}", got.len(), want.shape));
    }
    let bad: Vec<usize> = (0..got.len()).filter(|&l| got[l] != want.data[l]).collect();
    match bad.first() {
        None => Ok(()),
        Some(&l) => Err(format!(
            "{} of {} elements differ; first at {:?}: got {}, naive evaluation {}",
            bad.len(),
            got.len(),
            naive::unravel(l, &want.shape),
            got[l],
            want.data[l]
        )),
    }
}
