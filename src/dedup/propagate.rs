//! A near-duplicate task (docs/DEDUP.md): the candidates reduce (step 0: band-key
//! buckets verified, edges written by record partition) and the label steps after
//! it (odd: by record, with one decision per record; even: by bucket), each reading
//! its partition of every task of the step before. A step after a fixed point
//! commits without an object. The computation is [`super::near`] and
//! [`super::rounds`]; this file does the I/O.
use super::error::DedupError;
use super::exact::Decision;
use super::exact::EARLIER;
use super::format::EARLIER_NODE;
use super::format::{EDGES_MAGIC, Sections};
use super::near::{
    self, ByBucket, ByRecord, NearEntry, StepStats, bucket_partition, record_partition,
};
use super::params::DedupParams;
use super::rounds::{bucket_step, record_step_of};
use super::shuffle::{
    ShuffleCtx, Upload, commit_of, earlier_entries, gather, partition_of_task, spill_dir,
    upload_file,
};
use super::sort::ExternalSort;
use crate::protocol::records::{
    DedupPhase, NEAR_GROUP_SIZE, OutputFile, PhaseKind, PhasePlan, TaskStats, TaskStatus,
};
use crate::store::Uri;
use std::sync::atomic::AtomicBool;

/// Whether the label steps before `phase` already reached a fixed point: the nearest
/// earlier record step of the same dedup stage was skipped itself, or changed no label
/// in any task. (Another near-dedup stage earlier in the job has its own steps: its
/// convergence says nothing about this one's.)
pub async fn converged_before(sc: &ShuffleCtx<'_>, phase: usize) -> Result<bool, DedupError> {
    let phases = &sc.job.manifest.phases;
    let stage = phases[phase].dedup.as_ref().map(|d| &d.stage);
    let Some(q) = (0..phase).rev().find(|&q| {
        is_record_step(&phases[q]) && phases[q].dedup.as_ref().map(|d| &d.stage) == stage
    }) else {
        return Ok(false);
    };
    let (skipped, changed) = step_outcome(sc, q).await?;
    Ok(skipped || changed == 0)
}

pub fn is_record_step(p: &PhasePlan) -> bool {
    p.kind == PhaseKind::Propagate
        && p.dedup
            .as_ref()
            .is_some_and(|d| d.step % 2 == 1 && d.params.kind.is_near())
}

/// A record step's outcome: whether it was skipped, and the labels it changed.
pub async fn step_outcome(sc: &ShuffleCtx<'_>, q: usize) -> Result<(bool, u64), DedupError> {
    let name = sc.job.manifest.phases[q].name.clone();
    let mut changed = 0;
    for t in sc.task_ids(q).iter() {
        let rec = commit_of(sc, &name, t).await?;
        if rec.status != TaskStatus::Committed {
            return Err(DedupError::upstream_failed(&name, t, &rec));
        }
        if rec.shuffle.is_none() {
            return Ok((true, 0));
        }
        changed += rec.changed.unwrap_or(0);
    }
    Ok((false, changed))
}

/// One near-duplicate task: the candidates reduce (step 0) or a label step. Returns
/// its object (`None`: skipped, the labels had already converged), its stats and,
/// for record steps, how many labels changed.
pub async fn near_step(
    sc: &ShuffleCtx<'_>,
    phase: usize,
    task: &str,
    out_dir: &Uri,
    cancel: &AtomicBool,
) -> Result<(Option<OutputFile>, TaskStats, Option<u64>), DedupError> {
    let plan = &sc.job.manifest.phases[phase];
    let d: &DedupPhase = plan
        .dedup
        .as_ref()
        .ok_or_else(|| DedupError::Plan("near step without a dedup plan".into()))?;
    let r = partition_of_task(&plan.fingerprint, task, d.partitions).ok_or_else(|| {
        DedupError::Plan(format!("task {task} is not a partition of {}", plan.name))
    })?;
    if d.step > 0 && converged_before(sc, phase).await? {
        return Ok((None, TaskStats::default(), None));
    }
    let params = DedupParams::from(&d.params);
    let dir = spill_dir();
    let memory = params.memory_bytes;
    let parts = d.partitions;
    let n_map = sc.task_ids(d.map_phase).len();
    let (input_bytes, sections, st) = if d.step == 0 {
        match params.kind.payload_len() {
            8 => candidates::<8>(sc, d, &params, r, cancel).await?,
            64 => candidates::<64>(sc, d, &params, r, cancel).await?,
            128 => candidates::<128>(sc, d, &params, r, cancel).await?,
            192 => candidates::<192>(sc, d, &params, r, cancel).await?,
            256 => candidates::<256>(sc, d, &params, r, cancel).await?,
            384 => candidates::<384>(sc, d, &params, r, cancel).await?,
            512 => candidates::<512>(sc, d, &params, r, cancel).await?,
            p => {
                return Err(DedupError::Plan(format!(
                    "no near-duplicate entry type with a {p}-byte payload"
                )));
            }
        }
    } else if d.step % 2 == 1 {
        let (input, sorter) =
            gather::<ByRecord>(sc, (phase - 1, r), memory / 3, cancel, |_, _| {}).await?;
        let dir2 = dir.clone();
        let (sections, st) = tokio::task::spawn_blocking(move || {
            let mut edges = ExternalSort::<ByBucket>::new(memory / 3, dir2.clone());
            let mut decisions = ExternalSort::<Decision>::new(memory / 3, dir2.clone());
            // Edges in memory with room for a union-find: each record takes its
            // component's label at once (one partition: the fixed point in one step).
            let st = record_step_of(sorter, memory / 3, &mut edges, &mut decisions)?;
            let mut out = Sections::new(parts as usize + n_map, &dir2)?;
            out.push_all(edges.finish()?, |e| bucket_partition(&e.0, parts) as usize)?;
            out.push_all(decisions.finish()?, |x| parts as usize + x.task as usize)?;
            Ok::<_, std::io::Error>((out, st))
        })
        .await
        .map_err(DedupError::joined)?
        .map_err(|e| DedupError::local("near-duplicate record step", e))?;
        (input, sections, st)
    } else {
        let (input, sorter) =
            gather::<ByBucket>(sc, (phase - 1, r), memory / 2, cancel, |_, _| {}).await?;
        let dir2 = dir.clone();
        let (sections, st) = tokio::task::spawn_blocking(move || {
            let mut edges = ExternalSort::<ByRecord>::new(memory / 2, dir2.clone());
            let st = bucket_step(sorter.finish()?, &mut edges)?;
            let mut out = Sections::new(parts as usize, &dir2)?;
            out.push_all(edges.finish()?, |e| record_partition(&e.0, parts) as usize)?;
            Ok::<_, std::io::Error>((out, st))
        })
        .await
        .map_err(DedupError::joined)?
        .map_err(|e| DedupError::local("near-duplicate bucket step", e))?;
        (input, sections, st)
    };
    let (file, len) = tokio::task::spawn_blocking(move || sections.finish(EDGES_MAGIC))
        .await
        .map_err(DedupError::joined)?
        .map_err(|e| DedupError::local("near-duplicate object", e))?;
    let uri = out_dir.child("near.bin");
    let file = upload_file(
        sc.reg,
        &uri,
        Upload {
            what: "near-duplicate object",
            file,
            len,
            rows: st.edges,
        },
    )
    .await?;
    let mut ts = TaskStats {
        records_in: st.entries,
        records_out: st.edges,
        input_bytes,
        output_bytes: len,
        ..Default::default()
    };
    if st.group_sizes.count > 0 {
        ts.histograms
            .insert(NEAR_GROUP_SIZE.to_string(), st.group_sizes.clone());
    }
    let changed = (d.step % 2 == 1).then_some(st.changed);
    Ok((Some(file), ts, changed))
}

/// The candidates reduce of partition `r` with `P`-byte payloads: every map task's
/// band entries in the partition, sorted (spilling past the budget), each bucket
/// verified against its pivot; the verified edges sectioned by record partition.
async fn candidates<const P: usize>(
    sc: &ShuffleCtx<'_>,
    d: &DedupPhase,
    params: &DedupParams,
    r: u32,
    cancel: &AtomicBool,
) -> Result<(u64, Sections, StepStats), DedupError> {
    let dir = spill_dir();
    let memory = params.memory_bytes;
    let against = params.against.is_some();
    let (mut input, mut sorter) =
        gather::<NearEntry<P>>(sc, (d.map_phase, r), memory / 2, cancel, |ti, e| {
            e.task = ti as u32;
            // An earlier corpus's records rank +∞ (first in every bucket, every
            // cluster's label): no record of this job may tie with them.
            if against && e.rank == f64::INFINITY {
                e.rank = f64::MAX;
            }
        })
        .await?;
    if let Some(uri) = &params.against {
        input += earlier_entries(sc, uri, d, r, |mut e: NearEntry<P>| {
            e.id |= EARLIER_NODE;
            e.rank = f64::INFINITY;
            e.task = EARLIER;
            sorter.push(e).map_err(|e| DedupError::local("spilling", e))
        })
        .await?;
    }
    let kind = params.kind.clone();
    let parts = d.partitions;
    let (sections, st) = tokio::task::spawn_blocking(move || {
        let mut edges = ExternalSort::<ByRecord>::new(memory / 2, dir.clone());
        let st = near::candidates(sorter.finish()?, &kind, &mut edges)?;
        let mut out = Sections::new(parts as usize, &dir)?;
        out.push_all(edges.finish()?, |e| record_partition(&e.0, parts) as usize)?;
        Ok::<_, std::io::Error>((out, st))
    })
    .await
    .map_err(DedupError::joined)?
    .map_err(|e| DedupError::local("near-duplicate candidates", e))?;
    if st.overflow > 0 {
        tracing::warn!(
            overflow = st.overflow,
            max = near::MAX_LEADERS,
            "band buckets with more distinct values than the verification limit: pairs among the extra members may be missed"
        );
    }
    Ok((input, sections, st))
}
