//! The GPU driver: a whole graph to its [`GpuProgram`], in one place.
//!
//! [`lower_program_noting`] is the entry point (`pipeline::compile_gpu`,
//! `tgc run --backend cuda`, the generated launch functions and the tuner
//! call it or its shorter forms [`lower_program_with`],
//! [`lower_program_for`] and, for the SIMT kernels alone,
//! [`lower_program`]):
//!
//! 1. The whole graph on a template ([`lower`]): every row of
//!    [`TEMPLATES`] whose pattern is the graph's ([`pattern_of`]: one
//!    contraction and its epilogue, or the two of an attention chain;
//!    `000` §4 step 7: "`algo_choice` は Poly-View の `pattern` に基づく")
//!    and whose architecture is the target's lowers it; the one the
//!    [`Estimator`] costs least is kept (the analytic model, or a measured
//!    or pinned one), the fallback rows only when no other takes it.
//! 2. Otherwise region by region ([`lower_regions`]): the CPU back end's
//!    regions ([`regions::region_options`]), an attention fused across
//!    regions or a contraction with the pool after it as one template
//!    launch ([`regions::fused_regions`]), each region that is a
//!    contraction + epilogue on the template that takes it
//!    ([`regions::lower_region`]), every other region on the SIMT kernels
//!    ([`super::simt`]); the templates' refusals are the notes `tgc
//!    compile` prints.
//!
//! A template is a folder of `gpu/` with a function that lowers a graph of
//! its pattern to a [`crate::gpu::template::Lowered`] program or says why
//! not, registered by one row of [`TEMPLATES`] (`driver/templates.rs`).

use crate::diag::DResult;
use crate::tiny::Graph;

use super::program::GpuProgram;
use super::simt::rows::lower_rows;
use super::simt::scan::{lower_simt, scan_totals, ScanTiles, SCAN_TILES};
use crate::cpu::from_tiny;

/// Lowers every region of `g` to a SIMT kernel ([`super::simt`]), no
/// tensor-core template.
///
/// Errors: those of [`from_tiny::lower`]; `Unsupported` for a value the
/// SIMT template cannot compute (none beyond the CPU backend's).
pub fn lower_program(g: &Graph) -> DResult<GpuProgram> {
    lower_regions(g, None, SCAN_TILES, &mut Vec::new())
}

/// [`lower_program`], except that with `templates` the regions are formed
/// for them (operands read through a broadcast stored, no compute-at
/// fusion), an attention inside the graph is one fused launch
/// ([`super::driver::regions::attention_regions`]) and each region that is a
/// contraction + epilogue a tensor-core template takes
/// ([`super::driver::regions::lower_region`]) is that template's kernel; each
/// refusal is pushed to `notes`. Scans run in blocks of `tiles`.
pub(crate) fn lower_regions(
    g: &Graph,
    templates: Option<(&crate::plan::Target, &dyn crate::plan::cost::Estimator)>,
    tiles: ScanTiles,
    notes: &mut Vec<crate::Diagnostic>,
) -> DResult<GpuProgram> {
    let opts =
        if templates.is_some() { super::driver::regions::region_options() } else { from_tiny::Options::default() };
    let mut p = from_tiny::lower_with(g, &opts)?;
    let totals = scan_totals(&mut p, tiles);
    let stored = templates.map(|_| super::driver::regions::stored_values(g, &p)).unwrap_or_default();
    // Attentions inside a larger graph: one fused launch in place of
    // their regions' kernels, at the last of them.
    let mut fused = match templates {
        Some((t, e)) => super::driver::regions::fused_regions(g, &p, &stored, t, e),
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
        let template = templates
            .and_then(|(t, e)| super::driver::regions::lower_region(g, &p, &stored, &p.kernels[k], t, e, first_temp));
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
/// `target` takes ([`super::driver::lower`]: one contraction (GEMM,
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
/// ([`super::mma::lower::build_with`]).
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
/// one of its pattern takes it ([`super::driver::lower`]), else every
/// region on the SIMT kernels but those a template takes (an attention,
/// and a GEMM or convolution + epilogue, inside a larger graph:
/// [`super::driver::regions::attention_regions`], [`super::driver::regions::lower_region`]);
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
    let whole = match super::driver::lower(g, target, estimator) {
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

pub mod regions;
mod templates;

pub use templates::{best, candidates, lower, TEMPLATES};

#[cfg(test)]
mod tests;
