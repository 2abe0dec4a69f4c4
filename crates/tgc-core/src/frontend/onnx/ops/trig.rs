//! The circular and hyperbolic functions and their inverses: one
//! [`UnaryFn`] each, decomposed at the Frontend→Tiny lowering
//! (`frontend::ops::trig`, which states their errors and domains).

use crate::diag::DResult;
use crate::frontend::ir::UnaryFn;

use super::{unary, Builder, Val, N};

/// `Acos Acosh Asin Asinh Atan Atanh Cos Cosh Sin Sinh Tan` of input 0.
pub(super) fn convert(b: &mut Builder, n: &N) -> DResult<Vec<Val>> {
    let f = match n.node.op_type.as_str() {
        "Acos" => UnaryFn::Acos,
        "Acosh" => UnaryFn::Acosh,
        "Asin" => UnaryFn::Asin,
        "Asinh" => UnaryFn::Asinh,
        "Atan" => UnaryFn::Atan,
        "Atanh" => UnaryFn::Atanh,
        "Cos" => UnaryFn::Cos,
        "Cosh" => UnaryFn::Cosh,
        "Sin" => UnaryFn::Sin,
        "Sinh" => UnaryFn::Sinh,
        _ => UnaryFn::Tan,
    };
    let x = b.run(n.required(0)?)?;
    Ok(vec![Val::Run(unary(b, f, x)?)])
}
