//! What a template is to the driver ([`super::driver`]): the pattern of
//! graphs it takes ([`GraphPattern`], by [`pattern_of`]), its registration
//! row ([`Template`]: name, pattern, `algo_choice`, architecture, fallback,
//! lowering function) and what its lowering returns ([`Lowered`]: a
//! program and the estimator's time for it).

use crate::diag::DResult;
use crate::gpu::dialect::Arch;
use crate::gpu::program::GpuProgram;
use crate::index_book::contraction::is_contraction;
use crate::plan::cost::{Estimate, Estimator};
use crate::plan::{AlgoChoice, Target};
use crate::tiny::Graph;

/// What a whole graph is to the templates, by its contractions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphPattern {
    /// One contraction (`000` §3.5's `matmul` or `conv`) and its epilogue.
    Contraction,
    /// Two contractions: the attention chain `matmul → softmax → matmul`.
    Attention,
}

/// A tensor-core template.
pub struct Template {
    /// Its name, for dumps and notes.
    pub name: &'static str,
    /// The graphs it takes.
    pub pattern: GraphPattern,
    /// The `algo_choice` it implements (`000` §1.7); the GEMM templates'
    /// is given as a convolution's (`conv implicit_gemm`), a plain GEMM's
    /// being the same algorithm under `matmul`.
    pub algo_choice: AlgoChoice,
    pub arch: Arch,
    /// Tried only when no other template of the pattern and architecture
    /// takes the graph (its estimate is not comparable with theirs: the
    /// sm80 kernels that sm90 runs where its own branch has none).
    pub fallback: bool,
    /// The graph's one-launch program and its estimate, or why the
    /// template does not take it (a positioned `Unsupported` or
    /// `UnboundSymbol`).
    pub lower: fn(&Graph, &Target, &dyn Estimator) -> DResult<Lowered>,
}

/// A template's program for a graph and the estimator's time for it,
/// which [`lower`] ranks the templates of one pattern by.
pub struct Lowered {
    pub program: GpuProgram,
    pub estimate: Estimate,
}

/// `g`'s pattern: one contraction (`REDUCE SUM` of a `MUL`,
/// [`is_contraction`]), two (an attention), or none a
/// template takes.
pub fn pattern_of(g: &Graph) -> Option<GraphPattern> {
    match g.ids().filter(|&id| is_contraction(g, id)).count() {
        1 => Some(GraphPattern::Contraction),
        2 => Some(GraphPattern::Attention),
        _ => None,
    }
}
