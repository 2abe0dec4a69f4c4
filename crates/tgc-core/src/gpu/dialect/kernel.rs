//! A whole GPU dialect kernel ([`Kernel`]: parameters, grid and block,
//! shared-memory buffers, registers, variables and the statement body),
//! the pre-order numbering of its statements, and the errors the verifier
//! and the emulator report about it ([`GpuError`], [`Fault`]).

use std::fmt;

use super::ir::*;
use super::stmt::{Sm90Stmt, Stmt};

/// A whole kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub arch: Arch,
    pub params: Vec<Param>,
    /// Blocks per grid dimension, over scalar parameters.
    pub grid: [Expr; 3],
    /// `grid[0]` is an upper bound: the runtime launches at most one block
    /// per SM of the device along `x` (a persistent kernel, which walks its
    /// work by `gridDim.x`: [`Expr::GridDim`]), so a device with fewer SMs
    /// than the target row (an H100 PCIe's 114 against the SXM's 132)
    /// runs one wave.
    pub persistent: bool,
    /// CTAs per thread block cluster along `x` (1: no cluster), printed as
    /// `__cluster_dims__(cluster, 1, 1)`; `grid[0]` is then a multiple of
    /// it, and the CTA's rank in its cluster is `blockIdx.x % cluster`
    /// (CUDA C++ Programming Guide, "Thread Block Clusters").
    pub cluster: u32,
    /// Threads per block dimension.
    pub block: [u32; 3],
    /// `__launch_bounds__`'s minimum blocks per SM, when the kernel states
    /// one. With the block size alone ptxas may cap registers to fit as
    /// many blocks as the SM holds (32 per thread at 256 threads) and
    /// spill; `Some(1)` leaves it every register a block can have (CUDA C++
    /// Programming Guide, "Launch Bounds").
    pub min_blocks_per_sm: Option<u32>,
    /// Dynamic shared memory per block, in bytes (every buffer lies within).
    pub smem_bytes: u64,
    pub smem: Vec<SmemBuffer>,
    pub regs: Vec<RegArray>,
    /// Variable names, indexed by [`VarId`].
    pub vars: Vec<String>,
    pub body: Vec<Stmt>,
}

impl Kernel {
    /// The `extern "C"` symbol of the kernel (the CUDA C printer's and the
    /// runtime's): its name with every character that
    /// is not an ASCII letter, digit or `_` replaced by `_` (and `_` in front
    /// of a leading digit). Stable: it depends on the name alone.
    pub fn symbol(&self) -> String {
        let mut s: String =
            self.name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
        if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
            s.insert(0, '_');
        }
        s
    }

    /// A kernel with no parameters, buffers, registers or statements, one
    /// block of one warp.
    pub fn empty(name: &str, arch: Arch) -> Kernel {
        Kernel {
            name: name.into(),
            arch,
            params: Vec::new(),
            grid: [Expr::c(1), Expr::c(1), Expr::c(1)],
            persistent: false,
            cluster: 1,
            block: [32, 1, 1],
            min_blocks_per_sm: None,
            smem_bytes: 0,
            smem: Vec::new(),
            regs: Vec::new(),
            vars: Vec::new(),
            body: Vec::new(),
        }
    }

    /// Appends a parameter.
    pub fn add_param(&mut self, name: &str, kind: ParamKind) -> ParamId {
        self.params.push(Param { name: name.into(), kind });
        ParamId(self.params.len() as u32 - 1)
    }

    /// Appends a variable name.
    pub fn add_var(&mut self, name: &str) -> VarId {
        self.vars.push(name.into());
        VarId(self.vars.len() as u32 - 1)
    }

    /// `idx`'s digits of extents `extents` (mixed radix, outermost first):
    /// `idx / Π(later extents) % extent`, without the `%` on the outermost
    /// digit and the `/` on the innermost, each a `Let` named `name{j}`
    /// pushed to `out` (one digit is `idx`'s expression itself).
    pub fn split_digits(&mut self, out: &mut Vec<Stmt>, name: &str, idx: Expr, extents: &[i64]) -> Vec<Expr> {
        let n = extents.len();
        (0..n)
            .map(|j| {
                let below: i64 = extents[j + 1..].iter().product();
                let mut e = if below == 1 { idx.clone() } else { idx.clone() / below };
                if j > 0 {
                    e = e % extents[j];
                }
                if n == 1 {
                    return e;
                }
                let var = self.add_var(&format!("{name}{j}"));
                out.push(Stmt::Let { var, value: e });
                Expr::Var(var)
            })
            .collect()
    }

    /// Appends a register array of `len` registers.
    pub fn add_regs(&mut self, name: &str, kind: RegKind, len: u32) -> RegId {
        self.regs.push(RegArray { name: name.into(), kind, len });
        RegId(self.regs.len() as u32 - 1)
    }

    /// Appends a shared buffer of `size` bytes at the next 128-byte
    /// boundary (a whole swizzle line) and grows `smem_bytes` to hold it;
    /// a reference to its byte 0.
    pub fn add_smem(&mut self, name: &str, size: u64, swizzle: Swizzle) -> SmemRef {
        let offset = self.smem_bytes.div_ceil(128) * 128;
        self.smem.push(SmemBuffer { name: name.into(), offset, size, swizzle });
        self.smem_bytes = offset + size;
        SmemRef { buf: SmemId(self.smem.len() as u32 - 1), offset: Expr::c(0), swizzle }
    }

    /// The alignment in bytes the buffer offsets of the dynamic shared
    /// memory are relative to: 1024 when a TMA copy or a `wgmma`
    /// descriptor reads or writes it (the 128-byte swizzle acts on address
    /// bits 4–9), else 16. The printed kernel aligns its base up to it.
    pub fn smem_base_align(&self) -> u64 {
        let mut async_proxy = false;
        self.walk(&mut |_, s| {
            async_proxy |= matches!(s, Stmt::Sm90(Sm90Stmt::TmaLoad { .. }) | Stmt::Sm90(Sm90Stmt::Wgmma { .. }))
        });
        if async_proxy {
            1024
        } else {
            16
        }
    }

    /// The dynamic shared memory a launch asks for: `smem_bytes`, plus
    /// the slack the printed kernel needs to align its base to
    /// [`Kernel::smem_base_align`] (the runtime gives a 16-byte aligned
    /// base).
    pub fn launch_smem_bytes(&self) -> u64 {
        let align = self.smem_base_align();
        if self.smem_bytes == 0 || align <= 16 {
            self.smem_bytes
        } else {
            self.smem_bytes + align - 16
        }
    }

    /// Per register array, whether a `wgmma` uses it: accumulates into it
    /// (its `d`) or reads its A fragments from it ([`WgmmaA::Regs`]).
    pub fn wgmma_registers(&self) -> Vec<bool> {
        let mut acc = vec![false; self.regs.len()];
        self.walk(&mut |_, s| {
            if let Stmt::Sm90(Sm90Stmt::Wgmma { d, a, .. }) = s {
                for r in std::iter::once(d).chain(a.regs()) {
                    if let Some(x) = acc.get_mut(r.reg.0 as usize) {
                        *x = true;
                    }
                }
            }
        });
        acc
    }

    /// Threads per block.
    pub fn threads(&self) -> u64 {
        self.block.iter().map(|&b| b as u64).product()
    }

    /// Calls `f(id, stmt)` on every statement in pre-order.
    pub fn walk(&self, f: &mut impl FnMut(u32, &Stmt)) {
        let mut next = 0;
        walk(&self.body, &mut next, f);
    }
}

fn walk(body: &[Stmt], next: &mut u32, f: &mut impl FnMut(u32, &Stmt)) {
    for s in body {
        f(*next, s);
        *next += 1;
        for body in s.children() {
            walk(body, next, f);
        }
    }
}

/// The number of statements in `body`, nested ones included (how far the
/// pre-order ids advance over it).
pub fn count_stmts(body: &[Stmt]) -> u32 {
    let mut n = 0;
    walk(body, &mut n, &mut |_, _| {});
    n
}

/// What kind of fault a verifier or emulator error is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// An id out of its table, or a variable used outside its scope.
    BadId,
    /// A statement the kernel's arch does not have (invariant 2).
    Arch,
    /// A barrier or warp-collective statement under divergent control.
    Divergence,
    /// Fragment register counts or kinds that do not fit the instruction.
    FragmentShape,
    /// A shared access whose swizzle is not its buffer's.
    Swizzle,
    /// A shared read of bytes whose `cp.async` group is not complete.
    IncompleteRead,
    /// A shared access that races with another thread's (no barrier between).
    Race,
    /// A global or shared access outside its tensor or buffer.
    OutOfBounds,
    /// An access not aligned to its size.
    Misaligned,
    /// A wait that can never complete: an `MbarrierWait` on a phase no
    /// thread still to run completes, or tasks that all wait.
    Deadlock,
    /// A bad operand value: a size out of range, division by zero, a
    /// register index out of its array, a wrong launch argument.
    BadValue,
}

/// A verifier or emulator error, naming the statement (pre-order id) it is
/// about when there is one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuError {
    pub fault: Fault,
    pub stmt: Option<u32>,
    pub message: String,
}

impl GpuError {
    pub fn new(fault: Fault, stmt: Option<u32>, message: impl Into<String>) -> GpuError {
        GpuError { fault, stmt, message: message.into() }
    }
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.stmt {
            Some(s) => write!(f, "{:?} at s{s}: {}", self.fault, self.message),
            None => write!(f, "{:?}: {}", self.fault, self.message),
        }
    }
}

impl std::error::Error for GpuError {}
