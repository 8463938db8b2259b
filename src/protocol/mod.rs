//! The job protocol: where every object of a job lives, the persisted records, the
//! storage primitives and the lease state machine. docs/PROTOCOL.md is the contract;
//! this module must never read record data or call operators.
pub mod io;
pub mod lease;
pub mod records;

use crate::store::Uri;
use object_store::path::Path;

/// Paths of one job, relative to its store.
#[derive(Debug, Clone)]
pub struct JobPaths {
    /// `<root>/jobs/<id>` as a URI.
    pub job: Uri,
}

impl JobPaths {
    pub fn new(job: Uri) -> Self {
        JobPaths { job }
    }
    fn p(&self, rel: &str) -> Path {
        self.job.child(rel).path
    }
    pub fn job_json(&self) -> Path {
        self.p("job.json")
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
        self.p(&format!("leases/{phase}/{task}"))
    }
    pub fn slot_dir(&self, phase: &str, slot: u32) -> Path {
        self.p(&format!("slots/{phase}/{slot:05}"))
    }
    pub fn commits(&self, phase: &str) -> Path {
        self.p(&format!("commits/{phase}"))
    }
    pub fn commit(&self, phase: &str, task: &str) -> Path {
        self.p(&format!("commits/{phase}/{task}.json"))
    }
    pub fn staging(&self) -> Path {
        self.p("staging")
    }
    /// Checks that a file a commit record names lies in this job's staging area: a
    /// record is read back and its files copied and read, so a corrupt or forged one
    /// must not make a worker read or publish anything else (`..` is refused by the
    /// path type itself).
    pub fn check_staged(&self, uri: &str) -> Result<(), String> {
        let u = Uri::parse(uri).map_err(|e| e.to_string())?;
        let staging = self.staging();
        let inside = u.store == self.job.store
            && u.path
                .prefix_match(&staging)
                .is_some_and(|mut rest| rest.next().is_some());
        if inside {
            Ok(())
        } else {
            Err(format!(
                "a commit record names {uri}, which is outside the job's staging area {}",
                self.job.child("staging").to_uri_string()
            ))
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
}

/// The task id of a commit or task manifest path (`.../<task>.json`).
pub fn task_of(path: &Path) -> Option<String> {
    path.filename()?.strip_suffix(".json").map(str::to_string)
}
