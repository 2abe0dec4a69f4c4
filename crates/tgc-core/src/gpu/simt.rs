//! The SIMT template: every region of a graph as a GPU kernel without
//! tensor cores, generated from the CPU loop-nest IR ([`loop_ir`]), which
//! stays the one description of what a region computes (`000` §1.5 regions,
//! §1.8 GPU dialect, §7 the GPU path; issue 5 item 3).
//!
//! [`lower_program`] lowers a graph with [`from_tiny::lower`] (regions,
//! IndexBook subscripts, no strip-mining, row groups) and turns each row
//! group into one [`ir::Kernel`] and each other [`loop_ir::Kernel`] into
//! one, of five forms ([`Form`]):
//!
//! - [`Form::Elementwise`] (no reduction): one thread per output element.
//!   Blocks of [`THREADS`] threads, at most [`MAX_BLOCKS`] blocks, and a
//!   grid-stride loop over the row-major flattened output; the output
//!   multi-index comes from the flat index by `%` and `/` of the extents
//!   (symbolic extents are kernel parameters). The value is a
//!   [`ScalarExpr`] (a mirror of [`loop_ir::Expr`]) computed in registers
//!   and stored with one `st.global`.
//! - [`Form::WarpReduce`] (a reduction with no reduction computed at its
//!   reads, whose reduce loops are not a constant count below 32): one warp
//!   per output element, [`WARPS`] warps per block (`block = (32, WARPS)`,
//!   the warp is `threadIdx.y`, so the row guard is the same in all lanes of
//!   a warp); lane `l` accumulates the flattened reduce points `l, l + 32,
//!   …`, then five `shfl.sync.bfly` steps (lane masks 16, 8, 4, 2, 1) give
//!   every lane the combination of all 32; lane 0 evaluates the value (the
//!   epilogue, which reads the accumulator rounded to its dtype) and stores.
//!   The order of a sum differs from the CPU backend's (32 strided partial
//!   sums, then a tree), so f32 results differ by rounding; MAX/MIN are
//!   exact.
//! - [`Form::Rows`] (a row group of the CPU back end, [`crate::cpu::rows`]:
//!   consecutive kernels over the same rows, each reading what the others
//!   wrote only in its own row — a softmax's cast, max, exp, sum and
//!   division, a layernorm's): one kernel running the group's kernels in
//!   order over each row. When the rows have a constant length and every
//!   local temporary is read at the point being computed (or is one value
//!   a row), those temporaries live in the lanes' registers
//!   (`register_rows`: one to eight warps a row, no barrier with one, the
//!   reductions' warp totals in shared memory with more). Otherwise a
//!   block of one warp per row with `bar.sync` between the kernels:
//!   an element-wise step computes [`ROWS_CHUNK`] points per lane before it
//!   stores any (several loads in flight); a row reduction is lanes plus
//!   the butterfly, as `WarpReduce`. The group's local temporaries
//!   (written and read only in it, in the same row) live as one row each
//!   in shared memory when the rows have a constant length and fit
//!   [`ROWS_SMEM_MAX`]; otherwise they stay buffers in global memory. A
//!   kernel of the group that is none of these (a reduction with other
//!   output loops, or one computed at its reads) leaves the group to the
//!   other forms.
//! - [`Form::Serial`] (any other reduction: short reduce loops — a pooling
//!   window, a small contraction such as the `Q·Kᵀ` of a naive attention or
//!   a convolution —, or reductions computed at their reads, `ComputeAt`):
//!   one thread per output element as `Elementwise`, running the reduce
//!   loops serially in the CPU backend's order; a computed-at reduction is
//!   recomputed, under its guard, before each update of the accumulator.
//! - [`Form::Scan`] (a `SCAN`, [`loop_ir::Scan`]): a block scan
//!   (`Builder::block_scan`): the warps of a block take consecutive
//!   segments of a row's tile, hold them in registers, exchange their
//!   totals through shared memory across a `bar.sync`, and scan their
//!   chunks of 32 points with `shfl.sync.up` from the carry before them; a
//!   row longer than a tile ([`SCAN_TILES`]) in three passes (tile totals,
//!   their scan, every tile from its carry).
//!
//! Numerics are the CPU backend's (`loop_ir` invariants): f32 compute for
//! f16/bf16/f32 (16-bit values rounded at `CAST` and on store), wrapping
//! i32, bool as 0/1; NaN-propagating MAX/MIN; RELU as `x < 0 ? 0 : x`;
//! accumulators wide, read rounded to their dtype.
//!
//! Kernel parameters ([`Launch::args`]): a `const` pointer per buffer the
//! kernel reads (in buffer id order), the pointer it writes, then one
//! `long long` per symbol of the program ([`GpuProgram::symbols`], the CPU
//! backend's `dims` order), all of them whether the kernel uses them or not.
//! Units: pointer offsets in elements; extents and indices `i64`.
//!
//! Vectorisation: an element-wise kernel whose output is a float tensor
//! stored row-major by its loops ([`vectorisable`]) computes [`VEC`]
//! consecutive elements per thread and stores them with one
//! `st.global.v4` (16 bytes in f32, 8 in f16/bf16, aligned: `4·flat`
//! elements from a 256-byte aligned base). When the innermost extent is a
//! constant multiple of 4, every group lies in one row: one multi-index
//! per group (the innermost index stepping by one per element), and every
//! load whose subscript is `i_last + 4·(…)` with constant coefficients (not
//! under a `PAD` guard) is one `ld.global.v4` ([`Stmt::LdGlobalVec`]; at the
//! group's first element the subscript is a multiple of 4, so the access is
//! aligned); broadcast and other loads stay scalar. Otherwise each element
//! of a group has its own multi-index and scalar loads, and the last partial
//! group scalar stores: with a symbolic innermost extent the alignment of
//! `row · C` is a run-time fact, and this template decides at compile time.
//!
//! GEMM hook: [`lower_program_for`] with a target gives a graph that is
//! one contraction (GEMM, batched matmul, convolution) + epilogue with concrete
//! sizes the sm80 tensor-core kernel of [`super::lower::build`] as its one
//! launch ([`Form::Gemm`], its `M`, `N`, `K` and leading dimensions as
//! [`LaunchArg::Int`]s), unless the plan splits K (its workspace and locks are
//! not buffers of a program; plan choice does not split K today); every other
//! graph gets the SIMT form of every region, the correct path for all graphs
//! (the naive matmul of a region the MMA template does not take is a `Serial`
//! or `WarpReduce` kernel). Choosing the sm80 kernel for one region of a larger
//! graph needs that region as its own graph (its inputs being buffers of this
//! program): [`Launch::region`] names the Tiny nodes a launch computes, for
//! that matcher.
//!
//! The tests run the kernels in the emulator against the reference
//! interpreter and compile them to sm_80 cubins with NVRTC; the GPU tier
//! runs them on a GPU (it passed on an H100 on 2026-11-26 and on an H200
//! on 2026-11-27, compute-sanitizer clean). Speed there (README, "GPU
//! benchmarks"): on the H200 the register rows run an f16 softmax over
//! 8192×1024 at 2680 GB/s, 1.43× `torch.softmax` in the same run. On the
//! H100 the shared-memory row form had taken it from 224
//! GB/s as five kernels with f32 temporaries in global memory to 400 GB/s
//! (0.21 of `torch.softmax`); at 4096 columns, where the rows do not fit
//! [`ROWS_SMEM_MAX`], one warp per row is no faster than the five kernels.

use std::collections::BTreeMap;

use crate::affine::{AffAtom, AffExpr};
use crate::cpu::from_tiny;
use crate::cpu::loop_ir::{self, BufId, Buffer, Role};
use crate::diag;
use crate::diag::DResult;
use crate::sym::{Atom, Dim as SymDim};
use crate::tiny::{Constraint, Graph, NodeId};
use crate::DType;

use super::emulate::{self, Arg};
use super::ir::{self, *};

/// Threads per block of the one-thread-per-element forms.
pub const THREADS: u32 = 256;
/// Most blocks of a grid-stride kernel (more elements loop).
pub const MAX_BLOCKS: i64 = 1 << 16;
/// Output elements per thread of a vectorised [`Form::Elementwise`] kernel.
pub const VEC: i64 = 4;
/// The byte alignment every tensor argument of a GPU kernel needs: the
/// 16-byte vector accesses (`cp.async.cg`, `ld`/`st.global.v4`).
pub const TENSOR_ALIGN: usize = 16;
/// Warps (output elements) per block of [`Form::WarpReduce`].
pub const WARPS: u32 = 4;

/// How a kernel maps a region onto threads (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// No reduction: one thread per output element (four per thread with a
    /// vector store when [`vectorisable`]).
    Elementwise,
    /// One warp per output element, lanes striding the reduce loops, a
    /// `shfl.sync.bfly` tree, lane 0 storing.
    WarpReduce,
    /// One thread per output element running the reduce loops serially.
    Serial,
    /// A row group of the CPU back end ([`crate::cpu::rows`]) as one
    /// kernel running the group's kernels in order over each row (a row
    /// reduction by the lanes and a `shfl.sync.bfly` tree): its local rows
    /// in registers (`lower_rows_in_registers`), or a block of one warp
    /// per row with the local rows in shared or global memory and a
    /// `bar.sync` between kernels.
    Rows,
    /// The sm80 tensor-core template ([`super::lower::build`]) for a whole
    /// graph that is one contraction (GEMM, batched matmul, convolution) +
    /// epilogue ([`lower_program_for`]).
    Gemm,
    /// A transform of the Winograd convolution ([`super::winograd`]): one
    /// thread per tile (or filter) and channel, around its batched GEMM.
    WinogradTransform,
    /// The sm80 fused attention template ([`super::attention::build`],
    /// FlashAttention-2 on `mma.sync`) for a whole graph that is one
    /// attention ([`lower_program_for`]).
    Attention,
    /// A scan ([`loop_ir::Scan`]): a block scan (`Builder::block_scan`,
    /// blocks of [`ScanTiles`]). Warp `w` of a row's tile takes a segment
    /// of it into registers, lane `l` the points `32·c + l` of chunk `c`
    /// (the identity past the end); the lanes fold them and the butterfly
    /// gives the warp's total, which goes to shared memory; after
    /// `bar.sync` the warp starts from the tile's carry combined with the
    /// totals of the warps before it, and scans each chunk with five
    /// [`Stmt::ShflUpScan`] steps (Hillis & Steele, deltas 1, 2, 4, 8, 16),
    /// the carry combined in, the lanes inside the row storing (an
    /// exclusive scan the value of the lane before, [`Stmt::ShflIdx`]),
    /// lane 31's value the next carry. A row not known to fit one tile is
    /// three launches of this form (reduce-then-scan): the tiles' totals
    /// into a temporary, their scan in place per row, and every tile from
    /// the total before it. The running value stays in f32 for f16/bf16
    /// (as the CPU's accumulator), rounded only when stored. The order is
    /// the chunks' and warps', so float sums differ from the CPU's by
    /// rounding; MAX and MIN are exact.
    Scan,
}

impl Form {
    /// Whether the kernel runs on the tensor cores (an MMA template).
    pub fn tensor_cores(self) -> bool {
        match self {
            Form::Gemm | Form::Attention => true,
            Form::Elementwise | Form::WarpReduce | Form::Serial | Form::Rows | Form::Scan | Form::WinogradTransform => {
                false
            }
        }
    }
}

/// What a kernel parameter is bound to at launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchArg {
    /// The device pointer of [`GpuProgram::buffers`]`[id]`.
    Buffer(BufId),
    /// The value of [`GpuProgram::symbols`]`[k]` (a `long long`).
    Dim(usize),
    /// A constant for the parameter's integer type (the sm80 template's
    /// `M`, `N`, `K` and leading dimensions).
    Int(i64),
    /// The TMA tensor map the parameter's [`ir::TensorMapParam`]
    /// describes, made at launch from this launch's arguments for its
    /// tensor and scalars ([`Launch::tensor_map`]).
    TensorMap,
}

/// One kernel of a program and how to launch it.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    /// The GPU dialect kernel; its `grid` is over its scalar parameters,
    /// its `block` constant; `smem_bytes` of dynamic shared memory (0 for
    /// the SIMT forms; the sm80 template's stages, above 48 KiB needing
    /// `cudaFuncAttributeMaxDynamicSharedMemorySize`).
    pub kernel: ir::Kernel,
    pub form: Form,
    /// One per kernel parameter, in order.
    pub args: Vec<LaunchArg>,
    /// The Tiny nodes it computes (`loop_ir::Kernel::nodes`: the root first).
    pub region: Vec<NodeId>,
    /// The buffers it writes (one, but for [`Form::Rows`]: each of its
    /// kernels' outputs, in order).
    pub outs: Vec<BufId>,
    /// The Schedule Plan of a tensor-core kernel ([`Form::Gemm`],
    /// [`Form::Attention`]; `000` §1.7); `None` for the SIMT forms.
    pub plan: Option<crate::plan::Plan>,
}

impl Launch {
    /// The grid (blocks per dimension) for the symbol values `dims` (in
    /// [`GpuProgram::symbols`] order).
    ///
    /// Errors: `Internal` for a grid expression that reads other than
    /// parameters bound to dims, or divides by zero.
    pub fn grid(&self, dims: &[i64]) -> DResult<[i64; 3]> {
        let mut out = [0; 3];
        for (o, e) in out.iter_mut().zip(&self.kernel.grid) {
            *o = eval_launch(e, &self.args, dims)?;
        }
        Ok(out)
    }

    /// Threads per block dimension.
    pub fn block(&self) -> [u32; 3] {
        self.kernel.block
    }

    /// The runtime's description of tensor map `m` (a parameter of this
    /// launch's kernel) at `dims`: its tensor is the buffer this launch
    /// binds to `m.tensor` (as `of_buf`, [`GpuProgram::buffer_args`],
    /// makes it a kernel argument), its extents and row stride the values
    /// of the scalars `m` names.
    ///
    /// Errors: `Internal` when `m.tensor` is not bound to a buffer or a
    /// scalar is negative or not bound to a value.
    pub fn tensor_map(
        &self,
        m: &ir::TensorMapParam,
        of_buf: &[tgc_runtime::launch::StepArg],
        dims: &[i64],
    ) -> DResult<tgc_runtime::launch::MapArg> {
        use tgc_runtime::launch::{BufferArg, MapArg, StepArg};
        let buffer = match self.args.get(m.tensor.0 as usize).and_then(|a| match a {
            LaunchArg::Buffer(b) => of_buf.get(b.0 as usize),
            _ => None,
        }) {
            Some(StepArg::Tensor(k)) => BufferArg::Tensor(*k),
            Some(StepArg::Temp(k)) => BufferArg::Temp(*k),
            _ => return Err(diag!(Internal, "the tensor of a tensor map is not bound to a buffer")),
        };
        let Some(ir::ParamKind::Ptr { dtype, .. }) = self.kernel.params.get(m.tensor.0 as usize).map(|p| p.kind) else {
            return Err(diag!(Internal, "the tensor of a tensor map is not a pointer parameter"));
        };
        let value = |p: ir::ParamId| -> DResult<u64> {
            let v = eval_launch(&Expr::Param(p), &self.args, dims)?;
            u64::try_from(v).map_err(|_| diag!(Internal, "a tensor map's extent or stride is {v}"))
        };
        Ok(MapArg {
            buffer,
            dtype,
            dims: [value(m.dims[0])?, value(m.dims[1])?],
            row_stride_bytes: value(m.row_stride)? * dtype.size_bytes() as u64,
            box_dims: m.box_dims,
            swizzle_128b: m.swizzle == ir::Swizzle::B128,
        })
    }
}

/// `e` of a kernel launched with `args` at `dims` ([`Expr::eval`]): a
/// grid or a tensor map's extent, which reads only dims and constants.
fn eval_launch(e: &Expr, args: &[LaunchArg], dims: &[i64]) -> DResult<i64> {
    let mut leaf = |x: Leaf| match x {
        Leaf::Param(p) => match args.get(p.0 as usize) {
            Some(LaunchArg::Dim(k)) => {
                dims.get(*k).copied().ok_or_else(|| diag!(Internal, "no value for dim {k} ({} given)", dims.len()))
            }
            Some(LaunchArg::Int(v)) => Ok(*v),
            _ => Err(diag!(Internal, "grid reads parameter {} that is not a dim", p.0)),
        },
        Leaf::Var(_) | Leaf::ThreadIdx(_) | Leaf::BlockIdx(_) | Leaf::GridDim(_) => {
            Err(diag!(Internal, "grid reads a thread, block or variable"))
        }
    };
    e.eval(&mut leaf, &|u| diag!(Internal, "a launch's grid {u}"))
}

/// A whole graph as SIMT kernels: what the CUDA runtime executes; every
/// buffer is dense row-major.
///
/// Running it (what [`emulate()`] does on the CPU):
///
/// 1. `dims`: one `i64` per [`GpuProgram::symbols`] entry;
///    [`GpuProgram::check_dims`].
/// 2. Compile [`GpuProgram::kernels`] as one unit
///    ([`super::cuda::compile`]); each kernel's entry point is
///    [`super::cuda::symbol`]`(&launch.kernel)`.
/// 3. Allocate every buffer: [`GpuProgram::elements`] × `dtype.size_bytes()`
///    bytes (inputs copied in; outputs need no initial value; temporaries
///    zeroed).
/// 4. For each [`Launch`] in order on one stream: grid
///    [`Launch::grid`]`(dims)`, block [`Launch::block`], `kernel.smem_bytes`
///    of dynamic shared memory, and the arguments [`Launch::args`]: a device
///    pointer for [`LaunchArg::Buffer`], `dims[k]` as `long long` for
///    [`LaunchArg::Dim`], the value for [`LaunchArg::Int`] in the
///    parameter's type (`int` or `long long`, `kernel.params[i].kind`).
#[derive(Clone, Debug, PartialEq)]
pub struct GpuProgram {
    /// The graph's name.
    pub name: String,
    /// Symbol names: the `long long` kernel arguments [`LaunchArg::Dim`]
    /// index this list (the CPU backend's `dims` order).
    pub symbols: Vec<String>,
    /// Facts the sizes must satisfy before anything runs (as the CPU
    /// backend's `loop_ir::Program::checks`).
    pub checks: Vec<Constraint>,
    /// Inputs ([`Role::Input`]), outputs ([`Role::Output`]) and temporaries
    /// ([`Role::Temp`], allocated uninitialised by the runtime on each run;
    /// the kernels write every byte of a temporary before they read it): dtype and shape as
    /// [`SymDim`]s of the symbols; bytes = elements × `dtype.size_bytes()`.
    pub buffers: Vec<Buffer>,
    /// The kernels in execution order.
    pub launches: Vec<Launch>,
}

impl GpuProgram {
    /// The element count of buffer `id` for `dims`.
    ///
    /// Errors: `UnboundSymbol`-like `Internal` errors for a shape that
    /// reads a symbol missing from `dims`.
    pub fn elements(&self, id: BufId, dims: &[i64]) -> DResult<i64> {
        let bind = |s: &str| self.symbols.iter().position(|x| x == s).and_then(|k| dims.get(k).copied());
        let mut n = 1i64;
        for d in &self.buffers[id.0 as usize].shape {
            let v = d.eval(&bind).map_err(|m| diag!(Internal, "buffer size: {m}"))?;
            n = n.saturating_mul(v);
        }
        Ok(n)
    }

    /// Checks [`GpuProgram::checks`] for the symbol values `dims` (in
    /// [`GpuProgram::symbols`] order), in order: what the runtime does before
    /// it allocates or launches anything.
    ///
    /// Errors: `AxisSizeMismatch` naming the first fact that fails (as the
    /// interpreter's binding of sizes), `UnboundSymbol` for a fact that reads
    /// a symbol `dims` lacks.
    pub fn check_dims(&self, dims: &[i64]) -> DResult<()> {
        let bind = |s: &str| self.symbols.iter().position(|x| x == s).and_then(|k| dims.get(k).copied());
        for c in &self.checks {
            let l = c.lhs.eval(&bind).map_err(|m| diag!(UnboundSymbol, "{}: {m}", c.what))?;
            let r = c.rhs.eval(&bind).map_err(|m| diag!(UnboundSymbol, "{}: {m}", c.what))?;
            let ok = match c.rel {
                crate::tiny::Rel::Eq => l == r,
                crate::tiny::Rel::Le => l <= r,
            };
            if !ok {
                return Err(diag!(
                    Io,
                    "{}: {l} {} {r} does not hold",
                    c.what,
                    if c.rel == crate::tiny::Rel::Eq { "=" } else { "<=" }
                ));
            }
        }
        Ok(())
    }

    /// Steps 3–4 above as the runtime's data for `dims` (in
    /// [`GpuProgram::symbols`] order): each temporary's bytes, and each
    /// launch's kernel symbol, evaluated grid, block, dynamic shared memory
    /// and arguments, the graph's tensors numbered inputs then outputs
    /// ([`tgc_runtime::launch::StepArg::Tensor`]). What a generated
    /// `sm80::steps` returns for the same dims, and what `tgc run --backend
    /// cuda` executes.
    ///
    /// Errors: those of [`GpuProgram::check_dims`]; `Io` for a size or grid
    /// out of range at these dims; `Internal` for an integer argument that
    /// does not fit its parameter.
    pub fn steps(&self, dims: &[i64]) -> DResult<tgc_runtime::launch::Steps> {
        use tgc_runtime::launch::{Launch as Geometry, Step, StepArg, Steps};
        self.check_dims(dims)?;
        let mut temps = Vec::new();
        for (k, b) in self.buffers.iter().enumerate().filter(|(_, b)| b.role == Role::Temp) {
            let n = self.elements(BufId(k as u32), dims)?;
            let bytes = usize::try_from(n)
                .ok()
                .and_then(|n| n.checked_mul(b.dtype.size_bytes()))
                .filter(|&v| v <= isize::MAX as usize)
                .ok_or_else(|| diag!(Io, "temporary `{}` of {n} elements does not fit in memory", b.label))?;
            temps.push(bytes);
        }
        let of_buf = self.buffer_args();
        let mut steps = Vec::new();
        for l in &self.launches {
            let symbol = super::cuda::symbol(&l.kernel);
            let grid = l.grid(dims)?;
            let extent = |v: i64| tgc_runtime::launch::grid_extent(&symbol, v).map_err(|e| diag!(Io, "{e}"));
            let grid = [extent(grid[0])?, extent(grid[1])?, extent(grid[2])?];
            let mut args = Vec::new();
            for (a, p) in l.args.iter().zip(&l.kernel.params) {
                let int = |v: i64| -> DResult<StepArg> {
                    Ok(match p.kind {
                        ir::ParamKind::I32 => StepArg::I32(
                            i32::try_from(v).map_err(|_| diag!(Internal, "{v} does not fit parameter `{}`", p.name))?,
                        ),
                        _ => StepArg::I64(v),
                    })
                };
                args.push(match a {
                    LaunchArg::Buffer(b) => of_buf[b.0 as usize],
                    LaunchArg::Dim(k) => int(*dims
                        .get(*k)
                        .ok_or_else(|| diag!(Internal, "no value for dim {k} ({} given)", dims.len()))?)?,
                    LaunchArg::Int(v) => int(*v)?,
                    LaunchArg::TensorMap => match &p.kind {
                        ir::ParamKind::TensorMap(m) => StepArg::TensorMap(l.tensor_map(m, &of_buf, dims)?),
                        _ => return Err(diag!(Internal, "a tensor map bound to parameter `{}`", p.name)),
                    },
                });
            }
            let smem = u32::try_from(l.kernel.launch_smem_bytes())
                .map_err(|_| diag!(Internal, "{} bytes of shared memory", l.kernel.launch_smem_bytes()))?;
            steps.push(Step {
                kernel: symbol.into(),
                launch: Geometry {
                    grid,
                    block: l.block(),
                    dynamic_smem_bytes: smem,
                    persistent: l.kernel.persistent,
                    cluster: l.kernel.cluster,
                },
                args,
            });
        }
        Ok(Steps { temps, steps })
    }

    /// Each buffer as a kernel argument of [`GpuProgram::steps`]: input `i`
    /// is `Tensor(i)`, output `o` is `Tensor(inputs + o)`, and the `t`-th
    /// temporary in buffer order is `Temp(t)`.
    pub fn buffer_args(&self) -> Vec<tgc_runtime::launch::StepArg> {
        use tgc_runtime::launch::StepArg;
        let n_in = self.buffers.iter().filter(|b| matches!(b.role, Role::Input(_))).count();
        let mut temps = 0;
        let of = |b: &Buffer| match b.role {
            Role::Input(i) => StepArg::Tensor(i),
            Role::Output(o) => StepArg::Tensor(n_in + o),
            Role::Temp => {
                temps += 1;
                StepArg::Temp(temps - 1)
            }
        };
        self.buffers.iter().map(of).collect()
    }

    /// The program without the temporaries no launch reads or writes (a
    /// row group's local rows held in registers or shared memory, a fused
    /// attention's scores), buffer ids renumbered: the runtime allocates
    /// every temporary on each run ([`GpuProgram::steps`]), so an unused
    /// one costs an allocation per run.
    fn without_unused_temps(mut self) -> GpuProgram {
        let used =
            |b: &BufId| self.launches.iter().any(|l| l.args.contains(&LaunchArg::Buffer(*b)) || l.outs.contains(b));
        let keep: Vec<bool> =
            (0..self.buffers.len()).map(|k| self.buffers[k].role != Role::Temp || used(&BufId(k as u32))).collect();
        let mut new_id = Vec::new();
        let mut next = 0u32;
        for &k in &keep {
            new_id.push(BufId(next));
            next += k as u32;
        }
        let mut k = 0;
        self.buffers.retain(|_| {
            k += 1;
            keep[k - 1]
        });
        for l in &mut self.launches {
            for a in &mut l.args {
                if let LaunchArg::Buffer(b) = a {
                    *b = new_id[b.0 as usize];
                }
            }
            for b in &mut l.outs {
                *b = new_id[b.0 as usize];
            }
        }
        self
    }

    /// The kernels, for one NVRTC unit ([`super::cuda::compile`]).
    pub fn kernels(&self) -> Vec<ir::Kernel> {
        self.launches.iter().map(|l| l.kernel.clone()).collect()
    }
}

/// Lowers every region of `g` to a SIMT kernel (see the module doc).
///
/// Errors: those of [`from_tiny::lower`]; `Unsupported` for a value the
/// SIMT template cannot compute (none today beyond the CPU backend's).
pub fn lower_program(g: &Graph) -> DResult<GpuProgram> {
    lower_regions(g, None, SCAN_TILES, &mut Vec::new())
}

/// [`lower_program`], except that with `templates` the regions are formed
/// for them (operands read through a broadcast stored, no compute-at
/// fusion), an attention inside the graph is one fused launch
/// ([`super::template::attention_regions`]) and each region that is a
/// contraction + epilogue a tensor-core template takes
/// ([`super::template::lower_region`]) is that template's kernel; each
/// refusal is pushed to `notes`. Scans run in blocks of `tiles`.
fn lower_regions(
    g: &Graph,
    templates: Option<(&crate::plan::Target, &dyn crate::plan::cost::Estimator)>,
    tiles: ScanTiles,
    notes: &mut Vec<crate::Diagnostic>,
) -> DResult<GpuProgram> {
    let opts = if templates.is_some() { super::template::region_options() } else { from_tiny::Options::default() };
    let mut p = from_tiny::lower_with(g, &opts)?;
    let totals = scan_totals(&mut p, tiles);
    let stored = templates.map(|_| super::template::stored_values(g, &p)).unwrap_or_default();
    // Attentions inside a larger graph: one fused launch in place of
    // their regions' kernels, at the last of them.
    let mut fused = match templates {
        Some((t, e)) => super::template::fused_regions(g, &p, &stored, t, e),
        None => Vec::new(),
    };
    let mut launches = Vec::new();
    // Buffers a region's template adds (the Winograd transforms').
    let mut temps = Vec::new();
    let mut k = 0;
    while k < p.kernels.len() {
        if let Some(f) = fused.iter().position(|f| f.kernels.contains(&k)) {
            if fused[f].kernels.last() == Some(&k) {
                launches.push(fused.remove(f).launch);
            }
            k += 1;
            continue;
        }
        let group = p.rows.iter().find(|r| r.kernels.start == k);
        // A row group holding a fused attention's kernel is not a launch.
        let group = group.filter(|r| !fused.iter().any(|f| f.kernels.iter().any(|x| r.kernels.contains(x))));
        if let Some(group) = group {
            if let Some(l) = lower_rows(&p, group)? {
                launches.push(l);
                k = group.kernels.end;
                continue;
            }
        }
        let first_temp = (p.buffers.len() + temps.len()) as u32;
        let template =
            templates.and_then(|(t, e)| super::template::lower_region(g, &p, &stored, &p.kernels[k], t, e, first_temp));
        match template {
            Some(Ok(r)) => {
                launches.extend(r.launches);
                temps.extend(r.temps);
            }
            Some(Err(d)) => {
                notes.push(d);
                launches.extend(lower_simt(&p, k, totals[k], tiles)?);
            }
            None => launches.extend(lower_simt(&p, k, totals[k], tiles)?),
        }
        k += 1;
    }
    let mut buffers = p.buffers;
    buffers.extend(temps);
    let prog =
        GpuProgram { name: p.name.clone(), symbols: p.symbols.clone(), checks: p.checks.clone(), buffers, launches };
    Ok(prog.without_unused_temps())
}

/// [`lower_program`], except that a graph a tensor-core template of
/// `target` takes ([`super::template::lower`]: one contraction (GEMM,
/// batched matmul, convolution) + epilogue, or one attention, with
/// concrete sizes) gets that template's one launch ([`Form::Gemm`],
/// [`Form::Attention`]); any other graph (or `target` `None`) gets the
/// SIMT kernels.
///
/// Errors: those of [`lower_program`].
pub fn lower_program_for(g: &Graph, target: Option<&crate::plan::Target>) -> DResult<GpuProgram> {
    match target {
        Some(t) => lower_program_with(g, t, &crate::plan::cost::Analytic),
        None => lower_program(g),
    }
}

/// [`lower_program_for`] `target`, a GEMM's plan ranked by `estimator`
/// ([`super::lower::build_with`]).
///
/// Errors: those of [`lower_program`].
pub fn lower_program_with(
    g: &Graph,
    target: &crate::plan::Target,
    estimator: &dyn crate::plan::cost::Estimator,
) -> DResult<GpuProgram> {
    Ok(lower_program_noting(g, target, estimator)?.0)
}

/// [`lower_program_with`]: the whole graph on a tensor-core template when
/// one of its pattern takes it ([`super::template::lower`]), else every
/// region on the SIMT kernels but those a template takes (an attention,
/// and a GEMM or convolution + epilogue, inside a larger graph:
/// [`super::template::attention_regions`], [`super::template::lower_region`]);
/// and the templates' refusals (a symbolic size,
/// f32 operands, a layout, a launch limit, an op the template does not
/// fuse), each positioned, for what runs as SIMT kernels.
///
/// Errors: those of [`lower_program`].
pub fn lower_program_noting(
    g: &Graph,
    target: &crate::plan::Target,
    estimator: &dyn crate::plan::cost::Estimator,
) -> DResult<(GpuProgram, Vec<crate::Diagnostic>)> {
    let whole = match super::template::lower(g, target, estimator) {
        Some(Ok(p)) => return Ok((p, Vec::new())),
        Some(Err(d)) => Some(d),
        None => None,
    };
    let mut notes = Vec::new();
    let prog = lower_regions(g, Some((target, estimator)), SCAN_TILES, &mut notes)?;
    // The whole graph's refusal, unless a region got a template after all
    // (a GEMM followed by a softmax) or a region says the same.
    if let Some(d) = whole {
        if !prog.launches.iter().any(|l| l.form.tensor_cores()) && !notes.iter().any(|n| n.message == d.message) {
            notes.insert(0, d);
        }
    }
    Ok((prog, notes))
}

/// The form [`lower_program`] gives a kernel.
pub fn form_of(k: &loop_ir::Kernel) -> Form {
    if k.scan.is_some() {
        return Form::Scan;
    }
    match &k.reduce {
        None => Form::Elementwise,
        Some(_) if !k.computed_at().is_empty() => Form::Serial,
        Some(r) => match SymDim::product(&r.loops).as_int() {
            Some(n) if n < 32 => Form::Serial,
            _ => Form::WarpReduce,
        },
    }
}

/// The builder of one kernel: parameters, registers, loop-variable bindings.
struct Builder<'p> {
    p: &'p loop_ir::Program,
    k: ir::Kernel,
    args: Vec<LaunchArg>,
    /// The pointer parameter of each buffer the kernel touches.
    buf_param: BTreeMap<BufId, ParamId>,
    /// The parameter of each symbol.
    sym_param: BTreeMap<String, ParamId>,
    /// `loop_ir` variable `i<k>` → its value.
    loop_vars: BTreeMap<u32, Expr>,
    /// The accumulator register, and the register of each computed-at reduce by id.
    acc: Option<RegId>,
    reduces: BTreeMap<u32, RegId>,
    /// Loads read from registers: vector registers (filled by one
    /// `LdGlobalVec` or `ld.shared.v4` per group of elements; read at
    /// `lane`, the element of the group being computed) or, when the flag
    /// is set, one register every element reads (a shared-row value the
    /// group does not index).
    vec_loads: Vec<(BufId, AffExpr, RegId, bool)>,
    lane: i64,
    /// Local temporaries of a register-row kernel held in registers: the
    /// array and, for a row, the index of the current group's first point
    /// (the element read is that plus [`Builder::lane`]); `None` for a
    /// value a row (element 0).
    row_regs: BTreeMap<BufId, (RegId, Option<Expr>)>,
}

fn ceil_div(a: Expr, b: Expr) -> Expr {
    (a + b.clone() - Expr::c(1)) / b
}

/// `floor(a / b)` for `b > 0`.
fn floor_div(a: Expr, b: Expr) -> Expr {
    if let Expr::Const(1) = b {
        return a;
    }
    Expr::bin(BinOp::FloorDiv, a, b)
}

/// `for (var = 0; var < n; var++)`, unrolled (`#pragma unroll`: register
/// indices may use `var`).
fn unrolled(var: VarId, n: i64, body: Vec<Stmt>) -> Stmt {
    Stmt::For { var, start: Expr::c(0), end: Expr::c(n), step: 1, unroll: true, body }
}

/// The five `shfl.sync.bfly` steps (lane masks 16, 8, 4, 2, 1) that leave
/// a warp's `op` of `acc` in every lane.
fn butterfly(op: crate::tiny::ReduceOp, dtype: DType, acc: &RegRef) -> Vec<Stmt> {
    [16, 8, 4, 2, 1].map(|m| Stmt::ShflBfly { op, dtype, acc: acc.clone(), lane_mask: m }).to_vec()
}

/// Warp `warp`'s slot of a [`Builder::warp_totals`] buffer.
fn warp_total_at(smem: SmemId, dtype: DType, warp: Expr) -> SmemRef {
    SmemRef { buf: smem, offset: warp * Expr::c(dtype.size_bytes() as i64), swizzle: Swizzle::IDENTITY }
}

/// Lane 0 of each warp (`threadIdx.y`) stores its total `acc` in the
/// warp's slot of `smem` ([`Builder::warp_totals`]).
fn keep_warp_total(smem: SmemId, dtype: DType, acc: &RegRef) -> Stmt {
    let keep =
        Stmt::StShared { dst: warp_total_at(smem, dtype, Expr::ThreadIdx(Dim::Y)), src: vec![acc.clone()], dtype };
    Stmt::If { cond: Expr::ThreadIdx(Dim::X).eq(Expr::c(0)), then: vec![keep], otherwise: vec![] }
}

fn product(es: Vec<Expr>) -> Expr {
    es.into_iter().reduce(|a, b| a * b).unwrap_or(Expr::c(1))
}

impl<'p> Builder<'p> {
    fn new(p: &'p loop_ir::Program, lk: &loop_ir::Kernel) -> Builder<'p> {
        Builder::with_buffers(p, &format!("{}_{}", p.name, lk.name), &lk.reads(), &[lk.out])
    }

    /// A kernel named `name` with a `const` pointer parameter per buffer of
    /// `reads` that it does not write, then a writable one per buffer of
    /// `writes`, then the symbols.
    fn with_buffers(p: &'p loop_ir::Program, name: &str, reads: &[BufId], writes: &[BufId]) -> Builder<'p> {
        let mut k = ir::Kernel::empty(name, Arch::Sm80);
        let mut args = Vec::new();
        let mut buf_param = BTreeMap::new();
        let params = reads.iter().filter(|b| !writes.contains(b)).map(|&b| (b, false));
        for (b, writable) in params.chain(writes.iter().map(|&b| (b, true))) {
            let buf = p.buffer(b);
            buf_param.insert(b, ParamId(k.params.len() as u32));
            k.params.push(Param { name: buf.name.clone(), kind: ParamKind::Ptr { dtype: buf.dtype, writable } });
            args.push(LaunchArg::Buffer(b));
        }
        let mut sym_param = BTreeMap::new();
        for (j, s) in p.symbols.iter().enumerate() {
            sym_param.insert(s.clone(), ParamId(k.params.len() as u32));
            k.params.push(Param { name: s.clone(), kind: ParamKind::I64 });
            args.push(LaunchArg::Dim(j));
        }
        Builder {
            p,
            k,
            args,
            buf_param,
            sym_param,
            loop_vars: BTreeMap::new(),
            acc: None,
            reduces: BTreeMap::new(),
            vec_loads: Vec::new(),
            lane: 0,
            row_regs: BTreeMap::new(),
        }
    }

    fn var(&mut self, name: &str) -> VarId {
        self.k.vars.push(name.to_string());
        VarId(self.k.vars.len() as u32 - 1)
    }

    /// A one-element register array named `name`, or `name` and its index
    /// when the kernel has one of that name (a [`Form::Rows`] kernel's
    /// second accumulator).
    fn reg(&mut self, name: &str, dtype: DType) -> RegRef {
        let taken = self.k.regs.iter().any(|r| r.name == name);
        let name = if taken { format!("{name}{}", self.k.regs.len()) } else { name.to_string() };
        self.k.regs.push(RegArray { name, kind: compute_kind(dtype), len: 1 });
        RegRef { reg: RegId(self.k.regs.len() as u32 - 1), index: Expr::c(0) }
    }

    fn dim(&self, d: &SymDim) -> DResult<Expr> {
        let mut terms = Vec::new();
        for (atoms, c) in d.monomials() {
            let mut t = Expr::c(c);
            for a in atoms {
                let f = match a {
                    Atom::Sym(s) => Expr::Param(
                        *self.sym_param.get(s).ok_or_else(|| diag!(Internal, "symbol `{s}` is not a program dim"))?,
                    ),
                    Atom::FloorDiv(n, q) => floor_div(self.dim(n)?, self.dim(q)?),
                };
                t = if matches!(t, Expr::Const(1)) { f } else { t * f };
            }
            terms.push(t);
        }
        Ok(terms.into_iter().reduce(|a, b| a + b).unwrap_or(Expr::c(0)))
    }

    fn aff(&self, e: &AffExpr) -> DResult<Expr> {
        let mut out = self.dim(e.constant_part())?;
        for (atom, c) in e.terms() {
            let x = match atom {
                AffAtom::Var(v) => {
                    self.loop_vars.get(v).cloned().ok_or_else(|| diag!(Internal, "loop variable i{v} is not bound"))?
                }
                AffAtom::FloorDiv(inner, q) => floor_div(self.aff(inner)?, self.dim(q)?),
            };
            let c = self.dim(c)?;
            let term = if matches!(c, Expr::Const(1)) { x } else { c * x };
            out = if matches!(out, Expr::Const(0)) { term } else { out + term };
        }
        Ok(out)
    }

    /// The accumulator register.
    fn acc_ref(&self) -> DResult<RegRef> {
        let reg = self.acc.ok_or_else(|| diag!(Internal, "a reduction with no accumulator register"))?;
        Ok(RegRef { reg, index: Expr::c(0) })
    }

    /// The register of a load read from one, if it is, and whether every
    /// element reads its element 0.
    fn vec_load(&self, buf: BufId, index: &AffExpr) -> Option<(RegId, bool)> {
        self.vec_loads.iter().find(|(b, i, _, _)| *b == buf && i == index).map(|x| (x.2, x.3))
    }

    fn scalar(&self, e: &loop_ir::Expr) -> DResult<ScalarExpr> {
        use loop_ir::Expr as L;
        let b = |e: &loop_ir::Expr| self.scalar(e).map(Box::new);
        Ok(match e {
            L::Load { buf, dtype, .. } if self.row_regs.contains_key(buf) => {
                let (reg, at) = &self.row_regs[buf];
                let index = at.clone().map_or(Expr::c(0), |a| a + Expr::c(self.lane));
                ScalarExpr::Reg { reg: RegRef { reg: *reg, index }, dtype: *dtype }
            }
            L::Load { buf, index, dtype } => match self.vec_load(*buf, index) {
                Some((reg, one)) => {
                    let index = Expr::c(if one { 0 } else { self.lane });
                    ScalarExpr::Reg { reg: RegRef { reg, index }, dtype: *dtype }
                }
                None => ScalarExpr::Load {
                    src: GlobalRef { param: self.param_of(*buf)?, offset: self.aff(index)? },
                    dtype: *dtype,
                },
            },
            L::Gather { buf, base, stride, extent, at, dtype } => ScalarExpr::Gather {
                src: GlobalRef { param: self.param_of(*buf)?, offset: self.aff(base)? },
                stride: self.aff(stride)?,
                extent: self.aff(extent)?,
                at: b(at)?,
                dtype: *dtype,
            },
            L::Const { value, dtype } => ScalarExpr::Const { value: *value, dtype: *dtype },
            L::Acc { dtype } => ScalarExpr::Reg {
                reg: RegRef {
                    reg: self.acc.ok_or_else(|| diag!(Internal, "an accumulator read with no reduction"))?,
                    index: Expr::c(0),
                },
                dtype: *dtype,
            },
            L::Reduce { id, dtype, .. } => ScalarExpr::Reg {
                reg: RegRef {
                    reg: *self
                        .reduces
                        .get(id)
                        .ok_or_else(|| diag!(Internal, "computed-at reduce {id} has no register"))?,
                    index: Expr::c(0),
                },
                dtype: *dtype,
            },
            L::Unary { op, x } => ScalarExpr::Unary { op: *op, x: b(x)? },
            L::Binary { op, a, b: y } => ScalarExpr::Binary { op: *op, a: b(a)?, b: b(y)? },
            L::Cast { to, x } => ScalarExpr::Cast { to: *to, x: b(x)? },
            L::Where { cond, a, b: y } => ScalarExpr::Where { cond: b(cond)?, a: b(a)?, b: b(y)? },
            L::Select { valid, then, otherwise } => {
                let mut cond: Option<Expr> = None;
                for c in valid {
                    let t = Expr::c(0).le(self.aff(&c.expr)?);
                    cond = Some(match cond {
                        None => t,
                        Some(x) => x.and(t),
                    });
                }
                ScalarExpr::Select { cond: cond.unwrap_or(Expr::c(1)), then: b(then)?, otherwise: b(otherwise)? }
            }
        })
    }

    /// `Let`s binding loop variables `first..first + extents.len()` to the
    /// row-major multi-index of `flat` over `extents`.
    fn unflatten(&mut self, flat: Expr, first: u32, extents: &[SymDim], out: &mut Vec<Stmt>) -> DResult<()> {
        let vars: Vec<u32> = (0..extents.len() as u32).map(|j| first + j).collect();
        self.unflatten_vars(flat, &vars, extents, out)
    }

    /// [`Builder::unflatten`] binding the loop variables `vars` (one per
    /// extent, outermost first).
    fn unflatten_vars(&mut self, flat: Expr, vars: &[u32], extents: &[SymDim], out: &mut Vec<Stmt>) -> DResult<()> {
        let mut rest = flat;
        for (j, e) in extents.iter().enumerate().rev() {
            let v = vars[j];
            let var = self.var(&format!("i{v}"));
            let value = if j == 0 { rest.clone() } else { rest.clone() % self.dim(e)? };
            out.push(Stmt::Let { var, value });
            self.loop_vars.insert(v, Expr::Var(var));
            if j > 0 {
                let q = self.var(&format!("q{v}"));
                out.push(Stmt::Let { var: q, value: rest / self.dim(e)? });
                rest = Expr::Var(q);
            }
        }
        Ok(())
    }

    /// Nested serial loops over `extents` binding variables `first..`,
    /// around `inner`.
    fn serial_loops(
        &mut self,
        first: u32,
        extents: &[SymDim],
        inner: &mut dyn FnMut(&mut Builder<'p>) -> DResult<Vec<Stmt>>,
    ) -> DResult<Vec<Stmt>> {
        let mut vars = Vec::new();
        for j in 0..extents.len() {
            let v = first + j as u32;
            let var = self.var(&format!("i{v}"));
            self.loop_vars.insert(v, Expr::Var(var));
            vars.push(var);
        }
        let mut body = inner(self)?;
        for (j, e) in extents.iter().enumerate().rev() {
            body = vec![Stmt::For { var: vars[j], start: Expr::c(0), end: self.dim(e)?, step: 1, unroll: false, body }];
        }
        Ok(body)
    }

    /// One reduction step at the current reduce point: the computed-at
    /// reduces under their guards, then the accumulator's update.
    fn update(&mut self, lk: &loop_ir::Kernel) -> DResult<Vec<Stmt>> {
        let Some(r) = &lk.reduce else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for e in lk.computed_at() {
            let loop_ir::Expr::Reduce { id, op, dtype, first, loops, guard, value, .. } = e else { continue };
            let reg = RegRef { reg: self.reduces[id], index: Expr::c(0) };
            let mut body = vec![Stmt::Compute { dst: reg.clone(), value: ScalarExpr::identity(*op, *dtype) }];
            let (op, dtype) = (*op, *dtype);
            body.extend(self.serial_loops(*first, loops, &mut |b| {
                Ok(vec![Stmt::Accumulate { op, dtype, acc: reg.clone(), value: b.scalar(value)? }])
            })?);
            if guard.is_empty() {
                out.extend(body);
            } else {
                let mut cond: Option<Expr> = None;
                for c in guard {
                    let t = Expr::c(0).le(self.aff(&c.expr)?);
                    cond = Some(match cond {
                        None => t,
                        Some(x) => x.and(t),
                    });
                }
                out.push(Stmt::If { cond: cond.unwrap_or(Expr::c(1)), then: body, otherwise: Vec::new() });
            }
        }
        let acc = self.acc_ref()?;
        out.push(Stmt::Accumulate { op: r.op, dtype: r.dtype, acc, value: self.scalar(&r.value)? });
        Ok(out)
    }

    /// Elements `base..base + vec` of the flattened output (row-major, as
    /// the store subscript): each computed where it is below `total`, then
    /// one `st.global.v{vec}` when all are (the address is `vec` elements
    /// from a 256-byte aligned base, so aligned to the access), else one
    /// `st.global` each.
    fn vector_point(&mut self, lk: &loop_ir::Kernel, base: Expr, vec: i64, total: &Expr) -> DResult<Vec<Stmt>> {
        let dtype = self.p.buffer(lk.out).dtype;
        self.k.regs.push(RegArray { name: "v".into(), kind: compute_kind(dtype), len: vec as u32 });
        let v = RegId(self.k.regs.len() as u32 - 1);
        let param = self.buf_param[&lk.out];
        let b0 = self.var("base");
        let mut out = vec![Stmt::Let { var: b0, value: base }];
        let last = lk.loops.len().checked_sub(1);
        let rows_of_vec = lk.loops.last().and_then(|d| d.as_int()).is_some_and(|e| e % vec == 0);
        if let (Some(last), true) = (last, rows_of_vec) {
            // Every group lies in one row: one multi-index, the innermost
            // index stepping by one per element, and 4-wide loads.
            self.unflatten(Expr::Var(b0), 0, &lk.loops, &mut out)?;
            let first = self.loop_vars[&(last as u32)].clone();
            out.extend(self.vector_loads_of(&lk.value, last as u32, vec, &BTreeMap::new())?);
            out.extend(self.per_element(last as u32, first, vec, |b, u| {
                Ok(Stmt::Compute { dst: RegRef { reg: v, index: Expr::c(u) }, value: b.scalar(&lk.value)? })
            })?);
            out.push(Stmt::StGlobalVec {
                dst: GlobalRef { param, offset: Expr::Var(b0) },
                src: (0..vec).map(|u| RegRef { reg: v, index: Expr::c(u) }).collect(),
                dtype,
                pred: Expr::c(1),
            });
            return Ok(out);
        }
        let mut tail = Vec::new();
        for u in 0..vec {
            let e = self.var(&format!("e{u}"));
            out.push(Stmt::Let { var: e, value: Expr::Var(b0) + Expr::c(u) });
            let mut body = Vec::new();
            self.unflatten(Expr::Var(e), 0, &lk.loops, &mut body)?;
            let reg = RegRef { reg: v, index: Expr::c(u) };
            body.push(Stmt::Compute { dst: reg.clone(), value: self.scalar(&lk.value)? });
            out.push(Stmt::If { cond: Expr::Var(e).lt(total.clone()), then: body, otherwise: Vec::new() });
            tail.push(Stmt::StGlobal {
                dst: GlobalRef { param, offset: Expr::Var(e) },
                src: reg,
                dtype,
                pred: Expr::Var(e).lt(total.clone()),
            });
        }
        let full = Stmt::StGlobalVec {
            dst: GlobalRef { param, offset: Expr::Var(b0) },
            src: (0..vec).map(|u| RegRef { reg: v, index: Expr::c(u) }).collect(),
            dtype,
            pred: Expr::c(1),
        };
        out.push(Stmt::If {
            cond: (Expr::Var(b0) + Expr::c(vec)).le(total.clone()),
            then: vec![full],
            otherwise: tail,
        });
        Ok(out)
    }

    /// A warp's reduction of `lk` at the current output point, leaving the
    /// total in every lane's accumulator ([`Builder::acc`]): the identity,
    /// lane `l` accumulating the flattened reduce points `l, l + 32, …`
    /// (loads of `smem_of` buffers from shared memory), or [`VEC`] at a
    /// time where [`Builder::vector_reduction_step`] applies, then five
    /// `shfl.sync.bfly` steps (lane masks 16, 8, 4, 2, 1).
    fn warp_reduction(
        &mut self,
        lk: &loop_ir::Kernel,
        smem_of: &BTreeMap<BufId, SmemId>,
        out: &mut Vec<Stmt>,
    ) -> DResult<()> {
        let r = lk.reduce.as_ref().ok_or_else(|| diag!(Internal, "a warp reduction without a reduction"))?;
        let acc = self.acc_ref()?;
        out.push(Stmt::Compute { dst: acc.clone(), value: ScalarExpr::identity(r.op, r.dtype) });
        let red = product(r.loops.iter().map(|d| self.dim(d)).collect::<DResult<Vec<_>>>()?);
        if let Some((j, step)) = self.vector_reduction_step(lk, smem_of)? {
            let start = Expr::ThreadIdx(Dim::X) * Expr::c(VEC);
            out.push(Stmt::For { var: j, start, end: red, step: 32 * VEC, unroll: false, body: step });
        } else {
            let j = self.var("j");
            let mut step = Vec::new();
            self.unflatten(Expr::Var(j), lk.loops.len() as u32, &r.loops, &mut step)?;
            self.shared_loads(&r.value, smem_of, &mut step)?;
            step.extend(self.update(lk)?);
            self.vec_loads.clear();
            out.push(Stmt::For {
                var: j,
                start: Expr::ThreadIdx(Dim::X),
                end: red,
                step: 32,
                unroll: false,
                body: step,
            });
        }
        out.extend(butterfly(r.op, r.dtype, &acc));
        Ok(())
    }

    /// The loop variables of a scan's rows (every loop but the scanned
    /// one), their extents and their point count.
    fn scan_rows(&self, lk: &loop_ir::Kernel, axis: usize) -> DResult<(Vec<u32>, Vec<SymDim>, Expr)> {
        let rows: Vec<u32> = (0..lk.loops.len() as u32).filter(|&v| v != axis as u32).collect();
        let extents: Vec<SymDim> = rows.iter().map(|&v| lk.loops[v as usize].clone()).collect();
        let n = product(extents.iter().map(|d| self.dim(d)).collect::<DResult<Vec<_>>>()?);
        Ok((rows, extents, n))
    }

    /// One chunk of a warp scan: lane `l` takes the value `value` (the
    /// identity where `inside` is false), five `shfl.sync.up` steps, the
    /// carry `carry` combined in, `store` of `v` where `inside`, and lane
    /// 31's value broadcast into `carry`. With `exclusive` the lane then
    /// takes lane `l - 1`'s value into `v` (lane 0 the carry before the
    /// chunk) before the store.
    fn scan_chunk(
        &mut self,
        (op, dt, exclusive): (crate::tiny::ReduceOp, DType, bool),
        (carry, v): (&RegRef, &RegRef),
        inside: Expr,
        value: ScalarExpr,
        store: &dyn Fn(RegRef) -> Stmt,
    ) -> Vec<Stmt> {
        let mut out = vec![
            Stmt::Compute { dst: v.clone(), value: ScalarExpr::identity(op, dt) },
            Stmt::If {
                cond: inside.clone(),
                then: vec![Stmt::Compute { dst: v.clone(), value }],
                otherwise: Vec::new(),
            },
        ];
        out.extend([1, 2, 4, 8, 16].map(|delta| Stmt::ShflUpScan { op, dtype: dt, acc: v.clone(), delta }));
        out.push(Stmt::Accumulate {
            op,
            dtype: dt,
            acc: v.clone(),
            value: ScalarExpr::Reg { reg: carry.clone(), dtype: dt },
        });
        let next = Stmt::ShflIdx { dtype: dt, dst: carry.clone(), src: v.clone(), lane: Expr::c(31) };
        if !exclusive {
            out.push(Stmt::If { cond: inside, then: vec![store(v.clone())], otherwise: Vec::new() });
            out.push(next);
            return out;
        }
        // Lane `l` stores lane `l - 1`'s inclusive value (lane 0 the carry
        // before the chunk); lane 31's is the next carry.
        let lane = Expr::ThreadIdx(Dim::X);
        let before = self.reg("before", dt);
        let from = lane.clone().max(Expr::c(1)) - Expr::c(1);
        out.push(Stmt::ShflIdx { dtype: dt, dst: before.clone(), src: v.clone(), lane: from });
        let first = Stmt::Compute { dst: before.clone(), value: ScalarExpr::Reg { reg: carry.clone(), dtype: dt } };
        out.push(Stmt::If { cond: lane.eq(Expr::c(0)), then: vec![first], otherwise: Vec::new() });
        out.push(next);
        out.push(Stmt::If { cond: inside, then: vec![store(before)], otherwise: Vec::new() });
        out
    }

    /// The scan's value at the current point in the running dtype `dt`.
    fn scan_value(&mut self, lk: &loop_ir::Kernel, dt: DType) -> DResult<ScalarExpr> {
        Ok(match self.scalar(&lk.value)? {
            x if x.dtype() == dt => x,
            x => ScalarExpr::Cast { to: dt, x: Box::new(x) },
        })
    }

    /// A block scan ([`Form::Scan`]) of one pass: see [`ScanPass`] and
    /// [`ScanTiles`]. A block of `tiles.warps` warps takes `warps / wr`
    /// items, `wr` warps each ([`ScanTiles::layout`]); an item is a row
    /// (its tiles in turn, the carry running from one to the next) or,
    /// with segment totals, one (row, tile). Per tile, warp `w` of the
    /// item takes the `seg` points from `tile·wr·seg + w·seg`, lane `l`
    /// the points `32·u + l` of them, all loaded into registers first
    /// (the identity past the row's end); the lanes fold them and the
    /// butterfly gives the warp's total, which lane 0 stores in shared
    /// memory; after `bar.sync` the warp's carry is the tile's carry and
    /// the totals of the warps before it, in order, and the warp scans
    /// its chunks from it ([`Builder::scan_chunk`]); the tile's carry
    /// then takes all the item's warp totals, and a second `bar.sync`
    /// frees the shared totals for the next tile. The totals pass stops
    /// after the first `bar.sync` and stores the tile's total.
    fn block_scan(
        &mut self,
        lk: &loop_ir::Kernel,
        sc: &loop_ir::Scan,
        pass: ScanPass,
        tiles: ScanTiles,
    ) -> DResult<Vec<Stmt>> {
        let dt = running_dtype(sc);
        let e = self.dim(&lk.loops[sc.axis])?;
        let tile_len = Expr::c(tiles.tile());
        let nb = ceil_div(e.clone(), tile_len.clone());
        // The scanned length and the layout of its tiles.
        let (len, len_const) = match pass {
            ScanPass::Carries(_) => {
                (nb.clone(), lk.loops[sc.axis].as_int().map(|e| (e + tiles.tile() - 1) / tiles.tile()))
            }
            ScanPass::Totals(_) | ScanPass::Scan(Some(_)) => (e.clone(), None),
            ScanPass::Scan(None) => (e.clone(), lk.loops[sc.axis].as_int()),
        };
        let (wr, seg) = tiles.layout(len_const);
        let per_item = matches!(pass, ScanPass::Carries(_) | ScanPass::Scan(None));
        let row_tile = Expr::c(wr as i64 * seg);
        let (rows, extents, nrows) = self.scan_rows(lk, sc.axis)?;
        let items = if per_item { nrows.clone() } else { nrows.clone() * nb.clone() };
        let per_block = (tiles.warps / wr) as i64;
        self.k.block = [32, tiles.warps, 1];
        self.k.min_blocks_per_sm = Some(1);
        self.k.grid = [ceil_div(items.clone(), Expr::c(per_block)), Expr::c(1), Expr::c(1)];
        let smem = self.warp_totals(tiles.warps, dt);

        let (item, w, w0, row, first) =
            (self.var("item"), self.var("w"), self.var("w0"), self.var("row"), self.var("first"));
        let (y, lane) = (Expr::ThreadIdx(Dim::Y), Expr::ThreadIdx(Dim::X));
        let mut body = vec![
            Stmt::Let {
                var: item,
                value: Expr::BlockIdx(Dim::X) * Expr::c(per_block) + y.clone() / Expr::c(wr as i64),
            },
            Stmt::Let { var: w, value: y.clone() % Expr::c(wr as i64) },
            Stmt::Let { var: w0, value: y.clone() - Expr::Var(w) },
        ];
        let (row_value, first_value, count) = match per_item {
            true => (Expr::Var(item), Expr::c(0), ceil_div(len.clone(), row_tile.clone())),
            false => (Expr::Var(item) / nb.clone(), Expr::Var(item) % nb.clone(), Expr::c(1)),
        };
        body.push(Stmt::Let { var: row, value: row_value });
        body.push(Stmt::Let { var: first, value: first_value });
        self.unflatten_vars(Expr::Var(row), &rows, &extents, &mut body)?;
        let live = Expr::Var(item).lt(items);

        // The carry into the item's first tile.
        let tc = self.reg("tile_carry", dt);
        let identity = ScalarExpr::identity(sc.op, dt);
        let init = match pass {
            ScanPass::Scan(Some(t)) => ScalarExpr::Select {
                cond: Expr::c(0).lt(Expr::Var(first)),
                then: Box::new(ScalarExpr::Load {
                    src: GlobalRef { param: self.buf_param[&t], offset: Expr::Var(item) - Expr::c(1) },
                    dtype: dt,
                }),
                otherwise: Box::new(identity.clone()),
            },
            _ => identity.clone(),
        };
        body.push(Stmt::Compute { dst: tc.clone(), value: identity.clone() });
        body.push(Stmt::If {
            cond: live.clone(),
            then: vec![Stmt::Compute { dst: tc.clone(), value: init }],
            otherwise: vec![],
        });

        // The value at point `i` of the row and the store of a register there.
        let (k, t, base) = (self.var("k"), self.var("tile"), self.var("base"));
        let (u, i) = (self.var("u"), self.var(&format!("i{}", sc.axis)));
        let (u2, i2) = (self.var("u"), self.var(&format!("i{}", sc.axis)));
        let row_base = Expr::Var(row) * nb.clone();
        let value = match pass {
            ScanPass::Carries(tb) => ScalarExpr::Load {
                src: GlobalRef { param: self.buf_param[&tb], offset: row_base.clone() + Expr::Var(i) },
                dtype: dt,
            },
            _ => {
                self.loop_vars.insert(sc.axis as u32, Expr::Var(i));
                self.scan_value(lk, dt)?
            }
        };
        let store_at = match pass {
            ScanPass::Carries(tb) => Some((self.buf_param[&tb], row_base + Expr::Var(i2), dt)),
            ScanPass::Scan(_) => {
                self.loop_vars.insert(sc.axis as u32, Expr::Var(i2));
                Some((self.buf_param[&lk.out], self.aff(&lk.store_index)?, self.p.buffer(lk.out).dtype))
            }
            ScanPass::Totals(_) => None,
        };

        // Load and fold the warp's points; lane 0 stores the warp total.
        let chunks = seg / 32;
        self.k.regs.push(RegArray { name: "vals".into(), kind: compute_kind(dt), len: chunks as u32 });
        let vals = RegId(self.k.regs.len() as u32 - 1);
        let val = |u: VarId| RegRef { reg: vals, index: Expr::Var(u) };
        let point = |u: VarId| Expr::Var(base) + Expr::c(32) * Expr::Var(u) + lane.clone();
        let acc = self.reg("acc", dt);
        let mut fold = vec![unrolled(
            u,
            chunks,
            vec![
                Stmt::Let { var: i, value: point(u) },
                Stmt::Compute { dst: val(u), value: identity.clone() },
                Stmt::If {
                    cond: Expr::Var(i).lt(len.clone()),
                    then: vec![Stmt::Compute { dst: val(u), value }],
                    otherwise: vec![],
                },
            ],
        )];
        fold.push(Stmt::Compute { dst: acc.clone(), value: identity.clone() });
        let u1 = self.var("u");
        let fold_value = ScalarExpr::Reg { reg: val(u1), dtype: dt };
        fold.push(unrolled(
            u1,
            chunks,
            vec![Stmt::Accumulate { op: sc.op, dtype: dt, acc: acc.clone(), value: fold_value }],
        ));
        fold.extend(butterfly(sc.op, dt, &acc));
        fold.push(keep_warp_total(smem, dt, &acc));
        let mut tile = vec![
            Stmt::Let { var: t, value: Expr::Var(first) + Expr::Var(k) },
            Stmt::Let { var: base, value: Expr::Var(t) * row_tile.clone() + Expr::Var(w) * Expr::c(seg) },
            Stmt::If { cond: live.clone(), then: fold, otherwise: vec![] },
            Stmt::Barrier,
        ];
        let mut after = Vec::new();
        if let Some((param, offset, out_dt)) = store_at {
            let carry = self.reg("carry", dt);
            let v = self.reg("v", dt);
            let mut scan = vec![
                Stmt::Compute { dst: carry.clone(), value: ScalarExpr::Reg { reg: tc.clone(), dtype: dt } },
                self.fold_warp_totals(smem, (sc.op, dt), &carry, Expr::Var(w0), y.clone()),
            ];
            let at = GlobalRef { param, offset };
            let store = |src| Stmt::StGlobal { dst: at.clone(), src, dtype: out_dt, pred: Expr::c(1) };
            let mut chunk = vec![Stmt::Let { var: i2, value: point(u2) }];
            let inside = Expr::Var(i2).lt(len.clone());
            let reg_value = ScalarExpr::Reg { reg: val(u2), dtype: dt };
            let exclusive = sc.exclusive && matches!(pass, ScanPass::Scan(_));
            chunk.extend(self.scan_chunk((sc.op, dt, exclusive), (&carry, &v), inside, reg_value, &store));
            scan.push(unrolled(u2, chunks, chunk));
            after = scan;
        }
        after.push(self.fold_warp_totals(smem, (sc.op, dt), &tc, Expr::Var(w0), Expr::Var(w0) + Expr::c(wr as i64)));
        tile.push(Stmt::If { cond: live.clone(), then: after, otherwise: vec![] });
        if count != Expr::c(1) {
            tile.push(Stmt::Barrier);
        }
        body.push(Stmt::For { var: k, start: Expr::c(0), end: count, step: 1, unroll: false, body: tile });
        if let ScanPass::Totals(tb) = pass {
            let store = Stmt::StGlobal {
                dst: GlobalRef { param: self.buf_param[&tb], offset: Expr::Var(item) },
                src: tc,
                dtype: dt,
                pred: Expr::c(1),
            };
            let lead = live.and(Expr::Var(w).eq(Expr::c(0))).and(lane.eq(Expr::c(0)));
            body.push(Stmt::If { cond: lead, then: vec![store], otherwise: vec![] });
        }
        Ok(body)
    }

    /// One `ld.shared` of element `index` of `buf`'s row (a [`Form::Rows`]
    /// local row in `smem_of`) into a register of its own, registered in
    /// [`Builder::vec_loads`] for every element to read.
    fn shared_scalar_load(
        &mut self,
        buf: BufId,
        index: AffExpr,
        dtype: DType,
        smem_of: &BTreeMap<BufId, SmemId>,
    ) -> DResult<Stmt> {
        let smem = *smem_of.get(&buf).ok_or_else(|| diag!(Internal, "buffer {} has no shared row", buf.0))?;
        let reg = self.reg("l", dtype);
        let offset = self.aff(&crate::cpu::rows::row_subscript(&index))? * Expr::c(dtype.size_bytes() as i64);
        self.vec_loads.push((buf, index, reg.reg, true));
        Ok(Stmt::LdShared { dst: vec![reg], src: SmemRef { buf: smem, offset, swizzle: Swizzle::IDENTITY }, dtype })
    }

    /// The body of a vectorised warp reduction step, with its loop
    /// variable `j` (lane `l` takes the reduce points `VEC·l + 32·VEC·t …`,
    /// [`VEC`] at a time): each load contiguous along the one reduce loop
    /// ([`vector_loads`]) is one `ld.global.v4` or, from a shared row,
    /// `ld.shared.v4`, then the [`VEC`] updates in order. `None` (the
    /// scalar step) unless the reduction has one loop of a constant extent
    /// that [`VEC`] divides, nothing computed at its reads, at least one
    /// such load, and every shared-row load among them.
    fn vector_reduction_step(
        &mut self,
        lk: &loop_ir::Kernel,
        smem_of: &BTreeMap<BufId, SmemId>,
    ) -> DResult<Option<(VarId, Vec<Stmt>)>> {
        let Some(r) = &lk.reduce else { return Ok(None) };
        let var = lk.loops.len() as u32;
        let whole = matches!(r.loops.as_slice(), [d] if d.as_int().is_some_and(|e| e % VEC == 0));
        if !whole || !lk.computed_at().is_empty() {
            return Ok(None);
        }
        let mut loads = Vec::new();
        vector_loads(&r.value, var, VEC, false, &mut loads);
        if loads.is_empty() || scalar_shared_loads(&r.value, var, &loads, smem_of) {
            return Ok(None);
        }
        let j = self.var("j");
        self.loop_vars.insert(var, Expr::Var(j));
        let mut body = self.vector_loads_of(&r.value, var, VEC, smem_of)?;
        let acc = self.acc_ref()?;
        body.extend(self.per_element(var, Expr::Var(j), VEC, |b, _| {
            Ok(Stmt::Accumulate { op: r.op, dtype: r.dtype, acc: acc.clone(), value: b.scalar(&r.value)? })
        })?);
        Ok(Some((j, body)))
    }

    /// `ld.shared` of every load of `e` from a buffer of `smem_of` (a
    /// [`Form::Rows`] kernel's local rows) into a register of its own, which
    /// [`Builder::scalar`] then reads ([`Builder::vec_loads`], lane 0).
    fn shared_loads(
        &mut self,
        e: &loop_ir::Expr,
        smem_of: &BTreeMap<BufId, SmemId>,
        out: &mut Vec<Stmt>,
    ) -> DResult<()> {
        let mut loads = Vec::new();
        e.walk(&mut |x| {
            if let loop_ir::Expr::Load { buf, index, dtype } = x {
                if smem_of.contains_key(buf) && !loads.iter().any(|(b, i, _)| b == buf && i == index) {
                    loads.push((*buf, index.clone(), *dtype));
                }
            }
        });
        self.lane = 0;
        for (buf, index, dtype) in loads {
            out.push(self.shared_scalar_load(buf, index, dtype, smem_of)?);
        }
        Ok(())
    }

    /// The value's computation and store at the current output point.
    fn store(&mut self, lk: &loop_ir::Kernel) -> DResult<Vec<Stmt>> {
        self.store_in(lk, &BTreeMap::new())
    }

    /// [`Builder::store`], into the row of a local buffer in shared memory
    /// when `smem_of` holds the output (a [`Form::Rows`] kernel).
    fn store_in(&mut self, lk: &loop_ir::Kernel, smem_of: &BTreeMap<BufId, SmemId>) -> DResult<Vec<Stmt>> {
        let v = self.reg("v", self.p.buffer(lk.out).dtype);
        let mut out = vec![Stmt::Compute { dst: v.clone(), value: self.scalar(&lk.value)? }];
        out.push(self.store_reg(lk, v, smem_of)?);
        Ok(out)
    }

    /// Whether a [`Form::Rows`] member without a reduction computes
    /// [`VEC`] consecutive points of its row per lane and step
    /// ([`Builder::row_points_vectorised`]): a float output (the vector
    /// stores' dtypes), one loop besides the row's,
    /// of a constant extent [`VEC`] divides, its store and every load of a
    /// shared row contiguous along it ([`contiguous`]).
    fn row_points_vectorisable(&self, lk: &loop_ir::Kernel, smem_of: &BTreeMap<BufId, SmemId>) -> bool {
        let [_, d] = lk.loops.as_slice() else { return false };
        let float = self.p.buffer(lk.out).dtype.is_float();
        if !float || d.as_int().is_none_or(|e| e % VEC != 0) || !contiguous(&lk.store_index, 1, VEC) {
            return false;
        }
        let mut loads = Vec::new();
        vector_loads(&lk.value, 1, VEC, false, &mut loads);
        !scalar_shared_loads(&lk.value, 1, &loads, smem_of)
    }

    /// A row member's points [`VEC`] at a time: lane `l` takes points
    /// `VEC·l + 32·VEC·(c + ROWS_CHUNK/VEC·t)`, `c < ROWS_CHUNK/VEC`; for
    /// each, the contiguous loads as `ld.global.v4` / `ld.shared.v4`
    /// (others scalar), the [`VEC`] values, then (after all values of the
    /// step, as the scalar form) one `st.global.v4` / `st.shared.v4` each.
    fn row_points_vectorised(&mut self, lk: &loop_ir::Kernel, smem_of: &BTreeMap<BufId, SmemId>) -> DResult<Stmt> {
        let points = self.dim(&lk.loops[1])?;
        let dtype = self.p.buffer(lk.out).dtype;
        let chunks = ROWS_CHUNK / VEC;
        self.k.regs.push(RegArray { name: "vs".into(), kind: compute_kind(dtype), len: ROWS_CHUNK as u32 });
        let vs = RegId(self.k.regs.len() as u32 - 1);
        let j = self.var("j");
        let mut phases = Vec::new();
        for storing in [false, true] {
            let (u, jj) = (self.var("u"), self.var("jp"));
            let regs: Vec<RegRef> =
                (0..VEC).map(|e| RegRef { reg: vs, index: Expr::Var(u) * Expr::c(VEC) + Expr::c(e) }).collect();
            self.loop_vars.insert(1, Expr::Var(jj));
            let mut body = Vec::new();
            if storing {
                body.push(match smem_of.get(&lk.out) {
                    Some(&smem) => {
                        let at = self.aff(&crate::cpu::rows::row_subscript(&lk.store_index))?;
                        let offset = at * Expr::c(dtype.size_bytes() as i64);
                        Stmt::StShared {
                            dst: SmemRef { buf: smem, offset, swizzle: Swizzle::IDENTITY },
                            src: regs,
                            dtype,
                        }
                    }
                    None => Stmt::StGlobalVec {
                        dst: GlobalRef { param: self.param_of(lk.out)?, offset: self.aff(&lk.store_index)? },
                        src: regs,
                        dtype,
                        pred: Expr::c(1),
                    },
                });
            } else {
                body.extend(self.vector_loads_of(&lk.value, 1, VEC, smem_of)?);
                body.extend(self.per_element(1, Expr::Var(jj), VEC, |b, e| {
                    Ok(Stmt::Compute { dst: regs[e as usize].clone(), value: b.scalar(&lk.value)? })
                })?);
            }
            let at = Stmt::Let { var: jj, value: Expr::Var(j) + Expr::c(32 * VEC) * Expr::Var(u) };
            let inside = Stmt::If { cond: Expr::Var(jj).lt(points.clone()), then: body, otherwise: Vec::new() };
            phases.push(unrolled(u, chunks, vec![at, inside]));
        }
        Ok(Stmt::For {
            var: j,
            start: Expr::ThreadIdx(Dim::X) * Expr::c(VEC),
            end: points,
            step: 32 * VEC * chunks,
            unroll: false,
            body: phases,
        })
    }

    /// `f(element)` at each of the `vec` consecutive points `base, base + 1,
    /// …` of loop `var`, [`Builder::scalar`] reading element `u` of the
    /// vector loads [`Builder::vector_loads_of`] registered; then those
    /// registrations end.
    fn per_element(
        &mut self,
        var: u32,
        base: Expr,
        vec: i64,
        mut f: impl FnMut(&mut Self, i64) -> DResult<Stmt>,
    ) -> DResult<Vec<Stmt>> {
        let mut out = Vec::new();
        for u in 0..vec {
            self.loop_vars.insert(var, if u == 0 { base.clone() } else { base.clone() + Expr::c(u) });
            self.lane = u;
            out.push(f(self, u)?);
        }
        self.vec_loads.clear();
        self.lane = 0;
        Ok(out)
    }

    /// The buffer parameter of `buf`.
    fn param_of(&self, buf: BufId) -> DResult<ParamId> {
        self.buf_param.get(&buf).copied().ok_or_else(|| diag!(Internal, "buffer {} has no parameter", buf.0))
    }

    /// One `ld.global.v{vec}` (or, from a row in `smem_of`,
    /// `ld.shared.v{vec}`) of each load of `e` contiguous along loop `var`
    /// ([`vector_loads`]), at the current loop variables (`var` at a
    /// multiple of `vec`), registered in [`Builder::vec_loads`] for
    /// [`Builder::scalar`] ([`Builder::per_element`] reads them).
    fn vector_loads_of(
        &mut self,
        e: &loop_ir::Expr,
        var: u32,
        vec: i64,
        smem_of: &BTreeMap<BufId, SmemId>,
    ) -> DResult<Vec<Stmt>> {
        let mut loads = Vec::new();
        vector_loads(e, var, vec, false, &mut loads);
        loads.retain(|(b, _, _)| !self.row_regs.contains_key(b));
        let mut out = Vec::new();
        for (n, (buf, index, dtype)) in loads.into_iter().enumerate() {
            self.k.regs.push(RegArray { name: format!("x{n}"), kind: compute_kind(dtype), len: vec as u32 });
            let reg = RegId(self.k.regs.len() as u32 - 1);
            let dst: Vec<RegRef> = (0..vec).map(|u| RegRef { reg, index: Expr::c(u) }).collect();
            out.push(match smem_of.get(&buf) {
                Some(&smem) => {
                    let at = self.aff(&crate::cpu::rows::row_subscript(&index))?;
                    let offset = at * Expr::c(dtype.size_bytes() as i64);
                    Stmt::LdShared { dst, src: SmemRef { buf: smem, offset, swizzle: Swizzle::IDENTITY }, dtype }
                }
                None => Stmt::LdGlobalVec {
                    dst,
                    src: GlobalRef { param: self.param_of(buf)?, offset: self.aff(&index)? },
                    dtype,
                    pred: Expr::c(1),
                },
            });
            self.vec_loads.push((buf, index, reg, false));
        }
        // Shared-row values the group does not index: one scalar load.
        let mut one = Vec::new();
        e.walk(&mut |x| {
            if let loop_ir::Expr::Load { buf, index, dtype } = x {
                let fresh = !self.vec_loads.iter().any(|(b, i, _, _)| b == buf && i == index)
                    && !one.iter().any(|(b, i, _)| b == buf && i == index);
                if smem_of.contains_key(buf) && !index.var_coeffs().any(|(k, _)| k == var) && fresh {
                    one.push((*buf, index.clone(), *dtype));
                }
            }
        });
        for (buf, index, dtype) in one {
            out.push(self.shared_scalar_load(buf, index, dtype, smem_of)?);
        }
        Ok(out)
    }

    /// A shared buffer `warp_totals` of one `dtype` value per warp of a
    /// block of `warps` warps (at `warp · size`), the kernel's only shared
    /// memory.
    fn warp_totals(&mut self, warps: u32, dtype: DType) -> SmemId {
        let size = warps as u64 * dtype.size_bytes() as u64;
        let smem = SmemId(self.k.smem.len() as u32);
        self.k.smem.push(SmemBuffer { name: "warp_totals".into(), offset: 0, size, swizzle: Swizzle::IDENTITY });
        self.k.smem_bytes = size.div_ceil(16) * 16;
        smem
    }

    /// `acc ⊕= warp_totals[from..to]` ([`Builder::warp_totals`]), in warp
    /// order.
    fn fold_warp_totals(
        &mut self,
        smem: SmemId,
        (op, dtype): (crate::tiny::ReduceOp, DType),
        acc: &RegRef,
        from: Expr,
        to: Expr,
    ) -> Stmt {
        let (j, total) = (self.var("j"), self.reg("total", dtype));
        let value = ScalarExpr::Reg { reg: total.clone(), dtype };
        Stmt::For {
            var: j,
            start: from,
            end: to,
            step: 1,
            unroll: false,
            body: vec![
                Stmt::LdShared { dst: vec![total], src: warp_total_at(smem, dtype, Expr::Var(j)), dtype },
                Stmt::Accumulate { op, dtype, acc: acc.clone(), value },
            ],
        }
    }

    /// `f(u, base)` for each group `u < rr.groups` of a register-row lane's
    /// points (`base = vec·g + 32·warps·vec·u`, `g` the lane's index in its
    /// row), unrolled, under `base < len` when the groups overrun the row;
    /// the local rows ([`Builder::row_regs`]) read at the group's
    /// registers, loop variable 1 at `base`.
    fn lane_groups(&mut self, rr: RegisterRows, g: VarId, f: &mut GroupBody<'_, 'p>) -> DResult<Stmt> {
        let (u, base) = (self.var("u"), self.var("p"));
        for (_, at) in self.row_regs.values_mut() {
            if at.is_some() {
                *at = Some(Expr::Var(u) * Expr::c(rr.vec));
            }
        }
        self.loop_vars.insert(1, Expr::Var(base));
        let stride = 32 * rr.warps as i64 * rr.vec;
        let inner = f(self, u, base)?;
        let inner = match rr.len % stride {
            0 => inner,
            _ => vec![Stmt::If { cond: Expr::Var(base).lt(Expr::c(rr.len)), then: inner, otherwise: vec![] }],
        };
        let mut body =
            vec![Stmt::Let { var: base, value: Expr::Var(g) * Expr::c(rr.vec) + Expr::c(stride) * Expr::Var(u) }];
        body.extend(inner);
        Ok(unrolled(u, rr.groups, body))
    }

    /// The vector loads of `e`'s global inputs at a register-row lane's
    /// group of points ([`Builder::vector_loads_of`]; none when a lane
    /// takes its points one at a time).
    fn row_loads(&mut self, e: &loop_ir::Expr, rr: RegisterRows) -> DResult<Vec<Stmt>> {
        match rr.vec {
            1 => Ok(Vec::new()),
            v => self.vector_loads_of(e, 1, v, &BTreeMap::new()),
        }
    }

    /// A register-row kernel's value of a row (a reduction's result or a
    /// nest over the rows alone), computed by every lane into `v`: kept as
    /// the local scalar's register, or stored by the row's first lane
    /// (`g == 0`).
    fn row_scalar(&mut self, lk: &loop_ir::Kernel, v: RegRef, g: &VarId) -> DResult<Vec<Stmt>> {
        let dtype = self.p.buffer(lk.out).dtype;
        if let Some((reg, _)) = self.row_regs.get(&lk.out) {
            let dst = RegRef { reg: *reg, index: Expr::c(0) };
            return Ok(vec![Stmt::Compute { dst, value: ScalarExpr::Reg { reg: v, dtype } }]);
        }
        let store = self.store_reg(lk, v, &BTreeMap::new())?;
        Ok(vec![Stmt::If { cond: Expr::Var(*g).eq(Expr::c(0)), then: vec![store], otherwise: vec![] }])
    }

    /// The store of the value in `v` at the current output point: to the
    /// output buffer, or to its row in shared memory when `smem_of` holds it.
    fn store_reg(&mut self, lk: &loop_ir::Kernel, v: RegRef, smem_of: &BTreeMap<BufId, SmemId>) -> DResult<Stmt> {
        let dtype = self.p.buffer(lk.out).dtype;
        Ok(match smem_of.get(&lk.out) {
            Some(&smem) => {
                let offset =
                    self.aff(&crate::cpu::rows::row_subscript(&lk.store_index))? * Expr::c(dtype.size_bytes() as i64);
                Stmt::StShared { dst: SmemRef { buf: smem, offset, swizzle: Swizzle::IDENTITY }, src: vec![v], dtype }
            }
            None => Stmt::StGlobal {
                dst: GlobalRef { param: self.buf_param[&lk.out], offset: self.aff(&lk.store_index)? },
                src: v,
                dtype,
                pred: Expr::c(1),
            },
        })
    }
}

/// Whether an element-wise kernel computes [`VEC`] elements per thread and
/// stores them with one vector store: a float output stored row-major by
/// the output loops (so the store subscript is the flat index), and a
/// value with no IEEE division or square root (`FDIV`, `RECIP`, `SQRT`,
/// `RSQRT`: their round-to-nearest slow paths are subroutine calls in SASS,
/// and the results already computed would spill across them — ptxas
/// reports it).
pub fn vectorisable(lk: &loop_ir::Kernel, out: &Buffer) -> bool {
    use crate::tiny::{BinaryOp, UnaryOp};
    let mut calls = false;
    lk.value.walk(&mut |e| {
        calls |= matches!(
            e,
            loop_ir::Expr::Binary { op: BinaryOp::Fdiv, .. }
                | loop_ir::Expr::Unary { op: UnaryOp::Recip | UnaryOp::Sqrt | UnaryOp::Rsqrt, .. }
        )
    });
    lk.reduce.is_none() && out.dtype.is_float() && lk.loops == out.shape && !calls
}

/// Whether `e` reads a row in `smem_of` along loop `var` other than
/// through one of `loads` (the contiguous ones): such a load has no vector
/// form.
fn scalar_shared_loads(
    e: &loop_ir::Expr,
    var: u32,
    loads: &[(BufId, AffExpr, DType)],
    smem_of: &BTreeMap<BufId, SmemId>,
) -> bool {
    let mut scalar = false;
    e.walk(&mut |x| {
        if let loop_ir::Expr::Load { buf, index, .. } = x {
            scalar |= smem_of.contains_key(buf)
                && index.var_coeffs().any(|(k, _)| k == var)
                && !loads.iter().any(|(b, i, _)| b == buf && i == index);
        }
    });
    scalar
}

/// Whether subscript `index` is `i{var} + vec·(…)` with constant
/// coefficients: contiguous along loop `var` and, where `i{var} ≡ 0 mod
/// vec`, aligned to `vec` elements.
fn contiguous(index: &AffExpr, var: u32, vec: i64) -> bool {
    let plain = index.terms().all(|(a, _)| matches!(a, AffAtom::Var(_)));
    let coeffs_ok = index.var_coeffs().all(|(k, c)| match c.as_int() {
        Some(c) if k == var => c == 1,
        Some(c) => c % vec == 0,
        None => false,
    });
    let has_var = index.var_coeffs().any(|(k, _)| k == var);
    plain && coeffs_ok && has_var && index.constant_part().as_int().is_some_and(|c| c % vec == 0)
}

/// The distinct loads of `e` (not under a `PAD` guard, of a float or i32
/// dtype) whose subscript is `i{last} + 4·(…)` with constant coefficients:
/// contiguous along the innermost output index and, at the first element of
/// a group (`i{last} ≡ 0 mod vec`), aligned to `vec` elements.
fn vector_loads(e: &loop_ir::Expr, last: u32, vec: i64, guarded: bool, out: &mut Vec<(BufId, AffExpr, DType)>) {
    use loop_ir::Expr as L;
    match e {
        L::Load { buf, index, dtype } => {
            let kind_ok = matches!(dtype, DType::F32 | DType::F16 | DType::BF16 | DType::I32);
            if !guarded
                && contiguous(index, last, vec)
                && kind_ok
                && !out.iter().any(|(b, i, _)| b == buf && i == index)
            {
                out.push((*buf, index.clone(), *dtype));
            }
        }
        L::Const { .. } | L::Acc { .. } | L::Reduce { .. } => {}
        // The gathered element is read by itself; its position may come
        // from vector loads.
        L::Unary { x, .. } | L::Cast { x, .. } | L::Gather { at: x, .. } => vector_loads(x, last, vec, guarded, out),
        L::Binary { a, b, .. } => {
            vector_loads(a, last, vec, guarded, out);
            vector_loads(b, last, vec, guarded, out);
        }
        L::Where { cond, a, b } => {
            for x in [cond, a, b] {
                vector_loads(x, last, vec, guarded, out);
            }
        }
        L::Select { then, otherwise, .. } => {
            vector_loads(then, last, vec, true, out);
            vector_loads(otherwise, last, vec, true, out);
        }
    }
}

/// Most bytes of shared memory a [`Form::Rows`] kernel keeps its local
/// temporaries in (one row of each): 16 KiB leaves room for 10 one-warp
/// blocks per SM on sm80's 164 KiB (`plan::target`). A group whose local
/// rows need more keeps them in global memory.
pub const ROWS_SMEM_MAX: u64 = 16 * 1024;

/// Fewest rows a [`Form::Rows`] kernel of element-wise steps only takes
/// (one warp per row): 1024 warps are 8 per SM of an H100's 132 (sm80's
/// 108: 9), enough to keep each SM's four schedulers busy. With fewer its
/// kernels run as [`Form::Elementwise`] kernels over all their points. A
/// group with a reduction keeps its rows: its reduction's own kernel would
/// give each row one warp as well.
pub const ROWS_MIN_ELEMENTWISE: i64 = 1024;

/// Points of a [`Form::Rows`] kernel's element-wise step a lane computes
/// before it stores any: their loads are issued back to back (the stores
/// are `asm volatile`, which the compiler does not move loads across), so
/// a lane has this many loads in flight rather than one.
pub const ROWS_CHUNK: i64 = 8;

/// The local temporaries of `group` ([`loop_ir::RowGroup::local`]) that a
/// [`Form::Rows`] kernel holds in shared memory, each with its row as a
/// shared buffer (offsets 16-byte aligned), and the bytes of all: all of
/// them when each is a float of a constant row length, no kernel of the
/// group reads one under a `PAD` guard (the loads are issued before the
/// value), and one row of each fits in [`ROWS_SMEM_MAX`]; else none.
fn shared_rows(p: &loop_ir::Program, group: &loop_ir::RowGroup) -> (Vec<(BufId, SmemBuffer)>, u64) {
    let mut placed = Vec::new();
    let mut bytes = 0u64;
    for &b in &group.local {
        let buf = p.buffer(b);
        let len = crate::cpu::rows::row_len(p, b).as_int().and_then(|n| u64::try_from(n).ok());
        let (Some(len), true) = (len, matches!(buf.dtype, DType::F32 | DType::F16 | DType::BF16)) else {
            return (Vec::new(), 0);
        };
        let size = len * buf.dtype.size_bytes() as u64;
        let row = SmemBuffer { name: format!("{}_row", buf.name), offset: bytes, size, swizzle: Swizzle::IDENTITY };
        placed.push((b, row));
        bytes += size.div_ceil(16) * 16;
    }
    let guarded = p.kernels[group.kernels.clone()].iter().any(|lk| {
        let mut select = false;
        lk.value.walk(&mut |e| select |= matches!(e, loop_ir::Expr::Select { .. }));
        if let Some(r) = &lk.reduce {
            r.value.walk(&mut |e| select |= matches!(e, loop_ir::Expr::Select { .. }));
        }
        select
    });
    if bytes > ROWS_SMEM_MAX || guarded {
        return (Vec::new(), 0);
    }
    (placed, bytes)
}

/// Most points of a row one lane holds of each local temporary in a
/// [`Form::Rows`] kernel with its rows in registers (`register_rows`): a
/// row of `L` points takes `ceil(L / (32 · ROWS_REG_POINTS))` warps, rounded
/// up to a power of two.
pub const ROWS_REG_POINTS: i64 = 32;

/// Most registers a lane gives to the local rows of a register-row
/// kernel, all of them together (two rows of [`ROWS_REG_POINTS`]: a
/// softmax's or a layernorm's); a group needing more keeps them in shared
/// memory (`shared_rows`).
pub const ROWS_REG_SLOTS: i64 = 64;

/// Most warps one row of a register-row kernel spreads over (a block).
pub const ROWS_REG_WARPS: u32 = 8;

/// The layout of a [`Form::Rows`] kernel that keeps its rows in registers
/// ([`lower_rows_in_registers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RegisterRows {
    /// Points of a row (a constant).
    len: i64,
    /// Warps a row.
    warps: u32,
    /// Consecutive points a lane takes at a time ([`VEC`] or 1).
    vec: i64,
    /// Groups of `vec` points a lane takes: `ceil(len / (32·warps·vec))`.
    groups: i64,
}

/// Whether row group `group` can keep its local temporaries in registers,
/// and how: every member is an element-wise nest over `[rows, L]` or
/// `[rows]`, or a reduction of `[rows]` over one loop of `L` with nothing
/// computed at its reads, for one constant `L`; every local temporary
/// holds `L` points a row (read and written only at the current point) or
/// one (read anywhere in the row); and the lanes' share of the `L`-point
/// rows fits [`ROWS_REG_SLOTS`] with at most [`ROWS_REG_POINTS`] points
/// per lane and row and [`ROWS_REG_WARPS`] warps. Then no value crosses
/// lanes except through the reductions' butterflies (and, with several
/// warps a row, their totals in shared memory).
fn register_rows(p: &loop_ir::Program, group: &loop_ir::RowGroup) -> Option<RegisterRows> {
    let members = &p.kernels[group.kernels.clone()];
    let mut len = None;
    for lk in members {
        let l = match (&lk.reduce, lk.loops.as_slice()) {
            (None, [_, d]) => d.as_int()?,
            (None, [_]) => continue,
            (Some(r), [_]) if lk.computed_at().is_empty() && lk.strips.is_empty() => match r.loops.as_slice() {
                [d] => d.as_int()?,
                _ => return None,
            },
            _ => return None,
        };
        if *len.get_or_insert(l) != l || l < 1 {
            return None;
        }
    }
    let len = len?;
    let point = AffExpr::var(1);
    let mut full = 0;
    for &b in &group.local {
        match crate::cpu::rows::row_len(p, b).as_int()? {
            1 => {}
            l if l == len => full += 1,
            _ => return None,
        }
    }
    // Every access of a local row at the current point, of a local
    // scalar anywhere.
    let at_point = |buf: BufId, index: &AffExpr| {
        let sub = crate::cpu::rows::row_subscript(index);
        match crate::cpu::rows::row_len(p, buf).as_int() {
            Some(1) => true,
            _ => sub == point,
        }
    };
    for lk in members {
        let mut ok = !group.local.contains(&lk.out) || at_point(lk.out, &lk.store_index);
        let mut check = |e: &loop_ir::Expr| {
            e.walk(&mut |x| match x {
                loop_ir::Expr::Load { buf, index, .. } if group.local.contains(buf) => ok &= at_point(*buf, index),
                loop_ir::Expr::Gather { buf, .. } if group.local.contains(buf) => ok = false,
                _ => {}
            })
        };
        check(&lk.value);
        if let Some(r) = &lk.reduce {
            check(&r.value);
        }
        if !ok {
            return None;
        }
    }
    let warps = (len + 32 * ROWS_REG_POINTS - 1) / (32 * ROWS_REG_POINTS);
    let warps = (warps as u32).next_power_of_two();
    let vec = if len % VEC == 0 { VEC } else { 1 };
    let groups = (len + 32 * warps as i64 * vec - 1) / (32 * warps as i64 * vec);
    let fits = warps <= ROWS_REG_WARPS && full * groups * vec <= ROWS_REG_SLOTS;
    fits.then_some(RegisterRows { len, warps, vec, groups })
}

/// The body of [`Builder::lane_groups`] for a group `u` of points from
/// `base`.
type GroupBody<'f, 'p> = dyn FnMut(&mut Builder<'p>, VarId, VarId) -> DResult<Vec<Stmt>> + 'f;

/// Warps (rows) a block of a register-row kernel with one warp a row.
const ROWS_REG_BLOCK: u32 = 4;

/// The builder of row group `group`'s one kernel (named after its first
/// and last kernels), its parameters the buffers the group reads and
/// writes except those `held` says it keeps on chip; and the buffers it
/// writes to memory.
fn row_group_builder<'p>(
    p: &'p loop_ir::Program,
    group: &loop_ir::RowGroup,
    held: &dyn Fn(&BufId) -> bool,
) -> (Builder<'p>, Vec<BufId>) {
    let members = &p.kernels[group.kernels.clone()];
    let writes: Vec<BufId> = members.iter().map(|lk| lk.out).filter(|b| !held(b)).collect();
    let mut reads: Vec<BufId> = members.iter().flat_map(|lk| lk.reads()).filter(|b| !held(b)).collect();
    reads.sort();
    reads.dedup();
    let (first, last) = (&members[0], &members[members.len() - 1]);
    let name = format!("{}_{}_{}", p.name, first.name, last.name);
    (Builder::with_buffers(p, &name, &reads, &writes), writes)
}

/// A row group as one [`Form::Rows`] kernel with its local temporaries in
/// registers ([`register_rows`]'s layout `rr`).
///
/// A row is `rr.warps` warps; lane `l` of warp `w` takes the points
/// `vec·g + 32·warps·vec·t + e` (`g = 32·w + l`, `t < groups`, `e < vec`), so
/// every element-wise step reads its local rows from the lane's own
/// registers and its global inputs with `ld.global.v{vec}`. A reduction
/// folds the lane's points in that order, then the butterfly (and, with
/// several warps, each warp's total through shared memory between two
/// `bar.sync`s, folded in warp order) leaves the total in every lane, which
/// is the row's local scalar. One warp a row: blocks of
/// [`ROWS_REG_BLOCK`] rows and no barrier; several: a block a row. A
/// grid-stride loop over the rows (at most [`MAX_BLOCKS`] blocks). Global
/// memory is read once per input and written once per output.
fn lower_rows_in_registers(p: &loop_ir::Program, group: &loop_ir::RowGroup, rr: RegisterRows) -> DResult<Launch> {
    let members = &p.kernels[group.kernels.clone()];
    let first = &members[0];
    let (mut b, writes) = row_group_builder(p, group, &|buf| group.local.contains(buf));
    let per_block = if rr.warps == 1 { ROWS_REG_BLOCK } else { 1 };
    b.k.block = [32, rr.warps * per_block, 1];
    b.k.min_blocks_per_sm = Some(1);
    // The reductions' warp totals (4 bytes each: f32 or i32).
    let red_smem = (rr.warps > 1).then(|| b.warp_totals(rr.warps, DType::F32));
    let rows = b.dim(&first.loops[0])?;
    let blocks = ceil_div(rows.clone(), Expr::c(per_block as i64)).min(MAX_BLOCKS);
    b.k.grid = [blocks.clone(), Expr::c(1), Expr::c(1)];
    let (nblk, it, row, g) = (b.var("nblocks"), b.var("it"), b.var("row"), b.var("g"));
    let (y, lane) = (Expr::ThreadIdx(Dim::Y), Expr::ThreadIdx(Dim::X));
    let (row_value, g_value) = match rr.warps {
        1 => ((Expr::Var(it) * Expr::Var(nblk) + Expr::BlockIdx(Dim::X)) * Expr::c(per_block as i64) + y, lane.clone()),
        _ => (Expr::Var(it) * Expr::Var(nblk) + Expr::BlockIdx(Dim::X), y * Expr::c(32) + lane.clone()),
    };
    // One register array per local row, one register per local scalar.
    let slots = rr.groups * rr.vec;
    for &buf in &group.local {
        let dtype = p.buffer(buf).dtype;
        let full = crate::cpu::rows::row_len(p, buf).as_int() != Some(1);
        let len = if full { slots as u32 } else { 1 };
        b.k.regs.push(RegArray { name: format!("{}_r", p.buffer(buf).name), kind: compute_kind(dtype), len });
        let reg = RegId(b.k.regs.len() as u32 - 1);
        b.row_regs.insert(buf, (reg, full.then(|| Expr::c(0))));
    }
    let mut point = vec![Stmt::Let { var: g, value: g_value }];
    for lk in members {
        b.loop_vars.clear();
        b.loop_vars.insert(0, Expr::Var(row));
        b.acc = None;
        match &lk.reduce {
            None if lk.loops.len() == 2 => {
                let dtype = p.buffer(lk.out).dtype;
                let out_reg = b.row_regs.get(&lk.out).map(|(r, _)| *r);
                b.k.regs.push(RegArray { name: "vs".into(), kind: compute_kind(dtype), len: rr.vec as u32 });
                let vs = RegId(b.k.regs.len() as u32 - 1);
                let step = b.lane_groups(rr, g, &mut |b, u, base| {
                    let mut out = b.row_loads(&lk.value, rr)?;
                    let u_at = Expr::Var(u) * Expr::c(rr.vec);
                    out.extend(b.per_element(1, Expr::Var(base), rr.vec, |b, e| {
                        let dst = match out_reg {
                            Some(reg) => RegRef { reg, index: u_at.clone() + Expr::c(e) },
                            None => RegRef { reg: vs, index: Expr::c(e) },
                        };
                        Ok(Stmt::Compute { dst, value: b.scalar(&lk.value)? })
                    })?);
                    if out_reg.is_none() {
                        let regs: Vec<RegRef> = (0..rr.vec).map(|e| RegRef { reg: vs, index: Expr::c(e) }).collect();
                        b.loop_vars.insert(1, Expr::Var(base));
                        if rr.vec > 1 && dtype.is_float() && contiguous(&lk.store_index, 1, rr.vec) {
                            out.push(Stmt::StGlobalVec {
                                dst: GlobalRef { param: b.param_of(lk.out)?, offset: b.aff(&lk.store_index)? },
                                src: regs,
                                dtype,
                                pred: Expr::c(1),
                            });
                        } else {
                            for (e, r) in regs.into_iter().enumerate() {
                                b.loop_vars.insert(1, Expr::Var(base) + Expr::c(e as i64));
                                out.push(b.store_reg(lk, r, &BTreeMap::new())?);
                            }
                        }
                    }
                    Ok(out)
                })?;
                point.push(step);
            }
            None => {
                // A value a row: every lane computes it.
                let v = b.reg("v", p.buffer(lk.out).dtype);
                point.push(Stmt::Compute { dst: v.clone(), value: b.scalar(&lk.value)? });
                point.extend(b.row_scalar(lk, v, &g)?);
            }
            Some(r) => {
                let acc = b.reg("acc", r.dtype);
                b.acc = Some(acc.reg);
                point.push(Stmt::Compute { dst: acc.clone(), value: ScalarExpr::identity(r.op, r.dtype) });
                let step = b.lane_groups(rr, g, &mut |b, _, base| {
                    let mut out = b.row_loads(&r.value, rr)?;
                    out.extend(b.per_element(1, Expr::Var(base), rr.vec, |b, _| {
                        Ok(Stmt::Accumulate { op: r.op, dtype: r.dtype, acc: acc.clone(), value: b.scalar(&r.value)? })
                    })?);
                    Ok(out)
                })?;
                point.push(step);
                point.extend(butterfly(r.op, r.dtype, &acc));
                if let Some(smem) = red_smem {
                    point.push(keep_warp_total(smem, r.dtype, &acc));
                    point.push(Stmt::Barrier);
                    point.push(Stmt::Compute { dst: acc.clone(), value: ScalarExpr::identity(r.op, r.dtype) });
                    let all = Expr::c(rr.warps as i64);
                    point.push(b.fold_warp_totals(smem, (r.op, r.dtype), &acc, Expr::c(0), all));
                    point.push(Stmt::Barrier);
                }
                b.loop_vars.remove(&1);
                let v = b.reg("v", p.buffer(lk.out).dtype);
                point.push(Stmt::Compute { dst: v.clone(), value: b.scalar(&lk.value)? });
                point.extend(b.row_scalar(lk, v, &g)?);
            }
        }
    }
    b.k.body = vec![
        Stmt::Let { var: nblk, value: blocks },
        Stmt::For {
            var: it,
            start: Expr::c(0),
            end: ceil_div(ceil_div(rows.clone(), Expr::c(per_block as i64)), Expr::Var(nblk)),
            step: 1,
            unroll: false,
            body: vec![
                Stmt::Let { var: row, value: row_value },
                Stmt::If { cond: Expr::Var(row).lt(rows), then: point, otherwise: Vec::new() },
            ],
        },
    ];
    let region = members.iter().flat_map(|lk| lk.nodes.iter().copied()).collect();
    Ok(Launch { kernel: b.k, form: Form::Rows, args: b.args, region, outs: writes, plan: None })
}

/// Whether a kernel of a row group can be a part of a [`Form::Rows`]
/// kernel: a plain nest that stores in its own row ([`rows::in_row`], so
/// no other block reads what it writes), without a reduction, or with one
/// over the whole row (its only output loop is the row's) and none
/// computed at its reads.
fn row_member(p: &loop_ir::Program, lk: &loop_ir::Kernel) -> bool {
    let plain = crate::cpu::rows::can_join(lk) && crate::cpu::rows::in_row(p, lk, lk.out, &lk.store_index);
    plain
        && match &lk.reduce {
            None => true,
            Some(_) => lk.loops.len() == 1 && lk.computed_at().is_empty(),
        }
}

/// A row group ([`loop_ir::RowGroup`]) as one [`Form::Rows`] kernel, or
/// `None` when one of its kernels is not a [`row_member`].
///
/// Blocks of one warp, a grid-stride loop over the rows (at most
/// [`MAX_BLOCKS`] blocks); for row `i0` each kernel of the group in turn:
/// without a reduction, lane `l` computes and stores the row's points `l,
/// l + 32, …` (row-major over the other output loops); with one, lane `l`
/// accumulates the reduce points `l, l + 32, …`, the butterfly combines the
/// lanes and lane 0 stores; then `bar.sync`, after which the block's later
/// kernels read what this one wrote (`__syncthreads` orders global memory
/// within the block; CUDA C++ Programming Guide, "Synchronization
/// Functions"). Every read of a buffer the group writes is in the same row
/// ([`crate::cpu::rows::plan`]'s rule), so blocks share nothing. The
/// group's local temporaries live in shared memory ([`shared_rows`]) when
/// they fit, else they stay buffers of the program.
fn lower_rows(p: &loop_ir::Program, group: &loop_ir::RowGroup) -> DResult<Option<Launch>> {
    let members = &p.kernels[group.kernels.clone()];
    let Some(first) = members.first() else { return Ok(None) };
    if !members.iter().all(|lk| row_member(p, lk)) {
        return Ok(None);
    }
    // Element-wise kernels only, over a few long rows (GELU's steps on
    // `[1, 128, 1536]`: one row): the group would run on that many warps,
    // each kernel alone spreads over the whole GPU.
    let rows = first.loops.first().and_then(|d| d.as_int());
    if members.iter().all(|lk| lk.reduce.is_none()) && rows.is_some_and(|r| r < ROWS_MIN_ELEMENTWISE) {
        return Ok(None);
    }
    if let Some(rr) = register_rows(p, group) {
        return lower_rows_in_registers(p, group, rr).map(Some);
    }
    let (shared, smem_bytes) = shared_rows(p, group);
    let (mut b, writes) = row_group_builder(p, group, &|buf| shared.iter().any(|(b, _)| b == buf));
    let mut smem_of = BTreeMap::new();
    for (buf, row) in shared {
        smem_of.insert(buf, SmemId(b.k.smem.len() as u32));
        b.k.smem.push(row);
    }
    b.k.smem_bytes = smem_bytes;
    b.k.block = [32, 1, 1];
    b.k.min_blocks_per_sm = Some(1);
    let rows = b.dim(&first.loops[0])?;
    let blocks = rows.clone().min(MAX_BLOCKS);
    b.k.grid = [blocks.clone(), Expr::c(1), Expr::c(1)];
    let (nblk, it, row) = (b.var("nblocks"), b.var("it"), b.var("row"));
    let mut point = Vec::new();
    for lk in members {
        b.loop_vars.clear();
        b.loop_vars.insert(0, Expr::Var(row));
        b.reduces.clear();
        b.acc = None;
        match &lk.reduce {
            None if b.row_points_vectorisable(lk, &smem_of) => point.push(b.row_points_vectorised(lk, &smem_of)?),
            None => {
                let j = b.var("j");
                // Lane points j0 + 32·u, u < ROWS_CHUNK: all values, then all stores.
                let points = product(lk.loops[1..].iter().map(|d| b.dim(d)).collect::<DResult<Vec<_>>>()?);
                let dtype = p.buffer(lk.out).dtype;
                b.k.regs.push(RegArray { name: "vs".into(), kind: compute_kind(dtype), len: ROWS_CHUNK as u32 });
                let vs = RegId(b.k.regs.len() as u32 - 1);
                let mut phases = Vec::new();
                for storing in [false, true] {
                    let (u, jj) = (b.var("u"), b.var("jp"));
                    let at = RegRef { reg: vs, index: Expr::Var(u) };
                    let mut body = Vec::new();
                    b.unflatten(Expr::Var(jj), 1, &lk.loops[1..], &mut body)?;
                    if storing {
                        body.push(b.store_reg(lk, at, &smem_of)?);
                    } else {
                        b.shared_loads(&lk.value, &smem_of, &mut body)?;
                        body.push(Stmt::Compute { dst: at, value: b.scalar(&lk.value)? });
                        b.vec_loads.clear();
                    }
                    let at = Stmt::Let { var: jj, value: Expr::Var(j) + Expr::c(32) * Expr::Var(u) };
                    let inside = Stmt::If { cond: Expr::Var(jj).lt(points.clone()), then: body, otherwise: Vec::new() };
                    phases.push(unrolled(u, ROWS_CHUNK, vec![at, inside]));
                }
                point.push(Stmt::For {
                    var: j,
                    start: Expr::ThreadIdx(Dim::X),
                    end: points,
                    step: 32 * ROWS_CHUNK,
                    unroll: false,
                    body: phases,
                });
            }
            Some(r) => {
                b.acc = Some(b.reg("acc", r.dtype).reg);
                b.warp_reduction(lk, &smem_of, &mut point)?;
                b.shared_loads(&lk.value, &smem_of, &mut point)?;
                let store = b.store_in(lk, &smem_of)?;
                b.vec_loads.clear();
                point.push(Stmt::If {
                    cond: Expr::ThreadIdx(Dim::X).eq(Expr::c(0)),
                    then: store,
                    otherwise: Vec::new(),
                });
            }
        }
        point.push(Stmt::Barrier);
    }
    b.k.body = vec![
        Stmt::Let { var: nblk, value: blocks },
        Stmt::For {
            var: it,
            start: Expr::c(0),
            end: ceil_div(rows.clone(), Expr::Var(nblk)),
            step: 1,
            unroll: false,
            body: vec![
                Stmt::Let { var: row, value: Expr::Var(it) * Expr::Var(nblk) + Expr::BlockIdx(Dim::X) },
                Stmt::If { cond: Expr::Var(row).lt(rows), then: point, otherwise: Vec::new() },
            ],
        },
    ];
    let region = members.iter().flat_map(|lk| lk.nodes.iter().copied()).collect();
    Ok(Some(Launch { kernel: b.k, form: Form::Rows, args: b.args, region, outs: writes, plan: None }))
}

/// One `loop_ir` kernel as a SIMT kernel.
fn lower_kernel(p: &loop_ir::Program, lk: &loop_ir::Kernel) -> DResult<Launch> {
    if !lk.strips.is_empty() {
        return Err(diag!(Internal, "the SIMT template takes kernels without strip-mining"));
    }
    let form = form_of(lk);
    let mut b = Builder::new(p, lk);
    if let Some(r) = &lk.reduce {
        let acc = b.reg("acc", r.dtype);
        b.acc = Some(acc.reg);
        for e in lk.computed_at() {
            if let loop_ir::Expr::Reduce { id, dtype, .. } = e {
                let reg = b.reg(&format!("r{id}"), *dtype);
                b.reduces.insert(*id, reg.reg);
            }
        }
    }
    let rank = lk.loops.len() as u32;
    let total = product(lk.loops.iter().map(|d| b.dim(d)).collect::<DResult<Vec<_>>>()?);
    let body = match form {
        Form::Gemm | Form::Attention | Form::Rows | Form::WinogradTransform => {
            return Err(diag!(Internal, "form_of never chooses {form:?}"))
        }
        Form::Scan => return Err(diag!(Internal, "a scan is lowered by lower_scan")),
        Form::Elementwise | Form::Serial => {
            let out = p.buffer(lk.out);
            let vec = if vectorisable(lk, out) { VEC } else { 1 };
            let threads = Expr::c(THREADS as i64);
            let items = ceil_div(total.clone(), Expr::c(vec));
            let blocks = ceil_div(items.clone(), threads.clone()).min(MAX_BLOCKS);
            b.k.block = [THREADS, 1, 1];
            b.k.min_blocks_per_sm = Some(1);
            b.k.grid = [blocks.clone(), Expr::c(1), Expr::c(1)];
            let nblk = b.var("nblocks");
            let it = b.var("it");
            let flat = b.var("flat");
            let mut point = Vec::new();
            if vec == 1 {
                b.unflatten(Expr::Var(flat), 0, &lk.loops, &mut point)?;
                if let Some(r) = &lk.reduce {
                    let acc = b.acc_ref()?;
                    point.push(Stmt::Compute { dst: acc, value: ScalarExpr::identity(r.op, r.dtype) });
                    point.extend(b.serial_loops(rank, &r.loops, &mut |b| b.update(lk))?);
                }
                point.extend(b.store(lk)?);
            } else {
                point.extend(b.vector_point(lk, Expr::Var(flat) * Expr::c(vec), vec, &total)?);
            }
            let first =
                (Expr::Var(it) * Expr::Var(nblk) + Expr::BlockIdx(Dim::X)) * threads.clone() + Expr::ThreadIdx(Dim::X);
            vec![
                Stmt::Let { var: nblk, value: blocks },
                Stmt::For {
                    var: it,
                    start: Expr::c(0),
                    end: ceil_div(items.clone(), Expr::Var(nblk) * threads),
                    step: 1,
                    unroll: false,
                    body: vec![
                        Stmt::Let { var: flat, value: first },
                        Stmt::If { cond: Expr::Var(flat).lt(items), then: point, otherwise: Vec::new() },
                    ],
                },
            ]
        }
        Form::WarpReduce => {
            b.k.block = [32, WARPS, 1];
            b.k.min_blocks_per_sm = Some(1);
            b.k.grid = [ceil_div(total.clone(), Expr::c(WARPS as i64)), Expr::c(1), Expr::c(1)];
            let row = b.var("row");
            let mut point = Vec::new();
            b.unflatten(Expr::Var(row), 0, &lk.loops, &mut point)?;
            b.warp_reduction(lk, &BTreeMap::new(), &mut point)?;
            let store = b.store(lk)?;
            point.push(Stmt::If { cond: Expr::ThreadIdx(Dim::X).eq(Expr::c(0)), then: store, otherwise: Vec::new() });
            vec![
                Stmt::Let { var: row, value: Expr::BlockIdx(Dim::X) * Expr::c(WARPS as i64) + Expr::ThreadIdx(Dim::Y) },
                Stmt::If { cond: Expr::Var(row).lt(total), then: point, otherwise: Vec::new() },
            ]
        }
    };
    b.k.body = body;
    Ok(Launch { kernel: b.k, form, args: b.args, region: lk.nodes.clone(), outs: vec![lk.out], plan: None })
}

/// The blocks of a scan ([`Form::Scan`], `Builder::block_scan`): `warps`
/// warps a block (a power of two), each scanning at most `segment` points
/// (a multiple of 32) of a row per tile; a tile of a row is at most
/// [`ScanTiles::tile`] points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanTiles {
    /// Warps per block.
    pub warps: u32,
    /// Most points one warp takes of a tile.
    pub segment: i64,
}

/// The scans' blocks: 8 warps of at most 512 points (16 chunks of 32 in
/// registers), tiles of 4096 points. A row of at most 4096 points (a
/// constant extent) is one tile, scanned in one pass; a longer or
/// symbolic row takes three passes over tiles of 4096 (segment totals,
/// their scan, the tiles from their carries).
pub const SCAN_TILES: ScanTiles = ScanTiles { warps: 8, segment: 512 };

impl ScanTiles {
    /// The most points of a row one block scans in one step:
    /// `warps · segment`.
    pub fn tile(self) -> i64 {
        self.warps as i64 * self.segment
    }

    /// `(wr, seg)` for a row of `len` points: a row known to fit a tile
    /// takes the fewest warps `wr` (a power of two) whose segments of at
    /// most `segment` points cover it, each warp `seg` points (`len / wr`
    /// rounded up to a multiple of 32), so a block holds `warps / wr` rows;
    /// any other row all the warps of a block, `segment` points each.
    fn layout(self, len: Option<i64>) -> (u32, i64) {
        match len {
            Some(n) if n <= self.tile() => {
                let wr = (n.max(1) + self.segment - 1) / self.segment;
                let wr = (wr as u32).next_power_of_two().min(self.warps);
                let seg = (n.max(1) + wr as i64 - 1) / wr as i64;
                (wr, (seg + 31) / 32 * 32)
            }
            _ => (self.warps, self.segment),
        }
    }
}

/// One launch of a scan ([`lower_scan`]): with segment totals `t` (a row
/// longer than a tile) the totals of the (row, tile) items, their scan in
/// place per row, then the scan of each (row, tile) from its carry;
/// without, the scan of each row in one pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScanPass {
    Totals(BufId),
    Carries(BufId),
    Scan(Option<BufId>),
}

/// The dtype a scan's running value is held in on the GPU: the
/// accumulator's compute type, f32 for f16/bf16 (read back without
/// rounding).
fn running_dtype(sc: &loop_ir::Scan) -> DType {
    if sc.dtype.is_float() {
        DType::F32
    } else {
        sc.dtype
    }
}

/// Per kernel of `p`: for a scan whose row is not known to fit one tile of
/// `tiles`, a new temporary for its tile totals (`[rows…, ceil(E /
/// tile)]`, in the running dtype: f32 for floats).
fn scan_totals(p: &mut loop_ir::Program, tiles: ScanTiles) -> Vec<Option<BufId>> {
    let mut out = Vec::new();
    for k in 0..p.kernels.len() {
        let lk = &p.kernels[k];
        let Some(sc) = lk.scan.as_ref().filter(|sc| lk.loops[sc.axis].as_int().is_none_or(|e| e > tiles.tile())) else {
            out.push(None);
            continue;
        };
        let e = &lk.loops[sc.axis];
        let nb = (e + &SymDim::int(tiles.tile() - 1)).floordiv(&SymDim::int(tiles.tile()));
        let mut shape: Vec<SymDim> =
            lk.loops.iter().enumerate().filter(|&(v, _)| v != sc.axis).map(|(_, d)| d.clone()).collect();
        shape.push(nb.unwrap_or_else(|| e.clone()));
        let dtype = running_dtype(sc);
        let name = format!("{}_totals", lk.name);
        p.buffers.push(Buffer { label: format!("tile totals of {}", lk.name), name, dtype, shape, role: Role::Temp });
        out.push(Some(BufId(p.buffers.len() as u32 - 1)));
    }
    out
}

/// The SIMT launches of kernel `k` of `p`: [`lower_scan`]'s for a scan
/// (with its tile totals `totals`), else [`lower_kernel`]'s one.
fn lower_simt(p: &loop_ir::Program, k: usize, totals: Option<BufId>, tiles: ScanTiles) -> DResult<Vec<Launch>> {
    let lk = &p.kernels[k];
    match lk.scan {
        Some(_) => lower_scan(p, lk, totals, tiles),
        None => Ok(vec![lower_kernel(p, lk)?]),
    }
}

/// The launches of scan kernel `lk` ([`Form::Scan`], [`ScanPass`]): with
/// `totals` (a row longer than a tile) three, else one.
fn lower_scan(
    p: &loop_ir::Program,
    lk: &loop_ir::Kernel,
    totals: Option<BufId>,
    tiles: ScanTiles,
) -> DResult<Vec<Launch>> {
    let sc = lk.scan.as_ref().ok_or_else(|| diag!(Internal, "{} is not a scan", lk.name))?;
    let name = format!("{}_{}", p.name, lk.name);
    let passes = match totals {
        Some(t) => vec![ScanPass::Totals(t), ScanPass::Carries(t), ScanPass::Scan(Some(t))],
        None => vec![ScanPass::Scan(None)],
    };
    let mut out = Vec::new();
    for pass in passes {
        let (suffix, reads, write) = match pass {
            ScanPass::Totals(t) => ("_totals", lk.reads(), t),
            ScanPass::Carries(t) => ("_carries", Vec::new(), t),
            ScanPass::Scan(t) => ("", lk.reads().into_iter().chain(t).collect(), lk.out),
        };
        let mut b = Builder::with_buffers(p, &format!("{name}{suffix}"), &reads, &[write]);
        let body = b.block_scan(lk, sc, pass, tiles)?;
        b.k.body = body;
        out.push(Launch {
            kernel: b.k,
            form: Form::Scan,
            args: b.args,
            region: lk.nodes.clone(),
            outs: vec![write],
            plan: None,
        });
    }
    Ok(out)
}

/// Runs `prog` in the emulator ([`emulate::run`]) with the symbol values
/// `dims` (in [`GpuProgram::symbols`] order) on `inputs` (one per
/// [`Role::Input`] buffer, in input order, values rounded to the buffer's
/// dtype); the outputs in output order, as f64.
///
/// Errors: the first emulator fault, as an `Internal` diagnostic naming the
/// kernel; `Io` for inputs of the wrong count or length.
pub fn emulate(prog: &GpuProgram, dims: &[i64], inputs: &[Vec<f64>]) -> DResult<Vec<Vec<f64>>> {
    let mut mem: Vec<Arg> = Vec::new();
    let mut outputs = Vec::new();
    for (i, buf) in prog.buffers.iter().enumerate() {
        let n = prog.elements(BufId(i as u32), dims)?;
        let n = usize::try_from(n).map_err(|_| diag!(Io, "buffer `{}` has {n} elements", buf.name))?;
        mem.push(match buf.role {
            Role::Input(k) => {
                let data = inputs.get(k).ok_or_else(|| diag!(Io, "no data for input {k}"))?;
                if data.len() != n {
                    return Err(diag!(Io, "input `{}` has {} values, not {n}", buf.label, data.len()));
                }
                Arg::tensor(buf.dtype, data)
            }
            Role::Output(k) => {
                outputs.push((k, i));
                Arg::tensor(buf.dtype, &vec![0.0; n])
            }
            Role::Temp => Arg::tensor(buf.dtype, &vec![0.0; n]),
        });
    }
    for l in &prog.launches {
        let mut args: Vec<Arg> = l
            .args
            .iter()
            .map(|a| match a {
                LaunchArg::Buffer(b) => mem[b.0 as usize].clone(),
                LaunchArg::Dim(k) => Arg::Int(dims.get(*k).copied().unwrap_or(0)),
                LaunchArg::Int(v) => Arg::Int(*v),
                LaunchArg::TensorMap => Arg::TensorMap,
            })
            .collect();
        emulate::run(&l.kernel, &mut args).map_err(|e| diag!(Internal, "kernel `{}`: {e}", l.kernel.name))?;
        for out in &l.outs {
            if let Some(k) = l.args.iter().position(|a| *a == LaunchArg::Buffer(*out)) {
                mem[out.0 as usize] = args[k].clone();
            }
        }
    }
    outputs.sort();
    Ok(outputs.into_iter().map(|(_, i)| mem[i].values(prog.buffers[i].dtype)).collect())
}

#[cfg(test)]
#[path = "simt_tests.rs"]
pub(super) mod tests;
