//! The GPU dialect (`000` §1.8): the IR of one CUDA kernel — its operand
//! types and expressions ([`ir`], whose module doc states the invariants),
//! its statements ([`stmt`]) and the kernel ([`kernel`]) — the static
//! checks of those invariants ([`verify`]) and its text form (the `gpu`
//! dump: `Display` of [`Kernel`]). Everything but the verifier is
//! re-exported here, so `use crate::gpu::dialect::*` names the whole IR.

pub mod ir;
pub mod kernel;
pub mod stmt;
mod text;
pub mod verify;

pub use ir::*;
pub use kernel::*;
pub use stmt::*;
