//! Several `mdf worker` processes on one job, some killed with SIGKILL mid-task and
//! restarted: the output must equal a single-process run (same ids, no duplicates,
//! none missing) with no orphan file under the output. SIGTERM hands the lease back.
mod common;
use common::*;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn slow_spec(dir: &Path, out: &Path) -> std::path::PathBuf {
    slow_spec_n(dir, out, 12)
}

fn slow_spec_n(dir: &Path, out: &Path, files: u64) -> std::path::PathBuf {
    for i in 0..files {
        write_lines(&dir.join(format!("in/{i:02}.jsonl")), &docs(100 + i, 60));
    }
    write_spec(
        dir,
        &format!(
            r#"
name: chaos
input: {{uris: ["{0}/in/*.jsonl"]}}
stages:
  - op: throttle
    params: {{records_per_sec: 100}}
  - op: text_length
  - op: length_filter
    params: {{min_words: 4}}
output: {{uri: "{1}"}}
job: {{max_files_per_task: 1, lease_ttl_secs: 2, heartbeat_secs: 1, poll_millis: 100, batch_rows: 10}}
"#,
            dir.display(),
            out.display()
        ),
    )
}

fn worker(job: &str, id: &str) -> Child {
    mdf()
        .args(["worker", "--job", job, "--worker-id", id])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Checks `out` holds every record once, no file its manifest does not list, and the
/// same record ids as a clean run of `spec` (throttle lifted, `workers` in-process
/// workers) into `<dir>/out-ref`; returns the ids, sorted.
fn same_as_a_clean_run(dir: &Path, spec: &Path, out: &Path, workers: &str) -> Vec<String> {
    let mut a = output_ids(out);
    let unique: BTreeSet<&String> = a.iter().collect();
    assert_eq!(unique.len(), a.len(), "no duplicates");
    assert!(orphans(out).is_empty(), "orphans: {:?}", orphans(out));
    let out2 = dir.join("out-ref");
    run_ok(
        mdf()
            .args(["run", spec.to_str().unwrap(), "--workers", workers, "-o"])
            .arg(&out2)
            .args([
                "--set",
                "stages.throttle.params.records_per_sec=1000000",
                "--job-root",
            ])
            .arg(dir.join("jobs-ref")),
    );
    let mut b = output_ids(&out2);
    a.sort();
    b.sort();
    assert_eq!(a.len(), b.len(), "none missing");
    assert_eq!(a, b, "same record ids as a clean run");
    a
}

fn wait_all(children: &mut [Child], limit: Duration) {
    let t0 = Instant::now();
    for c in children.iter_mut() {
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                assert!(st.success(), "worker exited with {st}");
                break;
            }
            assert!(t0.elapsed() < limit, "workers did not finish in {limit:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn killed_workers_are_replaced_and_output_is_exactly_once() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let spec = slow_spec(d.path(), &out);
    let jobs = d.path().join("jobs");
    let o = run_ok(
        mdf()
            .args(["submit", spec.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let job = stdout(&o).lines().last().unwrap().to_string();
    let mut live: Vec<Child> = (0..4).map(|i| worker(&job, &format!("w{i}"))).collect();
    // Two rounds: kill two workers mid-task, start two replacements.
    for round in 0..2 {
        std::thread::sleep(Duration::from_millis(900));
        for mut c in live.drain(..2) {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        live.push(worker(&job, &format!("r{round}a")));
        live.push(worker(&job, &format!("r{round}b")));
    }
    wait_all(&mut live, Duration::from_secs(120));
    let st = status_json(&job);
    assert_eq!(st["succeeded"], true, "{st:#}");
    // Some task really was taken over from a killed worker.
    let leases = files_under(&jobs);
    let takeovers = leases
        .iter()
        .filter(|f| f.contains("/leases/p00/"))
        .filter(|f| {
            let v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(jobs.join(f)).unwrap()).unwrap();
            v["lost"].as_u64().unwrap_or(0) > 0
        })
        .count();
    assert!(
        takeovers > 0,
        "no lease was taken over; the kills missed every task"
    );
    // Reference: a single process with four workers on the same inputs.
    same_as_a_clean_run(d.path(), &spec, &out, "4");
    // The staged files of killed attempts were cleaned up by the janitor.
    let job_dir = jobs.join("jobs").join(job.rsplit('/').next().unwrap());
    let staged: BTreeSet<String> = files_under(&job_dir.join("staging"))
        .iter()
        .map(|f| f.rsplit_once('/').unwrap().0.to_string())
        .collect();
    assert_eq!(
        staged.len() as u64,
        st["phases"][0]["tasks"]["committed"].as_u64().unwrap(),
        "one staged attempt per committed task"
    );
}

/// Submits `spec` with its throttle at `rate` records/s and a 60 s lease TTL (so a
/// lease that is not handed back would hold the task for a minute); the job URI.
fn submit_slow(spec: &std::path::Path, jobs: &std::path::Path, rate: u32) -> String {
    let o = run_ok(
        mdf()
            .args(["submit", spec.to_str().unwrap(), "--set"])
            .arg(format!("stages.throttle.params.records_per_sec={rate}"))
            .args([
                "--set",
                "job.lease_ttl_secs=60",
                "--set",
                "job.heartbeat_secs=5",
                "--job-root",
            ])
            .arg(jobs),
    );
    stdout(&o).lines().last().unwrap().to_string()
}

#[test]
fn sigterm_hands_the_lease_back_promptly() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let spec = slow_spec(d.path(), &out);
    let jobs = d.path().join("jobs");
    let job = submit_slow(&spec, &jobs, 5);
    let mut w = worker(&job, "term");
    std::thread::sleep(Duration::from_millis(1500));
    let t0 = Instant::now();
    unsafe { libc::kill(w.id() as i32, libc::SIGTERM) };
    let st = w.wait().unwrap();
    assert!(st.success(), "{st}");
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "stopped in {:?}",
        t0.elapsed()
    );
    // Its last lease record is a release, so the next worker need not wait 60 s.
    let recs: Vec<String> = files_under(&jobs)
        .into_iter()
        .filter(|f| f.contains("/leases/p00/"))
        .collect();
    assert!(!recs.is_empty());
    let last = recs.last().unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(jobs.join(last)).unwrap()).unwrap();
    assert_eq!(v["kind"], "release", "{v}");
}

/// A spot interruption: the worker gets SIGTERM mid-task, hands its lease back and
/// exits; its replacement finishes the job at once (not after the 60 s lease TTL),
/// with every record exactly once.
#[test]
fn sigterm_replacement_finishes_the_job_without_waiting_for_the_lease() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let spec = slow_spec_n(d.path(), &out, 3);
    let jobs = d.path().join("jobs");
    let job = submit_slow(&spec, &jobs, 30);
    let mut first = worker(&job, "spot-1");
    std::thread::sleep(Duration::from_millis(1000));
    unsafe { libc::kill(first.id() as i32, libc::SIGTERM) };
    assert!(first.wait().unwrap().success());
    let st = status_json(&job);
    assert_ne!(
        st["complete"], true,
        "the interrupted worker left work behind"
    );
    let t0 = Instant::now();
    let mut second = worker(&job, "spot-2");
    wait_all(std::slice::from_mut(&mut second), Duration::from_secs(45));
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "the replacement waited {:?} (the lease TTL is 60 s)",
        t0.elapsed()
    );
    let st = status_json(&job);
    assert_eq!(st["succeeded"], true, "{st}");
    let ids = output_ids(&out);
    let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "no record twice");
    assert_eq!(
        ids.len() as u64 + st["phases"][0]["rejected"].as_u64().unwrap(),
        180,
        "no record lost"
    );
}

/// Workers killed during the dedup reduce and apply phases (their reads slowed by
/// injected latency so the kills land there): the survivors equal a clean run's.
#[test]
fn killed_workers_during_dedup_pass_2_give_the_same_survivors() {
    let d = tempfile::tempdir().unwrap();
    for i in 0..8 {
        // Every document appears in two files: half the records are duplicates.
        let lines = docs(200 + i % 4, 40);
        write_lines(&d.path().join(format!("in/{i:02}.jsonl")), &lines);
    }
    let a = kill_during_pass_2(
        d.path(),
        "  - op: exact_key\n    name: content\n  - op: dedup\n    params: {key: content_key, partitions: 4}\n",
        "get:latency=400:1:keys.bin,get:latency=300:1:decisions.bin",
    );
    assert!(a.len() <= 4 * 40, "every copy in a second file was removed");
}

/// The same for near duplicates: kills land in the candidates reduce and the
/// label-propagation steps.
#[test]
fn killed_workers_during_near_dedup_give_the_same_survivors() {
    let d = tempfile::tempdir().unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..8 {
        let lines: Vec<String> = (0..60)
            .map(|j| {
                // Three hashes per "image", a bit or two apart.
                if j % 3 == 0 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                }
                let h = if j % 3 == 0 {
                    x
                } else {
                    x ^ (1 << (j % 64)) ^ (i << 8)
                };
                serde_json::json!({"phash": format!("{h:016x}")}).to_string()
            })
            .collect();
        write_lines(&d.path().join(format!("in/{i:02}.jsonl")), &lines);
    }
    let a = kill_during_pass_2(
        d.path(),
        "  - op: dedup\n    params: {key: phash, kind: phash, partitions: 3, max_rounds: 4}\n",
        "get:latency=300:1:keys.bin,get:latency=200:1:near.bin",
    );
    assert!(
        a.len() <= 8 * 20 + 8,
        "near duplicates were removed: {}",
        a.len()
    );
}

/// Submits a dedup job over `dir/in`, runs slowed workers killing two of three twice
/// after pass 1, checks a pass-2 lease was taken over, and compares the survivors
/// with a clean single-worker run. Returns them.
fn kill_during_pass_2(dir: &std::path::Path, stages: &str, faults: &str) -> Vec<String> {
    let out = dir.join("out");
    let spec = write_spec(
        dir,
        &format!(
            r#"
name: dedup-chaos
input: {{uris: ["{0}/in/*.jsonl"]}}
stages:
{2}output: {{uri: "{1}"}}
job: {{max_files_per_task: 1, lease_ttl_secs: 2, heartbeat_secs: 1, poll_millis: 100}}
"#,
            dir.display(),
            out.display(),
            stages
        ),
    );
    let jobs = dir.join("jobs");
    let o = run_ok(
        mdf()
            .args(["submit", spec.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let job = stdout(&o).lines().last().unwrap().to_string();
    let slow = |id: &str| {
        mdf()
            .args(["worker", "--job", &job, "--worker-id", id])
            .env("MDF_FAULTS", faults)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let job_dir = jobs.join("jobs").join(job.rsplit('/').next().unwrap());
    let committed = |phase: &str| files_under(&job_dir.join("commits").join(phase)).len();
    let mut live: Vec<(String, Child)> = (0..3)
        .map(|i| {
            let id = format!("w{i}");
            (id.clone(), slow(&id))
        })
        .collect();
    // Wait for pass 1.
    let t0 = Instant::now();
    while committed("p00") < 8 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "pass 1 did not finish"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Then, until a pass-2 lease was taken over (at most four rounds): wait for a
    // live worker to hold a pass-2 task, kill it and one other, start two
    // replacements. Killing the holder (not whoever comes first after a fixed
    // sleep) makes the takeover certain on a slow machine too; a holder that
    // commits between the look and the kill only costs a round.
    let mut round = 0;
    while round < 4 && pass2_takeovers(&job_dir) == 0 {
        let t1 = Instant::now();
        let holder = loop {
            if let Some(w) = held_pass2(&job_dir)
                .into_iter()
                .find(|w| live.iter().any(|(id, _)| id == w))
            {
                break Some(w);
            }
            if committed("finalize") > 0 {
                break None;
            }
            assert!(
                t1.elapsed() < Duration::from_secs(60),
                "no pass-2 lease was held"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let Some(holder) = holder else { break };
        let at = live.iter().position(|(id, _)| *id == holder).unwrap();
        let other = (at + 1) % live.len();
        for i in [at.max(other), at.min(other)] {
            let (_, mut c) = live.remove(i);
            c.kill().unwrap();
            c.wait().unwrap();
        }
        for s in ["a", "b"] {
            let id = format!("r{round}{s}");
            live.push((id.clone(), slow(&id)));
        }
        round += 1;
        // Let the lease expire (TTL 2 s) and be taken over before looking again.
        std::thread::sleep(Duration::from_millis(2500));
    }
    let mut live: Vec<Child> = live.into_iter().map(|(_, c)| c).collect();
    wait_all(&mut live, Duration::from_secs(180));
    let st = status_json(&job);
    assert_eq!(st["succeeded"], true, "{st:#}");
    assert!(
        pass2_takeovers(&job_dir) > 0,
        "no pass-2 lease was taken over"
    );
    let ids = output_ids(&out);
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "no duplicates");
    assert!(orphans(&out).is_empty(), "orphans: {:?}", orphans(&out));

    let out2 = dir.join("out-ref");
    run_ok(
        mdf()
            .args(["run", spec.to_str().unwrap(), "--workers", "1", "-o"])
            .arg(&out2)
            .arg("--job-root")
            .arg(dir.join("jobs-ref")),
    );
    let mut a = ids.clone();
    let mut b = output_ids(&out2);
    a.sort();
    b.sort();
    assert_eq!(a, b, "same survivors as a clean single-worker run");
    a
}

/// Lease records of pass-2 phases (`p01`, `p02`, ...; not `p00`, not `finalize`),
/// per task directory in seq order: `(phase, task, records)`.
fn pass2_leases(job_dir: &Path) -> Vec<(String, String, Vec<serde_json::Value>)> {
    let mut out = Vec::new();
    let list = |d: &Path| -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    for phase in list(&job_dir.join("leases")) {
        let name = phase.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with('p') || name == "p00" {
            continue;
        }
        for task in list(&phase) {
            let records = list(&task)
                .iter()
                .filter_map(|f| std::fs::read(f).ok())
                .filter_map(|b| serde_json::from_slice(&b).ok())
                .collect();
            let t = task.file_name().unwrap().to_string_lossy().into_owned();
            out.push((name.clone(), t, records));
        }
    }
    out
}

/// Pass-2 lease records that took over an expired lease.
fn pass2_takeovers(job_dir: &Path) -> usize {
    pass2_leases(job_dir)
        .iter()
        .flat_map(|(_, _, r)| r)
        .filter(|v| v["lost"].as_u64().unwrap_or(0) > 0)
        .count()
}

/// Workers holding a pass-2 task now: its last record is a lease and it has no
/// commit record.
fn held_pass2(job_dir: &Path) -> Vec<String> {
    pass2_leases(job_dir)
        .into_iter()
        .filter(|(p, t, _)| !job_dir.join(format!("commits/{p}/{t}.json")).exists())
        .filter_map(|(_, _, r)| {
            let last = r.last()?;
            (last["kind"] == "lease").then(|| last["worker"].as_str().unwrap().to_string())
        })
        .collect()
}

/// A zombie: a worker paused (SIGSTOP) mid-task while it holds the lease and has
/// staged a file, for longer than the lease TTL. Another worker takes the task over
/// and finishes the job; then the zombie resumes (SIGCONT). It must find itself
/// fenced and commit nothing: the output equals a clean run's, no record twice, and
/// no staged file of the zombie's attempt is left.
#[test]
fn a_paused_zombie_is_fenced_on_resume_and_leaves_nothing_behind() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    // Two tasks of 2,400 records of ~800 bytes: past the 1 MiB target, a task stages
    // its first file about half way through (at 1,000 records/s).
    let words = ["alpha", "beta", "gamma", "delta", "crawl", "token", "model"];
    for f in 0..2u64 {
        let mut x = 0x2545_f491_4f6c_dd1du64 ^ f;
        let lines: Vec<String> = (0..2400)
            .map(|i| {
                let text: Vec<&str> = (0..130)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        words[(x % 7) as usize]
                    })
                    .collect();
                serde_json::json!({"url": format!("https://z.org/{f}/{i}"), "text": text.join(" ")})
                    .to_string()
            })
            .collect();
        write_lines(&d.path().join(format!("in/{f}.jsonl")), &lines);
    }
    let spec = write_spec(
        d.path(),
        &format!(
            r#"
name: zombie
input: {{uris: ["{0}/in/*.jsonl"]}}
stages:
  - op: throttle
    params: {{records_per_sec: 1000}}
  - op: text_length
output: {{uri: "{1}", target_file_bytes: 1MiB}}
job: {{max_files_per_task: 1, lease_ttl_secs: 2, heartbeat_secs: 1, poll_millis: 100, batch_rows: 50}}
"#,
            d.path().display(),
            out.display()
        ),
    );
    let jobs = d.path().join("jobs");
    let o = run_ok(
        mdf()
            .args(["submit", spec.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let job = stdout(&o).lines().last().unwrap().to_string();
    let job_dir = jobs.join("jobs").join(job.rsplit('/').next().unwrap());
    let zombie_log = d.path().join("zombie.log");
    let mut zombie = mdf()
        // One task held, the one paused (a process runs one per core by default).
        .args([
            "worker",
            "--job",
            &job,
            "--worker-id",
            "zombie",
            "--slots",
            "1",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&zombie_log).unwrap())
        .spawn()
        .unwrap();

    // Pause it as soon as it has staged a file (complete, not a temporary one).
    let t0 = Instant::now();
    let staged = loop {
        let done: Vec<String> = files_under(&job_dir.join("staging"))
            .into_iter()
            .filter(|f| f.ends_with(".parquet") && !f.contains('#'))
            .collect();
        if let Some(f) = done.first() {
            unsafe { libc::kill(zombie.id() as i32, libc::SIGSTOP) };
            break f.clone();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the worker staged no file"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    // `p00/<task>/<attempt>/<file>`: the zombie's task and attempt.
    let parts: Vec<&str> = staged.split('/').collect();
    let (task, attempt) = (parts[1].to_string(), parts[2].to_string());
    assert!(
        !job_dir.join(format!("commits/p00/{task}.json")).exists(),
        "the zombie was paused after committing; the test needs it mid-task"
    );
    let leases = files_under(&job_dir.join(format!("leases/p00/{task}")));
    let last: serde_json::Value = serde_json::from_slice(
        &std::fs::read(job_dir.join(format!("leases/p00/{task}/{}", leases.last().unwrap())))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (last["kind"].as_str(), last["worker"].as_str()),
        (Some("lease"), Some("zombie")),
        "the zombie holds the lease while paused"
    );

    // Another worker takes the task over once the lease expires and finishes the job.
    let mut rescuer = worker(&job, "rescuer");
    wait_all(std::slice::from_mut(&mut rescuer), Duration::from_secs(90));
    let st = status_json(&job);
    assert_eq!(st["succeeded"], true, "{st:#}");
    let took_over = files_under(&job_dir.join(format!("leases/p00/{task}")))
        .iter()
        .map(|f| {
            let p = job_dir.join(format!("leases/p00/{task}/{f}"));
            serde_json::from_slice::<serde_json::Value>(&std::fs::read(p).unwrap()).unwrap()
        })
        // (The rescuer's task slots are `rescuer`, `rescuer-1`, ...: one per core.)
        .any(|v| {
            v["worker"]
                .as_str()
                .is_some_and(|w| w == "rescuer" || w.starts_with("rescuer-"))
                && v["lost"].as_u64().unwrap_or(0) > 0
        });
    assert!(
        took_over,
        "the rescuer took the zombie's expired lease over"
    );

    // The zombie wakes up: fenced, it commits nothing and exits.
    unsafe { libc::kill(zombie.id() as i32, libc::SIGCONT) };
    wait_all(std::slice::from_mut(&mut zombie), Duration::from_secs(30));
    let log = std::fs::read_to_string(&zombie_log).unwrap();
    assert!(
        log.contains("worker zombie: 0 committed, 0 failed, 0 released, 1 fenced"),
        "{log}"
    );
    for phase in ["p00", "finalize"] {
        for f in files_under(&job_dir.join("commits").join(phase)) {
            let p = job_dir.join("commits").join(phase).join(&f);
            let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
            assert_ne!(
                v["worker"], "zombie",
                "{phase}/{f} was committed by the zombie"
            );
            assert_ne!(v["attempt"].as_str(), Some(attempt.as_str()));
        }
    }
    let left: Vec<String> = files_under(&job_dir.join("staging"))
        .into_iter()
        .filter(|f| f.contains(&attempt))
        .collect();
    assert!(
        left.is_empty(),
        "the zombie's staged files remain: {left:?}"
    );

    // The output: every record once, as in a clean run.
    let ids = same_as_a_clean_run(d.path(), &spec, &out, "1");
    assert_eq!(ids.len(), 4800, "every record");
}

/// A zombie whose last upload was in flight when it was paused: the file lands only
/// when it resumes, after the rescuer's finalize janitor has run. Fenced, the zombie
/// must delete it itself, or it stays in the job forever.
#[test]
fn a_zombie_deletes_what_it_staged_after_the_janitor_ran() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    // One task of about 0.6 s, whose staged uploads each take 3 s more.
    let spec = slow_spec_n(d.path(), &out, 1);
    let jobs = d.path().join("jobs");
    let o = run_ok(
        mdf()
            .args(["submit", spec.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let job = stdout(&o).lines().last().unwrap().to_string();
    let job_dir = jobs.join("jobs").join(job.rsplit('/').next().unwrap());
    let zombie_log = d.path().join("zombie.log");
    let mut zombie = mdf()
        .args(["worker", "--job", &job, "--worker-id", "zombie"])
        .env("MDF_FAULTS", "put:latency=3000:1:/staging/")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&zombie_log).unwrap())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let first = loop {
        // A complete lease record, not the local store's temporary file of one
        // (`…#n`, renamed into place a moment later).
        let l = files_under(&job_dir.join("leases/p00"));
        if let Some(f) = l.iter().find(|f| !f.contains('#')) {
            break job_dir.join("leases/p00").join(f);
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "no lease taken");
        std::thread::sleep(Duration::from_millis(10));
    };
    // 2 s in: the records are processed, the first upload is still in flight.
    std::thread::sleep(Duration::from_millis(2000));
    unsafe { libc::kill(zombie.id() as i32, libc::SIGSTOP) };
    let lease: serde_json::Value = serde_json::from_slice(&std::fs::read(&first).unwrap()).unwrap();
    let attempt = lease["attempt"].as_str().unwrap().to_string();
    assert!(
        files_under(&job_dir.join("staging")).is_empty(),
        "the zombie's upload landed before it was paused; the test needs it in flight"
    );

    let mut rescuer = worker(&job, "rescuer");
    wait_all(std::slice::from_mut(&mut rescuer), Duration::from_secs(60));
    assert_eq!(status_json(&job)["succeeded"], true);

    unsafe { libc::kill(zombie.id() as i32, libc::SIGCONT) };
    wait_all(std::slice::from_mut(&mut zombie), Duration::from_secs(30));
    let log = std::fs::read_to_string(&zombie_log).unwrap();
    assert!(
        log.contains("0 committed") && log.contains("1 fenced"),
        "{log}"
    );
    let left: Vec<String> = files_under(&job_dir.join("staging"))
        .into_iter()
        .filter(|f| f.contains(&attempt))
        .collect();
    assert!(left.is_empty(), "the zombie's late files remain: {left:?}");
    let ids = output_ids(&out);
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "no duplicates");
}

/// One worker is 600× slower than the others on whatever it runs (a `throttle` stage
/// active only where `MDF_TEST_SLOW_WORKER` is set: a slow machine, still renewing its
/// lease). With `job.speculation`, an idle fast worker runs a backup of its task: the
/// backup commits, the slow original is fenced and deletes what it staged, and the
/// job ends long before the slow attempt could have; the output equals a clean run.
#[test]
fn a_stragglers_backup_commits_and_fences_the_slow_original() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    for i in 0..6u64 {
        write_lines(
            &d.path().join(format!("in/{i:02}.jsonl")),
            &docs(300 + i, 60),
        );
    }
    let spec = write_spec(
        d.path(),
        &format!(
            r#"
name: straggler
input: {{uris: ["{0}/in/*.jsonl"]}}
stages:
  - op: throttle
    params: {{records_per_sec: 300}}
  - op: throttle
    name: slow_machine
    params: {{records_per_sec: 0.5, when_env: MDF_TEST_SLOW_WORKER}}
  - op: text_length
output: {{uri: "{1}"}}
job:
  max_files_per_task: 1
  lease_ttl_secs: 4
  heartbeat_secs: 1
  poll_millis: 100
  batch_rows: 4
  speculation: {{quantile: 0.8, factor: 3, min_secs: 5, max_share: 0.5}}
"#,
            d.path().display(),
            out.display()
        ),
    );
    let jobs = d.path().join("jobs");
    let o = run_ok(
        mdf()
            .args(["submit", spec.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let job = stdout(&o).lines().last().unwrap().to_string();
    let job_dir = jobs.join("jobs").join(job.rsplit('/').next().unwrap());
    // The slow worker first, alone, so that it holds a task: 60 records at 0.5/s is a
    // 120 s attempt; the others take 0.2 s each, far below the 5 s floor of a backup.
    let t0 = Instant::now();
    let slow_log = d.path().join("slow.log");
    let mut slow = mdf()
        .args([
            "worker",
            "--job",
            &job,
            "--worker-id",
            "slow",
            "--max-tasks",
            "1",
        ])
        .env("MDF_TEST_SLOW_WORKER", "1")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&slow_log).unwrap())
        .spawn()
        .unwrap();
    let slow_task = loop {
        let held = files_under(&job_dir.join("leases/p00"));
        if let Some(f) = held.first() {
            break f.split('/').next().unwrap().to_string();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the slow worker never claimed"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut fast: Vec<Child> = (0..2).map(|i| worker(&job, &format!("fast{i}"))).collect();
    wait_all(&mut fast, Duration::from_secs(60));
    let finished = t0.elapsed();
    let st = status_json(&job);
    assert_eq!(st["succeeded"], true, "{st:#}");
    assert_eq!(st["phases"][0]["tasks"]["by_backup"], 1, "{st:#}");
    // The fast workers finished the job (finalize included) without the slow attempt.
    assert!(
        finished < Duration::from_secs(60),
        "the job waited for the straggler: {finished:?}"
    );
    let commit: serde_json::Value = serde_json::from_slice(
        &std::fs::read(job_dir.join(format!("commits/p00/{slow_task}.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(commit["speculative"], true, "{commit:#}");
    assert!(
        commit["worker"].as_str().unwrap().starts_with("fast"),
        "{commit:#}"
    );
    // One backup, one budget token; no backup of any task that was not straggling.
    let backups: BTreeSet<String> = files_under(&job_dir.join("backups/p00"))
        .iter()
        .map(|f| f.split('/').next().unwrap().to_string())
        .collect();
    assert_eq!(backups, BTreeSet::from([slow_task.clone()]));
    assert_eq!(files_under(&job_dir.join("speculation/p00")).len(), 1);
    // The slow original is fenced at its next renewal, stops and removes its files.
    let st = slow.wait().unwrap();
    assert!(st.success(), "slow worker exited with {st}");
    let log = std::fs::read_to_string(&slow_log).unwrap();
    assert!(log.contains("attempt abandoned"), "slow worker log:\n{log}");
    assert!(
        t0.elapsed() < Duration::from_secs(90),
        "the slow attempt ran to its end: {:?}",
        t0.elapsed()
    );
    let fence = files_under(&job_dir.join(format!("leases/p00/{slow_task}")))
        .iter()
        .map(|f| {
            serde_json::from_slice::<serde_json::Value>(
                &std::fs::read(job_dir.join(format!("leases/p00/{slow_task}/{f}"))).unwrap(),
            )
            .unwrap()
        })
        .find(|r| r["kind"] == "release")
        .expect("a fence record");
    assert!(
        fence["last_error"]
            .as_str()
            .unwrap()
            .starts_with("committed by backup attempt"),
        "{fence:#}"
    );
    // (What a fenced attempt staged is deleted by the attempt itself: tested with a
    // zombie that staged files, a_zombie_deletes_what_it_staged_after_the_janitor_ran.)
    // The workers' own counters record the backup and its win.
    let (mut backups, mut won) = (0, 0);
    for f in files_under(&job_dir.join("workers")) {
        let w: serde_json::Value =
            serde_json::from_slice(&std::fs::read(job_dir.join("workers").join(&f)).unwrap())
                .unwrap();
        backups += w["backups"].as_u64().unwrap_or(0);
        won += w["backups_won"].as_u64().unwrap_or(0);
    }
    assert_eq!((backups, won), (1, 1));
    same_as_a_clean_run(d.path(), &spec, &out, "2");
}

/// Issue 32: one `mdf worker` process runs as many tasks at once as the cores it may
/// use allow (here: what the standard library sees, which honours taskset and cgroup
/// quotas) over the job's largest `resources.cpu`; `--slots` overrides, and `taskset`
/// to one core gives one slot. Slots are separate workers (their own ids and leases):
/// with three, the tasks of one job are spread over them, exactly once.
#[test]
fn a_worker_process_sizes_its_task_slots_from_its_cores() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let spec = slow_spec_n(d.path(), &out, 9);
    let slots_line = |o: &std::process::Output| {
        stderr(o)
            .lines()
            .find(|l| l.starts_with("mdf worker: "))
            .unwrap_or_default()
            .to_string()
    };
    // Explicit slots: three worker ids share the nine tasks.
    let job = submit_slow(&spec, &d.path().join("jobs"), 100);
    let o = run_ok(mdf().args(["worker", "--job", &job, "--slots", "3", "--worker-id", "s"]));
    assert!(
        slots_line(&o).starts_with("mdf worker: 3 task slots (--slots)"),
        "{}",
        stderr(&o)
    );
    let ids: BTreeSet<String> = lease_records(&d.path().join("jobs"), "p00")
        .iter()
        .map(|v| v["worker"].as_str().unwrap().to_string())
        .collect();
    assert!(
        ids.len() >= 2
            && ids
                .iter()
                .all(|i| ["s", "s-1", "s-2"].contains(&i.as_str())),
        "{ids:?}"
    );
    let st = status_json(&job);
    assert_eq!(st["succeeded"], true, "{st:#}");
    same_as_a_clean_run(d.path(), &spec, &out, "1");

    // Default: the cores this process may use.
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let spec = slow_spec_n(d.path(), &d.path().join("out-b"), 9);
    let job = submit_slow(&spec, &d.path().join("jobs-b"), 1_000_000);
    let o = run_ok(mdf().args(["worker", "--job", &job]));
    // A task counts as one core (worker::slots::TASK_CORES), capped at 1 GiB of a
    // cgroup memory limit a slot (SLOT_MEMORY).
    let limit = mdf::worker::slots::memory_limit();
    let slots = mdf::worker::slots::fit_memory(cores.max(1), limit);
    let capped = match limit {
        Some(m) if slots < cores => format!(", {} MiB memory limit", m >> 20),
        _ => String::new(),
    };
    let want = format!(
        "mdf worker: {slots} task slot{} ({cores} core{}, stages need up to 1 each{capped})",
        if slots == 1 { "" } else { "s" },
        if cores == 1 { "" } else { "s" }
    );
    assert_eq!(slots_line(&o), want, "{}", stderr(&o));
    // Pinned to one core: one slot.
    if Path::new("/usr/bin/taskset").exists() {
        let spec = slow_spec_n(d.path(), &d.path().join("out-c"), 9);
        let job = submit_slow(&spec, &d.path().join("jobs-c"), 1_000_000);
        let o = run_ok(std::process::Command::new("/usr/bin/taskset").args([
            "-c",
            "0",
            env!("CARGO_BIN_EXE_mdf"),
            "worker",
            "--job",
            &job,
        ]));
        assert_eq!(
            slots_line(&o),
            "mdf worker: 1 task slot (1 core, stages need up to 1 each)",
            "{}",
            stderr(&o)
        );
    }
}

/// `mdf run` interrupted: the first Ctrl-C hands leases back and exits 130 (not 1,
/// "a task failed"); a second one exits at once, also 130; a rerun finishes the job
/// with every record once (found by a new user: the second Ctrl-C was ignored).
#[test]
fn an_interrupted_run_exits_130_and_a_second_interrupt_exits_at_once() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let spec = slow_spec_n(d.path(), &out, 2);
    let jobs = d.path().join("jobs");
    let run = || {
        let mut c = mdf();
        c.args(["run", spec.to_str().unwrap(), "--workers", "1", "--set"])
            .arg("stages.throttle.params.records_per_sec=40")
            .arg("--job-root")
            .arg(&jobs);
        c
    };
    let start = || {
        run()
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let r = start();
    std::thread::sleep(Duration::from_millis(1000));
    unsafe { libc::kill(r.id() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    unsafe { libc::kill(r.id() as i32, libc::SIGINT) };
    let o = r.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    // One interrupt: leases handed back, 130, and a word on resuming.
    let r = start();
    std::thread::sleep(Duration::from_millis(1000));
    unsafe { libc::kill(r.id() as i32, libc::SIGINT) };
    let o = r.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("run the same command again"),
        "{}",
        stderr(&o)
    );
    // The rerun finishes it: every record once.
    run_ok(&mut run());
    let mut ids = output_ids(&out);
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "a record twice");
    assert!(n > 50, "{n}");
}
