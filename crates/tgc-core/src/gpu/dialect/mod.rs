//! The GPU dialect (`000` §1.8): the IR of one CUDA kernel ([`ir`]), the
//! static checks of its invariants ([`verify`]) and its text form (the
//! `gpu` dump: `Display` of [`ir::Kernel`]).

pub mod ir;
mod text;
pub mod verify;
