//! `https://` (and `http://`) inputs: any file server with range requests
//! (scripts/range-server.py here). A JSONL file cut into byte-range tasks is read
//! through ranged GETs and gives exactly the records the same files give from the
//! local disk; a glob or a missing file is refused before any task, naming the input.
mod common;
use common::*;
use std::io::BufRead;
use std::path::Path;

struct Server {
    child: std::process::Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path) -> Server {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/range-server.py");
    let mut child = std::process::Command::new("python3")
        .arg(script)
        .arg(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().expect("the server prints its port");
    Server { child, port }
}

fn spec(dir: &Path, name: &str, uris: &str) -> std::path::PathBuf {
    write_spec(
        dir,
        &format!(
            "version: 1\nname: {name}\ninput: {{uris: [{uris}]}}\nstages:\n  - op: text_length\noutput: {{uri: \"{d}/{name}\", overwrite: true}}\njob: {{task_bytes: 16KiB}}\n",
            d = dir.display()
        ),
    )
}

/// (url, text) of every output record, sorted.
fn records(out: &Path) -> Vec<(String, String)> {
    let b = output_batches(out);
    let mut v: Vec<(String, String)> = strings(&b, "url")
        .into_iter()
        .zip(strings(&b, "text"))
        .collect();
    v.sort();
    v
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
        records(&d.path().join("remote")),
        records(&d.path().join("local")),
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
