//! The crate's modules import each other in one direction (issue 24 item 4;
//! docs/ARCHITECTURE.md, "the owner's request cycle"): a walk of every source file's
//! `crate::…` and `super::…` paths (outside comments and `#[cfg(test)]` modules) builds
//! the module graph, and the test fails on any cycle, naming its modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a source file (`owner/batch.rs` → `owner::batch`; `lib.rs` → ``).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let Ok(rel) = file.strip_prefix(src) else { panic!("{} is not under {}", file.display(), src.display()) };
    let mut parts: Vec<String> = rel.with_extension("").iter().map(|c| c.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The paths starting with `crate::`, `super::` or `self::` in one line of code.
fn paths_in(line: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = line[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            // A whole word: not `xcrate::` nor `my_super::`.
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            let end = line[at..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).map_or(line.len(), |e| at + e);
            out.push(line[at..end].split("::").filter(|s| !s.is_empty()).map(str::to_string).collect());
        }
    }
    out
}

/// The longest known module a path names, seen from module `cur`.
fn resolve(cur: &[String], path: &[String], modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let (mut base, mut rest) = match path.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &path[1..]),
        Some("self") => (cur.to_vec(), &path[1..]),
        Some("super") => (cur.to_vec(), path),
        _ => return None,
    };
    while rest.first().map(String::as_str) == Some("super") {
        base.pop();
        rest = &rest[1..];
    }
    let mut best = None;
    for i in 0..=rest.len() {
        let mut m = base.clone();
        m.extend_from_slice(&rest[..i]);
        if modules.contains(&m) {
            best = Some(m);
        }
    }
    best
}

/// Module → the modules it uses (neither its ancestors nor its descendants).
fn graph(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let mut g = BTreeMap::new();
    for f in &files {
        let cur = module_of(src, f);
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("reading {}: {e}", f.display()));
        let mut uses = BTreeSet::new();
        for line in text.lines() {
            let code = line.trim_start();
            if code.starts_with("#[cfg(test)]") {
                break; // unit tests sit at the end of a file
            }
            if code.starts_with("//") {
                continue;
            }
            for p in paths_in(code) {
                if let Some(m) = resolve(&cur, &p, &modules) {
                    if !m.starts_with(&cur) && !cur.starts_with(&m) {
                        uses.insert(m);
                    }
                }
            }
        }
        g.insert(cur, uses);
    }
    g
}

/// A cycle of the graph, if any (depth-first search with colours).
fn find_cycle(g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<Vec<String>>> {
    fn visit(
        v: &Vec<String>,
        g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        done: &mut BTreeSet<Vec<String>>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        if let Some(i) = stack.iter().position(|s| s == v) {
            return Some(stack[i..].to_vec());
        }
        if done.contains(v) {
            return None;
        }
        stack.push(v.clone());
        for w in g.get(v).into_iter().flatten() {
            if let Some(c) = visit(w, g, done, stack) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(v.clone());
        None
    }
    let mut done = BTreeSet::new();
    g.keys().find_map(|v| visit(v, g, &mut done, &mut Vec::new()))
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&src);
    assert!(g.len() > 10, "the walk found only {} modules under {}", g.len(), src.display());
    if let Some(cycle) = find_cycle(&g) {
        let names: Vec<String> = cycle.iter().map(|m| name(m)).collect();
        panic!("modules import each other in a circle: {} -> {}", names.join(" -> "), names[0]);
    }
}

/// The walk itself finds a cycle where there is one (a check that cannot fail is none).
#[test]
fn the_walk_finds_a_planted_cycle() {
    let dir = std::env::temp_dir().join(format!("dpor-module-graph-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("owner")).expect("temp dir");
    let write = |p: &str, s: &str| std::fs::write(dir.join(p), s).expect("write");
    write("lib.rs", "pub mod owner;\npub mod state;\n");
    write("owner/mod.rs", "pub mod flows;\npub mod levels;\n");
    write("owner/flows.rs", "use crate::state::State;\n");
    write("owner/levels.rs", "// crate::state in a comment does not count\nuse super::flows;\n");
    write(
        "state.rs",
        "pub struct State { pub l: Option<crate::owner::levels::Levels> }\n#[cfg(test)]\nmod tests { use crate::owner::flows; }\n",
    );
    let g = graph(&dir);
    let cycle = find_cycle(&g).map(|c| c.iter().map(|m| name(m)).collect::<Vec<_>>());
    // state -> owner::levels -> owner::flows -> state
    let mut found = cycle.expect("the planted cycle is found");
    found.sort();
    assert_eq!(found, vec!["owner::flows", "owner::levels", "state"]);
    // Without the field, no cycle (the test module's and the comment's paths do not count).
    write("state.rs", "pub struct State;\n#[cfg(test)]\nmod tests { use crate::owner::flows; }\n");
    assert_eq!(find_cycle(&graph(&dir)), None);
    let _ = std::fs::remove_dir_all(&dir);
}
