//! The apply phase of a dedup (docs/DEDUP.md): the decisions about one map task's
//! records, read from every reduce task (exact) or from the last label step that ran
//! (near duplicates, which must have converged), and the filter that turns them into
//! `duplicate` rejects and, with `cluster_column`, the `dup_cluster` column. The
//! worker's apply executor runs the filter as the first stage of the apply phase.
use super::error::DedupError;
use super::exact::Decision;
use super::format::{self, format_id, parse_id};
use super::params::CLUSTER_COLUMN;
use super::propagate::{is_record_step, step_outcome};
use super::shuffle::{ShuffleCtx, read_sections};
use crate::kernels::FastMap;
use crate::ops::{Drop, Operator, Output, ProcessError, SchemaError};
use crate::protocol::records::DedupPhase;
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The apply filter of map task `map_task`'s records: their decisions, read from the
/// store.
pub async fn filter_for(
    sc: &ShuffleCtx<'_>,
    d: &DedupPhase,
    map_task: &str,
) -> Result<Apply, DedupError> {
    Ok(Apply {
        decisions: decisions_for(sc, d, map_task).await?,
        cluster_column: d.params.cluster_column,
    })
}

/// The decisions about one map task's records from every reduce task: id →
/// representative (the representative maps to itself).
pub async fn decisions_for(
    sc: &ShuffleCtx<'_>,
    d: &DedupPhase,
    map_task: &str,
) -> Result<FastMap<u128, u128>, DedupError> {
    let reduce_phase = d.map_phase + 1;
    let t = sc
        .task_ids(d.map_phase)
        .iter()
        .position(|x| x == map_task)
        .ok_or_else(|| DedupError::Plan(format!("map task {map_task} is not in the job")))?;
    if !d.params.kind.is_exact() {
        return near_decisions_for(sc, d, t).await;
    }
    decisions_in(sc, reduce_phase, t as u64).await
}

/// Section `section` of the decisions objects of every task of `phase` (one map
/// task's decisions): id → representative.
async fn decisions_in(
    sc: &ShuffleCtx<'_>,
    phase: usize,
    section: u64,
) -> Result<FastMap<u128, u128>, DedupError> {
    let mut out = FastMap::default();
    let never = AtomicBool::new(false);
    read_sections(sc, phase, section, &never, |_, uri, b| {
        for dec in format::decode::<Decision>(&b).map_err(|e| DedupError::format(uri, e))? {
            out.insert(dec.id, dec.rep);
        }
        Ok(())
    })
    .await?;
    Ok(out)
}

/// The near-duplicate decisions about one map task's records: from the last record
/// step that ran, which must have changed no label (else the components are not
/// final and the job fails rather than keep near duplicates it missed).
async fn near_decisions_for(
    sc: &ShuffleCtx<'_>,
    d: &DedupPhase,
    t: usize,
) -> Result<FastMap<u128, u128>, DedupError> {
    let phases = &sc.job.manifest.phases;
    let mut q = None;
    for p in (d.map_phase + 1..phases.len()).filter(|&p| is_record_step(&phases[p])) {
        if phases[p].dedup.as_ref().map(|x| &x.stage) != Some(&d.stage) {
            continue;
        }
        let (skipped, changed) = step_outcome(sc, p).await?;
        if skipped {
            break;
        }
        q = Some((p, changed));
    }
    let (q, changed) =
        q.ok_or_else(|| DedupError::Plan("no near-duplicate record step ran".into()))?;
    if changed > 0 {
        return Err(DedupError::NotConverged {
            max_rounds: d.params.max_rounds,
            changed,
            stage: d.stage.clone(),
        });
    }
    decisions_in(sc, q, d.partitions as u64 + t as u64).await
}

/// The apply filter of one map task: its records' decisions (id → representative).
pub struct Apply {
    pub decisions: crate::kernels::FastMap<u128, u128>,
    pub cluster_column: bool,
}

impl Operator for Apply {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        if input.field_with_name(crate::records::ID).is_err() {
            return Err(SchemaError::Other("no id column".into()));
        }
        Ok(if self.cluster_column {
            vec![Field::new(CLUSTER_COLUMN, DataType::Utf8, true)]
        } else {
            vec![]
        })
    }
    /// Never record by record: quarantining a representative would drop its whole
    /// cluster (its duplicates are rejected in favour of it).
    fn splittable(&self) -> bool {
        false
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let ids = batch
            .column_by_name(crate::records::ID)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .ok_or_else(|| ProcessError::MissingColumn(crate::records::ID.into()))?;
        let mut verdicts = Vec::with_capacity(ids.len());
        let mut cluster = Vec::with_capacity(ids.len());
        for i in 0..ids.len() {
            let rep =
                parse_id(ids.value(i)).and_then(|id| self.decisions.get(&id).map(|&rep| (id, rep)));
            match rep {
                Some((id, rep)) if id != rep => {
                    verdicts.push(Some(Drop {
                        reason: "duplicate",
                        detail: Some(format_id(rep)),
                    }));
                    cluster.push(Some(format_id(rep)));
                }
                Some((_, rep)) => {
                    verdicts.push(None);
                    cluster.push(Some(format_id(rep)));
                }
                None => {
                    verdicts.push(None);
                    cluster.push(None);
                }
            }
        }
        let added: Vec<ArrayRef> = if self.cluster_column {
            vec![Arc::new(StringArray::from(cluster))]
        } else {
            vec![]
        };
        Ok(Output::annotated(added, verdicts))
    }
}
