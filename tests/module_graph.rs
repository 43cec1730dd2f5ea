//! No file circle in usage-core or usage-server: the files of each crate, with an edge from
//! a file to every file whose items it names, form no cycle.
//!
//! The edges are read from the source: `use` trees and the paths in code (`super::x`,
//! `crate::a::b`, `child::item`), resolved to the file of the deepest module they name.
//! A `mod x;` declaration is not an edge (a parent declares its children), comments and
//! string literals are not read, nor are inline `#[cfg(test)]` modules, and a path into another crate (`usage_core::...`) is not
//! an edge between files. A file naming an item of an enclosing module (`super::PgStore`,
//! the type its `impl` blocks extend, the trait it implements) is not an edge either: a
//! module lives inside its parent, as the parent's part. Every other edge counts, the
//! parent's edges down to its children's items included, so files side by side that name
//! each other's items (`a -> b -> a`), directly or through others, make a circle.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One token of Rust source, as far as paths need it.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Path,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Other(char),
}

/// The tokens of `src`, without comments, string, byte-string and char literals.
fn tokens(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            i = skip_string(&c, i + 1);
            out.push(Tok::Other(' '));
        } else if (ch == 'r' || ch == 'b')
            && raw_string_start(&c, i).is_some()
            && !(i > 0 && is_ident_char(c[i - 1]))
        {
            let (hashes, body) = raw_string_start(&c, i).expect("checked");
            i = if hashes == usize::MAX {
                skip_string(&c, body)
            } else {
                skip_raw(&c, body, hashes)
            };
            out.push(Tok::Other(' '));
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < c.len() && is_ident_char(c[i]) {
                    i += 1;
                }
            }
            out.push(Tok::Other(' '));
        } else if is_ident_char(ch) && !ch.is_ascii_digit() {
            let start = i;
            while i < c.len() && is_ident_char(c[i]) {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            out.push(Tok::Ident(word.trim_start_matches("r#").to_owned()));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Tok::Path);
            i += 2;
        } else {
            out.push(match ch {
                '{' => Tok::Open,
                '}' => Tok::Close,
                ',' => Tok::Comma,
                ';' => Tok::Semi,
                '*' => Tok::Star,
                c if c.is_whitespace() => {
                    i += 1;
                    continue;
                }
                other => Tok::Other(other),
            });
            i += 1;
        }
    }
    out
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// At `r"`, `r#"`, `br"`, `b"`: the number of `#` (`usize::MAX` for an escaped `b"`) and
/// where the body starts.
fn raw_string_start(c: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if c[j] == 'b' {
        j += 1;
        if c.get(j) == Some(&'"') {
            return Some((usize::MAX, j + 1));
        }
        if c.get(j) == Some(&'\'') {
            return None;
        }
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (c.get(j) == Some(&'"')).then_some((hashes, j + 1))
}

fn skip_string(c: &[char], mut i: usize) -> usize {
    while i < c.len() {
        match c[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

fn skip_raw(c: &[char], mut i: usize, hashes: usize) -> usize {
    while i < c.len() {
        if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        i += 1;
    }
    i
}

/// A module of a crate: its path from the crate root, and the file it lives in.
type ModPath = Vec<String>;

/// The files of a crate under `src`, each with its module path (`lib.rs` and `main.rs`
/// are the root; `a/mod.rs` and `a.rs` are `a`).
fn files(src: &Path) -> BTreeMap<PathBuf, ModPath> {
    let mut out = BTreeMap::new();
    for path in support::rust_files(src) {
        let rel = path.strip_prefix(src).expect("under src");
        let mut module: ModPath = rel
            .parent()
            .map(|p| p.iter().map(|s| s.to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        let stem = path
            .file_stem()
            .expect("stem")
            .to_string_lossy()
            .into_owned();
        if !(module.is_empty() && (stem == "lib" || stem == "main")) && stem != "mod" {
            module.push(stem);
        }
        out.insert(path, module);
    }
    out
}

/// The module paths a file's source names, resolved against where each name appears.
fn named_paths(tokens: &[Tok], here: &ModPath, children: &BTreeSet<String>) -> Vec<ModPath> {
    let mut out = Vec::new();
    // The inline modules (`mod tests { .. }`) open at each brace depth.
    let mut inline: Vec<(usize, String)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let module = |inline: &Vec<(usize, String)>| {
            let mut m = here.clone();
            m.extend(inline.iter().map(|(_, n)| n.clone()));
            m
        };
        match &tokens[i] {
            Tok::Open => depth += 1,
            Tok::Close => {
                if inline.last().is_some_and(|(d, _)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Other('#') if test_module_at(tokens, i) => {
                i = block_end(tokens, i);
                continue;
            }
            Tok::Ident(w) if w == "mod" => {
                if let (Some(Tok::Ident(name)), Some(Tok::Open)) =
                    (tokens.get(i + 1), tokens.get(i + 2))
                {
                    inline.push((depth + 1, name.clone()));
                }
            }
            Tok::Ident(w) if w == "use" => {
                let (end, paths) = use_tree(tokens, i + 1, Vec::new());
                let at = module(&inline);
                out.extend(
                    paths
                        .into_iter()
                        .filter_map(|p| resolve(&p, &at, children, &inline)),
                );
                i = end;
                continue;
            }
            Tok::Ident(first)
                if tokens.get(i + 1) == Some(&Tok::Path) && !preceded_by_path(tokens, i) =>
            {
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while tokens.get(j) == Some(&Tok::Path) {
                    match tokens.get(j + 1) {
                        Some(Tok::Ident(seg)) => {
                            path.push(seg.clone());
                            j += 2;
                        }
                        _ => break,
                    }
                }
                let at = module(&inline);
                out.extend(resolve(&path, &at, children, &inline));
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// At `#[cfg(test)] mod name {`: the test module, which is not part of the production
/// graph.
fn test_module_at(tokens: &[Tok], i: usize) -> bool {
    let ident = |k: usize, w: &str| matches!(tokens.get(i + k), Some(Tok::Ident(x)) if x == w);
    let punct = |k: usize, c: char| tokens.get(i + k) == Some(&Tok::Other(c));
    punct(1, '[')
        && ident(2, "cfg")
        && punct(3, '(')
        && ident(4, "test")
        && punct(5, ')')
        && punct(6, ']')
        && ident(7, "mod")
        && matches!(tokens.get(i + 8), Some(Tok::Ident(_)))
        && tokens.get(i + 9) == Some(&Tok::Open)
}

/// The token after the block that opens at the first `{` from `i`.
fn block_end(tokens: &[Tok], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < tokens.len() {
        match tokens[i] {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

fn preceded_by_path(tokens: &[Tok], i: usize) -> bool {
    i > 0 && tokens[i - 1] == Tok::Path
}

/// The paths of the `use` tree starting at `i` (after `use`), each prefixed by `prefix`;
/// returns where the tree ends.
fn use_tree(tokens: &[Tok], mut i: usize, prefix: Vec<String>) -> (usize, Vec<Vec<String>>) {
    let mut path = prefix;
    let mut out = Vec::new();
    if tokens.get(i) == Some(&Tok::Path) {
        i += 1;
    }
    loop {
        match tokens.get(i) {
            Some(Tok::Ident(seg)) if seg == "as" => {
                i += 2;
            }
            Some(Tok::Ident(seg)) => {
                path.push(seg.clone());
                i += 1;
                if tokens.get(i) == Some(&Tok::Path) {
                    i += 1;
                    continue;
                }
            }
            Some(Tok::Star) => {
                i += 1;
            }
            Some(Tok::Open) => {
                i += 1;
                loop {
                    let (end, inner) = use_tree(tokens, i, path.clone());
                    out.extend(inner);
                    i = end;
                    match tokens.get(i) {
                        Some(Tok::Comma) => i += 1,
                        Some(Tok::Close) => {
                            i += 1;
                            break;
                        }
                        _ => break,
                    }
                    if tokens.get(i) == Some(&Tok::Close) {
                        i += 1;
                        break;
                    }
                }
                return (skip_semi(tokens, i), out);
            }
            _ => break,
        }
        if matches!(
            tokens.get(i),
            Some(Tok::Comma | Tok::Close | Tok::Semi) | None
        ) {
            break;
        }
    }
    if !path.is_empty() {
        out.push(path);
    }
    (skip_semi(tokens, i), out)
}

fn skip_semi(tokens: &[Tok], i: usize) -> usize {
    if tokens.get(i) == Some(&Tok::Semi) {
        i + 1
    } else {
        i
    }
}

/// The module path a source path names from module `at`, or `None` when it leaves the
/// crate or starts with a name that is not a module of it.
fn resolve(
    path: &[String],
    at: &ModPath,
    children: &BTreeSet<String>,
    inline: &[(usize, String)],
) -> Option<ModPath> {
    let mut segs = path.iter();
    let first = segs.next()?;
    let mut base = match first.as_str() {
        "crate" => Vec::new(),
        "self" => at.clone(),
        "super" => {
            let mut m = at.clone();
            m.pop();
            m
        }
        name if inline.is_empty() && children.contains(name) => vec![name.to_owned()],
        _ => return None,
    };
    if first != "crate" && first != "self" && first != "super" {
        let mut m = at.clone();
        m.extend(base);
        base = m;
    }
    let mut rest: Vec<&String> = segs.collect();
    while rest.first().is_some_and(|s| s.as_str() == "super") {
        base.pop();
        rest.remove(0);
    }
    base.extend(rest.into_iter().cloned());
    Some(base)
}

/// The file a module path lands in: the deepest module of `path` that is a file.
fn file_of<'a>(path: &ModPath, by_module: &'a BTreeMap<ModPath, PathBuf>) -> Option<&'a PathBuf> {
    (0..=path.len())
        .rev()
        .find_map(|n| by_module.get(&path[..n].to_vec()))
}

/// The `mod x;` children a file declares.
fn declared_children(tokens: &[Tok]) -> BTreeSet<String> {
    tokens
        .windows(3)
        .filter_map(|w| match w {
            [Tok::Ident(m), Tok::Ident(name), Tok::Semi | Tok::Open] if m == "mod" => {
                Some(name.clone())
            }
            _ => None,
        })
        .collect()
}

/// The edges between the files of the crate under `src`, by file name relative to it.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let files = files(src);
    let by_module: BTreeMap<ModPath, PathBuf> = files
        .iter()
        .filter(|(p, _)| !p.ends_with("main.rs") || !src.join("lib.rs").exists())
        .map(|(p, m)| (m.clone(), p.clone()))
        .collect();
    let name = |p: &Path| {
        p.strip_prefix(src)
            .expect("under src")
            .display()
            .to_string()
    };
    let mut edges = BTreeMap::new();
    for (path, module) in &files {
        if path.ends_with("main.rs") && src.join("lib.rs").exists() {
            continue; // the binary of a crate with a library: it names the library's items
        }
        let text = std::fs::read_to_string(path).expect("source is readable");
        let toks = tokens(&text);
        let children = declared_children(&toks);
        let targets: BTreeSet<String> = named_paths(&toks, module, &children)
            .iter()
            .filter_map(|m| file_of(m, &by_module))
            .filter(|target| *target != path && !module.starts_with(&files[*target]))
            .map(|t| name(t))
            .collect();
        edges.insert(name(path), targets);
    }
    edges
}

/// The circles of a graph: its strongly connected components of more than one file.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Two files are in one circle when each reaches the other.
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(f) = stack.pop() {
            for t in edges.get(&f).into_iter().flatten() {
                if seen.insert(t.clone()) {
                    stack.push(t.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        edges.keys().map(|f| (f, reach(f))).collect();
    let mut placed = BTreeSet::new();
    let mut out = Vec::new();
    for f in edges.keys() {
        if placed.contains(f) || !reached[f].contains(f) {
            continue;
        }
        let circle: Vec<String> = edges
            .keys()
            .filter(|g| reached[f].contains(*g) && reached[*g].contains(f))
            .cloned()
            .collect();
        placed.extend(circle.iter().cloned());
        out.push(circle);
    }
    out
}

/// A circle with one edge of it, for the failure message.
fn describe(circle: &[String], edges: &BTreeMap<String, BTreeSet<String>>) -> String {
    let inside: BTreeSet<&String> = circle.iter().collect();
    let arrows: Vec<String> = circle
        .iter()
        .flat_map(|f| {
            edges[f]
                .iter()
                .filter(|t| inside.contains(t))
                .map(move |t| format!("{f} -> {t}"))
        })
        .collect();
    arrows.join(", ")
}

/// The circles of one crate: the files of each, and a description for a failure message.
fn circles_of(krate: &str) -> Vec<(Vec<String>, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(krate)
        .join("src");
    let edges = graph(&src);
    circles(&edges)
        .into_iter()
        .map(|c| {
            let d = describe(&c, &edges);
            (c, d)
        })
        .collect()
}

/// Checks that the circles of `krate` are exactly `remaining`: a new circle fails, and so
/// does a listed one that is gone (take it off the list).
fn assert_circles(krate: &str, remaining: &[&[&str]]) {
    let found = circles_of(krate);
    let files: Vec<Vec<String>> = found.iter().map(|(c, _)| c.clone()).collect();
    let listed: Vec<Vec<String>> = remaining
        .iter()
        .map(|c| c.iter().map(|f| (*f).to_owned()).collect())
        .collect();
    let described: Vec<&str> = found.iter().map(|(_, d)| d.as_str()).collect();
    assert_eq!(
        files,
        listed,
        "file circles in {krate}:\n{}",
        described.join("\n")
    );
}

#[test]
fn the_checker_sees_a_circle_through_use_trees_and_paths() {
    let dir = tempfile_dir();
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("store")).expect("folder");
    let write = |p: &str, s: &str| std::fs::write(src.join(p), s).expect("write");
    write("lib.rs", "mod store;\nmod names;\n");
    write(
        "names.rs",
        "//! uses crate::store::a in a comment only\npub const N: &str = \"crate::store::a\";\n\
         #[cfg(test)]\nmod tests { use crate::store::S; }\n",
    );
    write(
        "store/mod.rs",
        "mod a;\nmod b;\npub struct S;\nfn f() { a::go(); let _ = crate::names::N; }\n",
    );
    write(
        "store/a.rs",
        "use super::{S, b::{self, B}};\npub fn go() {}\n",
    );
    write(
        "store/b.rs",
        "pub struct B;\nfn g() { super::a::go() }\n#[cfg(test)]\nmod tests { use super::*; }\n",
    );
    let edges = graph(&src);
    assert_eq!(
        edges["store/mod.rs"].iter().collect::<Vec<_>>(),
        ["names.rs", "store/a.rs"]
    );
    // `super::S` names the enclosing module: not an edge. `use super::*` in `mod tests`
    // names the file itself.
    assert_eq!(
        edges["store/a.rs"].iter().collect::<Vec<_>>(),
        ["store/b.rs"]
    );
    assert_eq!(
        edges["store/b.rs"].iter().collect::<Vec<_>>(),
        ["store/a.rs"]
    );
    assert!(
        edges["names.rs"].is_empty(),
        "comments, strings and test modules are not read"
    );
    assert_eq!(
        circles(&edges),
        vec![vec!["store/a.rs".to_owned(), "store/b.rs".to_owned()]]
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("usage-module-graph-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The circles that remain: none. A new one fails the test below; break it by moving what
/// both files need into a leaf rather than by listing it here.
const REMAINING_CORE: &[&[&str]] = &[];
const REMAINING_SERVER: &[&[&str]] = &[];

#[test]
fn usage_core_has_no_file_circle() {
    assert_circles("usage-core", REMAINING_CORE);
}

#[test]
fn usage_server_has_no_file_circle() {
    assert_circles("usage-server", REMAINING_SERVER);
}
