//! `tgc::kernel!`: compiles a tensor graph at `cargo build` time into a
//! module of typed Rust functions. A thin layer: it reads the invocation,
//! calls `tgc-core`'s pipeline, and turns diagnostics into `compile_error!`
//! on the offending tokens. It never panics on any input. The module it
//! emits is printed by `tgc_core::emit::api`, as the build-script helper's
//! modules are.
//!
//! Invocation:
//!
//! ```text
//! tgc::kernel!(NAME: GRAPH [, shapes(SYM = INT | SYM in [INT, ...], ...)]* [, tuning("DIR")])
//! ```
//!
//! `GRAPH` is the graph-language text inline, or a string literal naming a
//! `.tgc` or `.json` file relative to the crate's `Cargo.toml`. Each
//! `shapes(...)` adds ShapeSet points (`000` §8): one for `SYM = INT`
//! items, one per combination when an item lists values (`shapes(B = 1,
//! S in [16, 32, 64])` is three points). Each point gets a body
//! specialised for its dims; `run` dispatches to it when the dims match,
//! and, for a graph whose symbols are declared `padded`, to the smallest
//! point that holds smaller dims, its inputs zero-filled and its outputs
//! cut back (`tgc_core::emit::api`). `tuning("DIR")` gives the points'
//! packed kernels the block sizes of the tuning cache `DIR` (relative to
//! the crate's `Cargo.toml`, written by `tgc tune`); a kernel without a
//! record keeps the analytic sizes and the build warns, a record that
//! fails its checks is a compile error (`tgc_core::tune`).
//!
//! With feature `sm80` (the facade's), every graph also gets a submodule
//! `sm80` with its NVRTC-compiled kernels and typed launch functions (see
//! `expand::sm80_items`); a missing CUDA toolchain is a compile error
//! naming the set-up command.

mod expand;
mod source;

/// Compiles a graph into a module `NAME` with `run(inputs…, outputs…, dims…)`;
/// see the crate documentation of `tgc` for the generated API.
#[proc_macro]
pub fn kernel(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    expand::expand(input.into()).into()
}
