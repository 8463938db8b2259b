//! Paragraph and line dedup (`dedup` with `kind: paragraph`) against
//! scripts/paragraph-dedup-reference.py, a plain-Python reference written from
//! docs/DEDUP.md alone (units compared as strings, no hashing, no shuffle), on real
//! text (../shared/data/extraction-wceb) with boilerplate pasted into many pages
//! (menus, cookie notices, copyright lines that differ only in case, punctuation,
//! digits or surrounding white space) and on pages mdf extracted from real WARCs:
//! every cut byte span, every text left and every reject must be the reference's; the
//! same with other worker and partition counts, a memory budget that spills, and a
//! worker killed mid-task.
mod common;

use common::*;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Cut byte spans, the text left, and whether it was rejected, by record id.
type Cuts = BTreeMap<u128, (Vec<(usize, usize)>, String, bool)>;

const MIN_CHARS: u32 = 20;

fn data() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data");
    assert!(
        d.join("extraction-wceb").is_dir(),
        "{} is missing: the paragraph reference runs on the shared real-text data",
        d.display()
    );
    d
}

/// Real pages with boilerplate pasted in: paragraphs (l3s-gn1, wcxb: blank lines
/// between paragraphs) and line-structured pages (cleaneval).
fn corpus() -> Vec<(String, String)> {
    let mut pages = Vec::new();
    for (source, n) in [("l3s-gn1", 120), ("wcxb", 120), ("cleaneval", 80)] {
        let p = data()
            .join("extraction-wceb")
            .join(source)
            .join("ground-truth.json");
        let d: BTreeMap<String, serde_json::Value> =
            serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        for (k, v) in d.into_iter().take(n) {
            let t = v.get("text").unwrap_or(&v).as_str().unwrap_or("");
            pages.push((format!("{source}/{k}"), t.to_string()));
        }
    }
    let menu = [
        "Home | News | Sport | Contact",
        "Home | News | Sport | Contact  ",
        "\tHome | News | Sport | Contact",
    ];
    let cookie = [
        "We use cookies to improve your experience. By continuing you accept our Cookie Policy.",
        "WE USE COOKIES to improve your experience, by continuing you accept our cookie policy!",
    ];
    let n = pages.len();
    let mut out = pages.clone();
    for (i, (_, t)) in out.iter_mut().enumerate() {
        let mut head = Vec::new();
        let mut tail = Vec::new();
        if i % 3 == 0 {
            head.push(menu[i % menu.len()].to_string());
        }
        if i % 4 == 0 {
            tail.push(cookie[(i / 4) % 2].to_string());
        }
        if i % 5 == 1 {
            tail.push(format!(
                "© {} Example Media. All rights reserved.",
                2000 + i % 23
            ));
        }
        if i % 6 == 2 {
            head.push("Mehr zum Thema – Überblick".into());
            tail.push(
                if i % 12 == 2 {
                    "ΣΧΟΛΙΑΣ"
                } else {
                    "σχολιας"
                }
                .into(),
            );
        }
        if i % 7 == 3 {
            // A paragraph of another page, as a paragraph of its own.
            let src = &pages[(i * 5 + 11) % n].1;
            if let Some(p) = src.split("\n\n").find(|p| p.len() > 80) {
                tail.push(p.trim().to_string());
            }
        }
        let sep = if t.contains("\n\n") { "\n\n" } else { "\n" };
        let mut parts = head;
        parts.push(t.clone());
        parts.extend(tail);
        *t = parts.join(sep);
        if i % 10 == 9 {
            *t = t.replace('\n', "\r\n");
        }
    }
    for i in (0..n).step_by(11) {
        out.push((format!("copy-of/{}", out[i].0), out[i].1.clone()));
    }
    // A page of boilerplate only, and a page of one line repeated.
    out.push((
        "only-boilerplate".into(),
        format!("{}\n\n{}\n", menu[0], cookie[0]),
    ));
    out.push((
        "repeated".into(),
        "The one line of a page of one line\n".repeat(30),
    ));
    out
}

fn write_corpus(dir: &Path, docs: &[(String, String)], files: usize) {
    std::fs::create_dir_all(dir.join("in")).unwrap();
    for f in 0..files {
        let lines: Vec<String> = docs
            .iter()
            .enumerate()
            .filter(|(i, _)| i % files == f)
            .map(|(_, (d, t))| serde_json::json!({"doc": d, "text": t}).to_string())
            .collect();
        write_lines(&dir.join(format!("in/part-{f}.jsonl")), &lines);
    }
}

/// A paragraph dedup's params, as the reference reads them.
#[derive(Clone, Copy)]
struct Params {
    unit: &'static str,
    min_count: u32,
    keep_first: bool,
    /// none, ccnet or loose.
    normalize: &'static str,
    min_chars: u32,
}

impl Params {
    fn yaml(&self) -> String {
        format!(
            "key: text, kind: paragraph, unit: {}, min_count: {}, keep: {}, normalize: {}, min_chars: {}",
            self.unit,
            self.min_count,
            if self.keep_first { "first" } else { "none" },
            self.normalize,
            self.min_chars
        )
    }
}

fn spec(dir: &Path, input: &str, out: &Path, p: Params, extra_params: &str, pre: &str) -> PathBuf {
    write_spec(
        dir,
        &format!(
            r#"
version: 1
name: para
input: {{uris: ["{input}"]}}
stages:
  {pre}
  - name: para
    op: dedup
    params: {{{}{extra_params}}}
output: {{uri: "{}"}}
job: {{max_files_per_task: 1}}
"#,
            p.yaml(),
            out.display()
        ),
    )
}

/// What the reference cuts from the records (id, text).
fn reference(p: Params, docs: &[(u128, &str)]) -> Cuts {
    let req = serde_json::json!({
        "unit": p.unit,
        "min_count": p.min_count,
        "keep_first": p.keep_first,
        "normalize": p.normalize,
        "min_chars": p.min_chars,
        "docs": docs.iter().map(|(id, t)| (format!("{id:x}"), *t)).collect::<Vec<_>>(),
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/paragraph-dedup-reference.py");
    let mut child = std::process::Command::new("python3")
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let input = serde_json::to_vec(&req).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input).unwrap());
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(o.status.success(), "the reference failed");
    let v: BTreeMap<String, serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    v.into_iter()
        .map(|(id, r)| {
            let spans = r["spans"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    (
                        s[0].as_u64().unwrap() as usize,
                        s[1].as_u64().unwrap() as usize,
                    )
                })
                .collect();
            (
                u128::from_str_radix(&id, 16).unwrap(),
                (
                    spans,
                    r["text"].as_str().unwrap().to_string(),
                    r["rejected"].as_bool().unwrap(),
                ),
            )
        })
        .collect()
}

/// Every record's (id → doc, text if kept), from the output and the rejects.
fn records(out: &Path, doc_col: &str) -> BTreeMap<u128, (String, Option<String>)> {
    cut_records(out, doc_col, "paragraph_duplicate")
}

/// The side table: cut byte spans by record id (none when nothing was cut).
fn table(out: &Path) -> BTreeMap<u128, Vec<(usize, usize)>> {
    side_table(out, "para")
}

/// Checks a run's output against the reference given the texts as they reached the
/// stage (`text_of`, by the `doc_col` value). Returns (records cut, rejected).
fn check(
    out: &Path,
    doc_col: &str,
    text_of: &HashMap<String, String>,
    p: Params,
) -> (usize, usize) {
    let recs = records(out, doc_col);
    assert_eq!(
        recs.len(),
        text_of.len(),
        "every record is kept or rejected"
    );
    let by_id: Vec<(u128, &str)> = recs
        .iter()
        .map(|(id, (doc, _))| (*id, text_of[doc].as_str()))
        .collect();
    let want = reference(p, &by_id);
    let got = table(out);
    let want_spans: BTreeMap<u128, Vec<(usize, usize)>> =
        want.iter().map(|(k, v)| (*k, v.0.clone())).collect();
    let missed: Vec<_> = want_spans.keys().filter(|k| !got.contains_key(k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !want_spans.contains_key(k)).collect();
    assert!(
        missed.is_empty() && extra.is_empty(),
        "records the reference cuts but mdf does not: {missed:x?}; the other way: {extra:x?}"
    );
    assert_eq!(got, want_spans, "the cut byte spans");
    let mut rejected = 0;
    for (id, (doc, text)) in &recs {
        match (want.get(id), text) {
            (None, Some(t)) => assert_eq!(t, &text_of[doc], "{doc}: nothing cut"),
            (None, None) => panic!("{doc}: rejected, but nothing is cut from it"),
            (Some((_, left, false)), Some(t)) => assert_eq!(t, left, "{doc}: the text left"),
            (Some((_, left, true)), None) => {
                assert!(left.chars().filter(|c| !c.is_whitespace()).count() < p.min_chars as usize);
                rejected += 1;
            }
            (Some((_, left, r)), t) => {
                panic!("{doc}: the reference rejects: {r}, mdf keeps {t:?}; left: {left:?}")
            }
        }
    }
    (want.len(), rejected)
}

const CASES: [Params; 5] = [
    Params {
        unit: "paragraph",
        min_count: 2,
        keep_first: true,
        normalize: "none",
        min_chars: MIN_CHARS,
    },
    Params {
        unit: "line",
        min_count: 3,
        keep_first: false,
        normalize: "loose",
        min_chars: MIN_CHARS,
    },
    Params {
        unit: "line",
        min_count: 2,
        keep_first: true,
        normalize: "ccnet",
        min_chars: MIN_CHARS,
    },
    Params {
        unit: "paragraph",
        min_count: 2,
        keep_first: false,
        normalize: "loose",
        min_chars: MIN_CHARS,
    },
    Params {
        unit: "line",
        min_count: 2,
        keep_first: true,
        normalize: "none",
        min_chars: MIN_CHARS,
    },
];

#[test]
fn cuts_what_the_python_reference_cuts() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus();
    write_corpus(dir.path(), &docs, 3);
    let text_of: HashMap<String, String> = docs.iter().cloned().collect();
    let input = format!("{}/in/*.jsonl", dir.path().display());
    for (c, p) in CASES.into_iter().enumerate() {
        let out = dir.path().join(format!("out-{c}"));
        let s = spec(dir.path(), &input, &out, p, ", partitions: 3", "");
        let o = run_ok(mdf().args(["run", s.to_str().unwrap(), "--workers", "2"]));
        let (cut, rejected) = check(&out, "doc", &text_of, p);
        let copies = docs
            .iter()
            .filter(|(d, _)| d.starts_with("copy-of/"))
            .count();
        assert!(cut > docs.len() / 3, "case {c}: only {cut} records cut");
        assert!(rejected >= 1, "case {c}: the boilerplate-only page stays");
        if p.keep_first {
            // A page of one repeated line keeps one of them.
            let rep = records(&out, "doc")
                .into_values()
                .find(|(d, _)| d == "repeated")
                .and_then(|(_, t)| t);
            if p.unit == "line" {
                assert_eq!(
                    rep.as_deref(),
                    Some("The one line of a page of one line\n"),
                    "case {c}"
                );
            }
            assert!(
                rejected >= copies,
                "case {c}: {rejected} rejected, {copies} copies"
            );
        }
        // What was cut is in the apply stage's stats (`mdf status`).
        let t = table(&out);
        let st = status_json(&job_uri(&o));
        let stage = &st["phases"][2]["stats"]["stages"][0];
        assert_eq!(stage["stage"], "para");
        let bytes: usize = t.values().flatten().map(|(a, b)| b - a).sum();
        let spans: usize = t.values().map(Vec::len).sum();
        assert_eq!(
            stage["totals"]["para_removed_bytes"]["sum"].as_u64(),
            Some(bytes as u64)
        );
        assert_eq!(
            stage["totals"]["para_removed_spans"]["sum"].as_u64(),
            Some(spans as u64)
        );
        assert_eq!(
            stage["reasons"]["paragraph_duplicate"].as_u64(),
            Some(rejected as u64)
        );
    }
}

/// Normalisation matters: the copyright lines differ in case and digits (CCNet's
/// normalisation joins them) or also in ASCII punctuation and white space (only the
/// loose one does).
#[test]
fn normalize_joins_what_differs_only_in_case_punctuation_and_digits() {
    let dir = tempfile::tempdir().unwrap();
    let docs: Vec<(String, String)> = [
        "Main text of page one, long enough to stay.\n© 2001 Example Media. All rights reserved.",
        "Main text of page two, long enough to stay.\n© 2019 example media — all rights reserved",
        "Main text of page three, long enough to stay.\n\u{a0}©\t2020 EXAMPLE MEDIA: ALL RIGHTS RESERVED!!\u{3000}",
        "Main text of page four, long enough to stay.\nCopyright 2001 Example Media",
        "Main text of page five, long enough to stay.\nCOPYRIGHT 2019 EXAMPLE MEDIA",
    ]
    .iter()
    .enumerate()
    .map(|(i, t)| (format!("d{i}"), t.to_string()))
    .collect();
    write_corpus(dir.path(), &docs, 1);
    let text_of: HashMap<String, String> = docs.iter().cloned().collect();
    let input = format!("{}/in/*.jsonl", dir.path().display());
    for (normalize, want) in [("none", 0), ("ccnet", 2), ("loose", 5)] {
        let p = Params {
            unit: "line",
            min_count: 2,
            keep_first: false,
            normalize,
            min_chars: MIN_CHARS,
        };
        let out = dir.path().join(format!("out-{normalize}"));
        let s = spec(dir.path(), &input, &out, p, "", "");
        run_ok(mdf().args(["run", s.to_str().unwrap()]));
        let (cut, _) = check(&out, "doc", &text_of, p);
        assert_eq!(cut, want, "normalize: {normalize}");
    }
}

/// Pages mdf extracted from real WARCs (real menus and footers): a first job
/// extracts, a second dedups the lines of its output.
#[test]
fn cuts_the_repeated_lines_of_real_extracted_pages() {
    let dir = tempfile::tempdir().unwrap();
    let warcs = data().join("warc");
    let extracted = dir.path().join("extracted");
    let s = write_spec(
        dir.path(),
        &format!(
            r#"
version: 1
name: extract
input: {{uris: ["{w}/other-crawlers/*.warc.gz", "{w}/commoncrawl/resiliparse_CC-MAIN-2020-34_excerpt.warc.gz"]}}
stages:
  - op: html_extract
output: {{uri: "{}", drop_columns: [html]}}
"#,
            extracted.display(),
            w = warcs.display()
        ),
    );
    run_ok(mdf().args(["run", s.to_str().unwrap()]));
    let b = output_batches(&extracted);
    let text_of: HashMap<String, String> = strings(&b, "id")
        .into_iter()
        .zip(strings(&b, "text"))
        .collect();
    assert!(text_of.len() > 40, "{} pages extracted", text_of.len());
    let p = Params {
        unit: "line",
        min_count: 2,
        keep_first: true,
        normalize: "none",
        min_chars: MIN_CHARS,
    };
    let out = dir.path().join("out");
    let s = spec(
        dir.path(),
        &format!("{}/*.parquet", extracted.display()),
        &out,
        p,
        ", partitions: 2",
        "",
    );
    run_ok(mdf().args(["run", s.to_str().unwrap(), "--workers", "2"]));
    // The input's ids are kept as source_id: the record's doc key.
    let (cut, _) = check(&out, "source_id", &text_of, p);
    assert!(cut >= 5, "only {cut} pages share a line");
}

/// One worker and one partition; or a tiny memory budget (every sort spills), five
/// partitions and two workers, one killed mid-task and a third taking over: the same
/// cuts, the same texts, nothing left over.
#[test]
fn the_same_cuts_whatever_the_workers_partitions_memory_and_kills() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus();
    write_corpus(dir.path(), &docs, 4);
    let text_of: HashMap<String, String> = docs.iter().cloned().collect();
    let input = format!("{}/in/*.jsonl", dir.path().display());
    let p = CASES[1];
    let one = dir.path().join("one");
    let s = spec(dir.path(), &input, &one, p, ", partitions: 1", "");
    run_ok(mdf().args(["run", s.to_str().unwrap(), "--workers", "1"]));
    check(&one, "doc", &text_of, p);

    let killed = dir.path().join("killed");
    let s = spec(
        dir.path(),
        &input,
        &killed,
        p,
        ", partitions: 5, memory: 4KiB",
        "- {op: throttle, params: {records_per_sec: 200}}",
    );
    let jobs = dir.path().join("jobs");
    let job = submit_job(&s, &jobs);
    let mut a = spawn_worker(&job, "a");
    let mut b = spawn_worker(&job, "b");
    kill_once_it_holds(&jobs, &mut a, "a", "p00");
    let mut c = spawn_worker(&job, "c");
    for w in [&mut b, &mut c] {
        assert!(w.wait().unwrap().success());
    }
    assert_eq!(status_json(&job)["succeeded"], true);
    assert!(a_lease_was_lost(&jobs, "p00"), "the kill missed every task");
    check(&killed, "doc", &text_of, p);
    assert_eq!(table(&killed), table(&one));
    assert_eq!(records(&killed, "doc"), records(&one, "doc"));
    assert!(
        orphans(&killed).is_empty(),
        "orphans: {:?}",
        orphans(&killed)
    );

    // The same budget in one process, where the log shows both sides spilling.
    let spilled = dir.path().join("spilled");
    let s = spec(
        dir.path(),
        &input,
        &spilled,
        p,
        ", partitions: 2, memory: 4KiB",
        "",
    );
    let o = run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "2"])
            .env("RUST_LOG", "mdf=info"),
    );
    let log = stderr(&o) + &stdout(&o);
    assert!(log.contains("were spilled to disk"), "the map side: {log}");
    assert!(
        log.contains("exceeded the reduce memory budget"),
        "the reduce side: {log}"
    );
    assert_eq!(table(&spilled), table(&one));
    assert_eq!(records(&spilled, "doc"), records(&one, "doc"));
}

/// A spec that cannot run is refused before any task starts, naming the field.
#[test]
fn bad_paragraph_params_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    write_lines(
        &dir.path().join("in/a.jsonl"),
        &[r#"{"text": "a b c", "n": 1}"#.to_string()],
    );
    let cases = [
        (
            "{key: text, kind: paragraph, min_count: 1}",
            "stages[0].params.min_count",
        ),
        (
            "{key: text, kind: paragraph, unit: sentence}",
            "stages[0].params.unit",
        ),
        (
            "{key: text, kind: paragraph, keep: lowest_id}",
            "stages[0].params.keep",
        ),
        (
            "{key: text, kind: paragraph, normalize: 3}",
            "stages[0].params.normalize",
        ),
        (
            "{key: text, kind: paragraph, normalize: true}",
            "stages[0].params.normalize",
        ),
        (
            "{key: text, kind: paragraph, min_tokens: 5}",
            "stages[0].params.min_tokens",
        ),
        ("{key: n, kind: paragraph}", "stages[0].params.key"),
        ("{key: nope, kind: paragraph}", "stages[0].params.key"),
        (
            "{key: text, kind: paragraph, cluster_column: true}",
            "stages[0].params.cluster_column",
        ),
        (
            "{key: text, kind: paragraph, against: /tmp/x}",
            "stages[0].params.against",
        ),
        (
            "{key: text, kind: substring, unit: line}",
            "stages[0].params.unit",
        ),
    ];
    assert_dedup_params_refused(dir.path(), "para", &cases);
}

/// The bundled example runs and cuts the boilerplate its pages share.
#[test]
fn the_paragraph_example_cuts_the_shared_boilerplate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    run_ok(
        mdf()
            .current_dir(root)
            .args(["run", "examples/paragraph-dedup.yaml", "--output"])
            .arg(&out),
    );
    let lines: Vec<String> =
        std::fs::read_to_string(root.join("examples/data/paragraph/pages.jsonl"))
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
    let text_of: HashMap<String, String> = lines
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["url"].as_str().unwrap().to_string(),
                v["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let p = Params {
        unit: "line",
        min_count: 2,
        keep_first: true,
        normalize: "loose",
        min_chars: 50,
    };
    let (cut, _) = check(&out, "url", &text_of, p);
    assert!(cut >= 3, "only {cut} pages cut");
    let kept: String = records(&out, "url")
        .into_values()
        .filter_map(|(_, t)| t)
        .collect();
    for line in [
        "Subscribe to our newsletter for the morning briefing.",
        "Comments are closed.",
    ] {
        assert_eq!(kept.matches(line).count(), 1, "{line}");
    }
    // The two spellings of the cookie notice are one line once normalised.
    assert_eq!(kept.to_lowercase().matches("cookie policy").count(), 1);
}
