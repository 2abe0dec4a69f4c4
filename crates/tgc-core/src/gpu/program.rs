//! A whole graph on the GPU: its buffers and its launches in order
//! ([`GpuProgram`]), each launch a dialect kernel with its form
//! ([`Form`]), the arguments bound to its parameters ([`LaunchArg`]) and
//! the Tiny nodes it computes ([`Launch`]).
//!
//! At concrete sizes a program gives its grids ([`Launch::grid`], the
//! kernel's grid expressions over the launch's arguments), the steps the
//! runtime runs ([`GpuProgram::steps`]: `tgc run --backend cuda` and the
//! generated launch functions) and its outputs in the emulator
//! ([`emulate`]).

use crate::cpu::loop_ir::{BufId, Buffer, Role};
use crate::diag;
use crate::diag::DResult;
use crate::tiny::{Constraint, Graph, NodeId};

use super::dialect::{self, *};
use super::emulate::{self, Arg};

/// The byte alignment every tensor argument of a GPU kernel needs: the
/// 16-byte vector accesses (`cp.async.cg`, `ld`/`st.global.v4`).
pub const TENSOR_ALIGN: usize = 16;

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
    /// The sm80 tensor-core template ([`super::mma::lower::build`]) for a whole
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
    /// [`SimtStmt::ShflUpScan`] steps (Hillis & Steele, deltas 1, 2, 4, 8, 16),
    /// the carry combined in, the lanes inside the row storing (an
    /// exclusive scan the value of the lane before, [`SimtStmt::ShflIdx`]),
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
    /// The TMA tensor map the parameter's [`dialect::TensorMapParam`]
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
    pub kernel: dialect::Kernel,
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
        m: &dialect::TensorMapParam,
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
        let Some(dialect::ParamKind::Ptr { dtype, .. }) = self.kernel.params.get(m.tensor.0 as usize).map(|p| p.kind)
        else {
            return Err(diag!(Internal, "the tensor of a tensor map is not a pointer parameter"));
        };
        let value = |p: dialect::ParamId| -> DResult<u64> {
            let v = eval_launch(&Expr::Param(p), &self.args, dims)?;
            u64::try_from(v).map_err(|_| diag!(Internal, "a tensor map's extent or stride is {v}"))
        };
        Ok(MapArg {
            buffer,
            dtype,
            dims: [value(m.dims[0])?, value(m.dims[1])?],
            row_stride_bytes: value(m.row_stride)? * dtype.size_bytes() as u64,
            box_dims: m.box_dims,
            swizzle_128b: m.swizzle == dialect::Swizzle::B128,
        })
    }
}

/// `e` of a kernel launched with `args` at `dims` ([`Expr::eval`]): a
/// grid or a tensor map's extent, which reads only dims and constants.
pub(crate) fn eval_launch(e: &Expr, args: &[LaunchArg], dims: &[i64]) -> DResult<i64> {
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
///    ([`crate::emit::cuda::compile`]); each kernel's entry point is
///    `launch.kernel.symbol()`.
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
            let symbol = l.kernel.symbol();
            let grid = l.grid(dims)?;
            let extent = |v: i64| tgc_runtime::launch::grid_extent(&symbol, v).map_err(|e| diag!(Io, "{e}"));
            let grid = [extent(grid[0])?, extent(grid[1])?, extent(grid[2])?];
            let mut args = Vec::new();
            for (a, p) in l.args.iter().zip(&l.kernel.params) {
                let int = |v: i64| -> DResult<StepArg> {
                    Ok(match p.kind {
                        dialect::ParamKind::I32 => StepArg::I32(
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
                        dialect::ParamKind::TensorMap(m) => StepArg::TensorMap(l.tensor_map(m, &of_buf, dims)?),
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
    pub(crate) fn without_unused_temps(mut self) -> GpuProgram {
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

    /// The kernels, for one NVRTC unit ([`crate::emit::cuda::compile`]).
    pub fn kernels(&self) -> Vec<dialect::Kernel> {
        self.launches.iter().map(|l| l.kernel.clone()).collect()
    }
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

/// The buffers of a one-kernel program of `g`: one per graph input, in
/// order (`in{i}`), then the output (`out0`).
pub fn whole_graph_buffers(g: &Graph) -> Vec<Buffer> {
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
