//! `--backend k8s`: renders the Indexed Job of `manifests/k8s/` (the same files CI
//! validates with `kubernetes-validate --strict`) for one job: name, labels, worker
//! count, image, namespace and the worker's `--job` argument. `--apply` pipes the
//! result to `kubectl apply -f -` and records the submission; without it the manifest
//! is returned, to apply by hand.
use super::{Backend, Event, JobRef, LaunchError, LaunchOptions, Launched, record};
use crate::clock::{Clock, SystemClock};
use crate::protocol::records::Submission;
use serde_yaml_ng::Value;
use std::io::Write;
use std::process::Stdio;

pub struct K8s;

#[async_trait::async_trait(?Send)]
impl Backend for K8s {
    fn name(&self) -> &'static str {
        "k8s"
    }

    async fn launch(
        &self,
        job: &JobRef<'_>,
        o: &LaunchOptions,
        events: &dyn Fn(Event),
    ) -> Result<Launched, LaunchError> {
        let targets: Vec<K8sTarget> = o
            .classes(self.default_workers())
            .into_iter()
            .map(|(class, workers)| K8sTarget {
                workers,
                resources: class.into(),
                image: if class == "gpu" {
                    &o.gpu_image
                } else {
                    &o.image
                }
                .clone(),
                namespace: o.namespace.clone(),
            })
            .collect();
        let docs = targets
            .iter()
            .map(|t| render(job.uri, job.id, t))
            .collect::<Result<Vec<_>, _>>()?;
        let yaml = docs.join("---\n");
        if !o.apply {
            return Ok(Launched::Manifest(yaml));
        }
        apply(&yaml)?;
        let mut submitted = Vec::new();
        for t in &targets {
            let name = job_name(job.id, &t.resources);
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
            record(job.registry, job.uri, &s).await?;
            events(Event::Submitted(s.clone()));
            submitted.push(s);
        }
        Ok(Launched::Submitted(submitted))
    }
}

/// `kubectl apply -f -` of `yaml` (kubectl's output on stdout).
fn apply(yaml: &str) -> Result<(), LaunchError> {
    let io = |what: &str| {
        let what = what.to_string();
        move |error| LaunchError::Io { what, error }
    };
    let mut child = std::process::Command::new("kubectl")
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::inherit())
        .spawn()
        .map_err(io("running kubectl (is it installed and on PATH?)"))?;
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(yaml.as_bytes())
        .map_err(io("writing the manifest to kubectl"))?;
    let st = child.wait().map_err(io("waiting for kubectl"))?;
    if !st.success() {
        return Err(LaunchError::Kubectl(st));
    }
    Ok(())
}

pub const WORKER_CPU: &str = include_str!("../../manifests/k8s/worker-cpu.yaml");
pub const WORKER_GPU: &str = include_str!("../../manifests/k8s/worker-gpu.yaml");

/// One worker class to render.
#[derive(Debug, Clone)]
pub struct K8sTarget {
    pub workers: u32,
    /// `cpu` or `gpu`: picks the template and `mdf worker --resources`.
    pub resources: String,
    /// `None` keeps the template's image.
    pub image: Option<String>,
    pub namespace: String,
}

/// A DNS-1123 label (lowercase letters, digits, `-`; at most 63) naming the workers
/// of `job_id` of one class; long ids keep their end (the spec hash).
pub fn job_name(job_id: &str, resources: &str) -> String {
    let clean: String = job_id
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let room = 63 - "mdf-".len() - 1 - resources.len();
    let start = clean.len().saturating_sub(room);
    let id = clean[start..].trim_matches('-');
    format!("mdf-{id}-{resources}")
}

fn set(v: &mut Value, path: &[&str], x: Value) -> Result<(), LaunchError> {
    let mut cur = v;
    for (i, k) in path.iter().enumerate() {
        let m = cur.as_mapping_mut().ok_or_else(|| {
            LaunchError::Template(format!(
                "template: {} is not a mapping",
                path[..i].join(".")
            ))
        })?;
        if i + 1 == path.len() {
            m.insert(Value::from(*k), x);
            return Ok(());
        }
        cur = m
            .entry(Value::from(*k))
            .or_insert_with(|| Value::Mapping(Default::default()));
    }
    Ok(())
}

fn get_mut<'a>(v: &'a mut Value, path: &[&str]) -> Result<&'a mut Value, LaunchError> {
    let mut cur = v;
    for k in path {
        cur = cur
            .get_mut(*k)
            .ok_or_else(|| LaunchError::Template(format!("template has no {}", path.join("."))))?;
    }
    Ok(cur)
}

/// The Job manifest (YAML) for the workers of one class.
pub fn render(job_uri: &str, job_id: &str, t: &K8sTarget) -> Result<String, LaunchError> {
    let template = match t.resources.as_str() {
        "cpu" => WORKER_CPU,
        "gpu" => WORKER_GPU,
        other => {
            return Err(LaunchError::Refused(format!(
                "no worker template for resources {other:?}"
            )));
        }
    };
    if t.workers == 0 {
        return Err(LaunchError::Refused("--workers: at least 1 worker".into()));
    }
    let yaml_error = |e: serde_yaml_ng::Error| LaunchError::Template(format!("template: {e}"));
    let mut v: Value = serde_yaml_ng::from_str(template).map_err(yaml_error)?;
    let name = job_name(job_id, &t.resources);
    let label = job_name(job_id, "").trim_end_matches('-').to_string();
    set(&mut v, &["metadata", "name"], name.into())?;
    set(
        &mut v,
        &["metadata", "namespace"],
        t.namespace.clone().into(),
    )?;
    set(
        &mut v,
        &["metadata", "labels", "mdf.dev/job"],
        label.clone().into(),
    )?;
    set(
        &mut v,
        &["metadata", "annotations", "mdf.dev/job-uri"],
        job_uri.into(),
    )?;
    set(&mut v, &["spec", "completions"], t.workers.into())?;
    set(&mut v, &["spec", "parallelism"], t.workers.into())?;
    set(
        &mut v,
        &["spec", "template", "metadata", "labels", "mdf.dev/job"],
        label.into(),
    )?;
    let containers = get_mut(&mut v, &["spec", "template", "spec", "containers"])?;
    let c = containers
        .get_mut(0)
        .ok_or_else(|| LaunchError::Template("template has no container".into()))?;
    if let Some(img) = &t.image {
        set(c, &["image"], img.clone().into())?;
    }
    let args: Vec<Value> = ["worker", "--job", job_uri, "--resources", &t.resources]
        .into_iter()
        .map(Value::from)
        .collect();
    set(c, &["args"], Value::Sequence(args))?;
    if let Some(env) = c.get_mut("env").and_then(Value::as_sequence_mut) {
        for e in env.iter_mut() {
            if e.get("name").and_then(Value::as_str) == Some("MDF_JOB") {
                set(e, &["value"], job_uri.into())?;
            }
        }
    }
    serde_yaml_ng::to_string(&v).map_err(yaml_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_job_into_the_template() {
        let t = K8sTarget {
            workers: 16,
            resources: "gpu".into(),
            image: Some("123.dkr.ecr.us-east-1.amazonaws.com/mdf-worker-gpu:v1".into()),
            namespace: "curation".into(),
        };
        let y = render("s3://b/mdf/jobs/cc-0123456789ab", "cc-0123456789ab", &t).unwrap();
        let v: Value = serde_yaml_ng::from_str(&y).unwrap();
        assert_eq!(v["metadata"]["name"], "mdf-cc-0123456789ab-gpu");
        assert_eq!(v["metadata"]["namespace"], "curation");
        assert_eq!(v["spec"]["completions"], 16);
        assert_eq!(v["spec"]["parallelism"], 16);
        assert_eq!(v["spec"]["completionMode"], "Indexed");
        let c = &v["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            c["image"],
            "123.dkr.ecr.us-east-1.amazonaws.com/mdf-worker-gpu:v1"
        );
        assert_eq!(c["args"][2], "s3://b/mdf/jobs/cc-0123456789ab");
        assert_eq!(c["args"][4], "gpu");
        assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], 1);
        let env = c["env"].as_sequence().unwrap();
        assert!(
            env.iter()
                .any(|e| e["name"] == "MDF_JOB" && e["value"] == "s3://b/mdf/jobs/cc-0123456789ab")
        );
    }

    #[test]
    fn names_are_dns_labels() {
        let long = "A_Very.Long job name that goes on and on and on-0123456789ab";
        let n = job_name(long, "cpu");
        assert!(n.len() <= 63, "{n}");
        assert!(n.ends_with("0123456789ab-cpu"), "{n}");
        assert!(
            n.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
    }
}
