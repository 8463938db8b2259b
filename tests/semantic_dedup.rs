//! Semantic dedup (docs/SEMANTIC.md) end to end through `mdf run` and `mdf worker`:
//! generated embeddings with planted near duplicates (scripts/semantic-reference.py
//! gen), the survivors and each reject's representative equal to a numpy brute force
//! given the centroids the job's k-means wrote, recall against global brute force
//! reported, and the same survivors whatever the workers, partitions, memory budget
//! (sub-clustering) and kills.
mod common;
use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/semantic-reference.py")
}

/// `n` records of `dim` dimensions in `files` Parquet files under `dir/in`; `None`
/// when python3 with numpy and pyarrow is missing (and not required).
fn generate(dir: &Path, n: usize, dim: usize, files: usize) -> Option<PathBuf> {
    let input = dir.join("in");
    std::fs::create_dir_all(&input).unwrap();
    python(&[
        script().to_str().unwrap(),
        "gen",
        input.to_str().unwrap(),
        &n.to_string(),
        &dim.to_string(),
        &files.to_string(),
        "7",
    ])?;
    Some(input)
}

fn spec(dir: &Path, name: &str, params: &str, pre: &str) -> PathBuf {
    write_spec(
        dir,
        &format!(
            r#"
version: 1
name: {name}
input: {{uris: ["{d}/in/*.parquet"]}}
stages:
  {pre}
  - name: sem
    op: dedup
    params: {{key: embedding, kind: semantic, {params}}}
output: {{uri: "{d}/{name}", overwrite: true}}
rejects: {{include_record: true}}
job: {{max_files_per_task: 1, lease_ttl_secs: 4, poll_millis: 50}}
"#,
            d = dir.display()
        ),
    )
}

/// What a job kept and rejected: name → id of every record, and every reject's name
/// → its representative's id.
struct Outcome {
    ids: BTreeMap<String, String>,
    kept: Vec<String>,
    rejects: BTreeMap<String, String>,
}

fn outcome(out: &Path) -> Outcome {
    let mut ids = BTreeMap::new();
    let mut kept = Vec::new();
    for b in output_batches(out) {
        let b = [b];
        let (id, name) = (strings(&b, "id"), strings(&b, "name"));
        for (i, n) in id.into_iter().zip(name) {
            ids.insert(n.clone(), i);
            kept.push(n);
        }
    }
    let mut rejects = BTreeMap::new();
    let m = manifest(out);
    for r in m["rejects"].as_array().unwrap() {
        let b = read_parquet(&out.join("_rejects").join(r["path"].as_str().unwrap()));
        let (id, reason, detail, rec) = (
            strings(&b, "id"),
            strings(&b, "reason"),
            strings(&b, "detail"),
            strings(&b, "record"),
        );
        for i in 0..id.len() {
            assert_eq!(reason[i], "duplicate");
            let v: serde_json::Value = serde_json::from_str(&rec[i]).unwrap();
            let name = v["name"].as_str().unwrap().to_string();
            ids.insert(name.clone(), id[i].clone());
            rejects.insert(name, detail[i].clone());
        }
    }
    kept.sort();
    Outcome { ids, kept, rejects }
}

/// The centroids object the job's k-means committed.
fn centroids_of(job: &str) -> PathBuf {
    let root = Path::new(job.strip_prefix("file://").unwrap_or(job));
    let dir = root.join("commits/p01");
    let commit = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(commit.path()).unwrap()).unwrap();
    let uri = v["shuffle"]["uri"].as_str().unwrap();
    PathBuf::from(uri.strip_prefix("file://").unwrap_or(uri))
}

/// The reference's verdicts for a job's inputs and centroids.
fn reference(
    dir: &Path,
    job: &str,
    eps: f64,
    keep: &str,
    ids: &BTreeMap<String, String>,
) -> serde_json::Value {
    let inputs: Vec<String> = std::fs::read_dir(dir.join("in"))
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .collect();
    let req = serde_json::json!({
        "inputs": inputs,
        "centroids": centroids_of(job),
        "eps": eps,
        "keep": keep,
        "ids": ids,
    });
    let mut child = std::process::Command::new("python3")
        .arg(script())
        .arg("check")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(&req).unwrap())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    serde_json::from_slice(&o.stdout).unwrap()
}

/// mdf's rejects (name → representative's name) equal the reference's exactly.
fn assert_matches_reference(got: &Outcome, want: &serde_json::Value) {
    let by_id: BTreeMap<&String, &String> = got.ids.iter().map(|(n, i)| (i, n)).collect();
    let mine: BTreeMap<String, String> = got
        .rejects
        .iter()
        .map(|(n, rep)| (n.clone(), by_id[rep].clone()))
        .collect();
    let theirs: BTreeMap<String, String> = want["rejects"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    assert!(!theirs.is_empty());
    assert_eq!(mine, theirs, "rejects (record → representative) differ");
}

/// Given the same centroids, the job drops exactly what a numpy brute force drops,
/// naming the same representatives: with SemDeDup's keep rule (nearest to the
/// centroid), one worker and two partitions; with `keep: {highest: q}`, three
/// workers and three partitions; with `keep: lowest_id`, two workers and one
/// partition. Recall against all pairs is reported.
#[test]
fn clusters_equal_a_numpy_brute_force_given_the_same_centroids() {
    let d = tempfile::tempdir().unwrap();
    let Some(_) = generate(d.path(), 3000, 32, 3) else {
        return;
    };
    let jobs = d.path().join("jobs");
    for (name, keep, keep_param, workers, partitions) in [
        ("near", "nearest_centroid", "", "1", 2),
        ("best", "highest:q", ", keep: {highest: q}", "3", 3),
        ("low", "lowest_id", ", keep: lowest_id", "2", 1),
    ] {
        let s = spec(
            d.path(),
            name,
            &format!("eps: 0.05, clusters: 8, sample: 1000, partitions: {partitions}{keep_param}"),
            "",
        );
        let o = run_ok(
            mdf()
                .args([
                    "run",
                    s.to_str().unwrap(),
                    "--workers",
                    workers,
                    "--job-root",
                ])
                .arg(&jobs),
        );
        let job = job_uri(&o);
        let got = outcome(&d.path().join(name));
        assert_eq!(got.ids.len(), 3000, "every record kept or rejected");
        let want = reference(d.path(), &job, 0.05, keep, &got.ids);
        assert_matches_reference(&got, &want);
        let recall = want["recall"].as_f64().unwrap();
        eprintln!(
            "{name}: {} of {} duplicate pairs within one cluster (recall {recall:.3}), {} rejected",
            want["found_pairs"],
            want["global_pairs"],
            got.rejects.len()
        );
        // Random vectors have no cluster structure (the worst case for clustering): 0.89
        // to 0.92 here, depending on where the k-means lands.
        assert!(recall >= 0.85, "recall {recall}");
    }
}

/// One worker; or three workers each killed while it holds a task of one of the
/// centroids, assign and reduce phases, others taking over; or seven partitions on
/// three workers: with a memory budget so small that clusters are split by
/// sub-clustering and every sort spills. The same centroids and survivors each way;
/// every reject truly connected to its representative (all pairs in float64); and
/// the duplicates sub-clustering misses bounded.
#[test]
fn the_same_survivors_whatever_the_workers_kills_and_memory() {
    let d = tempfile::tempdir().unwrap();
    let Some(_) = generate(d.path(), 2000, 16, 4) else {
        return;
    };
    let jobs = d.path().join("jobs");
    // 16-d vectors: 24 KiB of memory compares 384 at once; clusters hold ~1000.
    let tiny = "eps: 0.05, clusters: 2, sample: 100, memory: 24KiB";
    let s = spec(d.path(), "one", &format!("{tiny}, partitions: 2"), "");
    let o = run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "1", "--job-root"])
            .arg(&jobs)
            .env("RUST_LOG", "mdf=info"),
    );
    assert!(
        stderr(&o).contains("split by sub-clustering"),
        "no cluster was split: {}",
        stderr(&o)
    );
    let one = outcome(&d.path().join("one"));
    let job = job_uri(&o);
    let want = reference(d.path(), &job, 0.05, "nearest_centroid", &one.ids);
    let component = want["component"].as_object().unwrap();
    let by_id: BTreeMap<&String, &String> = one.ids.iter().map(|(n, i)| (i, n)).collect();
    for (name, rep) in &one.rejects {
        assert_eq!(
            component[name],
            component[by_id[rep].as_str()],
            "{name} is not connected to its representative"
        );
    }
    // Records all-pairs brute force would drop: all but one per global component.
    let roots: std::collections::BTreeSet<&str> =
        component.values().map(|v| v.as_str().unwrap()).collect();
    let global = component.len() - roots.len();
    assert!(
        one.rejects.len() * 10 >= global * 8,
        "{} rejected of {global} global duplicates",
        one.rejects.len()
    );
    let centroids = std::fs::read(centroids_of(&job)).unwrap();

    // The same with a slow store, each phase's holder killed in turn.
    let s = spec(d.path(), "killed", &format!("{tiny}, partitions: 2"), "");
    let job = submit_job(&s, &jobs);
    let worker = |id: &str| {
        mdf()
            .args(["worker", "--job", &job, "--worker-id", id])
            .env("MDF_FAULTS", "any:latency=40:1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    for (id, phase) in [("a", "p01"), ("b", "p02"), ("c", "p03")] {
        let mut w = worker(id);
        kill_once_it_holds(&jobs, &mut w, id, phase);
    }
    let mut rest = [worker("d"), worker("e")];
    for w in &mut rest {
        assert!(w.wait().unwrap().success());
    }
    assert_eq!(status_json(&job)["succeeded"], true);
    for phase in ["p01", "p02", "p03"] {
        assert!(
            a_lease_was_lost(&jobs, phase),
            "no lease of {phase} was lost"
        );
    }
    assert_eq!(std::fs::read(centroids_of(&job)).unwrap(), centroids);
    let k = outcome(&d.path().join("killed"));
    assert_eq!(k.kept, one.kept);
    assert_eq!(k.rejects, one.rejects);
    assert!(orphans(&d.path().join("killed")).is_empty());

    // Seven partitions, three workers: the same.
    let s = spec(d.path(), "seven", &format!("{tiny}, partitions: 7"), "");
    let o = run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "3", "--job-root"])
            .arg(&jobs),
    );
    assert_eq!(
        std::fs::read(centroids_of(&job_uri(&o))).unwrap(),
        centroids
    );
    let seven = outcome(&d.path().join("seven"));
    assert_eq!(seven.kept, one.kept);
    assert_eq!(seven.rejects, one.rejects);
}

/// The bundled example runs: its planted near copies are rejects naming a kept
/// record, and every member of a cluster carries the kept record's id.
#[test]
fn the_bundled_example_runs() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    run_example("semantic-dedup", &out, &d.path().join("jobs"), Some("2"));
    let kept = output_ids(&out);
    let m = manifest(&out);
    let rejected: u64 = m["rejects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rows"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(kept.len() as u64 + rejected, 800);
    assert!(rejected > 100, "{rejected} rejected");
    let clusters = strings(&output_batches(&out), "dup_cluster");
    let kept_set: std::collections::BTreeSet<&String> = kept.iter().collect();
    assert!(
        clusters
            .iter()
            .filter(|c| !c.is_empty())
            .all(|c| kept_set.contains(c))
    );
}

/// No record has a usable vector (all null or zero): no centroids, nothing assigned,
/// every record kept.
#[test]
fn records_without_vectors_are_all_kept() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("in")).unwrap();
    let Some(_) = python(&[
        "-c",
        &format!(
            "import pyarrow as pa, pyarrow.parquet as pq\nt = pa.list_(pa.field('item', pa.float32()), 4)\npq.write_table(pa.table({{'name': ['a', 'b', 'c'], 'embedding': pa.array([None, [0.0, 0.0, 0.0, 0.0], None], type=t), 'q': [1.0, 2.0, 3.0]}}), '{}/in/x.parquet')",
            d.path().display()
        ),
    ]) else {
        return;
    };
    let s = spec(d.path(), "none", "eps: 0.05", "");
    run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let got = outcome(&d.path().join("none"));
    assert_eq!(got.kept, vec!["a", "b", "c"]);
    assert!(got.rejects.is_empty());
}

/// Bad specs are refused before any task, naming the field.
#[test]
fn bad_semantic_params_are_refused_naming_the_field() {
    let d = tempfile::tempdir().unwrap();
    let Some(_) = generate(d.path(), 50, 8, 1) else {
        return;
    };
    for (params, field, needle) in [
        (
            "key: name, kind: semantic",
            "params.key",
            "fixed_size_list<float32>",
        ),
        (
            "key: embedding, kind: semantic, eps: 0",
            "params.eps",
            "[0.00001, 1)",
        ),
        (
            "key: embedding, kind: semantic, eps: 0.0000001",
            "params.eps",
            "[0.00001, 1)",
        ),
        (
            "key: embedding, kind: semantic, eps: 1.5",
            "params.eps",
            "[0.00001, 1)",
        ),
        (
            "key: embedding, kind: semantic, sample: 1000000, memory: 64MiB",
            "params.sample",
            "half of params.memory",
        ),
        (
            "key: embedding, kind: semantic, clusters: 100, sample: 10",
            "params.clusters",
            "more clusters",
        ),
        (
            "key: embedding, kind: semantic, clusters: 60000, sample: 100000, memory: 64MiB",
            "params.clusters",
            "half of params.memory",
        ),
        (
            "key: embedding, keep: nearest_centroid",
            "params.keep",
            "semantic dedup only",
        ),
        (
            "key: embedding, kind: semantic, against: /x",
            "params.against",
            "semantic",
        ),
    ] {
        let s = write_spec(
            d.path(),
            &format!(
                "version: 1\ninput: {{uris: [\"{}/in/*.parquet\"]}}\nstages:\n  - {{name: sem, op: dedup, params: {{{params}}}}}\noutput: {{uri: \"{}/bad\"}}\n",
                d.path().display(),
                d.path().display()
            ),
        );
        let o = mdf().args(["run", s.to_str().unwrap()]).output().unwrap();
        let text = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{params}: {text}");
        assert!(
            text.contains(field) && text.contains(needle),
            "{params}: {text}"
        );
        assert!(!d.path().join("bad").exists());
    }
}
