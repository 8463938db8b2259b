//! Deployment: the offline checks of terraform/ and manifests/ (scripts/check-deploy.py),
//! `mdf submit` backends — local worker processes, AWS Batch array jobs against moto's
//! Batch API (the S3 test server, MDF_TEST_S3_ENDPOINT), and the k8s Indexed Job
//! (validated with kubernetes-validate --strict) — and `mdf status` showing what was
//! submitted.
mod common;
use common::*;
use object_store::ObjectStoreExt;
use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn require_tools() -> bool {
    std::env::var_os("MDF_REQUIRE_DEPLOY_TOOLS").is_some()
}

#[test]
fn terraform_and_manifests_pass_the_offline_checks() {
    let o = Command::new("python3")
        .arg(format!("{ROOT}/scripts/check-deploy.py"))
        .output()
        .expect("python3 runs");
    let text = format!("{}{}", stdout(&o), stderr(&o));
    if o.status.code() == Some(3) && !require_tools() {
        eprintln!("skipping: {text}");
        return;
    }
    assert!(o.status.success(), "{text}");
    assert!(text.contains(" 0 failed"), "{text}");
    eprintln!("{text}");
}

fn aws_env<'a>(cmd: &'a mut Command, ep: &str) -> &'a mut Command {
    cmd.env("AWS_ENDPOINT_URL", ep)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
}

/// A spec over one JSONL file uploaded to the test bucket; the job root and output
/// under a fresh prefix. Returns (spec path, job root, S3 endpoint).
fn s3_job(dir: &Path, tag: &str) -> Option<(std::path::PathBuf, String, String)> {
    let (ep, bucket, s3) = test_s3()?;
    let prefix = format!("deploy-{tag}-{}", std::process::id());
    let lines = docs(7, 20).join("\n");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(s3.put(
        &object_store::path::Path::from(format!("{prefix}/in/a.jsonl")),
        lines.into_bytes().into(),
    ))
    .unwrap();
    let spec = write_spec(
        dir,
        &format!(
            "name: deploy\ninput: {{uris: [\"s3://{bucket}/{prefix}/in/*.jsonl\"]}}\n\
             stages:\n  - op: text_length\noutput: {{uri: \"s3://{bucket}/{prefix}/out\"}}\n"
        ),
    );
    Some((spec, format!("s3://{bucket}/{prefix}/jobs"), ep))
}

fn moto_batch(ep: &str, args: &[&str]) -> String {
    let o = Command::new("python3")
        .arg(format!("{ROOT}/scripts/moto-batch.py"))
        .arg(ep)
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(o.status.success(), "moto-batch.py {args:?}: {}", stderr(&o));
    stdout(&o)
}

#[test]
fn aws_batch_backend_submits_array_jobs_that_status_shows() {
    let d = tempfile::tempdir().unwrap();
    let Some((spec, root, ep)) = s3_job(d.path(), "batch") else {
        eprintln!("skipping: MDF_TEST_S3_ENDPOINT is not set");
        return;
    };
    moto_batch(&ep, &["setup"]);

    // Refused before anything is written: no queue, a local job root.
    let o = aws_env(&mut mdf(), &ep)
        .args(["submit", spec.to_str().unwrap(), "--job-root", &root])
        .args(["--backend", "aws-batch", "--workers", "4"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--queue"), "{}", stderr(&o));
    let o = aws_env(&mut mdf(), &ep)
        .args(["submit", spec.to_str().unwrap(), "--job-root"])
        .arg(d.path().join("jobs"))
        .args(["--backend", "aws-batch", "--queue", "mdf-cpu"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("s3:// --job-root"), "{}", stderr(&o));
    assert!(!d.path().join("jobs").exists(), "nothing written");

    let o = run_ok(
        aws_env(&mut mdf(), &ep)
            .args(["submit", spec.to_str().unwrap(), "--job-root", &root])
            .args([
                "--backend",
                "aws-batch",
                "--queue",
                "mdf-cpu",
                "--workers",
                "4",
            ])
            .args(["--gpu-queue", "mdf-gpu", "--gpu-workers", "2"]),
    );
    let job = stdout(&o).lines().last().unwrap().to_string();
    assert!(job.starts_with(&root), "{job}");

    let st = run_ok(aws_env(&mut mdf(), &ep).args(["status", &job, "--json"]));
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    let subs = st["submissions"].as_array().unwrap();
    assert_eq!(subs.len(), 2, "{st}");
    let by = |class: &str| {
        subs.iter()
            .find(|s| s["resources"] == class)
            .unwrap_or_else(|| panic!("no {class} submission"))
            .clone()
    };
    let (cpu, gpu) = (by("cpu"), by("gpu"));
    assert_eq!(cpu["backend"], "aws-batch");
    assert_eq!(
        (cpu["queue"].as_str(), cpu["workers"].as_u64()),
        (Some("mdf-cpu"), Some(4))
    );
    assert_eq!(
        (gpu["queue"].as_str(), gpu["workers"].as_u64()),
        (Some("mdf-gpu"), Some(2))
    );
    let human = stdout(&run_ok(aws_env(&mut mdf(), &ep).args(["status", &job])));
    assert!(
        human.contains(&format!(
            "submitted to aws-batch: {}",
            cpu["id"].as_str().unwrap()
        )),
        "{human}"
    );

    // What Batch itself recorded: queue, array size, the worker command for this job.
    let ids = [cpu["id"].as_str().unwrap(), gpu["id"].as_str().unwrap()];
    let jobs: serde_json::Value =
        serde_json::from_str(&moto_batch(&ep, &[&["describe"][..], &ids[..]].concat())).unwrap();
    let jobs = jobs.as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    for (j, (queue, size, class)) in jobs
        .iter()
        .zip([("mdf-cpu", 4, "cpu"), ("mdf-gpu", 2, "gpu")])
    {
        assert!(
            j["jobQueue"]
                .as_str()
                .unwrap()
                .ends_with(&format!("job-queue/{queue}")),
            "{j}"
        );
        assert_eq!(j["arrayProperties"]["size"], size, "{j}");
        let c = &j["container"];
        let cmd: Vec<&str> = c["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect();
        assert_eq!(cmd, ["worker", "--job", job.as_str(), "--resources", class]);
        assert!(
            c["environment"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["name"] == "MDF_JOB" && e["value"] == job.as_str()),
            "{c}"
        );
        let def = j["jobDefinition"].as_str().unwrap();
        assert!(
            def.contains(if class == "cpu" {
                "mdf-worker:"
            } else {
                "mdf-worker-gpu:"
            }),
            "{def}"
        );
    }
}

fn kubernetes_validate(file: &Path) -> Option<std::process::Output> {
    match Command::new("kubernetes-validate")
        .arg("--strict")
        .arg(file)
        .output()
    {
        Ok(o) => Some(o),
        Err(_) if !require_tools() => None,
        Err(e) => panic!("kubernetes-validate: {e}"),
    }
}

#[test]
fn k8s_backend_renders_valid_indexed_jobs_and_applies_them() {
    let d = tempfile::tempdir().unwrap();
    let Some((spec, root, ep)) = s3_job(d.path(), "k8s") else {
        eprintln!("skipping: MDF_TEST_S3_ENDPOINT is not set");
        return;
    };
    let args = |c: &mut Command| {
        c.args(["submit", spec.to_str().unwrap(), "--job-root", &root])
            .args(["--backend", "k8s", "--workers", "3", "--gpu-workers", "1"])
            .args([
                "--image",
                "registry.example/mdf-worker-cpu:v1",
                "--namespace",
                "curation",
            ]);
    };
    let mut c = mdf();
    args(aws_env(&mut c, &ep));
    let yaml = stdout(&run_ok(&mut c));
    let docs: Vec<serde_yaml_ng::Value> = serde_yaml_ng::Deserializer::from_str(&yaml)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    assert_eq!(docs.len(), 2, "{yaml}");
    let job_uri = docs[0]["metadata"]["annotations"]["mdf.dev/job-uri"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(job_uri.starts_with(&root));
    assert_eq!(docs[0]["spec"]["completions"], 3);
    assert_eq!(docs[0]["spec"]["completionMode"], "Indexed");
    assert_eq!(docs[0]["metadata"]["namespace"], "curation");
    let c0 = &docs[0]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c0["image"], "registry.example/mdf-worker-cpu:v1");
    assert_eq!(c0["args"][2], job_uri.as_str());
    assert_eq!(docs[1]["spec"]["completions"], 1);
    assert_eq!(
        docs[1]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        1
    );
    let file = d.path().join("rendered.yaml");
    std::fs::write(&file, &yaml).unwrap();
    if let Some(o) = kubernetes_validate(&file) {
        assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    }

    // --apply pipes the same manifest to `kubectl apply -f -` (a stand-in kubectl on
    // PATH that keeps what it was given: no cluster here) and records the submission.
    let bin = d.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let got = d.path().join("applied.yaml");
    let kubectl = bin.join("kubectl");
    std::fs::write(
        &kubectl,
        format!(
            "#!/bin/sh\n[ \"$1 $2 $3\" = \"apply -f -\" ] || exit 9\ncat > '{}'\necho applied\n",
            got.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &kubectl,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let mut c = mdf();
    args(aws_env(&mut c, &ep));
    c.arg("--apply").env(
        "PATH",
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
    );
    let o = run_ok(&mut c);
    assert_eq!(stdout(&o).lines().last(), Some(job_uri.as_str()));
    assert_eq!(std::fs::read_to_string(&got).unwrap(), yaml);
    let st = run_ok(aws_env(&mut mdf(), &ep).args(["status", &job_uri, "--json"]));
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    let subs = st["submissions"].as_array().unwrap();
    assert_eq!(subs.len(), 2, "{st}");
    assert!(
        subs.iter()
            .all(|s| s["backend"] == "k8s" && s["queue"] == "curation")
    );
}

#[test]
fn local_backend_runs_worker_processes_to_completion() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join("in/a.jsonl"), &docs(3, 50));
    write_lines(&d.path().join("in/b.jsonl"), &docs(4, 50));
    let out = d.path().join("out");
    let spec = write_spec(
        d.path(),
        &format!(
            "name: local\ninput: {{uris: [\"{}/in/*.jsonl\"]}}\nstages:\n  - op: text_length\n\
             output: {{uri: \"{}\"}}\njob: {{max_files_per_task: 1}}\n",
            d.path().display(),
            out.display()
        ),
    );
    let o = run_ok(
        mdf()
            .args(["submit", spec.to_str().unwrap(), "--job-root"])
            .arg(d.path().join("jobs"))
            .args(["--workers", "2"]),
    );
    let job = stdout(&o).lines().last().unwrap().to_string();
    assert!(
        stderr(&o).contains("started 2 local workers"),
        "{}",
        stderr(&o)
    );
    let st = status_json(&job);
    assert_eq!(st["succeeded"], true, "{st}");
    assert_eq!(manifest(&out)["rows"], 100);
    // Two workers shared the tasks (their ids are in the commit records).
    let workers: std::collections::BTreeSet<String> = files_under(&d.path().join("jobs"))
        .into_iter()
        .filter(|f| f.contains("/commits/p00/"))
        .map(|f| {
            let v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(d.path().join("jobs").join(&f)).unwrap())
                    .unwrap();
            v["worker"].as_str().unwrap().to_string()
        })
        .collect();
    assert!(
        workers.iter().all(|w| w.starts_with("local-cpu-")),
        "{workers:?}"
    );
}

/// Workers on Batch or Kubernetes cannot read this machine's files: a local job root,
/// input, output or operator file is refused (exit 2, naming it) before anything is
/// written.
#[test]
fn remote_backends_refuse_local_paths() {
    let d = tempfile::tempdir().unwrap();
    let cc = format!("{ROOT}/examples/commoncrawl.yaml");
    let cases: [(&[&str], &str); 4] = [
        (&["--job-root", "/tmp/mdf-jobs"], "s3:// --job-root"),
        (
            &["--job-root", "s3://b/mdf", "-o", "s3://b/out"],
            "input.uris",
        ),
        (
            &[
                "--job-root",
                "s3://b/mdf",
                "-i",
                "s3://commoncrawl/x/*.warc.gz",
                "-o",
                "out/cc",
            ],
            "output.uri",
        ),
        (
            &[
                "--job-root",
                "s3://b/mdf",
                "-i",
                "s3://commoncrawl/x/*.warc.gz",
                "-o",
                "s3://b/out",
            ],
            "stages.url_filter.params.domains[0]",
        ),
    ];
    for backend in ["aws-batch", "k8s"] {
        for (args, want) in &cases {
            let o = mdf()
                .current_dir(d.path())
                .args(["submit", &cc, "--backend", backend, "--queue", "q"])
                .args(*args)
                .output()
                .unwrap();
            assert_eq!(
                o.status.code(),
                Some(2),
                "{backend} {args:?}: {}",
                stderr(&o)
            );
            assert!(
                stderr(&o).contains(want),
                "{backend} {args:?}: {}",
                stderr(&o)
            );
        }
    }
    assert!(files_under(d.path()).is_empty(), "nothing written");
}
