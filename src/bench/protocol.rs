//! `mdf bench protocol`: measures the job protocol on the local store — object-store
//! requests per task, and the wall-time overhead of leases, heartbeats, commits and
//! publishing against running the very same task pipelines in one process without
//! them. Numbers go to docs/PERFORMANCE.md.
use super::BenchError;
use crate::clock::{Entropy, SystemClock};
use crate::coordinator::status::JobStatus;
use crate::coordinator::{load_job, status, submit};
use crate::protocol::io::Retry;
use crate::store::{Registry, RequestCounts, RequestSnapshot, Uri};
use crate::worker::pipeline::{self, PipelineSpec};
use crate::worker::{self, WorkerOptions};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The benchmark's shape.
#[derive(Debug, Clone)]
pub struct ProtocolBench {
    pub tasks: usize,
    pub workers: usize,
    pub records_per_task: usize,
    /// Scratch directory, removed afterwards.
    pub dir: std::path::PathBuf,
}

/// What `mdf bench protocol` measured.
pub struct ProtocolReport {
    pub bench: ProtocolBench,
    /// The benchmark job's status (requests per phase and by workers).
    pub status: JobStatus,
    /// Requests of the same pipelines run directly (data only).
    pub direct: RequestSnapshot,
    /// Tasks the submit planned.
    pub submitted_tasks: u64,
    pub submit: Duration,
    /// Wall time of the full protocol (submit, leases, commits, publishing).
    pub protocol: Duration,
    /// Wall time of the same pipelines without the protocol.
    pub direct_wall: Duration,
}

/// Runs the benchmark job twice in `b.dir`: with the protocol, and its task pipelines
/// directly; removes the directory afterwards.
pub async fn protocol(b: &ProtocolBench) -> Result<ProtocolReport, BenchError> {
    let (dir, tasks, workers, per_task) = (&b.dir, b.tasks, b.workers, b.records_per_task);
    let input = dir.join("in");
    std::fs::create_dir_all(&input).map_err(BenchError::io(&input))?;
    for t in 0..tasks {
        let mut s = String::new();
        for r in 0..per_task {
            s += &format!(
                "{{\"text\": \"document {r} of file {t} with a few words in it\", \"n\": {r}}}\n"
            );
        }
        let file = input.join(format!("{t:06}.jsonl"));
        std::fs::write(&file, s).map_err(BenchError::io(&file))?;
    }
    let spec = super::text_length_job(
        "bench",
        &format!("{}/*.jsonl", input.display()),
        &dir.join("out").display().to_string(),
        "poll_millis: 200",
    )?;
    let reg = Registry::new(spec.s3.clone());
    let entropy = Entropy::from_os();
    let retry = Retry::new(entropy.clone());

    // (a) The full protocol: submit, N workers leasing and committing.
    let t0 = Instant::now();
    let opts = submit::SubmitOptions {
        job_root: dir.join("jobs").display().to_string(),
        job_id: None,
        reuse: None,
        plan_memory: crate::coordinator::plan::PLAN_MEMORY,
    };
    let sub = submit::submit(&spec, &reg, &opts, &SystemClock, &entropy)
        .await
        .map_err(BenchError::step("submitting"))?;
    let t_submit = t0.elapsed();
    let mut hs = Vec::new();
    for i in 0..workers {
        let reg = reg.clone();
        let o = WorkerOptions {
            job_uri: sub.job_uri.clone(),
            max_tasks: None,
            worker_id: Some(format!("bench-{i}")),
            gpu: false,
            cpu_work: false,
            clock: Arc::new(SystemClock),
            entropy: Entropy::from_os(),
            shutdown: Default::default(),
            drain: Default::default(),
            drain_after_task: Default::default(),
            exit_when_class_done: false,
            give_up_after: None,
            listings: None,
            simulate: None,
        };
        hs.push(tokio::spawn(async move { worker::run(&reg, o).await }));
    }
    for h in hs {
        h.await
            .map_err(BenchError::step("a worker"))?
            .map_err(BenchError::step("a worker"))?;
    }
    let t_protocol = t0.elapsed();
    let st = status::status(&reg, &sub.job_uri, &SystemClock, &retry)
        .await
        .map_err(BenchError::step("the job's status"))?;
    if !st.succeeded {
        return Err(BenchError::JobFailed);
    }

    // (b) The same task pipelines, same concurrency, no leases/commits/publishing.
    let job = load_job(&reg, &sub.job_uri, &retry)
        .await
        .map_err(BenchError::step("loading the job"))?;
    let ops =
        crate::ops::build_stages(&job.spec).map_err(BenchError::step("building the stages"))?;
    let stages = worker::bind_stages(&job, &ops).map_err(BenchError::step("binding the stages"))?;
    let plan = crate::coordinator::plan::plan(&spec, &reg)
        .await
        .map_err(BenchError::step("planning"))?;
    let counts = Arc::new(RequestCounts::default());
    let direct_reg = reg.counting_into(counts.clone());
    let direct_out = Uri::parse(&dir.join("direct").display().to_string())
        .map_err(BenchError::step("the scratch directory"))?;
    let t1 = Instant::now();
    let phase = job.manifest.phases[0].clone();
    let sem = Arc::new(tokio::sync::Semaphore::new(workers));
    let mut hs = Vec::new();
    let first: Vec<_> = plan
        .first_tasks()
        .and_then(|ts| ts.collect::<Result<Vec<_>, _>>())
        .map_err(BenchError::step("planning"))?;
    for t in first {
        let permit = sem
            .clone()
            .acquire_owned()
            .await
            .map_err(BenchError::step("a pipeline slot"))?;
        let props = crate::io::write::parquet::properties(&spec.output);
        let p = PipelineSpec {
            registry: direct_reg.clone(),
            handle: tokio::runtime::Handle::current(),
            inputs: t.inputs.clone(),
            input_schema: Arc::new(phase.input_schema.clone()),
            assign_ids: true,
            download: spec.input.download.clone(),
            stages: stages[0].clone(),
            output_schema: Arc::new(phase.output_schema.clone()),
            out_dir: direct_out.child(&t.task_id),
            props: props.clone(),
            data_props: props,
            target_file_bytes: spec.output.target_file_bytes,
            writer: &crate::io::write::parquet::Parquet,
            task: "bench".into(),
            tokens: None,
            jsonl: None,
            webdataset: None,
            limit: None,
            created_ms: 0,
            batch_rows: spec.job.batch_rows,
            batch_bytes: spec.job.batch_bytes,
            channel_batches: spec.job.channel_batches,
            max_record_bytes: spec.input.max_record_bytes as usize,
            keep_rejected_records: true,
            cancel: Default::default(),
            keys: None,
            record_sources: false,
        };
        hs.push(tokio::task::spawn_blocking(move || {
            let r = pipeline::run(p);
            drop(permit);
            r
        }));
    }
    for h in hs {
        h.await
            .map_err(BenchError::step("a pipeline"))?
            .map_err(BenchError::step("a pipeline"))?;
    }
    let t_direct = t1.elapsed();
    let direct = counts.snapshot();
    std::fs::remove_dir_all(dir).ok();
    Ok(ProtocolReport {
        bench: b.clone(),
        status: st,
        direct,
        submitted_tasks: sub.tasks,
        submit: t_submit,
        protocol: t_protocol,
        direct_wall: t_direct,
    })
}

impl std::fmt::Display for ProtocolReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (tasks, workers, per_task) = (
            self.bench.tasks,
            self.bench.workers,
            self.bench.records_per_task,
        );
        let n = self.status.tasks_total as f64;
        let p0 = &self.status.phases[0];
        let fin = &self.status.phases[1];
        writeln!(
            f,
            "mdf bench protocol: {tasks} tasks × {per_task} records, {workers} workers, local store"
        )?;
        writeln!(f)?;
        writeln!(f, "| measure | value |")?;
        writeln!(f, "|---|---|")?;
        writeln!(
            f,
            "| tasks (incl. finalize) | {} |",
            self.status.tasks_total
        )?;
        writeln!(f, "| requests, all | {} |", self.status.requests_total)?;
        writeln!(
            f,
            "| requests per task, amortised | {:.2} |",
            self.status.requests_total as f64 / n
        )?;
        writeln!(
            f,
            "| in p00 tasks (get/put/list/head/copy/delete) | {}/{}/{}/{}/{}/{} = {:.2} per task |",
            p0.requests.get,
            p0.requests.put,
            p0.requests.list,
            p0.requests.head,
            p0.requests.copy,
            p0.requests.delete,
            p0.requests.total() as f64 / p0.tasks.total.max(1) as f64
        )?;
        writeln!(f, "| in the finalize task | {} |", fin.requests.total())?;
        let w = &self.status.worker_requests;
        writeln!(
            f,
            "| by workers outside tasks (claims, listings, publishing) get/put/list/head/copy/delete | {}/{}/{}/{}/{}/{} = {:.2} per task |",
            w.get,
            w.put,
            w.list,
            w.head,
            w.copy,
            w.delete,
            w.total() as f64 / n
        )?;
        writeln!(
            f,
            "| direct pipelines, requests per task (data only) | {:.2} |",
            self.direct.total() as f64 / tasks as f64
        )?;
        writeln!(
            f,
            "| submit (plan + {} manifests) | {:.2} s |",
            self.submitted_tasks,
            self.submit.as_secs_f64()
        )?;
        writeln!(
            f,
            "| full protocol, wall | {:.2} s |",
            self.protocol.as_secs_f64()
        )?;
        writeln!(
            f,
            "| same pipelines without protocol, wall | {:.2} s |",
            self.direct_wall.as_secs_f64()
        )?;
        writeln!(
            f,
            "| protocol overhead | {:.2} s ({:.1} ms per task, {:.0}%) |",
            (self.protocol.as_secs_f64() - self.direct_wall.as_secs_f64()),
            (self.protocol.as_secs_f64() - self.direct_wall.as_secs_f64()) * 1000.0 / tasks as f64,
            100.0 * (self.protocol.as_secs_f64() / self.direct_wall.as_secs_f64() - 1.0)
        )?;
        Ok(())
    }
}
