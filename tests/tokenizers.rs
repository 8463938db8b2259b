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
use std::process::Command;
use std::sync::OnceLock;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const TOKENIZERS: [&str; 3] = ["wordpiece", "bpe", "unigram"];

fn python(args: &[&str]) -> Option<String> {
    let o = Command::new("python3").args(args).output().ok()?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        if std::env::var_os("MDF_REQUIRE_ONNX").is_some() {
            panic!("python3 {args:?}: {err}");
        }
        eprintln!("skipping: python3 {args:?}: {err}");
        return None;
    }
    Some(String::from_utf8_lossy(&o.stdout).to_string())
}

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
