//! Winograd F(2×2, 3×3) convolution around the MMA core (`000` §1.7
//! `algo_choice conv winograd_3x3`; Lavin & Gray, "Fast Algorithms for
//! Convolutional Neural Networks", CVPR 2016, §4).
//!
//! Each 2×2 tile of output pixels is `Y = Aᵀ [U ⊙ V] A` with, per input
//! channel, `U = G g Gᵀ` (the 3×3 filter `g` made 4×4) and `V = Bᵀ d B`
//! (`d` the 4×4 input tile under the output tile), summed over the input
//! channels before the output transform:
//!
//! ```text
//!      ⎡1  0 -1  0⎤        ⎡1    0    0 ⎤        ⎡1  1  1  0⎤
//! Bᵀ = ⎢0  1  1  0⎥   G =  ⎢1/2  1/2 1/2⎥   Aᵀ = ⎣0  1 -1 -1⎦
//!      ⎢0 -1  1  0⎥        ⎢1/2 -1/2 1/2⎥
//!      ⎣0  1  0 -1⎦        ⎣0    0    1 ⎦
//! ```
//!
//! The sum over channels is sixteen GEMMs, one per position `(ξ, ν)` of
//! the 4×4 tile: `M[ξν] = V[ξν] · U[ξν]`, `[P × C]·[C × K]` with `P` the
//! output tiles. A program of four launches:
//!
//! 1. the input transform (SIMT, one thread per tile and input channel):
//!    `d` read through the activation's affine access of the implicit GEMM
//!    (the same `affine_offsets` and zero-fill guards, evaluated at
//!    `oh = 2·th` and tap `i = 0..4`: a 3×3 window's offset is linear in
//!    `oh + kh`), `V = Bᵀ d B` in f32, stored rounded to the operand dtype
//!    as `V[16][P][C]`;
//! 2. the weight transform (one thread per input and output channel):
//!    `U[16][C][K]`, rounded likewise;
//! 3. the batched GEMM on the MMA template ([`super::driver`]'s GEMM,
//!    its plan chosen by the estimator), f32 out: `M[16][P][K]`;
//! 4. the output transform (one thread per tile and output channel):
//!    `Y = Aᵀ M A` in f32, then the graph's epilogue (the same
//!    [`MmaStmt::Epilogue`] the GEMM kernel applies) and the store of each
//!    pixel inside the output.
//!
//! **Error.** With `u` the unit roundoff of the operand dtype (2⁻¹¹ for
//! f16, 2⁻⁸ for bf16) and `V`, `U` exact in f32 before their rounding
//! (their sums have 4 and 9 terms; f32's own rounding is below 2⁻²⁰
//! relative here), the rounded `V̂ = V(1+δ)`, `Û = U(1+ε)`, `|δ|, |ε| ≤ u`,
//! give each output before the epilogue
//!
//! ```text
//! |ŷ − y| ≤ (2u + u²) · Σ_ξν |Aᵀ_aξ|·|Aᵀ_bν| · Σ_c |U_ξν,c|·|V_ξν,c|
//! ```
//!
//! plus the f32 accumulation of the GEMM; `winograd_tests` checks every
//! output of its grid against this bound (computed in f64 from the
//! inputs), not against a fixed tolerance: the transforms' cancellation
//! makes it larger than the direct convolution's error, which is why the
//! algorithm is a choice of the plan and not the default.
//!
//! **Choice.** [`lower`]'s estimate is the estimator's time for the
//! batched GEMM's plan (the plans tagged `algo_choice conv winograd_3x3`
//! as the estimator sees them, `plan::cost::Tagged`), plus each transform's reads and writes at the
//! target's DRAM bandwidth (`M` counted again at f32 beyond the GEMM
//! model's output bytes), plus [`LAUNCH_GAP_S`] for each launch beyond
//! the first — an analytic estimate, not a measurement;
//! [`super::driver::lower`] keeps this program only where that is
//! below the implicit GEMM's.

use crate::cpu::loop_ir::{BufId, Buffer, Role};
use crate::diag;
use crate::diag::DResult;
use crate::index_book::contraction::Pattern;
use crate::plan::cost::{with_algorithm, Estimate, Estimator, Limit, Tagged, LAUNCH_GAP_S};
use crate::plan::{AlgoChoice, ConvAlgo, Epilogue, Target};
use crate::sym::Dim;
use crate::tiny::{BinaryOp, Graph, ReduceOp};
use crate::DType;

use super::dialect::MmaStmt;
use super::dialect::{BinOp, Dim as GridDim, EpilogueOp};
use super::dialect::{
    Expr, GlobalRef, Kernel, ParamId, ParamKind, RegId, RegKind, RegRef, ScalarExpr, SimtStmt, Stmt, VarId,
};
use super::mma::recognise::{match_gemm, ConvWindow, GemmGraph, Operand};
use super::mma::{Access, Axis, Implicit};
use super::program::{Form, GpuProgram, Launch, LaunchArg};
use super::template::Lowered;

/// `Bᵀ` of F(2×2, 3×3): row `ξ` of the input transform.
pub const BT: [[f64; 4]; 4] =
    [[1.0, 0.0, -1.0, 0.0], [0.0, 1.0, 1.0, 0.0], [0.0, -1.0, 1.0, 0.0], [0.0, 1.0, 0.0, -1.0]];

/// `G` of F(2×2, 3×3): row `ξ` of the filter transform.
pub const G: [[f64; 3]; 4] = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]];

/// `Aᵀ` of F(2×2, 3×3): row `a` of the output transform.
pub const AT: [[f64; 4]; 2] = [[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, -1.0, -1.0]];

/// Threads per block of the transform kernels.
const THREADS: i64 = 256;

/// The `algo_choice conv` value of this template.
pub const ALGO: AlgoChoice = AlgoChoice::Conv(ConvAlgo::Winograd3x3);

/// How the convolution's implicit GEMM maps onto the transforms.
struct Geometry {
    im: Implicit,
    /// The activation's operand and its own GEMM axis (`M` for `A`, `N`
    /// for `B`); the weights' own axis is the other.
    x_is_a: bool,
    /// The two windows (rows, then columns; the order of their output
    /// digits).
    win: [ConvWindow; 2],
    /// Output tiles per window: `⌈out / 2⌉`.
    tiles: [i64; 2],
}

impl Geometry {
    fn x_axis(&self) -> Axis {
        if self.x_is_a {
            Axis::M
        } else {
            Axis::N
        }
    }

    fn w_axis(&self) -> Axis {
        if self.x_is_a {
            Axis::N
        } else {
            Axis::M
        }
    }

    fn x_access(&self) -> &Access {
        if self.x_is_a {
            &self.im.a
        } else {
            &self.im.b
        }
    }

    fn w_access(&self) -> &Access {
        if self.x_is_a {
            &self.im.b
        } else {
            &self.im.a
        }
    }

    /// The tile space: every batch digit, then the activation's axis with
    /// the window digits' extents made tile counts.
    fn tile_extents(&self) -> Vec<i64> {
        let mut e = self.im.batch.clone();
        for (i, &x) in self.im.digits(self.x_axis()).iter().enumerate() {
            let t = self.win.iter().position(|w| w.out.index == i).map_or(x, |k| self.tiles[k]);
            e.push(t);
        }
        e
    }

    /// The `K` digits other than the two taps: the input channels.
    fn channel_extents(&self) -> Vec<i64> {
        let taps = [self.win[0].reduce.index, self.win[1].reduce.index];
        self.im.k.iter().enumerate().filter(|(i, _)| !taps.contains(i)).map(|(_, &e)| e).collect()
    }

    /// `(P, C, K)`: tiles, input channels, output channels.
    fn sizes(&self) -> (i64, i64, i64) {
        let p = self.tile_extents().iter().product();
        let c = self.channel_extents().iter().product();
        (p, c, self.im.extent(self.w_axis()))
    }

    /// The `K` digit values: the channel digits `cs` in order, the taps at
    /// `taps` (rows, columns).
    fn k_digits(&self, cs: &[Expr], taps: [i64; 2]) -> Vec<Expr> {
        let mut next = cs.iter();
        (0..self.im.k.len())
            .map(|i| match self.win.iter().position(|w| w.reduce.index == i) {
                Some(t) => Expr::c(taps[t]),
                None => next.next().cloned().unwrap_or(Expr::c(0)),
            })
            .collect()
    }

    /// The activation axis's digit values for tile digits `ts` (the batch
    /// digits first) and pixel `at` (row, column) of the 2×2 output tile.
    fn x_digits(&self, ts: &[Expr], at: [i64; 2]) -> Vec<Expr> {
        let own = &ts[self.im.batch.len()..];
        own.iter()
            .enumerate()
            .map(|(i, t)| match self.win.iter().position(|w| w.out.index == i) {
                Some(k) => t.clone() * 2 + at[k],
                None => t.clone(),
            })
            .collect()
    }
}

/// Recognises `gg` as a 3×3 convolution of stride and dilation 1 without
/// groups, and how its implicit GEMM maps onto the transforms.
///
/// Errors: `Unsupported`, saying which of those it is not.
fn geometry(gg: &GemmGraph) -> Result<Geometry, String> {
    if gg.pattern != Pattern::Conv {
        return Err("it is not a convolution".into());
    }
    let Some(im) = gg.gemm.implicit.clone() else { return Err("it is not an implicit GEMM".into()) };
    if im.pool.is_some() {
        return Err("its output is pooled on the GEMM's tile".into());
    }
    let [w0, w1] = gg.windows[..] else {
        return Err(format!("it has {} spatial windows longer than 1, not 2", gg.windows.len()));
    };
    for w in [w0, w1] {
        if (w.stride, w.dilation) != (1, 1) {
            return Err(format!("stride {} and dilation {}: F(2×2, 3×3) needs 1 and 1", w.stride, w.dilation));
        }
        if w.reduce.axis != Axis::K || im.k[w.reduce.index] != 3 {
            return Err("the filter is not 3×3".into());
        }
    }
    if w0.out.axis != w1.out.axis || !matches!(w0.out.axis, Axis::M | Axis::N) {
        return Err("the output rows and columns are not on one GEMM axis".into());
    }
    let x_is_a = w0.out.axis == Axis::M;
    let (rows, cols) = if w0.out.index < w1.out.index { (w0, w1) } else { (w1, w0) };
    let ext = |w: ConvWindow| im.digits(w.out.axis)[w.out.index];
    let geo = Geometry { x_is_a, win: [rows, cols], tiles: [(ext(rows) + 1) / 2, (ext(cols) + 1) / 2], im };
    if geo.w_access().offset.uses(Axis::Batch) || geo.w_access().guards.iter().any(|g| g.uses(Axis::Batch)) {
        return Err("the weights vary over a batch axis (groups)".into());
    }
    if !geo.w_access().guards.is_empty() {
        return Err("the weights are padded".into());
    }
    Ok(geo)
}

/// The Winograd program of the convolution graph `g` and its estimate
/// (module doc).
///
/// Errors: `Unsupported` at the contraction for a graph that is not a
/// 3×3, stride-1, dilation-1 convolution without groups, or whose tiles
/// do not fit the kernels' `int` sizes; those of [`match_gemm`] and of the
/// batched GEMM's template.
pub fn lower(g: &Graph, target: &Target, estimator: &dyn Estimator) -> DResult<Lowered> {
    let gg = match_gemm(g)?;
    let at = g.node(gg.contraction);
    let geo = geometry(&gg)
        .map_err(|why| diag!(Unsupported, "winograd_3x3 does not take this contraction: {why}").at_node(at))?;
    let (p, c, k) = geo.sizes();
    let elements = |a: i64, b: i64| a.saturating_mul(b).saturating_mul(16);
    if [elements(p, c), elements(c, k), elements(p, k)].iter().any(|&n| n > i32::MAX as i64) {
        return Err(diag!(Unsupported, "winograd_3x3: its transformed tensors exceed 2^31 elements").at_node(at));
    }
    let ab = gg.gemm.ab;
    let mut buffers = super::program::whole_graph_buffers(g);
    let input_buf = |role: Operand| -> DResult<BufId> {
        let i = gg.inputs.iter().position(|x| x.1 == role);
        i.map(|i| BufId(i as u32)).ok_or_else(|| diag!(Internal, "the convolution has no {role:?} input"))
    };
    let (xr, wr) = if geo.x_is_a { (Operand::A, Operand::B) } else { (Operand::B, Operand::A) };
    let (x_buf, w_buf) = (input_buf(xr)?, input_buf(wr)?);
    let out_buf = BufId(buffers.len() as u32 - 1);
    let mut temp = |name: &str, dtype: DType, shape: [i64; 3]| {
        buffers.push(Buffer {
            name: format!("tmp{}", buffers.len()),
            label: format!("{}_{name}", g.name),
            dtype,
            shape: shape.iter().map(|&d| Dim::int(d)).collect(),
            role: Role::Temp,
        });
        BufId(buffers.len() as u32 - 1)
    };
    let v_buf = temp("winograd_v", ab, [16, p, c]);
    let u_buf = temp("winograd_u", ab, [16, c, k]);
    let m_buf = temp("winograd_m", DType::F32, [16, p, k]);

    let gemm_graph = batched_gemm(&format!("{}_winograd", g.name), ab, p, c, k)?;
    let as_winograd = Tagged { inner: estimator, choice: ALGO };
    let inner = super::mma::lower::gemm(&gemm_graph, target, &as_winograd).map_err(|d| d.or_at(at.span))?;
    let [mut gemm_launch] = <[Launch; 1]>::try_from(inner.program.launches)
        .map_err(|_| diag!(Internal, "the batched GEMM is not one launch"))?;
    let bufs = [v_buf, u_buf, m_buf];
    for a in &mut gemm_launch.args {
        if let LaunchArg::Buffer(b) = a {
            *b = bufs[b.0 as usize];
        }
    }
    gemm_launch.region = Vec::new();
    gemm_launch.outs = vec![m_buf];
    gemm_launch.plan = gemm_launch.plan.as_ref().map(|p| with_algorithm(p, ALGO));

    let launches = vec![
        transform_launch(input_transform(&geo, ab, &g.name), &[x_buf, v_buf], v_buf),
        transform_launch(weight_transform(&geo, ab, &g.name), &[w_buf, u_buf], u_buf),
        gemm_launch,
        output_transform(&geo, &gg, g, m_buf, out_buf)?,
    ];
    let bytes = |b: BufId| -> f64 {
        let buf = &buffers[b.0 as usize];
        let n: i64 = buf.shape.iter().map(|d| d.as_int().unwrap_or(1)).product();
        n as f64 * buf.dtype.size_bytes() as f64
    };
    // Each transform's reads and writes once, and M at f32 beyond the
    // GEMM model's operand-sized output.
    let traffic = bytes(x_buf)
        + 2.0 * bytes(v_buf)
        + bytes(w_buf)
        + 2.0 * bytes(u_buf)
        + 2.0 * bytes(m_buf)
        + bytes(out_buf)
        + gg.inputs.iter().filter(|x| matches!(x.1, Operand::Residual)).count() as f64 * bytes(out_buf);
    let transforms_s = traffic / (target.dram_gbps * 1e9) + (launches.len() - 1) as f64 * LAUNCH_GAP_S;
    let estimate = Estimate {
        time_s: inner.estimate.time_s + transforms_s,
        limit: if transforms_s > inner.estimate.time_s { Limit::Dram } else { inner.estimate.limit },
    };
    let program = GpuProgram { name: g.name.clone(), symbols: Vec::new(), checks: Vec::new(), buffers, launches };
    Ok(Lowered { program, estimate })
}

/// `M[16, P, K] = V[16, P, C] · U[16, C, K]` as a graph: operands of
/// `ab`, products summed in f32, no rounding of the sum.
fn batched_gemm(name: &str, ab: DType, p: i64, c: i64, k: i64) -> DResult<Graph> {
    let d = |xs: &[i64]| xs.iter().map(|&x| Dim::int(x)).collect::<Vec<_>>();
    let mut g = Graph::new(name);
    let v = g.input("v", ab, &d(&[16, p, c]))?;
    let u = g.input("u", ab, &d(&[16, c, k]))?;
    let v1 = g.reshape(v, &d(&[16, p, 1, c]))?;
    let v2 = g.expand(v1, &d(&[16, p, k, c]))?;
    let u1 = g.permute(u, &[0, 2, 1])?;
    let u2 = g.reshape(u1, &d(&[16, 1, k, c]))?;
    let u3 = g.expand(u2, &d(&[16, p, k, c]))?;
    let prod = g.binary(BinaryOp::Mul, v2, u3)?;
    let m = g.reduce(ReduceOp::Sum, prod, &[3], DType::F32)?;
    g.outputs.push(crate::tiny::Output { name: "m".into(), node: m });
    Ok(g)
}

fn transform_launch(kernel: Kernel, bufs: &[BufId], out: BufId) -> Launch {
    Launch {
        kernel,
        form: Form::WinogradTransform,
        args: bufs.iter().map(|&b| LaunchArg::Buffer(b)).collect(),
        region: Vec::new(),
        outs: vec![out],
        plan: None,
    }
}

/// A transform kernel under construction: one thread per point of
/// `total`, `THREADS` per block along `x`.
struct Simt {
    k: Kernel,
}

impl Simt {
    fn new(name: &str, total: i64) -> Simt {
        let mut k = Kernel::empty(name, super::dialect::Arch::Sm80);
        k.block = [THREADS as u32, 1, 1];
        k.grid = [Expr::c((total + THREADS - 1) / THREADS), Expr::c(1), Expr::c(1)];
        Simt { k }
    }

    fn ptr(&mut self, name: &str, dtype: DType, writable: bool) -> ParamId {
        self.k.add_param(name, ParamKind::Ptr { dtype, writable })
    }

    fn let_(&mut self, body: &mut Vec<Stmt>, name: &str, value: Expr) -> Expr {
        let var: VarId = self.k.add_var(name);
        body.push(Stmt::Let { var, value });
        Expr::Var(var)
    }

    /// The thread's point, `blockIdx.x · THREADS + threadIdx.x`, as the
    /// variable `idx`.
    fn point(&mut self, body: &mut Vec<Stmt>) -> Expr {
        let at = Expr::BlockIdx(GridDim::X) * THREADS + Expr::ThreadIdx(GridDim::X);
        self.let_(body, "idx", at)
    }

    fn regs(&mut self, name: &str, len: u32) -> RegId {
        self.k.add_regs(name, RegKind::F32, len)
    }

    /// The kernel whose body is `body` then `inner` under `inside` (the
    /// thread's point below the total).
    fn finish(mut self, mut body: Vec<Stmt>, inside: Expr, inner: Vec<Stmt>) -> Kernel {
        body.push(Stmt::If { cond: inside, then: inner, otherwise: Vec::new() });
        self.k.body = body;
        self.k
    }
}

/// Stores the 16 registers `regs` rounded to `dtype`: register `q` at
/// element `q · plane + at` of `param` (one plane per tile position).
fn store_planes(body: &mut Vec<Stmt>, param: ParamId, regs: RegId, plane: i64, at: Expr, dtype: DType) {
    for q in 0..16 {
        let offset = Expr::linear([(1, at.clone())], q as i64 * plane);
        body.push(Stmt::Simt(SimtStmt::StGlobal {
            dst: GlobalRef { param, offset },
            src: reg(regs, q),
            dtype,
            pred: Expr::c(1),
        }));
    }
}

fn reg(reg: RegId, i: usize) -> RegRef {
    RegRef { reg, index: Expr::c(i as i64) }
}

fn read(reg: RegId, i: usize) -> ScalarExpr {
    ScalarExpr::Reg { reg: self::reg(reg, i), dtype: DType::F32 }
}

/// `Σ coeff_i · x_i` over the non-zero coefficients, in f32 (`±1` as an
/// add or subtract, others as a multiply).
fn combine(terms: impl IntoIterator<Item = (f64, ScalarExpr)>) -> ScalarExpr {
    let mut acc: Option<ScalarExpr> = None;
    for (c, x) in terms.into_iter().filter(|t| t.0 != 0.0) {
        let scaled = |x: ScalarExpr, c: f64| {
            if c.abs() == 1.0 {
                return x;
            }
            let b = Box::new(ScalarExpr::Const { value: c.abs(), dtype: DType::F32 });
            ScalarExpr::Binary { op: BinaryOp::Mul, a: Box::new(x), b }
        };
        let x = scaled(x, c);
        acc = Some(match acc {
            None if c < 0.0 => ScalarExpr::Binary {
                op: BinaryOp::Sub,
                a: Box::new(ScalarExpr::Const { value: 0.0, dtype: DType::F32 }),
                b: Box::new(x),
            },
            None => x,
            Some(a) => ScalarExpr::Binary {
                op: if c < 0.0 { BinaryOp::Sub } else { BinaryOp::Add },
                a: Box::new(a),
                b: Box::new(x),
            },
        });
    }
    acc.unwrap_or(ScalarExpr::Const { value: 0.0, dtype: DType::F32 })
}

/// `L X Lᵀ` for the `n × n` matrix `X` in registers `x` (row-major) and
/// the `r × n` matrix `L`: `r × r` new registers named `name`, row-major,
/// through `T = L X` (one `Compute` per element, in f32).
fn sandwich<const N: usize>(s: &mut Simt, body: &mut Vec<Stmt>, name: &str, l: &[[f64; N]], x: RegId) -> RegId {
    let r = l.len();
    let t = s.regs(&format!("{name}_l"), (r * N) as u32);
    for (row, coeffs) in l.iter().enumerate() {
        for j in 0..N {
            let value = combine(coeffs.iter().enumerate().map(|(i, &c)| (c, read(x, N * i + j))));
            body.push(Stmt::Simt(SimtStmt::Compute { dst: reg(t, N * row + j), value }));
        }
    }
    let y = s.regs(name, (r * r) as u32);
    for row in 0..r {
        for (col, coeffs) in l.iter().enumerate() {
            let value = combine(coeffs.iter().enumerate().map(|(j, &c)| (c, read(t, N * row + j))));
            body.push(Stmt::Simt(SimtStmt::Compute { dst: reg(y, r * row + col), value }));
        }
    }
    y
}

/// Element `digits` of operand `param` read through `access`: zero where
/// a guard fails (padding), widened to f32.
fn load_f32(param: ParamId, access: &Access, digits: &[(Axis, &[Expr])], dtype: DType) -> ScalarExpr {
    let load = ScalarExpr::Load { src: GlobalRef { param, offset: access.offset.at(digits) }, dtype };
    let value = if access.guards.is_empty() {
        load
    } else {
        ScalarExpr::Select {
            cond: access.inside(digits),
            then: Box::new(load),
            otherwise: Box::new(ScalarExpr::Const { value: 0.0, dtype }),
        }
    };
    ScalarExpr::Cast { to: DType::F32, x: Box::new(value) }
}

/// `Σ v_j · Π_{l > j} e_l`: the row-major index of digit values `vs` of
/// extents `es`.
fn mixed_radix(vs: &[Expr], es: &[i64]) -> Expr {
    let mut terms = Vec::new();
    for (j, v) in vs.iter().enumerate() {
        terms.push((es[j + 1..].iter().product::<i64>(), v.clone()));
    }
    Expr::linear(terms, 0)
}

/// Kernel 1: `V[ξν][p][c] = (Bᵀ d B)[ξ][ν]`, one thread per `(p, c)`.
fn input_transform(geo: &Geometry, ab: DType, name: &str) -> Kernel {
    let (p, c, _) = geo.sizes();
    let mut s = Simt::new(&format!("{name}_winograd_input"), p * c);
    let (x, v) = (s.ptr("x", ab, false), s.ptr("V", ab, true));
    let mut body = Vec::new();
    let idx = s.point(&mut body);
    let mut inner = Vec::new();
    let cl = s.let_(&mut inner, "cl", idx.clone() % c);
    let cs = s.k.split_digits(&mut inner, "c", cl.clone(), &geo.channel_extents());
    let pl = s.let_(&mut inner, "p", idx.clone() / c);
    let ts = s.k.split_digits(&mut inner, "t", pl.clone(), &geo.tile_extents());
    let d = s.regs("d", 16);
    let batch = &ts[..geo.im.batch.len()];
    for i in 0..4 {
        for j in 0..4 {
            let own = geo.x_digits(&ts, [0, 0]);
            let ks = geo.k_digits(&cs, [i, j]);
            let digits = [(Axis::Batch, batch), (geo.x_axis(), &own[..]), (Axis::K, &ks[..])];
            let value = load_f32(x, geo.x_access(), &digits, ab);
            inner.push(Stmt::Simt(SimtStmt::Compute { dst: reg(d, (4 * i + j) as usize), value }));
        }
    }
    let vr = sandwich(&mut s, &mut inner, "v", &BT, d);
    store_planes(&mut inner, v, vr, p * c, pl * c + cl, ab);
    s.finish(body, idx.lt(p * c), inner)
}

/// Kernel 2: `U[ξν][c][k] = (G g Gᵀ)[ξ][ν]`, one thread per `(c, k)`.
fn weight_transform(geo: &Geometry, ab: DType, name: &str) -> Kernel {
    let (_, c, k) = geo.sizes();
    let mut s = Simt::new(&format!("{name}_winograd_filter"), c * k);
    let (w, u) = (s.ptr("w", ab, false), s.ptr("U", ab, true));
    let mut body = Vec::new();
    let idx = s.point(&mut body);
    let mut inner = Vec::new();
    let kl = s.let_(&mut inner, "kl", idx.clone() % k);
    let cl = s.let_(&mut inner, "cl", idx.clone() / k);
    let ks = s.k.split_digits(&mut inner, "k", kl.clone(), geo.im.digits(geo.w_axis()));
    let cs = s.k.split_digits(&mut inner, "c", cl.clone(), &geo.channel_extents());
    let gr = s.regs("g", 9);
    for a in 0..3 {
        for b in 0..3 {
            let kd = geo.k_digits(&cs, [a, b]);
            let digits = [(geo.w_axis(), &ks[..]), (Axis::K, &kd[..])];
            let value = load_f32(w, geo.w_access(), &digits, ab);
            inner.push(Stmt::Simt(SimtStmt::Compute { dst: reg(gr, (3 * a + b) as usize), value }));
        }
    }
    let ur = sandwich(&mut s, &mut inner, "u", &G, gr);
    store_planes(&mut inner, u, ur, c * k, cl * k + kl, ab);
    s.finish(body, idx.lt(c * k), inner)
}

/// Kernel 4: `Y = Aᵀ M A` per tile and output channel, the graph's
/// epilogue on each of its four pixels inside the output and the store.
fn output_transform(geo: &Geometry, gg: &GemmGraph, g: &Graph, m_buf: BufId, out_buf: BufId) -> DResult<Launch> {
    let (p, _, k) = geo.sizes();
    let mut s = Simt::new(&format!("{}_winograd_output", g.name), p * k);
    let ab = gg.gemm.ab;
    let names = &gg.epilogue;
    let m = s.ptr("M", DType::F32, false);
    let mut args = vec![LaunchArg::Buffer(m_buf)];
    let mut operand = |s: &mut Simt, role: Operand, name: &str| -> Option<ParamId> {
        let i = gg.inputs.iter().position(|x| x.1 == role)?;
        args.push(LaunchArg::Buffer(BufId(i as u32)));
        Some(s.ptr(name, ab, false))
    };
    let bias = if names.contains(&Epilogue::Bias) { operand(&mut s, Operand::Bias, "bias") } else { None };
    let residual =
        if names.contains(&Epilogue::Residual) { operand(&mut s, Operand::Residual, "residual") } else { None };
    let y = s.ptr("C", gg.gemm.out, true);
    args.push(LaunchArg::Buffer(out_buf));

    let mut body = Vec::new();
    let idx = s.point(&mut body);
    let mut inner = Vec::new();
    let kl = s.let_(&mut inner, "kl", idx.clone() % k);
    let pl = s.let_(&mut inner, "p", idx.clone() / k);
    let ks = s.k.split_digits(&mut inner, "k", kl.clone(), geo.im.digits(geo.w_axis()));
    let ts = s.k.split_digits(&mut inner, "t", pl.clone(), &geo.tile_extents());
    let mr = s.regs("m", 16);
    for q in 0..16 {
        let offset = (Expr::c(q as i64) * p + pl.clone()) * k + kl.clone();
        inner.push(Stmt::Simt(SimtStmt::Compute {
            dst: reg(mr, q),
            value: ScalarExpr::Load { src: GlobalRef { param: m, offset }, dtype: DType::F32 },
        }));
    }
    let yr = sandwich(&mut s, &mut inner, "y", &AT, mr);
    let batch = &ts[..geo.im.batch.len()];
    let (m_ext, n_ext) = (geo.im.m.clone(), geo.im.n.clone());
    let ldc = geo.im.extent(Axis::N);
    for a in 0..2 {
        for b in 0..2 {
            let q = 2 * a + b;
            let own = geo.x_digits(&ts, [a as i64, b as i64]);
            let (md, nd) = if geo.x_is_a { (&own, &ks) } else { (&ks, &own) };
            let digits = [(Axis::Batch, batch), (Axis::M, &md[..]), (Axis::N, &nd[..])];
            let c_at = geo.im.c_batch.at(&digits) + mixed_radix(md, &m_ext) * ldc + mixed_radix(nd, &n_ext);
            let c_at = s.let_(&mut inner, &format!("c{q}"), c_at);
            let mut inside = Expr::c(1);
            for (w, extent) in
                geo.win.iter().zip([own[geo.win[0].out.index].clone(), own[geo.win[1].out.index].clone()])
            {
                let bound = geo.im.digits(w.out.axis)[w.out.index];
                let ok = extent.lt(bound);
                inside = if inside == Expr::c(1) { ok } else { Expr::bin(BinOp::LAnd, inside, ok) };
            }
            let mut ops = Vec::new();
            if gg.gemm.round_sum {
                ops.push(EpilogueOp::Cast(ab));
            }
            for &name in names {
                ops.push(match name {
                    Epilogue::Bias => {
                        let at = geo.im.bias.as_ref().map_or(Expr::c(0), |bias| bias.at(&digits));
                        let param = bias.ok_or_else(|| diag!(Internal, "a bias epilogue without its input"))?;
                        EpilogueOp::Bias { param, at }
                    }
                    Epilogue::Relu => EpilogueOp::Relu,
                    Epilogue::Silu => EpilogueOp::Silu,
                    Epilogue::Gelu => EpilogueOp::Gelu,
                    Epilogue::GeluTanh => EpilogueOp::GeluTanh,
                    Epilogue::Tanh => EpilogueOp::Tanh,
                    Epilogue::Residual => {
                        let param = residual.ok_or_else(|| diag!(Internal, "a residual epilogue without its input"))?;
                        EpilogueOp::Residual { param, at: c_at.clone() }
                    }
                });
            }
            inner.push(Stmt::If {
                cond: inside,
                then: vec![
                    Stmt::Mma(MmaStmt::Epilogue { acc: reg(yr, q), pred: Expr::c(1), ops }),
                    Stmt::Simt(SimtStmt::StGlobal {
                        dst: GlobalRef { param: y, offset: c_at },
                        src: reg(yr, q),
                        dtype: gg.gemm.out,
                        pred: Expr::c(1),
                    }),
                ],
                otherwise: Vec::new(),
            });
        }
    }
    Ok(Launch {
        kernel: s.finish(body, idx.lt(p * k), inner),
        form: Form::WinogradTransform,
        args,
        region: g.ids().collect(),
        outs: vec![out_buf],
        plan: None,
    })
}

#[cfg(test)]
mod tests;
