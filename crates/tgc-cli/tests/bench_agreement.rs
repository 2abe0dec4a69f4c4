//! The tests of the benchmarks' comparison helper
//! (`examples/common/agreement.rs`, included by each benchmark with
//! `#[path]`): examples' own tests are not run by `cargo test`, so they run
//! here, without a GPU and without the peers.

#[path = "../examples/common/agreement.rs"]
mod agreement;
