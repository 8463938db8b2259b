//! Exact dedup end to end (docs/DEDUP.md): planted duplicates across files and tasks,
//! checked against a brute-force reference computed here; the same survivors whatever
//! the number of workers and partitions, with or without spilling; `keep: {highest}`;
//! and the rejects naming each duplicate's representative.
mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `n` distinct texts, each written 1 + (i % 4) times across 4 files, copies varying
/// in case and spacing (equal after exact_key's normalisation); plus a score `q`.
fn planted(dir: &Path, n: usize) {
    std::fs::create_dir_all(dir.join("in")).unwrap();
    let mut files = vec![Vec::new(); 4];
    let mut x = 7u64;
    for i in 0..n {
        for c in 0..=(i % 4) {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let base = format!("Document {i} says the river is {} today", i * 31 % 97);
            let text = match c {
                0 => base,
                1 => base.to_uppercase(),
                2 => base.replace(' ', "   "),
                _ => format!("  {base}\n"),
            };
            let q = (x >> 40) as f64 / (1u64 << 24) as f64;
            files[(x >> 60) as usize % 4]
                .push(serde_json::json!({"text": text, "q": q}).to_string());
        }
    }
    for (f, lines) in files.iter().enumerate() {
        write_lines(&dir.join(format!("in/part-{f}.jsonl")), lines);
    }
}

fn spec(dir: &Path, out: &str, params: &str) -> std::path::PathBuf {
    std::fs::write(
        dir.join(format!("{out}.yaml")),
        format!(
            "name: dd\ninput: {{uris: [\"{d}/in/*.jsonl\"]}}\nstages:\n  - op: exact_key\n    name: content\n  - op: dedup\n    params: {params}\noutput: {{uri: \"{d}/{out}\", overwrite: true}}\njob: {{task_bytes: 8KiB, poll_millis: 50}}\n",
            d = dir.display()
        ),
    )
    .unwrap();
    dir.join(format!("{out}.yaml"))
}

fn run(dir: &Path, spec: &Path, workers: &str) -> String {
    let o = run_ok(
        mdf()
            .args([
                "run",
                spec.to_str().unwrap(),
                "--workers",
                workers,
                "--job-root",
            ])
            .arg(dir.join("jobs")),
    );
    job_uri(&o)
}

/// (id, text, q) of every output record.
fn output(out: &Path) -> Vec<(String, String, f64)> {
    let m = manifest(out);
    let mut v = Vec::new();
    for f in m["files"].as_array().unwrap() {
        let b = read_parquet(&out.join(f["path"].as_str().unwrap()));
        let q: Vec<f64> = b
            .iter()
            .flat_map(|b| {
                let a = b
                    .column_by_name("q")
                    .unwrap()
                    .as_any()
                    .downcast_ref::<arrow_array::Float64Array>()
                    .unwrap()
                    .clone();
                (0..a.len()).map(move |i| a.value(i))
            })
            .collect();
        for ((id, t), q) in strings(&b, "id")
            .into_iter()
            .zip(strings(&b, "text"))
            .zip(q)
        {
            v.push((id, t, q));
        }
    }
    v
}

/// (id, reason, operator, detail, record) of every reject.
fn rejects(out: &Path) -> Vec<(String, String, String, String, String)> {
    let m = manifest(out);
    let mut v = Vec::new();
    for r in m["rejects"].as_array().unwrap() {
        let b = read_parquet(&out.join("_rejects").join(r["path"].as_str().unwrap()));
        let n = strings(&b, "id").len();
        let (ids, rs, ops, ds, recs) = (
            strings(&b, "id"),
            strings(&b, "reason"),
            strings(&b, "operator"),
            strings(&b, "detail"),
            strings(&b, "record"),
        );
        for i in 0..n {
            v.push((
                ids[i].clone(),
                rs[i].clone(),
                ops[i].clone(),
                ds[i].clone(),
                recs[i].clone(),
            ));
        }
    }
    v
}

fn norm(t: &str) -> String {
    t.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

#[test]
fn exact_dedup_matches_a_brute_force_reference() {
    let d = tempfile::tempdir().unwrap();
    let n = 400;
    planted(d.path(), n);
    let s = spec(
        d.path(),
        "out",
        "{key: content_key, partitions: 4, cluster_column: true}",
    );
    let job = run(d.path(), &s, "3");
    let st = status_json(&job);
    assert_eq!(st["succeeded"], true, "{st:#}");
    let out = d.path().join("out");
    let kept = output(&out);
    let rj = rejects(&out);
    // Reference: group every record (kept or rejected) by normalised text.
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (id, t, _) in &kept {
        groups.entry(norm(t)).or_default().push(id.clone());
    }
    for (id, reason, op, _, rec) in &rj {
        assert_eq!(reason, "duplicate");
        assert_eq!(op, "dedup");
        let v: serde_json::Value = serde_json::from_str(rec).unwrap();
        groups
            .entry(norm(v["text"].as_str().unwrap()))
            .or_default()
            .push(id.clone());
    }
    assert_eq!(groups.len(), n, "every distinct text is present");
    let total: usize = (0..n).map(|i| 1 + i % 4).sum();
    assert_eq!(kept.len() + rj.len(), total, "nothing lost");
    assert_eq!(kept.len(), n, "exactly one survivor per distinct text");
    // The survivor of each group is its lowest id; each reject names it.
    let survivors: BTreeSet<&String> = kept.iter().map(|k| &k.0).collect();
    for ids in groups.values() {
        let min = ids.iter().min().unwrap();
        assert!(survivors.contains(min), "lowest id {min} survives");
    }
    for (id, _, _, detail, rec) in &rj {
        assert!(
            survivors.contains(detail),
            "{id} duplicates survivor {detail}"
        );
        let v: serde_json::Value = serde_json::from_str(rec).unwrap();
        assert!(groups[&norm(v["text"].as_str().unwrap())].contains(detail));
    }
    // dup_cluster: the representative's id on every member of a cluster of 2+.
    let m = manifest(&out);
    let f = &m["files"][0];
    let b = read_parquet(&out.join(f["path"].as_str().unwrap()));
    let col = b[0]
        .column_by_name("dup_cluster")
        .expect("dup_cluster column");
    assert_eq!(col.data_type(), &arrow_schema::DataType::Utf8);
    // Phase stats: the reduce phase saw every key once.
    let p1 = &st["phases"][1];
    assert_eq!(p1["records_in"].as_u64().unwrap() as usize, total, "{p1:#}");
    assert_eq!(p1["records_out"].as_u64().unwrap() as usize, n, "{p1:#}");
}

#[test]
fn survivors_do_not_depend_on_workers_partitions_or_spilling() {
    let d = tempfile::tempdir().unwrap();
    planted(d.path(), 300);
    let ids = |out: &str| {
        let v: BTreeSet<String> = output(&d.path().join(out))
            .into_iter()
            .map(|x| x.0)
            .collect();
        v
    };
    let a = spec(d.path(), "a", "{key: content_key, partitions: 1}");
    run(d.path(), &a, "1");
    let b = spec(d.path(), "b", "{key: content_key, partitions: 7}");
    run(d.path(), &b, "4");
    // 4 KiB of reduce memory: ~100 entries, so every partition spills several runs.
    let c = spec(
        d.path(),
        "c",
        "{key: content_key, partitions: 2, memory: 4KiB}",
    );
    run(d.path(), &c, "2");
    assert_eq!(ids("a").len(), 300);
    assert_eq!(ids("a"), ids("b"));
    assert_eq!(ids("a"), ids("c"));
}

#[test]
fn keep_highest_keeps_the_best_scored_copy() {
    let d = tempfile::tempdir().unwrap();
    planted(d.path(), 200);
    let s = spec(d.path(), "out", "{key: content_key, keep: {highest: q}}");
    run(d.path(), &s, "2");
    let out = d.path().join("out");
    let kept = output(&out);
    let mut best: BTreeMap<String, f64> = BTreeMap::new();
    for (_, t, q) in &kept {
        best.insert(norm(t), *q);
    }
    for (_, _, _, _, rec) in rejects(&out) {
        let v: serde_json::Value = serde_json::from_str(&rec).unwrap();
        let t = norm(v["text"].as_str().unwrap());
        assert!(
            v["q"].as_f64().unwrap() <= best[&t],
            "a rejected copy scored higher than the survivor of {t:?}"
        );
    }
    assert_eq!(kept.len(), 200);
}

#[test]
fn a_bad_dedup_config_is_refused_naming_the_field() {
    let d = tempfile::tempdir().unwrap();
    planted(d.path(), 10);
    for (params, field, needle) in [
        ("{key: nope}", "stages[1].params.key", "no column \"nope\""),
        ("{key: text}", "stages[1].params.key", "not a 16-byte key"),
        (
            "{key: content_key, keep: {highest: text}}",
            "stages[1].params.keep.highest",
            "not numeric",
        ),
        (
            "{key: content_key, partitions: 0}",
            "stages[1].params.partitions",
            "between 1 and 65536",
        ),
        (
            "{key: content_key, memory: 10}",
            "stages[1].params.memory",
            "at least 4KiB",
        ),
    ] {
        let s = spec(d.path(), "bad", params);
        let o = mdf()
            .args(["validate", s.to_str().unwrap()])
            .output()
            .unwrap();
        let text = format!("{}{}", stdout(&o), stderr(&o));
        assert!(!o.status.success(), "{params}: accepted");
        assert!(
            text.contains(field) && text.contains(needle),
            "{params}: {text}"
        );
    }
}

#[test]
fn incremental_dedup_against_an_earlier_job() {
    let d = tempfile::tempdir().unwrap();
    planted(d.path(), 300);
    // Job A: the "existing corpus", files 0 and 1; job B: files 2 and 3 against A.
    std::fs::create_dir_all(d.path().join("a")).unwrap();
    std::fs::create_dir_all(d.path().join("b")).unwrap();
    for f in 0..4 {
        let to = if f < 2 { "a" } else { "b" };
        std::fs::rename(
            d.path().join(format!("in/part-{f}.jsonl")),
            d.path().join(format!("{to}/part-{f}.jsonl")),
        )
        .unwrap();
    }
    let job_spec = |name: &str, input: &str, params: &str| {
        let p = d.path().join(format!("{name}.yaml"));
        std::fs::write(
            &p,
            format!(
                "name: {name}\ninput: {{uris: [\"{d}/{input}/*.jsonl\"]}}\nstages:\n  - op: exact_key\n    name: content\n  - op: dedup\n    params: {params}\noutput: {{uri: \"{d}/out-{name}\", overwrite: true}}\njob: {{task_bytes: 8KiB, poll_millis: 50}}\n",
                d = d.path().display()
            ),
        )
        .unwrap();
        p
    };
    let a = job_spec("a", "a", "{key: content_key, partitions: 3}");
    let job_a = run(d.path(), &a, "2");
    // Different partition counts on purpose: B reads A's overlapping key ranges.
    let b = job_spec(
        "b",
        "b",
        &format!("{{key: content_key, partitions: 5, against: \"{job_a}\"}}"),
    );
    run(d.path(), &b, "2");
    let a_out = output(&d.path().join("out-a"));
    let a_ids: BTreeSet<String> = a_out.iter().map(|x| x.0.clone()).collect();
    let a_texts: BTreeSet<String> = a_out.iter().map(|x| norm(&x.1)).collect();
    let b_out = output(&d.path().join("out-b"));
    let b_rj = rejects(&d.path().join("out-b"));
    // Reference: every B record by text.
    let mut b_texts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (id, t, _) in &b_out {
        b_texts.entry(norm(t)).or_default().push(id.clone());
    }
    for (id, _, _, _, rec) in &b_rj {
        let v: serde_json::Value = serde_json::from_str(rec).unwrap();
        b_texts
            .entry(norm(v["text"].as_str().unwrap()))
            .or_default()
            .push(id.clone());
    }
    let expected: BTreeSet<String> = b_texts
        .iter()
        .filter(|(t, _)| !a_texts.contains(*t))
        .map(|(_, ids)| ids.iter().min().unwrap().clone())
        .collect();
    let got: BTreeSet<String> = b_out.iter().map(|x| x.0.clone()).collect();
    assert!(!expected.is_empty() && expected.len() < b_texts.len());
    assert_eq!(
        got, expected,
        "B keeps one copy of each text A does not have"
    );
    // A text already in A: the reject names A's record.
    let mut against_a = 0;
    for (_, reason, _, detail, rec) in &b_rj {
        assert_eq!(reason, "duplicate");
        let v: serde_json::Value = serde_json::from_str(rec).unwrap();
        if a_texts.contains(&norm(v["text"].as_str().unwrap())) {
            assert!(a_ids.contains(detail), "{detail} is A's survivor");
            against_a += 1;
        }
    }
    assert!(against_a > 0);
    // B again, also reading one of A's own files: its records have A's ids, and are
    // still duplicates of A's (a record is never the representative of an earlier
    // corpus's cluster, even under the same id).
    let b2 = d.path().join("b2.yaml");
    std::fs::write(
        &b2,
        std::fs::read_to_string(&b)
            .unwrap()
            .replace("name: b\n", "name: b2\n")
            .replace(
                &format!("\"{}/b/*.jsonl\"", d.path().display()),
                &format!(
                    "\"{d}/b/*.jsonl\", \"{d}/a/part-0.jsonl\"",
                    d = d.path().display()
                ),
            )
            .replace("out-b\"", "out-b2\""),
    )
    .unwrap();
    run(d.path(), &b2, "2");
    let b2_rj = rejects(&d.path().join("out-b2"));
    let b2_ids: BTreeSet<String> = output(&d.path().join("out-b2"))
        .iter()
        .map(|x| x.0.clone())
        .collect();
    assert_eq!(b2_ids, got, "A's own file adds nothing to B");
    let own = b2_rj.iter().filter(|r| a_ids.contains(&r.0)).count();
    assert!(own > 0, "A's survivors from its own file are rejected");
    // A job that does not exist is refused before anything runs.
    let bad = job_spec(
        "c",
        "b",
        "{key: content_key, against: \"/nonexistent/jobs/x\"}",
    );
    let o = mdf()
        .args(["run", bad.to_str().unwrap(), "--job-root"])
        .arg(d.path().join("jobs"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(text.contains("stages[1].params.against"), "{text}");
}

/// An earlier job deleted and submitted again under the same id is another index: the
/// job deduplicated against it becomes a new job (its plan hash names the earlier job's
/// identity), never the old one found complete with decisions against the old corpus.
#[test]
fn a_replaced_earlier_job_is_a_new_index() {
    let d = tempfile::tempdir().unwrap();
    planted(d.path(), 200);
    for dir in ["a", "b"] {
        std::fs::create_dir_all(d.path().join(dir)).unwrap();
    }
    let mv = |f: u32, to: &str| {
        std::fs::rename(
            d.path().join(format!("in/part-{f}.jsonl")),
            d.path().join(format!("{to}/part-{f}.jsonl")),
        )
        .unwrap()
    };
    mv(0, "a");
    mv(2, "b");
    let job_spec = |name: &str, params: &str| {
        let p = d.path().join(format!("{name}.yaml"));
        std::fs::write(
            &p,
            format!(
                "name: {name}\ninput: {{uris: [\"{d}/{name}/*.jsonl\"]}}\nstages:\n  - op: exact_key\n    name: content\n  - op: dedup\n    params: {params}\noutput: {{uri: \"{d}/out-{name}\", overwrite: true}}\njob: {{task_bytes: 8KiB, poll_millis: 50}}\n",
                d = d.path().display()
            ),
        )
        .unwrap();
        p
    };
    let run_a = || {
        let o = run_ok(
            mdf()
                .args(["run", job_spec("a", "{key: content_key}").to_str().unwrap()])
                .args(["--workers", "2", "--job-id", "corpus", "--job-root"])
                .arg(d.path().join("jobs")),
        );
        job_uri(&o)
    };
    let job_a = run_a();
    let b = job_spec(
        "b",
        &format!("{{key: content_key, partitions: 2, against: \"{job_a}\"}}"),
    );
    let first = run(d.path(), &b, "2");
    let texts = |out: &str| -> BTreeSet<String> {
        output(&d.path().join(out))
            .iter()
            .map(|x| norm(&x.1))
            .collect()
    };
    let b_texts = texts("out-b");
    assert!(!b_texts.is_empty());
    // A job submitted against the corpus but not yet run when it is replaced.
    let pending_spec = d.path().join("pending.yaml");
    std::fs::write(
        &pending_spec,
        std::fs::read_to_string(&b)
            .unwrap()
            .replace("name: b\n", "name: pending\n")
            .replace("out-b\"", "out-pending\""),
    )
    .unwrap();
    let pending = submit_job(&pending_spec, &d.path().join("jobs"));
    // The corpus is replaced: same job id, now B's own file.
    std::fs::remove_dir_all(Path::new(job_a.strip_prefix("file://").unwrap_or(&job_a))).unwrap();
    std::fs::remove_file(d.path().join("a/part-0.jsonl")).unwrap();
    std::fs::copy(
        d.path().join("b/part-2.jsonl"),
        d.path().join("a/part-2.jsonl"),
    )
    .unwrap();
    assert_eq!(run_a(), job_a);
    let second = run(d.path(), &b, "2");
    assert_ne!(first, second, "B against the new corpus is a new job");
    assert!(
        texts("out-b").is_empty(),
        "every text of B is in the new corpus: {:?}",
        texts("out-b")
    );
    // The pending job names the old corpus: its reduce refuses the new one rather
    // than decide against it under the old one's name.
    let o = mdf()
        .args(["worker", "--job", &pending, "--worker-id", "w"])
        .output()
        .unwrap();
    let st = status_json(&pending);
    assert_ne!(st["succeeded"], true, "{}", stderr(&o));
    let all = format!("{st}{}", stderr(&o));
    assert!(
        all.contains("was replaced since this job was planned"),
        "{all}"
    );
}

/// (rows, blake3) of the keys object of every committed map task of a job, sorted.
fn keys_objects(job: &str) -> Vec<(u64, String)> {
    let dir = Path::new(job.strip_prefix("file://").unwrap_or(job)).join("commits/p00");
    let mut v: Vec<(u64, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let r: serde_json::Value =
                serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap();
            let k = &r["shuffle"];
            (
                k["rows"].as_u64().unwrap(),
                k["blake3"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn map_keys_past_a_tiny_budget_spill_and_make_the_same_keys_objects() {
    let d = tempfile::tempdir().unwrap();
    planted(d.path(), 300);
    let a = spec(d.path(), "a", "{key: content_key, partitions: 3}");
    let ja = run(d.path(), &a, "2");
    // 4 KiB of memory: the map side buffers 2 KiB (51 40-byte entries) and spills
    // the rest of each task's ~190 keys in runs.
    let b = spec(
        d.path(),
        "b",
        "{key: content_key, partitions: 3, memory: 4KiB}",
    );
    let o = run_ok(
        mdf()
            .args(["run", b.to_str().unwrap(), "--workers", "2", "--job-root"])
            .arg(d.path().join("jobs"))
            .env("RUST_LOG", "mdf=info"),
    );
    let text = stderr(&o) + &stdout(&o);
    assert!(text.contains("were spilled to disk"), "{text}");
    let (ka, kb) = (keys_objects(&ja), keys_objects(&job_uri(&o)));
    assert!(ka.len() > 1 && ka.iter().all(|k| k.0 > 51), "{ka:?}");
    assert_eq!(ka, kb);
    let sorted = |out: &str| {
        let mut v: Vec<(String, String)> = output(&d.path().join(out))
            .into_iter()
            .map(|x| (x.0, x.1))
            .collect();
        v.sort();
        v
    };
    assert_eq!(sorted("a"), sorted("b"));
}

/// A storage error whose text happens to contain "failed" (here: from the job root's
/// path) is an ordinary task error, retried up to `max_attempts`, not a failed
/// upstream task that fails the apply task at once.
#[test]
fn a_transient_error_mentioning_failed_is_retried_not_fatal() {
    let d = tempfile::tempdir().unwrap();
    planted(d.path(), 40);
    let s = spec(d.path(), "out", "{key: content_key}");
    let s2 = d.path().join("retry.yaml");
    std::fs::write(
        &s2,
        std::fs::read_to_string(&s)
            .unwrap()
            .replace("poll_millis: 50", "poll_millis: 50, max_attempts: 2"),
    )
    .unwrap();
    let o = mdf()
        .args(["run", s2.to_str().unwrap(), "--workers", "1", "--job-root"])
        .arg(d.path().join("failed-jobs"))
        .env("MDF_FAULTS", "get:denied:1:decisions.bin")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let st = status_json(&job_uri(&o));
    let failed = st["failed_tasks"].as_array().unwrap();
    assert!(!failed.is_empty(), "{st:#}");
    for f in failed {
        let e = f["error"].as_str().unwrap();
        assert!(
            e.starts_with("failed 2 times: reading ") && e.contains("failed-jobs"),
            "{f}"
        );
    }
}
