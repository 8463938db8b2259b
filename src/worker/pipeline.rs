//! The in-worker pipeline of one task: reader → operator stages → writer, three
//! threads joined by bounded channels of `job.channel_batches` batches, so memory is
//! bounded by configuration, never by input size. Kernels run on these threads (and
//! rayon), never on the async runtime. A cancel flag (fencing, shutdown) stops all
//! three between batches.
use super::readers::{self, Item, ReadCtx, ReadError};
use super::writer::{PartWriter, WriteError};
use crate::ops::{self, Operator};
use crate::protocol::records::{InputSlice, OutputFile, StageStats, TaskStats};
use crate::records::{Reject, rejects_batch, rejects_schema};
use crate::store::{Registry, Uri};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::file::properties::WriterProperties;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;
use std::time::Instant;

/// One stage ready to run.
#[derive(Clone)]
pub struct BoundStage {
    pub name: String,
    pub op: Arc<Operator>,
    pub out_schema: SchemaRef,
    /// The columns (indices into `out_schema`) that go on after this stage, when some
    /// are no longer needed (see `worker::bind_stages`).
    pub then_keep: Option<Vec<usize>>,
    /// Columns whose distributions go into the stage's stats.
    pub histograms: Vec<String>,
}

/// Everything one task's pipeline needs.
pub struct PipelineSpec {
    pub registry: Registry,
    pub handle: tokio::runtime::Handle,
    pub inputs: Vec<InputSlice>,
    pub input_schema: SchemaRef,
    pub assign_ids: bool,
    /// `format: laion`: how images are fetched.
    pub download: crate::worker::download::DownloadSpec,
    pub stages: Vec<BoundStage>,
    /// The written schema (a projection of the last stage's schema).
    pub output_schema: SchemaRef,
    pub out_dir: Uri,
    pub props: WriterProperties,
    pub target_file_bytes: u64,
    /// The last phase of an `output.format: lance` job: Lance fragments, not Parquet.
    pub lance: bool,
    pub batch_rows: usize,
    pub batch_bytes: usize,
    pub channel_batches: usize,
    pub max_record_bytes: usize,
    pub keep_rejected_records: bool,
    pub cancel: Arc<AtomicBool>,
    /// A phase ending in a dedup stage: collect the key entries of the records that
    /// reach the end of the stages (docs/DEDUP.md, pass 1).
    pub keys: Option<crate::ops::dedup::DedupParams>,
}

#[derive(Debug)]
pub struct PipelineOutput {
    pub outputs: Vec<OutputFile>,
    pub rejects: Vec<OutputFile>,
    pub stats: TaskStats,
    /// The dedup key entries (raw, `shuffle::entry_size` bytes each), when `keys`
    /// was set.
    pub keys: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Op(#[from] ops::OpError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("cancelled")]
    Cancelled,
}

enum Out {
    Batch(RecordBatch),
    Rejects(Vec<Reject>),
}

/// Runs the pipeline to completion on the calling (blocking) thread and two helpers.
pub fn run(spec: PipelineSpec) -> Result<PipelineOutput, PipelineError> {
    let cancel = spec.cancel.clone();
    let (tx_read, rx_read) = sync_channel::<Item>(spec.channel_batches);
    let (tx_ops, rx_ops) = sync_channel::<Out>(spec.channel_batches);
    let ctx = ReadCtx {
        registry: spec.registry.clone(),
        handle: spec.handle.clone(),
        batch_rows: spec.batch_rows,
        batch_bytes: spec.batch_bytes,
        max_record_bytes: spec.max_record_bytes,
        cancel: cancel.clone(),
        assign_ids: spec.assign_ids,
        download: spec.download.clone(),
    };
    let projection: Vec<usize> = {
        let last = spec
            .stages
            .last()
            .map(|s| s.out_schema.clone())
            .unwrap_or_else(|| spec.input_schema.clone());
        spec.output_schema
            .fields()
            .iter()
            .map(|f| {
                last.index_of(f.name())
                    .expect("planned output columns exist")
            })
            .collect()
    };
    let mut data = if spec.lance {
        #[cfg(feature = "lance")]
        {
            DataWriter::Lance(super::lance_out::LanceWriter::new(
                spec.registry.clone(),
                spec.handle.clone(),
                spec.out_dir.clone(),
                spec.target_file_bytes,
            ))
        }
        #[cfg(not(feature = "lance"))]
        unreachable!("lance output is refused at spec validation without the feature")
    } else {
        DataWriter::Parquet(Box::new(PartWriter::new(
            spec.registry.clone(),
            spec.handle.clone(),
            spec.out_dir.clone(),
            "part",
            spec.output_schema.clone(),
            spec.props.clone(),
            spec.target_file_bytes,
        )))
    };
    let mut rejects = PartWriter::new(
        spec.registry.clone(),
        spec.handle.clone(),
        spec.out_dir.clone(),
        "rejects",
        rejects_schema(),
        spec.props.clone(),
        spec.target_file_bytes,
    );
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let tx = tx_read;
            let mut total = readers::SliceStats::default();
            // Image files: one batch across many small files, fetched concurrently.
            if spec.inputs.first().map(|s| s.format) == Some(crate::spec::Format::ImageFolder) {
                return readers::images::read_folder(
                    &ctx,
                    &spec.inputs,
                    &spec.input_schema,
                    32,
                    &mut |item| tx.send(item).is_ok(),
                );
            }
            for slice in &spec.inputs {
                let st = readers::read_slice(&ctx, slice, &spec.input_schema, &mut |item| {
                    tx.send(item).is_ok()
                })?;
                total.records += st.records;
                total.rejected += st.rejected;
                total.bytes += st.bytes;
            }
            Ok::<_, ReadError>(total)
        });
        let stages = s.spawn(|| {
            let tx = tx_ops;
            let mut stats: Vec<StageStats> = spec
                .stages
                .iter()
                .map(|st| StageStats {
                    stage: st.name.clone(),
                    ..Default::default()
                })
                .collect();
            let mut keys = Vec::new();
            for item in rx_read {
                if cancel.load(Ordering::Relaxed) {
                    return Err(PipelineError::Cancelled);
                }
                let mut batch = match item {
                    Item::Rejects(r) => {
                        if tx.send(Out::Rejects(r)).is_err() {
                            return Err(PipelineError::Cancelled);
                        }
                        continue;
                    }
                    Item::Batch(b) => b,
                };
                for (st, stat) in spec.stages.iter().zip(stats.iter_mut()) {
                    let t0 = Instant::now();
                    let n_in = batch.num_rows() as u64;
                    let (kept, rj) = ops::run_stage_observed(
                        &st.name,
                        &st.op,
                        batch,
                        &st.out_schema,
                        spec.keep_rejected_records,
                        &mut |b| record_histograms(b, &st.histograms, &mut stat.histograms),
                    )?;
                    stat.record_batch(t0.elapsed().as_nanos() as u64);
                    stat.records_in += n_in;
                    stat.records_out += kept.num_rows() as u64;
                    stat.rejected += rj.len() as u64;
                    for r in &rj {
                        *stat.reasons.entry(r.reason.clone()).or_default() += 1;
                    }
                    if !rj.is_empty() && tx.send(Out::Rejects(rj)).is_err() {
                        return Err(PipelineError::Cancelled);
                    }
                    batch = match &st.then_keep {
                        Some(k) => kept.project(k).map_err(|e| ops::OpError {
                            operator: st.name.clone(),
                            message: e.to_string(),
                        })?,
                        None => kept,
                    };
                    if batch.num_rows() == 0 {
                        break;
                    }
                }
                if batch.num_rows() > 0
                    && let Some(p) = &spec.keys
                {
                    super::shuffle::append_keys(&batch, p, &mut keys).map_err(|message| {
                        ops::OpError {
                            operator: "dedup".into(),
                            message,
                        }
                    })?;
                }
                if batch.num_rows() > 0 {
                    let out = batch.project(&projection).map_err(|e| ops::OpError {
                        operator: "output".into(),
                        message: e.to_string(),
                    })?;
                    if tx.send(Out::Batch(out)).is_err() {
                        return Err(PipelineError::Cancelled);
                    }
                }
            }
            Ok((stats, keys))
        });
        let mut stats = TaskStats::default();
        let mut write_err = None;
        for item in rx_ops {
            if cancel.load(Ordering::Relaxed) {
                write_err = Some(PipelineError::Cancelled);
                break;
            }
            let r = match item {
                Out::Batch(b) => {
                    stats.records_out += b.num_rows() as u64;
                    data.write(&b)
                }
                Out::Rejects(mut r) => {
                    stats.rejected += r.len() as u64;
                    for x in &mut r {
                        *stats.rejects_by_reason.entry(x.reason.clone()).or_default() += 1;
                        if !spec.keep_rejected_records {
                            x.record = None;
                        }
                    }
                    rejects.write(&rejects_batch(&r))
                }
            };
            if let Err(e) = r {
                write_err = Some(e.into());
                break;
            }
        }
        // Stop the other threads if the writer gave up.
        if write_err.is_some() {
            cancel.store(true, Ordering::Relaxed);
        }
        let read = reader.join().expect("reader thread panicked");
        let staged = stages.join().expect("stage thread panicked");
        if let Some(e) = write_err {
            data.abort();
            rejects.abort();
            return Err(e);
        }
        let (stage_stats, keys) = match staged {
            Ok(s) => s,
            Err(e) => {
                data.abort();
                rejects.abort();
                return Err(e);
            }
        };
        let read = match read {
            Ok(r) => r,
            Err(e) => {
                data.abort();
                rejects.abort();
                return Err(e.into());
            }
        };
        stats.records_in = read.records + read.rejected;
        stats.input_bytes = read.bytes;
        stats.stages = stage_stats;
        let outputs = data.finish()?;
        let rejects = rejects.finish()?;
        stats.output_bytes = outputs.iter().map(|f| f.bytes).sum();
        Ok(PipelineOutput {
            outputs,
            rejects,
            stats,
            keys,
        })
    })
}

/// The last phase's records: Parquet part files, or Lance fragments.
enum DataWriter {
    Parquet(Box<PartWriter>),
    #[cfg(feature = "lance")]
    Lance(super::lance_out::LanceWriter),
}

impl DataWriter {
    fn write(&mut self, b: &RecordBatch) -> Result<(), WriteError> {
        match self {
            DataWriter::Parquet(w) => w.write(b),
            #[cfg(feature = "lance")]
            DataWriter::Lance(w) => w.write(b),
        }
    }
    fn finish(self) -> Result<Vec<OutputFile>, WriteError> {
        match self {
            DataWriter::Parquet(w) => (*w).finish(),
            #[cfg(feature = "lance")]
            DataWriter::Lance(w) => w.finish(),
        }
    }
    /// A failed attempt's Lance files stay in its staging directory (the janitor's).
    fn abort(self) {
        match self {
            DataWriter::Parquet(w) => (*w).abort(),
            #[cfg(feature = "lance")]
            DataWriter::Lance(_) => {}
        }
    }
}

/// Adds the values of `columns` (numeric; nulls skipped) to their histograms.
fn record_histograms(
    batch: &RecordBatch,
    columns: &[String],
    out: &mut std::collections::BTreeMap<String, crate::protocol::records::Histogram>,
) {
    for c in columns {
        let Some(col) = batch.column_by_name(c) else {
            continue;
        };
        let Ok(v) = arrow_cast::cast(col, &arrow_schema::DataType::Float64) else {
            continue;
        };
        let v = v
            .as_any()
            .downcast_ref::<arrow_array::Float64Array>()
            .expect("cast to Float64");
        let h = out.entry(c.clone()).or_default();
        v.iter().flatten().for_each(|x| h.record(x));
    }
}
