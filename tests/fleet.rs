//! Spot fleets without a scheduler: `mdf submit --backend fleet` against moto's Auto
//! Scaling and EC2 APIs (the test S3 server, MDF_TEST_S3_ENDPOINT, is a moto server),
//! `mdf worker --fleet-group` processes standing in for the group's instances (each
//! with its own instance metadata service, served here), and a spot interruption
//! notice served to one worker mid-task.
mod common;
use common::*;
use object_store::ObjectStoreExt;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A local instance metadata service (IMDSv2): a token from `PUT /latest/api/token`,
/// then the instance id, region and — once [`Imds::notice`] is set — a spot
/// interruption notice. Requests without the token are refused (401), as on EC2
/// with `http_tokens = required`.
struct Imds {
    port: u16,
    notice: Arc<Mutex<Option<String>>>,
    rebalance: Arc<Mutex<bool>>,
    /// Requests served, by path.
    seen: Arc<Mutex<Vec<String>>>,
}

impl Imds {
    fn start(instance_id: &str) -> Imds {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let notice: Arc<Mutex<Option<String>>> = Default::default();
        let rebalance: Arc<Mutex<bool>> = Default::default();
        let seen: Arc<Mutex<Vec<String>>> = Default::default();
        let (n, rb, s, id) = (
            notice.clone(),
            rebalance.clone(),
            seen.clone(),
            instance_id.to_string(),
        );
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let (n, rb, s, id) = (n.clone(), rb.clone(), s.clone(), id.clone());
                std::thread::spawn(move || {
                    let mut r = BufReader::new(conn.try_clone().unwrap());
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let mut parts = line.split_whitespace();
                        let (method, path) = (
                            parts.next().unwrap_or("").to_string(),
                            parts.next().unwrap_or("").to_string(),
                        );
                        let (mut token, mut len) = (false, 0usize);
                        loop {
                            let mut h = String::new();
                            if r.read_line(&mut h).unwrap_or(0) == 0 {
                                return;
                            }
                            let h = h.trim_end().to_ascii_lowercase();
                            if h.is_empty() {
                                break;
                            }
                            if h.starts_with("x-aws-ec2-metadata-token: tok-") {
                                token = true;
                            }
                            if let Some(v) = h.strip_prefix("content-length: ") {
                                len = v.parse().unwrap_or(0);
                            }
                        }
                        let mut body = vec![0; len];
                        r.read_exact(&mut body).unwrap();
                        s.lock().unwrap().push(format!("{method} {path}"));
                        let (code, text) = match (method.as_str(), path.as_str()) {
                            ("PUT", "/latest/api/token") => (200, "tok-1".to_string()),
                            _ if !token => (401, String::new()),
                            ("GET", "/latest/meta-data/instance-id") => (200, id.clone()),
                            ("GET", "/latest/meta-data/placement/region") => {
                                (200, "us-east-1".into())
                            }
                            ("GET", "/latest/meta-data/spot/instance-action") => {
                                match n.lock().unwrap().clone() {
                                    Some(b) => (200, b),
                                    None => (404, String::new()),
                                }
                            }
                            ("GET", "/latest/meta-data/events/recommendations/rebalance")
                                if *rb.lock().unwrap() =>
                            {
                                (200, r#"{"noticeTime": "2026-12-03T16:00:00Z"}"#.into())
                            }
                            _ => (404, String::new()),
                        };
                        let reason = match code {
                            200 => "OK",
                            401 => "Unauthorized",
                            _ => "Not Found",
                        };
                        let resp = format!(
                            "HTTP/1.1 {code} {reason}\r\ncontent-length: {}\r\ncontent-type: text/plain\r\n\r\n{text}",
                            text.len()
                        );
                        if conn.write_all(resp.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Imds {
            port,
            notice,
            rebalance,
            seen,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Serves a spot notice: the instance is reclaimed `in_secs` from now.
    fn notice(&self, in_secs: u64) {
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + in_secs;
        *self.notice.lock().unwrap() = Some(format!(
            "{{\"action\": \"terminate\", \"time\": \"{}\"}}",
            mdf::launch::aws::utc_string(at * 1000)
        ));
    }

    fn rebalance(&self) {
        *self.rebalance.lock().unwrap() = true;
    }
}

fn aws_env<'a>(cmd: &'a mut Command, ep: &str) -> &'a mut Command {
    cmd.env("AWS_ENDPOINT_URL", ep)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
}

fn moto_fleet(ep: &str, args: &[&str]) -> serde_json::Value {
    let o = Command::new("python3")
        .arg(format!("{ROOT}/scripts/moto-fleet.py"))
        .arg(ep)
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(o.status.success(), "moto-fleet.py {args:?}: {}", stderr(&o));
    let out = stdout(&o);
    serde_json::from_str(out.trim()).unwrap_or(serde_json::Value::String(out))
}

/// Rows of an output as sorted JSON lines (order across files is not part of the
/// contract; content is).
fn rows(out: &Path) -> Vec<String> {
    let mut v: Vec<String> = output_batches(out)
        .iter()
        .flat_map(|b| {
            let mut w = arrow_json::ArrayWriter::new(Vec::new());
            w.write(b).unwrap();
            w.finish().unwrap();
            let rows: Vec<serde_json::Value> = serde_json::from_slice(&w.into_inner()).unwrap();
            rows.into_iter().map(|r| r.to_string()).collect::<Vec<_>>()
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_fleet_follows_its_groups_job_tag_and_scales_itself_to_zero() {
    let Some((ep, bucket, s3)) = test_s3() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let prefix = format!("fleet-{}", std::process::id());
    let group = format!("mdf-fleet-{}", std::process::id());
    let rt = tokio::runtime::Runtime::new().unwrap();
    for (i, seed) in [11u64, 12, 13].iter().enumerate() {
        rt.block_on(s3.put(
            &object_store::path::Path::from(format!("{prefix}/in/{i}.jsonl")),
            docs(*seed, 30).join("\n").into_bytes().into(),
        ))
        .unwrap();
    }
    let spec = write_spec(
        d.path(),
        &format!(
            "name: fleet\ninput: {{uris: [\"s3://{bucket}/{prefix}/in/*.jsonl\"]}}\n\
             stages:\n  - op: text_length\noutput: {{uri: \"s3://{bucket}/{prefix}/out\"}}\n\
             job: {{max_files_per_task: 1, poll_millis: 200}}\n"
        ),
    );
    let root = format!("s3://{bucket}/{prefix}/jobs");
    // `mdf submit SPEC --backend fleet --group GROUP EXTRA...` against moto.
    let submit = |spec: &Path, extra: &[&str]| {
        let mut c = mdf();
        aws_env(&mut c, &ep)
            .args(["submit", spec.to_str().unwrap(), "--job-root", &root])
            .args(["--backend", "fleet", "--group", &group])
            .args(extra);
        c.output().unwrap()
    };
    let ok = |o: std::process::Output| {
        assert!(o.status.success(), "{}", stderr(&o));
        o
    };

    // No such group: refused, naming it; nothing launched.
    let o = submit(&spec, &["--workers", "2"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(&format!("no Auto Scaling group \"{group}\"")),
        "{}",
        stderr(&o)
    );

    moto_fleet(&ep, &["setup", &group, "3"]);
    // More workers than the group's max: capped, with a warning.
    let o = ok(submit(&spec, &["--workers", "5"]));
    let job = stdout(&o).lines().last().unwrap().to_string();
    assert!(
        stderr(&o).contains("5 cpu instances asked for, 3 set (its max size)"),
        "{}",
        stderr(&o)
    );
    let g = moto_fleet(&ep, &["describe", &group]);
    assert_eq!(g["DesiredCapacity"], 3, "{g}");
    assert_eq!(g["Tags"]["mdf-job"], job.as_str(), "{g}");
    let instances: Vec<String> = g["Instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap().to_string())
        .collect();
    assert_eq!(instances.len(), 3, "moto launched the capacity: {g}");

    // `mdf status` shows the submission and the group's instances as they are now.
    let human = stdout(&run_ok(aws_env(&mut mdf(), &ep).args(["status", &job])));
    assert!(
        human.contains(&format!(
            "fleet {group}: 3 desired (min 0, max 3), 3 instances"
        )),
        "{human}"
    );
    assert!(human.contains(&instances[0]), "{human}");
    let st = status_json_env(&job, &ep);
    assert_eq!(st["submissions"][0]["backend"], "fleet", "{st}");
    assert_eq!(st["fleets"][0]["now"]["desired"], 3, "{st}");

    // Another job while the group works on this one: refused.
    std::fs::create_dir_all(d.path().join("other")).unwrap();
    let other = write_spec(
        &d.path().join("other"),
        &format!(
            "name: other\ninput: {{uris: [\"s3://{bucket}/{prefix}/in/*.jsonl\"]}}\n\
             stages:\n  - op: text_length\noutput: {{uri: \"s3://{bucket}/{prefix}/out2\"}}\n"
        ),
    );
    let o = submit(&other, &[]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("still has 3 instances (desired 3) for job"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        moto_fleet(&ep, &["describe", &group])["Tags"]["mdf-job"],
        job.as_str()
    );

    // One instance gets a rebalance recommendation: each of its worker's task slots
    // runs one task, takes no other, and the worker terminates its instance without
    // shrinking the group, which launches a replacement.
    let at_risk = Imds::start(&instances[0]);
    at_risk.rebalance();
    let o = run_ok(
        aws_env(&mut mdf(), &ep)
            .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", at_risk.endpoint())
            .args(["worker", "--fleet-group", &group]),
    );
    let text = stderr(&o);
    assert!(text.contains("rebalance recommendation"), "{text}");
    let slots: usize = text
        .split("mdf worker: ")
        .nth(1)
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no slots line: {text}"));
    let committed: usize = text
        .split(" committed, 0 failed")
        .next()
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no summary: {text}"));
    assert!(
        (1..=slots).contains(&committed),
        "one task a slot at most: {text}"
    );
    assert!(text.contains("the group replaces it"), "{text}");
    let g = moto_fleet(&ep, &["describe", &group]);
    assert_eq!(g["DesiredCapacity"], 3, "no capacity lost: {g}");
    let now: Vec<String> = g["Instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap().to_string())
        .collect();
    assert!(!now.contains(&instances[0]), "{g}");
    assert_eq!(now.len(), 3, "a replacement was launched: {g}");

    // The others (and the replacement): one worker process each, with its own
    // metadata service. Each reads the job from the group's tag, works, and leaves
    // the group when done.
    let servers: Vec<Imds> = now.iter().map(|i| Imds::start(i)).collect();
    let workers: Vec<_> = servers
        .iter()
        .map(|s| {
            aws_env(&mut mdf(), &ep)
                .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", s.endpoint())
                .env_remove("AWS_REGION") // the region comes from the metadata service
                .args(["worker", "--fleet-group", &group])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for w in workers {
        let o = w.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("no work left: the group shrinks by one"),
            "{}",
            stderr(&o)
        );
    }
    for s in &servers {
        let seen = s.seen.lock().unwrap();
        assert!(
            seen.iter()
                .any(|r| r == "GET /latest/meta-data/instance-id")
        );
        assert!(
            seen.iter()
                .any(|r| r == "GET /latest/meta-data/spot/instance-action"),
            "a fleet worker watches for spot notices: {seen:?}"
        );
    }
    let st = status_json_env(&job, &ep);
    assert_eq!(st["succeeded"], true, "{st}");
    assert_eq!(rows_s3(&s3, &prefix, "out"), 90);
    let g = moto_fleet(&ep, &["describe", &group]);
    assert_eq!(
        g["DesiredCapacity"], 0,
        "the group scaled itself to zero: {g}"
    );
    assert!(g["Instances"].as_array().unwrap().is_empty(), "{g}");

    // Submitting a complete job starts nothing.
    let o = ok(submit(&spec, &[]));
    assert!(stderr(&o).contains("already complete"), "{}", stderr(&o));
    assert_eq!(moto_fleet(&ep, &["describe", &group])["DesiredCapacity"], 0);

    // A group with capacity left for a finished job (a late replacement) is not
    // taken by the next job until it has drained: that instance's decrement would
    // otherwise land on the new job's capacity.
    moto_fleet(&ep, &["scale", &group, "1"]);
    let o = submit(&other, &[]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("submit again once it has scaled to zero"),
        "{}",
        stderr(&o)
    );
    let late = moto_fleet(&ep, &["describe", &group])["Instances"][0]
        .as_str()
        .unwrap()
        .to_string();
    let s = Imds::start(&late);
    let o = run_ok(
        aws_env(&mut mdf(), &ep)
            .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", s.endpoint())
            .args(["worker", "--fleet-group", &group]),
    );
    assert!(stderr(&o).contains(": 0 committed"), "{}", stderr(&o));
    assert_eq!(moto_fleet(&ep, &["describe", &group])["DesiredCapacity"], 0);

    // Drained: the next job takes the group, and its instance works on it.
    let o = ok(submit(&other, &[]));
    let job2 = stdout(&o).lines().last().unwrap().to_string();
    let g = moto_fleet(&ep, &["describe", &group]);
    assert_eq!(g["Tags"]["mdf-job"], job2.as_str(), "{g}");
    assert_eq!(g["DesiredCapacity"], 1, "{g}");
    let s = Imds::start(g["Instances"][0].as_str().unwrap());
    let o = run_ok(
        aws_env(&mut mdf(), &ep)
            .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", s.endpoint())
            .args(["worker", "--fleet-group", &group]),
    );
    assert!(stderr(&o).contains("job complete"), "{}", stderr(&o));
    assert_eq!(status_json_env(&job2, &ep)["succeeded"], true);
    assert_eq!(moto_fleet(&ep, &["describe", &group])["DesiredCapacity"], 0);
}

/// Rows of an S3 output, by its manifest.
fn rows_s3(s3: &object_store::aws::AmazonS3, prefix: &str, out: &str) -> u64 {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let m = rt
        .block_on(async {
            s3.get(&object_store::path::Path::from(format!(
                "{prefix}/{out}/_manifest.json"
            )))
            .await
            .unwrap()
            .bytes()
            .await
        })
        .unwrap();
    let m: serde_json::Value = serde_json::from_slice(&m).unwrap();
    m["rows"].as_u64().unwrap()
}

fn status_json_env(job: &str, ep: &str) -> serde_json::Value {
    let o = run_ok(aws_env(&mut mdf(), ep).args(["status", job, "--json"]));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A spot interruption notice served to one worker while it runs a task: it takes no
/// new task, hands the running one back before the reclaim time, and exits 0; another
/// worker finishes the job, whose output equals a clean run's.
#[test]
fn a_spot_notice_mid_task_hands_the_task_back_and_loses_nothing() {
    let d = tempfile::tempdir().unwrap();
    for (i, seed) in [21u64, 22].iter().enumerate() {
        write_lines(&d.path().join(format!("in/{i}.jsonl")), &docs(*seed, 320));
    }
    let spec_for = |out: &str| {
        std::fs::create_dir_all(d.path().join(out)).unwrap();
        write_spec(
            &d.path().join(out),
            &format!(
                "name: spot\ninput: {{uris: [\"{}/in/*.jsonl\"]}}\n\
                 stages:\n  - op: text_length\n  - op: throttle\n    params: {{records_per_sec: 40}}\n\
                 output: {{uri: \"{}\"}}\njob: {{max_files_per_task: 1, poll_millis: 200, batch_rows: 8}}\n",
                d.path().display(),
                d.path().join(out).join("data").display()
            ),
        )
    };
    // The clean run.
    let clean = spec_for("clean");
    run_ok(
        mdf()
            .args([
                "run",
                clean.to_str().unwrap(),
                "--workers",
                "2",
                "--job-root",
            ])
            .arg(d.path().join("clean-jobs")),
    );

    let spec = spec_for("spot");
    let jobs = d.path().join("jobs");
    let o = run_ok(
        mdf()
            .args(["submit", spec.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let job = stdout(&o).lines().last().unwrap().to_string();
    let leases = |jobs: &Path| {
        files_under(jobs)
            .into_iter()
            .filter(|f| f.contains("/leases/"))
            .count()
    };
    let spot_worker = |id: &str, imds: &Imds| {
        mdf()
            .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint())
            .args([
                "worker",
                "--job",
                &job,
                "--spot-notices",
                "--worker-id",
                id,
                "--slots",
                "1",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Mid-task (each task runs 8 s at 40 records/s), a notice with 60 s to go: the
    // running task still finishes and commits before the deadline, and no other task
    // is taken.
    let imds = Imds::start("i-0spot-a");
    let started = Instant::now();
    let a = spot_worker("spot-a", &imds);
    while leases(&jobs) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no lease taken"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    imds.notice(60);
    let o = a.wait_with_output().unwrap();
    let text = stderr(&o);
    assert_eq!(
        o.status.code(),
        Some(75),
        "stopped early, job incomplete: {text}"
    );
    assert!(
        text.contains("spot interruption notice (terminate)"),
        "{text}"
    );
    assert!(
        text.contains("spot-a: 1 committed, 0 failed, 0 released"),
        "{text}"
    );

    // Mid-task, a notice with 31 s to go: inside the 30 s margin at once, so the
    // running task is handed back (its lease released for another worker).
    let imds = Imds::start("i-0spot-b");
    let before = leases(&jobs);
    let started = Instant::now();
    let b = spot_worker("spot-b", &imds);
    while leases(&jobs) == before {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no lease taken"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    imds.notice(31);
    let o = b.wait_with_output().unwrap();
    let text = stderr(&o);
    assert_eq!(o.status.code(), Some(75), "{text}");
    assert!(
        text.contains("spot-b: 0 committed, 0 failed, 1 released"),
        "{text}"
    );
    assert!(text.contains("handing the running task back"), "{text}");

    // Another worker (the replacement capacity) finishes the job.
    run_ok(mdf().args(["worker", "--job", &job]));
    let st = status_json(&job);
    assert_eq!(st["succeeded"], true, "{st}");
    let (got, want) = (
        rows(&d.path().join("spot/data")),
        rows(&d.path().join("clean/data")),
    );
    assert_eq!(got.len(), 640);
    assert_eq!(
        got, want,
        "the interrupted job's output equals the clean run's"
    );
}
