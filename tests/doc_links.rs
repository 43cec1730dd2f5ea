//! Every relative link in README.md, the top-level pages and `docs/` points at a file that
//! exists, so a moved file or folder cannot leave a dead link behind.

use std::path::{Path, PathBuf};

/// The Markdown pages whose links are checked: the top-level pages and all of `docs/`.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = ["README.md", "CHANGELOG.md", "BENCHMARKS.md"]
        .iter()
        .map(|p| root.join(p))
        .collect();
    let docs = std::fs::read_dir(root.join("docs")).expect("docs/ is readable");
    for entry in docs {
        let path = entry.expect("docs/ entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    pages.sort();
    pages
}

/// The targets of the inline links `[text](target)` of a Markdown text, outside fenced code.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].trim().to_owned());
            rest = &after[end..];
        }
    }
    targets
}

/// A target that names a file of this repository (not a web address, not an anchor alone).
fn is_relative(target: &str) -> bool {
    !(target.is_empty()
        || target.starts_with('#')
        || target.contains("://")
        || target.starts_with("mailto:"))
}

#[test]
fn relative_links_in_docs_point_at_existing_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dead = Vec::new();
    let mut checked = 0;
    for page in pages(root) {
        let text = std::fs::read_to_string(&page).expect("page is readable");
        for target in link_targets(&text).into_iter().filter(|t| is_relative(t)) {
            let file = target.split('#').next().unwrap_or_default();
            let resolved = page.parent().expect("page has a folder").join(file);
            checked += 1;
            if !resolved.exists() {
                dead.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(dead.is_empty(), "dead relative links:\n{}", dead.join("\n"));
    assert!(
        checked >= 5,
        "only {checked} relative links found: is the scan broken?"
    );
}

#[test]
fn link_scan_finds_inline_links_outside_code() {
    let text =
        "see [a](docs/a.md) and [b](https://x.y) [c](#top)\n```\n[d](no.md)\n```\n[e](b.md#s)";
    assert_eq!(
        link_targets(text),
        ["docs/a.md", "https://x.y", "#top", "b.md#s"]
    );
    assert!(!is_relative("https://x.y"));
    assert!(!is_relative("#top"));
    assert!(is_relative("b.md#s"));
}
