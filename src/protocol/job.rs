//! Loading a planned job: `job.json` read back and its spec rebuilt. Used by the
//! coordinator (status, resubmission) and by workers alike, so it lives here, below both.
use crate::protocol::JobPaths;
use crate::protocol::io::{ProtoError, Retry, get_json};
use crate::protocol::records::JobManifest;
use crate::spec::Spec;
use crate::store::{Registry, Uri};

/// A job as workers and status see it.
#[derive(Debug, Clone)]
pub struct LoadedJob {
    pub uri: Uri,
    pub paths: JobPaths,
    pub manifest: JobManifest,
    pub spec: Spec,
}

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("no job at {0} (no job.json; was it submitted?)")]
    NotFound(String),
    #[error("job {uri}: its spec no longer validates with this mdf: {errors}")]
    Spec {
        uri: String,
        errors: crate::spec::reader::SpecErrors,
    },
    #[error(transparent)]
    Proto(#[from] ProtoError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// Reads `job.json` and rebuilds the spec it was planned from.
pub async fn load_job(reg: &Registry, job_uri: &str, retry: &Retry) -> Result<LoadedJob, JobError> {
    let (store, uri) = reg.resolve(job_uri)?;
    let paths = JobPaths::new(uri.clone());
    let manifest: JobManifest = get_json(store.as_ref(), &paths.job_json(), retry)
        .await?
        .ok_or_else(|| JobError::NotFound(uri.to_uri_string()))?;
    let spec = Spec::from_value(manifest.spec.clone()).map_err(|errors| JobError::Spec {
        uri: uri.to_uri_string(),
        errors,
    })?;
    // A sharded phase's leases and commits live under its shards' folders.
    let paths = paths.with_shards(&manifest.phases);
    Ok(LoadedJob {
        uri,
        paths,
        manifest,
        spec,
    })
}
