//! How a compiled GPU kernel of a graph is launched: what each kernel
//! parameter is bound to (a graph input or output, a zeroed scratch
//! buffer, an integer) and the launch geometry, for concrete shapes.
//!
//! Both users of a compiled graph read this one description: the typed
//! launch functions `kernel!` generates (feature `sm80`) and
//! `tgc run --backend cuda`. The GEMM kernel's grid is an expression of its
//! integer parameters ([`super::ir::Kernel::grid`]); it is evaluated here,
//! once, for the graph's `M`, `N`, `K`.

use crate::diag;
use crate::diag::DResult;
use crate::DType;

use super::ir::{BinOp, Expr, Kernel, ParamKind};
use super::lower::{GpuKernel, Operand};
use super::sm80::BLayout;

/// What one kernel parameter is bound to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Binding {
    /// The graph input at this index (`Graph::inputs()` order).
    Input(usize),
    /// The graph output at this index (`Graph::outputs` order).
    Output(usize),
    /// A device buffer of `elems` elements of `dtype`, zeroed before the
    /// launch (split-K's partial sums and tile locks).
    Scratch {
        /// Element type.
        dtype: DType,
        /// Element count.
        elems: u64,
    },
    /// A 32-bit integer argument.
    I32(i32),
    /// A 64-bit integer argument.
    I64(i64),
}

/// A kernel with its parameters bound and its geometry evaluated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchSpec {
    /// The kernel's `extern "C"` name.
    pub symbol: String,
    /// One binding per kernel parameter, in ABI order.
    pub params: Vec<Binding>,
    /// Blocks per grid, x/y/z.
    pub grid: [u32; 3],
    /// Threads per block, x/y/z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, in bytes.
    pub smem_bytes: u32,
}

/// The byte alignment every tensor argument of a GPU kernel needs: the
/// 16-byte vector loads and stores (`cp.async.cg`, `st.global.v8.f16`).
pub const TENSOR_ALIGN: usize = 16;

/// The launch of `k`, the kernel [`super::lower::build`] made for a graph
/// whose inputs are, in order, `k.graph.inputs` and whose only output is
/// the kernel's `C`.
///
/// Errors: `Internal` when `M`, `N` or `K` is not concrete, a parameter has
/// no binding, or the grid does not evaluate to extents in `1..=u32::MAX`.
pub fn gemm_launch(k: &GpuKernel) -> DResult<LaunchSpec> {
    let extent = |axis: &str| -> DResult<i64> {
        k.graph
            .problem
            .axes
            .iter()
            .find(|a| a.name == axis)
            .and_then(|a| a.extent)
            .map(|e| e as i64)
            .ok_or_else(|| diag!(Internal, "GEMM axis `{axis}` has no concrete extent"))
    };
    let (m, n, kk) = (extent("m")?, extent("n")?, extent("k")?);
    let ldb = if k.graph.gemm.b_layout == BLayout::KN { n } else { kk };
    let input_of = |role: Operand| -> DResult<Binding> {
        k.graph
            .inputs
            .iter()
            .position(|(_, r)| *r == role)
            .map(Binding::Input)
            .ok_or_else(|| diag!(Internal, "the GEMM has no input for {role:?}"))
    };
    let p = &k.params;
    let kernel = &k.kernel;
    let mut params: Vec<Option<Binding>> = vec![None; kernel.params.len()];
    let mut set = |id: super::ir::ParamId, b: Binding| {
        if let Some(slot) = params.get_mut(id.0 as usize) {
            *slot = Some(b);
        }
    };
    set(p.a, input_of(Operand::A)?);
    set(p.b, input_of(Operand::B)?);
    if let Some(bias) = p.bias {
        set(bias, input_of(Operand::Bias)?);
    }
    if let Some(res) = p.residual {
        set(res, input_of(Operand::Residual)?);
    }
    set(p.c, Binding::Output(0));
    let (mu, nu) = (m as u64, n as u64);
    if let Some(ws) = p.workspace {
        set(ws, Binding::Scratch { dtype: DType::F32, elems: mu * nu });
    }
    if let Some(locks) = p.locks {
        // At most one lock per output tile; no tile is smaller than one
        // m16n8 MMA.
        set(locks, Binding::Scratch { dtype: DType::I32, elems: mu.div_ceil(16) * nu.div_ceil(8) });
    }
    let scalars = [(p.m, m), (p.n, n), (p.k, kk), (p.lda, kk), (p.ldb, ldb), (p.ldc, n)];
    for (id, v) in scalars {
        let b = match kernel.params.get(id.0 as usize).map(|q| q.kind) {
            Some(ParamKind::I64) => Binding::I64(v),
            _ => Binding::I32(i32::try_from(v).map_err(|_| diag!(Internal, "{v} does not fit a 32-bit parameter"))?),
        };
        set(id, b);
    }
    let params: Vec<Binding> = params
        .into_iter()
        .zip(&kernel.params)
        .map(|(b, q)| b.ok_or_else(|| diag!(Internal, "kernel parameter `{}` has no binding", q.name)))
        .collect::<DResult<_>>()?;
    let mut grid = [1u32; 3];
    for (g, e) in grid.iter_mut().zip(&kernel.grid) {
        let v = eval(kernel, e, &params)?;
        *g = u32::try_from(v)
            .ok()
            .filter(|&v| v >= 1)
            .ok_or_else(|| diag!(Internal, "grid extent {v} is not in 1..=u32::MAX"))?;
    }
    let smem_bytes = u32::try_from(kernel.smem_bytes)
        .map_err(|_| diag!(Internal, "{} bytes of shared memory", kernel.smem_bytes))?;
    Ok(LaunchSpec { symbol: kernel.name.clone(), params, grid, block: kernel.block, smem_bytes })
}

/// `e` over the integer bindings of `params`.
fn eval(kernel: &Kernel, e: &Expr, params: &[Binding]) -> DResult<i64> {
    let bad = |what: String| diag!(Internal, "grid expression of `{}`: {what}", kernel.name);
    Ok(match e {
        Expr::Const(v) => *v,
        Expr::Param(id) => match params.get(id.0 as usize) {
            Some(Binding::I32(v)) => *v as i64,
            Some(Binding::I64(v)) => *v,
            _ => return Err(bad(format!("parameter {} is not an integer", id.0))),
        },
        Expr::Bin(op, a, b) => {
            let (a, b) = (eval(kernel, a, params)?, eval(kernel, b, params)?);
            let overflow = || bad("overflow or division by zero".into());
            match op {
                BinOp::Add => a.checked_add(b).ok_or_else(overflow)?,
                BinOp::Sub => a.checked_sub(b).ok_or_else(overflow)?,
                BinOp::Mul => a.checked_mul(b).ok_or_else(overflow)?,
                BinOp::Div => a.checked_div(b).ok_or_else(overflow)?,
                BinOp::Rem => a.checked_rem(b).ok_or_else(overflow)?,
                BinOp::Min => a.min(b),
                BinOp::Max => a.max(b),
                BinOp::Lt => (a < b) as i64,
                BinOp::Le => (a <= b) as i64,
                BinOp::Eq => (a == b) as i64,
                BinOp::Ne => (a != b) as i64,
                other => return Err(bad(format!("operator {other:?}"))),
            }
        }
        Expr::Select(c, a, b) => {
            if eval(kernel, c, params)? != 0 {
                eval(kernel, a, params)?
            } else {
                eval(kernel, b, params)?
            }
        }
        other => return Err(bad(format!("{other:?} is not a launch-time value"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(text: &str) -> crate::tiny::Graph {
        crate::pipeline::load(text, crate::pipeline::Format::Dsl, None).unwrap().graph
    }

    #[test]
    fn a_gemm_binds_its_inputs_output_and_sizes_and_covers_c_with_its_grid() {
        let g = graph(
            "graph g(x: bf16[200, 64], w: bf16[64, 96], b: bf16[96]) -> (y: bf16[200, 96]) {
                y = relu(matmul(x, w) + b)
                return y
            }",
        );
        let k = super::super::lower::build(&g, &crate::plan::target::SM80, "tgc_g").unwrap();
        let s = gemm_launch(&k).unwrap();
        assert_eq!(s.symbol, "tgc_g");
        assert_eq!(&s.params[..4], &[Binding::Input(0), Binding::Input(1), Binding::Input(2), Binding::Output(0)]);
        let ints: Vec<&Binding> = s.params.iter().filter(|b| matches!(b, Binding::I32(_))).collect();
        let want = [200, 96, 64, 64, 96, 96].map(Binding::I32);
        assert_eq!(ints, want.iter().collect::<Vec<_>>());
        // Each block computes a BM×BN tile: the grid covers 200×96.
        let tiles = s.grid[0] as u64 * s.grid[1] as u64;
        assert!(tiles >= 1 && s.grid[2] >= 1, "{:?}", s.grid);
        assert_eq!(s.block, k.kernel.block);
        assert_eq!(s.smem_bytes as u64, k.kernel.smem_bytes);
    }
}
