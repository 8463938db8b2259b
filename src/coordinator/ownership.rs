//! Which prefixes a job may write into and sweep (docs/PROTOCOL.md §3, "Owned
//! prefixes"). Finalize deletes whatever no commit names under the output and rejects
//! prefixes, so before anything is written submit proves those prefixes are the job's
//! own: they overlap no input and no job directory, lie inside no other job's prefix,
//! and are empty (or `output.overwrite: true`, which replaces a previous job's output
//! but never reaches inside another job's). An [`OwnerMarker`] in each prefix then
//! records the owner; finalize sweeps only a prefix whose marker names its job.
use crate::protocol::io::{
    Created, ProtoError, Retry, create_bytes, decode, get_bytes, get_json, put_json,
};
use crate::protocol::records::{MANIFEST, OWNER_MARKER, OwnerMarker, VERSION};
use crate::spec::Spec;
use crate::spec::reader::{FieldError, SpecErrors};
use crate::store::{Registry, Uri, is_glob};
use bytes::Bytes;

/// Why a job may not write where its spec says: a refused prefix (named by its spec
/// field), or the store could not be read or written to find out.
#[derive(Debug, thiserror::Error)]
pub enum OwnershipError {
    #[error(transparent)]
    Spec(#[from] SpecErrors),
    #[error(transparent)]
    Proto(#[from] crate::protocol::io::ProtoError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Plan(#[from] super::plan::PlanError),
}

use futures::StreamExt;

/// Whether one prefix lies at, above or below the other (whole path segments).
pub fn overlaps(a: &Uri, b: &Uri) -> bool {
    a.store == b.store && (a.path.prefix_matches(&b.path) || b.path.prefix_matches(&a.path))
}

/// Whether `inner` is `outer` or lies below it.
fn within(inner: &Uri, outer: &Uri) -> bool {
    inner.store == outer.store && inner.path.prefix_matches(&outer.path)
}

/// The prefixes a job writes and sweeps, with the spec field naming each: the output,
/// and the rejects prefix unless it lies inside the output (the default `_rejects`).
pub fn owned_prefixes(spec: &Spec) -> Result<Vec<(Uri, &'static str)>, SpecErrors> {
    let parse = |s: &str, field: &'static str| {
        Uri::parse(s).map_err(|e| {
            SpecErrors(vec![FieldError {
                path: field.into(),
                message: e.to_string(),
            }])
        })
    };
    let out = parse(&spec.output.uri, "output.uri")?;
    let rej = parse(&spec.rejects.uri, "rejects.uri")?;
    // Side tables are published under `<output>/_tables/<stage>/` with the names
    // rejects files get (`<phase>-<task>-<n>.parquet`): a rejects prefix there would
    // publish two files to one key.
    if within(&rej, &out.child(crate::protocol::records::TABLES_DIR)) {
        return Err(SpecErrors(vec![FieldError {
            path: "rejects.uri".into(),
            message: format!(
                "inside the output's {}/, where side tables are published",
                crate::protocol::records::TABLES_DIR
            ),
        }]));
    }
    // Inside the output, rejects must sit under a name readers skip (`_…`, as the
    // default `<output>/_rejects`): `pyarrow.dataset(output)` would read them as data.
    if within(&rej, &out) {
        let below = rej
            .path
            .prefix_match(&out.path)
            .and_then(|mut rest| rest.next().map(|p| p.as_ref().to_string()));
        if !below.as_deref().is_some_and(|p| p.starts_with(['_', '.'])) {
            return Err(SpecErrors(vec![FieldError {
                path: "rejects.uri".into(),
                message: format!(
                    "{} is the output or a folder of it that readers of the dataset read: rejects would be read as records; use a name starting with _ or . (the default {}/_rejects) or a prefix outside the output",
                    rej.to_uri_string(),
                    out.to_uri_string()
                ),
            }]));
        }
    }
    let mut v = vec![(out.clone(), "output.uri")];
    if !within(&rej, &out) {
        v.push((rej, "rejects.uri"));
    }
    Ok(v)
}

/// The literal part of an input pattern: the URI itself, or for a glob the directory
/// before its first wildcard.
fn input_base(pattern: &str) -> Option<Uri> {
    if !is_glob(pattern) {
        return Uri::parse(pattern).ok();
    }
    let at = pattern.find(['*', '?', '['])?;
    let end = pattern[..at].rfind('/').map(|i| i + 1).unwrap_or(0);
    Uri::parse(if end == 0 { "." } else { &pattern[..end] }).ok()
}

fn marker_of(prefix: &Uri) -> Uri {
    prefix.child(OWNER_MARKER)
}

/// Refuses, naming the field, an output or rejects prefix that overlaps an input file
/// or pattern, the job root's `jobs/` directory, or another job's owned prefix; and a
/// non-empty one unless `output.overwrite: true` (which may replace a previous job's
/// output at exactly that prefix, never reach into another job's prefix below it).
pub async fn check(
    spec: &Spec,
    reg: &Registry,
    job_root: &Uri,
    job_uri: &Uri,
    inputs: &super::plan::InputFiles,
    retry: &Retry,
) -> Result<(), OwnershipError> {
    let mut errors = Vec::new();
    let jobs_dir = job_root.child("jobs");
    let prefixes = owned_prefixes(spec)?;
    for (prefix, field) in &prefixes {
        let shown = prefix.to_uri_string();
        let mut err = |m: String| {
            errors.push(FieldError {
                path: field.to_string(),
                message: m,
            })
        };
        if overlaps(prefix, &jobs_dir) {
            err(format!(
                "{shown} overlaps the job directories under {} (the job's own state would be swept as stray output)",
                jobs_dir.to_uri_string()
            ));
            continue;
        }
        let mut inside = None;
        for f in inputs.iter()? {
            if let Ok(u) = Uri::parse(&f?.uri)
                && within(&u, prefix)
            {
                inside = Some(u);
                break;
            }
        }
        if let Some(f) = inside {
            err(format!(
                "{shown} holds the input {}; outputs must not overlap the inputs",
                f.to_uri_string()
            ));
            continue;
        }
        // Inside an input that is read recursively (a directory URI, a `**` glob, a
        // crawl's base), a later run of the same spec would read the outputs as inputs.
        // A one-level glob (`data/*.jsonl`) does not reach `data/out/`.
        let patterns = spec
            .input
            .uris
            .iter()
            .filter(|p| !is_glob(p) || p.contains("**"))
            .filter_map(|p| input_base(p));
        let cc = spec
            .input
            .commoncrawl
            .as_ref()
            .and_then(|c| Uri::parse(&c.base).ok());
        if let Some(b) = patterns.chain(cc).find(|b| within(prefix, b)) {
            err(format!(
                "{shown} lies inside the inputs {}; outputs must not overlap the inputs",
                b.to_uri_string()
            ));
            continue;
        }
        // `output.overwrite` replaces a previous job's output, never a shared rejects
        // prefix (that job's rejects would be swept), and never a job still running.
        let overwrite = spec.output.overwrite && *field == "output.uri";
        match foreign_owner(reg, prefix, job_uri, retry).await? {
            Some((at, m)) if at == *prefix && overwrite && !finished(reg, &m, retry).await? => {
                err(format!(
                    "{shown} is the output of job {} ({}), which has not finished; output.overwrite replaces a finished job's output only: wait for it, or choose another prefix",
                    m.job_id, m.job_uri
                ));
                continue;
            }
            Some((at, m)) if at != *prefix || !overwrite => {
                let whose = if at == *prefix {
                    format!("{shown} is")
                } else {
                    format!("{shown} lies inside {}, which is", at.to_uri_string())
                };
                err(format!(
                    "{whose} owned by job {} ({}); every job needs prefixes of its own{}",
                    m.job_id,
                    m.job_uri,
                    if at == *prefix && *field == "output.uri" {
                        " (or set output.overwrite: true to replace that job's output)"
                    } else {
                        ""
                    }
                ));
                continue;
            }
            _ => {}
        }
        // Non-empty: refused unless overwrite; even then, never over another job's
        // prefix further down.
        let (store, _) = reg.resolve(&shown)?;
        let mut listing = store.list(Some(&prefix.path));
        let mut blocker: Option<String> = None;
        // Overwrite replaces an mdf job's output, never a folder of other files (a
        // mistyped `--output` must not sweep a home directory), nor files a user put
        // into an output after its job wrote it: every object must be the previous
        // output's (named by its `_manifest.json`), a marker, or an empty "folder"
        // object a console made. A prefix without a valid manifest may hold markers
        // only (a job that never came to exist).
        let previous = if overwrite {
            match previous_output(spec, reg, prefix, retry).await? {
                Ok(p) => p,
                Err(why) => {
                    err(format!("{shown} {why}"));
                    continue;
                }
            }
        } else {
            None
        };
        let shown_object = |path: &object_store::path::Path| {
            Uri {
                store: prefix.store.clone(),
                path: path.clone(),
            }
            .to_uri_string()
        };
        let not_empty = |object: &str| {
            format!(
                "{shown} is not empty (it holds {object}); choose an empty prefix{}",
                if *field == "output.uri" {
                    " or set output.overwrite: true"
                } else {
                    " (output.overwrite never applies to a rejects prefix of its own)"
                }
            )
        };
        let mut other: Option<String> = None;
        // Empty objects not yet known to be folders.
        let mut zero: Vec<object_store::path::Path> = Vec::new();
        while let Some(m) = listing.next().await {
            let m = m.map_err(|e| ProtoError::store(&prefix.path, e))?;
            if m.location.filename() == Some(OWNER_MARKER) {
                let at = Uri {
                    store: prefix.store.clone(),
                    path: m.location.clone(),
                };
                let here = m.location.prefix_match(&prefix.path).map(|r| r.count()) == Some(1);
                if let Some(t) = read_marker(reg, &at, retry).await?
                    && t.job_uri != job_uri.to_uri_string()
                    && !(here && overwrite)
                {
                    blocker = Some(format!(
                        "{shown} holds the output of job {} ({}, marker {}); every job needs prefixes of its own",
                        t.job_id,
                        t.job_uri,
                        at.to_uri_string()
                    ));
                    break;
                }
                continue;
            }
            // An empty "folder" object a console made (S3 lists `out/` as `out`): the
            // prefix's own, or one with objects under it (the listing is sorted, so
            // they come after it). Only an empty object no other key lies under is a
            // file.
            let loc = m.location.as_ref();
            zero.retain(|z| !loc.starts_with(&format!("{z}/")));
            if m.size == 0 && (m.location == prefix.path || loc.ends_with('/')) {
                continue;
            }
            let theirs = previous.as_ref().is_some_and(|p| p.names(&m.location));
            if m.size == 0 && !theirs {
                zero.push(m.location);
                continue;
            }
            if !theirs {
                other.get_or_insert_with(|| shown_object(&m.location));
            }
            if !overwrite {
                blocker = Some(not_empty(&shown_object(&m.location)));
                break;
            }
        }
        // Empty objects that held nothing are files like any other.
        let other = other.or_else(|| zero.first().map(&shown_object));
        if blocker.is_none()
            && !overwrite
            && let Some(o) = &other
        {
            blocker = Some(not_empty(o));
        }
        if blocker.is_none()
            && overwrite
            && let Some(o) = other
        {
            blocker = Some(match &previous {
                Some(p) => format!(
                    "{shown} holds files that job {} did not write (such as {o}); output.overwrite replaces only that job's output, and finalize would delete them: move them, or choose an empty prefix",
                    p.job_id
                ),
                None => format!(
                    "{shown} holds files no mdf job wrote (such as {o}); output.overwrite replaces only a finished job's output (a prefix with its {MANIFEST}), and finalize would delete them: choose an empty prefix"
                ),
            });
        }
        if let Some(m) = blocker {
            err(m);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SpecErrors(errors).into())
    }
}

/// The output a finished job left at a prefix, as its `_manifest.json` names it.
struct Previous {
    job_id: String,
    /// Object paths it names (data, side tables, and rejects inside the prefix).
    files: std::collections::BTreeSet<String>,
    /// The prefix's path when that output is a Lance dataset: Lance's own
    /// `_versions/`, `_transactions/`, `_deletions/`, `_indices/` and `data/*.lance`
    /// (rewritten by compaction) are the dataset's, whatever the manifest lists.
    lance: Option<String>,
}

/// The folders a Lance dataset writes at its root.
const LANCE_DIRS: [&str; 4] = ["_versions/", "_transactions/", "_deletions/", "_indices/"];

impl Previous {
    /// Whether `path` is one of its files, or a Lance dataset's own file.
    fn names(&self, path: &object_store::path::Path) -> bool {
        let p = path.as_ref();
        if let Some(dir) = &self.lance
            && let Some(rest) = p
                .strip_prefix(dir.as_str())
                .and_then(|r| r.strip_prefix('/'))
            && (LANCE_DIRS.iter().any(|d| rest.starts_with(d))
                || (rest.starts_with("data/") && rest.ends_with(".lance")))
        {
            return true;
        }
        self.files.contains(p)
    }
}

/// Reads `<prefix>/_manifest.json`; `None` when there is none, it is not an mdf
/// output manifest (another tool's file of that name proves nothing), or a marker at
/// the prefix names another job than it does (a manifest copied with the files).
/// `Err` (as a refusal) when the previous output is not a Lance dataset and this job
/// writes one: Lance's finalize keeps what is not its own, so the old files would
/// stay beside the new dataset.
async fn previous_output(
    spec: &Spec,
    reg: &Registry,
    prefix: &Uri,
    retry: &Retry,
) -> Result<Result<Option<Previous>, String>, ProtoError> {
    use crate::protocol::records::{JobManifest, OutputManifest};
    let Ok((store, _)) = reg.resolve(&prefix.to_uri_string()) else {
        return Ok(Ok(None));
    };
    // Keys as finalize publishes them: the prefix's text and the relative path.
    let key = |base: &Uri, rel: &str| {
        Uri::parse(&format!(
            "{}/{rel}",
            base.to_uri_string().trim_end_matches('/')
        ))
        .map(|u| u.path.to_string())
        .ok()
    };
    let at = prefix.child(MANIFEST);
    let Some(bytes) = get_bytes(store.as_ref(), &at.path, retry).await? else {
        return Ok(Ok(None));
    };
    let Ok(m) = serde_json::from_slice::<OutputManifest>(&bytes) else {
        return Ok(Ok(None));
    };
    if let Some(owner) = read_marker(reg, &marker_of(prefix), retry).await?
        && owner.job_id != m.job_id
    {
        return Ok(Ok(None));
    }
    // The previous job's format, from its job.json (a Lance job may have no data
    // file at all); from the data files' names when the job is gone.
    let stored_format = match reg.resolve(&m.job_uri) {
        Ok((s, u)) => get_json::<JobManifest>(
            s.as_ref(),
            &crate::protocol::JobPaths::new(u).job_json(),
            retry,
        )
        .await?
        .and_then(|j| {
            j.spec
                .pointer("/output/format")
                .and_then(|f| f.as_str())
                .map(str::to_string)
        }),
        Err(_) => None,
    };
    let was_lance = match stored_format {
        Some(f) => f == "lance",
        None => m.files.iter().any(|f| f.path.ends_with(".lance")),
    };
    let is_lance = spec.output.format == crate::spec::OutputFormat::Lance;
    if is_lance && !was_lance && !m.files.is_empty() {
        return Ok(Err(format!(
            "holds job {}'s {} output: a Lance dataset cannot replace it (its files would stay beside the dataset); choose an empty prefix",
            m.job_id,
            m.files
                .first()
                .and_then(|f| f.path.rsplit('.').next())
                .unwrap_or("other")
        )));
    }
    let mut files = std::collections::BTreeSet::new();
    files.insert(at.path.to_string());
    for f in m.files.iter().chain(m.tables.values().flatten()) {
        // An empty or `.` path would name the prefix itself.
        if !f.path.is_empty() && f.path != "." {
            files.extend(key(prefix, &f.path));
        }
    }
    if let Ok(r) = Uri::parse(&m.rejects_uri)
        && within(&r, prefix)
    {
        for f in &m.rejects {
            if !f.path.is_empty() && f.path != "." {
                files.extend(key(&r, &f.path));
            }
        }
    }
    Ok(Ok(Some(Previous {
        job_id: m.job_id,
        files,
        lance: was_lance.then(|| prefix.path.to_string()),
    })))
}

/// Whether the job a marker names has finished (its finalize task committed), or never
/// came to exist (a submit that crashed after writing the marker).
async fn finished(reg: &Registry, m: &OwnerMarker, retry: &Retry) -> Result<bool, ProtoError> {
    use crate::protocol::JobPaths;
    use crate::protocol::records::{FINALIZE, JobManifest};
    let Ok((store, uri)) = reg.resolve(&m.job_uri) else {
        return Ok(true);
    };
    let paths = JobPaths::new(uri);
    let Some(job) = get_json::<JobManifest>(store.as_ref(), &paths.job_json(), retry).await? else {
        return Ok(true);
    };
    Ok(get_bytes(
        store.as_ref(),
        &paths.commit(FINALIZE, &job.finalize_task),
        retry,
    )
    .await?
    .is_some())
}

async fn read_marker(
    reg: &Registry,
    at: &Uri,
    retry: &Retry,
) -> Result<Option<OwnerMarker>, ProtoError> {
    let Ok((store, _)) = reg.resolve(&at.to_uri_string()) else {
        return Ok(None);
    };
    get_json(store.as_ref(), &at.path, retry).await
}

/// The nearest marker at or above `prefix` that names another job, with the prefix
/// it marks.
async fn foreign_owner(
    reg: &Registry,
    prefix: &Uri,
    job_uri: &Uri,
    retry: &Retry,
) -> Result<Option<(Uri, OwnerMarker)>, ProtoError> {
    let parts: Vec<String> = prefix
        .path
        .parts()
        .map(|p| p.as_ref().to_string())
        .collect();
    for n in (0..=parts.len()).rev() {
        let at = Uri {
            store: prefix.store.clone(),
            path: object_store::path::Path::from_iter(parts[..n].iter().map(String::as_str)),
        };
        if let Some(m) = read_marker(reg, &marker_of(&at), retry).await?
            && m.job_uri != job_uri.to_uri_string()
        {
            return Ok(Some((at, m)));
        }
    }
    Ok(None)
}

/// Writes this job's marker into each prefix it owns (create-only; the same job's
/// marker from a crashed earlier submit is fine; with `output.overwrite: true` a
/// previous job's marker at the prefix itself is replaced).
pub async fn write_markers(
    spec: &Spec,
    reg: &Registry,
    job_id: &str,
    job_uri: &Uri,
    retry: &Retry,
) -> Result<(), OwnershipError> {
    for (prefix, field) in owned_prefixes(spec)? {
        let marker = OwnerMarker {
            version: VERSION,
            job_id: job_id.to_string(),
            job_uri: job_uri.to_uri_string(),
            role: if field == "output.uri" {
                "output".into()
            } else {
                "rejects".into()
            },
        };
        let at = marker_of(&prefix);
        let (store, _) = reg.resolve(&at.to_uri_string())?;
        let body = Bytes::from(serde_json::to_vec_pretty(&marker).expect("json"));
        if let Created::Theirs(b) =
            create_bytes(store.as_ref(), &at.path, body, None, retry).await?
        {
            let other: OwnerMarker = decode(&at.path, &b)?;
            if other.job_uri != marker.job_uri {
                if !(spec.output.overwrite && field == "output.uri") {
                    return Err(SpecErrors(vec![FieldError {
                        path: field.into(),
                        message: format!(
                            "{} was taken by job {} ({}) while this job was being submitted",
                            prefix.to_uri_string(),
                            other.job_id,
                            other.job_uri
                        ),
                    }])
                    .into());
                }
                put_json(store.as_ref(), &at.path, &marker, retry).await?;
            } else if other != marker {
                put_json(store.as_ref(), &at.path, &marker, retry).await?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Uri {
        Uri::parse(s).unwrap()
    }

    #[test]
    fn overlap_is_by_whole_segments_and_store() {
        assert!(overlaps(&u("s3://b/out"), &u("s3://b/out/x")));
        assert!(overlaps(&u("s3://b/out/x"), &u("s3://b/out")));
        assert!(overlaps(&u("s3://b"), &u("s3://b/in")));
        assert!(overlaps(&u("s3://b/out"), &u("s3://b/out")));
        assert!(!overlaps(&u("s3://b/out"), &u("s3://b/output")));
        assert!(!overlaps(&u("s3://b/out"), &u("s3://c/out")));
        assert!(!overlaps(&u("s3://b/a"), &u("s3://b/b")));
    }

    #[test]
    fn input_base_is_the_literal_directory_of_a_glob() {
        assert_eq!(input_base("s3://b/in/*.jsonl"), Some(u("s3://b/in")));
        assert_eq!(input_base("s3://b/in/x/**/a?.gz"), Some(u("s3://b/in/x")));
        assert_eq!(
            input_base("s3://b/in/a.jsonl"),
            Some(u("s3://b/in/a.jsonl"))
        );
    }
}
