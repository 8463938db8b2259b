//! `--backend aws-batch`: one `SubmitJob` call per worker class (an array job of N
//! `mdf worker` containers when N > 1), signed with AWS Signature Version 4 ([`super::aws`]).
//! Why not `aws-sdk-batch`: docs/DECISIONS.md.

use super::aws::{AwsApi, BATCH, JSON};
use super::{Backend, Event, JobRef, LaunchError, LaunchOptions, Launched, record};
use crate::clock::{Clock, SystemClock};
use crate::protocol::records::Submission;
use crate::spec::Spec;
use serde::Deserialize;

pub struct AwsBatch;

#[async_trait::async_trait(?Send)]
impl Backend for AwsBatch {
    fn name(&self) -> &'static str {
        "aws-batch"
    }

    fn validate(&self, o: &LaunchOptions, job_root: &str, spec: &Spec) -> Result<(), LaunchError> {
        super::check_remote_paths(self.name(), job_root, spec)?;
        let refuse = |m: &str| Err(LaunchError::Refused(m.into()));
        if o.queue.is_none() && o.workers != Some(0) {
            return refuse("--backend aws-batch: --queue is required (the CPU job queue)");
        }
        if o.gpu_workers > 0 && o.gpu_queue.is_none() {
            return refuse("--gpu-workers needs --gpu-queue (the GPU job queue)");
        }
        if o.workers.unwrap_or(1) > 10_000 || o.gpu_workers > 10_000 {
            return refuse("--workers: AWS Batch array jobs have at most 10,000 children");
        }
        Ok(())
    }

    fn describe(&self, s: &Submission) -> String {
        format!(
            "submitted AWS Batch job {} ({}): {} {} workers on queue {} with {}",
            s.id, s.name, s.workers, s.resources, s.queue, s.job_definition
        )
    }

    async fn launch(
        &self,
        job: &JobRef<'_>,
        o: &LaunchOptions,
        events: &dyn Fn(Event),
    ) -> Result<Launched, LaunchError> {
        let client = BatchClient::from_env()?;
        let targets: Vec<BatchTarget> = o
            .classes(self.default_workers())
            .into_iter()
            .map(|(class, workers)| {
                let (queue, job_definition) = match class {
                    "gpu" => (&o.gpu_queue, &o.gpu_job_definition),
                    _ => (&o.queue, &o.job_definition),
                };
                BatchTarget {
                    queue: queue.clone().unwrap_or_default(),
                    job_definition: job_definition.clone(),
                    workers,
                    resources: class.into(),
                }
            })
            .collect();
        let mut submitted = Vec::new();
        for t in &targets {
            let s = client
                .submit(job.uri, job.id, t, SystemClock.now_ms())
                .await?;
            record(job.registry, job.uri, &s).await?;
            events(Event::Submitted(s.clone()));
            submitted.push(s);
        }
        Ok(Launched::Submitted(submitted))
    }
}

/// One worker class to submit.
#[derive(Debug, Clone)]
pub struct BatchTarget {
    pub queue: String,
    pub job_definition: String,
    pub workers: u32,
    /// `cpu` or `gpu`: passed to `mdf worker --resources`.
    pub resources: String,
}

/// AWS Batch's API (`AWS_ENDPOINT_URL_BATCH`, then `AWS_ENDPOINT_URL`, else the
/// public endpoint of the region).
pub struct BatchClient {
    api: AwsApi,
}

impl BatchClient {
    pub fn from_env() -> Result<Self, LaunchError> {
        Ok(BatchClient {
            api: AwsApi::from_env(&BATCH, "aws-batch", None)?,
        })
    }

    /// Submits the workers of one class for `job_uri`; returns what to record.
    pub async fn submit(
        &self,
        job_uri: &str,
        job_id: &str,
        t: &BatchTarget,
        now_ms: u64,
    ) -> Result<Submission, LaunchError> {
        let name = batch_job_name(job_id, &t.resources);
        let body = submit_body(&name, job_uri, t).to_string().into_bytes();
        let text = self
            .api
            .post("AWS Batch SubmitJob", "/v1/submitjob", JSON, body, now_ms)
            .await
            .map_err(|e| e.context(&format!("queue {:?}", t.queue)))?;
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Resp {
            job_id: String,
        }
        let r: Resp = serde_json::from_str(&text)
            .map_err(|e| self.api.bad_answer("AWS Batch SubmitJob", &text, e))?;
        Ok(Submission {
            version: 1,
            backend: "aws-batch".into(),
            id: r.job_id,
            name,
            queue: t.queue.clone(),
            job_definition: t.job_definition.clone(),
            workers: t.workers,
            resources: t.resources.clone(),
            submitted_ms: now_ms,
        })
    }
}

/// A Batch job name (letters, digits, `-`, `_`; at most 128) for a job id and class.
pub fn batch_job_name(job_id: &str, resources: &str) -> String {
    let mut n: String = format!("mdf-{job_id}-{resources}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    n.truncate(128);
    n
}

/// The `SubmitJob` request: the job definition's command is replaced by `mdf worker`
/// for this job; `MDF_JOB` carries the URI too (for logs and dashboards). Array
/// jobs need at least 2 children, so one worker is a plain job.
pub fn submit_body(name: &str, job_uri: &str, t: &BatchTarget) -> serde_json::Value {
    let mut body = serde_json::json!({
        "jobName": name,
        "jobQueue": t.queue,
        "jobDefinition": t.job_definition,
        "containerOverrides": {
            "command": ["worker", "--job", job_uri, "--resources", t.resources],
            "environment": [{"name": "MDF_JOB", "value": job_uri}],
        },
        "tags": {"mdf-job": name},
        "propagateTags": true,
    });
    if t.workers > 1 {
        body["arrayProperties"] = serde_json::json!({ "size": t.workers });
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_worker_is_not_an_array_job() {
        let t = BatchTarget {
            queue: "q".into(),
            job_definition: "d".into(),
            workers: 1,
            resources: "cpu".into(),
        };
        assert!(
            submit_body("n", "s3://b/j", &t)
                .get("arrayProperties")
                .is_none()
        );
        let t = BatchTarget { workers: 8, ..t };
        let b = submit_body("n", "s3://b/j", &t);
        assert_eq!(b["arrayProperties"]["size"], 8);
        assert_eq!(b["containerOverrides"]["command"][2], "s3://b/j");
        assert_eq!(batch_job_name("cc.1/x", "gpu"), "mdf-cc-1-x-gpu");
    }
}
