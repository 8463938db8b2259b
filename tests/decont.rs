//! `decontaminate` against its reference, datatrove 0.10's n-gram decontamination,
//! on real text (../shared/data/extraction-wceb): the corpus and the benchmark files
//! are built here by the rule `scripts/decont-reference.py` uses, and its recorded
//! result (tests/fixtures/decont/reference.json: datatrove's flagged documents and
//! every document's words, as counts and hashes) must come out of `mdf run`.
mod common;

use common::*;
use mdf::kernels::decont;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CORPUS: [&str; 4] = ["cleaneval", "cleanportaleval", "l3s-gn1", "wcxb"];
const HELD_OUT: &str = "readability";

fn data() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/extraction-wceb");
    assert!(
        d.is_dir(),
        "{} is missing: the decontamination reference runs on the shared real-text data",
        d.display()
    );
    d
}

fn reference() -> serde_json::Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/decont/reference.json");
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// (id, text) of a source's pages, by key.
fn texts(source: &str) -> Vec<(String, String)> {
    let p = data().join(source).join("ground-truth.json");
    let d: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    d.into_iter()
        .map(|(k, v)| {
            let t = v
                .get("text")
                .unwrap_or(&v)
                .as_str()
                .unwrap_or("")
                .to_string();
            (format!("{source}/{k}"), t)
        })
        .collect()
}

fn corpus() -> Vec<(String, String)> {
    CORPUS.iter().flat_map(|s| texts(s)).collect()
}

/// Python's `str.split()`.
fn py_words(t: &str) -> Vec<&str> {
    t.split(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The benchmark files, by the script's rule: every 9th corpus page gives a question
/// (its words 10..30) and an answer (30..40); every 2nd held-out page a question
/// (0..25).
fn benchmarks(dir: &Path) -> (PathBuf, PathBuf) {
    let mut quiz = Vec::new();
    for (i, (_, t)) in corpus().iter().enumerate() {
        let w = py_words(t);
        if i % 9 == 0 && w.len() >= 40 {
            quiz.push(
                serde_json::json!({"id": format!("q{i}"), "question": w[10..30].join(" "), "answer": w[30..40].join(" ")})
                    .to_string(),
            );
        }
    }
    let mut held = Vec::new();
    for (i, (_, t)) in texts(HELD_OUT).iter().enumerate() {
        let w = py_words(t);
        if i % 2 == 0 && w.len() >= 25 {
            held.push(
                serde_json::json!({"id": format!("h{i}"), "question": w[0..25].join(" "), "answer": ""})
                    .to_string(),
            );
        }
    }
    let r = reference();
    assert_eq!(quiz.len() as u64, r["benchmarks"]["quiz"].as_u64().unwrap());
    assert_eq!(held.len() as u64, r["benchmarks"]["held"].as_u64().unwrap());
    let (q, h) = (
        dir.join("evals/quiz.jsonl"),
        dir.join("evals/held.jsonl.gz"),
    );
    std::fs::create_dir_all(dir.join("evals")).unwrap();
    write_lines(&q, &quiz);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, (held.join("\n") + "\n").as_bytes()).unwrap();
    std::fs::write(&h, gz.finish().unwrap()).unwrap();
    (q, h)
}

/// The corpus as JSONL files of `{"doc", "text"}` (several, so several tasks).
fn write_corpus(dir: &Path, files: usize) {
    let docs = corpus();
    std::fs::create_dir_all(dir.join("in")).unwrap();
    for f in 0..files {
        let lines: Vec<String> = docs
            .iter()
            .enumerate()
            .filter(|(i, _)| i % files == f)
            .map(|(_, (id, t))| serde_json::json!({"doc": id, "text": t}).to_string())
            .collect();
        write_lines(&dir.join(format!("in/part-{f}.jsonl")), &lines);
    }
}

fn spec(dir: &Path, out: &Path, action: &str, extra: &str) -> PathBuf {
    let (q, h) = benchmarks(dir);
    write_spec(
        dir,
        &format!(
            r#"
version: 1
name: decont-{action}
input: {{uris: ["{}/in/*.jsonl"]}}
stages:
  {extra}
  - name: decont
    op: decontaminate
    params:
      benchmarks: ["{}", "{}"]
      fields: [question, answer]
      id_field: id
      action: {action}
output: {{uri: "{}"}}
job: {{max_files_per_task: 1}}
"#,
            dir.display(),
            q.display(),
            h.display(),
            out.display()
        ),
    )
}

/// (doc, benchmark, item) of every side table row, by the records' ids → docs.
fn table_rows(out: &Path, doc_of: &BTreeMap<String, String>) -> BTreeSet<(String, String, String)> {
    let m = manifest(out);
    let files = m["tables"]["decont"]
        .as_array()
        .expect("the manifest lists the table");
    let mut rows = BTreeSet::new();
    for f in files {
        let b = read_parquet(&out.join(f["path"].as_str().unwrap()));
        let (ids, bench, item) = (
            strings(&b, "id"),
            strings(&b, "benchmark"),
            strings(&b, "item"),
        );
        for i in 0..ids.len() {
            rows.insert((doc_of[&ids[i]].clone(), bench[i].clone(), item[i].clone()));
        }
    }
    rows
}

#[test]
fn every_documents_words_are_datatroves() {
    let r = reference();
    let words = r["words"].as_object().unwrap();
    let mut differ = Vec::new();
    for (id, text) in corpus() {
        let s = decont::simplify(&text);
        let mut w = Vec::new();
        decont::words(&s, &mut w);
        let hash = format!(
            "{:016x}",
            xxhash_rust::xxh3::xxh3_64(w.join(" ").as_bytes())
        );
        let want = &words[&id];
        if want[0].as_u64().unwrap() != w.len() as u64 || want[1].as_str().unwrap() != hash {
            differ.push(id);
        }
    }
    assert_eq!(words.len(), 2789);
    assert!(
        differ.is_empty(),
        "words differ from datatrove's on {differ:?}"
    );
}

#[test]
fn flags_the_documents_datatrove_flags_and_reports_the_matches() {
    let dir = tempfile::tempdir().unwrap();
    write_corpus(dir.path(), 4);
    let r = reference();
    let want: BTreeMap<String, String> = r["flagged"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    assert!(
        want.len() > 300,
        "the reference flags {} documents",
        want.len()
    );

    // Tagged: every document kept, the flagged ones named.
    let tagged = dir.path().join("tagged");
    let s = spec(dir.path(), &tagged, "tag", "");
    run_ok(mdf().args(["run", s.to_str().unwrap(), "--workers", "2"]));
    let b = output_batches(&tagged);
    let (ids, docs, first) = (
        strings(&b, "id"),
        strings(&b, "doc"),
        strings(&b, "contamination"),
    );
    assert_eq!(docs.len(), 2789);
    let got: BTreeMap<String, String> = docs
        .iter()
        .zip(&first)
        .filter(|(_, f)| !f.is_empty())
        .map(|(d, f)| (d.clone(), f.clone()))
        .collect();
    let missed: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    assert!(
        missed.is_empty() && extra.is_empty(),
        "datatrove flags but mdf does not: {missed:?}; mdf flags but datatrove does not: {extra:?}"
    );
    assert_eq!(got, want, "the benchmark of each flagged document");
    let doc_of: BTreeMap<String, String> = ids.into_iter().zip(docs).collect();
    let rows = table_rows(&tagged, &doc_of);
    let in_table: BTreeSet<&String> = rows.iter().map(|(d, _, _)| d).collect();
    assert_eq!(
        in_table,
        want.keys().collect(),
        "one row or more per flagged document"
    );
    // A quiz item is found at least in the page it was cut from.
    let pages = corpus();
    assert!(
        rows.iter()
            .all(|(_, b, item)| b == "quiz" && item.starts_with('q'))
    );
    for (i, (doc, _)) in pages.iter().enumerate() {
        let item = format!("q{i}");
        if rows.iter().any(|(_, _, it)| *it == item) {
            assert!(rows.contains(&(doc.clone(), "quiz".into(), item)), "{doc}");
        }
    }

    // Dropped, with workers killed mid-task: the same documents become rejects, the
    // same table, nothing else lost.
    let dropped = dir.path().join("dropped");
    let s = spec(
        dir.path(),
        &dropped,
        "drop",
        "- {op: throttle, params: {records_per_sec: 400}}",
    );
    let jobs = dir.path().join("jobs");
    let job = submit_job(&s, &jobs);
    let spawn = |id: &str| spawn_worker(&job, id);
    let mut a = spawn("a");
    let mut b2 = spawn("b");
    // Killed once it holds a task (its first lease), a little into it.
    kill_once_it_holds(&jobs, &mut a, "a", "p00");
    let mut c = spawn("c");
    for w in [&mut b2, &mut c] {
        assert!(w.wait().unwrap().success());
    }
    let st = status_json(&job);
    assert_eq!(st["succeeded"], true, "{st:#}");
    assert!(a_lease_was_lost(&jobs, "p00"), "the kill missed every task");
    let kept: BTreeSet<String> = strings(&output_batches(&dropped), "doc")
        .into_iter()
        .collect();
    let all: BTreeSet<String> = pages.iter().map(|(d, _)| d.clone()).collect();
    let clean: BTreeSet<String> = all
        .iter()
        .filter(|d| !want.contains_key(*d))
        .cloned()
        .collect();
    assert_eq!(kept, clean);
    let m = manifest(&dropped);
    let mut rejected = BTreeSet::new();
    for f in m["rejects"].as_array().unwrap() {
        let rj = read_parquet(&dropped.join("_rejects").join(f["path"].as_str().unwrap()));
        for (reason, rec) in strings(&rj, "reason").iter().zip(strings(&rj, "record")) {
            assert_eq!(reason, "contaminated");
            let v: serde_json::Value = serde_json::from_str(&rec).unwrap();
            assert!(
                rejected.insert(v["doc"].as_str().unwrap().to_string()),
                "rejected twice"
            );
        }
    }
    assert_eq!(rejected, want.keys().cloned().collect());
    assert_eq!(
        table_rows(&dropped, &doc_of),
        rows,
        "the same table after kills"
    );
    assert!(
        orphans(&dropped).is_empty(),
        "orphans: {:?}",
        orphans(&dropped)
    );
}

#[test]
fn bad_benchmarks_and_params_are_refused_at_submit_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    write_lines(
        &dir.path().join("in/a.jsonl"),
        &[r#"{"text": "hello"}"#.to_string()],
    );
    let evals = dir.path().join("evals");
    std::fs::create_dir_all(&evals).unwrap();
    std::fs::write(evals.join("empty.jsonl"), "").unwrap();
    std::fs::write(evals.join("short.jsonl"), "{\"question\": \"too short\"}\n").unwrap();
    std::fs::write(evals.join("broken.jsonl"), "{\"question\": \n").unwrap();
    let try_spec = |params: &str| {
        let s = write_spec(
            dir.path(),
            &format!(
                "version: 1\nname: bad\ninput: {{uris: [\"{}/in/*.jsonl\"]}}\nstages:\n  - {{op: decontaminate, params: {params}}}\noutput: {{uri: \"{}/out\"}}\n",
                dir.path().display(),
                dir.path().display()
            ),
        );
        let o = mdf()
            .args(["submit", s.to_str().unwrap(), "--job-root"])
            .arg(dir.path().join("jobs"))
            .output()
            .unwrap();
        (o.status.success(), stderr(&o))
    };
    let refused = |params: String| {
        let (ok, err) = try_spec(&params);
        assert!(!ok, "accepted {params}");
        err
    };
    let e = |f: &str| format!("{}/{f}", evals.display());
    let err = refused(format!(
        "{{benchmarks: [\"{}\"], fields: [question]}}",
        e("empty.jsonl")
    ));
    assert!(
        err.contains("stages[0].params.benchmarks[0]") && err.contains("empty benchmark"),
        "{err}"
    );
    let (ok, err) = try_spec(&format!(
        "{{benchmarks: [\"{}\"], fields: [question], n: 2}}",
        e("short.jsonl")
    ));
    assert!(ok, "two words make an n-gram of 2: {err}");
    let err = refused(format!(
        "{{benchmarks: [\"{}\"], fields: [question]}}",
        e("broken.jsonl")
    ));
    assert!(
        err.contains("stages[0].params.benchmarks[0]") && err.contains("line 1"),
        "{err}"
    );
    let err = refused(format!(
        "{{benchmarks: [\"{}\"], fields: [question], n: 0}}",
        e("short.jsonl")
    ));
    assert!(err.contains("params.n"), "{err}");
    let err = refused(format!(
        "{{benchmarks: [\"{}\"], fields: []}}",
        e("short.jsonl")
    ));
    assert!(err.contains("params.fields"), "{err}");
    let err = refused(format!(
        "{{benchmarks: [\"{}\"], fields: [q], action: keep}}",
        e("short.jsonl")
    ));
    assert!(err.contains("params.action"), "{err}");
    let err = refused(format!(
        "{{benchmarks: [\"{}\"], fields: [q]}}",
        e("missing.jsonl")
    ));
    assert!(
        err.contains("benchmarks[0]") && err.contains("does not exist"),
        "{err}"
    );
}

#[test]
fn the_decontaminate_example_drops_the_leaked_documents() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    run_ok(
        mdf()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["run", "examples/decontaminate.yaml", "--workers", "2", "-o"])
            .arg(&out)
            .arg("--job-root")
            .arg(dir.path().join("jobs")),
    );
    let m = manifest(&out);
    let files = m["tables"]["decont"].as_array().unwrap();
    let b: Vec<_> = files
        .iter()
        .flat_map(|f| read_parquet(&out.join(f["path"].as_str().unwrap())))
        .collect();
    let mut items = strings(&b, "item");
    items.sort();
    assert_eq!(
        items,
        ["leaked-0", "leaked-1"],
        "the two leaked items, nothing else"
    );
    let ids: BTreeSet<String> = strings(&b, "id").into_iter().collect();
    assert!(
        ids.iter().all(|i| !output_ids(&out).contains(i)),
        "matched documents are gone"
    );
    assert!(orphans(&out).is_empty());
}

/// A side table published under a name an earlier job's file already has (same task
/// ids: the table's phase is not the last, so output settings do not name it; the
/// overwrite leaves the old file until finalize) is copied over, not taken for this
/// job's: the manifest's sizes and hashes are those of the files there.
#[test]
fn a_stale_table_file_of_an_overwritten_job_is_replaced_not_kept() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let spec = |compression: &str| {
        write_spec(
            dir.path(),
            &format!(
                r#"
version: 1
name: stale-{compression}
input: {{uris: ["{root}/examples/data/quickstart/*.jsonl"]}}
stages:
  - name: decont
    op: decontaminate
    params: {{benchmarks: ["{root}/examples/data/evals/quiz.jsonl"], fields: [question, answer], id_field: id, action: tag}}
    end_phase: true
  - {{name: len, op: text_length}}
output: {{uri: "{out}", compression: {compression}, overwrite: true}}
job: {{max_files_per_task: 100}}
"#,
                root = root.display(),
                out = out.display()
            ),
        )
    };
    run_ok(mdf().args(["run", spec("zstd").to_str().unwrap()]));
    let jobs = dir.path().join("jobs");
    let job = submit_job(&spec("snappy"), &jobs);
    // Its first task's publish fails (finalize publishes it), then a clean worker ends.
    let w = mdf()
        .args([
            "worker",
            "--job",
            &job,
            "--worker-id",
            "w1",
            "--max-tasks",
            "1",
        ])
        .env("MDF_FAULTS", "copy:before:1:_tables/")
        .output()
        .unwrap();
    assert!(w.status.success(), "{}", stderr(&w));
    assert!(spawn_worker(&job, "w2").wait().unwrap().success());
    assert_eq!(status_json(&job)["succeeded"], true);
    let m = manifest(&out);
    let files = m["tables"]["decont"].as_array().unwrap();
    assert!(!files.is_empty());
    for f in files {
        let b = std::fs::read(out.join(f["path"].as_str().unwrap())).unwrap();
        assert_eq!(f["bytes"].as_u64(), Some(b.len() as u64), "{f}");
        assert_eq!(
            f["blake3"].as_str(),
            Some(blake3::hash(&b).to_hex().as_str()),
            "{f}"
        );
    }
}
