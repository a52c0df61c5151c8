//! The check that the crate's layers point one way (`lib.rs` lists them): it reads every
//! source file of the crate (test code left out), resolves each `crate::` and `super::` path
//! to the top-level module it names, and fails on any path into a module of a higher layer,
//! except the sanctioned back-edge ([`SANCTIONED`]). A new top-level module must be given a
//! layer here, or the check fails.
use std::{collections::BTreeMap, path::Path};

/// The top-level modules, lowest layer first: each may use only those before it.
const LAYERS: &[&str] = &[
    "cmp",
    "error",
    "element",
    "op",
    "ffi",
    "kernels",
    "runtime",
    "memory",
    "channel",
    "team",
    "collective",
    "rma",
    "timing",
    "graph",
    "device",
    "testing",
];

/// The one sanctioned back-edge: an owner holds the state that the layers above keep for as
/// long as it lives. The runtime (`Runtime`'s start, guard and finalisation) owns the job's
/// symmetric heap, team registry, forced algorithms and retired device modules, and hands the
/// health its reading of call fingerprints; a team owns its collective plans. Each entry is
/// (the module that uses, the path it may name, from the crate's root).
const SANCTIONED: &[(&str, &str)] = &[
    ("runtime", "memory::Heap"),
    ("runtime", "team::Teams"),
    ("runtime", "collective::Collective"),
    ("runtime", "collective::algo::ForcedAlgorithms"),
    ("runtime", "collective::algo::fingerprint::describe"),
    ("runtime", "device::release_retired"),
    ("runtime", "device::retired_settled"),
    ("team", "collective::algo::Plans"),
];

/// `src` without comments, string and character literals (so that a path in a doc comment or
/// a message is not taken for an import), and without the items marked `#[cfg(test)]`; the
/// names of the modules so marked (`#[cfg(test)] mod props;`) go into `test_mods`.
fn code_of(src: &str, test_mods: &mut Vec<String>) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &src[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            let mut depth = 0;
            while i < b.len() {
                if src[i..].starts_with("/*") {
                    depth += 1;
                    i += 2;
                } else if src[i..].starts_with("*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some(end) = raw_string_end(src, i) {
            out.push_str("\"\"");
            i = end;
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i += 1;
        } else if b[i] == b'\'' && char_literal_len(rest).is_some() {
            out.push_str("' '");
            i += char_literal_len(rest).unwrap_or(1);
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    strip_test_items(&out, test_mods)
}

/// Where a raw string literal starting at `i` ends, if one starts there.
fn raw_string_end(src: &str, i: usize) -> Option<usize> {
    let prev = src[..i].chars().next_back();
    if prev.is_some_and(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let rest = src[i..].strip_prefix('b').unwrap_or(&src[i..]);
    let after_r = rest.strip_prefix('r')?;
    let hashes = after_r.len() - after_r.trim_start_matches('#').len();
    let body = after_r[hashes..].strip_prefix('"')?;
    let close = format!("\"{}", "#".repeat(hashes));
    let end = body.find(&close)? + close.len();
    Some(src.len() - body.len() + end)
}

/// The length of a character literal at the start of `s` (not a lifetime).
fn char_literal_len(s: &str) -> Option<usize> {
    let inner = s.strip_prefix('\'')?;
    let len = if inner.starts_with('\\') {
        inner.find('\'')?
    } else {
        inner.chars().next()?.len_utf8()
    };
    (inner[len..].starts_with('\'')).then_some(len + 2)
}

/// `code` without the items that follow `#[cfg(test)]` (with their other attributes).
fn strip_test_items(code: &str, test_mods: &mut Vec<String>) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let mut item = rest[at + MARK.len()..].trim_start();
        while item.starts_with("#[") {
            item = item[item.find(']').map_or(item.len(), |e| e + 1)..].trim_start();
        }
        let words: Vec<&str> = item.split_whitespace().take(3).collect();
        let is_use = words.iter().take(2).any(|w| *w == "use");
        if let Some(pos) = words.iter().position(|w| *w == "mod") {
            if let Some(name) = words.get(pos + 1).and_then(|n| n.strip_suffix(';')) {
                test_mods.push(name.to_string());
            }
        }
        let end = if is_use {
            item.find(';').map_or(item.len(), |e| e + 1)
        } else {
            match (item.find(';'), item.find('{')) {
                (Some(semi), Some(brace)) if semi < brace => semi + 1,
                (_, Some(brace)) => {
                    crate::kernels::closing_brace(item, brace).map_or(item.len(), |c| c + 1)
                }
                (Some(semi), None) => semi + 1,
                (None, None) => item.len(),
            }
        };
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The paths of a `use` tree (`a::{b, c::{d as e}}` gives `a::b` and `a::c::d`).
fn expand_use(tree: &str, prefix: &str, out: &mut Vec<String>) {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).replace(' ', "");
        out.push(format!("{prefix}{path}"));
        return;
    };
    let head = format!("{prefix}{}", tree[..open].replace(' ', ""));
    let body = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut depth, mut start) = (0, 0);
    for (k, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                if !body[start..k].trim().is_empty() {
                    expand_use(&body[start..k], &head, out);
                }
                start = k + 1;
            }
            _ => {}
        }
    }
    if !body[start..].trim().is_empty() {
        expand_use(&body[start..], &head, out);
    }
}

/// Every path that `code` names from the crate's root or a parent: its `use` trees, and the
/// `crate::` and `super::` paths written inline (not `$crate::` in macros).
fn paths_in(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let tail = &rest[at + 3..];
        let end = tail.find(';').unwrap_or(tail.len());
        expand_use(&tail[..end], "", &mut paths);
        rest = &tail[end..];
    }
    for root in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(root).map(|a| a + from) {
            from = at + root.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
                continue;
            }
            let len = code[at..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(code.len() - at);
            let path = code[at..at + len].trim_end_matches(':');
            if path.len() > root.len() - 2 {
                paths.push(path.to_string());
            }
        }
    }
    paths
}

/// Where `word` stands alone in `s` (not inside another name).
fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = s[from..].find(word).map(|a| a + from) {
        let before = s[..at].chars().next_back();
        let after = s[at + word.len()..].chars().next();
        let name = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !name(before) && !name(after) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// A source file: its module path and its code.
struct File {
    rel: String,
    module: Vec<String>,
    code: String,
}

fn read_sources(dir: &Path, root: &Path, files: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("the crate's sources are readable")
        .map(|e| e.expect("a readable directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            read_sources(&path, root, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(root)
                .expect("under src")
                .to_string_lossy();
            let text = std::fs::read_to_string(&path).expect("a readable source file");
            files.push((rel.replace('\\', "/"), text));
        }
    }
}

/// Every upward import in `sources` (path under `src`, text), as `file: path (module ->
/// module)`.
fn upward_imports(sources: &[(String, String)]) -> Vec<String> {
    let mut test_mods = Vec::new();
    let files: Vec<File> = sources
        .iter()
        .map(|(rel, text)| {
            let mut module: Vec<String> = rel
                .trim_end_matches(".rs")
                .split('/')
                .map(str::to_string)
                .collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            File {
                rel: rel.clone(),
                module,
                code: code_of(text, &mut test_mods),
            }
        })
        .collect();
    // A file is test code when its module is declared under `#[cfg(test)]`.
    let is_test = |f: &File| {
        f.module
            .last()
            .is_some_and(|m| test_mods.iter().any(|t| t == m))
    };
    // The root's re-exports (`pub use runtime::{Runtime, ..}`) and exported macros, by name.
    let lib = files.iter().find(|f| f.rel == "lib.rs").expect("lib.rs");
    let mut home: BTreeMap<String, String> = BTreeMap::new();
    for path in paths_in(&lib.code) {
        let parts: Vec<&str> = path.split("::").collect();
        if parts.len() >= 2 && LAYERS.contains(&parts[0]) {
            home.entry(parts[parts.len() - 1].to_string())
                .or_insert_with(|| parts[..parts.len() - 1].join("::"));
        }
    }
    for f in &files {
        let mut rest = f.code.as_str();
        while let Some(at) = rest.find("macro_rules!") {
            let name = rest[at + 12..].split_whitespace().next().unwrap_or("");
            home.insert(name.to_string(), f.module.join("::"));
            rest = &rest[at + 12..];
        }
    }
    let layer = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut found = Vec::new();
    for f in files.iter().filter(|f| f.rel != "lib.rs" && !is_test(f)) {
        let me = f.module[0].as_str();
        let Some(mine) = layer(me) else {
            found.push(format!("{}: module {me} has no layer in layers.rs", f.rel));
            continue;
        };
        for path in paths_in(&f.code) {
            let mut parts: Vec<&str> = path.split("::").collect();
            let mut base: Vec<&str> = f.module.iter().map(String::as_str).collect();
            match parts[0] {
                "crate" => base.clear(),
                "super" => {
                    while parts.first() == Some(&"super") {
                        base.pop();
                        parts.remove(0);
                    }
                    parts.insert(0, "");
                }
                "self" => {}
                _ => continue,
            }
            base.extend(parts[1..].iter().filter(|p| !p.is_empty()));
            let Some(&first) = base.first() else { continue };
            let resolved = match home.get(first) {
                Some(h) if layer(first).is_none() => format!("{h}::{}", base.join("::")),
                _ => base.join("::"),
            };
            let top = resolved.split("::").next().unwrap_or("");
            if matches!(top, "sys" | "half" | "cudarc" | "self" | "*" | "") {
                continue;
            }
            let Some(theirs) = layer(top) else {
                found.push(format!("{}: {path}: cannot place {resolved}", f.rel));
                continue;
            };
            let sanctioned = SANCTIONED
                .iter()
                .any(|(from, to)| *from == me && resolved.starts_with(to));
            if theirs > mine && !sanctioned {
                found.push(format!("{}: {path} ({me} -> {top})", f.rel));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn no_module_imports_from_a_layer_above_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = Vec::new();
    read_sources(&root, &root, &mut sources);
    assert!(sources.len() > 50, "the crate's sources were not found");
    let found = upward_imports(&sources);
    assert!(
        found.is_empty(),
        "imports from a layer above (lib.rs and layers.rs list the layers):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_reads_paths_as_the_compiler_does() {
    let mut tm = Vec::new();
    let code = code_of(
        "use crate::{a::{B, c::D as E}, F}; // crate::x\nlet s = \"crate::y\";\n\
         #[cfg(test)]\nmod props;\n#[cfg(test)]\nmod tests { use crate::z; }\n\
         fn f<'a>(c: char) { if c == '{' { super::g(); } }",
        &mut tm,
    );
    assert_eq!(tm, ["props"]);
    assert_eq!(
        paths_in(&code),
        ["crate::a::B", "crate::a::c::D", "crate::F", "super::g"]
    );
}

#[test]
fn upward_imports_are_found_and_only_the_sanctioned_pass() {
    let src = |rel: &str, text: &str| (rel.to_string(), text.to_string());
    let sources = [
        src(
            "lib.rs",
            "pub mod team;\npub use team::Team;\npub use memory::SymArray;",
        ),
        src("memory/mod.rs", "use crate::{runtime::Runtime, Team};"),
        src(
            "memory/alloc.rs",
            "fn f() { super::super::collective::run(); }",
        ),
        src(
            "runtime/mod.rs",
            "use crate::{memory::Heap, memory::SymArray};",
        ),
        src(
            "team/mod.rs",
            "use crate::collective::algo::Plans; // collective::x",
        ),
        src("newmod.rs", "use crate::error::Error;"),
    ];
    assert_eq!(
        upward_imports(&sources),
        [
            "memory/alloc.rs: super::super::collective::run (memory -> collective)",
            "memory/mod.rs: crate::Team (memory -> team)",
            "newmod.rs: module newmod has no layer in layers.rs",
            "runtime/mod.rs: crate::memory::SymArray (runtime -> memory)",
        ]
    );
}
