//! Function lengths (issue 28): in the proxy crate (`crates/proxy/src`) at most two functions
//! of 120 lines or more and none of 200 or more; in the benchmarks (`benches/`) none of 200 or
//! more. Test code is left out: `#[cfg(test)]` items (a `mod tests { .. }` block above all), and
//! files named `tests.rs` or under a `tests/` directory.
//!
//! A function's length runs from the line of its `fn` to the line of its closing brace, both
//! included. The scanner reads Rust's tokens only as far as brace matching needs: comments
//! (nested block comments included), string literals (byte, C and raw strings too, `r#".."#`),
//! character literals and lifetimes are skipped, so that a brace inside them does not count. A
//! function nested in another counts on its own as well as inside the outer one.
//!
//! `cargo test -p autoprep-tests --test function_length -- --nocapture`
//! prints the longest functions of both.

use std::path::{Path, PathBuf};

/// A token of the code, comments and literals left out.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// An identifier, keyword or number.
    Word(String),
    /// Any other character of code.
    Punct(char),
}

/// A token and the (1-based) line it starts on.
#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
}

/// A function with a body.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Function {
    name: String,
    /// The line of its `fn`.
    line: usize,
    /// From the `fn` line to the closing brace's, both included.
    lines: usize,
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Reads `text` into tokens.
fn tokens(text: &str) -> Vec<Token> {
    let cs: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < cs.len() {
        let c = cs[i];
        let start_line = line;
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            '/' if cs.get(i + 1) == Some(&'/') => {
                while i < cs.len() && cs[i] != '\n' {
                    i += 1;
                }
            }
            '/' if cs.get(i + 1) == Some(&'*') => i = block_comment(&cs, i, &mut line),
            '"' => i = string(&cs, i + 1, &mut line),
            '\'' => i = char_or_lifetime(&cs, i, &mut line),
            c if is_word_char(c) => {
                let s = i;
                while i < cs.len() && is_word_char(cs[i]) {
                    i += 1;
                }
                let word: String = cs[s..i].iter().collect();
                match (word.as_str(), cs.get(i)) {
                    // Byte and C strings.
                    ("b" | "c", Some('"')) => i = string(&cs, i + 1, &mut line),
                    // A byte character.
                    ("b", Some('\'')) => i = char_or_lifetime(&cs, i, &mut line),
                    // Raw strings (or a raw identifier, `r#type`).
                    ("r" | "br" | "cr", Some('"' | '#')) => match raw_string(&cs, i, &mut line) {
                        Some(end) => i = end,
                        None => {
                            let s = i + 1;
                            i = s;
                            while i < cs.len() && is_word_char(cs[i]) {
                                i += 1;
                            }
                            let word = cs[s..i].iter().collect();
                            out.push(Token {
                                tok: Tok::Word(word),
                                line: start_line,
                            });
                        }
                    },
                    _ => out.push(Token {
                        tok: Tok::Word(word),
                        line: start_line,
                    }),
                }
            }
            c => {
                out.push(Token {
                    tok: Tok::Punct(c),
                    line: start_line,
                });
                i += 1;
            }
        }
    }
    out
}

/// Skips a block comment starting at `i` (`/*`, nested ones included); returns the index after.
fn block_comment(cs: &[char], mut i: usize, line: &mut usize) -> usize {
    let mut depth = 0;
    while i < cs.len() {
        match (cs[i], cs.get(i + 1)) {
            ('/', Some('*')) => {
                depth += 1;
                i += 2;
            }
            ('*', Some('/')) => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            ('\n', _) => {
                *line += 1;
                i += 1;
            }
            _ => i += 1,
        }
    }
    i
}

/// Skips a string's content from `i` (after its opening quote) to its closing quote, escapes
/// included; returns the index after it.
fn string(cs: &[char], mut i: usize, line: &mut usize) -> usize {
    while i < cs.len() {
        match cs[i] {
            '\\' => {
                if cs.get(i + 1) == Some(&'\n') {
                    *line += 1;
                }
                i += 2;
            }
            '"' => return i + 1,
            '\n' => {
                *line += 1;
                i += 1;
            }
            _ => i += 1,
        }
    }
    i
}

/// At `i`, after `r`, `br` or `cr`: `#`s then `"` open a raw string, skipped to its closing
/// `"` and as many `#`s; returns the index after it, or `None` if no `"` follows the `#`s.
fn raw_string(cs: &[char], mut i: usize, line: &mut usize) -> Option<usize> {
    let mut hashes = 0;
    while cs.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    if cs.get(i) != Some(&'"') {
        return None;
    }
    i += 1;
    while i < cs.len() {
        if cs[i] == '\n' {
            *line += 1;
        }
        if cs[i] == '"' && (1..=hashes).all(|k| cs.get(i + k) == Some(&'#')) {
            return Some(i + 1 + hashes);
        }
        i += 1;
    }
    Some(i)
}

/// At a `'` (index `i`): a character literal (`'x'`, `'\n'`, `'\u{7b}'`), skipped whole, or a
/// lifetime or label (`'a`), whose name is skipped; returns the index after it.
fn char_or_lifetime(cs: &[char], i: usize, line: &mut usize) -> usize {
    match (cs.get(i + 1), cs.get(i + 2)) {
        (Some('\\'), _) => {
            let mut j = i + 3;
            while j < cs.len() && cs[j] != '\'' {
                j += 1;
            }
            j + 1
        }
        (Some(c), Some('\'')) => {
            if *c == '\n' {
                *line += 1;
            }
            i + 3
        }
        _ => {
            let mut j = i + 1;
            while j < cs.len() && is_word_char(cs[j]) {
                j += 1;
            }
            j
        }
    }
}

fn is(t: Option<&Token>, want: &Tok) -> bool {
    t.is_some_and(|t| &t.tok == want)
}

/// The index of the token that closes the bracket opened at `open` (or the last token).
fn closing(toks: &[Token], open: usize) -> usize {
    let (o, c) = match toks[open].tok {
        Tok::Punct('[') => ('[', ']'),
        Tok::Punct('(') => ('(', ')'),
        _ => ('{', '}'),
    };
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().skip(open) {
        if t.tok == Tok::Punct(o) {
            depth += 1;
        } else if t.tok == Tok::Punct(c) {
            depth -= 1;
            if depth == 0 {
                return k;
            }
        }
    }
    toks.len() - 1
}

/// From `i`, the body's `{` of an item, or `None` when a `;` at the top level comes first.
fn body_start(toks: &[Token], mut i: usize) -> Option<usize> {
    let mut depth = 0i32;
    while i < toks.len() {
        match toks[i].tok {
            Tok::Punct('(' | '[') => depth += 1,
            Tok::Punct(')' | ']') => depth -= 1,
            Tok::Punct('{') if depth == 0 => return Some(i),
            Tok::Punct(';') if depth == 0 => return None,
            _ => {}
        }
        i += 1;
    }
    None
}

/// Every function with a body in `text`, `#[cfg(test)]` items left out.
fn functions(text: &str) -> Vec<Function> {
    let toks = tokens(text);
    let mut out = Vec::new();
    let mut cfg_test = false;
    let mut i = 0;
    while i < toks.len() {
        if is(toks.get(i), &Tok::Punct('#')) && is(toks.get(i + 1), &Tok::Punct('[')) {
            let end = closing(&toks, i + 1);
            let attr: Vec<&Tok> = toks[i + 2..end].iter().map(|t| &t.tok).collect();
            let test = [
                Tok::Word("cfg".into()),
                Tok::Punct('('),
                Tok::Word("test".into()),
                Tok::Punct(')'),
            ];
            cfg_test |= attr.iter().copied().eq(test.iter());
            i = end + 1;
            continue;
        }
        if std::mem::take(&mut cfg_test) {
            // The item the attributes are on, skipped whole.
            i = match body_start(&toks, i) {
                Some(open) => closing(&toks, open) + 1,
                None => i + 1,
            };
            continue;
        }
        if let (
            Tok::Word(w),
            Some(Token {
                tok: Tok::Word(name),
                ..
            }),
        ) = (&toks[i].tok, toks.get(i + 1))
        {
            if w == "fn" {
                if let Some(open) = body_start(&toks, i + 2) {
                    let end = closing(&toks, open);
                    out.push(Function {
                        name: name.clone(),
                        line: toks[i].line,
                        lines: toks[end].line - toks[i].line + 1,
                    });
                }
            }
        }
        i += 1;
    }
    out
}

/// The `.rs` files under `dir` that are not test code (`tests.rs`, a `tests/` directory).
fn source_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        if p.is_dir() {
            if name != "tests" && name != "target" {
                out.extend(source_files(&p));
            }
        } else if p.extension().is_some_and(|x| x == "rs") && name != "tests.rs" {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Every function under `dir` of the repository, with its file (relative to the root), longest
/// first.
fn measured(dir: &str) -> Vec<(String, Function)> {
    let root = autoprep_tests::repo_root();
    let files = source_files(&root.join(dir));
    assert!(!files.is_empty(), "no Rust files under {dir}");
    let mut all: Vec<(String, Function)> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).expect("read a source file");
            let rel = f.strip_prefix(&root).unwrap_or(f).display().to_string();
            functions(&text)
                .into_iter()
                .map(move |func| (rel.clone(), func))
        })
        .collect();
    all.sort_by_key(|(_, f)| std::cmp::Reverse(f.lines));
    all
}

fn list(functions: &[&(String, Function)]) -> String {
    functions
        .iter()
        .map(|(file, f)| format!("  {file}:{} {} ({} lines)", f.line, f.name, f.lines))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Checks `dir`: at most `allowed` functions of `long` lines or more, none of `limit` or more.
fn check(dir: &str, long: usize, allowed: usize, limit: usize) {
    let all = measured(dir);
    println!(
        "{dir}: {} functions; the longest:\n{}",
        all.len(),
        list(&all.iter().take(10).collect::<Vec<_>>())
    );
    let too_long: Vec<_> = all.iter().filter(|(_, f)| f.lines >= limit).collect();
    let long_ones: Vec<_> = all.iter().filter(|(_, f)| f.lines >= long).collect();
    let mut problems = Vec::new();
    if !too_long.is_empty() {
        problems.push(format!(
            "{} functions of {limit} lines or more:\n{}",
            too_long.len(),
            list(&too_long)
        ));
    }
    if long_ones.len() > allowed {
        problems.push(format!(
            "{} functions of {long} lines or more (at most {allowed}):\n{}",
            long_ones.len(),
            list(&long_ones)
        ));
    }
    assert!(problems.is_empty(), "{dir}: {}", problems.join("\n"));
}

#[test]
fn proxy_functions_are_short() {
    check("crates/proxy/src", 120, 2, 200);
}

#[test]
fn bench_functions_are_short() {
    check("benches", 200, usize::MAX, 200);
}

/// (name, line, lines) of every function found in `text`.
fn found(text: &str) -> Vec<(String, usize, usize)> {
    functions(text)
        .into_iter()
        .map(|f| (f.name, f.line, f.lines))
        .collect()
}

fn f(name: &str, line: usize, lines: usize) -> (String, usize, usize) {
    (name.to_owned(), line, lines)
}

#[test]
fn braces_in_strings_do_not_count() {
    let text = "fn a() {\n    let s = \"}}\\\" {\";\n    let t = b\"}\";\n}\nfn b() {}\n";
    assert_eq!(found(text), vec![f("a", 1, 4), f("b", 5, 1)]);
}

#[test]
fn braces_in_comments_do_not_count() {
    let text =
        "fn a() {\n    // }\n    /* } /* nested } */ still { */\n    /// }\n}\nfn b() {\n}\n";
    assert_eq!(found(text), vec![f("a", 1, 5), f("b", 6, 2)]);
}

#[test]
fn braces_in_raw_strings_do_not_count() {
    let text = "fn a() {\n    let s = r#\"}\" }\n\"#;\n    let t = br\"}\";\n    let r#type = 1;\n}\nfn b() {}\n";
    assert_eq!(found(text), vec![f("a", 1, 6), f("b", 7, 1)]);
}

#[test]
fn braces_in_char_literals_do_not_count_and_lifetimes_are_not_chars() {
    let text = "fn a<'x>(s: &'x str) -> char {\n    let _ = ('{', b'}', '\\'', '\\u{7d}');\n    'l: loop { break 'l; }\n    '}'\n}\nfn b() {}\n";
    assert_eq!(found(text), vec![f("a", 1, 5), f("b", 6, 1)]);
}

#[test]
fn nested_functions_count_on_their_own_and_inside() {
    let text = "fn outer() {\n    fn inner() {\n        let _ = 1;\n    }\n    inner();\n}\n";
    assert_eq!(found(text), vec![f("outer", 1, 6), f("inner", 2, 3)]);
}

#[test]
fn declarations_pointer_types_and_test_modules_are_not_functions() {
    let text = "trait T {\n    fn decl(&self) -> [u8; 4];\n    fn with_body(&self) {}\n}\n\
                static P: fn(u8) -> u8 = id;\nconst S: &str = \"fn fake() {\";\n\
                #[cfg(test)]\n#[allow(dead_code)]\nmod tests {\n    fn helper() {\n    }\n}\n\
                #[cfg(test)]\nfn test_only() {}\nfn last() {\n}\n";
    assert_eq!(found(text), vec![f("with_body", 3, 1), f("last", 15, 2)]);
}

#[test]
fn test_files_and_directories_are_left_out() {
    let root = autoprep_tests::repo_root();
    let files = source_files(&root.join("crates/proxy/src"));
    let rel: Vec<&Path> = files
        .iter()
        .filter_map(|p| p.strip_prefix(&root).ok())
        .collect();
    assert!(rel.iter().any(|p| p.ends_with("session/request.rs")));
    assert!(rel.iter().any(|p| p.ends_with("topology.rs")));
    assert!(!rel
        .iter()
        .any(|p| p.ends_with("tests.rs") || p.components().any(|c| c.as_os_str() == "tests")));
}
