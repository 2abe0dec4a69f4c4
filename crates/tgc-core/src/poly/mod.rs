//! The polyhedral side of tgc (`spec/000` §1.4–1.6, `003`): for now the safe
//! isl layer that Poly-View will be built on.

pub mod isl;
