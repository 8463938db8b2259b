//! Bad specs are refused before anything is written, with every error at once, each
//! naming its field path.
mod common;
use common::*;
use mdf::spec::{Overrides, Spec};

fn errors(text: &str, ov: Overrides) -> Vec<String> {
    let env = |k: &str| (k == "OUT_BUCKET").then(|| "bkt".to_string());
    match Spec::from_text(text, "spec.yaml", &ov, &env, &mdf::ops::Catalog) {
        Ok(_) => vec![],
        Err(e) => e.0.iter().map(|e| e.to_string()).collect(),
    }
}

#[test]
fn unknown_keys_wrong_types_and_missing_input_all_at_once() {
    let got = errors(
        r#"
inptu: {uris: [a.jsonl]}
stages:
  - op: text_length
    params: {feild: body}
  - op: no_such_op
output: {uri: out, compresion: zstd}
job: {lease_ttl_secs: soon, heartbeat_secs: 1}
"#,
        Overrides::default(),
    );
    let unknown = format!(
        "stages[1].op: unknown operator \"no_such_op\", expected one of: {}",
        mdf::ops::names().join(", ")
    );
    assert!(unknown.contains("html_extract, text_length, length_filter, exact_key"));
    assert_eq!(
        got,
        vec![
            "input.uris: missing input: give input.uris in the spec or --input on the command line",
            "stages[0].params.feild: unknown field, expected one of: field, prefix",
            unknown.as_str(),
            "output.compresion: unknown field, expected one of: compression, drop_columns, format, iceberg, jsonl, overwrite, row_group_rows, target_file_bytes, tokens, uri, webdataset, zstd_level",
            "job.lease_ttl_secs: expected a non-negative integer, found a string",
            "inptu: unknown field, expected one of: input, job, name, output, rejects, stages, storage, version",
        ]
    );
}

#[test]
fn overrides_and_interpolation_feed_validation() {
    let text = "input: {uris: [a.jsonl]}\noutput: {uri: \"s3://${OUT_BUCKET}/x\"}\nstages: [{op: length_filter, name: lf}]\n";
    assert!(errors(text, Overrides::default()).is_empty());
    let ov = Overrides {
        set: vec![
            "stages.lf.params.min_chars=9".into(),
            "stages.lf.params.max_chars=3".into(),
            "job.heartbeat_secs=100".into(),
        ],
        ..Default::default()
    };
    assert_eq!(
        errors(text, ov),
        vec![
            "stages[0].params.min_chars: must not exceed max_chars",
            "job.heartbeat_secs: must be at most half of job.lease_ttl_secs (60), found 100",
        ]
    );
    let missing_env = "input: {uris: [a.jsonl]}\noutput: {uri: \"s3://${NOPE}/x\"}\n";
    assert_eq!(
        errors(missing_env, Overrides::default()),
        vec!["output.uri: environment variable NOPE is not set"]
    );
    let typed = Overrides {
        set: vec!["job.max_attempts=[1]".into()],
        ..Default::default()
    };
    assert_eq!(
        errors("input: {uris: [a.jsonl]}\noutput: {uri: o}\n", typed),
        vec!["job.max_attempts: expected a non-negative integer, found a list"]
    );
}

#[test]
fn a_stage_memory_budget_must_cover_the_batches_in_flight() {
    let text = "input: {uris: [a.jsonl]}\noutput: {uri: o}\nstages: [{op: text_length, resources: {memory: 64MiB}}]\njob: {batch_bytes: 16MiB}\n";
    assert_eq!(
        errors(text, Overrides::default()),
        vec![
            "stages[0].resources.memory: 67108864 bytes is below the pipeline's in-flight batches ((2 × job.channel_batches + 2) × job.batch_bytes = 167772160 bytes); raise it or lower job.batch_bytes"
        ]
    );
    let ok = Overrides {
        set: vec!["job.batch_bytes=4MiB".into()],
        ..Default::default()
    };
    assert!(errors(text, ok).is_empty());
}

#[test]
fn input_format_is_inferred_or_refused() {
    let t = |u: &str| {
        errors(
            &format!("input: {{uris: [\"{u}\"]}}\noutput: {{uri: o}}\n"),
            Overrides::default(),
        )
    };
    assert!(t("x/*.jsonl.gz").is_empty());
    assert!(t("x/part-0.parquet").is_empty());
    assert_eq!(
        t("x/data.bin"),
        vec![
            "input.format: cannot infer the format from \"x/data.bin\"; set input.format (jsonl, parquet, warc, wet, image_folder, webdataset)"
        ]
    );
}

#[test]
fn the_cli_refuses_bad_specs_before_writing_anything() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(1, 5));
    let jobs = d.path().join("jobs");
    // Schema errors found while planning, and an input that matches nothing.
    let s = write_spec(
        d.path(),
        &format!(
            "input: {{uris: [\"{0}/in/*.jsonl\", \"{0}/none/*.jsonl\"]}}\nstages: [{{op: text_length, params: {{field: body}}}}]\noutput: {{uri: \"{0}/out\"}}\n",
            d.path().display()
        ),
    );
    let o = mdf()
        .args(["run", s.to_str().unwrap(), "--job-root"])
        .arg(&jobs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!(
            "input.uris[1]: no input files match \"{}/none/*.jsonl\"",
            d.path().display()
        )),
        "{}",
        stderr(&o)
    );
    assert!(!jobs.exists(), "nothing was written");
    let s = write_spec(
        d.path(),
        &format!(
            "input: {{uris: [\"{0}/in/*.jsonl\"]}}\nstages: [{{op: text_length, params: {{field: body}}}}]\noutput: {{uri: \"{0}/out\"}}\n",
            d.path().display()
        ),
    );
    let o = mdf()
        .args(["run", s.to_str().unwrap(), "--job-root"])
        .arg(&jobs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(
            "stages[0].params.field: no column \"body\" in the input (columns: id, url, text, n)"
        ),
        "{}",
        stderr(&o)
    );
    assert!(!jobs.exists());
    // validate prints the checklist with the same errors.
    let o = mdf()
        .args(["validate", s.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stdout(&o).contains("✗ 1 error(s)") && stdout(&o).contains("stages[0].params.field"),
        "{}",
        stdout(&o)
    );
    let o = run_ok(mdf().args([
        "validate",
        s.to_str().unwrap(),
        "--set",
        "stages.0.params.field=text",
    ]));
    assert!(
        stdout(&o).contains("✓ output columns: id, url, text, n, text_chars, text_words"),
        "{}",
        stdout(&o)
    );
    // A non-empty output refuses a new job unless overwrite is set.
    std::fs::create_dir_all(d.path().join("out")).unwrap();
    std::fs::write(d.path().join("out/keep.txt"), "x").unwrap();
    let o = mdf()
        .args([
            "run",
            s.to_str().unwrap(),
            "--set",
            "stages.0.params.field=text",
            "--job-root",
        ])
        .arg(&jobs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("output.uri: file://") && stderr(&o).contains("is not empty"),
        "{}",
        stderr(&o)
    );
    // The object it holds, named so it can be found (with its leading /).
    let keep = format!("(it holds file://{}/out/keep.txt)", d.path().display());
    assert!(stderr(&o).contains(&keep), "{}", stderr(&o));
}

/// Operators of an optional feature: without it, the error says which feature; with
/// it, their params are checked like any other's.
#[test]
fn feature_gated_operators() {
    let text = "input: {uris: [a/], format: image_folder}\noutput: {uri: o}\nstages: [{op: clip_embed, params: {dim: 0}}]\n";
    let got = errors(text, Overrides::default());
    if cfg!(feature = "onnx") {
        assert!(
            got.iter().any(|e| e.starts_with("stages[0].params.model")),
            "{got:?}"
        );
        assert!(
            got.iter().any(|e| e.starts_with("stages[0].params.dim")),
            "{got:?}"
        );
    } else {
        assert_eq!(
            got,
            vec![
                "stages[0].op: operator \"clip_embed\" needs mdf built with `--features onnx` (this build has no onnx support)"
            ]
        );
    }
}

#[test]
fn speculation_is_off_unless_asked_and_its_bounds_are_checked() {
    let spec = |job: &str| {
        let text = format!("input: {{uris: [a.jsonl]}}\noutput: {{uri: o}}\njob: {job}\n");
        let env = |_: &str| None;
        Spec::from_text(
            &text,
            "spec.yaml",
            &Overrides::default(),
            &env,
            &mdf::ops::Catalog,
        )
    };
    assert_eq!(spec("{}").unwrap().job.speculation, None);
    assert_eq!(spec("{speculation: false}").unwrap().job.speculation, None);
    let on = spec("{speculation: true}")
        .unwrap()
        .job
        .speculation
        .unwrap();
    assert_eq!(
        (on.quantile, on.factor, on.min_secs, on.max_share),
        (0.9, 3.0, 60.0, 0.1)
    );
    // 0.1 of 1,000 tasks: 100 backups at most; at least one however few tasks.
    assert_eq!((on.budget(1000), on.budget(3)), (100, 1));
    // Judged once 90 % are terminal; the threshold never below min_secs.
    assert_eq!((on.min_terminal(10), on.min_terminal(1)), (9, 1));
    assert_eq!(
        (on.threshold_ms(100_000), on.threshold_ms(1_000)),
        (300_000, 60_000)
    );
    let some = spec("{speculation: {factor: 2, min_secs: 1}}")
        .unwrap()
        .job
        .speculation
        .unwrap();
    assert_eq!(
        (some.quantile, some.factor, some.threshold_ms(500)),
        (0.9, 2.0, 1000)
    );
    assert_eq!(
        errors(
            "input: {uris: [a.jsonl]}\noutput: {uri: o}\njob: {speculation: {quantile: 0, factor: 0.5, max_share: 2, min_secs: -1, after: 3}}\n",
            Overrides::default()
        ),
        vec![
            "job.speculation.quantile: must be in (0, 1], found 0",
            "job.speculation.factor: must be between 1 and 1000, found 0.5",
            "job.speculation.min_secs: must be between 1 and 86400, found -1",
            "job.speculation.max_share: must be in (0, 1], found 2",
            "job.speculation.after: unknown field, expected one of: factor, max_share, min_secs, quantile",
        ]
    );
    assert_eq!(
        errors(
            "input: {uris: [a.jsonl]}\noutput: {uri: o}\njob: {speculation: 3}\n",
            Overrides::default()
        ),
        vec!["job.speculation: expected a map, found an integer"]
    );
}

#[test]
fn token_shard_settings_are_checked_before_anything_runs() {
    let e = |output: &str| {
        errors(
            &format!("input: {{uris: [a.jsonl]}}\noutput: {{uri: o, {output}}}\n"),
            Overrides::default(),
        )
    };
    assert_eq!(
        e("tokens: {dtype: uint16}"),
        vec!["output.tokens: only with output.format megatron or tokens"]
    );
    assert_eq!(
        e("format: megatron, tokens: {dtype: uint32, eod: 70000, shuffle: 1}"),
        vec![
            "output.tokens.dtype: \"uint32\" is not a megatron token type, expected one of: uint16, int32",
            "output.tokens.shuffle: unknown field, expected one of: column, dtype, eod, shuffle_seed",
        ]
    );
    assert_eq!(
        e("format: tokens, tokens: {dtype: uint16, eod: 70000}"),
        vec!["output.tokens.eod: 70000 does not fit uint16"]
    );
    assert_eq!(
        e("format: tokens, tokens: {dtype: int32}"),
        vec![
            "output.tokens.dtype: \"int32\" is not a tokens token type, expected one of: uint16, uint32"
        ]
    );
    assert_eq!(
        e("format: megatron, target_file_bytes: 8GiB"),
        vec!["output.target_file_bytes: must be at most 4GiB for token shards"]
    );
    assert_eq!(
        e("format: parquet3"),
        vec![
            "output.format: unknown output format \"parquet3\", expected: parquet, lance, iceberg, megatron, tokens, jsonl, webdataset"
        ]
    );
    // Defaults: the token_ids column, the 32-bit type of each format, no eod.
    let env = |_: &str| None;
    let spec = |f: &str| {
        Spec::from_text(
            &format!("input: {{uris: [a.jsonl]}}\noutput: {{uri: o, format: {f}}}\n"),
            "spec.yaml",
            &Overrides::default(),
            &env,
            &mdf::ops::Catalog,
        )
        .unwrap()
        .output
        .tokens
        .unwrap()
    };
    let m = spec("megatron");
    assert_eq!(
        (m.column.as_str(), m.dtype, m.eod, m.shuffle_seed),
        ("token_ids", mdf::spec::TokenDtype::Int32, None, None)
    );
    assert_eq!(spec("tokens").dtype, mdf::spec::TokenDtype::Uint32);
}

/// Values that would quietly empty or explode a job (found by a new user): sizes of
/// 0, crossed or out-of-range thresholds, a null or empty value where a default would
/// switch a filter off, and YAML's `.nan` / `.inf`, whose errors said "null".
#[test]
fn nonsense_sizes_and_thresholds_are_refused_naming_the_field() {
    let one = |stages: &str, job: &str| {
        errors(
            &format!(
                "input: {{uris: [a.jsonl]}}\noutput: {{uri: o}}\nstages: {stages}\njob: {job}\n"
            ),
            Overrides::default(),
        )
    };
    for key in ["task_bytes", "batch_bytes"] {
        let e = one("[]", &format!("{{{key}: 0}}"));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with(&format!("job.{key}: must be at least 1 byte")),
            "{e:?}"
        );
    }
    let e = errors(
        "input: {uris: [a.jsonl], max_record_bytes: 0}\noutput: {uri: o}\n",
        Overrides::default(),
    );
    assert!(
        e[0].starts_with("input.max_record_bytes: must be at least 1 byte"),
        "{e:?}"
    );
    let e = one(
        "[{op: gopher_quality, params: {min_doc_words: 1000, max_doc_words: 10, min_avg_word_length: 20, max_avg_word_length: 2}}]",
        "{}",
    );
    assert_eq!(
        e,
        [
            "stages[0].params.min_doc_words: must not exceed max_doc_words",
            "stages[0].params.min_avg_word_length: must not exceed max_avg_word_length"
        ]
    );
    let e = one(
        "[{op: gopher_quality, params: {max_symbol_word_ratio: 7.5, max_bullet_lines_ratio: -3}}, {op: gopher_repetition, params: {dup_line_frac: 1.5}}, {op: fineweb_quality, params: {char_duplicates_ratio: -0.1}}]",
        "{}",
    );
    assert_eq!(
        e,
        [
            "stages[0].params.max_bullet_lines_ratio: must be between 0 and 1, found -3",
            "stages[1].params.dup_line_frac: must be between 0 and 1, found 1.5",
            "stages[2].params.char_duplicates_ratio: must be between 0 and 1, found -0.1"
        ]
    );
    // A null where the default is "off" (length_filter's min_words 0).
    let e = one("[{op: length_filter, params: {min_words: null}}]", "{}");
    assert_eq!(
        e,
        [
            "stages[0].params.min_words: null is not a value here (integer expected): give one, or leave the key out for the default"
        ]
    );
    // The same through an empty `--set` value (an unset shell variable).
    let ov = Overrides {
        set: vec!["stages.0.params.min_words=".into()],
        ..Default::default()
    };
    let e = errors(
        "input: {uris: [a.jsonl]}\noutput: {uri: o}\nstages: [{op: length_filter, params: {min_words: 5}}]\n",
        ov,
    );
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("stages[0].params.min_words: null is not"),
        "{e:?}"
    );
    // .nan and .inf are named as such.
    let e = one(
        "[{op: gopher_quality, params: {max_symbol_word_ratio: .nan}}]",
        "{}",
    );
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].contains("\"NaN\""), "{e:?}");
    let e = one(
        "[{op: gopher_quality, params: {max_doc_words: .inf}}]",
        "{}",
    );
    assert!(e[0].contains("\"inf\""), "{e:?}");
}

/// A stage named with digits only could not be addressed by `--set stages.NAME.…`
/// (the index won without a word): refused for new specs.
#[test]
fn a_stage_name_that_is_a_number_is_refused() {
    let e = errors(
        "input: {uris: [a.jsonl]}\noutput: {uri: o}\nstages: [{op: text_length, name: \"2\"}]\n",
        Overrides::default(),
    );
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("stages[0].name: \"2\" is a number"),
        "{e:?}"
    );
}

/// A job stored before the checks above still loads and builds its operators: its
/// job.json was accepted then, and a resume must never be refused for it.
#[test]
fn a_stored_job_from_before_the_new_checks_still_loads_and_builds() {
    let stored = serde_json::json!({
        "version": 1,
        "name": "old",
        "input": {"uris": ["a.jsonl"], "format": "jsonl", "max_record_bytes": 0},
        "stages": [
            {"op": "length_filter", "name": "2", "params": {"min_words": null}},
            {"op": "gopher_quality", "params": {"min_doc_words": 1000, "max_doc_words": 10, "max_bullet_lines_ratio": 1.5}},
            {"op": "gopher_repetition", "params": {"dup_line_frac": -1}}
        ],
        "output": {"uri": "o"},
        "job": {"task_bytes": 0, "batch_bytes": 0}
    });
    let spec = Spec::from_value(stored.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(spec.job.task_bytes, 1);
    mdf::ops::build_stages(&spec).unwrap_or_else(|e| panic!("{e}"));
    // The same tree as a new spec is refused on every count.
    let text = serde_json::to_string(&stored).unwrap();
    let e = errors(&text, Overrides::default());
    assert!(e.len() >= 6, "{e:?}");
}
