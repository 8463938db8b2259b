//! `mdf ops`: the operator list, one operator's params (`mdf ops NAME`), and the
//! Markdown reference that docs/OPERATORS.md must equal.
mod common;
use common::*;

#[test]
fn ops_name_shows_every_param_with_type_default_and_meaning() {
    let o = run_ok(mdf().args(["ops", "gopher_quality"]));
    let s = stdout(&o);
    assert!(s.starts_with("gopher_quality: "), "{s}");
    for line in [
        "  field (string, default \"text\")",
        "  min_doc_words (integer or off, default 50)",
        "  max_symbol_word_ratio (number or off, at least 0.0, default 0.1)",
        "  max_bullet_lines_ratio (number or off, 0.0 to 1.0, default 0.9)",
        "  stop_words (list of strings, default [\"the\", \"be\", \"to\", \"of\", \"and\", \"that\", \"have\", \"with\"])",
    ] {
        assert!(s.contains(line), "{line:?} missing from:\n{s}");
    }
    assert!(s.contains("Fewer words: `gopher_short_doc`."), "{s}");
    let s = stdout(&run_ok(mdf().args(["ops", "throttle"])));
    assert!(s.contains("  records_per_sec (number, required)"), "{s}");
    let s = stdout(&run_ok(mdf().args(["ops", "minhash"])));
    assert!(s.contains("  n_gram (integer, 1 to 64, default 5)"), "{s}");
    // Operators of features this build may lack are documented all the same.
    let s = stdout(&run_ok(mdf().args(["ops", "clip_embed"])));
    assert!(s.contains("needs mdf built with `--features onnx`"), "{s}");
    assert!(s.contains("  model (string, required)"), "{s}");
}

#[test]
fn ops_lists_every_operator_and_refuses_an_unknown_name() {
    let s = stdout(&run_ok(mdf().arg("ops")));
    for name in mdf::ops::REGISTRY.iter().map(|d| d.name) {
        assert!(s.lines().any(|l| l.starts_with(name)), "{name}: {s}");
    }
    let o = mdf().args(["ops", "no_such_op"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown operator \"no_such_op\""));
}

#[test]
fn ops_markdown_is_the_checked_in_reference() {
    let s = stdout(&run_ok(mdf().args(["ops", "--markdown"])));
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/OPERATORS.md")).unwrap();
    assert!(
        s == docs,
        "docs/OPERATORS.md is stale: run `mdf ops --markdown > docs/OPERATORS.md`"
    );
}

#[test]
fn ops_lists_presets_and_prints_one_as_stages() {
    let s = stdout(&run_ok(mdf().arg("ops")));
    for p in mdf::ops::presets::PRESETS {
        assert!(s.lines().any(|l| l.starts_with(p.name)), "{}: {s}", p.name);
    }
    let s = stdout(&run_ok(mdf().args(["ops", "open_nsfw"])));
    assert!(s.contains("  - op: nsfw_score"), "{s}");
    assert!(s.contains("model files:"), "{s}");
    let o = mdf().args(["ops", "no_such_op"]).output().unwrap();
    assert!(stderr(&o).contains("(or a preset: "), "{}", stderr(&o));
}
