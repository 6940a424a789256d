//! The shape of the code, held by tests (docs/ARCHITECTURE.md states the
//! rules; these make a change that breaks one fail in CI):
//!
//! * every module under `crates/*/src` is named in docs/ARCHITECTURE.md;
//! * no import circle of three or more files in any crate;
//! * mptd's planes import one way: `io` nothing of the daemon's planes,
//!   `plane` only `io`, `dataplane` never `control` or `ops`, `control`
//!   never `dataplane` or `ops`, `ops` never `dataplane`;
//! * no source file is over 900 lines (its inline test module excluded);
//!   no function in mptd is over 200 lines.
//!
//! "Imports" are read from the source text: every `crate::a::b`,
//! `super::a` and `self::a` path (with `{…}` groups expanded), outside
//! comments and string literals, resolved to the longest module file it
//! names. That is cruder than the compiler's view but errs on the side of
//! seeing an import where there is one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 900;
const MAX_FN_LINES: usize = 200;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf()
}

/// Every crate's `src` folder, by crate folder name.
fn crate_sources() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let dir = workspace().join("crates");
    for entry in std::fs::read_dir(&dir).expect("crates/") {
        let path = entry.expect("crates/ entry").path();
        let src = path.join("src");
        if src.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            out.push((name, src));
        }
    }
    out.sort();
    assert!(
        out.len() >= 4,
        "expected the workspace's crates, found {out:?}"
    );
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A test-only file: `tests.rs` or anything under a `tests/` folder.
fn is_test_file(rel: &Path) -> bool {
    rel.file_name().is_some_and(|n| n == "tests.rs")
        || rel.components().any(|c| c.as_os_str() == "tests")
}

/// The module path of a file relative to `src` (`a/b.rs` and `a/b/mod.rs`
/// are `["a", "b"]`; `lib.rs` and `main.rs` are the root).
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The source without comments, and with string and char literals
/// emptied, so neither is read as code.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        if b[i] == b'\n' {
                            out.push('\n');
                        }
                        i += 1;
                    }
                }
            }
            b'"' if i > 0 && b[i - 1] == b'#' => {
                // A raw string r#"…"#: ends at the first `"#`.
                let end = text[i + 1..].find("\"#").map_or(b.len(), |p| i + 1 + p + 2);
                out.push_str("\"\"");
                out.extend(text[i..end].chars().filter(|&c| c == '\n'));
                i = end;
            }
            b'"' => {
                out.push('"');
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    } else if b[i] == b'\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
                out.push('"');
                i += 1;
            }
            b'\'' => {
                // A char literal ('x', '\n', '\u{1F}'), not a lifetime.
                let close = if b.get(i + 1) == Some(&b'\\') {
                    b[i + 2..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .map(|p| i + 2 + p)
                } else if b.get(i + 2) == Some(&b'\'') {
                    Some(i + 2)
                } else {
                    None
                };
                match close {
                    Some(end) if end - i <= 12 => {
                        out.push_str("' '");
                        i = end + 1;
                    }
                    _ => {
                        out.push('\'');
                        i += 1;
                    }
                }
            }
            _ => {
                // Copy one whole UTF-8 character.
                let ch = text[i..].chars().next().expect("char boundary");
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Reads a path's segments after a `crate`/`super`/`self` keyword at
/// `i`; a `{…}` group yields one path per item (nested groups too).
fn read_paths(b: &[u8], mut i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix;
    loop {
        if b.get(i) == Some(&b':') && b.get(i + 1) == Some(&b':') {
            i += 2;
            while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
                i += 1;
            }
            if b.get(i) == Some(&b'{') {
                i += 1;
                loop {
                    while b
                        .get(i)
                        .is_some_and(|c| c.is_ascii_whitespace() || *c == b',')
                    {
                        i += 1;
                    }
                    match b.get(i) {
                        None => return i,
                        Some(b'}') => {
                            out.push(path);
                            return i + 1;
                        }
                        _ => {}
                    }
                    let start = i;
                    while b.get(i).is_some_and(|&c| is_ident(c)) {
                        i += 1;
                    }
                    if i == start {
                        i += 1; // `*` or anything else
                        continue;
                    }
                    let mut item = path.clone();
                    let word = String::from_utf8_lossy(&b[start..i]).into_owned();
                    if word != "self" {
                        item.push(word);
                    }
                    i = read_paths(b, i, item, out);
                }
            }
            let start = i;
            while b.get(i).is_some_and(|&c| is_ident(c)) {
                i += 1;
            }
            if i == start {
                break;
            }
            path.push(String::from_utf8_lossy(&b[start..i]).into_owned());
        } else {
            break;
        }
    }
    out.push(path);
    i
}

/// Paths (as written, keyword first) used by one file.
fn paths_used(code: &str) -> Vec<Vec<String>> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if is_ident(b[i]) && (i == 0 || !is_ident(b[i - 1])) {
            let start = i;
            while i < b.len() && is_ident(b[i]) {
                i += 1;
            }
            let word = &code[start..i];
            let before = code[..start].trim_end();
            let after_colons = start >= 2 && before.ends_with("::");
            if matches!(word, "crate" | "super" | "self")
                && !after_colons
                && b.get(i) == Some(&b':')
            {
                i = read_paths(b, i, vec![word.to_string()], &mut out);
            }
        } else {
            i += 1;
        }
    }
    out
}

/// One crate's files and their imports between each other.
struct ModuleGraph {
    /// Module path -> file, for every file of the crate.
    files: BTreeMap<Vec<String>, PathBuf>,
    /// Module path -> module paths it imports (other files of the crate).
    edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
}

impl ModuleGraph {
    fn of(src: &Path) -> ModuleGraph {
        let mut all = Vec::new();
        rust_files(src, &mut all);
        let files: BTreeMap<Vec<String>, PathBuf> = all
            .into_iter()
            .map(|f| (module_path(f.strip_prefix(src).unwrap()), f))
            .collect();
        let mut edges = BTreeMap::new();
        for (module, file) in &files {
            // Inline test modules are left out: their `super` is the file
            // itself, and what tests import is not the design.
            let text = std::fs::read_to_string(file).expect("read source");
            let code = code_only(&non_test_lines(&text).join("\n"));
            let mut targets = BTreeSet::new();
            for path in paths_used(&code) {
                let mut base: Vec<String> = match path[0].as_str() {
                    "crate" => Vec::new(),
                    "super" => module[..module.len().saturating_sub(1)].to_vec(),
                    _ => module.clone(),
                };
                let mut rest = &path[1..];
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                // The longest prefix that is a file of the crate.
                let target = (1..=base.len())
                    .rev()
                    .map(|n| base[..n].to_vec())
                    .find(|p| files.contains_key(p));
                if let Some(t) = target.filter(|t| t != module) {
                    targets.insert(t);
                }
            }
            edges.insert(module.clone(), targets);
        }
        ModuleGraph { files, edges }
    }

    /// Strongly connected components (Tarjan), as module paths.
    fn cycles(&self) -> Vec<Vec<Vec<String>>> {
        struct Tarjan<'a> {
            g: &'a ModuleGraph,
            index: BTreeMap<&'a Vec<String>, usize>,
            low: BTreeMap<&'a Vec<String>, usize>,
            stack: Vec<&'a Vec<String>>,
            on_stack: BTreeSet<&'a Vec<String>>,
            next: usize,
            out: Vec<Vec<Vec<String>>>,
        }
        impl<'a> Tarjan<'a> {
            fn visit(&mut self, v: &'a Vec<String>) {
                self.index.insert(v, self.next);
                self.low.insert(v, self.next);
                self.next += 1;
                self.stack.push(v);
                self.on_stack.insert(v);
                for w in &self.g.edges[v] {
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let lw = self.low[w];
                        let lv = self.low.get_mut(v).unwrap();
                        *lv = (*lv).min(lw);
                    } else if self.on_stack.contains(w) {
                        let iw = self.index[w];
                        let lv = self.low.get_mut(v).unwrap();
                        *lv = (*lv).min(iw);
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on_stack.remove(w);
                        comp.push(w.clone());
                        if w == v {
                            break;
                        }
                    }
                    self.out.push(comp);
                }
            }
        }
        let mut t = Tarjan {
            g: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            next: 0,
            out: Vec::new(),
        };
        for v in self.files.keys() {
            if !t.index.contains_key(v) {
                t.visit(v);
            }
        }
        t.out
    }
}

fn show(module: &[String]) -> String {
    if module.is_empty() {
        "<crate root>".into()
    } else {
        module.join("::")
    }
}

#[test]
fn no_import_circle_of_three_or_more_files() {
    let mut bad = Vec::new();
    for (name, src) in crate_sources() {
        let graph = ModuleGraph::of(&src);
        for comp in graph.cycles() {
            if comp.len() >= 3 {
                let mut names: Vec<String> = comp.iter().map(|m| show(m)).collect();
                names.sort();
                bad.push(format!("{name}: {}", names.join(", ")));
            }
        }
    }
    assert!(bad.is_empty(), "import circles:\n{}", bad.join("\n"));
}

#[test]
fn the_reader_sees_imports_and_circles() {
    // The analysis itself must be able to fail: a made-up crate with a
    // circle of three and a grouped import.
    let dir = std::env::temp_dir().join(format!("mpt-structure-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a; mod b; mod d;").unwrap();
    std::fs::write(
        dir.join("a.rs"),
        "// crate::d is a comment\nuse crate::b::{c::X, self};",
    )
    .unwrap();
    std::fs::write(
        dir.join("b/mod.rs"),
        "pub mod c; fn f() { let s = \"crate::a\"; }",
    )
    .unwrap();
    std::fs::write(dir.join("b/c.rs"), "use super::super::d::Y;").unwrap();
    std::fs::write(
        dir.join("d.rs"),
        "fn g() { let r = r#\"x\"crate::b\"#; crate::a::h(); }",
    )
    .unwrap();
    let graph = ModuleGraph::of(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let m = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (a, b, c, d) = (m(&["a"]), m(&["b"]), m(&["b", "c"]), m(&["d"]));
    assert_eq!(graph.edges[&a], BTreeSet::from([b.clone(), c.clone()]));
    assert!(graph.edges[&b].is_empty(), "a string literal read as code");
    assert_eq!(graph.edges[&c], BTreeSet::from([d.clone()]));
    assert_eq!(
        graph.edges[&d],
        BTreeSet::from([a.clone()]),
        "raw string or call path misread"
    );
    let mut circle = graph
        .cycles()
        .into_iter()
        .find(|comp| comp.len() >= 3)
        .expect("the circle a -> b::c -> d -> a");
    circle.sort();
    assert_eq!(circle, vec![a, c, d]);
}

#[test]
fn mptd_planes_import_one_way() {
    let src = workspace().join("crates/mptd/src");
    let graph = ModuleGraph::of(&src);
    // What each plane may import, besides itself and the leaves every
    // plane may use (config, keys, sync).
    let allowed: &[(&str, &[&str])] = &[
        ("io", &[]),
        ("plane", &["io"]),
        ("dataplane", &["plane", "io"]),
        ("control", &["plane", "io"]),
        ("ops", &["plane", "io", "control"]),
    ];
    let leaves = ["config", "keys", "sync"];
    let mut bad = Vec::new();
    for (from, targets) in &graph.edges {
        let Some(top) = from.first() else { continue };
        let Some((_, may)) = allowed.iter().find(|(p, _)| p == top) else {
            continue;
        };
        for to in targets {
            let Some(to_top) = to.first() else { continue };
            if to_top == top || leaves.contains(&to_top.as_str()) || may.contains(&to_top.as_str())
            {
                continue;
            }
            bad.push(format!("{} -> {}", show(from), show(to)));
        }
    }
    assert!(
        graph
            .files
            .keys()
            .any(|m| m.first().is_some_and(|t| t == "dataplane")),
        "mptd has no dataplane/ folder any more: update this test and ARCHITECTURE.md"
    );
    assert!(
        bad.is_empty(),
        "imports against the plane rule:\n{}",
        bad.join("\n")
    );
}

/// The lines of a file that are not its inline `#[cfg(test)] mod …`.
fn non_test_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "))
        .unwrap_or(lines.len());
    lines[..end].to_vec()
}

#[test]
fn no_source_file_over_900_lines() {
    let mut bad = Vec::new();
    for (name, src) in crate_sources() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for f in files {
            let rel = f.strip_prefix(&src).unwrap();
            if is_test_file(rel) {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            let n = non_test_lines(&text).len();
            if n > MAX_FILE_LINES {
                bad.push(format!("{name}/src/{}: {n} lines", rel.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "files over {MAX_FILE_LINES} lines:\n{}",
        bad.join("\n")
    );
}

/// `(name, first line, length)` of every function in `code` (comments and
/// literals already removed), by brace matching from its `fn` keyword.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let Some(pos) = t.find("fn ") else { continue };
        let head = &t[..pos];
        let is_fn = head
            .split_whitespace()
            .all(|w| w.starts_with("pub") || matches!(w, "const" | "async" | "unsafe" | "extern"));
        if !is_fn || !t[pos + 3..].starts_with(|c: char| c.is_alphabetic() || c == '_') {
            continue;
        }
        let name: String = t[pos + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let (mut depth, mut started) = (0i32, false);
        for (j, l) in lines.iter().enumerate().skip(i) {
            if !started && l.contains(';') && !l.contains('{') {
                break; // a declaration without a body
            }
            for ch in l.chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        started = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if started && depth == 0 {
                out.push((name.clone(), i + 1, j - i + 1));
                break;
            }
        }
    }
    out
}

#[test]
fn no_function_in_mptd_over_200_lines() {
    let src = workspace().join("crates/mptd/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut bad = Vec::new();
    let mut seen = 0;
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        if is_test_file(rel) {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = code_only(&non_test_lines(&text).join("\n"));
        for (name, line, len) in functions(&code) {
            seen += 1;
            if len > MAX_FN_LINES {
                bad.push(format!("{}:{line} fn {name}: {len} lines", rel.display()));
            }
        }
    }
    assert!(
        seen > 300,
        "the function reader found only {seen} functions"
    );
    assert!(
        bad.is_empty(),
        "functions over {MAX_FN_LINES} lines:\n{}",
        bad.join("\n")
    );
}

#[test]
fn architecture_names_every_module() {
    let doc = std::fs::read_to_string(workspace().join("docs/ARCHITECTURE.md"))
        .expect("docs/ARCHITECTURE.md");
    let mut missing = Vec::new();
    for (name, src) in crate_sources() {
        // The crate's section: from its `crates/NAME` heading to the next
        // heading of the same level or above.
        let heading = format!("### crates/{name}");
        let Some(start) = doc.find(&heading) else {
            missing.push(format!("{name}: no `{heading}` section"));
            continue;
        };
        let rest = &doc[start + heading.len()..];
        let end = rest
            .find("\n### ")
            .or_else(|| rest.find("\n## "))
            .unwrap_or(rest.len());
        let section = &rest[..end];
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for f in files {
            let rel = f.strip_prefix(&src).unwrap();
            if is_test_file(rel) {
                continue;
            }
            let shown = rel.to_string_lossy().replace("/mod.rs", "/");
            if !section.contains(&format!("`{shown}`")) {
                missing.push(format!("{name}: `{shown}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "modules not named in docs/ARCHITECTURE.md (name each as `path/in/src.rs`, a folder's mod.rs as `folder/`):\n{}",
        missing.join("\n")
    );
}
