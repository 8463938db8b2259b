//! The job protocol: where every object of a job lives, the persisted records, the
//! storage primitives and the lease state machine. docs/PROTOCOL.md is the contract;
//! this module must never read record data or call operators.
pub mod io;
pub mod job;
pub mod lease;
pub mod probe;
pub mod records;

use crate::store::Uri;
use object_store::path::Path;

/// Paths of one job, relative to its store.
#[derive(Debug, Clone)]
pub struct JobPaths {
    /// `<root>/jobs/<id>` as a URI.
    pub job: Uri,
    /// Shard digits of each sharded phase, by name (docs/PROTOCOL.md §1): its leases
    /// and commits live one folder deeper, under the task id's first digits. Set from
    /// the plan ([`JobPaths::with_shards`]); empty for a job without sharded phases.
    shards: std::sync::Arc<std::collections::BTreeMap<String, usize>>,
}

impl JobPaths {
    pub fn new(job: Uri) -> Self {
        JobPaths {
            job,
            shards: Default::default(),
        }
    }
    /// These paths, knowing the plan's sharded phases.
    pub fn with_shards(mut self, phases: &[records::PhasePlan]) -> Self {
        self.shards = std::sync::Arc::new(
            phases
                .iter()
                .filter(|p| p.shard_digits > 0)
                .map(|p| (p.name.clone(), p.shard_digits as usize))
                .collect(),
        );
        self
    }
    /// Shard digits of `phase` (0: not sharded).
    pub fn shard_digits(&self, phase: &str) -> usize {
        self.shards.get(phase).copied().unwrap_or(0)
    }
    /// `<task>` of an unsharded phase, `<prefix>/<task>` of a sharded one.
    fn sharded(&self, phase: &str, task: &str) -> String {
        match self.shard_digits(phase) {
            0 => task.to_string(),
            k => format!("{}/{task}", task.get(..k).unwrap_or(task)),
        }
    }
    /// A sharded phase's shard of task manifests (docs/PROTOCOL.md §1).
    pub fn task_shard(&self, phase: &str, prefix: &str) -> Path {
        self.p(&format!("shards/{phase}/{prefix}.json"))
    }
    /// The commit records of one shard of a sharded phase.
    pub fn commits_shard(&self, phase: &str, prefix: &str) -> Path {
        self.p(&format!("commits/{phase}/{prefix}"))
    }
    /// The lease folders of one shard of a sharded phase.
    pub fn leases_shard(&self, phase: &str, prefix: &str) -> Path {
        self.p(&format!("leases/{phase}/{prefix}"))
    }
    /// The markers of a sharded phase's terminal shards.
    pub fn shards_done(&self, phase: &str) -> Path {
        self.p(&format!("done/{phase}"))
    }
    pub fn shard_done(&self, phase: &str, prefix: &str) -> Path {
        self.p(&format!("done/{phase}/{prefix}.json"))
    }
    /// The parts (a worker's own commit records) of one shard of a sharded phase.
    pub fn shard_parts(&self, phase: &str, prefix: &str) -> Path {
        self.p(&format!("parts/{phase}/{prefix}"))
    }
    pub fn shard_part(&self, phase: &str, prefix: &str, id: &str) -> Path {
        self.p(&format!("parts/{phase}/{prefix}/{id}.json"))
    }
    fn p(&self, rel: &str) -> Path {
        self.job.child(rel).path
    }
    pub fn job_json(&self) -> Path {
        self.p("job.json")
    }
    /// The marker a worker creates to take on committing a converged near-dedup
    /// stage's remaining label steps: one worker per stage does it.
    pub fn converged(&self, stage: &str) -> Path {
        self.p(&format!("converged/{stage}.json"))
    }
    pub fn tasks(&self, phase: &str) -> Path {
        self.p(&format!("tasks/{phase}"))
    }
    pub fn task(&self, phase: &str, task: &str) -> Path {
        self.p(&format!("tasks/{phase}/{task}.json"))
    }
    pub fn leases(&self, phase: &str) -> Path {
        self.p(&format!("leases/{phase}"))
    }
    pub fn lease_dir(&self, phase: &str, task: &str) -> Path {
        self.p(&format!("leases/{phase}/{}", self.sharded(phase, task)))
    }
    /// A task's backup lease (docs/PROTOCOL.md §4, "Backup attempts").
    pub fn backup_dir(&self, phase: &str, task: &str) -> Path {
        self.p(&format!("backups/{phase}/{task}"))
    }
    pub fn backups(&self, phase: &str) -> Path {
        self.p(&format!("backups/{phase}"))
    }
    /// The `k`-th of a phase's backup budget tokens.
    pub fn speculation_token(&self, phase: &str, k: u32) -> Path {
        self.p(&format!("speculation/{phase}/{k:05}.json"))
    }
    pub fn speculation(&self, phase: &str) -> Path {
        self.p(&format!("speculation/{phase}"))
    }
    pub fn slot_dir(&self, phase: &str, slot: u32) -> Path {
        self.p(&format!("slots/{phase}/{slot:05}"))
    }
    pub fn commits(&self, phase: &str) -> Path {
        self.p(&format!("commits/{phase}"))
    }
    pub fn commit(&self, phase: &str, task: &str) -> Path {
        self.p(&format!(
            "commits/{phase}/{}.json",
            self.sharded(phase, task)
        ))
    }
    pub fn staging(&self) -> Path {
        self.p("staging")
    }
    /// Checks that a file a commit record names lies in this job's staging area: a
    /// record is read back and its files copied and read, so a corrupt or forged one
    /// must not make a worker read or publish anything else (`..` is refused by the
    /// path type itself).
    pub fn check_staged(&self, uri: &str) -> Result<(), ForeignFile> {
        let foreign = || ForeignFile {
            uri: uri.to_string(),
            staging: self.job.child("staging").to_uri_string(),
        };
        let u = Uri::parse(uri).map_err(|_| foreign())?;
        let staging = self.staging();
        let inside = u.store == self.job.store
            && u.path
                .prefix_match(&staging)
                .is_some_and(|mut rest| rest.next().is_some());
        if inside { Ok(()) } else { Err(foreign()) }
    }
    /// [`check_staged`](Self::check_staged) for a file of a commit record that may have
    /// been reused from an earlier job (`--reuse`): then its file lies in that job's
    /// staging area, which is accepted when that job is a sibling of this one (same
    /// job root) or the one this job was submitted to reuse.
    pub fn check_file(
        &self,
        uri: &str,
        record_reused_from: Option<&str>,
        job_reused_from: Option<&str>,
    ) -> Result<(), ForeignFile> {
        let own = self.check_staged(uri);
        let Some(r) = record_reused_from else {
            return own;
        };
        if own.is_ok() {
            return own;
        }
        let Ok(ru) = Uri::parse(r) else { return own };
        fn parent(u: &Uri) -> (String, Vec<String>) {
            let parts: Vec<String> = u.path.parts().map(|p| p.as_ref().to_string()).collect();
            let n = parts.len().saturating_sub(1);
            (u.store.clone(), parts[..n].to_vec())
        }
        let trusted = Some(r) == job_reused_from || parent(&ru) == parent(&self.job);
        if trusted && JobPaths::new(ru).check_staged(uri).is_ok() {
            Ok(())
        } else {
            own
        }
    }

    pub fn attempt_dir(&self, phase: &str, task: &str, attempt: &str) -> Uri {
        self.job.child(&format!("staging/{phase}/{task}/{attempt}"))
    }
    pub fn workers(&self) -> Path {
        self.p("workers")
    }
    pub fn worker(&self, id: &str) -> Path {
        self.p(&format!("workers/{id}.json"))
    }
    pub fn submissions(&self) -> Path {
        self.p("submissions")
    }
    pub fn submission(&self, name: &str) -> Path {
        self.p(&format!("submissions/{name}.json"))
    }
}

/// The task id of a commit or task manifest path (`.../<task>.json`).
pub fn task_of(path: &Path) -> Option<String> {
    path.filename()?.strip_suffix(".json").map(str::to_string)
}

/// The ids of a phase's tasks, sorted. They come from the listing of its task
/// manifests, which submit wrote before `job.json`, and are checked against the number
/// the plan holds (`planned`): a store whose LIST lags behind its writes (several
/// S3-compatible ones do) may leave fresh manifests out, and a worker or finalize that
/// believed such a listing would skip those tasks. A short listing is retried with
/// backoff until it holds every planned task; one that is still short after about
/// two minutes, or that holds more tasks than planned, is an error.
pub async fn planned_task_ids(
    store: &dyn object_store::ObjectStore,
    paths: &JobPaths,
    plan: &records::PhasePlan,
    retry: &io::Retry,
) -> Result<Vec<String>, io::ProtoError> {
    planned_task_ids_within(
        store,
        paths,
        plan,
        retry,
        std::time::Duration::from_secs(120),
    )
    .await
}

async fn planned_task_ids_within(
    store: &dyn object_store::ObjectStore,
    paths: &JobPaths,
    plan: &records::PhasePlan,
    retry: &io::Retry,
    limit: std::time::Duration,
) -> Result<Vec<String>, io::ProtoError> {
    let (phase, planned) = (plan.name.as_str(), plan.tasks);
    if plan.shard_digits > 0 {
        return sharded_task_ids(store, paths, plan, retry).await;
    }
    let prefix = paths.tasks(phase);
    let mut waited = std::time::Duration::ZERO;
    let mut n = 0u32;
    loop {
        let mut v: Vec<String> = io::list_all(store, &prefix, retry)
            .await?
            .iter()
            .filter_map(|m| task_of(&m.location))
            .collect();
        v.sort();
        v.dedup();
        let found = v.len() as u64;
        let digest_ok = || {
            plan.task_digest
                .as_deref()
                .is_none_or(|d| d == records::task_digest(&v))
        };
        if found == planned && digest_ok() {
            return Ok(v);
        }
        if found > planned {
            return Err(io::ProtoError::Corrupt {
                path: prefix.to_string(),
                message: format!(
                    "{found} task manifests where the plan has {planned}: stray manifests (a crashed submit of another plan under this job id?); submit under a new job id"
                ),
            });
        }
        if waited >= limit {
            return Err(io::ProtoError::Incomplete {
                path: prefix.to_string(),
                message: format!(
                    "the listing shows {found} of the {planned} planned task manifests{} after {}s; the store's LIST lags, or manifests were deleted or replaced",
                    if found == planned {
                        " (not the planned ids)"
                    } else {
                        ""
                    },
                    waited.as_secs()
                ),
            });
        }
        let d = retry
            .delay(n.min(6))
            .max(std::time::Duration::from_millis(100));
        tracing::info!(
            phase,
            found,
            planned,
            "the listing of task manifests is short (a lagging LIST); listing again"
        );
        tokio::time::sleep(d).await;
        waited += d;
        n += 1;
    }
}

/// One shard of a sharded phase's task manifests (a GET: submit wrote every shard
/// before `job.json`, so a missing one is a damaged job, not a lagging store).
pub async fn read_task_shard(
    store: &dyn object_store::ObjectStore,
    paths: &JobPaths,
    phase: &str,
    prefix: &str,
    retry: &io::Retry,
) -> Result<records::TaskShard, io::ProtoError> {
    let path = paths.task_shard(phase, prefix);
    let shard: records::TaskShard =
        io::get_json(store, &path, retry)
            .await?
            .ok_or_else(|| io::ProtoError::Corrupt {
                path: path.to_string(),
                message: "a shard of the plan's task manifests is missing".into(),
            })?;
    let bad = shard.phase != phase
        || shard.prefix != prefix
        || shard
            .tasks
            .iter()
            .any(|t| t.phase != phase || !t.task_id.starts_with(prefix));
    if bad {
        return Err(io::ProtoError::Corrupt {
            path: path.to_string(),
            message: format!("holds tasks that are not of shard {phase}/{prefix}"),
        });
    }
    Ok(shard)
}

/// Every task id of a sharded phase, sorted, read from its shards and checked against
/// the plan's count and digest.
async fn sharded_task_ids(
    store: &dyn object_store::ObjectStore,
    paths: &JobPaths,
    plan: &records::PhasePlan,
    retry: &io::Retry,
) -> Result<Vec<String>, io::ProtoError> {
    use futures::{StreamExt, TryStreamExt};
    let phase = plan.name.as_str();
    let shards: Vec<records::TaskShard> =
        futures::stream::iter(shard_prefixes(plan.shard_digits as usize).map(
            |prefix| async move { read_task_shard(store, paths, phase, &prefix, retry).await },
        ))
        .buffered(32)
        .try_collect()
        .await?;
    let mut v: Vec<String> = shards
        .into_iter()
        .flat_map(|s| s.tasks.into_iter().map(|t| t.task_id))
        .collect();
    v.sort();
    v.dedup();
    let digest_ok = plan
        .task_digest
        .as_deref()
        .is_none_or(|d| d == records::task_digest(&v));
    if v.len() as u64 != plan.tasks || !digest_ok {
        return Err(io::ProtoError::Corrupt {
            path: paths.tasks(phase).to_string(),
            message: format!(
                "the shards of phase {phase} hold {} tasks{}, the plan {}",
                v.len(),
                if digest_ok {
                    ""
                } else {
                    " (not the planned ids)"
                },
                plan.tasks
            ),
        });
    }
    Ok(v)
}

/// A file a commit record names that this job may not read or publish: outside its
/// staging area (and not a trusted earlier job's). A corrupt or forged record; fatal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a commit record names {uri}, which is outside the job's staging area {staging}")]
pub struct ForeignFile {
    pub uri: String,
    pub staging: String,
}

/// The most hex digits a shard prefix has (65,536 shards).
pub const MAX_SHARD_DIGITS: u32 = 4;

/// Shard digits for a phase of `tasks` tasks and at most `shard_tasks` a shard: the
/// smallest `k` with `tasks <= shard_tasks * 16^k` (0: not sharded), at most
/// [`MAX_SHARD_DIGITS`].
pub fn shard_digits_for(tasks: u64, shard_tasks: u64) -> u32 {
    let mut k = 0;
    while k < MAX_SHARD_DIGITS && tasks > shard_tasks.max(1).saturating_mul(16u64.pow(k)) {
        k += 1;
    }
    k
}

/// Every shard prefix of `k` hex digits, in order.
pub fn shard_prefixes(k: usize) -> impl Iterator<Item = String> {
    (0..16usize.pow(k as u32)).map(move |i| match k {
        0 => String::new(),
        _ => format!("{i:0k$x}"),
    })
}

/// The id of a task that follows `upstream` one for one in a phase of fingerprint
/// `fp` with `k` shard digits: [`hash16`] of both; in a sharded phase (`k > 0`) its first
/// [`MAX_SHARD_DIGITS`] digits replaced by the upstream's (docs/PROTOCOL.md §2), so both
/// fall in the same shard whatever `k`, and the id does not change with `k` (with the
/// job's size).
pub fn follower_id(fp: &str, upstream: &str, k: usize) -> String {
    let h = hash16(&[fp, upstream]);
    let n = MAX_SHARD_DIGITS as usize;
    match upstream.get(..n) {
        Some(pre) if k > 0 => format!("{pre}{}", &h[n..]),
        _ => h,
    }
}

/// The first 16 hex digits of blake3 over length-prefixed parts: task ids. Workers
/// derive downstream task ids with this same function.
pub fn hash16(parts: &[&str]) -> String {
    let mut h = blake3::Hasher::new();
    for p in parts {
        h.update(&(p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    h.finalize().to_hex()[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn task_ids_are_believed_only_when_they_are_the_planned_ones() {
        use object_store::ObjectStoreExt;
        let store = object_store::memory::InMemory::new();
        let paths = JobPaths::new(Uri::parse("memory://t/jobs/j").unwrap());
        let plan: records::PhasePlan = serde_json::from_value(serde_json::json!({
            "name": "p00", "fingerprint": "f", "stages": [],
            "input_schema": {"fields": [], "metadata": {}},
            "output_schema": {"fields": [], "metadata": {}},
            "last": true, "gpu": false, "tasks": 2,
            "task_digest": records::task_digest(&["a", "b"]),
        }))
        .unwrap();
        let mut retry = io::Retry::new(crate::clock::Entropy::seeded(1));
        retry.base = std::time::Duration::from_millis(1);
        let put = |t: &str| {
            let p = paths.task("p00", t);
            let s = &store;
            async move { s.put(&p, "{}".into()).await.unwrap() }
        };
        let short = std::time::Duration::from_millis(300);
        put("a").await;
        put("stray").await;
        // Two manifests, as planned, but one is not a planned task (a lagging LIST
        // leaves b out): never believed.
        let e = planned_task_ids_within(&store, &paths, &plan, &retry, short)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("not the planned ids"), "{e}");
        put("b").await;
        let e = planned_task_ids_within(&store, &paths, &plan, &retry, short)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("stray"), "{e}");
        store.delete(&paths.task("p00", "stray")).await.unwrap();
        let ids = planned_task_ids_within(&store, &paths, &plan, &retry, short)
            .await
            .unwrap();
        assert_eq!(ids, ["a", "b"]);
    }

    #[test]
    fn shard_digits_follow_the_task_count_and_followers_keep_their_upstreams_shard() {
        assert_eq!(shard_digits_for(0, 1000), 0);
        assert_eq!(shard_digits_for(1000, 1000), 0);
        assert_eq!(shard_digits_for(1001, 1000), 1);
        assert_eq!(shard_digits_for(16_000, 1000), 1);
        assert_eq!(shard_digits_for(16_001, 1000), 2);
        assert_eq!(shard_digits_for(1_000_000, 1000), 3);
        assert_eq!(shard_digits_for(u64::MAX, 1), MAX_SHARD_DIGITS);
        assert_eq!(shard_prefixes(0).collect::<Vec<_>>(), [""]);
        let two: Vec<String> = shard_prefixes(2).collect();
        assert_eq!(
            (two.len(), two[0].as_str(), two[255].as_str()),
            (256, "00", "ff")
        );
        // Unsharded: the old derivation, unchanged; sharded: the upstream's prefix.
        assert_eq!(
            follower_id("fp", "0123456789abcdef", 0),
            hash16(&["fp", "0123456789abcdef"])
        );
        let f = follower_id("fp", "0123456789abcdef", 2);
        assert_eq!(&f[..4], "0123");
        assert_eq!(&f[4..], &hash16(&["fp", "0123456789abcdef"])[4..]);
        // The same id whatever the shard digits (the job's size), once sharded.
        assert_eq!(follower_id("fp", "0123456789abcdef", 1), f);
        assert_eq!(follower_id("fp", "0123456789abcdef", 4), f);
    }

    #[test]
    fn a_sharded_phase_keeps_its_leases_and_commits_in_shard_folders() {
        let plan = |name: &str, k: u32| -> records::PhasePlan {
            serde_json::from_value(serde_json::json!({
                "name": name, "fingerprint": "f", "stages": [],
                "input_schema": {"fields": [], "metadata": {}},
                "output_schema": {"fields": [], "metadata": {}},
                "last": true, "gpu": false, "tasks": 2, "shard_digits": k,
            }))
            .unwrap()
        };
        let p = JobPaths::new(Uri::parse("memory://t/jobs/j").unwrap())
            .with_shards(&[plan("p00", 2), plan("p01", 0)]);
        let t = "3fa0000000000000";
        assert_eq!(
            p.commit("p00", t).as_ref(),
            format!("jobs/j/commits/p00/3f/{t}.json")
        );
        assert_eq!(
            p.lease_dir("p00", t).as_ref(),
            format!("jobs/j/leases/p00/3f/{t}")
        );
        assert_eq!(
            p.commit("p01", t).as_ref(),
            format!("jobs/j/commits/p01/{t}.json")
        );
        assert_eq!(
            p.commit(records::FINALIZE, t).as_ref(),
            format!("jobs/j/commits/finalize/{t}.json")
        );
        // A job read without its plan (`JobPaths::new`) is laid out as before.
        let old = JobPaths::new(Uri::parse("memory://t/jobs/j").unwrap());
        assert_eq!(
            old.commit("p00", t).as_ref(),
            format!("jobs/j/commits/p00/{t}.json")
        );
    }

    #[tokio::test]
    async fn a_sharded_phase_s_ids_come_from_every_shard_checked_against_the_plan() {
        let store = object_store::memory::InMemory::new();
        let mut plan: records::PhasePlan = serde_json::from_value(serde_json::json!({
            "name": "p00", "fingerprint": "f", "stages": [],
            "input_schema": {"fields": [], "metadata": {}},
            "output_schema": {"fields": [], "metadata": {}},
            "last": true, "gpu": false, "tasks": 3, "shard_digits": 1,
            "task_digest": records::task_digest(&["0a", "0b", "fc"]),
        }))
        .unwrap();
        let paths = JobPaths::new(Uri::parse("memory://t/jobs/j").unwrap())
            .with_shards(std::slice::from_ref(&plan));
        let retry = io::Retry::new(crate::clock::Entropy::seeded(1));
        let task = |id: &str| records::TaskManifest {
            version: records::VERSION,
            job_id: "j".into(),
            phase: "p00".into(),
            task_id: id.into(),
            inputs: vec![],
            upstream: vec![],
        };
        let put = |prefix: &str, ids: &[&str]| {
            let shard = records::TaskShard {
                version: records::SHARDED_VERSION,
                job_id: "j".into(),
                phase: "p00".into(),
                prefix: prefix.into(),
                tasks: ids.iter().map(|t| task(t)).collect(),
            };
            let (s, path) = (&store, paths.task_shard("p00", prefix));
            async move {
                io::put_json(
                    s,
                    &path,
                    &shard,
                    &io::Retry::new(crate::clock::Entropy::seeded(2)),
                )
                .await
                .unwrap()
            }
        };
        for prefix in shard_prefixes(1) {
            match prefix.as_str() {
                "0" => put("0", &["0a", "0b"]).await,
                "f" => put("f", &["fc"]).await,
                p => put(p, &[]).await,
            }
        }
        let ids = planned_task_ids(&store, &paths, &plan, &retry)
            .await
            .unwrap();
        assert_eq!(ids, ["0a", "0b", "fc"]);
        // A shard holding a task of another shard is refused, whatever the digest.
        put("f", &["fc", "0c"]).await;
        let e = planned_task_ids(&store, &paths, &plan, &retry)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("not of shard p00/f"), "{e}");
        // A task missing from its shard is not believed.
        put("f", &[]).await;
        let e = planned_task_ids(&store, &paths, &plan, &retry)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("hold 2 tasks"), "{e}");
        // A missing shard is a damaged job, not a lagging listing.
        plan.tasks = 2;
        plan.task_digest = Some(records::task_digest(&["0a", "0b"]));
        use object_store::ObjectStoreExt;
        store.delete(&paths.task_shard("p00", "7")).await.unwrap();
        let e = planned_task_ids(&store, &paths, &plan, &retry)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
    }

    #[test]
    fn commit_record_files_must_be_staged_by_this_job_or_a_reused_sibling() {
        let p = JobPaths::new(Uri::parse("s3://b/root/jobs/new-1").unwrap());
        let own = "s3://b/root/jobs/new-1/staging/p00/t/a/part-00000.parquet";
        let sib = "s3://b/root/jobs/old-1/staging/p00/t/a/part-00000.parquet";
        assert!(p.check_staged(own).is_ok());
        assert!(p.check_staged(sib).is_err());
        assert!(p.check_staged("s3://b/root/jobs/new-1/job.json").is_err());
        assert!(p.check_staged("s3://b/root/jobs/new-1/staging").is_err());
        assert!(
            p.check_staged("s3://other/root/jobs/new-1/staging/x")
                .is_err()
        );
        assert!(p.check_staged("file:///etc/passwd").is_err());
        // Reused from a sibling job: its staging area is accepted.
        let old = Some("s3://b/root/jobs/old-1");
        assert!(p.check_file(sib, old, None).is_ok());
        assert!(p.check_file(own, old, None).is_ok());
        // A record claiming to be reused from elsewhere is not trusted...
        let far = Some("s3://b/elsewhere");
        assert!(
            p.check_file("s3://b/elsewhere/staging/x", far, None)
                .is_err()
        );
        assert!(
            p.check_file("file:///staging/x", Some("file:///"), None)
                .is_err()
        );
        // ...unless it is the job this one was submitted to reuse.
        assert!(p.check_file("s3://b/elsewhere/staging/x", far, far).is_ok());
        assert!(p.check_file("s3://b/elsewhere/other/x", far, far).is_err());
    }
}
