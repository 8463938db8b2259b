//! Publishing: the deterministic final names of committed files, and the copy that
//! puts them there. Only files listed in a commit record are ever published, so the
//! output prefix never holds an uncommitted attempt's file.
use crate::protocol::io::{ProtoError, Retry};
use crate::protocol::records::{CommitRecord, JobManifest, OutputFile};
use crate::store::{Registry, Uri};
use object_store::ObjectStoreExt;

/// (staged uri, published uri) pairs of a commit record, and the relative names
/// used in the output manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub from: String,
    pub to: String,
    pub rel: String,
    pub rows: u64,
    pub bytes: u64,
    pub blake3: String,
    pub kind: Kind,
    pub task: String,
}

/// What a published file is, for the output manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Data,
    Rejects,
    /// A side table of the stage so named.
    Table(String),
}

pub use crate::protocol::records::TABLES_DIR;

/// The files of a commit record to publish; refused if the record names a file
/// outside the job's staging area.
/// The last phase's outputs get the names `writer` (the job's output format) gives
/// them; the files it does not publish (a Lance job's `fragments.json`) are not.
pub fn targets(
    paths: &crate::protocol::JobPaths,
    job: &JobManifest,
    rec: &CommitRecord,
    writer: &dyn crate::io::write::Writer,
) -> Result<Vec<Target>, crate::protocol::ForeignFile> {
    for f in rec.staged_files() {
        paths.check_file(
            &f.uri,
            rec.reused_from.as_deref(),
            job.reused_from.as_deref(),
        )?;
    }
    let target = |f: &OutputFile, root: &str, rel: String, kind: Kind| Target {
        from: f.uri.clone(),
        to: format!("{root}/{rel}"),
        rel,
        rows: f.rows,
        bytes: f.bytes,
        blake3: f.blake3.clone(),
        kind,
        task: rec.task_id.clone(),
    };
    let mut out = Vec::new();
    let last = job.phases.last().map(|p| p.name.as_str()) == Some(rec.phase.as_str());
    if last {
        for (n, f) in rec.outputs.iter().enumerate() {
            if let Some(rel) = writer.published_name(&rec.task_id, n, &f.uri) {
                out.push(target(f, &job.output_uri, rel, Kind::Data));
            }
        }
    }
    for (n, f) in rec.rejects.iter().enumerate() {
        let rel = format!("{}-{}-{n:05}.parquet", rec.phase, rec.task_id);
        out.push(target(f, &job.rejects_uri, rel, Kind::Rejects));
    }
    // Numbered within each table, in the record's order.
    let mut seen: std::collections::BTreeMap<&str, usize> = Default::default();
    for t in &rec.tables {
        let n = seen.entry(t.table.as_str()).or_default();
        let rel = format!(
            "{TABLES_DIR}/{}/{}-{}-{:05}.parquet",
            t.table, rec.phase, rec.task_id, *n
        );
        *n += 1;
        out.push(target(
            &t.file,
            &job.output_uri,
            rel,
            Kind::Table(t.table.clone()),
        ));
    }
    Ok(out)
}

/// Copies one object, server-side when both ends are in the same store.
pub async fn copy(reg: &Registry, from: &str, to: &str, retry: &Retry) -> Result<(), ProtoError> {
    let fu = Uri::parse(from).map_err(|e| ProtoError::Corrupt {
        path: from.to_string(),
        message: e.to_string(),
    })?;
    let tu = Uri::parse(to).map_err(|e| ProtoError::Corrupt {
        path: to.to_string(),
        message: e.to_string(),
    })?;
    let src = reg.open(&fu).map_err(|e| ProtoError::Corrupt {
        path: from.to_string(),
        message: e.to_string(),
    })?;
    if fu.store == tu.store {
        return retry
            .run(|| src.copy(&fu.path, &tu.path))
            .await
            .map_err(|e| ProtoError::store(&fu.path, e));
    }
    let dst = reg.open(&tu).map_err(|e| ProtoError::Corrupt {
        path: to.to_string(),
        message: e.to_string(),
    })?;
    let bytes = retry
        .run(|| async { src.get(&fu.path).await?.bytes().await })
        .await
        .map_err(|e| ProtoError::store(&fu.path, e))?;
    retry
        .run(|| dst.put(&tu.path, bytes.clone().into()))
        .await
        .map(|_| ())
        .map_err(|e| ProtoError::store(&tu.path, e))
}
