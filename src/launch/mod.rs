//! Launch backends: after a job is written (`coordinator::submit`), start its workers
//! here ([`local`]), on AWS Batch ([`aws_batch`]), on an EC2 Auto Scaling group of
//! spot instances ([`fleet`]) or on Kubernetes ([`k8s`]). What a
//! remote backend was asked to run is recorded under the job (`submissions/`) so
//! `mdf status` shows it.
//!
//! One [`Backend`] per file, registered by name in [`BACKENDS`]: adding a backend is
//! one file and one line there. A backend starts workers for a planned job; it never
//! plans, and the coordinator never imports this module (launch sits above it).
//! Backends print nothing: what they did is returned ([`Launched`]) or reported
//! through [`Event`]s, and the CLI prints it.
pub mod aws;
pub mod aws_batch;
pub mod fleet;
pub mod imds;
pub mod k8s;
pub mod local;

use crate::clock::Entropy;
use crate::coordinator::status::JobStatus;
use crate::protocol::JobPaths;
use crate::protocol::io::{ProtoError, Retry, put_json};
use crate::protocol::job::JobError;
use crate::protocol::records::Submission;
use crate::spec::Spec;
use crate::store::{Registry, StoreError, Uri};

/// Every launch backend, by `--backend` name; the first is the default.
pub static BACKENDS: &[&dyn Backend] = &[
    &local::Local,
    &aws_batch::AwsBatch,
    &fleet::Fleet,
    &k8s::K8s,
];

/// The backend called `name`.
pub fn backend(name: &str) -> Result<&'static dyn Backend, LaunchError> {
    BACKENDS
        .iter()
        .copied()
        .find(|b| b.name() == name)
        .ok_or_else(|| LaunchError::UnknownBackend(name.to_string()))
}

/// The registered backends' names, in order (the `--backend` choices).
pub fn names() -> impl Iterator<Item = &'static str> {
    BACKENDS.iter().map(|b| b.name())
}

/// A place to start the workers of a written job. Launching runs on the caller's
/// runtime thread (`block_on`), so its future need not be `Send`.
#[async_trait::async_trait(?Send)]
pub trait Backend: Send + Sync {
    /// The `--backend` name.
    fn name(&self) -> &'static str;

    /// Whether workers run on other machines: then they cannot read this machine's
    /// files, and [`Backend::validate`] refuses local paths by default.
    fn remote(&self) -> bool {
        true
    }

    /// CPU workers started when `--workers` is not given.
    fn default_workers(&self) -> u32 {
        1
    }

    /// Refuses a setup that cannot work, before anything is written. The default
    /// refuses, for a remote backend, a local job root, input, output or operator file.
    fn validate(&self, o: &LaunchOptions, job_root: &str, spec: &Spec) -> Result<(), LaunchError> {
        let _ = o;
        if self.remote() {
            check_remote_paths(self.name(), job_root, spec)?;
        }
        Ok(())
    }

    /// One line about a submission of this backend, for the person who submitted it.
    fn describe(&self, s: &Submission) -> String {
        format!(
            "submitted {} job {}: {} {} workers in {} ({})",
            s.backend, s.id, s.workers, s.resources, s.queue, s.job_definition
        )
    }

    /// Starts the workers of the job at `job.uri`.
    async fn launch(
        &self,
        job: &JobRef<'_>,
        o: &LaunchOptions,
        events: &dyn Fn(Event),
    ) -> Result<Launched, LaunchError>;
}

/// The job whose workers to start.
pub struct JobRef<'a> {
    pub registry: &'a Registry,
    pub uri: &'a str,
    pub id: &'a str,
}

/// What to start, for every backend (each reads the options that are its own).
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// CPU workers; `None`: the backend's [`Backend::default_workers`].
    pub workers: Option<u32>,
    /// GPU workers (`mdf worker --resources gpu`).
    pub gpu_workers: u32,
    /// aws-batch: the CPU and GPU job queues.
    pub queue: Option<String>,
    pub gpu_queue: Option<String>,
    /// aws-batch: the CPU and GPU job definitions (name, name:revision or ARN).
    pub job_definition: String,
    pub gpu_job_definition: String,
    /// k8s: the CPU and GPU worker images (`None`: the template's).
    pub image: Option<String>,
    pub gpu_image: Option<String>,
    /// k8s: the namespace.
    pub namespace: String,
    /// k8s: apply the manifest with `kubectl apply -f -` instead of returning it.
    pub apply: bool,
    /// fleet: the CPU and GPU Auto Scaling groups.
    pub group: String,
    pub gpu_group: String,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        LaunchOptions {
            workers: None,
            gpu_workers: 0,
            queue: None,
            gpu_queue: None,
            job_definition: "mdf-worker".into(),
            gpu_job_definition: "mdf-worker-gpu".into(),
            image: None,
            gpu_image: None,
            namespace: "default".into(),
            apply: false,
            group: "mdf-cpu".into(),
            gpu_group: "mdf-gpu".into(),
        }
    }
}

impl LaunchOptions {
    /// The worker classes to start, `("cpu" | "gpu", count)`, without empty ones; CPU
    /// workers default to `default_cpu`.
    pub fn classes(&self, default_cpu: u32) -> Vec<(&'static str, u32)> {
        [
            ("cpu", self.workers.unwrap_or(default_cpu)),
            ("gpu", self.gpu_workers),
        ]
        .into_iter()
        .filter(|c| c.1 > 0)
        .collect()
    }
}

/// Something a backend did while launching, for the CLI to report as it happens.
#[derive(Debug, Clone)]
pub enum Event {
    /// Local worker processes started (they are now being waited for).
    Started { workers: usize },
    /// Workers submitted to a remote backend and recorded under the job.
    Submitted(Submission),
    /// Something the person submitting should know (a request capped, ...).
    Warning(String),
}

/// What a launch ended with.
#[derive(Debug)]
pub enum Launched {
    /// No workers were asked for: the job is planned only.
    Planned,
    /// Workers ran here until they exited: how many failed, and the job's status.
    Ran {
        workers: usize,
        failed: usize,
        status: Box<JobStatus>,
    },
    /// Workers were submitted elsewhere (recorded under the job, see [`Event`]).
    Submitted(Vec<Submission>),
    /// Nothing was started: the manifest to apply by hand (k8s without `--apply`).
    Manifest(String),
}

impl Launched {
    /// Whether the command succeeded: a local run fails when a worker failed or the
    /// job did not succeed.
    pub fn ok(&self) -> bool {
        match self {
            Launched::Ran { failed, status, .. } => *failed == 0 && status.succeeded,
            _ => true,
        }
    }
}

/// Why workers could not be started. Each message is whole (it names its cause), so
/// the variants carry no separate `source`.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("unknown backend {0:?}")]
    UnknownBackend(String),
    /// A setup that cannot work (a flag missing, a local path for remote workers);
    /// found before anything was written.
    #[error("{0}")]
    Refused(String),
    /// The environment lacks something the backend needs (region, credentials).
    #[error("{0}")]
    Environment(String),
    #[error("{what}: {error}")]
    Io { what: String, error: std::io::Error },
    /// The remote API could not be reached, or answered with an error.
    #[error("{api} at {url}: {message}")]
    Api {
        api: &'static str,
        url: String,
        /// The HTTP status, when the API answered.
        status: Option<u16>,
        /// The AWS error code of the answer (`Throttling`, `ValidationError`, ...).
        code: Option<String>,
        message: String,
    },
    #[error("kubectl apply failed ({0})")]
    Kubectl(std::process::ExitStatus),
    /// A worker manifest template that does not have the expected shape.
    #[error("{0}")]
    Template(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Proto(#[from] ProtoError),
    #[error(transparent)]
    Job(#[from] JobError),
}

impl LaunchError {
    /// A usage or configuration error (exit 2): nothing was started and retrying the
    /// same command cannot help.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            LaunchError::UnknownBackend(_) | LaunchError::Refused(_) | LaunchError::Template(_)
        )
    }

    /// Worth retrying as is: the API could not be reached, throttled or failed on its
    /// side (HTTP 429 or 5xx, or an AWS throttling or busy code, which the Query APIs
    /// answer with HTTP 400).
    pub fn is_retryable(&self) -> bool {
        const CODES: &[&str] = &[
            "Throttling",
            "ThrottlingException",
            "TooManyRequestsException",
            "RequestLimitExceeded",
            "RequestThrottled",
            "ScalingActivityInProgress",
            "ResourceContention",
            "ServiceUnavailable",
            "InternalFailure",
        ];
        match self {
            LaunchError::Api { status, code, .. } => {
                code.as_deref().is_some_and(|c| CODES.contains(&c))
                    || status.is_none_or(|s| s == 429 || (500..600).contains(&s))
            }
            _ => false,
        }
    }
}

/// Refuses a job root, input, output or operator file that workers on other machines
/// cannot read (named by field), for the backend `backend`.
pub fn check_remote_paths(backend: &str, job_root: &str, spec: &Spec) -> Result<(), LaunchError> {
    let refuse = |m: String| Err(LaunchError::Refused(format!("--backend {backend}: {m}")));
    if !job_root.starts_with("s3://") {
        return refuse(format!(
            "workers there cannot read the job root {job_root:?}; use an s3:// --job-root"
        ));
    }
    let local = |u: &str| !u.contains("://") || u.starts_with("file://");
    if let Some(u) = spec.input.uris.iter().find(|u| local(u)) {
        return refuse(format!(
            "input.uris: workers there cannot read the local input {u:?}; put it on S3"
        ));
    }
    if local(&spec.output.uri) {
        return refuse(format!(
            "output.uri: workers there cannot write the local output {:?}; use an s3:// --output",
            spec.output.uri
        ));
    }
    for (st, assets) in spec.stages.iter().zip(crate::ops::stage_assets(spec)) {
        if let Some(a) = assets.into_iter().find(|a| local(&a.uri)) {
            let list = a.param.split('[').next().unwrap_or(&a.param);
            return refuse(format!(
                "stages.{}.{}: workers there cannot read the local file {:?}; put it on S3 (--set 'stages.{}.{list}=[s3://...]')",
                st.name, a.param, a.uri, st.name
            ));
        }
    }
    Ok(())
}

/// Records a remote submission under the job (`submissions/<backend>-<id>.json`).
pub async fn record(reg: &Registry, job_uri: &str, s: &Submission) -> Result<(), LaunchError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_are_registered_once_by_name() {
        let names: Vec<&str> = names().collect();
        assert_eq!(names, ["local", "aws-batch", "fleet", "k8s"]);
        for n in &names {
            assert_eq!(backend(n).unwrap().name(), *n);
        }
        assert!(matches!(
            backend("slurm"),
            Err(LaunchError::UnknownBackend(_))
        ));
        assert!(!backend("local").unwrap().remote());
        assert_eq!(backend("local").unwrap().default_workers(), 0);
    }

    #[test]
    fn classes_skip_empty_ones() {
        let o = LaunchOptions {
            gpu_workers: 2,
            ..Default::default()
        };
        assert_eq!(o.classes(0), [("gpu", 2)]);
        assert_eq!(o.classes(1), [("cpu", 1), ("gpu", 2)]);
        let o = LaunchOptions {
            workers: Some(0),
            ..Default::default()
        };
        assert!(o.classes(1).is_empty());
    }

    fn spec(input: &str, output: &str) -> Spec {
        let text = format!(
            "name: t\ninput: {{uris: [\"{input}\"]}}\nstages: [{{op: text_length}}]\noutput: {{uri: \"{output}\"}}\n"
        );
        Spec::from_text(
            &text,
            "t",
            &crate::spec::Overrides::default(),
            &|_| None,
            &crate::ops::Catalog,
        )
        .unwrap()
    }

    fn refused(b: &str, o: &LaunchOptions, root: &str, s: &Spec) -> String {
        match backend(b).unwrap().validate(o, root, s) {
            Err(e @ LaunchError::Refused(_)) => {
                assert!(e.is_usage());
                e.to_string()
            }
            other => panic!("{b}: expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn remote_backends_refuse_what_their_workers_cannot_reach() {
        let remote = spec("s3://b/in/*.jsonl", "s3://b/out");
        let local = spec("/data/*.jsonl", "s3://b/out");
        let o = LaunchOptions {
            queue: Some("q".into()),
            ..Default::default()
        };
        // Local workers read anything; no flags needed.
        let l = backend("local").unwrap();
        assert!(l.validate(&o, ".mdf", &local).is_ok());
        for b in ["aws-batch", "fleet", "k8s"] {
            assert!(
                backend(b)
                    .unwrap()
                    .validate(&o, "s3://b/mdf", &remote)
                    .is_ok()
            );
            let e = refused(b, &o, ".mdf", &remote);
            assert!(
                e.contains(&format!("--backend {b}")) && e.contains("s3:// --job-root"),
                "{e}"
            );
            let e = refused(b, &o, "s3://b/mdf", &local);
            assert!(
                e.contains("input.uris") && e.contains("/data/*.jsonl"),
                "{e}"
            );
            let e = refused(b, &o, "s3://b/mdf", &spec("s3://b/in/*.jsonl", "out"));
            assert!(e.contains("output.uri"), "{e}");
        }
    }

    #[test]
    fn aws_batch_needs_its_queues_and_array_sizes() {
        let s = spec("s3://b/in/*.jsonl", "s3://b/out");
        let root = "s3://b/mdf";
        let e = refused("aws-batch", &LaunchOptions::default(), root, &s);
        assert!(e.contains("--queue is required"), "{e}");
        let o = LaunchOptions {
            queue: Some("q".into()),
            gpu_workers: 2,
            ..Default::default()
        };
        assert!(refused("aws-batch", &o, root, &s).contains("--gpu-queue"));
        let o = LaunchOptions {
            queue: Some("q".into()),
            workers: Some(10_001),
            ..Default::default()
        };
        assert!(refused("aws-batch", &o, root, &s).contains("10,000"));
        // No CPU workers: no CPU queue needed.
        let o = LaunchOptions {
            workers: Some(0),
            ..Default::default()
        };
        assert!(backend("aws-batch").unwrap().validate(&o, root, &s).is_ok());
    }

    /// Without --apply, k8s returns the manifests (one document per worker class) and
    /// writes nothing under the job.
    #[tokio::test]
    async fn k8s_without_apply_returns_the_manifest() {
        let reg = Registry::new(Default::default());
        let job = JobRef {
            registry: &reg,
            uri: "memory://never-written/jobs/t-0123456789ab",
            id: "t-0123456789ab",
        };
        let o = LaunchOptions {
            workers: Some(3),
            gpu_workers: 1,
            ..Default::default()
        };
        let events = |e: Event| panic!("unexpected event {e:?}");
        let got = backend("k8s").unwrap().launch(&job, &o, &events).await;
        let Ok(Launched::Manifest(yaml)) = got else {
            panic!("{got:?}");
        };
        assert_eq!(yaml.matches("kind: Job").count(), 2, "{yaml}");
        assert!(yaml.contains("mdf-t-0123456789ab-cpu") && yaml.contains("mdf-t-0123456789ab-gpu"));
    }

    #[test]
    fn api_errors_say_whether_to_retry() {
        let api = |status| LaunchError::Api {
            api: "AWS Batch SubmitJob",
            url: "u".into(),
            status,
            code: None,
            message: "m".into(),
        };
        assert!(api(None).is_retryable());
        assert!(api(Some(429)).is_retryable());
        assert!(api(Some(503)).is_retryable());
        assert!(!api(Some(400)).is_retryable());
        let coded = |code: &str| LaunchError::Api {
            api: "Auto Scaling SetDesiredCapacity",
            url: "u".into(),
            status: Some(400),
            code: Some(code.into()),
            message: "m".into(),
        };
        assert!(coded("Throttling").is_retryable());
        assert!(coded("ScalingActivityInProgress").is_retryable());
        assert!(!coded("ValidationError").is_retryable());
        assert!(LaunchError::Refused("x".into()).is_usage());
        assert!(!api(Some(400)).is_usage());
    }
}
