//! `--backend aws-batch`: one `SubmitJob` call per worker class (an array job of N
//! `mdf worker` containers when N > 1), signed with AWS Signature Version 4 over the
//! HTTP client the store already uses, with credentials from the same chain as the S3
//! store (environment, web identity, ECS task role, instance profile).
//! Why not `aws-sdk-batch`: docs/DECISIONS.md.

use super::{Backend, Event, JobRef, LaunchError, LaunchOptions, Launched, record};
use crate::clock::{Clock, SystemClock};
use crate::protocol::records::Submission;
use crate::spec::Spec;
use ring::{digest, hmac};
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

/// The signing key, region and endpoint of the Batch API.
pub struct BatchClient {
    endpoint: String,
    region: String,
    credentials: object_store::aws::AwsCredentialProvider,
    http: reqwest::Client,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn sha256_hex(b: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, b).as_ref())
}

fn hmac_sha256(key: &[u8], msg: &str) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), msg.as_bytes())
        .as_ref()
        .to_vec()
}

/// `(20261201T083000Z, 20261201)` of a Unix time in milliseconds.
pub fn amz_date(ms: u64) -> (String, String) {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let date = format!("{y:04}{m:02}{d:02}");
    let time = format!(
        "{date}T{:02}{:02}{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    );
    (time, date)
}

/// The SigV4 headers (`x-amz-date`, the token if any, `authorization`) of a JSON POST
/// to `host` + `path` (no query string).
#[allow(clippy::too_many_arguments)]
pub fn sign_post(
    host: &str,
    path: &str,
    body: &[u8],
    region: &str,
    service: &str,
    key_id: &str,
    secret: &str,
    token: Option<&str>,
    now_ms: u64,
) -> Vec<(String, String)> {
    let (amz, date) = amz_date(now_ms);
    let mut headers: Vec<(String, String)> = vec![
        ("content-type".into(), "application/json".into()),
        ("host".into(), host.into()),
        ("x-amz-date".into(), amz.clone()),
    ];
    if let Some(t) = token {
        headers.push(("x-amz-security-token".into(), t.into()));
    }
    headers.sort();
    let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let signed: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
    let signed = signed.join(";");
    let canonical = format!(
        "POST\n{path}\n\n{canonical_headers}\n{signed}\n{}",
        sha256_hex(body)
    );
    let scope = format!("{date}/{region}/{service}/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz}\n{scope}\n{}",
        sha256_hex(canonical.as_bytes())
    );
    let k = hmac_sha256(format!("AWS4{secret}").as_bytes(), &date);
    let k = hmac_sha256(&k, region);
    let k = hmac_sha256(&k, service);
    let k = hmac_sha256(&k, "aws4_request");
    let signature = hex(&hmac_sha256(&k, &to_sign));
    let mut out: Vec<(String, String)> = headers.into_iter().filter(|(k, _)| k != "host").collect();
    out.push((
        "authorization".into(),
        format!("AWS4-HMAC-SHA256 Credential={key_id}/{scope}, SignedHeaders={signed}, Signature={signature}"),
    ));
    out
}

impl BatchClient {
    /// The region from `AWS_REGION` / `AWS_DEFAULT_REGION`; the endpoint from
    /// `AWS_ENDPOINT_URL_BATCH`, then `AWS_ENDPOINT_URL`, else the public one.
    pub fn from_env() -> Result<Self, LaunchError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let region = var("AWS_REGION")
            .or_else(|| var("AWS_DEFAULT_REGION"))
            .ok_or_else(|| {
                LaunchError::Environment(
                    "--backend aws-batch needs a region: set AWS_REGION".into(),
                )
            })?;
        let endpoint = var("AWS_ENDPOINT_URL_BATCH")
            .or_else(|| var("AWS_ENDPOINT_URL"))
            .unwrap_or_else(|| format!("https://batch.{region}.amazonaws.com"));
        let endpoint = endpoint.trim_end_matches('/').to_string();
        // The S3 builder's credential chain, built for a placeholder bucket (no request
        // is made until a credential is asked for).
        let s3 = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name("mdf-credentials")
            .with_region(&region)
            .build()
            .map_err(|e| LaunchError::Environment(format!("AWS credentials: {e}")))?;
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .map_err(|e| LaunchError::Environment(format!("HTTP client: {e}")))?;
        Ok(BatchClient {
            endpoint,
            region,
            credentials: s3.credentials().clone(),
            http,
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
        let url = format!("{}/v1/submitjob", self.endpoint);
        let parsed = reqwest::Url::parse(&url)
            .map_err(|e| LaunchError::Environment(format!("AWS Batch endpoint {url}: {e}")))?;
        let host = match (parsed.host_str(), parsed.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            _ => {
                return Err(LaunchError::Environment(format!(
                    "AWS Batch endpoint {url}: no host"
                )));
            }
        };
        let c = self
            .credentials
            .get_credential()
            .await
            .map_err(|e| LaunchError::Environment(format!("AWS credentials: {e}")))?;
        let headers = sign_post(
            &host,
            parsed.path(),
            &body,
            &self.region,
            "batch",
            &c.key_id,
            &c.secret_key,
            c.token.as_deref(),
            now_ms,
        );
        let mut req = self.http.post(parsed).body(body);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let api = |status: Option<u16>, message: String| LaunchError::Api {
            api: "AWS Batch SubmitJob",
            url: url.clone(),
            status,
            message,
        };
        let resp = req.send().await.map_err(|e| api(None, e.to_string()))?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(api(
                Some(status.as_u16()),
                format!("queue {:?} failed ({status}): {text}", t.queue),
            ));
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Resp {
            job_id: String,
        }
        let r: Resp = serde_json::from_str(&text)
            .map_err(|e| api(Some(status.as_u16()), format!("answered {text:?}: {e}")))?;
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

    /// A known answer from an independent signer (botocore's `SigV4Auth` on the same
    /// request, timestamp and credentials).
    #[test]
    fn signature_matches_botocore() {
        let body = br#"{"jobName":"mdf-x","jobQueue":"q"}"#;
        // 2026-12-01T08:30:00Z
        let ms = 1_796_113_800_000;
        assert_eq!(amz_date(ms).0, "20261201T083000Z");
        let h = sign_post(
            "batch.eu-west-1.amazonaws.com",
            "/v1/submitjob",
            body,
            "eu-west-1",
            "batch",
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            Some("TOKEN123"),
            ms,
        );
        let auth = &h.iter().find(|(k, _)| k == "authorization").unwrap().1;
        assert_eq!(
            auth,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261201/eu-west-1/batch/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, \
             Signature=b1a296f2b87849d89ccde229d1cd74a8a4ee8b26eaacff921cfd0c73e478e698"
        );
        assert!(
            h.iter()
                .any(|(k, v)| k == "x-amz-security-token" && v == "TOKEN123")
        );
    }

    #[test]
    fn dates_across_leap_years() {
        assert_eq!(amz_date(0).0, "19700101T000000Z");
        assert_eq!(amz_date(951_782_400_000).1, "20000229"); // 2000-02-29
        assert_eq!(amz_date(1_709_251_199_000).0, "20240229T235959Z");
    }

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
