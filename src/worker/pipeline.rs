//! The in-worker pipeline of one task: reader → operator stages → writer, three
//! threads joined by bounded channels of `job.channel_batches` batches, so memory is
//! bounded by configuration, never by input size. Kernels run on these threads (and
//! rayon), never on the async runtime. A cancel flag (fencing, shutdown) stops all
//! three between batches. An operator that panics on a batch is retried record by
//! record where its stage may be split: the records that panic on their own are
//! quarantined (reject `operator_panic`) and the rest go on; any other panic ends the
//! task with an error naming the panic's message, stable across attempts.
use crate::dedup::KeySpill;
use crate::io::read::{self, Item, ReadCtx, ReadError};
use crate::io::write::parquet::PartWriter;
use crate::io::write::{Sink, WriteCtx, WriteError, Writer};
use crate::ops::{self, Operator};
use crate::protocol::records::{InputSlice, OutputFile, StageStats, TaskStats};
use crate::records::{Reject, rejects_batch, rejects_schema};
use crate::store::{Registry, Uri};
use arrow_array::{Array, RecordBatch};
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
    pub op: Arc<dyn Operator>,
    pub out_schema: SchemaRef,
    /// The columns (indices into `out_schema`) that go on after this stage, when some
    /// are no longer needed (see `worker::bind_stages`).
    pub then_keep: Option<Vec<usize>>,
    /// Columns whose distributions go into the stage's stats.
    pub histograms: Vec<String>,
    /// Columns whose sums go into the stage's stats, each `by` only columns the
    /// stage's input has (`ops::Operator::totals`).
    pub totals: Vec<ops::Total>,
}

/// Everything one task's pipeline needs.
pub struct PipelineSpec {
    pub registry: Registry,
    pub handle: tokio::runtime::Handle,
    pub inputs: Vec<InputSlice>,
    pub input_schema: SchemaRef,
    pub assign_ids: bool,
    /// `format: laion`: how images are fetched.
    pub download: crate::spec::DownloadSpec,
    pub stages: Vec<BoundStage>,
    /// The written schema (a projection of the last stage's schema).
    pub output_schema: SchemaRef,
    pub out_dir: Uri,
    /// Parquet settings of the rejects and side tables (the output's).
    pub props: WriterProperties,
    /// Parquet settings of the data the task writes: the output's in the last phase,
    /// faster ones where it stages data for the next phase.
    pub data_props: WriterProperties,
    pub target_file_bytes: u64,
    /// The records' writer: `output.format`'s in the last phase, Parquet before.
    pub writer: &'static dyn Writer,
    /// The task's id (writers derive deterministic choices from it).
    pub task: String,
    /// `output.tokens` (token shard writers).
    pub tokens: Option<crate::spec::TokenShards>,
    /// `output.jsonl` with its defaults resolved (last phase, format `jsonl`).
    pub jsonl: Option<crate::spec::JsonlSpec>,
    /// `output.webdataset` with its defaults resolved (last phase).
    pub webdataset: Option<crate::spec::WebDatasetSpec>,
    /// `input.limit` (first phase): the reader stops after this many records.
    pub limit: Option<u64>,
    /// When the job was submitted (ms since the epoch).
    pub created_ms: u64,
    pub batch_rows: usize,
    pub batch_bytes: usize,
    pub channel_batches: usize,
    pub max_record_bytes: usize,
    pub keep_rejected_records: bool,
    pub cancel: Arc<AtomicBool>,
    /// A phase ending in a dedup stage: collect the key entries of the records that
    /// reach the end of the stages (docs/DEDUP.md, pass 1).
    pub keys: Option<KeysSpec>,
    /// Record the input files' URIs by file key in the task's stats (a stage of the
    /// job totals by source).
    pub record_sources: bool,
}

/// The keys a map task of a dedup stage collects: by the stage's params, into
/// `partitions` key ranges, buffered in at most half of `params.memory` (the rest
/// spilled to local runs, see `dedup::spill`).
#[derive(Debug, Clone)]
pub struct KeysSpec {
    pub params: crate::dedup::DedupParams,
    pub partitions: u32,
    /// Bytes of one key entry (`dedup::keys::entry_size`).
    pub entry: usize,
}

#[derive(Debug)]
pub struct PipelineOutput {
    pub outputs: Vec<OutputFile>,
    pub rejects: Vec<OutputFile>,
    /// The side tables' files, by stage name (`ops::Operator::table`).
    pub tables: Vec<(String, Vec<OutputFile>)>,
    pub stats: TaskStats,
    /// The dedup key entries (`dedup::keys::entry_size` bytes each, in memory or spilled),
    /// when `keys` was set.
    pub keys: Option<KeySpill>,
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
    /// A stage that may not be split panicked, or a panic no record explains.
    #[error("operator {stage} panicked: {message}")]
    OperatorPanicked { stage: String, message: String },
    /// A panic outside the operators (reader, keys, writer threads).
    #[error("{thread} panicked: {message}")]
    Panicked {
        thread: &'static str,
        message: String,
    },
}

/// The reject reason of a record its operator panicked on.
pub const OPERATOR_PANIC: &str = "operator_panic";

pub use crate::panic::{join_error, panic_message};

enum Out {
    Batch(RecordBatch),
    Rejects(Vec<Reject>),
    /// Side table rows of the stage at this index.
    Table(usize, RecordBatch),
}

/// A thread named for profiles and `top -H` (`mdf-read`, `mdf-stages`; kernels run on
/// `mdf-kernel-N`, the runtime and the writer on `mdf-io`).
fn named(name: &str) -> std::thread::Builder {
    std::thread::Builder::new().name(name.to_string())
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
        cut: Default::default(),
        broken: Default::default(),
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
    let mut data: Box<dyn Sink> = spec.writer.open(WriteCtx {
        registry: spec.registry.clone(),
        handle: spec.handle.clone(),
        dir: spec.out_dir.clone(),
        schema: spec.output_schema.clone(),
        props: spec.data_props.clone(),
        target_bytes: spec.target_file_bytes,
        task: spec.task.clone(),
        tokens: spec.tokens.clone(),
        jsonl: spec.jsonl.clone(),
        webdataset: spec.webdataset.clone(),
        created_ms: spec.created_ms,
    })?;
    let mut rejects = PartWriter::new(
        spec.registry.clone(),
        spec.handle.clone(),
        spec.out_dir.clone(),
        "rejects",
        rejects_schema(),
        spec.props.clone(),
        spec.target_file_bytes,
    );
    // One writer per stage with a side table, created on its first rows.
    let mut tables: Vec<Option<PartWriter>> = spec.stages.iter().map(|_| None).collect();
    let abort_tables = |tables: Vec<Option<PartWriter>>| {
        for t in tables.into_iter().flatten() {
            t.abort();
        }
    };
    std::thread::scope(|s| {
        let reader = named("mdf-read")
            .spawn_scoped(s, || {
                let tx = tx_read;
                let mut left = spec.limit;
                // Under a limit, what went down the pipeline is what the task read:
                // records the reader had decoded past the limit are not counted in
                // (they would show as records in that neither came out nor were
                // rejected).
                let (mut sent_rows, mut sent_rejects) = (0u64, 0u64);
                let read = read::read_task(&ctx, &spec.inputs, &spec.input_schema, &mut |item| {
                    match (item, left.as_mut()) {
                        (Item::Batch(b), Some(n)) => {
                            // The first `limit` records, then the reader stops.
                            let take = (b.num_rows() as u64).min(*n);
                            *n -= take;
                            sent_rows += take;
                            let sent = take == 0
                                || tx.send(Item::Batch(b.slice(0, take as usize))).is_ok();
                            sent && *n > 0
                        }
                        (Item::Rejects(r), Some(_)) => {
                            sent_rejects += r.len() as u64;
                            tx.send(Item::Rejects(r)).is_ok()
                        }
                        (item, _) => tx.send(item).is_ok(),
                    }
                });
                let limited = |bytes: u64| read::SliceStats {
                    records: sent_rows,
                    rejected: sent_rejects,
                    bytes,
                };
                match read {
                    // Stopped at the limit, not by a cancelled task.
                    Err(read::ReadError::Cancelled) if left == Some(0) && !ctx.cancelled() => {
                        Ok(limited(0))
                    }
                    Ok(st) if left.is_some() => Ok(limited(st.bytes)),
                    r => r,
                }
            })
            .expect("starting the reader thread");
        let stages = named("mdf-stages")
            .spawn_scoped(s, || {
                let tx = tx_ops;
                let mut stats: Vec<StageStats> = spec
                    .stages
                    .iter()
                    .map(|st| StageStats {
                        stage: st.name.clone(),
                        ..Default::default()
                    })
                    .collect();
                let mut keys = spec.keys.as_ref().map(|k| {
                    KeySpill::new(
                        k.entry,
                        k.partitions,
                        k.params.memory_bytes / 2,
                        crate::dedup::spill_dir(),
                    )
                });
                let mut scratch = Vec::new();
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
                    for (i, (st, stat)) in spec.stages.iter().zip(stats.iter_mut()).enumerate() {
                        let t0 = Instant::now();
                        let n_in = batch.num_rows() as u64;
                        let (kept, rj, rows) =
                            run_guarded(st, batch, spec.keep_rejected_records, stat)?;
                        for r in rows {
                            if r.num_rows() > 0 && tx.send(Out::Table(i, r)).is_err() {
                                return Err(PipelineError::Cancelled);
                            }
                        }
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
                                retryable: false,
                            })?,
                            None => kept,
                        };
                        if batch.num_rows() == 0 {
                            break;
                        }
                    }
                    if batch.num_rows() > 0
                        && let (Some(k), Some(spill)) = (&spec.keys, &mut keys)
                    {
                        scratch.clear();
                        crate::dedup::keys::append_keys(&batch, &k.params, &mut scratch).map_err(
                            |e| ops::OpError {
                                operator: "dedup".into(),
                                message: e.to_string(),
                                retryable: false,
                            },
                        )?;
                        spill.push(&scratch).map_err(|e| ops::OpError {
                            operator: "dedup".into(),
                            message: format!(
                                "spilling keys to {}: {e}",
                                crate::dedup::spill_dir().display()
                            ),
                            // A full or failing local disk may be another machine's luck.
                            retryable: true,
                        })?;
                    }
                    if batch.num_rows() > 0 {
                        let out = batch.project(&projection).map_err(|e| ops::OpError {
                            operator: "output".into(),
                            message: e.to_string(),
                            retryable: false,
                        })?;
                        if tx.send(Out::Batch(out)).is_err() {
                            return Err(PipelineError::Cancelled);
                        }
                    }
                }
                Ok((stats, keys))
            })
            .expect("starting the stages thread");
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
                Out::Table(i, rows) => {
                    let st = &spec.stages[i];
                    tables[i]
                        .get_or_insert_with(|| {
                            PartWriter::new(
                                spec.registry.clone(),
                                spec.handle.clone(),
                                spec.out_dir.clone(),
                                &format!("table-{}", st.name),
                                rows.schema(),
                                spec.props.clone(),
                                spec.target_file_bytes,
                            )
                        })
                        .write(&rows)
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
        let read = match reader.join() {
            Ok(r) => r.map_err(PipelineError::from),
            Err(p) => Err(PipelineError::Panicked {
                thread: "the reader thread",
                message: panic_message(p.as_ref()),
            }),
        };
        let staged = stages.join().unwrap_or_else(|p| {
            Err(PipelineError::Panicked {
                thread: "the stage thread",
                message: panic_message(p.as_ref()),
            })
        });
        if let Some(e) = write_err {
            data.abort();
            rejects.abort();
            abort_tables(tables);
            return Err(e);
        }
        let (stage_stats, keys) = match staged {
            Ok(s) => s,
            Err(e) => {
                data.abort();
                rejects.abort();
                abort_tables(tables);
                return Err(e);
            }
        };
        let read = match read {
            Ok(r) => r,
            Err(e) => {
                data.abort();
                rejects.abort();
                abort_tables(tables);
                return Err(e);
            }
        };
        stats.records_in = read.records + read.rejected;
        stats.input_bytes = read.bytes;
        stats.stages = stage_stats;
        if spec.record_sources {
            stats.sources = spec
                .inputs
                .iter()
                .map(|i| (crate::records::file_key(&i.uri), i.uri.clone()))
                .collect();
        }
        let outputs = data.finish()?;
        let rejects = rejects.finish()?;
        let mut table_files = Vec::new();
        for (st, t) in spec.stages.iter().zip(tables) {
            if let Some(t) = t {
                table_files.push((st.name.clone(), t.finish()?));
            }
        }
        stats.output_bytes = outputs.iter().map(|f| f.bytes).sum();
        Ok(PipelineOutput {
            outputs,
            rejects,
            tables: table_files,
            stats,
            keys,
        })
    })
}

/// Runs one stage on a batch, catching a panic of its operator. Where the stage may be
/// split, each record runs alone: those that panic alone are quarantined as
/// `operator_panic` rejects (with the message) and the others run again as one batch.
/// A stage that must see whole batches, a panic no single record causes, or a panic
/// of the rest fails the task with the panic's message.
type Guarded = (RecordBatch, Vec<Reject>, Vec<RecordBatch>);

/// Also returns the side table rows of the records it ran (those of a run that
/// panicked, and of the single-record probes, are dropped).
fn run_guarded(
    st: &BoundStage,
    batch: RecordBatch,
    keep_records: bool,
    stat: &mut StageStats,
) -> Result<Guarded, PipelineError> {
    let run = |b: RecordBatch, observe: &mut dyn FnMut(&RecordBatch, Option<RecordBatch>)| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            ops::run_stage_observed(
                &st.name,
                st.op.as_ref(),
                b,
                &st.out_schema,
                keep_records,
                observe,
            )
        }))
        .map_err(|p| PipelineError::OperatorPanicked {
            stage: st.name.clone(),
            message: panic_message(p.as_ref()),
        })
    };
    let mut rows = Vec::new();
    let first = match run(batch.clone(), &mut |b, t| {
        observe(b, st, stat);
        rows.extend(t);
    }) {
        Ok(r) => {
            let (kept, rejects) = r?;
            return Ok((kept, rejects, rows));
        }
        Err(e) => e,
    };
    rows.clear();
    if !st.op.splittable() {
        return Err(first);
    }
    let mut bad = Vec::new();
    for row in 0..batch.num_rows() {
        if let Err(PipelineError::OperatorPanicked { message, .. }) =
            run(batch.slice(row, 1), &mut |_, _| {})
        {
            bad.push((row, message));
        }
    }
    // Nothing singled out, or every record of a batch of several (an operator broken
    // for all input, not a few hostile records): the task fails with the message,
    // rather than turning the whole dataset into rejects under a green job.
    if bad.is_empty() || (batch.num_rows() > 1 && bad.len() == batch.num_rows()) {
        return Err(first);
    }
    tracing::warn!(
        stage = %st.name,
        records = bad.len(),
        error = %first,
        "operator panicked; the records it panics on are quarantined as operator_panic"
    );
    let mut mask = vec![true; batch.num_rows()];
    for (row, _) in &bad {
        mask[*row] = false;
    }
    let op_err = |e: arrow_schema::ArrowError| ops::OpError {
        operator: st.name.clone(),
        message: e.to_string(),
        retryable: false,
    };
    let dropped = arrow_select::filter::filter_record_batch(
        &batch,
        &arrow_array::BooleanArray::from(mask.iter().map(|k| !k).collect::<Vec<_>>()),
    )
    .map_err(op_err)?;
    let ids = dropped
        .column_by_name(crate::records::ID)
        .and_then(|c| c.as_any().downcast_ref::<arrow_array::StringArray>())
        .cloned();
    let mut records = if keep_records {
        crate::records::rows_as_json(&dropped)
    } else {
        vec![]
    }
    .into_iter();
    let mut rejects: Vec<Reject> = bad
        .into_iter()
        .enumerate()
        .map(|(i, (_, message))| Reject {
            id: ids
                .as_ref()
                .map(|a| a.value(i).to_string())
                .unwrap_or_default(),
            reason: OPERATOR_PANIC.to_string(),
            operator: st.name.clone(),
            detail: Some(message),
            record: records.next(),
        })
        .collect();
    let rest =
        arrow_select::filter::filter_record_batch(&batch, &arrow_array::BooleanArray::from(mask))
            .map_err(op_err)?;
    if rest.num_rows() == 0 {
        return Ok((RecordBatch::new_empty(st.out_schema.clone()), rejects, rows));
    }
    let (kept, rj) = run(rest, &mut |b, t| {
        observe(b, st, stat);
        rows.extend(t);
    })??;
    rejects.extend(rj);
    Ok((kept, rejects, rows))
}

/// Adds a batch (the stage's columns added, nothing dropped yet) to the stage's
/// histograms and totals.
fn observe(b: &RecordBatch, st: &BoundStage, stat: &mut StageStats) {
    record_histograms(b, &st.histograms, &mut stat.histograms);
    for t in &st.totals {
        record_total(b, t, stat.totals.entry(t.column.clone()).or_default());
    }
}

/// Adds the values of `t.column` (integers; nulls skipped) to its total, per value of
/// each `by` column and per source (the file key that starts each record id).
fn record_total(b: &RecordBatch, t: &ops::Total, out: &mut crate::protocol::records::ColumnTotal) {
    use crate::protocol::records::{BY_SOURCE, NO_GROUP};
    let Some(v) = b
        .column_by_name(&t.column)
        .and_then(|c| arrow_cast::cast(c, &arrow_schema::DataType::UInt64).ok())
    else {
        return;
    };
    let v = v
        .as_any()
        .downcast_ref::<arrow_array::UInt64Array>()
        .expect("cast to UInt64");
    let strings = |name: &str| {
        b.column_by_name(name)
            .and_then(|c| arrow_cast::cast(c, &arrow_schema::DataType::Utf8).ok())
    };
    let mut groups: Vec<(&str, arrow_array::ArrayRef)> =
        t.by.iter()
            .filter_map(|g| Some((g.as_str(), strings(g)?)))
            .collect();
    if t.by_source
        && let Some(ids) = strings(crate::records::ID)
    {
        groups.push((BY_SOURCE, ids));
    }
    for (row, x) in v.iter().enumerate() {
        let Some(x) = x else { continue };
        out.sum += x;
        out.records += 1;
        for (name, col) in &groups {
            let col = col
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .expect("cast to Utf8");
            let key = if col.is_null(row) {
                NO_GROUP
            } else if *name == BY_SOURCE {
                let id = col.value(row);
                id.get(..16).unwrap_or(id)
            } else {
                col.value(row)
            };
            let m = out.by.entry(name.to_string()).or_default();
            match m.get_mut(key) {
                Some(s) => *s += x,
                None => {
                    m.insert(key.to_string(), x);
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Output, ProcessError, SchemaError};
    use arrow_array::UInt64Array;
    use arrow_schema::{DataType, Field, Schema};

    /// Text lengths; panics on a batch holding `needle`, or on any batch of more than
    /// one record when `needle` is empty (a panic no single record causes).
    struct Fragile(&'static str);

    impl Operator for Fragile {
        fn output_fields(&self, _input: &Schema) -> Result<Vec<Field>, SchemaError> {
            Ok(vec![Field::new("n", DataType::UInt64, true)])
        }
        fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
            let texts = ops::text_values(batch, "text")?;
            if self.0.is_empty() && batch.num_rows() > 1 {
                panic!("batch too big at {:p}", batch);
            }
            if !self.0.is_empty() && texts.iter().flatten().any(|t| t.contains(self.0)) {
                panic!("cannot measure {:?} at {:p}", self.0, batch);
            }
            let n: UInt64Array = texts.iter().map(|t| t.map(|t| t.len() as u64)).collect();
            Ok(Output::columns(vec![Arc::new(n)]))
        }
    }

    fn stage(op: Fragile) -> BoundStage {
        let input = ops::testing::text_batch(&[]).schema();
        BoundStage {
            name: "fragile".into(),
            out_schema: ops::output_schema(&op, &input).unwrap(),
            op: Arc::new(op),
            then_keep: None,
            histograms: vec![],
            totals: vec![],
        }
    }

    #[test]
    fn records_that_panic_alone_are_quarantined_and_the_rest_run_on() {
        let batch = ops::testing::text_batch(&[Some("ok"), Some("bad!"), None, Some("fine")]);
        let mut h = Default::default();
        let (kept, rejects, _) = run_guarded(&stage(Fragile("bad")), batch, true, &mut h).unwrap();
        assert_eq!(strings(&kept, "id"), ["r0", "r2", "r3"]);
        assert_eq!(rejects.len(), 1);
        let r = &rejects[0];
        assert_eq!((r.id.as_str(), r.reason.as_str()), ("r1", OPERATOR_PANIC));
        assert_eq!(r.operator, "fragile");
        // The message without the address, which differs between runs.
        assert_eq!(r.detail.as_deref(), Some("cannot measure \"bad\" at 0x…"));
        assert!(r.record.as_deref().unwrap().contains("bad!"));
    }

    #[test]
    fn a_panic_no_single_record_causes_fails_the_stage_with_a_stable_message() {
        let batch = ops::testing::text_batch(&[Some("a"), Some("b")]);
        let mut h = Default::default();
        match run_guarded(&stage(Fragile("")), batch, true, &mut h) {
            Err(e @ PipelineError::OperatorPanicked { .. }) => {
                assert_eq!(
                    e.to_string(),
                    "operator fragile panicked: batch too big at 0x…"
                )
            }
            other => panic!("expected a failed stage, got {other:?}"),
        }
    }

    #[test]
    fn an_operator_that_panics_on_every_record_fails_the_stage() {
        // Every record panics on its own: a broken operator, not hostile records. The
        // task fails instead of turning the whole batch into rejects.
        let batch = ops::testing::text_batch(&[Some("x1"), Some("x2"), Some("x3")]);
        let mut h = Default::default();
        assert!(matches!(
            run_guarded(&stage(Fragile("x")), batch, true, &mut h),
            Err(PipelineError::OperatorPanicked { .. })
        ));
        // A one-record batch that panics is that record's: quarantined.
        let batch = ops::testing::text_batch(&[Some("x1")]);
        let (kept, rejects, _) = run_guarded(&stage(Fragile("x")), batch, true, &mut h).unwrap();
        assert_eq!((kept.num_rows(), rejects.len()), (0, 1));
    }

    fn strings(b: &RecordBatch, col: &str) -> Vec<String> {
        let a = b
            .column_by_name(col)
            .unwrap()
            .as_any()
            .downcast_ref::<arrow_array::StringArray>()
            .unwrap();
        (0..a.len()).map(|i| a.value(i).to_string()).collect()
    }
}
