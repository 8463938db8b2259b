//! `output.format: iceberg` end to end, read back by pyiceberg's SqlCatalog
//! (scripts/iceberg-read.py): exactly the rows the Parquet output has, one snapshot per
//! job stamped with its URI, a second job appending a second snapshot, a table of
//! another schema refused at submit, and a finalize killed between the catalog commit
//! and the job's manifest leaving exactly one snapshot once the job completes.
#![cfg(feature = "iceberg")]
mod common;
use common::*;
use std::path::Path;

fn spec(dir: &Path, name: &str, out: &str, extra_stage: bool) -> std::path::PathBuf {
    let stages = if extra_stage {
        "stages:\n  - op: text_length\n"
    } else {
        ""
    };
    write_spec(
        dir,
        &format!(
            "version: 1\nname: {name}\ninput: {{uris: [\"{d}/in/*.jsonl\"]}}\n{stages}output:\n  uri: \"{d}/{out}\"\n  format: iceberg\n  iceberg: {{catalog: {{uri: \"sqlite:///{d}/catalog.db\"}}, namespace: curated, table: docs}}\njob: {{task_bytes: 16KiB, lease_ttl_secs: 4, heartbeat_secs: 1}}\n",
            d = dir.display()
        ),
    )
}

fn read(dir: &Path) -> Option<serde_json::Value> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/iceberg-read.py");
    let db = dir.join("catalog.db");
    let o = python(&[script, db.to_str().unwrap(), "mdf", "curated.docs"])?;
    Some(serde_json::from_str(o.trim()).unwrap())
}

/// (id, text) of a Parquet output, sorted.
fn parquet_rows(out: &Path) -> Vec<(String, String)> {
    let b = output_batches(out);
    let mut v: Vec<_> = strings(&b, "id")
        .into_iter()
        .zip(strings(&b, "text"))
        .collect();
    v.sort();
    v
}

/// The rows to expect of `dir/in/*.jsonl`: the same input through a Parquet job.
fn expected_rows(dir: &Path, jobs: &Path) -> Vec<(String, String)> {
    let pq = write_spec(
        dir,
        &format!(
            "version: 1\nname: pq\ninput: {{uris: [\"{d}/in/*.jsonl\"]}}\noutput: {{uri: \"{d}/pq\"}}\njob: {{task_bytes: 16KiB}}\n",
            d = dir.display()
        ),
    );
    run_ok(
        mdf()
            .args(["run", pq.to_str().unwrap(), "--job-root"])
            .arg(jobs),
    );
    parquet_rows(&dir.join("pq"))
}

fn rows(v: &serde_json::Value) -> Vec<(String, String)> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_str().unwrap().into(), r[1].as_str().unwrap().into()))
        .collect()
}

#[test]
fn pyiceberg_reads_exactly_the_rows_and_each_job_is_one_snapshot() {
    let d = tempfile::tempdir().unwrap();
    for f in 0..2 {
        write_lines(&d.path().join(format!("in/p{f}.jsonl")), &docs(f, 400));
    }
    let jobs = d.path().join("jobs");
    let s1 = spec(d.path(), "one", "t1", false);
    let o = run_ok(
        mdf()
            .args(["run", s1.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let job1 = job_uri(&o);
    let want = expected_rows(d.path(), &jobs);
    let Some(v) = read(d.path()) else { return };
    assert_eq!(want.len(), 800);
    assert_eq!(rows(&v), want);
    let snaps = v["snapshots"].as_array().unwrap();
    assert_eq!(snaps.len(), 1, "{v}");
    assert_eq!(snaps[0]["summary"]["mdf.job-uri"], job1.as_str());

    // A second job (its own output prefix) appends a second snapshot to the table.
    let s2 = spec(d.path(), "two", "t2", false);
    let o = run_ok(
        mdf()
            .args(["run", s2.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let job2 = job_uri(&o);
    let v = read(d.path()).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 1600);
    let snaps = v["snapshots"].as_array().unwrap();
    assert_eq!(snaps.len(), 2, "{v}");
    // The metadata's snapshot list is in no particular order.
    let mut jobs_seen: Vec<&str> = snaps
        .iter()
        .map(|s| s["summary"]["mdf.job-uri"].as_str().unwrap())
        .collect();
    jobs_seen.sort();
    let mut want_jobs = vec![job1.as_str(), job2.as_str()];
    want_jobs.sort();
    assert_eq!(jobs_seen, want_jobs);

    // Another schema (text_length's columns added): refused before any task.
    let s3 = spec(d.path(), "three", "t3", true);
    let o = mdf()
        .args(["submit", s3.to_str().unwrap(), "--job-root"])
        .arg(&jobs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("curated.docs has another schema") && e.contains("text_chars"),
        "{e}"
    );
    assert!(
        !jobs.join("jobs/three").exists()
            || files_under(&jobs.join("jobs"))
                .iter()
                .all(|f| !f.starts_with("three") || !f.contains("tasks"))
    );
}

#[test]
fn a_finalize_killed_after_the_catalog_commit_leaves_one_snapshot() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/p0.jsonl"), &docs(3, 300));
    let jobs = d.path().join("jobs");
    let s = spec(d.path(), "crash", "t", false);
    // The worker dies right after the table's snapshot is committed.
    let o = mdf()
        .env("MDF_FAULTS", "abort:iceberg-committed")
        .args(["run", s.to_str().unwrap(), "--workers", "1", "--job-root"])
        .arg(&jobs)
        .output()
        .unwrap();
    assert!(!o.status.success(), "the process was aborted");
    assert!(
        stderr(&o).contains("aborting at iceberg-committed"),
        "{}",
        stderr(&o)
    );
    let Some(v) = read(d.path()) else { return };
    assert_eq!(
        v["snapshots"].as_array().unwrap().len(),
        1,
        "committed before the crash"
    );
    let out = d.path().join("t");
    assert!(
        !out.join("_manifest.json").exists(),
        "the job was not finished"
    );
    // Another worker takes the finalize over once the dead one's lease lapses.
    let job = files_under(&jobs)
        .into_iter()
        .find(|f| f.ends_with("job.json"))
        .map(|f| jobs.join(f).parent().unwrap().display().to_string())
        .unwrap();
    run_ok(mdf().args(["worker", "--job", &job, "--worker-id", "second"]));
    assert!(out.join("_manifest.json").exists());
    let v = read(d.path()).unwrap();
    let snaps = v["snapshots"].as_array().unwrap();
    assert_eq!(snaps.len(), 1, "no second append: {v}");
    assert_eq!(v["rows"].as_array().unwrap().len(), 300);
    assert_eq!(manifest(&out)["rows"], 300);
}

/// A REST catalog (scripts/iceberg-rest-server.py: the REST protocol over pyiceberg's
/// own catalog code): the table is created and appended to through it, and reads back.
#[test]
fn a_rest_catalog_takes_the_table() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/p0.jsonl"), &docs(9, 250));
    let db = d.path().join("rest.db");
    let warehouse = format!("file://{}/warehouse", d.path().display());
    let server = py_server(
        "iceberg-rest-server.py",
        &[db.as_os_str(), warehouse.as_ref()],
        true,
    );
    let port = server.port;
    let s = write_spec(
        d.path(),
        &format!(
            "version: 1\nname: rest\ninput: {{uris: [\"{d}/in/*.jsonl\"]}}\noutput:\n  uri: \"{d}/t\"\n  format: iceberg\n  iceberg: {{catalog: {{type: rest, uri: \"http://127.0.0.1:{port}\"}}, namespace: curated, table: docs}}\n",
            d = d.path().display()
        ),
    );
    let o = mdf()
        .args(["run", s.to_str().unwrap(), "--job-root"])
        .arg(d.path().join("jobs"))
        .output()
        .unwrap();
    drop(server);
    assert!(o.status.success(), "{}", stderr(&o));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/iceberg-read.py");
    let Some(v) = python(&[script, db.to_str().unwrap(), "rest", "curated.docs"]) else {
        return;
    };
    let v: serde_json::Value = serde_json::from_str(v.trim()).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 250);
    assert_eq!(v["snapshots"].as_array().unwrap().len(), 1);
}

/// The AWS Glue Data Catalog (moto's, with the table's files on moto's S3), read back
/// by pyiceberg's own GlueCatalog: the rows, the Glue table as engines on AWS expect it
/// (`table_type` ICEBERG, its metadata and previous metadata locations, Hive columns),
/// a second job killed after its Glue commit leaving exactly one more snapshot once
/// another worker finishes it, and a table of another schema refused at submit.
#[test]
fn a_glue_catalog_takes_the_table_and_pyiceberg_reads_it() {
    let Some((ep, bucket, _)) = test_s3() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/p0.jsonl"), &docs(4, 300));
    write_lines(&d.path().join("in/p1.jsonl"), &docs(5, 200));
    let jobs = d.path().join("jobs");
    // moto keeps its catalog for the server's life: a database of this run's own.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let db = format!("mdf_{}_{nanos}", std::process::id());
    let spec = |name: &str, out: &str, extra_stage: bool| {
        let stages = if extra_stage {
            "stages:\n  - op: text_length\n"
        } else {
            ""
        };
        write_spec(
            d.path(),
            &format!(
                "version: 1\nname: {name}\ninput: {{uris: [\"{d}/in/*.jsonl\"]}}\n{stages}output:\n  uri: \"s3://{bucket}/{db}/{out}\"\n  format: iceberg\n  iceberg: {{catalog: {{type: glue, region: us-east-1}}, namespace: {db}, table: docs}}\njob: {{task_bytes: 16KiB, lease_ttl_secs: 4, heartbeat_secs: 1}}\n",
                d = d.path().display()
            ),
        )
    };
    let aws = |cmd: &mut std::process::Command| {
        cmd.env("AWS_ENDPOINT_URL", &ep)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env_remove("AWS_ENDPOINT_URL_GLUE");
    };
    let mut c = mdf();
    aws(&mut c);
    let o = run_ok(
        c.args([
            "run",
            spec("g1", "t1", false).to_str().unwrap(),
            "--job-root",
        ])
        .arg(&jobs),
    );
    let job1 = job_uri(&o);
    let want = expected_rows(d.path(), &jobs);
    assert_eq!(want.len(), 500);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/iceberg-read.py");
    let ident = format!("{db}.docs");
    let read = || {
        python(&[script, "--glue", &ep, &ident])
            .map(|o| serde_json::from_str::<serde_json::Value>(o.trim()).unwrap())
    };
    let Some(v) = read() else { return };
    assert_eq!(rows(&v), want);
    let snaps = v["snapshots"].as_array().unwrap();
    assert_eq!(snaps.len(), 1, "{v}");
    assert_eq!(snaps[0]["summary"]["mdf.job-uri"], job1.as_str());
    let g = &v["glue"];
    assert_eq!(g["parameters"]["table_type"], "ICEBERG", "{g}");
    assert_eq!(g["table_type"], "EXTERNAL_TABLE");
    assert_eq!(g["location"], format!("s3://{bucket}/{db}/t1"));
    let first = g["parameters"]["metadata_location"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        first.starts_with(&format!("s3://{bucket}/{db}/t1/metadata/"))
            && first.ends_with(".metadata.json"),
        "{first}"
    );
    assert!(
        g["columns"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c[0] == "text" && c[1] == "string"),
        "{g}"
    );

    // A second job dies right after its Glue commit; another worker finishes it.
    let mut c = mdf();
    aws(&mut c);
    let o = c
        .env("MDF_FAULTS", "abort:iceberg-committed")
        .args([
            "run",
            spec("g2", "t2", false).to_str().unwrap(),
            "--workers",
            "1",
            "--job-root",
        ])
        .arg(&jobs)
        .output()
        .unwrap();
    assert!(!o.status.success(), "the process was aborted");
    assert!(
        stderr(&o).contains("aborting at iceberg-committed"),
        "{}",
        stderr(&o)
    );
    let v = read().unwrap();
    assert_eq!(
        v["snapshots"].as_array().unwrap().len(),
        2,
        "committed before the crash"
    );
    assert_eq!(
        v["glue"]["parameters"]["previous_metadata_location"],
        first.as_str()
    );
    let job2 = files_under(&jobs)
        .into_iter()
        .filter(|f| f.ends_with("job.json"))
        .map(|f| jobs.join(f).parent().unwrap().display().to_string())
        .find(|j| j.contains("g2"))
        .unwrap();
    let mut c = mdf();
    aws(&mut c);
    run_ok(c.args(["worker", "--job", &job2, "--worker-id", "second"]));
    let v = read().unwrap();
    let snaps = v["snapshots"].as_array().unwrap();
    assert_eq!(snaps.len(), 2, "no second append of the killed job: {v}");
    assert_eq!(v["rows"].as_array().unwrap().len(), 1000);

    // Another schema: refused before any task.
    let mut c = mdf();
    aws(&mut c);
    let o = c
        .args([
            "submit",
            spec("g3", "t3", true).to_str().unwrap(),
            "--job-root",
        ])
        .arg(&jobs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("has another schema") && e.contains("text_chars"),
        "{e}"
    );
}

/// Glue's compare-and-swap (scripts/glue-cas-proxy.py adds AWS Glue's `VersionId`
/// check in front of moto, which has none): an UpdateTable whose answer is lost after
/// it landed, and one overtaken by another writer's update, each leave exactly one
/// snapshot of the job with all its rows; every UpdateTable names the version it read,
/// and every call the spec's catalog id.
#[test]
fn glue_commits_are_a_compare_and_swap() {
    let Some((ep, bucket, _)) = test_s3() else {
        return;
    };
    if python(&["-c", "import boto3"]).is_none() {
        return;
    }
    for mode in ["drop", "race"] {
        let d = tempfile::tempdir().unwrap();
        write_lines(&d.path().join("in/p0.jsonl"), &docs(6, 150));
        let log = d.path().join("glue.log");
        let proxy = py_server(
            "glue-cas-proxy.py",
            &[ep.as_str(), log.to_str().unwrap(), mode],
            true,
        );
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let db = format!("cas_{mode}_{}_{nanos}", std::process::id());
        let jobs = d.path().join("jobs");
        let run = |name: &str| {
            let s = write_spec(
                d.path(),
                &format!(
                    "version: 1\nname: {name}\ninput: {{uris: [\"{d}/in/*.jsonl\"]}}\noutput:\n  uri: \"s3://{bucket}/{db}/{name}\"\n  format: iceberg\n  iceberg: {{catalog: {{type: glue, region: us-east-1, uri: \"http://127.0.0.1:{port}\", catalog_id: \"123456789012\"}}, namespace: {db}, table: docs}}\n",
                    d = d.path().display(),
                    port = proxy.port
                ),
            );
            let mut c = mdf();
            c.env("AWS_ENDPOINT_URL", &ep)
                .env("AWS_ACCESS_KEY_ID", "test")
                .env("AWS_SECRET_ACCESS_KEY", "test")
                .env("AWS_REGION", "us-east-1")
                .args(["run", s.to_str().unwrap(), "--job-root"])
                .arg(&jobs);
            job_uri(&run_ok(&mut c))
        };
        // CreateTable makes the empty table; the job's append is its first
        // UpdateTable, the one the mode acts on.
        let job = run("one");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/iceberg-read.py");
        let Some(v) = python(&[script, "--glue", &ep, &format!("{db}.docs")]) else {
            return;
        };
        let v: serde_json::Value = serde_json::from_str(v.trim()).unwrap();
        let snaps = v["snapshots"].as_array().unwrap();
        assert_eq!(snaps.len(), 1, "{mode}: {v}");
        assert_eq!(snaps[0]["summary"]["mdf.job-uri"], job.as_str());
        assert_eq!(v["rows"].as_array().unwrap().len(), 150, "{mode}");
        let calls: Vec<serde_json::Value> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let updates: Vec<&serde_json::Value> = calls
            .iter()
            .filter(|c| c["target"] == "UpdateTable" && c.get("body").is_some())
            .collect();
        assert!(
            updates.iter().all(|u| u["body"]["VersionId"].is_string()),
            "{mode}: an UpdateTable without the version it read: {calls:?}"
        );
        assert!(
            updates.iter().any(|u| u["refused"] == true),
            "{mode}: the stale update was refused: {calls:?}"
        );
        match mode {
            "drop" => assert!(calls.iter().any(|c| c["dropped"] == true)),
            _ => assert!(calls.iter().any(|c| c["raced"] == true)),
        }
        assert!(
            calls
                .iter()
                .filter(|c| c.get("body").is_some())
                .all(|c| c["body"]["CatalogId"] == "123456789012"),
            "{mode}: {calls:?}"
        );
    }
}

/// examples/iceberg.yaml: the text pipeline into a table of the default catalog (a
/// SQLite file beside the output), read back by pyiceberg.
#[test]
fn the_iceberg_example_runs() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("lake/pages");
    run_example("iceberg", &out, &d.path().join("jobs"), None);
    let rows = manifest(&out)["rows"].as_u64().unwrap();
    assert!(rows > 0);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/iceberg-read.py");
    let db = d.path().join("lake/catalog.db");
    let Some(v) = python(&[script, db.to_str().unwrap(), "mdf", "curated.pages"]) else {
        return;
    };
    let v: serde_json::Value = serde_json::from_str(v.trim()).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len() as u64, rows);
    assert!(
        v["columns"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "language")
    );
}

/// Settings that would lose commits or leak a secret are refused before anything
/// runs, naming the field.
#[test]
fn unsafe_iceberg_settings_are_refused() {
    let d = tempfile::tempdir().unwrap();
    for (output, field, want) in [
        (
            "{uri: out/t, format: iceberg, overwrite: true, iceberg: {table: t}}",
            "output.overwrite",
            "appended to, never overwritten",
        ),
        (
            "{uri: \"s3://bucket/t\", format: iceberg, iceberg: {catalog: {uri: \"sqlite:///tmp/c.db\"}, table: t}}",
            "output.iceberg.catalog.type",
            "REST catalog",
        ),
        (
            "{uri: out/t, format: iceberg, iceberg: {catalog: {type: rest, uri: \"http://127.0.0.1:1\", properties: {token: abc}}, table: t}}",
            "output.iceberg.catalog.properties.token",
            "MDF_ICEBERG_TOKEN",
        ),
        (
            "{uri: out/t, format: iceberg, iceberg: {catalog: {type: glue, region: us-east-1}, namespace: curated, table: t}}",
            "output.iceberg.catalog.type",
            "output.uri must be s3://",
        ),
        (
            "{uri: \"s3://b/t\", format: iceberg, iceberg: {catalog: {type: glue}, namespace: Curated, table: t}}",
            "output.iceberg.namespace",
            "lower-case",
        ),
        (
            "{uri: \"s3://b/t\", format: iceberg, iceberg: {catalog: {type: glue}, table: my-table}}",
            "output.iceberg.table",
            "lower-case",
        ),
        (
            "{uri: \"s3://b/t\", format: iceberg, iceberg: {catalog: {type: glue}, table: t}}",
            "output.iceberg.catalog.region",
            "required for a Glue catalog",
        ),
        (
            "{uri: \"s3://b/t\", format: iceberg, iceberg: {catalog: {type: glue, region: \"x.evil.com#\"}, table: t}}",
            "output.iceberg.catalog.region",
            "not an AWS region",
        ),
        (
            "{uri: \"s3://b/t\", format: iceberg, iceberg: {catalog: {type: glue, region: us-east-1, uri: \"http://glue.example.com\"}, table: t}}",
            "output.iceberg.catalog.uri",
            "http:// to this machine only",
        ),
        (
            "{uri: \"s3://b/t\", format: iceberg, iceberg: {catalog: {type: glue, region: us-east-1, catalog_id: abc}, table: t}}",
            "output.iceberg.catalog.catalog_id",
            "12-digit",
        ),
        (
            "{uri: \"s3://b/t\", format: iceberg, iceberg: {catalog: {type: glue, region: us-east-1, warehouse: \"s3://w\"}, table: t}}",
            "output.iceberg.catalog.warehouse",
            "not used by a Glue catalog",
        ),
        (
            "{uri: out/t, format: iceberg, iceberg: {catalog: {region: eu-west-1}, table: t}}",
            "output.iceberg.catalog.region",
            "only with catalog type glue",
        ),
        (
            "{uri: out/t, format: iceberg, iceberg: {}}",
            "output.iceberg.table",
            "required",
        ),
    ] {
        let s = write_spec(
            d.path(),
            &format!(
                "version: 1\nname: bad\ninput: {{uris: [\"in/*.jsonl\"]}}\noutput: {output}\n"
            ),
        );
        let o = mdf()
            .current_dir(d.path())
            .args(["validate", s.to_str().unwrap(), "--offline"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{output}");
        let text = format!("{}{}", stdout(&o), stderr(&o));
        assert!(
            text.contains(field) && text.contains(want),
            "{output}: {text}"
        );
    }
}
