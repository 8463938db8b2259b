//! `--backend fleet`: workers on an EC2 Auto Scaling group of spot instances
//! (terraform/modules/fleet), no scheduler between them and the job.
//!
//! `mdf submit --backend fleet` tags the group with the job (`mdf-job` = the job URI)
//! and sets its desired capacity; each instance runs `mdf worker --fleet-group NAME`,
//! which reads the job from that tag, works until no task of its class is left, and
//! then terminates its own instance with the group's desired capacity decremented — so
//! the group drains to zero by itself as the job finishes. Submit never re-tags a group
//! that still has instances for another job (their decrements would shrink the new
//! job's capacity); a worker that finds its group re-tagged anyway (by hand) moves on
//! to the new job. Auto Scaling calls are the Query API, signed like the Batch
//! backend's ([`super::aws`]).
use super::aws::{AUTO_SCALING, AwsApi, FORM, query_body};
use super::imds::Imds;
use super::{Backend, Event, JobRef, LaunchError, LaunchOptions, Launched, record};
use crate::clock::{Clock, SystemClock};
use crate::protocol::records::Submission;
use crate::spec::Spec;
use serde::Deserialize;
use std::time::Duration;

/// The group tag that names the job its instances work on.
pub const JOB_TAG: &str = "mdf-job";
/// Auto Scaling tag values are at most 256 characters.
const MAX_TAG_VALUE: usize = 256;
const VERSION: &str = "2011-01-01";

pub struct Fleet;

#[async_trait::async_trait(?Send)]
impl Backend for Fleet {
    fn name(&self) -> &'static str {
        "fleet"
    }

    fn validate(&self, o: &LaunchOptions, job_root: &str, spec: &Spec) -> Result<(), LaunchError> {
        super::check_remote_paths(self.name(), job_root, spec)?;
        for (flag, g) in [("--group", &o.group), ("--gpu-group", &o.gpu_group)] {
            if g.is_empty() || g.len() > 255 {
                return Err(LaunchError::Refused(format!(
                    "{flag}: an Auto Scaling group name (1 to 255 characters)"
                )));
            }
        }
        Ok(())
    }

    fn describe(&self, s: &Submission) -> String {
        format!(
            "set Auto Scaling group {} to {} {} instances for job {}",
            s.id, s.workers, s.resources, s.name
        )
    }

    async fn launch(
        &self,
        job: &JobRef<'_>,
        o: &LaunchOptions,
        events: &dyn Fn(Event),
    ) -> Result<Launched, LaunchError> {
        if let Err(why) = tag_value_ok(job.uri) {
            return Err(LaunchError::Refused(format!(
                "--backend fleet: the job URI {:?} cannot be an Auto Scaling tag value: {why}",
                job.uri
            )));
        }
        // A job already complete needs no instances (they would boot and leave).
        if job_complete(job.registry, job.uri).await {
            events(Event::Warning(format!(
                "job {} is already complete: no instances started",
                job.id
            )));
            return Ok(Launched::Submitted(vec![]));
        }
        let asg = AutoScaling::from_env("--backend fleet", None)?;
        let classes = o.classes(self.default_workers());
        class_warnings(job, &classes, events).await;
        let targets: Vec<(&str, &str, u32)> = classes
            .into_iter()
            .map(|(class, n)| {
                let group = if class == "gpu" {
                    &o.gpu_group
                } else {
                    &o.group
                };
                (class, group.as_str(), n)
            })
            .collect();
        // Every group is checked before any is changed: a refusal changes nothing.
        let mut groups = Vec::new();
        for &(class, name, n) in &targets {
            let g = with_retries(|| asg.describe(name)).await?.ok_or_else(|| {
                LaunchError::Refused(format!(
                    "--backend fleet: no Auto Scaling group {name:?} in {} (terraform/modules/fleet creates one per worker class; --{}group names it)",
                    asg.api.region(),
                    if class == "gpu" { "gpu-" } else { "" }
                ))
            })?;
            // A group with capacity for another job is not taken over, even when that
            // job is complete: its instances are leaving, each decrementing the
            // desired capacity, and those decrements would land on this job's.
            if let Some(other) = g.job()
                && other != job.uri
                && (g.desired > 0 || !g.instances.is_empty())
            {
                return Err(LaunchError::Refused(format!(
                    "--backend fleet: Auto Scaling group {name} still has {} instances (desired {}) for job {other}; submit again once it has scaled to zero (its workers leave by themselves when that job is complete), or use another group",
                    g.instances.len(),
                    g.desired
                )));
            }
            groups.push((class, g, n));
        }
        let mut submitted = Vec::new();
        for (class, g, n) in groups {
            // Submitting the same job again (to resume, or to add capacity) never
            // shrinks its group: a scale-in would stop busy workers.
            let same = g.job() == Some(job.uri);
            let want = if same { n.max(g.desired) } else { n };
            let desired = want.min(g.max);
            if desired < want {
                events(Event::Warning(format!(
                    "Auto Scaling group {}: {want} {class} instances asked for, {desired} set (its max size)",
                    g.name
                )));
            }
            // The tag first: instances launched for the new capacity find the job.
            with_retries(|| asg.tag_job(&g.name, job.uri)).await?;
            with_retries(|| asg.set_desired(&g.name, desired)).await?;
            let s = Submission {
                version: 1,
                backend: self.name().into(),
                id: g.name.clone(),
                name: job.id.to_string(),
                queue: g.name.clone(),
                job_definition: g.launch_template.clone().unwrap_or_default(),
                workers: desired,
                resources: class.into(),
                submitted_ms: SystemClock.now_ms(),
            };
            record(job.registry, job.uri, &s).await?;
            events(Event::Submitted(s.clone()));
            submitted.push(s);
        }
        Ok(Launched::Submitted(submitted))
    }
}

/// Warns when a class of the job's phases has no workers among those being started
/// (they may come from elsewhere: a Batch queue, another fleet).
async fn class_warnings(job: &JobRef<'_>, classes: &[(&str, u32)], events: &dyn Fn(Event)) {
    let retry = crate::protocol::io::Retry::new(crate::clock::Entropy::from_os());
    let Ok(j) = crate::coordinator::load_job(job.registry, job.uri, &retry).await else {
        return;
    };
    let has = |c: &str| classes.iter().any(|(k, n)| *k == c && *n > 0);
    if j.manifest.phases.iter().any(|p| p.gpu) && !has("gpu") {
        events(Event::Warning(
            "the job has GPU phases and no --gpu-workers: start GPU workers elsewhere, or its CPU instances wait for them".into(),
        ));
    }
    if j.manifest.phases.iter().any(|p| !p.gpu) && !has("cpu") {
        events(Event::Warning(
            "the job has CPU phases (and a finalize) and no CPU --workers: start CPU workers elsewhere".into(),
        ));
    }
}

/// Whether an Auto Scaling tag value can hold `v`: at most 256 characters of letters,
/// digits, spaces and `_ . : / = + - @`.
pub fn tag_value_ok(v: &str) -> Result<(), String> {
    if v.chars().count() > MAX_TAG_VALUE {
        return Err(format!(
            "{} characters, more than {MAX_TAG_VALUE}; use a shorter --job-root",
            v.chars().count()
        ));
    }
    match v
        .chars()
        .find(|c| !(c.is_alphanumeric() || *c == ' ' || "_.:/=+-@".contains(*c)))
    {
        Some(c) => Err(format!("{c:?} is not allowed in tag values")),
        None => Ok(()),
    }
}

/// Whether every task of the job at `uri` is terminal; `false` when it cannot be read
/// (deleted, or in a bucket this caller cannot list): then it counts as unfinished.
async fn job_complete(reg: &crate::store::Registry, uri: &str) -> bool {
    let retry = crate::protocol::io::Retry::new(crate::clock::Entropy::from_os());
    match crate::coordinator::status::progress(reg, uri, &retry).await {
        Ok(phases) => phases.iter().all(|(_, done, total)| done >= total),
        Err(_) => false,
    }
}

/// An Auto Scaling group as `DescribeAutoScalingGroups` tells it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Group {
    pub name: String,
    pub min: u32,
    pub max: u32,
    pub desired: u32,
    pub instances: Vec<Instance>,
    pub tags: Vec<(String, String)>,
    /// The launch template (directly or through a mixed-instances policy).
    pub launch_template: Option<String>,
}

impl Group {
    /// The job the group's instances work on (its `mdf-job` tag).
    pub fn job(&self) -> Option<&str> {
        self.tags
            .iter()
            .find(|(k, _)| k == JOB_TAG)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Instance {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// `Pending`, `InService`, `Terminating`, ...
    pub state: String,
    pub health: String,
}

/// The Auto Scaling API of one region.
pub struct AutoScaling {
    api: AwsApi,
}

/// A Query API list (`<member>` elements).
#[derive(Deserialize)]
struct Members<T> {
    #[serde(default = "Vec::new")]
    member: Vec<T>,
}

impl<T> Default for Members<T> {
    fn default() -> Self {
        Members { member: Vec::new() }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct XmlDescribe {
    describe_auto_scaling_groups_result: XmlDescribeResult,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct XmlDescribeResult {
    #[serde(default)]
    auto_scaling_groups: Members<XmlGroup>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct XmlGroup {
    auto_scaling_group_name: String,
    min_size: u32,
    max_size: u32,
    desired_capacity: u32,
    #[serde(default)]
    instances: Members<XmlInstance>,
    #[serde(default)]
    tags: Members<XmlTag>,
    launch_template: Option<XmlTemplate>,
    mixed_instances_policy: Option<XmlMixed>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct XmlInstance {
    instance_id: String,
    #[serde(default)]
    instance_type: String,
    #[serde(default)]
    availability_zone: String,
    #[serde(default)]
    lifecycle_state: String,
    #[serde(default)]
    health_status: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct XmlTag {
    key: String,
    #[serde(default)]
    value: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct XmlTemplate {
    launch_template_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct XmlMixed {
    launch_template: Option<XmlMixedTemplate>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct XmlMixedTemplate {
    launch_template_specification: Option<XmlTemplate>,
}

/// The groups of a `DescribeAutoScalingGroups` answer.
pub fn parse_groups(xml: &str) -> Result<Vec<Group>, String> {
    let d: XmlDescribe = quick_xml::de::from_str(xml).map_err(|e| e.to_string())?;
    Ok(d.describe_auto_scaling_groups_result
        .auto_scaling_groups
        .member
        .into_iter()
        .map(|g| Group {
            name: g.auto_scaling_group_name,
            min: g.min_size,
            max: g.max_size,
            desired: g.desired_capacity,
            instances: g
                .instances
                .member
                .into_iter()
                .map(|i| Instance {
                    id: i.instance_id,
                    instance_type: i.instance_type,
                    zone: i.availability_zone,
                    state: i.lifecycle_state,
                    health: i.health_status,
                })
                .collect(),
            tags: g
                .tags
                .member
                .into_iter()
                .map(|t| (t.key, t.value))
                .collect(),
            launch_template: g
                .launch_template
                .and_then(|t| t.launch_template_name)
                .or_else(|| {
                    g.mixed_instances_policy
                        .and_then(|m| m.launch_template)
                        .and_then(|t| t.launch_template_specification)
                        .and_then(|t| t.launch_template_name)
                }),
        })
        .collect())
}

impl AutoScaling {
    /// `who` names the command in errors; `region` overrides the environment's (a
    /// worker on an instance takes the instance's).
    pub fn from_env(who: &str, region: Option<String>) -> Result<AutoScaling, LaunchError> {
        Ok(AutoScaling {
            api: AwsApi::from_env(&AUTO_SCALING, who, region)?,
        })
    }

    async fn call(
        &self,
        api: &'static str,
        action: &str,
        params: &[(String, String)],
    ) -> Result<String, LaunchError> {
        self.api
            .post(
                api,
                "/",
                FORM,
                query_body(action, VERSION, params),
                SystemClock.now_ms(),
            )
            .await
    }

    /// The group called `name`, or `None` if there is none.
    pub async fn describe(&self, name: &str) -> Result<Option<Group>, LaunchError> {
        const API: &str = "Auto Scaling DescribeAutoScalingGroups";
        let text = self
            .call(
                API,
                "DescribeAutoScalingGroups",
                &[("AutoScalingGroupNames.member.1".into(), name.into())],
            )
            .await?;
        let groups = parse_groups(&text).map_err(|e| self.api.bad_answer(API, &text, e))?;
        Ok(groups.into_iter().find(|g| g.name == name))
    }

    /// Tags the group with the job; instances launched from now on carry it too.
    pub async fn tag_job(&self, group: &str, job_uri: &str) -> Result<(), LaunchError> {
        let t = "Tags.member.1.";
        self.call(
            "Auto Scaling CreateOrUpdateTags",
            "CreateOrUpdateTags",
            &[
                (format!("{t}ResourceId"), group.into()),
                (format!("{t}ResourceType"), "auto-scaling-group".into()),
                (format!("{t}Key"), JOB_TAG.into()),
                (format!("{t}Value"), job_uri.into()),
                (format!("{t}PropagateAtLaunch"), "true".into()),
            ],
        )
        .await
        .map_err(|e| e.context(&format!("group {group}")))?;
        Ok(())
    }

    pub async fn set_desired(&self, group: &str, n: u32) -> Result<(), LaunchError> {
        self.call(
            "Auto Scaling SetDesiredCapacity",
            "SetDesiredCapacity",
            &[
                ("AutoScalingGroupName".into(), group.into()),
                ("DesiredCapacity".into(), n.to_string()),
                ("HonorCooldown".into(), "false".into()),
            ],
        )
        .await
        .map_err(|e| e.context(&format!("group {group}")))?;
        Ok(())
    }

    /// Terminates `instance`; with `decrement` the group's desired capacity drops by
    /// one (the instance is not replaced), without it the group launches a replacement.
    pub async fn terminate(&self, instance: &str, decrement: bool) -> Result<(), LaunchError> {
        self.call(
            "Auto Scaling TerminateInstanceInAutoScalingGroup",
            "TerminateInstanceInAutoScalingGroup",
            &[
                ("InstanceId".into(), instance.into()),
                (
                    "ShouldDecrementDesiredCapacity".into(),
                    decrement.to_string(),
                ),
            ],
        )
        .await
        .map_err(|e| e.context(&format!("instance {instance}")))?;
        Ok(())
    }
}

/// The groups of a job's fleet submissions as they are now, for `mdf status`: one
/// entry per group, the group or why it could not be described.
#[derive(Debug, serde::Serialize)]
pub struct FleetState {
    pub group: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now: Option<Group>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub async fn fleet_states(subs: &[Submission]) -> Vec<FleetState> {
    let mut groups: Vec<&str> = subs
        .iter()
        .filter(|s| s.backend == "fleet")
        .map(|s| s.id.as_str())
        .collect();
    groups.sort();
    groups.dedup();
    if groups.is_empty() {
        return vec![];
    }
    let asg = AutoScaling::from_env("mdf status", None);
    let mut out = Vec::new();
    for g in groups {
        let r = match &asg {
            Ok(a) => a.describe(g).await.and_then(|d| {
                d.ok_or_else(|| LaunchError::Environment("no such group (deleted?)".into()))
            }),
            Err(e) => Err(LaunchError::Environment(e.to_string())),
        };
        out.push(match r {
            Ok(now) => FleetState {
                group: g.to_string(),
                now: Some(now),
                error: None,
            },
            Err(e) => FleetState {
                group: g.to_string(),
                now: None,
                error: Some(e.to_string()),
            },
        });
    }
    out
}

/// `mdf status`'s lines for the fleets of the job at `job_uri`.
pub fn render_fleets(states: &[FleetState], job_uri: &str) -> String {
    let mut out = String::new();
    for f in states {
        let Some(g) = &f.now else {
            out += &format!(
                "fleet {}: cannot describe: {}\n",
                f.group,
                f.error.as_deref().unwrap_or("")
            );
            continue;
        };
        let working_on = match g.job() {
            Some(j) if j == job_uri => String::new(),
            Some(j) => format!(" (now tagged with another job: {j})"),
            None => " (no job tag)".into(),
        };
        out += &format!(
            "fleet {}: {} desired (min {}, max {}), {} instances{working_on}\n",
            g.name,
            g.desired,
            g.min,
            g.max,
            g.instances.len()
        );
        for i in &g.instances {
            out += &format!(
                "  {} {} {} {} {}\n",
                i.id, i.instance_type, i.zone, i.state, i.health
            );
        }
    }
    out
}

/// What a fleet worker does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Work on this job.
    Run(String),
    /// Terminate this instance: with `decrement`, the group shrinks by one (nothing
    /// left to do); without, the group replaces it (its capacity is at risk).
    Leave { decrement: bool },
    /// Exit and wait: the instance is being reclaimed anyway.
    Wait,
}

/// Why the last worker run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Not started yet.
    Start,
    /// Every task of `job` is terminal.
    Complete,
    /// A spot interruption notice (or SIGTERM): the instance goes away by itself.
    Reclaimed,
    /// A rebalance recommendation: the running task finished, no new one was taken.
    Rebalance,
}

/// The next step of a fleet worker after `ended` on `job` (the job it worked on),
/// given the group's current `mdf-job` tag. A group re-tagged with another job sends
/// its instances on to it; a group still (or no longer) tagged with a finished job
/// shrinks by one instance per worker, to zero.
pub fn next_step(ended: Ended, job: Option<&str>, tag: Option<&str>) -> Next {
    match ended {
        Ended::Reclaimed => Next::Wait,
        Ended::Rebalance => Next::Leave { decrement: false },
        Ended::Start | Ended::Complete => match tag {
            Some(t) if Some(t) != job || ended == Ended::Start => Next::Run(t.to_string()),
            _ => Next::Leave { decrement: true },
        },
    }
}

/// This instance, a member of an Auto Scaling group.
pub struct Member {
    pub group: String,
    pub instance_id: String,
    asg: AutoScaling,
}

impl Member {
    /// The instance's id and region from the metadata service (`AWS_REGION` wins).
    pub async fn discover(group: &str, imds: &Imds) -> Result<Member, LaunchError> {
        let env = |e: String| LaunchError::Environment(format!("--fleet-group: {e}"));
        let instance_id = imds.instance_id().await.map_err(env)?;
        let region = match std::env::var("AWS_REGION")
            .ok()
            .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
            .filter(|r| !r.is_empty())
        {
            Some(r) => r,
            None => imds.region().await.map_err(env)?,
        };
        Ok(Member {
            group: group.to_string(),
            instance_id,
            asg: AutoScaling::from_env("--fleet-group", Some(region))?,
        })
    }

    /// The job the group works on now (its `mdf-job` tag), retried through throttling
    /// and outages (the group must exist: a missing group is an error).
    pub async fn job(&self) -> Result<Option<String>, LaunchError> {
        let g = with_retries(|| self.asg.describe(&self.group)).await?;
        let g = g.ok_or_else(|| {
            LaunchError::Environment(format!(
                "--fleet-group: no Auto Scaling group {:?}",
                self.group
            ))
        })?;
        Ok(g.job().map(str::to_string))
    }

    /// Terminates this instance (see [`AutoScaling::terminate`]).
    pub async fn leave(&self, decrement: bool) -> Result<(), LaunchError> {
        with_retries(|| self.asg.terminate(&self.instance_id, decrement)).await
    }
}

/// Runs `f` until it succeeds or fails with an error not worth retrying; throttling
/// (HTTP 400 `Throttling` on the Query API), 5xx and unreachable endpoints are retried
/// for about three minutes: full-jitter backoff whose cap doubles from 1 s to 30 s, so
/// a fleet that starts or finishes at once does not retry in lockstep.
async fn with_retries<T, F, Fut>(f: F) -> Result<T, LaunchError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, LaunchError>>,
{
    let entropy = crate::clock::Entropy::from_os();
    let mut cap_ms = 1_000u64;
    for _ in 0..9 {
        match f().await {
            Err(e) if e.is_retryable() => {
                tracing::warn!(error = %e, "Auto Scaling call failed; retrying");
                tokio::time::sleep(Duration::from_millis(entropy.below(cap_ms) + 1)).await;
                cap_ms = (cap_ms * 2).min(30_000);
            }
            r => return r,
        }
    }
    f().await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of AWS's documented answer (and moto's): groups, instances, tags, a
    /// mixed-instances policy's launch template.
    #[test]
    fn describe_answers_parse() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeAutoScalingGroupsResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/">
  <DescribeAutoScalingGroupsResult>
    <AutoScalingGroups>
      <member>
        <AutoScalingGroupName>mdf-cpu</AutoScalingGroupName>
        <AutoScalingGroupARN>arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:x:autoScalingGroupName/mdf-cpu</AutoScalingGroupARN>
        <MixedInstancesPolicy>
          <LaunchTemplate>
            <LaunchTemplateSpecification>
              <LaunchTemplateId>lt-0123</LaunchTemplateId>
              <LaunchTemplateName>mdf-cpu-worker</LaunchTemplateName>
              <Version>$Latest</Version>
            </LaunchTemplateSpecification>
            <Overrides><member><InstanceType>c7i.4xlarge</InstanceType></member></Overrides>
          </LaunchTemplate>
        </MixedInstancesPolicy>
        <MinSize>0</MinSize>
        <MaxSize>100</MaxSize>
        <DesiredCapacity>2</DesiredCapacity>
        <Instances>
          <member>
            <InstanceId>i-0a1</InstanceId>
            <InstanceType>c7i.4xlarge</InstanceType>
            <AvailabilityZone>us-east-1a</AvailabilityZone>
            <LifecycleState>InService</LifecycleState>
            <HealthStatus>Healthy</HealthStatus>
            <ProtectedFromScaleIn>false</ProtectedFromScaleIn>
          </member>
          <member>
            <InstanceId>i-0b2</InstanceId>
            <InstanceType>m7i.4xlarge</InstanceType>
            <AvailabilityZone>us-east-1b</AvailabilityZone>
            <LifecycleState>Pending</LifecycleState>
            <HealthStatus>Healthy</HealthStatus>
          </member>
        </Instances>
        <Tags>
          <member>
            <ResourceId>mdf-cpu</ResourceId>
            <ResourceType>auto-scaling-group</ResourceType>
            <Key>mdf-job</Key>
            <Value>s3://b/mdf/jobs/cc-0123456789ab</Value>
            <PropagateAtLaunch>true</PropagateAtLaunch>
          </member>
        </Tags>
      </member>
      <member>
        <AutoScalingGroupName>empty</AutoScalingGroupName>
        <LaunchTemplate><LaunchTemplateName>plain</LaunchTemplateName></LaunchTemplate>
        <MinSize>0</MinSize><MaxSize>4</MaxSize><DesiredCapacity>0</DesiredCapacity>
        <Instances/>
        <Tags/>
      </member>
    </AutoScalingGroups>
  </DescribeAutoScalingGroupsResult>
  <ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>
</DescribeAutoScalingGroupsResponse>"#;
        let g = parse_groups(xml).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].min, g[0].max, g[0].desired), (0, 100, 2));
        assert_eq!(g[0].launch_template.as_deref(), Some("mdf-cpu-worker"));
        assert_eq!(g[0].job(), Some("s3://b/mdf/jobs/cc-0123456789ab"));
        assert_eq!(g[0].instances.len(), 2);
        assert_eq!(g[0].instances[1].id, "i-0b2");
        assert_eq!(g[0].instances[1].state, "Pending");
        assert_eq!(g[0].instances[0].instance_type, "c7i.4xlarge");
        assert_eq!(g[1].launch_template.as_deref(), Some("plain"));
        assert!(g[1].instances.is_empty() && g[1].job().is_none());
        let none = parse_groups(
            "<DescribeAutoScalingGroupsResponse><DescribeAutoScalingGroupsResult><AutoScalingGroups/></DescribeAutoScalingGroupsResult></DescribeAutoScalingGroupsResponse>",
        )
        .unwrap();
        assert!(none.is_empty());
        assert!(parse_groups("<ErrorResponse/>").is_err());
    }

    #[test]
    fn job_uris_must_fit_a_tag_value() {
        assert!(tag_value_ok("s3://my-bucket/mdf/jobs/cc-2024_51-0123456789ab").is_ok());
        assert!(tag_value_ok(&format!("s3://b/{}", "x".repeat(249))).is_ok());
        let e = tag_value_ok(&format!("s3://b/{}", "x".repeat(250))).unwrap_err();
        assert!(e.contains("257 characters"), "{e}");
        let e = tag_value_ok("s3://b/jobs/a,b").unwrap_err();
        assert!(e.contains("','"), "{e}");
        assert!(tag_value_ok("s3://b/jobs/a\nb").is_err());
    }

    #[test]
    fn fleet_workers_follow_the_groups_tag() {
        use Next::*;
        let (a, b) = (Some("s3://b/jobs/a"), Some("s3://b/jobs/b"));
        // Starting: the tagged job, or nothing to do.
        assert_eq!(
            next_step(Ended::Start, None, a),
            Run("s3://b/jobs/a".into())
        );
        assert_eq!(
            next_step(Ended::Start, None, None),
            Leave { decrement: true }
        );
        // A finished job: on to a newer one, else shrink the group.
        assert_eq!(
            next_step(Ended::Complete, a, b),
            Run("s3://b/jobs/b".into())
        );
        assert_eq!(next_step(Ended::Complete, a, a), Leave { decrement: true });
        assert_eq!(
            next_step(Ended::Complete, a, None),
            Leave { decrement: true }
        );
        // Interrupted: never shrink the group (the job still needs the capacity).
        assert_eq!(next_step(Ended::Reclaimed, a, a), Wait);
        assert_eq!(
            next_step(Ended::Rebalance, a, a),
            Leave { decrement: false }
        );
        // `--job` given and the same as the tag at start: run it.
        assert_eq!(next_step(Ended::Start, a, a), Run("s3://b/jobs/a".into()));
    }
}
