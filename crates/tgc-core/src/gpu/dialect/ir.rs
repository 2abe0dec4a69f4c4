//! The GPU dialect IR (`000` §1.8): one CUDA kernel as a tree of statements
//! close to PTX, from which the CUDA C printer writes C with inline PTX and
//! which the emulator ([`crate::gpu::emulate`]) runs on the CPU.
//!
//! A [`Kernel`] has typed parameters, a grid (expressions over the scalar
//! parameters) and a block shape, shared-memory buffers with byte offsets
//! and a swizzle, per-thread register arrays (fragments), named integer
//! variables and a body. The statements are §1.8's
//! `CpAsync`/`CommitGroup`/`WaitGroup`/`LdMatrix`/`MmaSync`/`Epilogue`/
//! `StGlobalVec` plus the control around them: `For`, `If`, `Let`,
//! `Barrier`, a synchronous global→shared copy for operands too misaligned
//! for `cp.async`, an accumulator initialiser, shared loads and stores of
//! registers (the epilogue's staging of C for 16-byte global stores), and
//! `griddepcontrol.wait`. The SIMT template ([`crate::gpu::simt`]) adds scalar
//! values computed in registers ([`ScalarExpr`], the mirror of
//! `cpu::loop_ir::Expr`) with `Compute`, `Accumulate`, the warp butterfly
//! `ShflBfly` (`shfl.sync.bfly`), the warp scan's `ShflUpScan`
//! (`shfl.sync.up`) and `ShflIdx` (`shfl.sync.idx`), scalar `StGlobal` and vector
//! `LdGlobalVec`, and `i32` registers ([`RegKind::I32`]). The SM90 branch
//! of the MMA template adds tensor-map parameters
//! ([`ParamKind::TensorMap`]), `TmaLoad`, the mbarrier statements
//! (`MbarrierInit`, `FenceMbarrierInit`, `MbarrierArriveExpectTx`,
//! `MbarrierWait`, `MbarrierArrive`), `FenceProxyAsync`, `Wgmma` with its
//! `WgmmaFence`/`WgmmaCommit`/`WgmmaWait`, and for warp specialisation
//! `WarpSpecialize` (a producer and a consumer role, each whole
//! warpgroups, running concurrently), `SetMaxNReg` and the named barrier
//! `BarrierNamed` of one role's threads.
//!
//! Invariants ([`super::verify`] checks them and reports each violation with
//! the statement's id):
//!
//! 1. Ids index their tables: every [`ParamId`], [`VarId`], [`RegId`],
//!    [`SmemId`] is in range; a variable is defined once (`Let` or `For`)
//!    and used only inside the scope that defines it.
//! 2. Each statement kind runs on the architectures [`Stmt::min_arch`]
//!    names; the kernel's `arch` is at least that.
//! 3. `Barrier`, `LdMatrix` and `MmaSync` are not under an `If` or a `For`
//!    whose condition or bounds depend on the thread (`bar.sync` needs
//!    every thread of the CTA, `ldmatrix`/`mma.sync` are `.aligned`: every
//!    lane of the warp; PTX ISA "bar.sync", "ldmatrix", "mma").
//! 4. Fragments: `LdMatrix.xN` writes `N` `.b32` registers; `MmaSync`
//!    m16n8k16 takes four A, two B (packed `f16x2`/`bf16x2`) and four C/D
//!    (`f32`) registers (PTX ISA "Matrix Fragments for mma.m16n8k16 with
//!    floating point type"). Register indices are constants once the
//!    enclosing `unroll` loops are unrolled (so the printed arrays stay in
//!    registers) and lie inside their arrays.
//! 5. Every shared-memory access of a buffer uses the buffer's [`Swizzle`]:
//!    the stores (`CpAsync`, `CopySync`) and the reads (`LdMatrix`) of one
//!    buffer apply one function.
//! 6. `LdMatrix` reads only bytes whose `cp.async` group a `WaitGroup`
//!    completed, with a `Barrier` after it (the bytes are other threads'
//!    copies). The verifier checks the path structure (a wait and then a
//!    barrier before every such read, in every loop iteration that issues
//!    new copies); the emulator checks the group counts byte by byte.
//!
//! 7. SM90: a `Wgmma` reads only bytes of TMA copies an `MbarrierWait`
//!    completed (the same path rule as 6, with the wait in place of
//!    `WaitGroup` + `Barrier`; the emulator checks each byte and each
//!    phase's arrival and transaction counts); other statements touch a
//!    `wgmma`'s accumulators or A-fragment registers only after a
//!    `WgmmaWait` retired its group, and a
//!    `WgmmaFence` separates their accesses from the next `Wgmma`
//!    (PTX ISA "wgmma.fence"); `Wgmma` and its fence, commit and wait run
//!    in whole warpgroups (invariant 3's rule, `.sync.aligned`); a TMA
//!    box is written, and a descriptor reads, with its buffer's swizzle
//!    (invariant 5).
//! 8. Warp specialisation: a `WarpSpecialize` is not nested in another or
//!    under thread-dependent control, and its roles are whole warpgroups;
//!    inside a role a barrier is the role's `BarrierNamed` (a `Barrier`
//!    would wait for the other role's threads), and the roles meet only
//!    through mbarriers; `SetMaxNReg` is a warpgroup collective whose
//!    count is a multiple of 8 in 24..=256, and the roles' budgets fit the
//!    SM's 64K registers (PTX ISA "setmaxnreg").
//! 9. Clusters: a kernel of more than one CTA per cluster is for sm90,
//!    its cluster one-dimensional and at most 8 CTAs; a multicast
//!    `TmaLoad` names CTAs of the cluster and a remote `MbarrierArrive`
//!    needs one; `ClusterSync` is a collective of the whole CTA; a kernel
//!    whose CTAs reach a peer's shared memory syncs the cluster after its
//!    mbarriers' initialisation and at its end, so no CTA exits while a
//!    peer may still write its shared memory (PTX ISA "Distributed Shared
//!    Memory").
//!
//! Units: global offsets ([`GlobalRef::offset`]) are in elements of the
//! pointer's dtype; shared offsets ([`SmemRef::offset`]) are in bytes from
//! the buffer's start before the swizzle; copy sizes are in bytes. Integer
//! expressions are evaluated in `i64` with C semantics (`/` and `%`
//! truncate); comparisons give 0 or 1; what C leaves undefined (division
//! by zero, overflow) is an error: [`BinOp::eval`], [`Expr::eval`].
//!
//! The text form (`Display` of [`Kernel`], the `gpu` dump) is in
//! `text.rs`.
//!
//! Statement ids: statements are numbered in pre-order (a `For` before its
//! body, an `If`'s `then` before its `else`) from 0; the text dump prints
//! `sN:` before each, and verifier and emulator errors name `sN`.

use std::fmt;

use crate::plan::target::{self, Target};
use crate::tiny::{BinaryOp, ReduceOp, UnaryOp};
use crate::DType;

/// The GPU architecture a kernel is compiled for (PTX `.target`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Arch {
    /// `sm_80` (Ampere): `cp.async`, `ldmatrix`, `mma.sync`.
    Sm80,
    /// `sm_90` (Hopper): adds `griddepcontrol`, TMA, `wgmma`.
    Sm90,
}

impl Arch {
    /// `sm80` / `sm90`, as plans and targets spell it.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Sm80 => "sm80",
            Arch::Sm90 => "sm90",
        }
    }

    pub fn parse(s: &str) -> Option<Arch> {
        [Arch::Sm80, Arch::Sm90].into_iter().find(|a| a.name() == s)
    }

    /// The hardware row kernels for this architecture are checked against
    /// (grid, thread, register and shared-memory limits).
    pub fn target(self) -> &'static Target {
        match self {
            Arch::Sm80 => &target::SM80,
            Arch::Sm90 => &target::SM90,
        }
    }
}

/// Index into [`Kernel::params`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ParamId(pub u32);
/// Index into [`Kernel::vars`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u32);
/// Index into [`Kernel::regs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegId(pub u32);
/// Index into [`Kernel::smem`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SmemId(pub u32);

/// A kernel parameter's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A global-memory pointer to elements of `dtype`; `writable` false
    /// prints as `const T* __restrict__`.
    Ptr { dtype: DType, writable: bool },
    /// A 32-bit signed integer (`int`).
    I32,
    /// A 64-bit signed integer (`long long`).
    I64,
    /// A TMA tensor map (`CUtensorMap`, 128 bytes, passed by value as a
    /// `const __grid_constant__` parameter; PTX ISA "Tensor Memory
    /// Accelerator"), which the host encodes at each launch from the
    /// arguments its [`TensorMapParam`] names.
    TensorMap(TensorMapParam),
}

/// What a tensor-map parameter describes: a 2-D row-major tensor
/// (`tensor`, a pointer parameter) of `dims[1]` rows of `dims[0]`
/// elements, `row_stride` elements apart (all three scalar parameters),
/// and the box one [`Sm90Stmt::TmaLoad`] copies: `box_dims[1]` rows of
/// `box_dims[0]` elements, written to shared memory densely (row `r` at
/// byte `r · box_dims[0] · sizeof(dtype)`) with `swizzle` (the identity or
/// [`Swizzle::B128`], `CU_TENSOR_MAP_SWIZZLE_128B`). Elements outside the
/// tensor are zero-filled and still counted in the copy's bytes
/// (`cuTensorMapEncodeTiled`, CUDA Driver API).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMapParam {
    pub tensor: ParamId,
    /// Extents, innermost (contiguous) first.
    pub dims: [ParamId; 2],
    pub row_stride: ParamId,
    /// Box extents in elements, innermost first.
    pub box_dims: [u32; 2],
    pub swizzle: Swizzle,
}

impl TensorMapParam {
    /// Bytes one box copy moves (and counts toward its mbarrier's
    /// transactions), for elements of `dtype`.
    pub fn box_bytes(&self, dtype: DType) -> u64 {
        self.box_dims[0] as u64 * self.box_dims[1] as u64 * dtype.size_bytes() as u64
    }
}

/// One kernel parameter, in ABI order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
}

/// A thread or block index dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    X,
    Y,
    Z,
}

impl Dim {
    pub const ALL: [Dim; 3] = [Dim::X, Dim::Y, Dim::Z];

    pub fn name(self) -> &'static str {
        match self {
            Dim::X => "x",
            Dim::Y => "y",
            Dim::Z => "z",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// Binary integer operators, with C meaning on `i64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    /// Truncating division; division by zero is an error.
    Div,
    /// Remainder with the sign of the dividend; by zero is an error.
    Rem,
    /// Floor division, `⌊a / b⌋` for `b > 0` (isl's `floord`); a divisor
    /// that is not positive is an error. One operator, not `a < 0 ? … : …`:
    /// that form repeats `a`, so nested divisions grew as 3^depth.
    FloorDiv,
    Min,
    Max,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    /// Comparisons give 0 or 1.
    Lt,
    Le,
    Eq,
    Ne,
    /// Logical and/or of two truth values (non-zero is true), giving 0 or 1.
    LAnd,
    LOr,
}

impl BinOp {
    /// The C spelling (`min`/`max`/`floord` print as calls).
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::FloorDiv => "floord",
            BinOp::Min => "min",
            BinOp::Max => "max",
            BinOp::And => "&",
            BinOp::Or => "|",
            BinOp::Xor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::LAnd => "&&",
            BinOp::LOr => "||",
        }
    }

    /// `x op y` in `i64` with C semantics (C11 §6.5.5–§6.5.14): `/`
    /// truncates toward zero and `%` takes the dividend's sign; `>>` is
    /// arithmetic (what nvcc and every C compiler tgc targets do with a
    /// negative left operand); comparisons and `&&`/`||` give 0 or 1.
    ///
    /// Where C leaves the result undefined the answer is an [`EvalError`],
    /// never a panic and never a wrapped value: division or remainder by
    /// zero, a result outside `i64` (`+`, `-`, `*`, `i64::MIN / -1`,
    /// `i64::MIN % -1`, a `<<` that shifts out significant bits), a shift
    /// count outside `0..64`, and a [`BinOp::FloorDiv`] divisor that is not
    /// positive.
    ///
    /// This is the one definition of the operators' meaning: the verifier,
    /// the emulator and launch evaluation call it (through [`Expr::eval`]),
    /// and a property test holds the Rust grid printer to it.
    pub fn eval(self, x: i64, y: i64) -> Result<i64, EvalError> {
        let fail = |why| EvalError { op: self, x, y, why };
        let shift = || u32::try_from(y).ok().filter(|&n| n < 64).ok_or(fail(Undefined::ShiftCount));
        let nonzero = || if y == 0 { Err(fail(Undefined::DivisionByZero)) } else { Ok(y) };
        let overflow = |v: Option<i64>| v.ok_or(fail(Undefined::Overflow));
        Ok(match self {
            BinOp::Add => overflow(x.checked_add(y))?,
            BinOp::Sub => overflow(x.checked_sub(y))?,
            BinOp::Mul => overflow(x.checked_mul(y))?,
            BinOp::Div => overflow(x.checked_div(nonzero()?))?,
            BinOp::Rem => overflow(x.checked_rem(nonzero()?))?,
            BinOp::FloorDiv if y > 0 => x.div_euclid(y),
            BinOp::FloorDiv => return Err(fail(Undefined::FloorDivisor)),
            BinOp::Min => x.min(y),
            BinOp::Max => x.max(y),
            BinOp::And => x & y,
            BinOp::Or => x | y,
            BinOp::Xor => x ^ y,
            BinOp::Shl => {
                let n = shift()?;
                let v = x << n;
                if v >> n != x {
                    return Err(fail(Undefined::Overflow));
                }
                v
            }
            BinOp::Shr => x >> shift()?,
            BinOp::Lt => (x < y) as i64,
            BinOp::Le => (x <= y) as i64,
            BinOp::Eq => (x == y) as i64,
            BinOp::Ne => (x != y) as i64,
            BinOp::LAnd => (x != 0 && y != 0) as i64,
            BinOp::LOr => (x != 0 || y != 0) as i64,
        })
    }
}

/// Why a [`BinOp`] has no value on two operands ([`BinOp::eval`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvalError {
    pub op: BinOp,
    pub x: i64,
    pub y: i64,
    pub why: Undefined,
}

/// The cases C leaves undefined, which [`BinOp::eval`] refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Undefined {
    /// `/` or `%` by 0.
    DivisionByZero,
    /// The exact result is outside `i64`.
    Overflow,
    /// A shift count outside `0..64`.
    ShiftCount,
    /// A `floord` divisor that is not positive.
    FloorDivisor,
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.why {
            Undefined::DivisionByZero => "divides by zero",
            Undefined::Overflow => "overflows i64",
            Undefined::ShiftCount => "shifts by a count outside 0..64",
            Undefined::FloorDivisor => "floor-divides by a divisor that is not positive",
        };
        write!(f, "`{} {} {}` {why}", self.x, self.op.symbol(), self.y)
    }
}

/// An integer expression: addresses, loop bounds, predicates.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    Const(i64),
    /// A scalar (`I32`/`I64`) parameter's value.
    Param(ParamId),
    /// A `Let` or `For` variable.
    Var(VarId),
    /// `threadIdx.{x,y,z}`.
    ThreadIdx(Dim),
    /// `blockIdx.{x,y,z}`.
    BlockIdx(Dim),
    /// `gridDim.{x,y,z}` (PTX `%nctaid`): the blocks of the launch, which
    /// for a [`Kernel::persistent`] kernel's `x` the runtime chooses.
    GridDim(Dim),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// `cond ? a : b`.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
}

impl Expr {
    pub fn c(v: i64) -> Expr {
        Expr::Const(v)
    }

    pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
        Expr::Bin(op, Box::new(a), Box::new(b))
    }

    pub fn min(self, b: impl Into<Expr>) -> Expr {
        Expr::bin(BinOp::Min, self, b.into())
    }

    pub fn max(self, b: impl Into<Expr>) -> Expr {
        Expr::bin(BinOp::Max, self, b.into())
    }

    pub fn lt(self, b: impl Into<Expr>) -> Expr {
        Expr::bin(BinOp::Lt, self, b.into())
    }

    pub fn le(self, b: impl Into<Expr>) -> Expr {
        Expr::bin(BinOp::Le, self, b.into())
    }

    pub fn eq(self, b: impl Into<Expr>) -> Expr {
        Expr::bin(BinOp::Eq, self, b.into())
    }

    pub fn and(self, b: impl Into<Expr>) -> Expr {
        Expr::bin(BinOp::LAnd, self, b.into())
    }

    pub fn xor(self, b: impl Into<Expr>) -> Expr {
        Expr::bin(BinOp::Xor, self, b.into())
    }

    /// `self ? a : b`.
    pub fn select(self, a: impl Into<Expr>, b: impl Into<Expr>) -> Expr {
        Expr::Select(Box::new(self), Box::new(a.into()), Box::new(b.into()))
    }

    /// `Σ coefficient · value + constant` with only its non-zero terms
    /// (a coefficient of 1 unmultiplied): an affine address.
    pub fn linear(terms: impl IntoIterator<Item = (i64, Expr)>, constant: i64) -> Expr {
        let mut e: Option<Expr> = None;
        for (k, x) in terms {
            if k == 0 {
                continue;
            }
            let t = if k == 1 { x } else { x * k };
            e = Some(match e {
                None => t,
                Some(e) => e + t,
            });
        }
        match (e, constant) {
            (None, k) => Expr::c(k),
            (Some(e), 0) => e,
            (Some(e), k) => e + k,
        }
    }

    /// The value of `self` with C semantics ([`BinOp::eval`]), where
    /// `leaf` gives the value of each [`Leaf`] (or the caller's error for
    /// one it cannot read) and `undefined` turns an operator's
    /// [`EvalError`] into that error.
    /// As in C, a `Select` evaluates only the chosen operand and `&&`/`||`
    /// skip their right operand when the left decides (so `d != 0 && n / d`
    /// is defined at `d = 0`).
    pub fn eval<E>(
        &self,
        leaf: &mut impl FnMut(Leaf) -> Result<i64, E>,
        undefined: &impl Fn(EvalError) -> E,
    ) -> Result<i64, E> {
        match self {
            Expr::Const(v) => Ok(*v),
            Expr::Param(p) => leaf(Leaf::Param(*p)),
            Expr::Var(v) => leaf(Leaf::Var(*v)),
            Expr::ThreadIdx(d) => leaf(Leaf::ThreadIdx(*d)),
            Expr::BlockIdx(d) => leaf(Leaf::BlockIdx(*d)),
            Expr::GridDim(d) => leaf(Leaf::GridDim(*d)),
            Expr::Select(c, a, b) => {
                if c.eval(leaf, undefined)? != 0 {
                    a.eval(leaf, undefined)
                } else {
                    b.eval(leaf, undefined)
                }
            }
            Expr::Bin(op, a, b) => {
                let x = a.eval(leaf, undefined)?;
                match (op, x) {
                    (BinOp::LAnd, 0) => return Ok(0),
                    (BinOp::LOr, x) if x != 0 => return Ok(1),
                    _ => {}
                }
                let y = b.eval(leaf, undefined)?;
                op.eval(x, y).map_err(undefined)
            }
        }
    }

    /// Calls `f` on every sub-expression, this one first.
    pub fn visit(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Bin(_, a, b) => {
                a.visit(f);
                b.visit(f);
            }
            Expr::Select(c, a, b) => {
                c.visit(f);
                a.visit(f);
                b.visit(f);
            }
            _ => {}
        }
    }

    /// True when the value may differ between threads of one block (it
    /// reads `threadIdx` or a variable in `thread_vars`).
    pub fn depends_on_thread(&self, thread_vars: &[VarId]) -> bool {
        let mut dep = false;
        self.visit(&mut |e| match e {
            Expr::ThreadIdx(_) => dep = true,
            Expr::Var(v) if thread_vars.contains(v) => dep = true,
            _ => {}
        });
        dep
    }
}

/// The leaves of an [`Expr`] whose value depends on where it is evaluated
/// (what [`Expr::eval`] asks its caller for).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaf {
    Param(ParamId),
    Var(VarId),
    ThreadIdx(Dim),
    BlockIdx(Dim),
    GridDim(Dim),
}

impl From<i64> for Expr {
    fn from(v: i64) -> Expr {
        Expr::Const(v)
    }
}

impl From<VarId> for Expr {
    fn from(v: VarId) -> Expr {
        Expr::Var(v)
    }
}

macro_rules! expr_op {
    ($tr:ident, $f:ident, $op:ident) => {
        impl<T: Into<Expr>> std::ops::$tr<T> for Expr {
            type Output = Expr;
            fn $f(self, rhs: T) -> Expr {
                Expr::bin(BinOp::$op, self, rhs.into())
            }
        }
    };
}
expr_op!(Add, add, Add);
expr_op!(Sub, sub, Sub);
expr_op!(Mul, mul, Mul);
expr_op!(Div, div, Div);
expr_op!(Rem, rem, Rem);

/// An XOR swizzle of shared-memory byte offsets, CUTLASS `Swizzle<B, M, S>`
/// applied to bytes: `off ^ ((off >> shift) & (((1 << bits) - 1) << base))`.
///
/// With `base = 4` it permutes the 16-byte chunks of a row by higher
/// offset bits, so the eight 16-byte rows one `ldmatrix` 8×8 matrix reads
/// fall in distinct bank groups; it keeps every 16-byte chunk whole, so
/// `cp.async`'s 16-byte copies and `ldmatrix`'s row reads stay aligned.
/// `bits = 0` is the identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Swizzle {
    pub bits: u32,
    pub base: u32,
    pub shift: u32,
}

impl Swizzle {
    pub const IDENTITY: Swizzle = Swizzle { bits: 0, base: 0, shift: 0 };

    /// The 128-byte swizzle of TMA (`CU_TENSOR_MAP_SWIZZLE_128B`) and of
    /// `wgmma` matrix descriptors (mode 1): the 16-byte chunk index (bits
    /// 4–6) XOR the 128-byte row index mod 8 (bits 7–9), on addresses of a
    /// 1024-byte aligned buffer (PTX ISA "Tensor Memory Accelerator:
    /// swizzling modes"; [`Swizzle::for_rows`]`(128)`).
    pub const B128: Swizzle = Swizzle { bits: 3, base: 4, shift: 3 };

    /// The swizzled byte offset. Shifts of 64 or more give zero bits (no
    /// panic on any field values).
    pub fn apply(self, off: u64) -> u64 {
        let ones = 1u64.checked_shl(self.bits).map_or(u64::MAX, |b| b - 1);
        let mask = ones.checked_shl(self.base).unwrap_or(0);
        off ^ (off.checked_shr(self.shift).unwrap_or(0) & mask)
    }

    /// The swizzle that makes 8 consecutive rows of `row_bytes` (a power of
    /// two ≥ 32) read at one 16-byte column hit 8 distinct 16-byte bank
    /// groups: XOR the chunk index (offset bits 4..) with the row's
    /// 128-byte line index. `None` for rows that are not a power of two of
    /// at least 32 bytes.
    pub fn for_rows(row_bytes: u64) -> Option<Swizzle> {
        if row_bytes < 32 || !row_bytes.is_power_of_two() {
            return None;
        }
        let log = row_bytes.trailing_zeros();
        Some(Swizzle { bits: (log - 4).min(3), base: 4, shift: log.max(7) - 4 })
    }
}

impl Swizzle {
    /// [`Swizzle::apply`]'s formula as an integer expression of the
    /// unswizzled byte offset `off`: `off ^ ((off >> shift) & mask)`, or
    /// `off` itself for the identity. Printers (the CUDA C printer) print
    /// this expression, so the swizzle has one definition.
    pub fn expr(self, off: Expr) -> Expr {
        if self.bits == 0 {
            return off;
        }
        let mask = (((1u64 << self.bits) - 1) << self.base) as i64;
        let shifted = Expr::bin(BinOp::Shr, off.clone(), Expr::c(self.shift as i64));
        off.xor(Expr::bin(BinOp::And, shifted, Expr::c(mask)))
    }
}

impl fmt::Display for Swizzle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.bits == 0 {
            f.write_str("none")
        } else {
            write!(f, "Swizzle<{},{},{}>", self.bits, self.base, self.shift)
        }
    }
}

/// One dynamic shared-memory buffer: `size` bytes at byte `offset` of the
/// kernel's `extern __shared__` array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmemBuffer {
    pub name: String,
    pub offset: u64,
    pub size: u64,
    pub swizzle: Swizzle,
}

/// What a register array's 32-bit registers hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegKind {
    /// One `f32` per register (accumulators, `.f32`).
    F32,
    /// Two 16-bit values per `.b32` register (`ldmatrix` results, `mma`
    /// A/B operands), low half first.
    B16x2,
    /// One `i32` per register (`.s32`): the compute type of `i32` values,
    /// and of `bool` values as 0 or 1 (the SIMT template, [`ScalarExpr`]).
    I32,
}

/// The register type a value of Tiny dtype `d` is computed in (the CPU
/// backend's compute type, `cpu::loop_ir`): `f32` for f16/bf16/f32, `i32`
/// for i32 and bool (bool as 0 or 1).
pub fn compute_kind(d: DType) -> RegKind {
    if d.is_float() {
        RegKind::F32
    } else {
        RegKind::I32
    }
}

/// A scalar value computed in registers by one thread (the SIMT template):
/// the GPU form of `cpu::loop_ir::Expr`, with the same semantics. Every
/// node has a Tiny dtype ([`ScalarExpr::dtype`]) and is computed in its
/// compute type ([`compute_kind`]): f16/bf16 are storage types, widened on
/// load and rounded only at a `Cast` (and at a store); `i32` arithmetic
/// wraps; `MAX`/`MIN` propagate NaN; `RELU` is `x < 0 ? 0 : x`; a `Cast` to
/// `i32` truncates toward zero (NaN to 0, saturating to i64, then wrapping),
/// to bool compares with zero.
#[derive(Clone, Debug, PartialEq)]
pub enum ScalarExpr {
    /// `ld.global` of one element of `dtype` (the pointer's) at `src`,
    /// widened to the compute type.
    Load {
        src: GlobalRef,
        dtype: DType,
    },
    /// `GATHER`'s read (`loop_ir::Expr::Gather`): `ld.global` of one
    /// element of `dtype` at `src.offset + stride·p`, `p` the position
    /// `tiny::op::gather_position` gives for the `i32` value `at` on an axis
    /// of `extent` elements; widened to the compute type.
    Gather {
        src: GlobalRef,
        stride: Expr,
        extent: Expr,
        at: Box<ScalarExpr>,
        dtype: DType,
    },
    /// A literal, already rounded to `dtype`.
    Const {
        value: f64,
        dtype: DType,
    },
    /// A register holding a value of `dtype` in its compute type (an
    /// accumulator), read rounded to `dtype` (`loop_ir::Expr::Acc`: a no-op
    /// but for f16/bf16).
    Reg {
        reg: RegRef,
        dtype: DType,
    },
    Unary {
        op: UnaryOp,
        x: Box<ScalarExpr>,
    },
    Binary {
        op: BinaryOp,
        a: Box<ScalarExpr>,
        b: Box<ScalarExpr>,
    },
    /// Tiny `CAST` to `to`.
    Cast {
        to: DType,
        x: Box<ScalarExpr>,
    },
    /// `cond != 0 ? a : b`, both evaluated.
    Where {
        cond: Box<ScalarExpr>,
        a: Box<ScalarExpr>,
        b: Box<ScalarExpr>,
    },
    /// `cond ? then : otherwise` on an integer condition; only the chosen
    /// side is evaluated (a `PAD` piece: `then` may read out of bounds
    /// where `cond` is false).
    Select {
        cond: Expr,
        then: Box<ScalarExpr>,
        otherwise: Box<ScalarExpr>,
    },
}

impl ScalarExpr {
    /// The Tiny dtype of the value.
    pub fn dtype(&self) -> DType {
        match self {
            ScalarExpr::Load { dtype, .. }
            | ScalarExpr::Gather { dtype, .. }
            | ScalarExpr::Const { dtype, .. }
            | ScalarExpr::Reg { dtype, .. } => *dtype,
            ScalarExpr::Unary { x, .. } => x.dtype(),
            ScalarExpr::Binary { op: BinaryOp::Cmplt | BinaryOp::Cmpeq, .. } => DType::Bool,
            ScalarExpr::Binary { a, .. } => a.dtype(),
            ScalarExpr::Cast { to, .. } => *to,
            ScalarExpr::Where { a, .. } => a.dtype(),
            ScalarExpr::Select { then, .. } => then.dtype(),
        }
    }

    /// Calls `f` on this expression and every sub-expression, parents first.
    pub fn walk(&self, f: &mut dyn FnMut(&ScalarExpr)) {
        f(self);
        match self {
            ScalarExpr::Load { .. } | ScalarExpr::Const { .. } | ScalarExpr::Reg { .. } => {}
            ScalarExpr::Unary { x, .. } | ScalarExpr::Cast { x, .. } | ScalarExpr::Gather { at: x, .. } => x.walk(f),
            ScalarExpr::Binary { a, b, .. } => {
                a.walk(f);
                b.walk(f);
            }
            ScalarExpr::Where { cond, a, b } => {
                cond.walk(f);
                a.walk(f);
                b.walk(f);
            }
            ScalarExpr::Select { then, otherwise, .. } => {
                then.walk(f);
                otherwise.walk(f);
            }
        }
    }
}

/// The identity of a reduction in the compute type of `dtype` (the
/// interpreter's [`ReduceOp::identity`] rounded to `dtype`).
pub fn reduce_identity(op: ReduceOp, dtype: DType) -> f64 {
    dtype.round(op.identity(dtype))
}

impl ScalarExpr {
    /// The literal [`reduce_identity`] of `op` in `dtype`: what an
    /// accumulator starts from.
    pub fn identity(op: ReduceOp, dtype: DType) -> ScalarExpr {
        ScalarExpr::Const { value: reduce_identity(op, dtype), dtype }
    }
}

/// A per-thread array of 32-bit registers (a fragment), `len` long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegArray {
    pub name: String,
    pub kind: RegKind,
    pub len: u32,
}

/// A register: array and index (an expression that is constant once
/// unrolled loops are unrolled).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegRef {
    pub reg: RegId,
    pub index: Expr,
}

/// A global-memory address: `param + offset` elements of its dtype.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobalRef {
    pub param: ParamId,
    pub offset: Expr,
}

/// A shared-memory address: byte `offset` of buffer `buf` before
/// `swizzle` (which must be the buffer's; invariant 5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmemRef {
    pub buf: SmemId,
    pub offset: Expr,
    pub swizzle: Swizzle,
}

/// `ldmatrix` `.x1`/`.x2`/`.x4`: how many 8×8 16-bit matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LdMatrixNum {
    X1,
    X2,
    X4,
}

impl LdMatrixNum {
    pub fn count(self) -> usize {
        match self {
            LdMatrixNum::X1 => 1,
            LdMatrixNum::X2 => 2,
            LdMatrixNum::X4 => 4,
        }
    }
}

/// A `wgmma` shared-memory matrix descriptor (PTX ISA "Matrix Descriptor
/// Format" of `wgmma`): the operand tile's start (`start.offset`, in bytes
/// before the swizzle; its swizzle is the descriptor's mode: the identity
/// or [`Swizzle::B128`]), and the leading and stride byte offsets.
///
/// With the 128-byte swizzle, a K-major tile (rows of the M or N dim, 64
/// 16-bit elements of K per 128-byte row) has element `(r, k)` at `start +
/// (r / 8)·sbo + (r % 8)·128 + 2k` (`lbo` unused); an MN-major tile (rows
/// of K, 64 elements of N per 128-byte row) has `(k, n)` at `start + (n /
/// 64)·lbo + (k / 8)·sbo + (k % 8)·128 + 2(n % 64)`. Without a swizzle
/// the tile is 8 × 16-byte core matrices: K-major `(r, k)` at `start + (r
/// / 8)·sbo + (r % 8)·16 + (k / 8)·lbo + 2(k % 8)`. The swizzle then acts
/// on the address, which is why a swizzled buffer is 1024-byte aligned
/// (the layouts measured on an H200: `docs/sm90.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatrixDesc {
    pub start: SmemRef,
    pub lbo: u32,
    pub sbo: u32,
}

/// One epilogue operation on an `f32` accumulator value `v` (`000` §1.7
/// `epilogue`, §8 of `001`); an operand's element offset `at` is the
/// output element's own (a GEMM's `col` for a bias over `N`, its `C`
/// offset for a residual), in the operand's elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EpilogueOp {
    /// `v += bias[at]`.
    Bias { param: ParamId, at: Expr },
    /// `v = max(v, 0)`.
    Relu,
    /// `v = v / (1 + exp(-v))`, in f32.
    Silu,
    /// `v = 0.5 v (1 + erf(v/√2))`, in f64 with `erf` by the frontend's
    /// Abramowitz & Stegun 7.1.26 ([`crate::frontend::ops::elementwise::erfc_abs_f64`],
    /// absolute error ≤ 1.5e-7): the graph language's `gelu`.
    Gelu,
    /// `v = 0.5 v (1 + tanh(√(2/π)(v + 0.044715 v³)))`, in f64: `gelu_tanh`.
    GeluTanh,
    /// `v = tanh(v)`, in f64.
    Tanh,
    /// `v += residual[at]`.
    Residual { param: ParamId, at: Expr },
    /// Round `v` to `dtype` (stays an `f32` register).
    Cast(DType),
}

/// The lower-case name of a reduction (`sum`, `prod`, `max`, `min`).
pub fn reduce_name(op: ReduceOp) -> &'static str {
    match op {
        ReduceOp::Sum => "sum",
        ReduceOp::Prod => "prod",
        ReduceOp::Max => "max",
        ReduceOp::Min => "min",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`BinOp::eval`]: C's truncating `/` and `%`, floor division,
    /// arithmetic `>>`; what C leaves undefined is an error naming why.
    #[test]
    fn integer_operators_have_their_c_meaning() {
        use BinOp::*;
        let defined = [
            (Div, -7, 2, -3),
            (Rem, -7, 2, -1),
            (Rem, 7, -2, 1),
            (FloorDiv, -7, 2, -4),
            (Shr, -8, 1, -4),
            (Shl, 3, 4, 48),
            (Shl, -1, 63, i64::MIN),
            (And, 12, 10, 8),
            (Div, i64::MIN, 1, i64::MIN),
            (LAnd, 2, -1, 1),
        ];
        for (op, x, y, v) in defined {
            assert_eq!(op.eval(x, y), Ok(v), "{x} {} {y}", op.symbol());
        }
        let undefined = [
            (Div, i64::MIN, -1, Undefined::Overflow),
            (Rem, i64::MIN, -1, Undefined::Overflow),
            (Div, 1, 0, Undefined::DivisionByZero),
            (Rem, 1, 0, Undefined::DivisionByZero),
            (Add, i64::MAX, 1, Undefined::Overflow),
            (Mul, i64::MIN, -1, Undefined::Overflow),
            (Shl, i64::MAX, 1, Undefined::Overflow),
            (Shl, 1, 64, Undefined::ShiftCount),
            (Shr, 1, -1, Undefined::ShiftCount),
            (FloorDiv, 1, 0, Undefined::FloorDivisor),
            (FloorDiv, 1, -2, Undefined::FloorDivisor),
        ];
        for (op, x, y, why) in undefined {
            assert_eq!(op.eval(x, y), Err(EvalError { op, x, y, why }));
        }
        let e = Div.eval(i64::MIN, -1).unwrap_err();
        assert_eq!(e.to_string(), "`-9223372036854775808 / -1` overflows i64");
    }

    /// [`Expr::eval`] evaluates what C evaluates: the chosen operand of a
    /// select, the right operand of `&&`/`||` only when the left does not
    /// decide; leaves come from the caller.
    #[test]
    fn expressions_evaluate_as_c_does() {
        let by_zero = Expr::c(1) / Expr::c(0);
        let no_leaf = |_: Leaf| -> Result<i64, String> { Err("no leaf".into()) };
        let undefined = |e: EvalError| e.to_string();
        assert_eq!(Expr::c(0).and(by_zero.clone()).eval(&mut { no_leaf }, &undefined), Ok(0));
        assert_eq!(Expr::bin(BinOp::LOr, Expr::c(3), by_zero.clone()).eval(&mut { no_leaf }, &undefined), Ok(1));
        assert_eq!(Expr::c(0).select(by_zero.clone(), 5).eval(&mut { no_leaf }, &undefined), Ok(5));
        assert_eq!(by_zero.eval(&mut { no_leaf }, &undefined), Err("`1 / 0` divides by zero".into()));
        let x = Expr::ThreadIdx(Dim::X);
        let mut leaf = |l: Leaf| match l {
            Leaf::ThreadIdx(Dim::X) => Ok(-9),
            other => Err(format!("{other:?}")),
        };
        assert_eq!((x.clone() / 4 + x % 4).eval(&mut leaf, &undefined), Ok(-2 + -1));
    }
}
