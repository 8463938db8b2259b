//! Issue 22: paths where a job used to lose or delete data without an error. Each test
//! drives the `mdf` binary through one such scenario and checks that nothing is lost:
//! a lagging LIST, `--reuse` across a dedup, overlapping output/rejects prefixes,
//! inputs rewritten after submit, skewed clocks.
mod common;
use common::*;
use std::path::Path;

/// A text job over `in/*.jsonl` with small tasks (several per file).
fn text_spec(dir: &Path, out: &Path, extra_stages: &str) -> std::path::PathBuf {
    write_spec(
        dir,
        &format!(
            r#"
name: lost
input: {{uris: ["{}/in/*.jsonl"]}}
stages:
  - op: text_length
  - op: length_filter
    params: {{min_words: 3}}
{extra_stages}
output: {{uri: "{}"}}
job: {{task_bytes: 4KiB, lease_ttl_secs: 4, heartbeat_secs: 1, poll_millis: 50}}
"#,
            dir.display(),
            out.display()
        ),
    )
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Item 3: a store whose LIST leaves out objects written in the last 3 s. Workers that
/// trusted the listing of task manifests saw an empty job and stopped at once; a
/// finalize that trusted the listing of commit records left recent tasks out of the
/// manifest and deleted their published files. Every planned task is now accounted
/// for by key.
#[test]
fn a_lagging_list_loses_no_task() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(31, 200));
    write_lines(&d.path().join("in/b.jsonl"), &docs(32, 200));
    let clean_out = d.path().join("clean");
    let s = text_spec(d.path(), &clean_out, "");
    run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "2", "--job-root"])
            .arg(d.path().join("jobs-clean")),
    );
    let clean = sorted(output_ids(&clean_out));
    assert!(clean.len() > 100);

    let out = d.path().join("lagged");
    let s = text_spec(d.path(), &out, "");
    let o = run_ok(
        mdf()
            .env(
                "MDF_FAULTS",
                "list:lag=3000:1:tasks/,list:lag=3000:1:commits/",
            )
            .args(["run", s.to_str().unwrap(), "--workers", "2", "--job-root"])
            .arg(d.path().join("jobs-lag")),
    );
    assert_eq!(
        sorted(output_ids(&out)),
        clean,
        "same records as the clean run:\n{}",
        stderr(&o)
    );
    assert!(orphans(&out).is_empty(), "{:?}", orphans(&out));
    let st = status_json(&job_uri(&o));
    assert_eq!(st["succeeded"], true, "{st:#}");
}

/// A spec over `in/*.jsonl` with the given output and rejects sections.
fn prefix_spec(dir: &Path, output: &str, rejects: &str) -> std::path::PathBuf {
    write_spec(
        dir,
        &format!(
            r#"
name: owned
input: {{uris: ["{}/in/*.jsonl"]}}
stages:
  - op: text_length
  - op: length_filter
    params: {{min_words: 3}}
output: {{{output}}}
{rejects}
job: {{task_bytes: 4KiB, poll_millis: 50}}
"#,
            dir.display()
        ),
    )
}

fn refused(spec: &Path, jobs: &Path, field: &str, words: &str) {
    let before = files_under(&jobs.join("jobs"));
    let o = mdf()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--workers",
            "1",
            "--job-root",
        ])
        .arg(jobs)
        .output()
        .unwrap();
    assert!(!o.status.success(), "accepted: {}", stdout(&o));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("{field}: ")) && e.contains(words),
        "expected {field} ... {words}:\n{e}"
    );
    assert_eq!(
        files_under(&jobs.join("jobs")),
        before,
        "nothing was written for a refused job"
    );
}

/// Item 2: an output or rejects prefix that overlaps the inputs or the job
/// directories is refused before anything is written, even with `overwrite: true`;
/// the inputs are untouched.
#[test]
fn output_and_rejects_never_overlap_inputs_or_jobs() {
    let d = tempfile::tempdir().unwrap();
    let dp = d.path().display().to_string();
    write_lines(&d.path().join("in/a.jsonl"), &docs(41, 100));
    let before = files_under(&d.path().join("in"));
    let jobs = d.path().join("jobs");
    // Rejects at the inputs' directory: its sweep would delete the inputs.
    let s = prefix_spec(
        d.path(),
        &format!("uri: \"{dp}/out\""),
        &format!("rejects: {{uri: \"{dp}/in\"}}"),
    );
    refused(&s, &jobs, "rejects.uri", "holds the input");
    // Output above the inputs, with overwrite (the jobs elsewhere).
    let elsewhere = tempfile::tempdir().unwrap();
    let s = prefix_spec(d.path(), &format!("uri: \"{dp}\", overwrite: true"), "");
    refused(&s, elsewhere.path(), "output.uri", "holds the input");
    // Output inside a directory read recursively as input.
    let s = prefix_spec(d.path(), &format!("uri: \"{dp}/in/out\""), "");
    let text = std::fs::read_to_string(&s).unwrap().replace(
        &format!("\"{dp}/in/*.jsonl\"]"),
        &format!("\"{dp}/in/\"], format: jsonl"),
    );
    std::fs::write(&s, text).unwrap();
    refused(&s, &jobs, "output.uri", "inside the inputs");
    // Rejects above the job root, and output inside the job directories.
    let s = prefix_spec(
        d.path(),
        &format!("uri: \"{dp}/out\""),
        &format!("rejects: {{uri: \"{dp}/jobs\"}}"),
    );
    refused(&s, &jobs, "rejects.uri", "job directories");
    // Rejects among the output's side tables: a rejects file and a table file of one
    // task would be published to the same key.
    let s = prefix_spec(
        d.path(),
        &format!("uri: \"{dp}/out\""),
        &format!("rejects: {{uri: \"{dp}/out/_tables/decont\"}}"),
    );
    refused(&s, &jobs, "rejects.uri", "where side tables are published");
    // Rejects at the output, or in a folder of it readers read: the dataset would
    // hold the rejects as records (found by a new user). Under `_…` they are fine.
    for rej in ["out", "out/rejects", "out/x/_rejects"] {
        let s = prefix_spec(
            d.path(),
            &format!("uri: \"{dp}/out\""),
            &format!("rejects: {{uri: \"{dp}/{rej}\"}}"),
        );
        refused(&s, &jobs, "rejects.uri", "rejects would be read as records");
    }
    let s = prefix_spec(
        d.path(),
        &format!("uri: \"{dp}/jobs/jobs/x\", overwrite: true"),
        "",
    );
    refused(&s, &jobs, "output.uri", "job directories");
    assert_eq!(
        files_under(&d.path().join("in")),
        before,
        "inputs untouched"
    );
}

/// Item 2: two jobs sharing a rejects prefix used to delete each other's rejects (the
/// second finalize swept what the first had published). The second is refused; so is
/// an output inside another job's output, even with `overwrite: true`.
#[test]
fn a_job_never_sweeps_another_jobs_prefix() {
    let d = tempfile::tempdir().unwrap();
    let dp = d.path().display().to_string();
    let mut lines = docs(42, 100);
    lines.insert(3, "{not json".into());
    write_lines(&d.path().join("in/a.jsonl"), &lines);
    let jobs = d.path().join("jobs");
    let s = prefix_spec(
        d.path(),
        &format!("uri: \"{dp}/out1\""),
        &format!("rejects: {{uri: \"{dp}/rejects\"}}"),
    );
    run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "1", "--job-root"])
            .arg(&jobs),
    );
    let rejects_before = files_under(&d.path().join("rejects"));
    assert!(
        rejects_before.iter().any(|f| f.ends_with(".parquet")),
        "{rejects_before:?}"
    );
    let s = prefix_spec(
        d.path(),
        &format!("uri: \"{dp}/out2\""),
        &format!("rejects: {{uri: \"{dp}/rejects\"}}"),
    );
    refused(&s, &jobs, "rejects.uri", "owned by job");
    // Inside the first job's output, with overwrite: refused too.
    let s = prefix_spec(
        d.path(),
        &format!("uri: \"{dp}/out1/sub\", overwrite: true"),
        "",
    );
    refused(&s, &jobs, "output.uri", "owned by job");
    // `output.overwrite` is about the output: it never takes a shared rejects prefix.
    let s = prefix_spec(
        d.path(),
        &format!("uri: \"{dp}/out3\", overwrite: true"),
        &format!("rejects: {{uri: \"{dp}/rejects\"}}"),
    );
    refused(&s, &jobs, "rejects.uri", "owned by job");
    assert_eq!(files_under(&d.path().join("rejects")), rejects_before);
    assert!(output_ids(&d.path().join("out1")).len() > 50);
}

/// A finished job is not run again, so a rerun after its output was deleted (or one
/// file of it) printed the old counts and exited 0 over nothing (found by a new
/// user). It now fails, saying what is gone and how to write it again.
#[test]
fn a_rerun_of_a_finished_job_whose_output_is_gone_fails() {
    let d = tempfile::tempdir().unwrap();
    let dp = d.path().display().to_string();
    write_lines(&d.path().join("in/a.jsonl"), &docs(44, 50));
    let jobs = d.path().join("jobs");
    let s = prefix_spec(d.path(), &format!("uri: \"{dp}/out\""), "");
    let run = || {
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "1", "--job-root"])
            .arg(&jobs)
            .output()
            .unwrap()
    };
    let o = run();
    assert!(o.status.success(), "{}", stderr(&o));
    // A rerun with the output in place succeeds and recomputes nothing.
    let o = run();
    assert!(o.status.success(), "{}", stderr(&o));
    // Reviewed rejects deleted: a warning, the data is whole.
    let rj = d.path().join("out/_rejects");
    if rj.exists() {
        std::fs::remove_dir_all(&rj).unwrap();
        let o = run();
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("rejects files of the output are gone"),
            "{}",
            stderr(&o)
        );
    }
    // One data file gone.
    let m = manifest(&d.path().join("out"));
    let f = d
        .path()
        .join("out")
        .join(m["files"][0]["path"].as_str().unwrap());
    std::fs::remove_file(&f).unwrap();
    let o = run();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("are gone or changed") && stderr(&o).contains("another --job-root"),
        "{}",
        stderr(&o)
    );
    // The whole output gone.
    std::fs::remove_dir_all(d.path().join("out")).unwrap();
    let o = run();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("has no _manifest.json"),
        "{}",
        stderr(&o)
    );
    // Another job wrote over it (overwrite): the first job's rerun does not claim
    // that output as its own (found by review).
    let s2 = prefix_spec(d.path(), &format!("uri: \"{dp}/out\", overwrite: true"), "");
    let text = std::fs::read_to_string(&s2)
        .unwrap()
        .replace("min_words: 3", "min_words: 5");
    std::fs::write(&s2, text).unwrap();
    run_ok(
        mdf()
            .args(["run", s2.to_str().unwrap(), "--workers", "1", "--job-root"])
            .arg(&jobs),
    );
    prefix_spec(d.path(), &format!("uri: \"{dp}/out\""), "");
    let o = run();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("now holds the output of job"),
        "{}",
        stderr(&o)
    );
}

/// `output.overwrite: true` replaces an mdf job's output, never a folder of the user's
/// own files (found by a new user: a mistyped `--output` with the example's
/// `overwrite: true` swept a home directory). A prefix without a job's marker is
/// refused, and its files are untouched; a finished job's output is still replaced.
#[test]
fn overwrite_never_sweeps_files_no_job_wrote() {
    let d = tempfile::tempdir().unwrap();
    let dp = d.path().display().to_string();
    write_lines(&d.path().join("in/a.jsonl"), &docs(43, 50));
    let jobs = d.path().join("jobs");
    let home = d.path().join("home");
    std::fs::create_dir_all(home.join("projects/thesis")).unwrap();
    std::fs::write(home.join("projects/thesis/ch1.tex"), "chapter one").unwrap();
    std::fs::write(home.join(".bashrc"), "export A=1").unwrap();
    let before = files_under(&home);
    let s = prefix_spec(
        d.path(),
        &format!("uri: \"{dp}/home\", overwrite: true"),
        "",
    );
    refused(&s, &jobs, "output.uri", "holds files no mdf job wrote");
    // `mdf validate` says so too, before a run is tried.
    let o = mdf()
        .args(["validate", s.to_str().unwrap(), "--job-root"])
        .arg(&jobs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("holds files no mdf job wrote"),
        "{}",
        stdout(&o)
    );
    assert_eq!(files_under(&home), before);
    assert_eq!(
        std::fs::read_to_string(home.join("projects/thesis/ch1.tex")).unwrap(),
        "chapter one"
    );
    // Another tool's `_manifest.json` proves nothing (found by review).
    std::fs::write(home.join("_manifest.json"), "{}").unwrap();
    refused(&s, &jobs, "output.uri", "holds files no mdf job wrote");
    assert!(home.join("projects/thesis/ch1.tex").exists());
    // An mdf output is still replaced: a first job, then a changed spec over it.
    let s = prefix_spec(d.path(), &format!("uri: \"{dp}/out\", overwrite: true"), "");
    run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "1", "--job-root"])
            .arg(&jobs),
    );
    let first = output_ids(&d.path().join("out"));
    // Validating the spec of a job that ran says it resumes (found by review: it
    // said the output was not empty, though a run resumes).
    let o = run_ok(
        mdf()
            .args(["validate", s.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    assert!(stdout(&o).contains("a run resumes it"), "{}", stdout(&o));
    let s2 = std::fs::read_to_string(&s)
        .unwrap()
        .replace("min_words: 3", "min_words: 4");
    std::fs::write(&s, s2).unwrap();
    // A file the user put into the output since is not the old job's to replace.
    std::fs::create_dir_all(d.path().join("out/analysis")).unwrap();
    std::fs::write(d.path().join("out/analysis/notes.txt"), "mine").unwrap();
    refused(&s, &jobs, "output.uri", "did not write");
    assert!(d.path().join("out/analysis/notes.txt").exists());
    std::fs::remove_dir_all(d.path().join("out/analysis")).unwrap();
    run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "1", "--job-root"])
            .arg(&jobs),
    );
    let second = output_ids(&d.path().join("out"));
    assert!(!second.is_empty() && second.len() <= first.len());
}

/// `output.overwrite: true` replaces a finished job's output, never that of a job still
/// running (its workers would go on publishing into the prefix the new job sweeps).
#[test]
fn overwrite_waits_for_the_previous_job_to_finish() {
    let d = tempfile::tempdir().unwrap();
    let dp = d.path().display().to_string();
    write_lines(&d.path().join("in/a.jsonl"), &docs(44, 60));
    let jobs = d.path().join("jobs");
    let s = prefix_spec(d.path(), &format!("uri: \"{dp}/out\""), "");
    let o = run_ok(
        mdf()
            .args(["submit", s.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let first = stdout(&o).lines().last().unwrap().to_string();
    let again = |words: &str| {
        let s = prefix_spec(
            d.path(),
            &format!("uri: \"{dp}/out\", overwrite: true"),
            &format!("# {words}"),
        );
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "1", "--job-root"])
            .arg(&jobs)
            .output()
            .unwrap()
    };
    let o = again("while the first runs");
    assert!(!o.status.success());
    assert!(stderr(&o).contains("has not finished"), "{}", stderr(&o));
    run_ok(mdf().args(["worker", "--job", &first]));
    let o = again("after it finished");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(output_ids(&d.path().join("out")).len() > 30);
}

/// Submits (without running) a job over 60 documents and a bad line, writing to `out`
/// with its rejects in a prefix of their own, `rej`; returns the job URI.
fn submit_with_own_rejects(dir: &Path, seed: u64) -> String {
    let dp = dir.display().to_string();
    let mut lines = docs(seed, 60);
    lines.insert(3, "{not json".into());
    write_lines(&dir.join("in/a.jsonl"), &lines);
    let s = prefix_spec(
        dir,
        &format!("uri: \"{dp}/out\""),
        &format!("rejects: {{uri: \"{dp}/rej\"}}"),
    );
    let o = run_ok(
        mdf()
            .args(["submit", s.to_str().unwrap(), "--job-root"])
            .arg(dir.join("jobs")),
    );
    stdout(&o).lines().last().unwrap().to_string()
}

/// Item 2: finalize deletes stray objects only under a prefix whose owner marker names
/// its job; without the marker (say a user removed it) nothing there is deleted.
#[test]
fn finalize_sweeps_only_a_prefix_it_owns() {
    let d = tempfile::tempdir().unwrap();
    let job = submit_with_own_rejects(d.path(), 43);
    let marker = d.path().join("rej/_mdf_owner.json");
    assert!(marker.exists(), "submit marks the rejects prefix");
    assert!(d.path().join("out/_mdf_owner.json").exists());
    // A stray file in the owned output is swept; one in the unmarked rejects is not.
    std::fs::remove_file(&marker).unwrap();
    std::fs::write(d.path().join("rej/keep.txt"), "mine").unwrap();
    std::fs::write(d.path().join("out/stray.txt"), "old").unwrap();
    // A nested prefix with a marker of its own is another job's: never swept.
    std::fs::create_dir_all(d.path().join("out/sub")).unwrap();
    std::fs::write(
        d.path().join("out/sub/_mdf_owner.json"),
        r#"{"version": 2, "job_id": "other", "job_uri": "file:///elsewhere/jobs/other", "role": "output"}"#,
    )
    .unwrap();
    std::fs::write(d.path().join("out/sub/part.parquet"), "theirs").unwrap();
    run_ok(mdf().args(["worker", "--job", &job]));
    assert!(d.path().join("rej/keep.txt").exists(), "not swept");
    assert!(!d.path().join("out/stray.txt").exists(), "swept");
    assert!(
        d.path().join("out/sub/part.parquet").exists(),
        "nested prefix kept"
    );
    assert!(output_ids(&d.path().join("out")).len() > 30);
}

/// An output whose marker a user removed is not provably this job's: nothing there is
/// swept, but the job still publishes and writes its manifest (it used to publish,
/// then refuse the manifest as "no longer this job's output", failing the job).
#[test]
fn a_finalize_whose_output_marker_was_removed_still_completes() {
    let d = tempfile::tempdir().unwrap();
    let job = submit_with_own_rejects(d.path(), 47);
    std::fs::remove_file(d.path().join("out/_mdf_owner.json")).unwrap();
    std::fs::write(d.path().join("out/stray.txt"), "theirs").unwrap();
    run_ok(mdf().args(["worker", "--job", &job]));
    let st = status_json(&job);
    assert_eq!(st["succeeded"], true, "{st:#}");
    assert!(d.path().join("out/stray.txt").exists(), "not swept");
    assert!(manifest(&d.path().join("out"))["rows"].as_u64().unwrap() > 30);
}

/// A job planned before owner markers never checked them; but a marker naming another
/// job in its output is proof that a newer job took it: a late finalize of the old job
/// publishes nothing there (it copied its files into the other job's output, and its
/// manifest over the other's).
#[test]
fn a_stale_finalize_of_a_job_planned_before_owner_markers_never_publishes_into_another_jobs_output()
{
    let d = tempfile::tempdir().unwrap();
    let dp = d.path().display().to_string();
    write_lines(&d.path().join("in/a.jsonl"), &docs(46, 60));
    let jobs = d.path().join("jobs");
    let run = |comment: &str| {
        let s = prefix_spec(
            d.path(),
            &format!("uri: \"{dp}/out\", overwrite: true"),
            comment,
        );
        job_uri(&run_ok(
            mdf()
                .args(["run", s.to_str().unwrap(), "--workers", "1", "--job-root"])
                .arg(&jobs),
        ))
    };
    let first = run("# first");
    let second = run(&format!("rejects: {{uri: \"{dp}/rej\"}}"));
    assert_ne!(first, second);
    let before = snapshot(&d.path().join("out"));
    let root = first.strip_prefix("file://").unwrap();
    // The first job as an older mdf planned it (no owner markers), its finalize never
    // committed.
    let job_json = Path::new(root).join("job.json");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&job_json).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("owner_markers");
    std::fs::write(&job_json, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    for sub in ["commits/finalize", "leases/finalize"] {
        std::fs::remove_dir_all(Path::new(root).join(sub)).unwrap();
    }
    let o = mdf().args(["worker", "--job", &first]).output().unwrap();
    assert_eq!(
        snapshot(&d.path().join("out")),
        before,
        "the other job's output changed:\n{}",
        stderr(&o)
    );
}

/// Texts that repeat across two files: `a` and `b` share `shared` documents (so a dedup
/// over both drops copies from one of them), and each has documents of its own.
fn dup_inputs(dir: &Path) {
    let doc = |i: usize, tag: &str| {
        serde_json::json!({"text": format!("document {i} {tag} says the river is {} today", i * 7 % 13)})
            .to_string()
    };
    let mut a: Vec<String> = (0..40).map(|i| doc(i, "shared")).collect();
    a.extend((0..30).map(|i| doc(i, "only-a")));
    a.extend((0..10).map(|i| doc(i, "only-a"))); // duplicates inside a
    let mut b: Vec<String> = (0..40).map(|i| doc(i, "shared")).collect();
    b.extend((0..30).map(|i| doc(i, "only-b")));
    write_lines(&dir.join("src/a.jsonl"), &a);
    write_lines(&dir.join("src/b.jsonl"), &b);
}

/// A dedup job over the files `names` of `src/` (one task each), writing to `out`.
fn dedup_spec(dir: &Path, names: &[&str], out: &str, after: &str) -> std::path::PathBuf {
    let uris: Vec<String> = names
        .iter()
        .map(|n| format!("\"{}/src/{n}.jsonl\"", dir.display()))
        .collect();
    let p = dir.join(format!("{out}.yaml"));
    std::fs::write(
        &p,
        format!(
            "name: reuse-dd\ninput: {{uris: [{}]}}\nstages:\n  - op: exact_key\n    name: content\n  - op: dedup\n    params: {{key: content_key}}\n  - op: text_length\n{after}output: {{uri: \"{}/{out}\"}}\njob: {{max_files_per_task: 1, poll_millis: 20}}\n",
            uris.join(", "),
            dir.display()
        ),
    )
    .unwrap();
    p
}

fn texts(out: &Path) -> Vec<String> {
    let mut v = strings(&output_batches(out), "text");
    v.sort();
    v
}

/// The records a clean run of `spec` outputs.
fn clean(dir: &Path, spec: &Path, out: &str) -> Vec<String> {
    run_ok(
        mdf()
            .args([
                "run",
                spec.to_str().unwrap(),
                "--workers",
                "1",
                "--job-root",
            ])
            .arg(dir.join(format!("jobs-{out}"))),
    );
    texts(&dir.join(out))
}

/// A dedup job over {a, b} whose map task over b failed (its input denied): it
/// completes, its reduce and apply over a alone. Its URI.
fn job_with_a_failed_map_task(dir: &Path, out: &str) -> String {
    let job = submit_job(&dedup_spec(dir, &["a", "b"], out, ""), &dir.join("jobs"));
    let o = mdf()
        .args(["worker", "--job", &job])
        .env("MDF_FAULTS", "get:denied:1:/src/b.jsonl")
        .output()
        .unwrap();
    let st = status_json(&job);
    assert_eq!(st["complete"], true, "{st:#}\n{}", stderr(&o));
    assert_eq!(st["phases"][0]["tasks"]["failed"], 1, "{st:#}");
    assert_eq!(st["phases"][1]["tasks"]["committed"], 1, "{st:#}");
    job
}

/// Runs `spec` to completion with one in-process worker under `<dir>/jobs`; its URI.
fn run_fresh(dir: &Path, spec: &Path) -> String {
    let o = run_ok(
        mdf()
            .args([
                "run",
                spec.to_str().unwrap(),
                "--workers",
                "1",
                "--job-root",
            ])
            .arg(dir.join("jobs")),
    );
    job_uri(&o)
}

fn run_reusing(dir: &Path, spec: &Path, old: &str) -> String {
    let o = run_ok(
        mdf()
            .args([
                "run",
                spec.to_str().unwrap(),
                "--workers",
                "1",
                "--reuse",
                old,
                "--job-root",
            ])
            .arg(dir.join("jobs")),
    );
    job_uri(&o)
}

/// Item 1, first scenario: a job over {a, b} interrupted after its reduce, re-run with
/// `--reuse` over {a} alone. Reduce ids used to depend only on the map fingerprint, so
/// the reduce over {a, b} was reused and dropped a's copies of documents whose
/// representative was in b, which this job never outputs.
#[test]
fn reuse_of_an_interrupted_dedup_over_fewer_files_loses_nothing() {
    let d = tempfile::tempdir().unwrap();
    dup_inputs(d.path());
    let s = dedup_spec(d.path(), &["a", "b"], "o-ab", "");
    let o = run_ok(
        mdf()
            .args(["submit", s.to_str().unwrap(), "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let old = stdout(&o).lines().last().unwrap().to_string();
    // Two map tasks and one reduce task, then stop: the apply phase never runs.
    run_ok(mdf().args(["worker", "--job", &old, "--max-tasks", "3"]));
    let st = status_json(&old);
    assert_eq!(st["complete"], false, "interrupted: {st:#}");
    let s = dedup_spec(d.path(), &["a"], "o-a", "");
    run_reusing(d.path(), &s, &old);
    let want = clean(d.path(), &dedup_spec(d.path(), &["a"], "c-a", ""), "c-a");
    assert_eq!(want.len(), 70, "a's 70 distinct documents");
    assert_eq!(texts(&d.path().join("o-a")), want);
}

/// Item 1, second scenario: adding a file to a finished dedup job's inputs and reusing
/// it. The old reduce saw only a's keys; reusing it kept cross-file duplicates (and
/// its decisions object had been deleted by the janitor).
#[test]
fn reuse_of_a_dedup_with_more_files_removes_cross_file_duplicates() {
    let d = tempfile::tempdir().unwrap();
    dup_inputs(d.path());
    let s = dedup_spec(d.path(), &["a"], "o-a", "");
    let old = run_fresh(d.path(), &s);
    let s = dedup_spec(d.path(), &["a", "b"], "o-ab", "");
    let new = run_reusing(d.path(), &s, &old);
    let want = clean(
        d.path(),
        &dedup_spec(d.path(), &["a", "b"], "c-ab", ""),
        "c-ab",
    );
    assert_eq!(want.len(), 100, "70 of a, 30 more of b");
    assert_eq!(texts(&d.path().join("o-ab")), want);
    // Map task a was reused; the reduce, which saw other keys, was not.
    let st = status_json(&new);
    assert_eq!(st["succeeded"], true);
}

/// Item 1, third scenario: a finished job's dedup phases reused by a job that changes
/// only a stage after the dedup. Its janitor used to delete the decisions objects, so
/// the new apply tasks failed; the shuffle objects of committed tasks are now kept.
#[test]
fn reuse_of_a_finished_jobs_dedup_phases_works() {
    let d = tempfile::tempdir().unwrap();
    dup_inputs(d.path());
    let s = dedup_spec(d.path(), &["a", "b"], "o1", "");
    let old = run_fresh(d.path(), &s);
    let filter = "  - op: length_filter\n    params: {min_words: 7}\n";
    let s = dedup_spec(d.path(), &["a", "b"], "o2", filter);
    let new = run_reusing(d.path(), &s, &old);
    let want = clean(
        d.path(),
        &dedup_spec(d.path(), &["a", "b"], "c2", filter),
        "c2",
    );
    assert!(!want.is_empty());
    assert_eq!(texts(&d.path().join("o2")), want);
    // The map and reduce commits were reused: none of their tasks was leased again.
    let st = status_json(&new);
    assert_eq!(st["phases"][0]["requests"]["get"], 0, "{st:#}");
    assert_eq!(st["phases"][1]["requests"]["get"], 0, "{st:#}");
}

/// A job whose map task over b failed (its input was unreadable) still reduced and
/// applied over a alone. Re-run with `--reuse`, b's map task is recomputed, so the
/// reduce must be too: reusing the old one, which never saw b's keys, let every
/// document b shares with a through twice.
#[test]
fn reuse_recomputes_a_reduce_whose_map_task_had_failed() {
    let d = tempfile::tempdir().unwrap();
    dup_inputs(d.path());
    let old = job_with_a_failed_map_task(d.path(), "o-old");
    let s = dedup_spec(d.path(), &["a", "b"], "o-new", "");
    let new = run_reusing(d.path(), &s, &old);
    let want = clean(d.path(), &dedup_spec(d.path(), &["a", "b"], "c", ""), "c");
    assert_eq!(want.len(), 100, "70 of a, 30 more of b");
    assert_eq!(texts(&d.path().join("o-new")), want);
    // a's map commit was reused; the reduce and apply were not.
    let st = status_json(&new);
    assert!(
        st["phases"][1]["requests"]["get"].as_u64().unwrap() > 0,
        "{st:#}"
    );
}

/// A job made by an mdf without the rule above: its reduce and one apply reused from a
/// job whose map task over b had failed, beside its own map task over b (so b's
/// copies of a's documents survived in it). Reusing that job again must not carry
/// the old reduce on: a commit reused from job X is reused only if X's upstream
/// commits are the old job's own (here X's map task b failed; the old job's is
/// committed).
#[test]
fn reuse_of_a_job_holding_a_reduce_over_other_map_commits_recomputes_it() {
    let d = tempfile::tempdir().unwrap();
    dup_inputs(d.path());
    let jobs = d.path().join("jobs");
    let a = job_with_a_failed_map_task(d.path(), "o-a");
    // Job B, poisoned as the old rule made it: map a reused, A's reduce copied in as
    // reused from A, the rest computed by B's workers (its apply over A's decisions,
    // which never saw b's keys). The apply phase is the last, whose ids depend on the
    // output, so the old rule could not have reused it here either.
    let s = dedup_spec(d.path(), &["a", "b"], "o-b", "");
    let o = run_ok(
        mdf()
            .args(["submit", s.to_str().unwrap(), "--reuse", &a, "--job-root"])
            .arg(&jobs),
    );
    let b = stdout(&o).lines().last().unwrap().to_string();
    let dir = |uri: &str| std::path::PathBuf::from(uri.strip_prefix("file://").unwrap());
    let b_id = b.rsplit('/').next().unwrap().to_string();
    for phase in ["p01"] {
        for f in std::fs::read_dir(dir(&a).join("commits").join(phase)).unwrap() {
            let f = f.unwrap().path();
            let mut rec: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
            if rec["status"] != "committed" {
                continue;
            }
            rec["job_id"] = b_id.clone().into();
            rec["reused_from"] = a.clone().into();
            let to = dir(&b).join("commits").join(phase);
            std::fs::create_dir_all(&to).unwrap();
            std::fs::write(to.join(f.file_name().unwrap()), rec.to_string()).unwrap();
        }
    }
    run_ok(mdf().args(["worker", "--job", &b]));
    let want = clean(d.path(), &dedup_spec(d.path(), &["a", "b"], "c", ""), "c");
    let poisoned = texts(&d.path().join("o-b"));
    assert!(
        poisoned.len() > want.len(),
        "the emulated old job kept b's copies"
    );
    // Job C reuses B: B's map commits are fine, its reduce is not.
    let s = dedup_spec(d.path(), &["a", "b"], "o-c", "");
    run_reusing(d.path(), &s, &b);
    assert_eq!(texts(&d.path().join("o-c")), want);
}

/// The check above refuses nothing sound: a job reusing a job that reused the map and
/// reduce of a third still reuses both (they were computed in the first job, over the
/// map commits all three share).
#[test]
fn reuse_of_a_reuse_still_reuses_the_dedup_phases() {
    let d = tempfile::tempdir().unwrap();
    dup_inputs(d.path());
    let s = dedup_spec(d.path(), &["a", "b"], "o1", "");
    let p = run_fresh(d.path(), &s);
    let f1 = "  - op: length_filter\n    params: {min_words: 7}\n";
    let q = run_reusing(d.path(), &dedup_spec(d.path(), &["a", "b"], "o2", f1), &p);
    let f2 = "  - op: length_filter\n    params: {min_words: 8}\n";
    let r = run_reusing(d.path(), &dedup_spec(d.path(), &["a", "b"], "o3", f2), &q);
    let want = clean(d.path(), &dedup_spec(d.path(), &["a", "b"], "c3", f2), "c3");
    assert_eq!(texts(&d.path().join("o3")), want);
    let st = status_json(&r);
    assert_eq!(st["phases"][0]["requests"]["get"], 0, "{st:#}");
    assert_eq!(st["phases"][1]["requests"]["get"], 0, "{st:#}");
}

/// Item 5: an input rewritten after submit used to be read under the planned task id
/// with byte ranges cut from its old size. Reads are pinned to the planned etag: the
/// task fails at once with `input_changed` naming the file, and the job fails.
#[test]
fn an_input_rewritten_after_submit_fails_its_task_naming_the_file() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(51, 50));
    write_lines(&d.path().join("in/b.jsonl"), &docs(52, 50));
    let out = d.path().join("out");
    let s = text_spec(d.path(), &out, "");
    let o = run_ok(
        mdf()
            .args(["submit", s.to_str().unwrap(), "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let job = stdout(&o).lines().last().unwrap().to_string();
    std::thread::sleep(std::time::Duration::from_millis(20));
    write_lines(&d.path().join("in/b.jsonl"), &docs(53, 80));
    let o = mdf().args(["worker", "--job", &job]).output().unwrap();
    let st = status_json(&job);
    assert_eq!(st["complete"], true, "{st:#}\n{}", stderr(&o));
    assert_eq!(st["succeeded"], false, "{st:#}");
    let failed = st["failed_tasks"].to_string();
    assert!(
        failed.contains("input_changed") && failed.contains("b.jsonl"),
        "{failed}"
    );
    assert!(!failed.contains("a.jsonl"), "a was not changed: {failed}");
    // Failed at once: nothing retried a read that cannot succeed.
    assert!(!failed.contains("failed 2 times"), "{failed}");
}

/// Item 5: a job reusing an earlier one whose block list file has changed since must
/// recompute the filter (the fingerprint hashed the list's URI only, so the old
/// results were reused and the new blocked domain stayed in the output).
#[test]
fn a_changed_asset_file_is_not_reused() {
    let d = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..60)
        .map(|i| {
            serde_json::json!({"url": format!("https://site{}.org/p{i}", i % 3), "text": format!("page {i} of some site with words")})
                .to_string()
        })
        .collect();
    write_lines(&d.path().join("in/a.jsonl"), &lines);
    let list = d.path().join("lists/domains.txt");
    std::fs::create_dir_all(list.parent().unwrap()).unwrap();
    std::fs::write(&list, "site0.org\n").unwrap();
    let spec = |out: &str| {
        write_spec(
            d.path(),
            &format!(
                "name: assets\ninput: {{uris: [\"{0}/in/a.jsonl\"]}}\nstages:\n  - op: url_filter\n    params: {{domains: [\"{1}\"]}}\n    end_phase: true\n  - op: text_length\noutput: {{uri: \"{0}/{out}\", overwrite: true}}\njob: {{poll_millis: 20}}\n",
                d.path().display(),
                list.display()
            ),
        )
    };
    let o = run_ok(
        mdf()
            .args(["run", spec("o1").to_str().unwrap(), "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let old = job_uri(&o);
    assert_eq!(output_ids(&d.path().join("o1")).len(), 40);
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&list, "site0.org\nsite1.org\n").unwrap();
    run_ok(
        mdf()
            .args([
                "run",
                spec("o2").to_str().unwrap(),
                "--reuse",
                &old,
                "--job-root",
            ])
            .arg(d.path().join("jobs")),
    );
    assert_eq!(
        output_ids(&d.path().join("o2")).len(),
        20,
        "site1.org is now blocked too"
    );
    // The same spec run again after the list changed is a new job, not the old one
    // found complete.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&list, "site2.org\n").unwrap();
    let s = spec("o2");
    let o = run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--job-root"])
            .arg(d.path().join("jobs")),
    );
    assert!(stderr(&o).contains("submitted job"), "{}", stderr(&o));
    let urls = strings(&output_batches(&d.path().join("o2")), "url");
    assert_eq!(urls.len(), 40);
    assert!(urls.iter().all(|u| !u.contains("site2.org")), "{urls:?}");
}

/// Old jobs keep working: a job.json written before owner markers and asset pins (the
/// fields absent) is run by this worker; its output prefix is swept as before, and a
/// separate rejects prefix, which it never checked, is left alone.
#[test]
fn a_job_planned_before_owner_markers_still_completes() {
    let d = tempfile::tempdir().unwrap();
    let job = submit_with_own_rejects(d.path(), 71);
    let job_json = d
        .path()
        .join("jobs/jobs")
        .join(job.rsplit('/').next().unwrap())
        .join("job.json");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&job_json).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("owner_markers");
    v.as_object_mut().unwrap().remove("asset_etags");
    std::fs::write(&job_json, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    std::fs::remove_file(d.path().join("out/_mdf_owner.json")).unwrap();
    std::fs::remove_file(d.path().join("rej/_mdf_owner.json")).unwrap();
    std::fs::write(d.path().join("out/stray.txt"), "old").unwrap();
    std::fs::write(d.path().join("rej/theirs.txt"), "keep").unwrap();
    run_ok(mdf().args(["worker", "--job", &job]));
    let st = status_json(&job);
    assert_eq!(st["succeeded"], true, "{st:#}");
    assert!(
        !d.path().join("out/stray.txt").exists(),
        "output swept as before"
    );
    assert!(
        d.path().join("rej/theirs.txt").exists(),
        "rejects prefix not swept"
    );
    assert!(
        manifest(&d.path().join("out"))["rejected"]
            .as_u64()
            .unwrap()
            >= 1
    );
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    files_under(dir)
        .into_iter()
        .map(|f| {
            let b = std::fs::read(dir.join(&f)).unwrap();
            (f, b)
        })
        .collect()
}

/// A late worker of a finished job runs its finalize again after another job took the
/// output with `overwrite`: it publishes nothing there (no file of its own added to the
/// other job's output, none deleted, the manifest untouched) and says why.
#[test]
fn a_stale_finalize_never_publishes_into_an_output_another_job_took() {
    let d = tempfile::tempdir().unwrap();
    let dp = d.path().display().to_string();
    write_lines(&d.path().join("in/a.jsonl"), &docs(45, 60));
    let jobs = d.path().join("jobs");
    let run = |comment: &str| {
        let s = prefix_spec(
            d.path(),
            &format!("uri: \"{dp}/out\", overwrite: true"),
            comment,
        );
        job_uri(&run_ok(
            mdf()
                .args(["run", s.to_str().unwrap(), "--workers", "1", "--job-root"])
                .arg(&jobs),
        ))
    };
    let first = run("# first");
    // The second job differs (a rejects prefix of its own), so its files are its own.
    let second = run(&format!("rejects: {{uri: \"{dp}/rej\"}}"));
    assert_ne!(first, second);
    let before = snapshot(&d.path().join("out"));
    assert!(before.iter().any(|(f, _)| f.ends_with(".parquet")));
    // The first job's finalize as if it had never committed (a worker that held its
    // lease and stalled): its commit record and lease gone.
    let root = first.strip_prefix("file://").unwrap();
    for sub in ["commits/finalize", "leases/finalize"] {
        std::fs::remove_dir_all(Path::new(root).join(sub)).unwrap();
    }
    let o = mdf().args(["worker", "--job", &first]).output().unwrap();
    assert_eq!(
        snapshot(&d.path().join("out")),
        before,
        "the other job's output changed:\n{}",
        stderr(&o)
    );
    let st = status_json(&first);
    let text = format!("{st} {}", stderr(&o));
    assert!(text.contains("belongs to job"), "{text}");
}

/// `--reuse` never carries a last phase's files into another output format. Parquet
/// fingerprints predate the format's place in them, so a job planned before it (here:
/// a Parquet job's job.json made to say `megatron`, as a Lance job of that time had the
/// Parquet fingerprint) matches a Parquet job's last phase; its staged files are the
/// other format's and must not be published as `part-*.parquet`.
#[test]
fn reuse_never_carries_the_last_phase_across_output_formats() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    write_lines(&dir.join("in/a.jsonl"), &docs(5, 20));
    // Same output (it is in the last phase's fingerprint), another job name.
    let spec = |name: &str| {
        write_spec(
            dir,
            &format!(
                "name: {name}\ninput: {{uris: [\"{}/in/*.jsonl\"]}}\nstages: [{{op: text_length}}]\noutput: {{uri: \"{}/out\", overwrite: true}}\njob: {{poll_millis: 20}}\n",
                dir.display(),
                dir.display()
            ),
        )
    };
    let o = run_ok(
        mdf()
            .args(["run", spec("fmt-a").to_str().unwrap(), "--job-root"])
            .arg(dir.join("jobs")),
    );
    let old = job_uri(&o);
    let job_json = std::path::PathBuf::from(old.strip_prefix("file://").unwrap()).join("job.json");
    let mut j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&job_json).unwrap()).unwrap();
    j["spec"]["output"]["format"] = "megatron".into();
    std::fs::write(&job_json, serde_json::to_vec(&j).unwrap()).unwrap();
    let new = run_reusing(dir, &spec("fmt-b"), &old);
    let commits =
        std::path::PathBuf::from(new.strip_prefix("file://").unwrap()).join("commits/p00");
    let recs = files_under(&commits);
    assert!(!recs.is_empty());
    for f in recs {
        let c: serde_json::Value =
            serde_json::from_slice(&std::fs::read(commits.join(&f)).unwrap()).unwrap();
        assert!(
            c.get("reused_from").is_none(),
            "reused across formats: {c:#}"
        );
    }
    assert_eq!(output_ids(&dir.join("out")).len(), 20);
}
