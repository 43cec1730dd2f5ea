//! docs/architecture.md names every production module of usage-core, usage-client and
//! usage-server, so a module added without a line on the page fails here.
//!
//! **Production modules** are the `.rs` files under a crate's `src/`, except:
//! the crate root `lib.rs` (the first line of the crate's tree, `usage-core/src`, is it);
//! test-only files: `tests.rs`, `*_tests.rs`, any file under a `tests/` folder, and a file
//! whose `mod name;` in its parent file has `#[cfg(test)]` on the line directly above
//! (`#[cfg(any(test, feature = "testing"))]` is not test-only: such a module ships with the
//! feature); and generated files (first line `// @generated`). `build.rs` lives beside
//! `src/`, not in it. `main.rs` counts, as the module `main`.
//!
//! **The crate's tree** is the ```` ```text ```` block of the page whose first line is
//! `<crate>/src`, up to its first blank line. Each line with `├── ` or `└── ` is an entry:
//! at depth `d` when the branch sits at column `4·d`, inside the last entry of depth `d-1`.
//! An entry's names are the first word after `── ` and, while a word ends with a comma,
//! the word after it, each without its comma and trailing `/` (`├── store/` is `store`,
//! `├── time, version, ident, error   ...` is four entries); its text is its line and the
//! lines below it up to the next entry.
//!
//! **A module file `a/b/c.rs` (or `a/b/c/mod.rs`) is named** when
//! - an entry's path is `a/b/c`: `── c` inside `── b/` inside `── a/` (for `a/b/c/mod.rs`,
//!   also `── mod` inside `── c/`); or
//! - the text of the entry of one of the file's folders holds the file's path from that
//!   folder as a whole word: `b/c.rs` in the text of `a/`, `c.rs` in the text of `a/b/`
//!   (`ops.rs` in the text of `http/`, `tls/settings.rs` in that of `postgres/`, `mod.rs`
//!   in that of `sqlite/` for `sqlite/mod.rs`).
//!
//! Nothing else counts: not a module's name in prose (`the per-key rate limiter` does not
//! name `auth/rate.rs`), not `c.rs` under another folder (`billing.rs` in the text of
//! `sqlite/` does not name `postgres/billing.rs`), not `v2.rs` inside `openapi/v2.rs`.

mod support;

use std::path::{Path, PathBuf};

const CRATES: [&str; 3] = ["usage-core", "usage-client", "usage-server"];

/// The production module files of a crate's `src`, as paths relative to it with `/`.
fn production_modules(src: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for path in support::rust_files(src) {
        let rel: Vec<String> = path
            .strip_prefix(src)
            .expect("under src")
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let rel = rel.join("/");
        let text = std::fs::read_to_string(&path).expect("source is readable");
        if rel == "lib.rs"
            || is_test_file(&rel)
            || text
                .lines()
                .next()
                .is_some_and(|l| l.starts_with("// @generated"))
            || declared_under_cfg_test(src, &rel)
        {
            continue;
        }
        out.push(rel);
    }
    out.sort();
    out
}

/// A file that is a test by its name or folder: `tests.rs`, `*_tests.rs`, `tests/...`.
fn is_test_file(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name == "tests.rs"
        || name.ends_with("_tests.rs")
        || rel.split('/').rev().skip(1).any(|dir| dir == "tests")
}

/// The module name of a file (`a/b.rs` and `a/b/mod.rs` are `b`) and the files that may
/// declare it (`a/mod.rs` or `a.rs`; `lib.rs` and `main.rs` at the root).
fn name_and_parents(rel: &str) -> (String, Vec<String>) {
    let mut parts: Vec<&str> = rel.trim_end_matches(".rs").split('/').collect();
    if parts.last() == Some(&"mod") {
        parts.pop();
    }
    let name = parts.pop().unwrap_or_default().to_owned();
    let parents = if parts.is_empty() {
        vec!["lib.rs".to_owned(), "main.rs".to_owned()]
    } else {
        let dir = parts.join("/");
        vec![format!("{dir}/mod.rs"), format!("{dir}.rs")]
    };
    (name, parents)
}

/// Whether the line above the file's `mod name;` in its parent is `#[cfg(test)]`.
fn declared_under_cfg_test(src: &Path, rel: &str) -> bool {
    let (name, parents) = name_and_parents(rel);
    parents.iter().any(|parent| {
        let Ok(text) = std::fs::read_to_string(src.join(parent)) else {
            return false;
        };
        cfg_test_declaration(&text, &name)
    })
}

/// Whether `text` declares `mod name;` (any visibility) right below a `#[cfg(test)]` line.
fn cfg_test_declaration(text: &str, name: &str) -> bool {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let decl = format!("mod {name};");
    lines.iter().enumerate().any(|(i, line)| {
        let visibility = line.strip_suffix(decl.as_str()).map(str::trim);
        visibility.is_some_and(|v| v.is_empty() || v.starts_with("pub"))
            && i > 0
            && lines[i - 1] == "#[cfg(test)]"
    })
}

/// One entry of a crate's tree: its path from `src` and its text.
#[derive(Debug)]
struct Entry {
    path: Vec<String>,
    text: String,
}

/// The entries of the tree of `krate` on the page (see the file's doc comment).
fn tree(page: &str, krate: &str) -> Vec<Entry> {
    let root = format!("{krate}/src");
    let mut lines = page.lines();
    let mut fenced = false;
    let mut found = false;
    for line in lines.by_ref() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced && line.trim_end() == root {
            found = true;
            break;
        }
    }
    assert!(
        found,
        "docs/architecture.md has no ```text tree starting with `{root}`"
    );
    let mut entries: Vec<Entry> = Vec::new();
    let mut open: Vec<String> = Vec::new();
    // The first of the entries the last entry line made (several for `a, b, c`).
    let mut line_start = 0;
    for line in lines {
        if line.trim().is_empty() || line.trim_start().starts_with("```") {
            break;
        }
        let chars: Vec<char> = line.chars().collect();
        let branch = (0..chars.len()).find(|&i| {
            matches!(chars[i], '├' | '└')
                && chars.get(i + 1) == Some(&'─')
                && chars.get(i + 2) == Some(&'─')
        });
        let Some(at) = branch else {
            for entry in &mut entries[line_start..] {
                entry.text.push('\n');
                entry.text.push_str(line);
            }
            continue;
        };
        line_start = entries.len();
        let depth = at / 4;
        let rest: String = chars[at + 3..].iter().collect();
        let mut names = Vec::new();
        for word in rest.split_whitespace() {
            names.push(word.trim_end_matches(','));
            if !word.ends_with(',') {
                break;
            }
        }
        open.truncate(depth);
        let parent = open.clone();
        let mut last_name = String::new();
        for name in names {
            let name = name.trim_end_matches('/').to_owned();
            let mut path = parent.clone();
            path.push(name.clone());
            entries.push(Entry {
                path,
                text: line.to_owned(),
            });
            last_name = name;
        }
        open.push(last_name);
    }
    entries
}

/// Whether `word` occurs in `text` as a whole word (no letter, digit, `_`, `/` or `.`
/// right before it, no letter, digit or `_` right after it).
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        before.is_none_or(|c| !(c.is_alphanumeric() || matches!(c, '_' | '/' | '.')))
            && after.is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    })
}

/// Whether the tree names the module file `rel` (see the file's doc comment).
fn names(entries: &[Entry], rel: &str) -> bool {
    let parts: Vec<String> = rel.split('/').map(str::to_owned).collect();
    let dirs = &parts[..parts.len() - 1];
    let stem = parts[parts.len() - 1].trim_end_matches(".rs").to_owned();
    let mut own = vec![dirs.to_vec()];
    own[0].push(stem.clone());
    if stem == "mod" {
        own.push(dirs.to_vec());
    }
    if entries.iter().any(|e| own.contains(&e.path)) {
        return true;
    }
    (1..=dirs.len()).any(|n| {
        let from_folder = parts[n..].join("/");
        entries
            .iter()
            .any(|e| e.path == dirs[..n] && has_word(&e.text, &from_folder))
    })
}

#[test]
fn architecture_names_every_production_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page_path: PathBuf = root.join("docs/architecture.md");
    let page = std::fs::read_to_string(&page_path).expect("docs/architecture.md is readable");
    let mut missing = Vec::new();
    let mut checked = 0;
    for krate in CRATES {
        let entries = tree(&page, krate);
        for rel in production_modules(&root.join(krate).join("src")) {
            checked += 1;
            if !names(&entries, &rel) {
                missing.push(format!("{krate}/src/{rel}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/architecture.md does not name these production modules; add a line for each \
         to its crate's tree in docs/architecture.md (a `── name` entry under its folder's \
         entry, or `name.rs` in that folder's text; see tests/architecture.rs):\n{}",
        missing.join("\n")
    );
    assert!(
        checked >= 60,
        "only {checked} production modules found: is the walk broken?"
    );
}

#[test]
fn test_only_files_are_not_production_modules() {
    assert!(is_test_file("eval/tests.rs"));
    assert!(is_test_file("store/postgres/cache_tests.rs"));
    assert!(is_test_file("a/tests/b.rs"));
    assert!(!is_test_file("tests_helper.rs"));
    assert!(!is_test_file("store/tests_of.rs"));
    let parent = "pub mod a;\n#[cfg(test)]\nmod b;\n#[cfg(any(test, feature = \"x\"))]\npub mod c;\n\
                  #[cfg(test)]\npub(crate) mod d;\n";
    assert!(!cfg_test_declaration(parent, "a"));
    assert!(cfg_test_declaration(parent, "b"));
    assert!(!cfg_test_declaration(parent, "c"));
    assert!(cfg_test_declaration(parent, "d"));
    assert_eq!(
        name_and_parents("x/y/mod.rs"),
        (
            "y".to_owned(),
            vec!["x/mod.rs".to_owned(), "x.rs".to_owned()]
        )
    );
    let core = production_modules(&Path::new(env!("CARGO_MANIFEST_DIR")).join("usage-core/src"));
    assert!(core.contains(&"eval/reference.rs".to_owned()));
    assert!(!core.contains(&"eval/differential.rs".to_owned()));
    assert!(!core.contains(&"lib.rs".to_owned()));
}

#[test]
fn the_rule_takes_entries_and_paths_in_their_folder_only() {
    let page = "\
```text
k/src
├── a/       folder a; b.rs the b module, x/y.rs deep
│   ├── mod  a's own file
│   └── c    c of a
├── one, two both, not three
│              billing.rs here is not a/billing.rs
├── three/, four/  two folders
│              x.rs in both
├── sqlite/  mod.rs (connection), teams.rs
└── last/    last folder
    └── leaf  a leaf; openapi/v2.rs

other/
├── z        not in the tree
```
";
    let e = tree(page, "k");
    for named in [
        "a/mod.rs",
        "a/b.rs",
        "a/c.rs",
        "a/x/y.rs",
        "one.rs",
        "two.rs",
        "sqlite/mod.rs",
        "sqlite/teams.rs",
        "three/x.rs",
        "four/x.rs",
        "last/leaf.rs",
        "last/leaf/openapi/v2.rs",
    ] {
        assert!(names(&e, named), "{named} should be named");
    }
    for unnamed in [
        "billing.rs",
        "a/billing.rs",
        "c.rs",
        "b.rs",
        "both.rs",
        "z.rs",
        "a/y.rs",
        "last/leaf/v2.rs",
        "leaf.rs",
        "mod.rs",
    ] {
        assert!(!names(&e, unnamed), "{unnamed} should not be named");
    }
}

/// The most lines of production code a module file may have: the lines before its first
/// `#[cfg(test)]` item at the start of a line (tests beside the code do not count).
const MAX_PRODUCTION_LINES: usize = 720;

/// Files allowed past [`MAX_PRODUCTION_LINES`], each with the reason written in the file
/// itself (its `//!` doc says why).
const LONGER_ON_PURPOSE: [&str; 1] = [
    // The OpenAPI document's builder, one schema after another.
    "usage-server/src/http/openapi.rs",
];

/// One concern per file: no production module is longer than about 700 lines, except the
/// files listed with their reason; a listed file that got short enough fails too (take it
/// off the list).
#[test]
fn no_production_file_is_longer_than_about_700_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = Vec::new();
    let mut listed_but_short = Vec::new();
    for krate in CRATES {
        let src = root.join(krate).join("src");
        for rel in std::iter::once("lib.rs".to_string()).chain(production_modules(&src)) {
            let text = std::fs::read_to_string(src.join(&rel)).expect("source is readable");
            let lines = text
                .lines()
                .take_while(|l| !l.starts_with("#[cfg(test)]"))
                .count();
            let name = format!("{krate}/src/{rel}");
            let listed = LONGER_ON_PURPOSE.contains(&name.as_str());
            if lines > MAX_PRODUCTION_LINES && !listed {
                long.push(format!("{name}: {lines} lines"));
            }
            if listed && lines <= MAX_PRODUCTION_LINES {
                listed_but_short.push(name);
            }
        }
    }
    assert!(
        long.is_empty(),
        "production files over {MAX_PRODUCTION_LINES} lines (split them by concern, or list \
         them in LONGER_ON_PURPOSE with the reason in the file):\n{}",
        long.join("\n")
    );
    assert!(
        listed_but_short.is_empty(),
        "listed as longer on purpose but no longer long: {listed_but_short:?}"
    );
}
