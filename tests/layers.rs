//! The layer map of docs/ARCHITECTURE.md, enforced: every `crate::X` path in a module
//! of `src/` names a module its layer may import. A lower layer that reaches up (the
//! protocol importing an operator's params, the worker importing the coordinator)
//! fails here with the file and line.
use std::collections::BTreeMap;
use std::path::Path;

/// Each top-level module and what it may import besides itself (space-separated;
/// `store::fault` allows that submodule only). Mirrors the table in
/// docs/ARCHITECTURE.md; a change to one is a change to both.
const RULES: &[(&str, &str)] = &[
    // Layer 0: pure code.
    ("kernels", ""),
    ("clock", ""),
    ("panic", ""),
    // Layer 1: object stores.
    ("store", "clock panic"),
    // Layer 2: the user's spec and the record schema.
    ("spec", "store kernels"),
    ("records", "spec"),
    // Layer 3: the persisted format and the lease protocol.
    ("protocol", "store spec records clock panic"),
    // Layer 4: operators (pure: no store but the test fault rules) and I/O formats.
    ("ops", "kernels spec records store::fault"),
    ("io", "kernels store spec records protocol clock panic"),
    // Layer 5: the dedup subsystem.
    (
        "dedup",
        "ops io protocol store spec records kernels clock panic",
    ),
    // Layer 6: the two processes' logic; neither imports the other.
    (
        "worker",
        "dedup ops io protocol store spec records kernels clock panic",
    ),
    (
        "coordinator",
        "dedup ops io protocol store spec records kernels clock panic",
    ),
    // Layer 7: launching workers, benchmarks, the report.
    (
        "launch",
        "coordinator worker dedup ops io protocol store spec records kernels clock panic",
    ),
    (
        "bench",
        "launch coordinator worker dedup ops io protocol store spec records kernels clock panic",
    ),
    (
        "report",
        "coordinator protocol store spec records kernels clock panic",
    ),
    // Layer 8: the command line may use everything.
    ("cli", "*"),
];

/// The module path of a file under `src/`: `dedup/plan.rs` → `[dedup, plan]`,
/// `dedup/mod.rs` → `[dedup]`, `records.rs` → `[records]`; `None` for the crate root.
fn module_path(rel: &Path) -> Option<Vec<String>> {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs").unwrap_or(&last).to_string();
    if stem != "mod" {
        parts.push(stem);
    }
    let root = parts.is_empty() || (parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main"));
    (!root).then_some(parts)
}

/// The code of a file with comments, string and character literals blanked out
/// (newlines kept, so line numbers hold) and whitespace around `::` removed.
fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (c.get(i + 1) == Some(&'"') || c.get(i + 1) == Some(&'#'))
            && !(i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
        {
            // Raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &c[i..j.min(c.len())] {
                out.push(blank(ch));
            }
            i = j;
        } else if c[i] == '"' {
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < c.len() {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c[i] == '\'' && (c.get(i + 2) == Some(&'\'') || (c.get(i + 1) == Some(&'\\'))) {
            // A character literal ('x', '\n', '\u{..}'); a lifetime has no closing quote.
            let mut j = i + 1;
            if c.get(j) == Some(&'\\') {
                j += 1;
            }
            while j < c.len() && c[j] != '\'' {
                j += 1;
            }
            for &ch in &c[i..(j + 1).min(c.len())] {
                out.push(blank(ch));
            }
            i = j + 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    // `crate ::x`, `crate::\n x`: one path.
    let mut tight = String::with_capacity(out.len());
    let mut pending_newlines = 0;
    let b: Vec<char> = out.chars().collect();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_whitespace() {
            let start = i;
            while i < b.len() && b[i].is_whitespace() {
                i += 1;
            }
            let before_colons = b.get(i) == Some(&':') && b.get(i + 1) == Some(&':');
            let after_colons = start >= 2 && b[start - 1] == ':' && b[start - 2] == ':';
            let newlines = b[start..i].iter().filter(|&&ch| ch == '\n').count();
            if before_colons || after_colons {
                pending_newlines += newlines;
            } else {
                tight.extend(b[start..i].iter());
                for _ in 0..pending_newlines {
                    tight.push('\n');
                }
                pending_newlines = 0;
            }
        } else {
            tight.push(b[i]);
            i += 1;
        }
    }
    tight
}

/// Every module path the code names, resolved to the top-level module it reaches:
/// `crate::a::b` and `$crate::a::b` paths, the top-level names of `crate::{a, b}`
/// groups, and `super::` chains that climb out of the file's own module. `*` stands
/// for a glob of the crate root and `#[path]` for a module loaded from elsewhere;
/// both are refused.
fn crate_paths(text: &str, module: &[String]) -> Vec<(usize, String)> {
    let code = code_only(text);
    let line_at = |pos: usize| code[..pos].matches('\n').count() + 1;
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    // `#[path = "..."]` may name a file inside the module's folder, never one above it.
    for (n, l) in text.lines().enumerate() {
        if let Some(i) = l.find("#[path")
            && (l[i..].contains("..") || l[i..].contains("\"/"))
        {
            out.push((n + 1, "#[path]".to_string()));
        }
    }
    // Inline modules (`mod tests { ... }`) deepen the module a `super::` starts from.
    let mut mod_depth = vec![0usize; code.len() + 1];
    {
        let b = code.as_bytes();
        let mut stack: Vec<bool> = Vec::new();
        let mut next_is_mod = false;
        let mut open = 0usize;
        let mut i = 0;
        while i < b.len() {
            if code[i..].starts_with("mod ")
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            {
                let rest = &code[i + 4..];
                let name_len = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                if rest[name_len..].trim_start().starts_with('{') {
                    next_is_mod = true;
                }
            }
            match b[i] {
                b'{' => {
                    stack.push(next_is_mod);
                    if next_is_mod {
                        open += 1;
                    }
                    next_is_mod = false;
                }
                b'}' if stack.pop() == Some(true) => open -= 1,
                _ => {}
            }
            mod_depth[i] = open;
            i += 1;
        }
    }
    let mut at = 0;
    while let Some(i) = code[at..].find("crate::") {
        let start = at + i;
        at = start + "crate::".len();
        let before = code[..start].chars().last();
        if before.is_some_and(|c| ident(c) || c == ':') {
            continue; // `mycrate::`, `a::crate::` (not a path start)
        }
        let rest = &code[at..];
        if let Some(group) = rest.strip_prefix('{') {
            // The top-level names of the group: depth-1 items up to the closing brace.
            let (mut depth, mut item, mut names) = (1, String::new(), Vec::new());
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 1 => break,
                    '}' => depth -= 1,
                    ',' if depth == 1 => names.push(std::mem::take(&mut item)),
                    _ if depth == 1 => item.push(c),
                    _ => {}
                }
            }
            names.push(item);
            for n in names {
                let n = n.trim();
                let m: String = n.chars().take_while(|c| ident(*c)).collect();
                if n.starts_with('*') {
                    out.push((line_at(start), "*".into()));
                } else if !m.is_empty() && m != "self" {
                    out.push((line_at(start), n.to_string()));
                }
            }
            continue;
        }
        if rest.starts_with('*') {
            out.push((line_at(start), "*".into()));
            continue;
        }
        let path: String = rest
            .chars()
            .take_while(|c| ident(*c) || *c == ':')
            .collect();
        let path = path.trim_end_matches(':').to_string();
        if !path.is_empty() {
            out.push((line_at(start), path));
        }
    }
    // `super::super::x`: climbing out of the top-level module reaches crate::x.
    let mut at = 0;
    while let Some(i) = code[at..].find("super::") {
        let start = at + i;
        at = start + "super::".len();
        if code[..start]
            .chars()
            .last()
            .is_some_and(|c| ident(c) || c == ':')
        {
            continue; // the middle of a chain, counted from its start
        }
        let mut ups = 1;
        let mut rest = &code[at..];
        while let Some(r) = rest.strip_prefix("super::") {
            ups += 1;
            rest = r;
        }
        if ups >= module.len() + mod_depth[start] {
            let path: String = rest
                .chars()
                .take_while(|c| ident(*c) || *c == ':')
                .collect();
            let path = path.trim_end_matches(':').to_string();
            if rest.starts_with('{') || rest.starts_with('*') {
                out.push((line_at(start), "*".into()));
            } else if !path.is_empty() {
                out.push((line_at(start), path));
            }
        }
    }
    out
}

fn allowed(rules: &BTreeMap<&str, &str>, module: &str, path: &str) -> bool {
    let target = path.split("::").next().unwrap_or("");
    if path == "*" || path == "#[path]" {
        return rules.get(module) == Some(&"*");
    }
    if target.is_empty() || target == module {
        return true;
    }
    let Some(allow) = rules.get(module) else {
        return false;
    };
    allow.split_whitespace().any(|a| {
        a == "*"
            || a == target
            || (a.contains("::") && (path == a || path.starts_with(&format!("{a}::"))))
    })
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn lower_layers_never_import_higher_ones() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let rules: BTreeMap<&str, &str> = RULES.iter().copied().collect();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut bad = Vec::new();
    let mut unknown = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let Some(module) = module_path(rel) else {
            continue;
        };
        let top = module[0].clone();
        if !rules.contains_key(top.as_str()) {
            unknown.push(rel.display().to_string());
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (line, path) in crate_paths(&text, &module) {
            if !allowed(&rules, &top, &path) {
                bad.push(format!(
                    "src/{}:{line}: {top} imports crate::{path}",
                    rel.display()
                ));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "modules missing from the layer map (tests/layers.rs and docs/ARCHITECTURE.md): {unknown:?}"
    );
    assert!(
        bad.is_empty(),
        "imports that run up the layers:\n{}",
        bad.join("\n")
    );
    // Every module the map names exists (a renamed module must not leave a stale rule).
    for (m, _) in RULES {
        assert!(
            src.join(format!("{m}.rs")).exists() || src.join(m).is_dir(),
            "the layer map names {m}, which is not a module of src/"
        );
    }
}

#[test]
fn the_checker_catches_an_upward_import() {
    let rules: BTreeMap<&str, &str> = RULES.iter().copied().collect();
    let m = |s: &str| s.split('/').map(String::from).collect::<Vec<_>>();
    let paths = |text: &str, module: &[String]| -> Vec<String> {
        crate_paths(text, module)
            .into_iter()
            .map(|(_, p)| p)
            .collect()
    };
    let found = crate_paths(
        "use crate::worker::task;\nlet x = crate::ops::dedup::P; // crate::cli\nuse crate::{\n    store::{a, b},\n    coordinator,\n};\nlet y = $crate::z; mycrate::w;",
        &m("protocol"),
    );
    let got: Vec<&str> = found.iter().map(|(_, p)| p.as_str()).collect();
    assert_eq!(
        got,
        [
            "worker::task",
            "ops::dedup::P",
            "store::",
            "coordinator",
            "z"
        ]
    );
    assert_eq!(found[3].0, 3, "the line of the group");
    // Forms that used to slip through.
    assert_eq!(
        paths("use crate ::worker::X;", &m("protocol")),
        ["worker::X"]
    );
    assert_eq!(
        paths("use crate::\n    worker::X;", &m("protocol")),
        ["worker::X"]
    );
    assert_eq!(paths("use crate::*;", &m("protocol")), ["*"]);
    assert_eq!(
        paths("#[path = \"../worker/task.rs\"]\nmod t;", &m("protocol")),
        ["#[path]"]
    );
    assert_eq!(
        paths(
            "let u = \"s3://b/x\"; use crate::worker::Y;",
            &m("protocol")
        ),
        ["worker::Y"]
    );
    assert!(
        paths(
            "let s = \"crate::worker::Z\"; /* crate::cli */",
            &m("protocol")
        )
        .is_empty()
    );
    // `super::` chains: within the module they are fine, past its top they are crate paths.
    assert!(paths("use super::super::plan;", &m("dedup/near/inner")).is_empty());
    assert_eq!(
        paths("use super::super::worker::X;", &m("dedup/plan")),
        ["worker::X"]
    );
    assert_eq!(paths("use super::worker::X;", &m("store")), ["worker::X"]);
    assert!(!allowed(&rules, "protocol", "ops::dedup::DedupParams"));
    assert!(!allowed(&rules, "worker", "coordinator::load_job"));
    assert!(!allowed(&rules, "coordinator", "worker::readers"));
    assert!(!allowed(&rules, "ops", "store::s3"));
    assert!(!allowed(&rules, "protocol", "*"));
    assert!(!allowed(&rules, "dedup", "#[path]"));
    assert!(allowed(&rules, "ops", "store::fault::panic_rules"));
    assert!(allowed(&rules, "worker", "protocol::job::load_job"));
    assert!(allowed(&rules, "cli", "launch"));
    assert!(!allowed(&rules, "kernels", "spec"));
}
