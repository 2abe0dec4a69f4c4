//! ARCHITECTURE.md names only what exists, and the GPU dialect IR's
//! invariant list is the verifier's.
//!
//! In the page's prose (fenced blocks are pictures, not read), a code span
//! is
//! - a *path* when it is made of `[A-Za-z0-9_.-/]`, has a `/` or ends in a
//!   file extension of the repository, and does not start with `-`: it
//!   must name a file or folder, from the repository root or from the
//!   folder of the code-map section it is in (a `### ` heading that starts
//!   with a path in backticks) or that folder's `src`;
//! - an *item* when it is `a::b::C` (identifiers joined by `::`, `()`
//!   allowed at the end): its leading segments are modules — of the crate
//!   its first segment names (`tgc_core`, `tgc_runtime`, `tgc_macros`,
//!   `tgc_cli`, `tgc`), else of the section's folder or of tgc-core's `src` — and
//!   every segment after the modules must be defined (`fn`, `struct`,
//!   `enum`, `trait`, `type`, `const`, `static`, `mod`, `macro_rules!`, a
//!   `pub use`, an enum variant or a field) in that module's file or folder.
//!
//! Crates outside the workspace are written without `::` on the page. The
//! page stays within its line budget (`PAGE_LINES`, its template checklist
//! `CHECKLIST_LINES`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::root;

/// The page, from the repository root.
const PAGE: &str = "ARCHITECTURE.md";

/// The GPU dialect IR's module, whose `//!` doc numbers its invariants,
/// and the verifier's, whose `//!` doc lists its checks: one place to
/// update when the files move.
const GPU_IR: &str = "crates/tgc-core/src/gpu/dialect/ir.rs";
const GPU_VERIFY: &str = "crates/tgc-core/src/gpu/dialect/verify.rs";
/// The module whose `enum Fault` names the kinds of violation.
const GPU_FAULTS: &str = "crates/tgc-core/src/gpu/dialect/kernel.rs";

/// File extensions that make a code span a path.
const EXTENSIONS: [&str; 12] = ["rs", "md", "sh", "toml", "cu", "txt", "tgc", "json", "py", "c", "h", "expect"];

/// The crates an item's first segment may name, with their source folders.
const CRATES: [(&str, &str); 5] = [
    ("tgc_core", "crates/tgc-core/src"),
    ("tgc_runtime", "crates/tgc-runtime/src"),
    ("tgc_macros", "crates/tgc-macros/src"),
    ("tgc_cli", "crates/tgc-cli/src"),
    ("tgc", "src"),
];

/// A code span of the page with the folder of the section it is in.
struct Span {
    text: String,
    section: Option<PathBuf>,
}

/// The code spans of the page's prose, fenced blocks left out.
fn spans(page: &str) -> Vec<Span> {
    let mut out = Vec::new();
    let mut section = None;
    let mut fenced = false;
    let mut paragraph = String::new();
    let mut flush = |paragraph: &mut String, section: &Option<PathBuf>| {
        out.extend(
            paragraph
                .split('`')
                .skip(1)
                .step_by(2)
                .map(|t| Span { text: t.trim().to_string(), section: section.clone() }),
        );
        paragraph.clear();
    };
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            flush(&mut paragraph, &section);
        }
        if let Some(heading) = line.strip_prefix("### ") {
            // The heading's first code span, when the heading starts with it.
            let first = heading.trim().strip_prefix('`').and_then(|h| h.split('`').next()).unwrap_or("");
            section = is_path(first).then(|| PathBuf::from(first));
        } else if line.starts_with("## ") {
            section = None;
        }
        if !line.starts_with('#') {
            paragraph.push_str(line);
            paragraph.push('\n');
        }
    }
    flush(&mut paragraph, &section);
    out
}

fn is_path(text: &str) -> bool {
    let chars_ok = text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'));
    let extension = text.rsplit_once('.').is_some_and(|(stem, e)| !stem.is_empty() && EXTENSIONS.contains(&e));
    chars_ok && !text.starts_with('-') && !text.starts_with('.') && (text.contains('/') || extension)
}

/// The segments of an item span, `None` when the span is not one.
fn item(text: &str) -> Option<Vec<&str>> {
    let text = text.strip_suffix("()").unwrap_or(text);
    let segments: Vec<&str> = text.split("::").collect();
    let ident = |s: &&str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    (segments.len() >= 2 && segments.iter().all(ident)).then_some(segments)
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for p in entries.map(|e| e.unwrap().path()) {
            if p.is_dir() {
                out.extend(rust_files(&p));
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    out
}

/// Whether `text` defines `name` as an item, a re-export, a variant or a
/// field.
fn defines(text: &str, name: &str) -> bool {
    let word_at = |line: &str, at: usize| {
        line[at + name.len()..].chars().next().is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
            && line[..at].chars().next_back().is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    };
    const KEYWORDS: [&str; 10] =
        ["fn ", "struct ", "enum ", "trait ", "type ", "const ", "static ", "mod ", "union ", "macro_rules! "];
    text.lines().any(|line| {
        let t = line.trim_start();
        let found = |pattern: &str| {
            let mut from = 0;
            while let Some(at) = t[from..].find(pattern) {
                let at = from + at + pattern.len() - name.len();
                if word_at(t, at) {
                    return true;
                }
                from = at + name.len();
            }
            false
        };
        KEYWORDS.iter().any(|k| found(&format!("{k}{name}")))
            || (t.starts_with("pub use") && found(name))
            || (t.starts_with(name)
                && word_at(t, 0)
                && t[name.len()..].trim_start().starts_with(['(', '{', ',', ':', '=']))
    })
}

/// Why the item `segments`, read in the section `section`, does not exist;
/// `None` when it does.
fn missing_item(segments: &[&str], section: Option<&Path>) -> Option<String> {
    let root = root();
    let (roots, rest): (Vec<PathBuf>, &[&str]) = match CRATES.iter().find(|(name, _)| *name == segments[0]) {
        Some((_, dir)) => (vec![root.join(dir)], &segments[1..]),
        None => {
            let mut roots = Vec::new();
            if let Some(s) = section {
                let s = root.join(s);
                roots.push(if s.join("src").is_dir() { s.join("src") } else { s });
            }
            roots.push(root.join("crates/tgc-core/src"));
            (roots, segments)
        }
    };
    let mut why = Vec::new();
    for start in roots.iter().filter(|r| r.is_dir()) {
        let (mut dir, mut file) = (start.clone(), None::<PathBuf>);
        let mut i = 0;
        while i < rest.len() {
            let (as_file, as_folder) = (dir.join(format!("{}.rs", rest[i])), dir.join(rest[i]).join("mod.rs"));
            if as_file.is_file() {
                file = Some(as_file);
            } else if as_folder.is_file() {
                file = Some(as_folder);
            } else {
                break;
            }
            dir = dir.join(rest[i]);
            i += 1;
        }
        let mut scope: Vec<PathBuf> = file.iter().cloned().collect();
        if i == 0 || dir.is_dir() {
            scope.extend(rust_files(&dir));
        }
        let texts: Vec<String> = scope.iter().filter_map(|p| std::fs::read_to_string(p).ok()).collect();
        match rest[i..].iter().find(|name| !texts.iter().any(|t| defines(t, name))) {
            None => return None,
            Some(name) => why.push(format!("`{name}` not defined under {}", dir.display())),
        }
    }
    Some(why.join("; "))
}

fn page() -> String {
    let path = root().join(PAGE);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_path_and_item_the_architecture_page_names_exists() {
    let spans = spans(&page());
    let (mut paths, mut items, mut broken) = (0, 0, BTreeSet::new());
    for span in &spans {
        let section = span.section.as_deref();
        if is_path(&span.text) {
            paths += 1;
            let found = root().join(&span.text).exists()
                || section.is_some_and(|s| {
                    [s.join(&span.text), s.join("src").join(&span.text)].iter().any(|p| root().join(p).exists())
                });
            if !found {
                broken.insert(format!("path `{}`: no such file or folder", span.text));
            }
        } else if let Some(segments) = item(&span.text) {
            items += 1;
            if let Some(why) = missing_item(&segments, section) {
                broken.insert(format!("item `{}`: {why}", span.text));
            }
        }
    }
    assert!(paths >= 40 && items >= 40, "{PAGE}: only {paths} paths and {items} items read");
    assert!(
        broken.is_empty(),
        "{PAGE} names what does not exist:\n{}",
        broken.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// The most lines the page may have, and its template checklist.
const PAGE_LINES: usize = 400;
const CHECKLIST_LINES: usize = 20;

#[test]
fn the_page_keeps_its_line_budget() {
    let page = page();
    assert!(page.lines().count() <= PAGE_LINES, "{PAGE} has {} lines, more than {PAGE_LINES}", page.lines().count());
    let checklist = page.split("## How to add a template").nth(1).expect("a template checklist");
    let body = checklist.split("\n## ").next().unwrap_or("").trim();
    assert!(
        body.lines().count() <= CHECKLIST_LINES,
        "{PAGE}'s template checklist has {} lines, more than {CHECKLIST_LINES}",
        body.lines().count()
    );
}

/// The `//!` doc of a source file, `//! ` taken off each line.
fn module_doc(path: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.trim_start_matches("//!").strip_prefix(' ').unwrap_or(l.trim_start_matches("//!")).to_string())
        .collect()
}

/// The variants of `enum Fault` of the GPU dialect.
fn fault_kinds() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join(GPU_FAULTS)).unwrap();
    let body = text.split("pub enum Fault {").nth(1).and_then(|b| b.split('}').next()).expect("enum Fault");
    body.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && !l.is_empty())
        .map(|l| l.trim_end_matches(',').to_string())
        .collect()
}

#[test]
fn the_gpu_ir_invariants_are_the_verifiers_checks() {
    let numbered: Vec<u32> =
        module_doc(GPU_IR).iter().filter_map(|l| l.split_once(". ").and_then(|(n, _)| n.parse().ok())).collect();
    assert!(numbered.len() >= 5, "{GPU_IR}: no numbered invariant list");
    assert_eq!(numbered, (1..=numbered.len() as u32).collect::<Vec<_>>(), "{GPU_IR}: invariants numbered 1, 2, …");

    // The verifier's bullets, continuation lines joined.
    let mut bullets: Vec<String> = Vec::new();
    for line in module_doc(GPU_VERIFY) {
        if let Some(b) = line.strip_prefix("- ") {
            bullets.push(b.to_string());
        } else if line.starts_with("  ") {
            if let Some(last) = bullets.last_mut() {
                last.push(' ');
                last.push_str(line.trim());
            }
        }
    }
    let faults = fault_kinds();
    let verifier = std::fs::read_to_string(root().join(GPU_VERIFY)).unwrap();
    let mut checked = BTreeSet::new();
    for bullet in &bullets {
        let Some(n) = bullet.split("(invariant ").nth(1).and_then(|r| r.split(')').next()).and_then(|n| n.parse().ok())
        else {
            continue;
        };
        let named: Vec<&str> = bullet.split('`').skip(1).step_by(2).filter(|w| faults.contains(*w)).collect();
        assert!(!named.is_empty(), "{GPU_VERIFY}: the check of invariant {n} names no `Fault` it reports: {bullet}");
        for fault in named {
            assert!(
                verifier.contains(&format!("Fault::{fault}")),
                "{GPU_VERIFY}: invariant {n}'s check names `{fault}`, which the verifier never reports"
            );
        }
        assert!(checked.insert(n), "{GPU_VERIFY}: invariant {n} has two bullets");
    }
    let listed: BTreeSet<u32> = numbered.into_iter().collect();
    assert_eq!(checked, listed, "{GPU_IR}'s invariants and {GPU_VERIFY}'s checks differ");
}

#[test]
fn spans_paths_and_items_are_read_as_the_test_says() {
    let page = "## Code map\n### `crates/tgc-core/src/gpu`\nsee `verify.rs`, `ir::Kernel` and\n```\n`not::read`\n```\n";
    let spans = spans(page);
    assert_eq!(spans.iter().map(|s| s.text.as_str()).collect::<Vec<_>>(), ["verify.rs", "ir::Kernel"]);
    assert_eq!(spans[0].section.as_deref(), Some(Path::new("crates/tgc-core/src/gpu")));
    assert!(is_path("docs/design/overview.md") && is_path("scripts/") && !is_path("--dump") && !is_path("f16"));
    assert_eq!(item("gpu::template::TEMPLATES"), Some(vec!["gpu", "template", "TEMPLATES"]));
    assert_eq!(item("Form::Rows()"), Some(vec!["Form", "Rows"]));
    assert!(item("a::b<T>").is_none() && item("Plan").is_none());
    assert!(defines("pub(crate) fn lower_program(g: &Graph)", "lower_program"));
    assert!(defines("    Rows { group: usize },", "Rows") && !defines("fn lower_programs()", "lower_program"));
    assert!(missing_item(&["gpu", "driver", "TEMPLATES"], None).is_none());
    assert!(missing_item(&["gpu", "driver", "NO_SUCH_TABLE"], None).is_some());
}
