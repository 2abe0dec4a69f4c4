//! `tgc::kernel!` turns graph errors into rustc errors on the offending
//! tokens. Each case is a crate that must fail to compile with the error in
//! its `.stderr` file (regenerate with `TRYBUILD=overwrite`).

#[test]
fn kernel_macro_reports_graph_errors_at_their_tokens() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/compile_fail/*.rs");
}
