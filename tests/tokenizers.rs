//! `tokenize` and the Hugging Face tokenizers behind it, against the Python
//! `tokenizers` package on real text (../shared/data/langid: 75 languages; the
//! extraction set's snippets): three tokenizer.json files trained here by
//! scripts/text-fixtures.py (BERT WordPiece, GPT-2 byte-level BPE, XLM-R-style
//! Unigram) give the same ids and counts, with and without special tokens; a job's
//! token totals per language and per source reach `mdf status` and the report.
//!
//! Skipped (with a message) when python3 lacks `tokenizers`, unless MDF_REQUIRE_ONNX
//! is set (.ci/run sets it).
mod common;
use common::*;
use mdf::kernels::hf_tokenizer::Tokenizer;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const TOKENIZERS: [&str; 3] = ["wordpiece", "bpe", "unigram"];

struct Fixture {
    dir: tempfile::TempDir,
    /// (text, language) of every corpus line.
    rows: Vec<(String, String)>,
}

impl Fixture {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// The corpus and the tokenizers, made once per test binary.
fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let corpus = dir.path().join("corpus.jsonl");
        let script = format!("{ROOT}/scripts/text-fixtures.py");
        python(&[&script, "corpus", corpus.to_str()?, "40"])?;
        python(&[
            &script,
            "tokenizers",
            dir.path().to_str()?,
            corpus.to_str()?,
        ])?;
        let rows = std::fs::read_to_string(&corpus)
            .unwrap()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (
                    v["text"].as_str().unwrap().to_string(),
                    v["lang"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        Some(Fixture { dir, rows })
    })
    .as_ref()
}

fn python_ids(f: &Fixture, tok: &Path, special: bool) -> Vec<Vec<u32>> {
    let out = python(&[
        &format!("{ROOT}/scripts/text-fixtures.py"),
        "encode",
        tok.to_str().unwrap(),
        f.path("corpus.jsonl").to_str().unwrap(),
        if special { "1" } else { "0" },
    ])
    .expect("the fixture ran, so python3 has tokenizers");
    serde_json::from_str(&out).unwrap()
}

/// Token byte offsets (`tokenize` with `offsets`, which a substring dedup over tokens
/// cuts by) equal the Python package's (its char offsets turned into bytes), and the
/// ids that come with them are the plain ids.
#[test]
fn offsets_equal_the_python_packages_as_bytes() {
    let Some(f) = fixture() else { return };
    let texts: Vec<&str> = f.rows.iter().map(|r| r.0.as_str()).collect();
    for name in TOKENIZERS {
        let path = f.path(&format!("{name}.json"));
        let t = Tokenizer::from_bytes(&std::fs::read(&path).unwrap()).unwrap();
        let out = python(&[
            &format!("{ROOT}/scripts/text-fixtures.py"),
            "offsets",
            path.to_str().unwrap(),
            f.path("corpus.jsonl").to_str().unwrap(),
            "0",
        ])
        .expect("the fixture ran, so python3 has tokenizers");
        let want: Vec<Vec<[u32; 2]>> = serde_json::from_str(&out).unwrap();
        let got = t.ids_offsets(&texts, false).unwrap();
        let ids = t.ids(&texts, false).unwrap();
        assert_eq!(got.len(), want.len());
        for (i, ((gi, go), w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(gi, &ids[i], "{name}: ids of text {i}");
            let go: Vec<[u32; 2]> = go.chunks(2).map(|p| [p[0], p[1]]).collect();
            assert_eq!(&go, w, "{name}: offsets of {:?}", texts[i]);
        }
    }
}

#[test]
fn ids_and_counts_equal_the_python_package_on_real_text() {
    let Some(f) = fixture() else { return };
    assert!(f.rows.len() > 5000, "{} lines", f.rows.len());
    let texts: Vec<&str> = f.rows.iter().map(|r| r.0.as_str()).collect();
    for name in TOKENIZERS {
        let path = f.path(&format!("{name}.json"));
        let t = Tokenizer::from_bytes(&std::fs::read(&path).unwrap()).unwrap();
        for special in [false, true] {
            let want = python_ids(f, &path, special);
            let got = t.ids(&texts, special).unwrap();
            let counts = t.counts(&texts, special).unwrap();
            assert_eq!(got.len(), want.len());
            let bad: Vec<usize> = (0..want.len()).filter(|&i| got[i] != want[i]).collect();
            assert!(
                bad.is_empty(),
                "{name} (special tokens: {special}): {} of {} texts differ, first {:?}: {:?} vs {:?}",
                bad.len(),
                want.len(),
                texts[bad[0]],
                got[bad[0]],
                want[bad[0]]
            );
            let want_counts: Vec<u32> = want.iter().map(|v| v.len() as u32).collect();
            assert_eq!(counts, want_counts, "{name}");
        }
    }
}

#[test]
fn a_jobs_token_totals_per_language_and_source_reach_status_and_the_report() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    // Two input files (two sources), a `language` column, some null texts.
    let mut files: Vec<Vec<String>> = vec![vec![], vec![]];
    let rows: Vec<&(String, String)> = f.rows.iter().take(3000).collect();
    for (i, (text, lang)) in rows.iter().enumerate() {
        let v = if i % 97 == 0 {
            serde_json::json!({"text": null, "language": lang})
        } else {
            serde_json::json!({"text": text, "language": lang})
        };
        files[i % 2].push(v.to_string());
    }
    for (i, lines) in files.iter().enumerate() {
        write_lines(&input.join(format!("part-{i}.jsonl")), lines);
    }
    let tok = f.path("wordpiece.json");
    let out = dir.path().join("out");
    let spec = write_spec(
        dir.path(),
        &format!(
            "name: tokens\ninput: {{uris: [\"{}/*\"], format: jsonl}}\n\
             stages: [{{op: tokenize, name: tokens, params: {{tokenizer: \"{}\", ids: true}}}}]\n\
             output: {{uri: \"{}\"}}\njob: {{poll_millis: 50}}\n",
            input.display(),
            tok.display(),
            out.display()
        ),
    );
    let o = run_ok(
        mdf()
            .args([
                "run",
                spec.to_str().unwrap(),
                "--workers",
                "1",
                "--job-root",
            ])
            .arg(dir.path().join("jobs")),
    );
    let job = job_uri(&o);

    // The counts are the Python package's.
    let t = Tokenizer::from_bytes(&std::fs::read(&tok).unwrap()).unwrap();
    let mut want_total = 0u64;
    let mut by_lang: std::collections::BTreeMap<&str, u64> = Default::default();
    for (i, (text, lang)) in rows.iter().enumerate() {
        if i % 97 != 0 {
            let n = t.counts(&[text.as_str()], false).unwrap()[0] as u64;
            want_total += n;
            *by_lang.entry(lang.as_str()).or_default() += n;
        }
    }
    let batches = output_batches(&out);
    let mut got_total = 0u64;
    for b in &batches {
        let c = b
            .column_by_name("token_count")
            .unwrap()
            .as_any()
            .downcast_ref::<arrow_array::UInt32Array>()
            .unwrap();
        got_total += c.iter().flatten().map(u64::from).sum::<u64>();
    }
    assert_eq!(got_total, want_total);

    let status = status_json(&job);
    let stage = &status["phases"][0]["stats"]["stages"][0];
    let totals = &stage["totals"]["token_count"];
    assert_eq!(totals["sum"].as_u64().unwrap(), want_total);
    assert_eq!(totals["records"].as_u64().unwrap(), 3000 - 31);
    for (lang, n) in &by_lang {
        assert_eq!(totals["by"]["language"][lang].as_u64(), Some(*n), "{lang}");
    }
    let sources = totals["by"]["source"].as_object().unwrap();
    assert_eq!(sources.len(), 2);
    assert_eq!(
        sources.values().map(|v| v.as_u64().unwrap()).sum::<u64>(),
        want_total
    );
    let names = &status["phases"][0]["stats"]["sources"];
    for key in sources.keys() {
        assert!(names[key].as_str().unwrap().contains("part-"), "{names}");
    }

    let text = stdout(&run_ok(mdf().args(["status", &job])));
    assert!(text.contains("token_count (stage tokens, p00): "), "{text}");
    assert!(text.contains("  by language: "), "{text}");
    assert!(
        text.contains("  by source: ") && text.contains("part-1.jsonl"),
        "{text}"
    );

    let html_path = dir.path().join("report.html");
    run_ok(mdf().args(["report", &job, "-o", html_path.to_str().unwrap()]));
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.contains("<h2>Tokens</h2>"), "no tokens section");
    assert!(html.contains("id=\"total-tokens-token_count-language\""));
    assert!(html.contains("id=\"total-tokens-token_count-source\""));
    assert!(html.contains("part-0.jsonl"));
}

/// Every document of a token shard output, read back by scripts/token-shards-read.py
/// (megatron-core's IndexedDataset when installed, else a numpy reader written from
/// its documented layout), sorted.
fn shard_docs(kind: &str, out: &Path, dtype: &str) -> (Vec<Vec<u32>>, serde_json::Value) {
    let got = python(&[
        &format!("{ROOT}/scripts/token-shards-read.py"),
        kind,
        out.to_str().unwrap(),
        dtype,
    ])
    .expect("python3 with numpy");
    let v: serde_json::Value = serde_json::from_str(&got).unwrap();
    let mut docs: Vec<Vec<u32>> = serde_json::from_value(v["docs"].clone()).unwrap();
    docs.sort();
    (docs, v)
}

/// Token shards through `mdf run`: Megatron's indexed dataset (uint16, an end-of-
/// document id, shuffled shards) and plain uint32 shards from a job whose workers
/// were killed mid-task, each read back independently and equal, document for
/// document, to the Python tokenizers package's ids (a null text is an empty
/// document). A job without the token column is refused before any task, naming it.
#[test]
fn token_shards_read_back_as_the_python_packages_ids() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let n = 3000;
    let tok = f.path("bpe.json");
    let want_ids = python_ids(f, &tok, false);
    let mut files: Vec<Vec<String>> = vec![vec![]; 3];
    for (i, (text, _)) in f.rows.iter().take(n).enumerate() {
        let text = (i % 101 != 0).then_some(text);
        files[i % 3].push(serde_json::json!({ "text": text }).to_string());
    }
    for (i, lines) in files.iter().enumerate() {
        write_lines(&input.join(format!("part-{i}.jsonl")), lines);
    }
    let want = |eod: Option<u32>| {
        let mut docs: Vec<Vec<u32>> = (0..n)
            .map(|i| {
                let mut d = if i % 101 != 0 {
                    want_ids[i].clone()
                } else {
                    vec![]
                };
                d.extend(eod);
                d
            })
            .collect();
        docs.sort();
        docs
    };
    let spec = |name: &str, out: &Path, output: &str, throttle: &str| {
        write_spec(
            dir.path(),
            &format!(
                "name: {name}\ninput: {{uris: [\"{}/*\"], format: jsonl}}\n\
                 stages: [{throttle}{{op: tokenize, params: {{tokenizer: \"{}\", ids: true}}}}]\n\
                 output: {{uri: \"{}\", {output}}}\n\
                 job: {{poll_millis: 50, lease_ttl_secs: 2, heartbeat_secs: 1, batch_rows: 50, max_files_per_task: 1}}\n",
                input.display(),
                tok.display(),
                out.display()
            ),
        )
    };

    // Megatron: uint16 ids, an end-of-document id, documents shuffled per shard.
    let out = dir.path().join("megatron");
    let s = spec(
        "megatron",
        &out,
        "format: megatron, tokens: {dtype: uint16, eod: 0, shuffle_seed: 11}",
        "",
    );
    run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "2", "--job-root"])
            .arg(dir.path().join("jobs")),
    );
    let (docs, v) = shard_docs("megatron", &out, "");
    eprintln!("megatron shards read by: {}", v["reader"]);
    assert_eq!(v["dtype"], "uint16", "{}", v["reader"]);
    assert_eq!(v["shards"], 3, "one shard per input file");
    assert_eq!(docs.len(), n);
    assert!(
        docs == want(Some(0)),
        "megatron documents differ from the Python ids"
    );
    let manifest = manifest(&out);
    let listed: Vec<&str> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), 6, "{listed:?}");
    assert!(listed.iter().all(|p| p.starts_with("shard-")), "{listed:?}");
    assert_eq!(manifest["rows"], n as u64, "a document counted once");

    // Plain uint32 shards, workers killed mid-task and replaced.
    let out = dir.path().join("tokens");
    let s = spec(
        "tokens",
        &out,
        "format: tokens, tokens: {dtype: uint32}",
        "{op: throttle, params: {records_per_sec: 1500}}, ",
    );
    let jobs = dir.path().join("jobs2");
    let job = submit_job(&s, &jobs);
    let spawn = |id: &str| spawn_worker(&job, id);
    let mut a = spawn("a");
    let mut b = spawn("b");
    std::thread::sleep(std::time::Duration::from_millis(400));
    a.kill().unwrap();
    a.wait().unwrap();
    let mut c = spawn("c");
    for w in [&mut b, &mut c] {
        assert!(w.wait().unwrap().success());
    }
    let st = status_json(&job);
    assert_eq!(st["succeeded"], true, "{st:#}");
    assert!(a_lease_was_lost(&jobs, "p00"), "the kill missed every task");
    let (docs, v) = shard_docs("tokens", &out, "uint32");
    assert_eq!(v["shards"], 3);
    assert!(
        docs == want(None),
        "plain shard documents differ from the Python ids"
    );
    assert!(orphans(&out).is_empty(), "orphans: {:?}", orphans(&out));

    // A vocabulary larger than the dtype, an eod outside the vocabulary: refused at
    // submit, before any task reads input, naming the setting.
    let big = dir.path().join("big.json");
    let vocab: serde_json::Map<String, serde_json::Value> = (0..70_000u32)
        .map(|i| (format!("w{i}"), serde_json::json!(i)))
        .collect();
    let big_tok = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
        "decoder": null, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "w0"}
    });
    std::fs::write(&big, big_tok.to_string()).unwrap();
    let refused = |tokenizer: &Path, output: &str| {
        let s = write_spec(
            dir.path(),
            &format!(
                "name: refused\ninput: {{uris: [\"{}/*\"], format: jsonl}}\n\
                 stages: [{{op: tokenize, params: {{tokenizer: \"{}\", ids: true}}}}]\n\
                 output: {{uri: \"{}\", {output}}}\n",
                input.display(),
                tokenizer.display(),
                dir.path().join("refused").display()
            ),
        );
        let o = mdf()
            .args(["submit", s.to_str().unwrap(), "--job-root"])
            .arg(dir.path().join("jobs-refused"))
            .output()
            .unwrap();
        assert!(!o.status.success());
        stderr(&o)
    };
    let e = refused(&big, "format: megatron, tokens: {dtype: uint16}");
    assert!(
        e.contains("output.tokens.dtype: uint16 holds ids up to 65535, but the tokenizer of stage tokenize has 70000 ids; use int32"),
        "{e}"
    );
    let e = refused(&tok, "format: tokens, tokens: {dtype: uint16, eod: 60000}");
    assert!(
        e.contains("output.tokens.eod: 60000 is not an id of the tokenizer of stage tokenize"),
        "{e}"
    );
    assert!(
        !dir.path().join("jobs-refused/jobs").exists(),
        "nothing written"
    );

    // No token column: refused at submit, naming the field.
    let s = spec(
        "bad",
        &dir.path().join("bad"),
        "format: megatron, tokens: {column: ids}",
        "",
    );
    let o = mdf()
        .args(["submit", s.to_str().unwrap(), "--job-root"])
        .arg(dir.path().join("jobs3"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("output.tokens.column: no column \"ids\" in the output"),
        "{}",
        stderr(&o)
    );
}

/// examples/tokens.yaml as a user runs it, with this test's GPT-2-style tokenizer:
/// Megatron shards of the bundled sample, every kept document with the end id.
#[test]
fn the_tokens_example_writes_megatron_shards() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::copy(f.path("bpe.json"), dir.path().join("tokenizer.json")).unwrap();
    run_ok(
        mdf()
            .current_dir(ROOT)
            .args(["run", "examples/tokens.yaml", "--workers", "2", "-o"])
            .arg(&out)
            .args([
                "--set",
                "output.tokens.dtype=uint16",
                "--set",
                "output.tokens.eod=1",
            ])
            .arg("--job-root")
            .arg(dir.path().join("jobs"))
            .env("MDF_MODELS", dir.path()),
    );
    let (docs, v) = shard_docs("megatron", &out, "");
    assert_eq!(v["dtype"], "uint16");
    assert!(docs.len() > 100, "{} documents", docs.len());
    assert!(docs.iter().all(|d| d.len() > 5 && d.last() == Some(&1)));
    assert_eq!(manifest(&out)["rows"], docs.len() as u64);
}
