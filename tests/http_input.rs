//! `https://` (and `http://`) inputs: any file server with range requests
//! (scripts/range-server.py here). A JSONL file cut into byte-range tasks is read
//! through ranged GETs and gives exactly the records the same files give from the
//! local disk; a glob or a missing file is refused before any task, naming the input.
mod common;
use common::*;
use std::path::Path;

type Server = PyServer;

fn serve(dir: &Path) -> Server {
    serve_broken(dir, None)
}

/// The server, with `broken`'s bodies cut off halfway.
fn serve_broken(dir: &Path, broken: Option<&str>) -> Server {
    let mut args = vec![dir.as_os_str().to_owned()];
    args.extend(broken.map(Into::into));
    py_server("range-server.py", &args, false)
}

fn spec(dir: &Path, name: &str, uris: &str) -> std::path::PathBuf {
    write_spec(
        dir,
        &format!(
            "version: 1\nname: {name}\ninput: {{uris: [{uris}], download: {{allow_private: true}}}}\nstages:\n  - op: text_length\noutput: {{uri: \"{d}/{name}\", overwrite: true}}\njob: {{task_bytes: 16KiB}}\n",
            d = dir.display()
        ),
    )
}

#[test]
fn https_inputs_read_through_ranges_equal_the_local_files() {
    let d = tempfile::tempdir().unwrap();
    let files = d.path().join("files");
    for f in 0..2 {
        write_lines(&files.join(format!("part-{f}.jsonl")), &docs(f, 600));
    }
    let srv = serve(&files);
    let jobs = d.path().join("jobs");
    let base = format!("http://127.0.0.1:{}", srv.port);
    let remote = spec(
        d.path(),
        "remote",
        &format!("\"{base}/part-0.jsonl\", \"{base}/part-1.jsonl\""),
    );
    let o = run_ok(
        mdf()
            .args([
                "run",
                remote.to_str().unwrap(),
                "--workers",
                "2",
                "--job-root",
            ])
            .arg(&jobs),
    );
    let st = status_json(&job_uri(&o));
    // Byte-range tasks: each file is cut into several.
    assert!(
        st["phases"][0]["tasks"]["total"].as_u64().unwrap() >= 4,
        "{st}"
    );
    let local = spec(
        d.path(),
        "local",
        &format!("\"{}/*.jsonl\"", files.display()),
    );
    run_ok(
        mdf()
            .args(["run", local.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let (r, l) = (
        url_text_records(&d.path().join("remote")),
        url_text_records(&d.path().join("local")),
    );
    assert_eq!(r.len(), 1200);
    assert_eq!(r, l);
}

#[test]
fn a_glob_or_a_missing_file_is_refused_before_any_task() {
    let d = tempfile::tempdir().unwrap();
    let files = d.path().join("files");
    write_lines(&files.join("a.jsonl"), &docs(1, 10));
    let srv = serve(&files);
    let base = format!("http://127.0.0.1:{}", srv.port);
    for (uris, needle) in [
        (format!("\"{base}/*.jsonl\""), "no listing"),
        (format!("\"{base}/missing.jsonl\""), "no such file"),
    ] {
        let s = spec(d.path(), "bad", &uris);
        let o = mdf()
            .args(["run", s.to_str().unwrap(), "--job-root"])
            .arg(d.path().join("jobs"))
            .output()
            .unwrap();
        let text = stderr(&o);
        assert!(!o.status.success(), "{uris}: accepted");
        assert!(text.contains(needle), "{uris}: {text}");
        assert!(!d.path().join("bad").join("_manifest.json").exists());
    }
}

/// A private, loopback or link-local server (an instance's metadata service) is read
/// only with `input.download.allow_private`; an output on a file server is refused.
#[test]
fn private_hosts_need_allow_private_and_file_servers_are_inputs_only() {
    let d = tempfile::tempdir().unwrap();
    for (uris, needle) in [
        (
            "\"http://169.254.169.254/latest/meta-data/\"",
            "169.254.169.254 is in",
        ),
        ("\"http://127.0.0.1:9/a.jsonl\"", "127.0.0.1 is in"),
        ("\"http://[::1]:9/a.jsonl\"", "::1 is in"),
        (
            "\"http://localhost:9/a.jsonl\"",
            "localhost is not a public host",
        ),
    ] {
        let s = write_spec(
            d.path(),
            &format!(
                "version: 1\nname: p\ninput: {{uris: [{uris}], format: jsonl}}\noutput: {{uri: \"{}/out\"}}\n",
                d.path().display()
            ),
        );
        let o = mdf().args(["run", s.to_str().unwrap()]).output().unwrap();
        let text = stderr(&o);
        assert!(!o.status.success(), "{uris}: accepted");
        assert!(
            text.contains("input.uris[0]") && text.contains(needle),
            "{uris}: {text}"
        );
        assert!(text.contains("allow_private"), "{text}");
    }
    let s = write_spec(
        d.path(),
        &format!(
            "version: 1\nname: w\ninput: {{uris: [\"{}/*.jsonl\"]}}\noutput: {{uri: \"https://example.org/out\"}}\n",
            d.path().display()
        ),
    );
    let o = mdf()
        .args(["validate", s.to_str().unwrap()])
        .output()
        .unwrap();
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(!o.status.success() && text.contains("output.uri"), "{text}");
}

/// A body cut off mid-stream is a storage error that fails the attempt (and, when it
/// keeps happening, the task): never a task committed without the rest of its slice.
#[test]
fn a_body_cut_off_midway_fails_the_task_rather_than_lose_records() {
    let d = tempfile::tempdir().unwrap();
    let files = d.path().join("files");
    write_lines(&files.join("good.jsonl"), &docs(1, 200));
    write_lines(&files.join("cut.jsonl"), &docs(2, 200));
    let srv = serve_broken(&files, Some("cut.jsonl"));
    let base = format!("http://127.0.0.1:{}", srv.port);
    let s = write_spec(
        d.path(),
        &format!(
            "version: 1\nname: cut\ninput: {{uris: [\"{base}/good.jsonl\", \"{base}/cut.jsonl\"], download: {{allow_private: true}}, schema: {{url: string, text: string, n: int64}}}}\noutput: {{uri: \"{d}/cut\"}}\njob: {{max_files_per_task: 1, max_attempts: 2, lease_ttl_secs: 4, poll_millis: 50}}\n",
            d = d.path().display()
        ),
    );
    let o = mdf()
        .args(["run", s.to_str().unwrap(), "--job-root"])
        .arg(d.path().join("jobs"))
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", stdout(&o));
    let st = status_json(&job_uri(&o));
    let failed = st["failed_tasks"].to_string();
    assert!(
        failed.contains("cut.jsonl")
            && (failed.contains("reading the response") || failed.contains("before its range did")),
        "{failed}"
    );
    // The good file's task committed in full; nothing of the cut file was published.
    assert_eq!(st["phases"][0]["tasks"]["committed"], 1, "{st}");
}
