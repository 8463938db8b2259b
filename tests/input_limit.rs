//! `input.limit` / `--limit N`: the first N records of the input in file listing
//! order, by one task, whatever the input's size; the same N records on every run;
//! fewer when the first files hold fewer; refused when not a positive integer.
mod common;
use common::*;
use std::path::Path;

fn input(dir: &Path) {
    for f in 0..5 {
        write_lines(&dir.join(format!("in/part-{f}.jsonl")), &docs(f, 300));
    }
}

fn spec(dir: &Path, name: &str, input_extra: &str) -> std::path::PathBuf {
    write_spec(
        dir,
        &format!(
            "version: 1\nname: {name}\ninput: {{uris: [\"{d}/in/*.jsonl\"]{input_extra}}}\nstages:\n  - op: text_length\noutput: {{uri: \"{d}/{name}\", overwrite: true}}\njob: {{task_bytes: 8KiB}}\n",
            d = dir.display()
        ),
    )
}

/// (url, n) of every output record: which input records made it.
fn urls(out: &Path) -> Vec<String> {
    let mut v = strings(&output_batches(out), "url");
    v.sort();
    v
}

#[test]
fn the_first_n_records_in_listing_order() {
    let d = tempfile::tempdir().unwrap();
    input(d.path());
    let jobs = d.path().join("jobs");
    // 450: all 300 of part-0 and the first 150 of part-1, in one task.
    let s = spec(d.path(), "lim", "");
    let o = run_ok(
        mdf()
            .args([
                "run",
                s.to_str().unwrap(),
                "--limit",
                "450",
                "--workers",
                "2",
                "--job-root",
            ])
            .arg(&jobs),
    );
    let st = status_json(&job_uri(&o));
    assert_eq!(st["phases"][0]["tasks"]["total"], 1, "one task: {st}");
    // Records in are the records the task took: every one is out or rejected (the
    // reader decoded past the limit, and those showed as in but neither out nor
    // rejected: found by a new user).
    let p0 = &st["phases"][0];
    assert_eq!(p0["records_in"], 450, "{st}");
    assert_eq!(
        p0["records_in"].as_u64().unwrap(),
        p0["records_out"].as_u64().unwrap() + p0["rejected"].as_u64().unwrap(),
        "{st}"
    );
    let got = urls(&d.path().join("lim"));
    let mut want: Vec<String> = (0..300)
        .map(|i| format!("https://e.org/0/{i}"))
        .chain((0..150).map(|i| format!("https://e.org/1/{i}")))
        .collect();
    want.sort();
    assert_eq!(got, want);
    // The same through the spec, on another run: the same records.
    let s2 = spec(d.path(), "lim2", ", limit: 450");
    run_ok(
        mdf()
            .args(["run", s2.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    assert_eq!(urls(&d.path().join("lim2")), want);
    // Without a limit: every record, in many tasks.
    let all = spec(d.path(), "all", "");
    run_ok(
        mdf()
            .args(["run", all.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    assert_eq!(urls(&d.path().join("all")).len(), 1500);
    // More than the input holds: all of it.
    let s3 = spec(d.path(), "big", ", limit: 1000000");
    run_ok(
        mdf()
            .args(["run", s3.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    assert_eq!(urls(&d.path().join("big")).len(), 1500);
}

#[test]
fn a_bad_limit_is_refused_naming_the_field() {
    let d = tempfile::tempdir().unwrap();
    input(d.path());
    for extra in [", limit: 0", ", limit: -3", ", limit: many"] {
        let s = spec(d.path(), "bad", extra);
        let o = mdf().args(["run", s.to_str().unwrap()]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{extra}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("input.limit"),
            "{extra}: {}",
            stderr(&o)
        );
    }
}
