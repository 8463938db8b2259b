//! The finalize task (docs/PROTOCOL.md §6): publish any committed file still missing
//! from the output, write `_manifest.json` listing exactly the committed files,
//! delete every other object under the output and rejects prefixes, and remove staged
//! attempt directories that no commit references (the janitor).
use super::WorkerCtx;
use super::publish::{self, Kind, TABLES_DIR, Target};
use crate::protocol::io::{get_json, list_all, put_json};
use crate::protocol::records::{
    CommitRecord, FailedTask, ManifestFile, OWNER_MARKER, OutputFile, OutputManifest, OwnerMarker,
    TaskStats, TaskStatus, VERSION,
};
use crate::store::{Registry, Uri};
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub use crate::protocol::records::MANIFEST;

pub async fn run(
    ctx: &Arc<WorkerCtx>,
    reg: &Registry,
) -> Result<(Vec<OutputFile>, TaskStats), String> {
    let job = &ctx.job;
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let store = reg.open(&job.uri).map_err(|e| err(&e))?;
    // Every planned task's commit record, read by key: a listing of `commits/` may lag
    // behind the store's writes and leave a committed task out, whose published files
    // the sweep below would then delete.
    let mut records: Vec<CommitRecord> = Vec::new();
    for (pi, p) in job.manifest.phases.iter().enumerate() {
        // A sharded phase's records, a shard at a time, from its done markers.
        if p.shard_digits > 0 {
            records.extend(super::shards::done_records(&store, ctx, p).await?);
            continue;
        }
        let ids = ctx.task_ids(pi);
        if ids.len() as u64 != p.tasks {
            return Err(format!(
                "phase {}: the worker knows {} of its {} planned tasks",
                p.name,
                ids.len(),
                p.tasks
            ));
        }
        let recs: Vec<CommitRecord> = futures::stream::iter(ids.into_iter().map(|t| {
            let store = store.clone();
            let retry = ctx.retry.clone();
            let path = job.paths.commit(&p.name, &t);
            async move {
                match get_json::<CommitRecord>(store.as_ref(), &path, &retry).await {
                    Ok(Some(r)) => Ok(r),
                    Ok(None) => Err(format!(
                        "task {}/{t} has no commit record although its phase is complete",
                        p.name
                    )),
                    Err(e) => Err(e.to_string()),
                }
            }
        }))
        .buffered(32)
        .try_collect()
        .await?;
        records.extend(recs);
    }
    let writer = crate::io::write::writer(job.spec.output.format).map_err(|e| err(&e))?;
    // A writer's own dataset under the output (Lance): only its data folder is listed.
    let dataset = writer.dataset_dir();
    let managed = dataset.is_some();
    // Dolma output stamps records with the job's submit time (`added`): another job's
    // file of the same name and size is not this job's, so every file is copied.
    let stamped = job
        .spec
        .output
        .jsonl
        .as_ref()
        .is_some_and(|j| j.layout == crate::spec::JsonlLayout::Dolma);
    let mut targets: Vec<Target> = Vec::new();
    let mut failed = Vec::new();
    let mut stats = TaskStats::default();
    let last = job
        .manifest
        .phases
        .last()
        .map(|p| p.name.clone())
        .unwrap_or_default();
    for r in &records {
        match r.status {
            TaskStatus::Committed => targets.extend(
                publish::targets(&job.paths, &job.manifest, r, writer)
                    .map_err(|e| format!("{}/{}: {e}", r.phase, r.task_id))?,
            ),
            TaskStatus::Failed => failed.push(FailedTask {
                phase: r.phase.clone(),
                task: r.task_id.clone(),
                error: r.error.clone().unwrap_or_default(),
            }),
        }
        if r.phase == last {
            stats.records_out += r.stats.records_out;
        }
        stats.rejected += r.stats.rejected;
    }

    // Publish what is missing; delete what no commit names.
    // By destination, the size its committed file has: an object already there counts
    // as published only at that size (one of another job's, left by an overwrite under
    // the same name, is copied over).
    let wanted: std::collections::BTreeMap<String, u64> =
        targets.iter().map(|t| (t.to.clone(), t.bytes)).collect();
    let out_uri = Uri::parse(&job.manifest.output_uri).map_err(|e| err(&e))?;
    let rej_uri = Uri::parse(&job.manifest.rejects_uri).map_err(|e| err(&e))?;
    let mut existing = BTreeSet::new();
    // (prefix, sweep): what is there is not copied again; with sweep, what no commit
    // names is deleted. A Lance dataset's own files (versions, data of earlier
    // versions) are Lance's to clean up: only its `data/` is listed, to find the files
    // the tasks already published (a second copy is wasted work on S3, and on a local
    // store leaves a staging link behind), and only the rejects prefix is swept.
    //
    // A prefix is swept only when it is provably this job's: its owner marker (written
    // by submit after checking that it overlaps no input, job or other job's prefix)
    // names this job. Jobs submitted before the markers sweep their output prefix only
    // (submit checked it was empty or `overwrite`), never a separate rejects prefix.
    let rej_in_out = rej_uri.store == out_uri.store && rej_uri.path.prefix_matches(&out_uri.path);
    let me = job.uri.to_uri_string();
    // The job a prefix's owner marker names, if it has one.
    let owner_of = |prefix: Uri| {
        let (reg, retry) = (reg.clone(), ctx.retry.clone());
        async move {
            let s = reg.open(&prefix).map_err(|e| err(&e))?;
            let at = prefix.child(OWNER_MARKER).path;
            let m = get_json::<OwnerMarker>(s.as_ref(), &at, &retry)
                .await
                .map_err(|e| err(&e))?;
            Ok::<Option<String>, String>(m.map(|m| m.job_uri))
        }
    };
    let marks_us = |prefix: Uri| {
        let (owner_of, me) = (&owner_of, me.clone());
        async move { Ok::<bool, String>(owner_of(prefix).await?.is_some_and(|o| o == me)) }
    };
    // The other job a prefix's marker names: it has taken the prefix (`overwrite`
    // after this job finished, while a late worker of this one runs its finalize
    // again), and gets nothing of this job's. Checked for every job, those planned
    // before owner markers included: a marker naming another job is proof enough. A
    // prefix without a marker (a user removed it) is published into, never swept.
    let taken = |prefix: Uri| {
        let (owner_of, me) = (&owner_of, me.clone());
        async move { Ok::<Option<String>, String>(owner_of(prefix).await?.filter(|o| *o != me)) }
    };
    let refuse = |prefix: &Uri, other: &str| {
        format!(
            "{} belongs to job {other} now (its owner marker names it): nothing of this job is published there",
            prefix.to_uri_string()
        )
    };
    // The prefixes this job publishes into whose marker each has.
    let published: Vec<&Uri> = if rej_in_out {
        vec![&out_uri]
    } else {
        vec![&out_uri, &rej_uri]
    };
    let mut owners = Vec::new();
    for prefix in &published {
        let owner = owner_of((*prefix).clone()).await?;
        if let Some(other) = owner.as_ref().filter(|o| **o != me) {
            return Err(refuse(prefix, other));
        }
        owners.push(owner);
    }
    let (sweep_out, sweep_rej) = if job.manifest.owner_markers {
        let out_ours = owners[0].is_some();
        (out_ours, owners.get(1).map_or(out_ours, Option::is_some))
    } else {
        (true, rej_in_out)
    };
    if !sweep_out || !sweep_rej {
        tracing::warn!(
            output = %out_uri.to_uri_string(),
            rejects = %rej_uri.to_uri_string(),
            sweep_out,
            sweep_rej,
            "a prefix does not carry this job's owner marker: nothing in it is deleted"
        );
    }
    // (prefix, sweep, the prefix whose marker owns it)
    let mut prefixes = match dataset {
        // The side tables beside a dataset: listed and swept as the output would be.
        Some(dir) => vec![
            (out_uri.child(dir), false, out_uri.clone()),
            (out_uri.child(TABLES_DIR), sweep_out, out_uri.clone()),
        ],
        None => vec![(out_uri.clone(), sweep_out, out_uri.clone())],
    };
    if managed || !rej_in_out {
        let owner = if rej_in_out {
            out_uri.clone()
        } else {
            rej_uri.clone()
        };
        prefixes.push((rej_uri.clone(), sweep_rej, owner));
    }
    let manifest_uri = out_uri.child(MANIFEST).to_uri_string();
    for (prefix, sweep, owner) in &prefixes {
        let s = reg.open(prefix).map_err(|e| err(&e))?;
        let listed = list_all(s.as_ref(), &prefix.path, &ctx.retry)
            .await
            .map_err(|e| err(&e))?;
        // A subtree with an owner marker of its own is another job's prefix (ours sit
        // at the owned prefixes themselves): nothing in it is ever deleted.
        let nested: Vec<Path> = listed
            .iter()
            .filter(|m| m.location.filename() == Some(OWNER_MARKER))
            .filter_map(|m| {
                let parts: Vec<_> = m.location.parts().collect();
                let parent = Path::from_iter(parts[..parts.len() - 1].iter().cloned());
                (parent != prefix.path).then_some(parent)
            })
            .collect();
        // The marker is read again just before deleting: the prefix may have changed
        // hands (an overwrite) while this task listed it.
        let sweep = *sweep
            && if job.manifest.owner_markers {
                marks_us(owner.clone()).await?
            } else {
                taken(owner.clone()).await?.is_none()
            };
        for m in listed {
            if nested.iter().any(|n| m.location.prefix_matches(n)) {
                continue;
            }
            let u = Uri {
                store: prefix.store.clone(),
                path: m.location.clone(),
            }
            .to_uri_string();
            // A rejects prefix at or above a Lance dataset never sweeps the dataset
            // (the side tables beside it are the job's).
            let lances = managed
                && m.location.prefix_matches(&out_uri.path)
                && !m.location.prefix_matches(&out_uri.child(TABLES_DIR).path)
                && !(rej_uri.store == out_uri.store
                    && rej_uri.path.prefix_matches(&out_uri.path)
                    && rej_uri.path != out_uri.path);
            if let Some(&bytes) = wanted.get(&u) {
                if m.size == bytes && !stamped {
                    existing.insert(u);
                }
            } else if sweep
                && u != manifest_uri
                && m.location.filename() != Some(OWNER_MARKER)
                && !lances
            {
                tracing::info!(object = %u, "removing an object under the output that no commit names");
                let _ = ctx.retry.run(|| s.delete(&m.location)).await;
            }
        }
    }
    let missing: Vec<(String, String)> = targets
        .iter()
        .filter(|t| !existing.contains(&t.to))
        .map(|t| (t.from.clone(), t.to.clone()))
        .collect();
    // Again after the listing and the sweep (minutes, on a large output): the closer
    // to the copies, the smaller the window for another job to take a prefix.
    if !missing.is_empty() {
        for prefix in &published {
            if let Some(other) = taken((*prefix).clone()).await? {
                return Err(refuse(prefix, &other));
            }
        }
    }
    let retry = ctx.retry.clone();
    futures::stream::iter(missing.into_iter().map(|(from, to)| {
        let (reg, retry) = (reg.clone(), retry.clone());
        async move { publish::copy(&reg, &from, &to, &retry).await }
    }))
    .buffer_unordered(16)
    .try_collect::<Vec<()>>()
    .await
    .map_err(|e| err(&e))?;

    let schema = &job
        .manifest
        .phases
        .last()
        .ok_or("the job has no phases")?
        .output_schema;
    let staged = records
        .iter()
        .filter(|r| r.phase == last && r.status == TaskStatus::Committed)
        .flat_map(|r| r.outputs.iter())
        .collect();
    let mut published: Vec<crate::io::write::Published> = targets
        .iter()
        .filter(|t| t.kind == Kind::Data)
        .map(|t| crate::io::write::Published {
            uri: t.to.clone(),
            rows: t.rows,
            bytes: t.bytes,
        })
        .collect();
    published.sort_by(|a, b| a.uri.cmp(&b.uri));
    let job_uri = job.uri.to_uri_string();
    let commit = crate::io::write::CommitCtx {
        registry: reg,
        retry: &ctx.retry,
        output: &out_uri,
        schema,
        staged,
        published,
        job_uri: &job_uri,
        iceberg: job.spec.output.iceberg.as_ref(),
    };
    // A writer's commit may replace and clean up what is under the output (Lance
    // overwrites the dataset and removes old versions): only while this job owns it,
    // re-read now, as before a sweep (another job may have taken it with `overwrite`).
    let owns_output = taken(out_uri.clone()).await?.is_none();
    if !owns_output {
        tracing::warn!(output = %out_uri.to_uri_string(), "the output belongs to another job now; its dataset is not committed over");
    } else if let Some(version) = writer.commit(commit).await.map_err(|e| err(&e))? {
        tracing::info!(dataset = %out_uri.to_uri_string(), format = writer.name(), version, "committed the output dataset");
    }

    let file = |t: &Target| ManifestFile {
        path: t.rel.clone(),
        rows: t.rows,
        bytes: t.bytes,
        blake3: t.blake3.clone(),
        task: t.task.clone(),
    };
    let of = |k: &Kind| -> Vec<ManifestFile> {
        let mut v: Vec<ManifestFile> = targets.iter().filter(|t| t.kind == *k).map(file).collect();
        v.sort_by(|a, b| a.path.cmp(&b.path));
        v
    };
    let (files, rejects) = (of(&Kind::Data), of(&Kind::Rejects));
    let mut tables: BTreeMap<String, Vec<ManifestFile>> = BTreeMap::new();
    for t in &targets {
        if let Kind::Table(name) = &t.kind {
            tables.entry(name.clone()).or_default().push(file(t));
        }
    }
    for v in tables.values_mut() {
        v.sort_by(|a, b| a.path.cmp(&b.path));
    }
    let manifest = OutputManifest {
        version: VERSION,
        job_id: job.manifest.job_id.clone(),
        job_uri: job.uri.to_uri_string(),
        rows: files.iter().map(|f| f.rows).sum(),
        rejected: rejects.iter().map(|f| f.rows).sum(),
        files,
        rejects_uri: job.manifest.rejects_uri.clone(),
        rejects,
        failed_tasks: failed,
        tables,
    };
    if let Some(other) = taken(out_uri.clone()).await? {
        return Err(format!(
            "{} is no longer this job's output (its owner marker names job {other}): the manifest is not written",
            out_uri.to_uri_string()
        ));
    }
    let ms = reg.open(&out_uri).map_err(|e| err(&e))?;
    let mpath = out_uri.child(MANIFEST).path;
    put_json(ms.as_ref(), &mpath, &manifest, &ctx.retry)
        .await
        .map_err(|e| err(&e))?;

    janitor(ctx, &store, &records).await.map_err(|e| err(&e))?;
    let body = serde_json::to_vec_pretty(&manifest).expect("json");
    Ok((
        vec![OutputFile {
            uri: manifest_uri,
            rows: manifest.rows,
            bytes: body.len() as u64,
            blake3: blake3::hash(&body).to_hex().to_string(),
        }],
        stats,
    ))
}

/// Deletes staged objects of attempts that no commit record references. The shuffle
/// objects of committed dedup tasks (keys, decisions, labels) stay: a later job that
/// `--reuse`s this one's dedup phases reads them.
async fn janitor(
    ctx: &WorkerCtx,
    store: &Arc<dyn object_store::ObjectStore>,
    records: &[CommitRecord],
) -> Result<(), crate::protocol::io::ProtoError> {
    let keep: BTreeSet<String> = records
        .iter()
        .flat_map(|r| r.staged_files())
        .filter_map(|f| f.uri.rsplit_once('/').map(|(dir, _)| dir.to_string()))
        .collect();
    let staging = ctx.job.paths.staging();
    let stale: Vec<Path> = list_all(store.as_ref(), &staging, &ctx.retry)
        .await?
        .into_iter()
        .filter(|m| {
            let u = Uri {
                store: ctx.job.uri.store.clone(),
                path: m.location.clone(),
            }
            .to_uri_string();
            !u.rsplit_once('/')
                .is_some_and(|(dir, _)| keep.contains(dir))
        })
        .map(|m| m.location)
        .collect();
    for p in stale {
        let _ = ctx.retry.run(|| store.delete(&p)).await;
    }
    Ok(())
}
