//! Exact-substring dedup (`dedup` with `kind: substring`) against a suffix-array
//! reference built here by brute force, on real text (../shared/data/extraction-wceb)
//! with passages copied between pages: the byte spans `mdf run` cuts (its side table)
//! must be exactly the spans of every window of `min_tokens` words that occurs more
//! than once, at every occurrence but the first (lowest record id, then position) or
//! at all of them; the same with other worker and partition counts and a worker
//! killed mid-task.
mod common;

use common::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

const K: usize = 12;

/// A document for the reference: its id, its tokens, and their byte ranges.
type TokenDoc = (u128, Vec<u64>, Vec<(usize, usize)>);
/// Cut byte spans by record id.
type Spans = BTreeMap<u128, Vec<(usize, usize)>>;
/// The spans a reference cuts from records (id, text).
type Reference<'a> = dyn Fn(&[(u128, &str)]) -> Spans + 'a;

fn data() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/extraction-wceb");
    assert!(
        d.is_dir(),
        "{} is missing: the substring reference runs on the shared real-text data",
        d.display()
    );
    d
}

/// Real pages, and pages made of them: every 4th page gets a passage of another page
/// pasted into its middle, every 9th is copied whole under another name.
fn corpus() -> Vec<(String, String)> {
    let mut pages = Vec::new();
    for source in ["cleaneval", "l3s-gn1"] {
        let p = data().join(source).join("ground-truth.json");
        let d: BTreeMap<String, serde_json::Value> =
            serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        for (k, v) in d.into_iter().take(180) {
            let t = v.get("text").unwrap_or(&v).as_str().unwrap_or("");
            pages.push((format!("{source}/{k}"), t.to_string()));
        }
    }
    let n = pages.len();
    let mut out = pages.clone();
    for i in (0..n).step_by(4) {
        let src = &pages[(i * 7 + 3) % n].1;
        let words: Vec<&str> = src.split_whitespace().collect();
        if words.len() < 40 {
            continue;
        }
        let a = (i * 13) % (words.len() - 30);
        let len = 15 + (i * 31) % 60;
        let passage = words[a..(a + len).min(words.len())].join(" ");
        let t = &out[i].1;
        // At a word boundary near the middle (a char boundary: whitespace is one).
        let mid = t[..t.len() / 2].rfind(char::is_whitespace).unwrap_or(0);
        out[i].1 = format!("{} {passage}{}", &t[..mid], &t[mid..]);
    }
    for i in (0..n).step_by(9) {
        out.push((format!("copy-of/{}", out[i].0), out[i].1.clone()));
    }
    // Periodic text (a repeated row shorter than a window): its first occurrence must
    // stay whole, though every later window overlaps it.
    out.push(("periodic".into(), "Home | News | Sport | ".repeat(40)));
    out.push(("word".into(), "spam ".repeat(300)));
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

fn spec(dir: &Path, out: &Path, keep: &str, partitions: u32, extra: &str) -> PathBuf {
    write_spec(
        dir,
        &format!(
            r#"
version: 1
name: substr-{keep}
input: {{uris: ["{}/in/*.jsonl"]}}
stages:
  {extra}
  - name: substr
    op: dedup
    params: {{key: text, kind: substring, min_tokens: {K}, keep: {keep}, min_chars: 20, partitions: {partitions}}}
output: {{uri: "{}"}}
job: {{max_files_per_task: 1}}
"#,
            dir.display(),
            out.display()
        ),
    )
}

/// Whitespace words: maximal runs of non-whitespace characters, as byte ranges.
fn words(t: &str) -> Vec<(usize, usize)> {
    let mut w = Vec::new();
    let mut start = None;
    for (i, c) in t.char_indices().chain([(t.len(), ' ')]) {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                w.push((s, i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    w
}

/// [`reference_tokens`] over whitespace words.
fn reference(
    docs: &[(u128, &str)],
    k: usize,
    keep_first: bool,
) -> BTreeMap<u128, Vec<(usize, usize)>> {
    let mut vocab: HashMap<&str, u64> = HashMap::new();
    let docs: Vec<TokenDoc> = docs
        .iter()
        .map(|(id, t)| {
            let w = words(t);
            let seq = w
                .iter()
                .map(|&(a, b)| {
                    let n = vocab.len() as u64;
                    *vocab.entry(&t[a..b]).or_insert(n)
                })
                .collect();
            (*id, seq, w)
        })
        .collect();
    reference_tokens(&docs, k, keep_first)
}

/// The reference: a suffix array over the corpus's tokens (each document closed by a
/// separator of its own, so no match crosses documents), adjacent suffixes sharing
/// at least `k` tokens grouped; in each group of two or more, every occurrence but the
/// first by (id, position) (or all, without `keep_first`) marks its `k` tokens to cut,
/// and the first (with `keep_first`) marks its tokens kept; each run of a document's
/// tokens marked to cut and not kept is a byte span from the run's first token's start
/// to its last token's end (spans that meet, merged).
fn reference_tokens(
    docs: &[TokenDoc],
    k: usize,
    keep_first: bool,
) -> BTreeMap<u128, Vec<(usize, usize)>> {
    let mut seq: Vec<u64> = Vec::new();
    let mut at: Vec<(usize, usize)> = Vec::new(); // (doc, token) of each position
    for (d, (_, toks, _)) in docs.iter().enumerate() {
        for (j, &t) in toks.iter().enumerate() {
            seq.push(t);
            at.push((d, j));
        }
        seq.push(u64::MAX - d as u64); // this document's separator
        at.push((d, usize::MAX));
    }
    // Suffix array by prefix doubling; LCP by Kasai's algorithm.
    let n = seq.len();
    let mut rank: Vec<u64> = seq.clone();
    let mut sa: Vec<usize> = (0..n).collect();
    let mut h = 1;
    loop {
        let key = |i: usize| (rank[i], if i + h < n { Some(rank[i + h]) } else { None });
        sa.sort_unstable_by_key(|&i| key(i));
        let mut next = vec![0u64; n];
        for j in 1..n {
            next[sa[j]] = next[sa[j - 1]] + u64::from(key(sa[j]) != key(sa[j - 1]));
        }
        let done = next[sa[n - 1]] == n as u64 - 1;
        rank = next;
        if done {
            break;
        }
        h *= 2;
    }
    let mut lcp = vec![0usize; n];
    let mut l = 0usize;
    for i in 0..n {
        let r = rank[i] as usize;
        if r == 0 {
            l = 0;
            continue;
        }
        let j = sa[r - 1];
        while i + l < n && j + l < n && seq[i + l] == seq[j + l] {
            l += 1;
        }
        lcp[r] = l;
        l = l.saturating_sub(1);
    }
    // Per document and token: inside a window to cut, inside a kept first occurrence.
    let mut cut: Vec<Vec<bool>> = docs.iter().map(|d| vec![false; d.1.len()]).collect();
    let mut kept = cut.clone();
    let mut j = 0;
    while j < n {
        let mut e = j + 1;
        while e < n && lcp[e] >= k {
            e += 1;
        }
        if e - j >= 2 {
            let mut occ: Vec<(u128, usize, usize)> = sa[j..e]
                .iter()
                .map(|&p| (docs[at[p].0].0, at[p].1, at[p].0))
                .collect();
            occ.sort_unstable();
            for (o, &(_, w, d)) in occ.iter().enumerate() {
                let to = if keep_first && o == 0 {
                    &mut kept
                } else {
                    &mut cut
                };
                to[d][w..w + k].iter_mut().for_each(|x| *x = true);
            }
        }
        j = e;
    }
    let mut out = BTreeMap::new();
    for d in 0..docs.len() {
        // As sets of bytes: a run of tokens cut and not kept spans from its first byte
        // to its last; bytes any token outside the run covers stay (pieces of one
        // character); tokens without bytes (special tokens) count for nothing.
        let w = &docs[d].2;
        let gone = |t: usize| cut[d][t] && !kept[d][t];
        let len = w.iter().map(|x| x.1).max().unwrap_or(0);
        let mut covered = vec![false; len];
        for (t, &(a, b)) in w.iter().enumerate() {
            if !gone(t) {
                covered[a..b].iter_mut().for_each(|x| *x = true);
            }
        }
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let mut t = 0;
        while t < w.len() {
            if !gone(t) {
                t += 1;
                continue;
            }
            let a = t;
            while t < w.len() && gone(t) {
                t += 1;
            }
            // The bytes of the run's tokens that no other token covers.
            let free: BTreeSet<usize> = w[a..t]
                .iter()
                .flat_map(|&(x, y)| x..y)
                .filter(|&b| !covered[b])
                .collect();
            if let (Some(&s), Some(&e)) = (free.first(), free.last()) {
                match spans.last_mut() {
                    Some(x) if s <= x.1 => x.1 = x.1.max(e + 1),
                    _ => spans.push((s, e + 1)),
                }
            }
        }
        if !spans.is_empty() {
            out.insert(docs[d].0, spans);
        }
    }
    out
}

/// Every record's (id, doc, text as it arrived), from the output and the rejects
/// (whose records are kept as they reached the stage).
fn records(out: &Path) -> BTreeMap<u128, (String, Option<String>)> {
    cut_records(out, "doc", "substring_duplicate")
}

/// The side table: the cut byte spans by record id.
fn table(out: &Path) -> BTreeMap<u128, Vec<(usize, usize)>> {
    side_table(out, "substr")
}

/// Checks a run's output against the reference: the cut spans, the texts left, and
/// the rejects (records cut down to fewer than 20 non-whitespace characters).
fn check(out: &Path, docs: &[(String, String)], keep_first: bool) -> usize {
    check_with(out, docs, &|d| reference(d, K, keep_first))
}

/// [`check`] against the spans `want` gives for the records (id, text).
fn check_with(out: &Path, docs: &[(String, String)], want: &Reference) -> usize {
    let text_of: HashMap<&str, &str> = docs.iter().map(|(d, t)| (d.as_str(), t.as_str())).collect();
    let recs = records(out);
    assert_eq!(recs.len(), docs.len(), "every record is kept or rejected");
    let by_id: Vec<(u128, &str)> = recs
        .iter()
        .map(|(id, (doc, _))| (*id, text_of[doc.as_str()]))
        .collect();
    let want = want(&by_id);
    let got = table(out);
    let missed: Vec<_> = want.keys().filter(|k| !got.contains_key(k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(k)).collect();
    assert!(
        missed.is_empty() && extra.is_empty(),
        "records the reference cuts but mdf does not: {missed:x?}; the other way: {extra:x?}"
    );
    assert_eq!(got, want, "the cut byte spans");
    let mut rejected = 0;
    for (id, (doc, text)) in &recs {
        let orig = text_of[doc.as_str()];
        let spans = want.get(id).cloned().unwrap_or_default();
        let mut left = String::new();
        let mut at = 0;
        for (s, e) in &spans {
            left.push_str(&orig[at..*s]);
            at = *e;
        }
        left.push_str(&orig[at..]);
        // Only a record it cut is judged by what is left.
        let short = !spans.is_empty() && left.chars().filter(|c| !c.is_whitespace()).count() < 20;
        match text {
            Some(t) => {
                assert!(!short, "{doc}: kept with {left:?}");
                assert_eq!(t, &left, "{doc}: the text left");
            }
            None => {
                assert!(short, "{doc}: rejected with {} characters left", left.len());
                rejected += 1;
            }
        }
    }
    rejected
}

#[test]
fn cuts_exactly_the_spans_a_suffix_array_finds() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus();
    write_corpus(dir.path(), &docs, 3);
    for (keep, keep_first) in [("none", false), ("first", true)] {
        let out = dir.path().join(format!("out-{keep}"));
        let s = spec(dir.path(), &out, keep, 3, "");
        let o = run_ok(mdf().args(["run", s.to_str().unwrap(), "--workers", "2"]));
        let rejected = check(&out, &docs, keep_first);
        let t = table(&out);
        // The planted copies: every whole copy loses everything (keep none) or one of
        // each pair does (keep first); real pages repeat among themselves too.
        let copies = docs
            .iter()
            .filter(|(d, _)| d.starts_with("copy-of/"))
            .count();
        assert!(
            rejected >= if keep_first { copies } else { 2 * copies },
            "{rejected} rejected, {copies} copies"
        );
        assert!(t.len() > docs.len() / 4, "only {} records cut", t.len());
        // A page of one word: its first window stays whole (keep first), or nothing.
        let word: Vec<String> = records(&out)
            .into_values()
            .filter(|(d, _)| d == "word")
            .filter_map(|(_, t)| t)
            .collect();
        if keep_first {
            assert_eq!(word.len(), 1);
            assert_eq!(word[0].split_whitespace().count(), K, "{word:?}");
        } else {
            assert!(word.is_empty(), "{word:?}");
        }
        // What was cut is in the apply stage's stats (`mdf status`).
        let st = status_json(&job_uri(&o));
        let stage = &st["phases"][2]["stats"]["stages"][0];
        assert_eq!(stage["stage"], "substr");
        let bytes: usize = t.values().flatten().map(|(a, b)| b - a).sum();
        let spans: usize = t.values().map(Vec::len).sum();
        assert_eq!(
            stage["totals"]["substr_removed_bytes"]["sum"].as_u64(),
            Some(bytes as u64)
        );
        assert_eq!(
            stage["totals"]["substr_removed_spans"]["sum"].as_u64(),
            Some(spans as u64)
        );
        assert_eq!(
            stage["reasons"]["substring_duplicate"].as_u64(),
            Some(rejected as u64)
        );
        // By input file, in the status and the report.
        let by = stage["totals"]["substr_removed_bytes"]["by"]["source"]
            .as_object()
            .unwrap();
        assert_eq!(by.len(), 3, "{by:?}");
        assert_eq!(
            by.values().map(|v| v.as_u64().unwrap()).sum::<u64>(),
            bytes as u64
        );
        let html = dir.path().join(format!("report-{keep}.html"));
        run_ok(mdf().args(["report", &job_uri(&o), "-o", html.to_str().unwrap()]));
        let html = std::fs::read_to_string(&html).unwrap();
        for id in [
            "hist-substr-substr_removed_bytes",
            "hist-substr-substr_removed_spans",
            "total-substr-substr_removed_bytes-source",
        ] {
            assert!(
                html.contains(&format!("id=\"{id}\"")),
                "the report lacks {id}"
            );
        }
    }
}

/// One worker and one partition, or two workers (one killed mid-task, a third taking
/// over) and five partitions: the same cuts, the same texts, nothing left over.
#[test]
fn the_same_cuts_whatever_the_workers_partitions_and_kills() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus();
    write_corpus(dir.path(), &docs, 4);
    let one = dir.path().join("one");
    let s = spec(dir.path(), &one, "first", 1, "");
    run_ok(mdf().args(["run", s.to_str().unwrap(), "--workers", "1"]));

    let killed = dir.path().join("killed");
    let s = spec(
        dir.path(),
        &killed,
        "first",
        5,
        "- {op: throttle, params: {records_per_sec: 300}}",
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
    check(&killed, &docs, true);
    assert_eq!(table(&killed), table(&one));
    assert_eq!(records(&killed), records(&one));
    assert!(
        orphans(&killed).is_empty(),
        "orphans: {:?}",
        orphans(&killed)
    );
}

/// A spec that cannot run is refused before any task starts, naming the field.
#[test]
fn bad_substring_params_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    write_lines(
        &dir.path().join("in/a.jsonl"),
        &[r#"{"text": "a b c", "n": 1}"#.to_string()],
    );
    let cases = [
        (
            "{key: text, kind: substring, min_tokens: 1}",
            "stages[0].params.min_tokens",
        ),
        (
            "{key: text, kind: substring, keep: lowest_id}",
            "stages[0].params.keep",
        ),
        ("{key: n, kind: substring}", "stages[0].params.key"),
        ("{key: nope, kind: substring}", "stages[0].params.key"),
        (
            "{key: text, kind: substring, cluster_column: true}",
            "stages[0].params.cluster_column",
        ),
        (
            "{key: text, kind: substring, against: /tmp/x}",
            "stages[0].params.against",
        ),
    ];
    assert_dedup_params_refused(dir.path(), "substr", &cases);
}

/// The bundled example runs and cuts the passage its pages share.
#[test]
fn the_substring_example_cuts_the_shared_passage() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    run_ok(
        mdf()
            .current_dir(root)
            .args(["run", "examples/substring-dedup.yaml", "-o"])
            .arg(&out)
            .arg("--job-root")
            .arg(dir.path().join("jobs")),
    );
    let texts = strings(&output_batches(&out), "text");
    let shared = "Subscribe to our newsletter";
    assert_eq!(
        texts.iter().filter(|t| t.contains(shared)).count(),
        1,
        "{texts:#?}"
    );
    assert!(!table(&out).is_empty());
}

/// Windows of a tokenizer's tokens (`tokenize` with ids and offsets; a byte-level BPE
/// and a WordPiece with special tokens, trained here by scripts/text-fixtures.py): the cut spans follow the token offsets,
/// exactly as the suffix array over the token ids finds them.
#[test]
fn over_a_tokenizers_tokens_cuts_what_a_suffix_array_of_ids_finds() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus();
    write_corpus(dir.path(), &docs, 3);
    let all = dir.path().join("all.jsonl");
    let lines: Vec<String> = docs
        .iter()
        .map(|(_, t)| serde_json::json!({"text": t}).to_string())
        .collect();
    write_lines(&all, &lines);
    let script = format!("{}/scripts/text-fixtures.py", env!("CARGO_MANIFEST_DIR"));
    // Skips (with a message) without python3's tokenizers, unless MDF_REQUIRE_ONNX.
    if python(&[
        &script,
        "tokenizers",
        dir.path().to_str().unwrap(),
        all.to_str().unwrap(),
    ])
    .is_none()
    {
        return;
    }
    // Byte-level BPE; WordPiece (lowercased, accents stripped: offsets into the
    // original text) with its [CLS] … [SEP] at (0, 0).
    for (name, special) in [("bpe", false), ("wordpiece", true)] {
        let path = dir.path().join(format!("{name}.json"));
        let out = dir.path().join(format!("out-{name}"));
        let s = spec(
            dir.path(),
            &out,
            "first",
            3,
            &format!(
                "- {{name: tok, op: tokenize, params: {{tokenizer: \"{}\", ids: true, offsets: true, add_special_tokens: {special}}}}}",
                path.display()
            ),
        );
        let text = std::fs::read_to_string(&s)
            .unwrap()
            .replace("kind: substring,", "kind: substring, tokens: token_ids,");
        std::fs::write(&s, text).unwrap();
        run_ok(mdf().args(["run", s.to_str().unwrap(), "--workers", "2"]));
        let tok = mdf::kernels::hf_tokenizer::Tokenizer::from_bytes(&std::fs::read(&path).unwrap())
            .unwrap();
        let want = |d: &[(u128, &str)]| {
            let texts: Vec<&str> = d.iter().map(|x| x.1).collect();
            let enc = tok.ids_offsets(&texts, special).unwrap();
            let docs: Vec<TokenDoc> = d
                .iter()
                .zip(enc)
                .map(|((id, _), (ids, offs))| {
                    (
                        *id,
                        ids.iter().map(|&i| u64::from(i)).collect(),
                        offs.chunks(2)
                            .map(|p| (p[0] as usize, p[1] as usize))
                            .collect(),
                    )
                })
                .collect();
            reference_tokens(&docs, K, true)
        };
        check_with(&out, &docs, &want);
        assert!(table(&out).len() > docs.len() / 4, "{name}");
    }
}

/// Stages after the dedup run on the cut text, and dropping the text column from the
/// output keeps it until the apply phase has cut it (the planner may not drop it
/// earlier: the apply reads it).
#[test]
fn later_stages_see_the_cut_text_and_dropping_it_waits_for_the_apply() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let s = write_spec(
        dir.path(),
        &format!(
            r#"
version: 1
input: {{uris: ["{}/examples/data/substring/*.jsonl"]}}
stages:
  - {{name: substr, op: dedup, params: {{key: text, kind: substring}}}}
  - {{name: len, op: text_length}}
output: {{uri: "{}", drop_columns: [text]}}
"#,
            root.display(),
            out.display()
        ),
    );
    run_ok(mdf().args(["run", s.to_str().unwrap()]));
    let b = output_batches(&out);
    assert!(!output_columns(&out).contains(&"text".to_string()));
    let words = |c: &str| -> Vec<u64> {
        b.iter()
            .flat_map(|x| {
                let a = arrow_cast::cast(
                    x.column_by_name(c).unwrap(),
                    &arrow_schema::DataType::UInt64,
                )
                .unwrap();
                a.as_any()
                    .downcast_ref::<arrow_array::UInt64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect()
    };
    let (w, cut) = (words("text_words"), words("substr_removed_spans"));
    assert_eq!(w.len(), 5);
    // Four pages lost the 64-word footer: every page is under 64 words now but one.
    assert_eq!(cut.iter().filter(|&&c| c == 1).count(), 4);
    assert_eq!(w.iter().filter(|&&n| n > 64).count(), 1, "{w:?}");
}

/// Token offsets must come from a tokenize stage of the key column, with nothing
/// rewriting the text after it: otherwise they point at other bytes. Refused at submit.
#[test]
fn token_windows_need_offsets_of_the_text_as_it_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    write_lines(
        &dir.path().join("in/a.jsonl"),
        &[r#"{"text": "a b c", "title": "t"}"#.to_string()],
    );
    // Never loaded: the specs are refused before any task starts.
    std::fs::write(dir.path().join("tokenizer.json"), "{}").unwrap();
    let tok = |field: &str| {
        format!(
            "{{name: tok, op: tokenize, params: {{tokenizer: \"{}/tokenizer.json\", field: {field}, ids: true, offsets: true}}}}",
            dir.path().display()
        )
    };
    let dedup =
        "{name: substr, op: dedup, params: {key: text, kind: substring, tokens: token_ids}}";
    let cases = [
        (
            vec![tok("title"), dedup.to_string()],
            "not by a tokenize stage of \"text\"",
        ),
        (
            vec![
                tok("text"),
                "{name: pii, op: pii_redact}".into(),
                dedup.to_string(),
            ],
            "stage \"pii\" rewrites \"text\" after stage \"tok\" tokenized it",
        ),
    ];
    for (stages, want) in cases {
        let s = write_spec(
            dir.path(),
            &format!(
                "version: 1\ninput: {{uris: [\"{}/in/*.jsonl\"]}}\nstages:\n{}\noutput: {{uri: \"{}/out\"}}\n",
                dir.path().display(),
                stages
                    .iter()
                    .map(|s| format!("  - {s}\n"))
                    .collect::<String>(),
                dir.path().display()
            ),
        );
        let o = mdf().args(["run", s.to_str().unwrap()]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{want}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains(".params.tokens") && err.contains(want),
            "{err}"
        );
    }
}
