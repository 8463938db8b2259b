//! An exact reduce task (docs/DEDUP.md, pass 2): its key range from every committed
//! map task's keys object (and from an earlier job's, with `against`), sorted and
//! decided in bounded memory by [`super::exact`], the decisions object uploaded into
//! the attempt directory.
use super::error::DedupError;
use super::exact::{self, KeyEntry, Sourced};
use super::format;
use super::params::DedupParams;
use super::shuffle::{
    ShuffleCtx, Upload, partition_of_task, read_sections, spill_dir, upload_file,
};
use super::sort::ExternalSort;
use super::substring::{self, Marking, WindowEntry, WindowSourced};
use crate::protocol::records::{CLUSTER_SIZE, DedupPhase, OutputFile, TaskStats};
use crate::store::Uri;
use std::sync::atomic::AtomicBool;

/// One reduce task of `phase`: its key range from every committed map task, grouped
/// and decided in bounded memory; the decisions object is written into `out_dir`.
pub async fn reduce(
    sc: &ShuffleCtx<'_>,
    phase: usize,
    task: &str,
    out_dir: &Uri,
    cancel: &AtomicBool,
) -> Result<(OutputFile, TaskStats), DedupError> {
    let plan = &sc.job.manifest.phases[phase];
    let d: &DedupPhase = plan
        .dedup
        .as_ref()
        .ok_or_else(|| DedupError::Plan("reduce phase without a dedup plan".into()))?;
    let params = DedupParams::from(&d.params);
    let r = partition_of_task(&plan.fingerprint, task, d.partitions).ok_or_else(|| {
        DedupError::Plan(format!("task {task} is not a partition of {}", plan.name))
    })?;
    let dir = spill_dir();
    // Windows of `k` tokens (or single units) seen at least `min_count` times.
    let cutting = match params.kind {
        super::DedupKind::Substring {
            keep_first,
            min_tokens,
            ..
        } => Some(Marking {
            keep_first,
            k: min_tokens,
            min_count: 2,
        }),
        super::DedupKind::Paragraph {
            keep_first,
            min_count,
            ..
        } => Some(Marking {
            keep_first,
            k: 1,
            min_count,
        }),
        _ => None,
    };
    if let Some(how) = cutting {
        return substring_reduce(sc, d, r, how, out_dir, cancel, task).await;
    }
    let mut sorter = ExternalSort::<Sourced>::new(params.memory_bytes / 2, dir.clone());
    // Keys objects hold KeyEntry; the task is known by which object it came from.
    let mut input_bytes = read_sections(sc, d.map_phase, r as u64, cancel, |ti, uri, b| {
        for e in format::entries::<KeyEntry>(&b).map_err(|e| DedupError::format(uri, e))? {
            sorter
                .push(Sourced { e, task: ti as u32 })
                .map_err(|e| DedupError::local(format!("spilling to {}", dir.display()), e))?;
        }
        Ok(())
    })
    .await?;
    if let Some(uri) = &params.against {
        input_bytes += earlier_keys(sc, uri, d, r, &mut sorter).await?;
    }
    let memory = params.memory_bytes;
    let cluster = params.cluster_column;
    let n_tasks = sc.task_ids(d.map_phase).len() as u32;
    let (file, len, stats) = tokio::task::spawn_blocking(move || {
        exact::finish_reduce(sorter, memory, dir, cluster, n_tasks)
    })
    .await
    .map_err(DedupError::joined)?
    .map_err(|e| DedupError::local("reduce spill", e))?;
    // Keys in, distinct keys out; the duplicates become rejects in the apply phase.
    let result = Reduced {
        file,
        len,
        stats,
        input_bytes,
    };
    upload_result(
        sc,
        out_dir.child("decisions.bin"),
        "decisions object",
        result,
        task,
    )
    .await
}

/// What a reduce leaves in a local file, with its counts.
struct Reduced {
    file: std::fs::File,
    len: u64,
    stats: exact::ReduceStats,
    input_bytes: u64,
}

/// Uploads a reduce's object to `uri` and makes its stats: entries in, distinct keys
/// out, the object's rows the duplicates (or windows to cut).
async fn upload_result(
    sc: &ShuffleCtx<'_>,
    uri: Uri,
    what: &'static str,
    r: Reduced,
    task: &str,
) -> Result<(OutputFile, TaskStats), DedupError> {
    let Reduced {
        file,
        len,
        stats,
        input_bytes,
    } = r;
    if stats.spilled_bytes > 0 {
        tracing::info!(
            task,
            spilled_bytes = stats.spilled_bytes,
            "partition exceeded the reduce memory budget and spilled to disk"
        );
    }
    let file = upload_file(
        sc.reg,
        &uri,
        Upload {
            what,
            file,
            len,
            rows: stats.duplicates,
        },
    )
    .await?;
    let ts = TaskStats {
        records_in: stats.keys,
        records_out: stats.distinct,
        input_bytes,
        output_bytes: len,
        histograms: [(CLUSTER_SIZE.to_string(), stats.cluster_sizes)].into(),
        ..Default::default()
    };
    Ok((file, ts))
}

/// An exact-substring reduce: the windows of hash range `r` from every committed map
/// task, sorted and marked in bounded memory; the marks object into `out_dir`.
async fn substring_reduce(
    sc: &ShuffleCtx<'_>,
    d: &DedupPhase,
    r: u32,
    how: Marking,
    out_dir: &Uri,
    cancel: &AtomicBool,
    task: &str,
) -> Result<(OutputFile, TaskStats), DedupError> {
    let dir = spill_dir();
    let memory = d.params.memory_bytes;
    let mut sorter = ExternalSort::<WindowSourced>::new(memory / 2, dir.clone());
    let input_bytes = read_sections(sc, d.map_phase, r as u64, cancel, |ti, uri, b| {
        for e in format::entries::<WindowEntry>(&b).map_err(|e| DedupError::format(uri, e))? {
            sorter
                .push(WindowSourced { e, task: ti as u32 })
                .map_err(|e| DedupError::local(format!("spilling to {}", dir.display()), e))?;
        }
        Ok(())
    })
    .await?;
    let n_tasks = sc.task_ids(d.map_phase).len() as u32;
    let (file, len, stats) = tokio::task::spawn_blocking(move || {
        substring::finish_reduce(sorter, how, memory, dir, n_tasks)
    })
    .await
    .map_err(DedupError::joined)?
    .map_err(|e| DedupError::local("reduce spill", e))?;
    // Windows in, distinct windows out; the marked windows are cut in the apply phase.
    let result = Reduced {
        file,
        len,
        stats,
        input_bytes,
    };
    upload_result(sc, out_dir.child("marks.bin"), "marks object", result, task).await
}

/// Adds the keys of an earlier job (`against`) that fall in partition `r`: from its
/// map tasks' keys objects, the sections overlapping `r` (the jobs may have different
/// partition counts). Returns the bytes read.
async fn earlier_keys(
    sc: &ShuffleCtx<'_>,
    uri: &str,
    d: &DedupPhase,
    r: u32,
    sorter: &mut ExternalSort<Sourced>,
) -> Result<u64, DedupError> {
    super::shuffle::earlier_entries(sc, uri, d, r, |e: KeyEntry| {
        sorter
            .push(Sourced {
                e,
                task: exact::EARLIER,
            })
            .map_err(|e| DedupError::local("spilling", e))
    })
    .await
}
