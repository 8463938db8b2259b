//! `mdf submit --backend`: after the job is written, start its workers here (local),
//! on AWS Batch, or on Kubernetes. What a remote backend was asked to run is recorded
//! under the job (`submissions/`) so `mdf status` shows it.
use super::BackendArgs;
use crate::clock::{Clock, Entropy, SystemClock};
use crate::coordinator::batch::{BatchClient, BatchTarget};
use crate::coordinator::k8s::{self, K8sTarget};
use crate::coordinator::status;
use crate::protocol::JobPaths;
use crate::protocol::io::{Retry, put_json};
use crate::protocol::records::Submission;
use crate::store::{Registry, Uri};
use anyhow::Context;
use std::io::Write;
use std::process::{ExitCode, Stdio};

/// Refuses a backend setup that cannot work, before anything is written.
pub fn check(b: &BackendArgs, job_root: &str, spec: &crate::spec::Spec) -> Result<(), String> {
    let remote = b.backend != "local";
    if remote && !job_root.starts_with("s3://") {
        return Err(format!(
            "--backend {}: workers there cannot read the job root {job_root:?}; use an s3:// --job-root",
            b.backend
        ));
    }
    if remote {
        let local = |u: &str| !u.contains("://") || u.starts_with("file://");
        if let Some(u) = spec.input.uris.iter().find(|u| local(u)) {
            return Err(format!(
                "--backend {}: input.uris: workers there cannot read the local input {u:?}; put it on S3",
                b.backend
            ));
        }
        if local(&spec.output.uri) {
            return Err(format!(
                "--backend {}: output.uri: workers there cannot write the local output {:?}; use an s3:// --output",
                b.backend, spec.output.uri
            ));
        }
        for (st, assets) in spec.stages.iter().zip(crate::ops::stage_assets(spec)) {
            if let Some(a) = assets.into_iter().find(|a| local(&a.uri)) {
                let list = a.param.split('[').next().unwrap_or(&a.param);
                return Err(format!(
                    "--backend {}: stages.{}.{}: workers there cannot read the local file {:?}; put it on S3 (--set 'stages.{}.{list}=[s3://...]')",
                    b.backend, st.name, a.param, a.uri, st.name
                ));
            }
        }
    }
    if b.backend == "aws-batch" {
        if b.queue.is_none() && b.workers != Some(0) {
            return Err("--backend aws-batch: --queue is required (the CPU job queue)".into());
        }
        if b.gpu_workers > 0 && b.gpu_queue.is_none() {
            return Err("--gpu-workers needs --gpu-queue (the GPU job queue)".into());
        }
        if b.workers.unwrap_or(1) > 10_000 || b.gpu_workers > 10_000 {
            return Err("--workers: AWS Batch array jobs have at most 10,000 children".into());
        }
    }
    Ok(())
}

/// Starts the workers; the job URI stays the last line on stdout (except for a
/// k8s manifest printed without --apply, which is the whole stdout).
pub async fn start(
    b: &BackendArgs,
    reg: &Registry,
    job_uri: &str,
    job_id: &str,
) -> anyhow::Result<ExitCode> {
    match b.backend.as_str() {
        "local" => local(b, reg, job_uri).await,
        "aws-batch" => batch(b, reg, job_uri, job_id).await,
        "k8s" => kube(b, reg, job_uri, job_id).await,
        other => anyhow::bail!("unknown backend {other:?}"),
    }
}

/// The worker classes to start, `("cpu" | "gpu", count)`, without empty ones; CPU
/// workers default to `default_cpu`.
fn classes(b: &BackendArgs, default_cpu: u32) -> Vec<(&'static str, u32)> {
    [
        ("cpu", b.workers.unwrap_or(default_cpu)),
        ("gpu", b.gpu_workers),
    ]
    .into_iter()
    .filter(|c| c.1 > 0)
    .collect()
}

/// N `mdf worker` processes (their output on stderr), waited for.
async fn local(b: &BackendArgs, reg: &Registry, job_uri: &str) -> anyhow::Result<ExitCode> {
    let classes = classes(b, 0);
    if classes.is_empty() {
        println!("{job_uri}");
        return Ok(ExitCode::SUCCESS);
    }
    let exe = std::env::current_exe().context("finding the mdf executable")?;
    let mut children = Vec::new();
    for (class, n) in classes {
        for i in 0..n {
            let child = std::process::Command::new(&exe)
                .args(["worker", "--job", job_uri, "--resources", class])
                .args([
                    "--worker-id",
                    &format!("local-{class}-{i}-{}", std::process::id()),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .with_context(|| format!("starting {}", exe.display()))?;
            children.push(child);
        }
    }
    eprintln!("started {} local workers", children.len());
    let mut failed = 0;
    for mut c in children {
        let st = tokio::task::spawn_blocking(move || c.wait()).await??;
        if !st.success() {
            failed += 1;
        }
    }
    let s = status::status(reg, job_uri, &SystemClock, &Retry::new(Entropy::from_os())).await?;
    eprint!("{}", status::render(&s));
    println!("{job_uri}");
    Ok(if failed > 0 || !s.succeeded {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

async fn record(reg: &Registry, job_uri: &str, s: &Submission) -> anyhow::Result<()> {
    let uri = Uri::parse(job_uri)?;
    let store = reg.open(&uri)?;
    let paths = JobPaths::new(uri);
    let name = format!("{}-{}", s.backend, s.id.replace([':', '/'], "-"));
    put_json(
        store.as_ref(),
        &paths.submission(&name),
        s,
        &Retry::new(Entropy::from_os()),
    )
    .await?;
    Ok(())
}

async fn batch(
    b: &BackendArgs,
    reg: &Registry,
    job_uri: &str,
    job_id: &str,
) -> anyhow::Result<ExitCode> {
    let client = BatchClient::from_env().map_err(anyhow::Error::msg)?;
    let targets: Vec<BatchTarget> = classes(b, 1)
        .into_iter()
        .map(|(class, workers)| {
            let (queue, job_definition) = match class {
                "gpu" => (&b.gpu_queue, &b.gpu_job_definition),
                _ => (&b.queue, &b.job_definition),
            };
            BatchTarget {
                queue: queue.clone().unwrap_or_default(),
                job_definition: job_definition.clone(),
                workers,
                resources: class.into(),
            }
        })
        .collect();
    for t in &targets {
        let s = client
            .submit(job_uri, job_id, t, SystemClock.now_ms())
            .await
            .map_err(anyhow::Error::msg)?;
        record(reg, job_uri, &s).await?;
        eprintln!(
            "submitted AWS Batch job {} ({}): {} {} workers on queue {} with {}",
            s.id, s.name, s.workers, s.resources, s.queue, s.job_definition
        );
    }
    println!("{job_uri}");
    Ok(ExitCode::SUCCESS)
}

async fn kube(
    b: &BackendArgs,
    reg: &Registry,
    job_uri: &str,
    job_id: &str,
) -> anyhow::Result<ExitCode> {
    let targets: Vec<K8sTarget> = classes(b, 1)
        .into_iter()
        .map(|(class, workers)| K8sTarget {
            workers,
            resources: class.into(),
            image: if class == "gpu" {
                &b.gpu_image
            } else {
                &b.image
            }
            .clone(),
            namespace: b.namespace.clone(),
        })
        .collect();
    let mut docs = Vec::new();
    for t in &targets {
        docs.push(k8s::render(job_uri, job_id, t).map_err(anyhow::Error::msg)?);
    }
    let yaml = docs.join("---\n");
    if !b.apply {
        print!("{yaml}");
        return Ok(ExitCode::SUCCESS);
    }
    let mut child = std::process::Command::new("kubectl")
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::inherit())
        .spawn()
        .context("running kubectl (is it installed and on PATH?)")?;
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(yaml.as_bytes())?;
    let st = child.wait()?;
    if !st.success() {
        anyhow::bail!("kubectl apply failed ({st})");
    }
    for t in &targets {
        let name = k8s::job_name(job_id, &t.resources);
        let s = Submission {
            version: 1,
            backend: "k8s".into(),
            id: name.clone(),
            name,
            queue: t.namespace.clone(),
            job_definition: format!("manifests/k8s/worker-{}.yaml", t.resources),
            workers: t.workers,
            resources: t.resources.clone(),
            submitted_ms: SystemClock.now_ms(),
        };
        record(reg, job_uri, &s).await?;
    }
    println!("{job_uri}");
    Ok(ExitCode::SUCCESS)
}
