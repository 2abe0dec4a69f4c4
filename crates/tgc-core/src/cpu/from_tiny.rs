//! Tiny IR → CPU loop-nest IR: buffers, one kernel per root of kernel
//! formation, scalar expressions whose subscripts and guards come from the
//! IndexBook by composition ([`index_book::chase`], [`index_book::compose`]),
//! and the run-time checks on the sizes.

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::DResult;
use crate::index_book::{self, simplify::is_nonneg, Constr, IndexBook};
use crate::sym::Dim;
use crate::tiny::{Constraint, Graph, NodeId, Op, Rel};
use crate::DType;

use super::loop_ir::{aff_divisors, dim_divisors, BufId, Buffer, Expr, Kernel, Program, Reduction, Role, Scan};
use super::tile::{strip_mine, TilePlan};
use super::{lanes, packed, rows};
use crate::region::{self, Dest, Region, Regions};

/// Lowers a graph to loop nests: forms its regions ([`region::form`]) and
/// lowers them ([`lower_regions`]).
///
/// Errors: the first violation when the graph or its IndexBook fails its
/// verifier (`Internal`, or the graph's own error); `ExcessivePiecewise` when
/// a chain of `PAD`s needs more than [`index_book::MAX_PIECES`] guards.
pub fn lower(g: &Graph) -> DResult<Program> {
    lower_with(g, &Options::default())
}

/// How the CPU path lowers a graph (the default is [`lower`]'s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Whether region formation may fuse across stored values with Poly
    /// Core (feature `poly`, [`region::form_with`]); `false` keeps the
    /// grouping's kernels (e.g. Conv, then ReLU → MaxPool, with the conv
    /// stored).
    pub fuse: bool,
    /// Output loops to strip-mine by run-time tile sizes ([`strip_mine`]).
    pub tiles: TilePlan,
    /// The target's choices of the grouping rule
    /// ([`region::Grouping`]: the GPU's tensor-core templates store their
    /// operands).
    pub grouping: region::Grouping,
}

impl Default for Options {
    fn default() -> Options {
        Options { fuse: true, tiles: TilePlan::default(), grouping: region::Grouping::default() }
    }
}

/// [`lower`] under `opts`: regions formed with or without fusion, then the
/// planned loops strip-mined.
///
/// Errors: those of [`lower`]; `InvalidAxis` when a planned axis is not an
/// output loop of any kernel, or the plan's axes are not increasing.
pub fn lower_with(g: &Graph, opts: &Options) -> DResult<Program> {
    let front = region::front(g, opts.fuse, opts.grouping)?;
    lower_formed(g, &front.book, &front.regions, opts)
}

/// The part of [`lower_with`] after region formation, for a caller that
/// holds the verified book and regions already ([`region::Front`]):
/// lowers the regions, strip-mines the planned loops and plans packing,
/// vector lanes and row groups. `opts.fuse` is not read (the regions are
/// formed).
///
/// Errors: those of [`lower_regions`]; `InvalidAxis` as [`lower_with`].
pub fn lower_formed(g: &Graph, book: &IndexBook, regions: &Regions, opts: &Options) -> DResult<Program> {
    let mut p = lower_regions(g, book, regions)?;
    let axes = &opts.tiles.axes;
    if axes.windows(2).any(|w| w[0] >= w[1]) {
        return Err(diag!(InvalidAxis, "the tiled loops {axes:?} are not increasing"));
    }
    let rank = p.kernels.iter().map(|k| k.loops.len()).max().unwrap_or(0);
    if let Some(a) = axes.iter().find(|&&a| a >= rank) {
        return Err(diag!(InvalidAxis, "no kernel of the graph has an output loop {a} (the deepest has {rank})"));
    }
    strip_mine(&mut p, &opts.tiles);
    // After the strips: a strip-mined kernel keeps its plain nest.
    packed::plan(&mut p, &packed::CacheModel::default());
    lanes::plan(&mut p);
    rows::plan(&mut p);
    Ok(p)
}

/// Lowers verified regions to loop nests: one kernel per region, in order.
///
/// Errors: `ExcessivePiecewise` as [`lower`]; `Internal` when the regions
/// ask for what the loop-nest IR cannot express.
pub fn lower_regions(g: &Graph, book: &IndexBook, regions: &Regions) -> DResult<Program> {
    let mut buffers = Vec::new();
    let mut buf_of: Vec<Option<BufId>> = vec![None; g.len()];
    let add = |buffers: &mut Vec<Buffer>, name: String, label: String, node: NodeId, role: Role| {
        let t = g.ty(node);
        buffers.push(Buffer { name, label, dtype: t.dtype, shape: t.shape.clone(), role });
        BufId(buffers.len() as u32 - 1)
    };
    for (k, id) in g.inputs().into_iter().enumerate() {
        let label = match &g.node(id).op {
            Op::Input { name } => name.clone(),
            _ => g.node(id).label.clone(),
        };
        buf_of[id.index()] = Some(add(&mut buffers, format!("in{k}"), label, id, Role::Input(k)));
    }
    let mut out_bufs = Vec::new();
    for (k, o) in g.outputs.iter().enumerate() {
        out_bufs.push(add(&mut buffers, format!("out{k}"), o.name.clone(), o.node, Role::Output(k)));
    }
    let mut temps = 0;
    for r in regions.regions.iter().filter(|r| !r.is_copy()) {
        let root = r.root();
        buf_of[root.index()] = Some(match r.outputs[0].dest {
            Dest::GraphOutput(k) => out_bufs[k],
            Dest::Temp => {
                temps += 1;
                add(&mut buffers, format!("tmp{}", temps - 1), g.node(root).label.clone(), root, Role::Temp)
            }
        });
    }
    let lw = Lowerer { g, book, buf_of: &buf_of, buffers: &buffers };
    let mut kernels = Vec::new();
    for r in &regions.regions {
        let n = kernels.len();
        let k = match r.outputs[0].dest {
            Dest::GraphOutput(k) if r.is_copy() => lw.copy(r.root(), lw.buf(r.root())?, out_bufs[k], n),
            _ => lw.kernel(r, n)?,
        };
        kernels.push(k);
    }
    let symbols: Vec<String> = g.symbols.iter().map(|s| s.name.clone()).collect();
    let checks = checks(g, &symbols, &buffers, &kernels);
    Ok(Program { name: g.name.clone(), symbols, tiles: Vec::new(), checks, buffers, kernels, rows: Vec::new() })
}

struct Lowerer<'a> {
    g: &'a Graph,
    book: &'a IndexBook,
    buf_of: &'a [Option<BufId>],
    buffers: &'a [Buffer],
}

/// What one kernel is being built from.
struct KernelCx<'r> {
    region: &'r Region,
    root: NodeId,
    reduce: Option<NodeId>,
    /// The conditions of the `Select`s the current value is under.
    guard: Vec<Constr>,
    /// Where the current value is: in the reduction's value, in an
    /// `Expr::Reduce`'s value.
    in_reduction: bool,
    in_compute_at: bool,
    /// `Expr::Reduce`s made so far.
    computed_at: u32,
    /// Extents of all loop variables: outputs, then reduce loops.
    extents: Vec<Dim>,
    /// Nodes met so far, in order of first visit.
    nodes: Vec<NodeId>,
    /// Where the root's value reads the accumulator: its output index as
    /// expressions over the root's loop variables (the identity unless the
    /// epilogue reads it through a `RESHAPE` or `PERMUTE`).
    acc_index: Option<Vec<AffExpr>>,
}

fn vars(n: usize) -> Vec<AffExpr> {
    (0..n as u32).map(AffExpr::var).collect()
}

/// Row-major subscript of `idx` in a buffer of shape `shape`.
fn linear(idx: &[AffExpr], shape: &[Dim]) -> AffExpr {
    let mut acc = AffExpr::int(0);
    let mut stride = Dim::int(1);
    for (e, d) in idx.iter().zip(shape).rev() {
        acc = &acc + &e.scale(&stride);
        stride = &stride * d;
    }
    acc
}

impl Lowerer<'_> {
    fn buf(&self, v: NodeId) -> DResult<BufId> {
        self.buf_of[v.index()].ok_or_else(|| diag!(Internal, "node {} has no buffer", self.g.node(v).label))
    }

    fn kernel(&self, region: &Region, n: usize) -> DResult<Kernel> {
        let g = self.g;
        let root = region.root();
        let loops = g.shape(root).to_vec();
        let r = loops.len();
        let (scan, reverse) = match &g.node(root).op {
            Op::Scan { op, axis, exclusive, reverse } => {
                (Some(Scan { node: root, op: *op, dtype: g.dtype(root), axis: *axis, exclusive: *exclusive }), *reverse)
            }
            _ => (None, false),
        };
        let mut cx = KernelCx {
            region,
            root,
            reduce: region.accumulator(),
            guard: Vec::new(),
            in_reduction: false,
            in_compute_at: false,
            computed_at: 0,
            extents: loops.clone(),
            nodes: Vec::new(),
            acc_index: None,
        };
        // The accumulator's reduce loops nest inside the root's loops; the
        // root's value is built first, so that it records where it reads the
        // accumulator (`acc_index`), and the reduction runs at that point.
        let accumulator = match cx.reduce {
            None => None,
            Some(rd) => {
                let (Op::Reduce { op, .. }, Some(info), Some(&src)) =
                    (&g.node(rd).op, self.book.get(rd), g.node(rd).src.first())
                else {
                    return Err(diag!(Internal, "kernel {n} accumulates {}, which is not a REDUCE", g.node(rd).label));
                };
                let red_loops: Vec<Dim> = info.reduce_axes.iter().map(|a| a.size.clone()).collect();
                cx.extents.extend(red_loops.iter().cloned());
                let access =
                    info.access(src).ok_or_else(|| diag!(Internal, "REDUCE {} has no access", g.node(rd).label))?;
                Some((rd, *op, src, access, red_loops))
            }
        };
        let out = self.buf(root)?;
        // The point a loop point stands for: the scanned loop runs from the
        // end of a reverse scan's axis.
        let mut point = vars(r);
        if let (Some(sc), true) = (&scan, reverse) {
            let last = &AffExpr::constant(loops[sc.axis].clone()) - &AffExpr::int(1);
            point[sc.axis] = &last - &AffExpr::var(sc.axis as u32);
        }
        let value = match &scan {
            // The value folded in: the source at the same point.
            Some(sc) => {
                cx.nodes.push(root);
                let src = *g.node(root).src.first().ok_or_else(|| diag!(Internal, "SCAN has no source"))?;
                cast(self.value(&mut cx, src, &point)?, sc.dtype)
            }
            None => self.value(&mut cx, root, &vars(r))?,
        };
        let reduce = match accumulator {
            None => None,
            Some((rd, op, src, access, red_loops)) => {
                let mut at = cx.acc_index.take().ok_or_else(|| {
                    diag!(Internal, "kernel {n}'s root does not read its accumulator {}", g.node(rd).label)
                })?;
                at.extend((r..r + red_loops.len()).map(|k| AffExpr::var(k as u32)));
                let idx = index_book::compose(&at, access, &cx.extents)?.index;
                let dtype = g.dtype(rd);
                cx.in_reduction = true;
                let value = cast(self.value(&mut cx, src, &idx)?, dtype);
                cx.in_reduction = false;
                Some(Reduction { node: rd, op, dtype, loops: red_loops, value })
            }
        };
        let mut nodes = vec![root];
        let mut rest: Vec<NodeId> =
            cx.nodes.into_iter().filter(|&v| v != root && Some(v) != cx.reduce && !region.computes_at(v)).collect();
        rest.sort_by(|a, b| b.cmp(a));
        nodes.extend(rest);
        Ok(Kernel {
            name: format!("k{n}"),
            nodes,
            store_index: linear(&point, &loops),
            loops,
            reduce,
            scan,
            out,
            value,
            strips: Vec::new(),
            packed: None,
            lanes: 1,
        })
    }

    /// A kernel copying buffer `src` (holding `node`) to `out`.
    fn copy(&self, node: NodeId, src: BufId, out: BufId, n: usize) -> Kernel {
        let loops = self.g.shape(node).to_vec();
        let index = linear(&vars(loops.len()), &loops);
        let value = Expr::Load { buf: src, index: index.clone(), dtype: self.buffers[src.0 as usize].dtype };
        Kernel {
            name: format!("k{n}"),
            nodes: vec![node],
            loops,
            reduce: None,
            scan: None,
            out,
            store_index: index,
            value,
            strips: Vec::new(),
            packed: None,
            lanes: 1,
        }
    }

    /// The value of `v` at `idx` (expressions over the kernel's loop variables).
    fn value(&self, cx: &mut KernelCx<'_>, v: NodeId, idx: &[AffExpr]) -> DResult<Expr> {
        let g = self.g;
        let n = g.node(v);
        let dtype = n.ty.dtype;
        if Some(v) == cx.reduce {
            // One read per root point, unguarded: the grouping reaches the
            // accumulator through element-wise nodes and bijective movements.
            if !cx.guard.is_empty() || cx.acc_index.as_deref().is_some_and(|at| at != idx) {
                return Err(diag!(Internal, "{} is read at more than one point of its kernel's root", n.label));
            }
            cx.acc_index = Some(idx.to_vec());
            return Ok(Expr::Acc { dtype });
        }
        if v != cx.root && self.buf_of[v.index()].is_some() {
            let buf = self.buf(v)?;
            return Ok(Expr::Load { buf, index: linear(idx, &n.ty.shape), dtype });
        }
        if !cx.nodes.contains(&v) {
            cx.nodes.push(v);
        }
        let info = self.book.get(v).ok_or_else(|| diag!(Internal, "the IndexBook has no entry for {}", n.label))?;
        let operand = |cx: &mut KernelCx<'_>, k: usize| -> DResult<Expr> {
            let s = *n.src.get(k).ok_or_else(|| diag!(Internal, "{} lacks source {k}", n.label))?;
            let access =
                info.access(s).ok_or_else(|| diag!(Internal, "{} has no access to its source {k}", n.label))?;
            let si = index_book::compose(idx, access, &cx.extents)?.index;
            self.value(cx, s, &si)
        };
        Ok(match &n.op {
            Op::Const { value } => Expr::Const { value: dtype.round(*value), dtype },
            Op::Unary(op) => Expr::Unary { op: *op, x: Box::new(operand(cx, 0)?) },
            Op::Cast => cast(operand(cx, 0)?, dtype),
            Op::Binary(op) => Expr::Binary { op: *op, a: Box::new(operand(cx, 0)?), b: Box::new(operand(cx, 1)?) },
            Op::Where => Expr::Where {
                cond: Box::new(operand(cx, 0)?),
                a: Box::new(operand(cx, 1)?),
                b: Box::new(operand(cx, 2)?),
            },
            Op::Gather { axis } => {
                // `x` is materialised (the grouping's rule): read it in its
                // row-major layout, `idx` on every axis but `axis`.
                let x = *n.src.first().ok_or_else(|| diag!(Internal, "GATHER {} has no x", n.label))?;
                let shape = g.shape(x);
                let mut at = idx.to_vec();
                let k = *axis;
                *at.get_mut(k).ok_or_else(|| diag!(Internal, "GATHER {} axis {k} is out of range", n.label))? =
                    AffExpr::int(0);
                Expr::Gather {
                    buf: self.buf(x)?,
                    base: linear(&at, shape),
                    stride: AffExpr::constant(Dim::product(&shape[k + 1..])),
                    extent: AffExpr::constant(shape[k].clone()),
                    at: Box::new(operand(cx, 1)?),
                    dtype: g.dtype(x),
                }
            }
            _ if n.op.is_movement() => {
                let c = index_book::chase(g, self.book, v, idx.to_vec(), &cx.extents, &|s| {
                    self.buf_of[s.index()].is_some()
                })?;
                let outer = cx.guard.len();
                cx.guard.extend(c.guard.iter().flat_map(|p| p.valid.iter().cloned()));
                let e = self.value(cx, c.src, &c.index);
                cx.guard.truncate(outer);
                let mut e = e?;
                for p in c.guard.into_iter().rev() {
                    let otherwise = Expr::Const { value: dtype.round(p.otherwise), dtype };
                    e = Expr::Select { valid: p.valid, then: Box::new(e), otherwise: Box::new(otherwise) };
                }
                e
            }
            Op::Reduce { op, .. } if cx.region.computes_at(v) && cx.in_reduction && !cx.in_compute_at => {
                let src = *n.src.first().ok_or_else(|| diag!(Internal, "REDUCE {} has no source", n.label))?;
                let access = info.access(src).ok_or_else(|| diag!(Internal, "REDUCE {} has no access", n.label))?;
                let first = cx.extents.len();
                let loops: Vec<Dim> = info.reduce_axes.iter().map(|a| a.size.clone()).collect();
                cx.extents.extend(loops.iter().cloned());
                let mut full = idx.to_vec();
                full.extend((first..first + loops.len()).map(|k| AffExpr::var(k as u32)));
                let si = index_book::compose(&full, access, &cx.extents)?.index;
                cx.in_compute_at = true;
                let value = self.value(cx, src, &si);
                cx.in_compute_at = false;
                let value = Box::new(cast(value?, dtype));
                cx.computed_at += 1;
                let (id, guard) = (cx.computed_at - 1, cx.guard.clone());
                Expr::Reduce { id, node: v, op: *op, dtype, first: first as u32, loops, guard, value }
            }
            Op::Input { .. } | Op::Reduce { .. } => {
                return Err(diag!(
                    Internal,
                    "{} {} is neither materialised nor the kernel's accumulator",
                    n.op.name(),
                    n.label
                ));
            }
            _ => return Err(diag!(Internal, "{} {} cannot be lowered", n.op.name(), n.label)),
        })
    }
}

/// `x` converted to `to` (no node when the dtypes agree).
fn cast(x: Expr, to: DType) -> Expr {
    if x.dtype() == to {
        x
    } else {
        Expr::Cast { to, x: Box::new(x) }
    }
}

/// True when `d ≥ 1` follows from every symbol being ≥ 1.
fn evidently_positive(d: &Dim) -> bool {
    d.as_int().is_some_and(|v| v >= 1)
        || (is_nonneg(d) && d.monomials().any(|(atoms, _)| atoms.iter().all(|a| matches!(a, crate::sym::Atom::Sym(_)))))
}

/// The run-time checks of [`Program::checks`], in order.
fn checks(g: &Graph, symbols: &[String], buffers: &[Buffer], kernels: &[Kernel]) -> Vec<Constraint> {
    let at_least_one = |d: &Dim, what: String| Constraint { lhs: Dim::int(1), rel: Rel::Le, rhs: d.clone(), what };
    let mut out: Vec<Constraint> =
        symbols.iter().map(|s| at_least_one(&Dim::sym(s), format!("symbol {s} ≥ 1"))).collect();
    let mut divisors = Vec::new();
    let mut sizes: Vec<Dim> = Vec::new();
    for b in buffers {
        sizes.extend(b.shape.iter().cloned());
    }
    for k in kernels {
        sizes.extend(k.loops.iter().cloned());
        sizes.extend(k.reduce.iter().flat_map(|r| r.loops.iter().cloned()));
        aff_divisors(&k.store_index, &mut divisors);
        let mut inner = Vec::new();
        let mut visit = |e: &Expr| match e {
            Expr::Load { index, .. } | Expr::Gather { base: index, .. } => aff_divisors(index, &mut divisors),
            Expr::Select { valid, .. } => valid.iter().for_each(|c| aff_divisors(&c.expr, &mut divisors)),
            Expr::Reduce { loops, .. } => inner.extend(loops.iter().cloned()),
            _ => {}
        };
        k.value.walk(&mut visit);
        if let Some(r) = &k.reduce {
            r.value.walk(&mut visit);
        }
        sizes.extend(inner);
    }
    for d in &sizes {
        dim_divisors(d, &mut divisors);
    }
    for c in &g.constraints {
        dim_divisors(&c.constraint.lhs, &mut divisors);
        dim_divisors(&c.constraint.rhs, &mut divisors);
    }
    for d in divisors.iter().filter(|d| !evidently_positive(d)) {
        out.push(at_least_one(d, format!("divisor {d} ≥ 1")));
    }
    out.extend(g.constraints.iter().map(|c| c.constraint.clone()));
    let mut seen = Vec::new();
    for d in sizes {
        if !evidently_positive(&d) && !seen.contains(&d) {
            out.push(at_least_one(&d, format!("size {d} ≥ 1")));
            seen.push(d);
        }
    }
    out
}
