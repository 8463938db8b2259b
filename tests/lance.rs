//! `output.format: lance` (built with `--features lance`): the dataset pylance reads
//! holds the same rows as the Parquet output of the same job; it appears in one
//! transaction at finalize; workers killed mid-task leave no fragment of theirs in it
//! (every record exactly once); re-running an overwritten output replaces it.
//! Skipped when python3 has no `lance` (pylance) unless MDF_REQUIRE_LANCE is set.
#![cfg(feature = "lance")]
mod common;
use common::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn pylance(script: &str, args: &[&str]) -> Option<serde_json::Value> {
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 runs");
    if !o.status.success() {
        let err = stderr(&o);
        if err.contains("No module named 'lance'")
            && std::env::var_os("MDF_REQUIRE_LANCE").is_none()
        {
            eprintln!("skipping: no pylance ({err})");
            return None;
        }
        panic!("python3: {err}");
    }
    Some(serde_json::from_slice(&o.stdout).unwrap())
}

/// Every row of a Lance dataset (sorted by id) and its version count, through pylance.
const READ_LANCE: &str = r#"
import json, sys, lance
ds = lance.dataset(sys.argv[1])
t = ds.to_table().sort_by("id")
print(json.dumps({"rows": t.to_pylist(), "version": ds.version,
                  "fragments": len(ds.get_fragments()), "schema": str(ds.schema)}))
"#;

/// Every row of a Parquet output (sorted by id), through pyarrow.
const READ_PARQUET: &str = r#"
import json, sys, glob, pyarrow.parquet as pq, pyarrow as pa
t = pa.concat_tables([pq.read_table(f) for f in sorted(glob.glob(sys.argv[1] + "/*.parquet"))])
print(json.dumps({"rows": t.sort_by("id").to_pylist()}))
"#;

fn spec(dir: &Path, out: &Path, format: &str, extra: &str) -> std::path::PathBuf {
    write_spec(
        dir,
        &format!(
            "name: lance-{format}\ninput: {{uris: [\"{}/in/*.jsonl\"]}}\nstages:\n{extra}  - op: text_length\n  - op: length_filter\n    params: {{min_words: 4}}\n\
             output: {{uri: \"{}\", format: {format}, overwrite: true}}\njob: {{max_files_per_task: 1, lease_ttl_secs: 2, heartbeat_secs: 1, poll_millis: 100, batch_rows: 10}}\n",
            dir.display(),
            out.display()
        ),
    )
}

#[test]
fn lance_output_equals_the_parquet_output_in_pylance() {
    let d = tempfile::tempdir().unwrap();
    for i in 0..4 {
        write_lines(&d.path().join(format!("in/{i}.jsonl")), &docs(40 + i, 50));
    }
    let (pq_out, lance_out) = (d.path().join("pq"), d.path().join("ds"));
    for (format, out) in [("parquet", &pq_out), ("lance", &lance_out)] {
        run_ok(
            mdf()
                .args([
                    "run",
                    spec(d.path(), out, format, "").to_str().unwrap(),
                    "--workers",
                    "2",
                ])
                .arg("--job-root")
                .arg(d.path().join(format!("jobs-{format}"))),
        );
    }
    let Some(l) = pylance(READ_LANCE, &[lance_out.to_str().unwrap()]) else {
        return;
    };
    let p = pylance(READ_PARQUET, &[pq_out.to_str().unwrap()]).unwrap();
    let rows = l["rows"].as_array().unwrap();
    assert!(rows.len() > 100, "{} rows", rows.len());
    assert_eq!(l["rows"], p["rows"], "the same records, column for column");
    assert_eq!(l["fragments"].as_u64().unwrap(), 4, "one fragment per task");
    // Rejects are Parquet beside it, and the manifest counts the committed rows.
    let m = manifest(&lance_out);
    assert_eq!(m["rows"].as_u64().unwrap() as usize, rows.len());
    assert!(m["files"][0]["path"].as_str().unwrap().starts_with("data/"));
    assert!(m["rejected"].as_u64().unwrap() > 0);

    // Running again over an overwritten output replaces the dataset: same rows,
    // one live version's worth of data files.
    run_ok(
        mdf()
            .args([
                "run",
                spec(d.path(), &lance_out, "lance", "").to_str().unwrap(),
            ])
            .args(["--workers", "1", "--job-id", "again", "--job-root"])
            .arg(d.path().join("jobs-lance")),
    );
    let again = pylance(READ_LANCE, &[lance_out.to_str().unwrap()]).unwrap();
    assert_eq!(again["rows"], l["rows"]);
    assert!(again["version"].as_u64() > l["version"].as_u64());
    let data_files = std::fs::read_dir(lance_out.join("data")).unwrap().count();
    assert_eq!(data_files, 4, "older versions' files were cleaned up");
}

#[test]
fn killed_workers_leave_no_fragment_in_the_dataset() {
    let d = tempfile::tempdir().unwrap();
    for i in 0..6 {
        write_lines(&d.path().join(format!("in/{i}.jsonl")), &docs(70 + i, 40));
    }
    let out = d.path().join("ds");
    let slow = "  - op: throttle\n    params: {records_per_sec: 60}\n";
    let s = spec(d.path(), &out, "lance", slow);
    let jobs = d.path().join("jobs");
    let job = submit_job(&s, &jobs);
    let spawn = |id: &str| spawn_worker(&job, id);
    // Two workers killed mid-task (their attempts had written Lance files), then one
    // that finishes the job.
    let mut a = spawn("a");
    let mut b = spawn("b");
    std::thread::sleep(Duration::from_millis(1500));
    a.kill().unwrap();
    b.kill().unwrap();
    a.wait().unwrap();
    b.wait().unwrap();
    let staged_before = files_under(&jobs)
        .iter()
        .filter(|f| f.ends_with(".lance"))
        .count();
    let t0 = Instant::now();
    let mut c = spawn("c");
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            assert!(st.success());
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the job did not finish"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let st = status_json(&job);
    assert_eq!(st["succeeded"], true, "{st}");
    let Some(l) = pylance(READ_LANCE, &[out.to_str().unwrap()]) else {
        return;
    };
    let ids: Vec<&str> = l["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    let unique: std::collections::BTreeSet<&&str> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "no record twice");
    let rejected = st["phases"][0]["rejected"].as_u64().unwrap() as usize;
    assert_eq!(ids.len() + rejected, 240, "no record lost");
    assert_eq!(
        l["fragments"].as_u64().unwrap(),
        6,
        "only committed tasks' fragments"
    );
    eprintln!("{staged_before} Lance files were staged when the workers died");
}

/// A late worker of a finished Lance job runs its finalize again after a second job
/// took the output with `overwrite` and committed its own dataset: the second job's
/// dataset still reads back whole (the stale finalize neither commits over it nor
/// cleans up its versions), and the stale finalize says why it published nothing.
#[test]
fn a_stale_finalize_leaves_another_jobs_dataset_whole() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(91, 50));
    let out = d.path().join("ds");
    let jobs = d.path().join("jobs");
    let run = |extra: &str| {
        let s = spec(d.path(), &out, "lance", extra);
        job_uri(&run_ok(
            mdf()
                .args(["run", s.to_str().unwrap(), "--job-root"])
                .arg(&jobs),
        ))
    };
    let first = run("");
    // The second job keeps fewer records, so its dataset differs from the first's.
    let second = run("  - op: length_filter\n    name: longer\n    params: {min_words: 8}\n");
    assert_ne!(first, second);
    let Some(want) = pylance(READ_LANCE, &[out.to_str().unwrap()]) else {
        return;
    };
    let root = first.strip_prefix("file://").unwrap();
    for sub in ["commits/finalize", "leases/finalize"] {
        std::fs::remove_dir_all(Path::new(root).join(sub)).unwrap();
    }
    let o = mdf().args(["worker", "--job", &first]).output().unwrap();
    let got = pylance(READ_LANCE, &[out.to_str().unwrap()]).unwrap();
    assert_eq!(got["rows"], want["rows"], "{}", stderr(&o));
    assert_eq!(got["version"], want["version"], "no commit over it");
    let st = status_json(&first);
    assert!(format!("{st} {}", stderr(&o)).contains("belongs to job"));
}

/// examples/embed.yaml end to end: an image folder → clip_embed (a generated tiny
/// CLIP-shaped model) → a Lance dataset with id, path and embedding.
#[cfg(feature = "onnx")]
#[test]
fn the_embed_example_writes_embeddings_to_lance() {
    let root = env!("CARGO_MANIFEST_DIR");
    let d = tempfile::tempdir().unwrap();
    let models = Command::new("python3")
        .args([&format!("{root}/scripts/onnx-fixtures.py"), "models"])
        .arg(d.path())
        .output()
        .unwrap();
    let lib = Command::new("python3")
        .args(["-c", "import onnxruntime, glob, os; print(sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), 'capi', 'libonnxruntime.so*')))[0])"])
        .output()
        .unwrap();
    if !models.status.success() || !lib.status.success() {
        assert!(
            std::env::var_os("MDF_REQUIRE_ONNX").is_none(),
            "{}",
            stderr(&models)
        );
        eprintln!("skipping: no onnx/onnxruntime in python3");
        return;
    }
    let out = d.path().join("emb");
    run_ok(
        mdf()
            .current_dir(root)
            .args(["run", "examples/embed.yaml", "--workers", "2", "-o"])
            .arg(&out)
            .args(["--set", "stages.clip_embed.params.dim=16", "--job-root"])
            .arg(d.path().join("jobs"))
            .env("MDF_CLIP_IMAGE_MODEL", d.path().join("clip-image.onnx"))
            .env("ORT_DYLIB_PATH", stdout(&lib).trim()),
    );
    let Some(l) = pylance(READ_LANCE, &[out.to_str().unwrap()]) else {
        return;
    };
    let rows = l["rows"].as_array().unwrap();
    let m = manifest(&out);
    assert_eq!(rows.len() as u64, m["rows"].as_u64().unwrap());
    assert!(rows.len() >= 10, "{} images embedded", rows.len());
    for r in rows {
        assert!(r["path"].as_str().is_some());
        let e: Vec<f64> = r["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(e.len(), 16);
        let norm = e.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
    }
    let schema = l["schema"].as_str().unwrap();
    assert!(
        schema.contains("embedding: fixed_size_list<item: float>[16]"),
        "{schema}"
    );
    assert!(
        m["rejected"].as_u64().unwrap() > 0,
        "the bundled set has undecodable files"
    );
}

/// Overwriting a Lance output (found by review): Lance's own folders are the old
/// dataset's, but nothing else is (a note under `_rejects/`, `_mine/` or `data/` is
/// refused, not swept); a Parquet output is never overwritten by a Lance dataset
/// (its files would stay beside it); a Lance output of no rows is still replaced.
#[test]
fn overwriting_a_lance_output_sweeps_only_the_old_dataset() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/0.jsonl"), &docs(60, 30));
    let out = d.path().join("ds");
    let jobs = d.path().join("jobs");
    let run = |format: &str, extra: &str| {
        let s = spec(d.path(), &out, format, extra);
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "1", "--job-root"])
            .arg(&jobs)
            .output()
            .unwrap()
    };
    let o = run("lance", "");
    assert!(o.status.success(), "{}", stderr(&o));
    for note in ["_rejects/NOTES.txt", "_mine/notes.txt", "data/README.txt"] {
        let p = out.join(note);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "mine").unwrap();
        let o = run(
            "lance",
            "  - op: throttle\n    params: {records_per_sec: 100000}\n",
        );
        assert_eq!(o.status.code(), Some(2), "{note}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("did not write"),
            "{note}: {}",
            stderr(&o)
        );
        assert!(p.exists(), "{note}");
        std::fs::remove_file(&p).unwrap();
    }
    // Lance over Lance: replaced.
    let o = run(
        "lance",
        "  - op: throttle\n    params: {records_per_sec: 100000}\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // Parquet over Lance is fine (the whole prefix is the old dataset's); Lance over
    // that Parquet output is refused.
    let o = run("parquet", "");
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(
        "lance",
        "  - op: throttle\n    params: {records_per_sec: 99999}\n",
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("a Lance dataset cannot replace it"),
        "{}",
        stderr(&o)
    );
    // The first job, run again: its output is another job's now, and it says so.
    let o = run("lance", "");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("now holds the output of job"),
        "{}",
        stderr(&o)
    );
}
