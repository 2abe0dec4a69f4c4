//! The pages stay true: `docs/dsl.md` names every builtin call and its
//! examples load and run; every relative link of README.md, ARCHITECTURE.md
//! and the pages under docs/ names a file of the repository, and a
//! `#section` of a Markdown page one of its headings (GitHub's anchors:
//! lower case, spaces as `-`, other punctuation dropped). Links with a
//! scheme (`https:`) are not followed. ARCHITECTURE.md's paths and items
//! exist and the GPU IR's invariants are its verifier's ([`architecture`]);
//! every specification section the code cites is in the design overview's
//! index ([`citations`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::frontend::resolve::builtin_names;
use crate::pipeline::{self, Format};

mod architecture;
mod citations;

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

/// The repository's root folder.
pub(super) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md, ARCHITECTURE.md and every Markdown page under docs/, sorted:
/// the pages whose examples and links the tests read, so a new page needs
/// no list edited.
pub(super) fn doc_pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for p in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).map(|e| e.unwrap().path())
        {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![root().join("README.md"), root().join("ARCHITECTURE.md")];
    walk(&root().join("docs"), &mut out);
    out.sort();
    out
}

/// The page's text outside fenced code blocks, whose `](` are code.
fn prose(text: &str) -> String {
    let mut fenced = false;
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The targets of the page's inline links `[text](target)`.
fn link_targets(text: &str) -> Vec<String> {
    prose(text)
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(target, _)| target.trim().to_string()))
        .collect()
}

/// GitHub's anchor of a heading.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    prose(text).lines().filter(|l| l.starts_with('#')).map(|l| anchor(l.trim_start_matches('#'))).collect()
}

#[test]
fn every_relative_link_of_the_pages_names_a_file() {
    let pages = doc_pages();
    assert!(pages.iter().any(|p| p.ends_with("docs/dsl.md")), "the walk found {pages:?}");
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let name = page.strip_prefix(root()).unwrap_or(page).display().to_string();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, section) = target.split_once('#').unwrap_or((&target, ""));
            let path = if file.is_empty() { page.clone() } else { page.parent().unwrap().join(file) };
            if !path.exists() {
                broken.push(format!("{name}: ({target}): no such file"));
            } else if !section.is_empty()
                && path.extension().is_some_and(|e| e == "md")
                && !anchors(&std::fs::read_to_string(&path).unwrap()).contains(section)
            {
                broken.push(format!("{name}: ({target}): no heading with that anchor"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn links_and_anchors_are_read_as_github_does() {
    assert_eq!(anchor(" `kernel!`, the build helper and models"), "kernel-the-build-helper-and-models");
    assert_eq!(anchor(" Cast"), "cast");
    assert_eq!(link_targets("see [a](b.md#c) and `x`\n```\n[no](code)\n```\n"), ["b.md#c"]);
}
