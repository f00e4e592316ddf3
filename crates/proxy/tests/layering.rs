//! The proxy crate's import graph has no loops (issue 15, `../shared/docs/layering.md`): between
//! its top-level modules (`crate::x` named in `x`'s code, doc comments and tests left out), and
//! between the files of each module directory (`super::y` named in `y`'s sibling). A loop would
//! mean a part that cannot be read, tested or benchmarked without the parts that use it.
//!
//! `cargo test -p autoprep --test layering -- --nocapture` prints both graphs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// A file's code without its comments and its `#[cfg(test)]` module.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read a source file");
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The identifiers following each occurrence of `prefix` (`crate::`, `super::`), including
/// those of a braced list (`super::{a, b::C}` names `a` and `b`).
fn named_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, _) in code.match_indices(prefix) {
        // `a::crate::` is not a path from the crate root.
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[i + prefix.len()..];
        if let Some(list) = rest.strip_prefix('{') {
            let list = &list[..list.find('}').unwrap_or(list.len())];
            for item in list.split(',') {
                let head: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.insert(head);
            }
        } else {
            let head: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            names.insert(head);
        }
    }
    names
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read a source directory") {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// A loop of `g`, if it has one (depth-first search).
fn find_loop(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        n: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut cycle = path[i..].to_vec();
            cycle.push(n.to_owned());
            return Some(cycle);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_owned());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(g, m, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|n| visit(g, n, &mut Vec::new(), &mut done))
}

fn print(title: &str, g: &Graph) {
    println!("{title}");
    for (n, to) in g {
        println!(
            "  {n} -> {}",
            to.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn top_level_modules_have_no_import_loop() {
    let src = src();
    let mut g = Graph::new();
    let mut files: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for p in rust_files(&src) {
        let rel = p.strip_prefix(&src).expect("under src");
        let first = rel.components().next().expect("a component");
        let name = first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if name == "main" || name == "lib" {
            continue;
        }
        files.entry(name).or_default().push(p);
    }
    for (m, paths) in &files {
        let mut to = BTreeSet::new();
        for p in paths {
            for n in named_after(&code_of(p), "crate::") {
                if n != *m && files.contains_key(&n) {
                    to.insert(n);
                }
            }
        }
        g.insert(m.clone(), to);
    }
    print("crates/proxy/src:", &g);
    assert!(g.len() > 20, "the modules were found");
    if let Some(cycle) = find_loop(&g) {
        panic!("import loop: {}", cycle.join(" -> "));
    }
}

#[test]
fn module_directories_have_no_import_loop() {
    let src = src();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&src)
        .expect("read src")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.iter().any(|d| d.ends_with("session")));
    for dir in dirs {
        let files: BTreeMap<String, PathBuf> = std::fs::read_dir(&dir)
            .expect("read a module directory")
            .map(|e| e.expect("an entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), p))
            .collect();
        let mut g = Graph::new();
        for (m, p) in &files {
            let code = code_of(p);
            let mut to = BTreeSet::new();
            if m == "mod" {
                // The parent uses a child through `child::…` (declaring it is not a use).
                for child in files.keys().filter(|c| *c != "mod") {
                    let path = format!("{child}::");
                    let used = code.match_indices(&path).any(|(i, _)| {
                        !code[..i]
                            .chars()
                            .next_back()
                            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
                            || code[..i].ends_with("self::")
                    });
                    if used {
                        to.insert(child.clone());
                    }
                }
            } else {
                for n in named_after(&code, "super::") {
                    if files.contains_key(&n) && n != *m {
                        to.insert(n);
                    } else if n != "super" && !n.is_empty() {
                        // An item of the parent's own.
                        to.insert("mod".to_owned());
                    }
                }
            }
            g.insert(m.clone(), to);
        }
        print(&format!("{}:", dir.display()), &g);
        if let Some(cycle) = find_loop(&g) {
            panic!("import loop in {}: {}", dir.display(), cycle.join(" -> "));
        }
    }
}
