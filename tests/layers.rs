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

fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (name != "lib" && name != "main").then_some(name)
}

/// `crate::a::b` paths in `text`, with their line numbers; comments are skipped and
/// `use crate::{a, b::{c, d}}` groups (over several lines too) name each module.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    // Code without line comments, and the line each byte is on.
    let mut code = String::new();
    let mut line_of = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let c = line.split("//").next().unwrap_or("");
        code.push_str(c);
        code.push('\n');
        line_of.extend(std::iter::repeat_n(n + 1, c.len() + 1));
    }
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = code[at..].find("crate::") {
        let start = at + i;
        at = start + "crate::".len();
        if code[..start]
            .chars()
            .last()
            .is_some_and(|c| ident(c) || c == '$')
        {
            continue; // `mycrate::`, `$crate::`
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
                let m: String = n.trim().chars().take_while(|c| ident(*c)).collect();
                if !m.is_empty() {
                    out.push((line_of[start], m));
                }
            }
            continue;
        }
        let path: String = rest
            .chars()
            .take_while(|c| ident(*c) || *c == ':')
            .collect();
        let path = path.trim_end_matches(':').to_string();
        if !path.is_empty() {
            out.push((line_of[start], path));
        }
    }
    out
}

fn allowed(rules: &BTreeMap<&str, &str>, module: &str, path: &str) -> bool {
    let target = path.split("::").next().unwrap_or("");
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
        let Some(module) = module_of(rel) else {
            continue;
        };
        if !rules.contains_key(module.as_str()) {
            unknown.push(rel.display().to_string());
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (line, path) in crate_paths(&text) {
            if !allowed(&rules, &module, &path) {
                bad.push(format!(
                    "src/{}:{line}: {module} imports crate::{path}",
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
}

#[test]
fn the_checker_catches_an_upward_import() {
    let rules: BTreeMap<&str, &str> = RULES.iter().copied().collect();
    let found = crate_paths(
        "use crate::worker::task;\nlet x = crate::ops::dedup::P; // crate::cli\nuse crate::{\n    store::{a, b},\n    coordinator,\n};\nlet y = $crate::z; mycrate::w;",
    );
    let paths: Vec<&str> = found.iter().map(|(_, p)| p.as_str()).collect();
    assert_eq!(
        paths,
        ["worker::task", "ops::dedup::P", "store", "coordinator"]
    );
    assert_eq!(found[3].0, 3, "the line of the group");
    assert!(!allowed(&rules, "protocol", "ops::dedup::DedupParams"));
    assert!(!allowed(&rules, "worker", "coordinator::load_job"));
    assert!(!allowed(&rules, "coordinator", "worker::readers"));
    assert!(!allowed(&rules, "ops", "store::s3"));
    assert!(allowed(&rules, "ops", "store::fault::panic_rules"));
    assert!(allowed(&rules, "worker", "protocol::job::load_job"));
    assert!(allowed(&rules, "cli", "launch"));
    assert!(!allowed(&rules, "kernels", "spec"));
}
