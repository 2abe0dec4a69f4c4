//! No specification citation dangles: every section the code and the
//! pages cite — "`000` §1.8", "`spec/002` §3–4", "`000` §1.3, §12.2" — is a
//! row of the citation index of `docs/design/overview.md`, which states the
//! rule in our words and links the section explaining it. The code is every
//! `.rs` file under the source roots; the pages are those of
//! [`super::doc_pages`].
//!
//! A citation is a document number `000`…`004` (in backticks, as
//! `spec/00N`, or bare before a `§`) followed by its sections: `§A`, a
//! range `§A–B` (both ends), and more sections after `,`, `and` or `/` on
//! the same line. A `§` with no document before it on its line refers to
//! the file's context and is not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{doc_pages, root};

/// A cited section: the document (`"000"`) and the section (`"1.8"`).
type Section = (String, String);

/// The page holding the index, from the repository root.
const OVERVIEW: &str = "docs/design/overview.md";

/// The folders whose `.rs` files are read, from the repository root.
const SOURCE_ROOTS: [&str; 6] = ["crates", "src", "examples", "tests", "fuzz", "bench"];

/// The citations of one line of text, in order.
fn citations(line: &str) -> Vec<Section> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 3 <= chars.len() {
        let is_doc = chars[i] == '0'
            && chars[i + 1] == '0'
            && ('0'..='4').contains(&chars[i + 2])
            && chars.get(i + 3).is_none_or(|c| !c.is_alphanumeric())
            && (i == 0 || !(chars[i - 1].is_alphanumeric() || matches!(chars[i - 1], '.' | '_' | '-')));
        if !is_doc {
            i += 1;
            continue;
        }
        let doc: String = chars[i..i + 3].iter().collect();
        let mut j = i + 3;
        if chars.get(j) == Some(&'`') {
            j += 1;
        }
        let mut sections = Vec::new();
        loop {
            let mut k = j;
            while chars.get(k).is_some_and(|c| c.is_whitespace()) {
                k += 1;
            }
            if !sections.is_empty() {
                // A separator between two sections of the same document.
                let rest: String = chars[k..].iter().take(4).collect();
                if rest.starts_with(',') || rest.starts_with('/') {
                    k += 1;
                } else if rest.starts_with("and ") {
                    k += 3;
                } else {
                    break;
                }
                while chars.get(k).is_some_and(|c| c.is_whitespace()) {
                    k += 1;
                }
            }
            if chars.get(k) != Some(&'§') {
                break;
            }
            k += 1;
            if chars.get(k) == Some(&' ') {
                k += 1;
            }
            let (number, end) = section_number(&chars, k);
            let Some(number) = number else { break };
            sections.push(number);
            j = end;
            if matches!(chars.get(j), Some('–' | '-')) {
                if let (Some(last), end) = section_number(&chars, j + 1) {
                    sections.push(last);
                    j = end;
                }
            }
        }
        out.extend(sections.into_iter().map(|s| (doc.clone(), s)));
        i = j.max(i + 3);
    }
    out
}

/// The section number `1.8` starting at `chars[at]`, without a trailing
/// `.`, and the index after it.
fn section_number(chars: &[char], at: usize) -> (Option<String>, usize) {
    let mut end = at;
    while chars.get(end).is_some_and(|c| c.is_ascii_digit() || *c == '.') {
        end += 1;
    }
    while end > at && chars[end - 1] == '.' {
        end -= 1;
    }
    let number: String = chars[at..end].iter().collect();
    (if number.starts_with(|c: char| c.is_ascii_digit()) { Some(number) } else { None }, end)
}

/// The rows of the overview's citation index: each cited section with its
/// rule's text and its link.
fn index() -> BTreeMap<Section, (String, String)> {
    let path = root().join(OVERVIEW);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let table = text.split("## Citation index").nth(1).unwrap_or_else(|| panic!("{OVERVIEW} has no citation index"));
    let mut rows = BTreeMap::new();
    for line in table.lines().filter(|l| l.starts_with("| `00")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        let [cited, rule, link] = cells[..] else { panic!("{OVERVIEW}: a row of three cells: {line}") };
        let sections = citations(cited);
        assert_eq!(sections.len(), 1, "{OVERVIEW}: one section a row: {line}");
        let previous = rows.insert(sections[0].clone(), (rule.to_string(), link.to_string()));
        assert!(previous.is_none(), "{OVERVIEW}: {cited} has two rows");
    }
    rows
}

/// Every `.rs` file under the source roots, outside build folders.
fn source_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for p in entries.map(|e| e.unwrap().path()) {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            if p.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    walk(&p, out);
                }
            } else if name.ends_with(".rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    for dir in SOURCE_ROOTS {
        walk(&root().join(dir), &mut out);
    }
    out.sort();
    out
}

#[test]
fn every_spec_section_the_code_and_the_pages_cite_is_in_the_overview_index() {
    let index = index();
    let mut files = source_files();
    files.extend(doc_pages());
    assert!(
        files.iter().any(|p| p.ends_with("crates/tgc-core/src/gpu/mod.rs")),
        "the walk found {} files",
        files.len()
    );
    let mut cited = BTreeSet::new();
    let mut missing: BTreeMap<Section, String> = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.strip_prefix(root()).unwrap_or(file).display().to_string();
        for (n, line) in text.lines().enumerate() {
            for section in citations(line) {
                if !index.contains_key(&section) {
                    missing.entry(section.clone()).or_insert_with(|| format!("{name}:{}", n + 1));
                }
                cited.insert(section);
            }
        }
    }
    assert!(cited.len() >= 40, "only {} cited sections found", cited.len());
    let listed: Vec<String> =
        missing.iter().map(|((doc, section), at)| format!("`{doc}` §{section} (first at {at})")).collect();
    assert!(listed.is_empty(), "cited but not in the index of {OVERVIEW}:\n{}", listed.join("\n"));
}

#[test]
fn every_index_row_states_a_rule_and_links_a_section_of_the_page() {
    for ((doc, section), (rule, link)) in index() {
        assert!(rule.len() > 20, "`{doc}` §{section}: no rule stated");
        assert!(link.starts_with('[') && link.contains("](#"), "`{doc}` §{section}: no link to a section: {link}");
    }
}

#[test]
fn citations_are_read_as_written() {
    let s = |doc: &str, section: &str| (doc.to_string(), section.to_string());
    assert_eq!(
        citations("//! (`000` §1.3, §12.2; `spec/002` §3–4 and 003 §4) `001` §8."),
        [s("000", "1.3"), s("000", "12.2"), s("002", "3"), s("002", "4"), s("003", "4"), s("001", "8")]
    );
    assert_eq!(citations("`000` §4.1 step 4, §9"), [s("000", "4.1")]);
    assert_eq!(citations("000 §5, §6 / §9 and §12.5"), [s("000", "5"), s("000", "6"), s("000", "9"), s("000", "12.5")]);
    assert!(citations("2000 §1, 0.001 §2, x_000 §3, `000`'s own §5, §1.8").is_empty());
}
