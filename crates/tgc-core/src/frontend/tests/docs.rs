//! `docs/dsl.md` stays true: it names every builtin call, and its examples
//! load and run.

use std::collections::BTreeSet;

use crate::frontend::resolve::builtin_names;
use crate::pipeline::{self, Format};

fn page() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/dsl.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every identifier inside backticks on the page.
fn code_words(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .flat_map(|code| code.split(|c: char| !(c.is_alphanumeric() || c == '_')))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_op_page_names_every_builtin() {
    let words = code_words(&page());
    let missing: Vec<&str> = builtin_names().into_iter().filter(|n| !words.contains(*n)).collect();
    assert!(missing.is_empty(), "docs/dsl.md does not list {missing:?}");
}

#[test]
fn the_op_page_examples_run() {
    let text = page();
    let blocks: Vec<&str> = text.split("```tgc\n").skip(1).map(|b| b.split("```").next().unwrap_or("")).collect();
    assert!(blocks.len() >= 3, "the page has {} examples", blocks.len());
    for src in blocks {
        let g =
            pipeline::load(src, Format::Dsl, None).unwrap_or_else(|d| panic!("{}\n{src}", d.render("dsl.md"))).graph;
        // Symbols take their defaults.
        let g = g.bind(&g.resolve_dims(&Default::default(), None).unwrap()).unwrap();
        let inputs = pipeline::sample_inputs(&g).unwrap();
        let out = pipeline::run_interp(&g, &inputs).unwrap_or_else(|d| panic!("{}\n{src}", d.render("dsl.md")));
        assert_eq!(out.len(), g.outputs.len());
    }
}
