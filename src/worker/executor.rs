//! What a task of each phase kind does between taking its lease and committing: one
//! [`PhaseExecutor`] per [`PhaseKind`], chosen from the phase's plan by
//! [`for_phase`]. A records phase runs the stage pipeline over its input slices or
//! its upstream task's files (and, before a dedup's reduce, writes the keys object);
//! an exact reduce and a near-duplicate step run the dedup subsystem's tasks; an
//! apply phase reads its map task's decisions and runs the dedup filter as the first
//! stage of its pipeline. Executors never lease, commit or publish: `task::run`
//! does, whatever the kind.
//!
//! Adding a phase kind: a variant of `PhaseKind` (persisted, so versioned), one
//! executor here, one arm in [`for_phase`].
use super::WorkerCtx;
use super::attempt::{Attempt, Produced, TaskError};
use super::pipeline::{self, BoundStage, PipelineError, PipelineSpec};
use crate::dedup::{self, ShuffleCtx};
use crate::protocol::io::get_json;
use crate::protocol::records::{
    CommitRecord, InputSlice, OutputFile, PhaseKind, PhasePlan, TableFile, TaskManifest, TaskStats,
    TaskStatus,
};
use crate::spec::Format;
use crate::store::{Registry, Uri};
use arrow_schema::SchemaRef;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// One attempt of one task, as its executor sees it.
pub(super) struct TaskRun<'a> {
    pub ctx: &'a Arc<WorkerCtx>,
    /// Stores counting into the task's request counters.
    pub reg: &'a Registry,
    /// The job's store.
    pub store: &'a Arc<dyn object_store::ObjectStore>,
    pub phase: usize,
    pub phase_name: &'a str,
    pub task: &'a str,
    pub attempt: &'a str,
    pub cancel: Arc<AtomicBool>,
    pub manifest: TaskManifest,
    /// Task ids per phase, a sharded phase's read if this task needs them.
    pub ids: Arc<Vec<Vec<String>>>,
}

impl TaskRun<'_> {
    fn plan(&self) -> &PhasePlan {
        &self.ctx.job.manifest.phases[self.phase]
    }

    /// Where the attempt stages what it writes.
    fn out_dir(&self) -> Uri {
        self.ctx
            .job
            .paths
            .attempt_dir(self.phase_name, self.task, self.attempt)
    }

    fn shuffle(&self) -> ShuffleCtx<'_> {
        ShuffleCtx {
            job: &self.ctx.job,
            retry: &self.ctx.retry,
            reg: self.reg,
            store: self.store,
            commits: &self.ctx.commits,
            task_ids: &self.ids,
        }
    }
}

/// Runs one task of a phase kind to the point of committing.
#[async_trait::async_trait]
pub(super) trait PhaseExecutor: Send + Sync {
    /// The kind's name, for logs and tests.
    fn name(&self) -> &'static str;
    async fn execute(&self, run: &TaskRun<'_>) -> Attempt;
}

/// The executor of a phase's tasks, from its plan.
pub(super) fn for_phase(plan: &PhasePlan) -> Box<dyn PhaseExecutor> {
    let near = plan.dedup.as_ref().is_some_and(|d| d.params.kind.is_near());
    let semantic = plan
        .dedup
        .as_ref()
        .is_some_and(|d| d.params.kind.is_semantic());
    match plan.kind {
        PhaseKind::Map => Box::new(RecordsPhase),
        PhaseKind::Reduce | PhaseKind::Propagate if semantic => Box::new(SemanticStep),
        PhaseKind::Reduce if !near => Box::new(ExactReduce),
        PhaseKind::Reduce | PhaseKind::Propagate => Box::new(NearStep),
        PhaseKind::Apply => Box::new(ApplyPhase),
    }
}

/// Simulated work, for the fleet simulator (`mdf bench fleet`, docs/SCALE.md): a task
/// takes a virtual-time sleep instead of running its stages, and stages one output
/// object. Everything around it (leases, heartbeats, commits, publishing, finalize) is
/// the real protocol.
#[derive(Debug, Clone)]
pub struct SimulatedWork {
    /// Median seconds of a task's work.
    pub work_secs: f64,
    /// σ of its log-normal spread across tasks (0: every task the same).
    pub sigma: f64,
    /// Bytes of the one output object a task stages.
    pub output_bytes: u64,
    /// Rows the output object counts.
    pub rows: u64,
    /// The output object's bytes, allocated once: every task stages the same.
    pub body: bytes::Bytes,
    /// How often a simulated worker looks at its shutdown flag while it renews or waits
    /// idle, where a real worker looks every 200–500 ms. The simulator stops a worker
    /// by dropping it, never by that flag; every look is a wake-up in virtual time,
    /// which at 10,000 workers were some 60,000 a simulated second and most of the
    /// simulation's CPU (docs/SCALE.md). Renewals keep their exact schedule.
    pub flag_poll: std::time::Duration,
}

impl SimulatedWork {
    pub fn new(work_secs: f64, sigma: f64, output_bytes: u64) -> Self {
        SimulatedWork {
            work_secs,
            sigma,
            output_bytes,
            rows: 1,
            body: bytes::Bytes::from(vec![0u8; output_bytes as usize]),
            flag_poll: std::time::Duration::from_secs(5),
        }
    }

    /// How long `task` works: fixed by its id, so every attempt of it takes the same.
    pub fn duration(&self, task: &str) -> std::time::Duration {
        let h = crate::protocol::hash16(&[task]);
        let a = u64::from_str_radix(&h[..8], 16).unwrap_or(0) as f64 / 4294967296.0;
        let b = u64::from_str_radix(&h[8..16], 16).unwrap_or(0) as f64 / 4294967296.0;
        // Box–Muller over the id's two uniform halves.
        let z = (-2.0 * a.max(1e-12).ln()).sqrt() * (2.0 * std::f64::consts::PI * b).cos();
        std::time::Duration::from_secs_f64(self.work_secs * (self.sigma * z).exp())
    }
}

/// The executor of every phase under simulation.
pub(super) struct Simulated(pub SimulatedWork);

#[async_trait::async_trait]
impl PhaseExecutor for Simulated {
    fn name(&self) -> &'static str {
        "simulated"
    }
    async fn execute(&self, run: &TaskRun<'_>) -> Attempt {
        let end = tokio::time::Instant::now() + self.0.duration(run.task);
        // Looks at the cancel flag (set by the heartbeat on a fence or shutdown) now and
        // then, as the pipelines look between batches.
        while tokio::time::Instant::now() < end {
            if run.cancel.load(Ordering::Relaxed) {
                return Attempt::Cancelled;
            }
            // Once a second, as before `flag_poll`: a fence found by a renewal (kills,
            // takeovers) stops the simulated work as soon as it stopped before.
            let next = end.min(tokio::time::Instant::now() + std::time::Duration::from_secs(1));
            tokio::time::sleep_until(next).await;
        }
        let uri = run.out_dir().child("part-00000.parquet");
        let body = self.0.body.clone();
        let store = match run.reg.open(&uri) {
            Ok(s) => s,
            Err(e) => {
                return Attempt::Failed(TaskError::Proto(
                    crate::protocol::io::ProtoError::Corrupt {
                        path: uri.to_uri_string(),
                        message: e.to_string(),
                    },
                ));
            }
        };
        let put = run.ctx.retry.run(|| {
            use object_store::ObjectStoreExt;
            store.put(&uri.path, body.clone().into())
        });
        if let Err(e) = put.await {
            let e = crate::protocol::io::ProtoError::store(&uri.path, e);
            return Attempt::Failed(TaskError::Proto(e));
        }
        Attempt::Done(Box::new(Produced {
            outputs: vec![OutputFile {
                uri: uri.to_uri_string(),
                rows: self.0.rows,
                bytes: self.0.output_bytes,
                blake3: String::new(),
            }],
            rejects: vec![],
            tables: vec![],
            stats: TaskStats {
                records_in: self.0.rows,
                records_out: self.0.rows,
                output_bytes: self.0.output_bytes,
                ..Default::default()
            },
            shuffle: None,
            changed: None,
        }))
    }
}

/// Stages over the records of input slices (phase 0) or of the upstream task.
struct RecordsPhase;

#[async_trait::async_trait]
impl PhaseExecutor for RecordsPhase {
    fn name(&self) -> &'static str {
        "records"
    }
    async fn execute(&self, run: &TaskRun<'_>) -> Attempt {
        let plan = run.plan();
        let stages = run.ctx.stages[run.phase].clone();
        let input_schema = Arc::new(plan.input_schema.clone());
        records(run, stages, input_schema, run.phase.saturating_sub(1)).await
    }
}

/// Dedup pass 2, exact keys: one key range, one decisions object.
struct ExactReduce;

#[async_trait::async_trait]
impl PhaseExecutor for ExactReduce {
    fn name(&self) -> &'static str {
        "exact reduce"
    }
    async fn execute(&self, run: &TaskRun<'_>) -> Attempt {
        let done = dedup::reduce::reduce(
            &run.shuffle(),
            run.phase,
            run.task,
            &run.out_dir(),
            &run.cancel,
        )
        .await
        .map(|(f, s)| (Some(f), s, None));
        shuffled(run, done)
    }
}

/// Near duplicates: the candidates reduce or one label-propagation step.
struct NearStep;

#[async_trait::async_trait]
impl PhaseExecutor for NearStep {
    fn name(&self) -> &'static str {
        "near-duplicate step"
    }
    async fn execute(&self, run: &TaskRun<'_>) -> Attempt {
        let done = dedup::propagate::near_step(
            &run.shuffle(),
            run.phase,
            run.task,
            &run.out_dir(),
            &run.cancel,
        )
        .await;
        shuffled(run, done)
    }
}

/// Semantic dedup: the centroids, an assignment or a reduce task.
struct SemanticStep;

#[async_trait::async_trait]
impl PhaseExecutor for SemanticStep {
    fn name(&self) -> &'static str {
        "semantic dedup step"
    }
    async fn execute(&self, run: &TaskRun<'_>) -> Attempt {
        let done = dedup::semantic::semantic_step(
            &run.shuffle(),
            run.phase,
            run.task,
            &run.out_dir(),
            &run.cancel,
        )
        .await
        .map(|(f, s)| (Some(f), s, None));
        shuffled(run, done)
    }
}

/// A shuffle task's result as an attempt: its object (none: skipped) and stats.
fn shuffled(
    run: &TaskRun<'_>,
    done: Result<(Option<OutputFile>, TaskStats, Option<u64>), dedup::DedupError>,
) -> Attempt {
    match done {
        Ok((file, stats, changed)) => Attempt::Done(Box::new(Produced {
            outputs: vec![],
            rejects: vec![],
            tables: vec![],
            stats,
            shuffle: file,
            changed,
        })),
        Err(_) if run.cancel.load(Ordering::Relaxed) => Attempt::Cancelled,
        Err(e) => Attempt::Failed(e.into()),
    }
}

/// Dedup finalisation: the map task's records through the dedup filter (its
/// decisions, read here), then the stages after the dedup stage.
struct ApplyPhase;

#[async_trait::async_trait]
impl PhaseExecutor for ApplyPhase {
    fn name(&self) -> &'static str {
        "apply"
    }
    async fn execute(&self, run: &TaskRun<'_>) -> Attempt {
        let plan = run.plan();
        let Some(d) = &plan.dedup else {
            return Attempt::Failed(TaskError::NoDedupPlan(plan.name.clone()));
        };
        let Some(up) = run.manifest.upstream.first() else {
            return Attempt::Failed(TaskError::NoMapTask(run.task.to_string()));
        };
        let filter = match dedup::apply::filter_for(&run.shuffle(), d, up).await {
            Ok(f) => f,
            Err(e) => return Attempt::Failed(e.into()),
        };
        // Its records are the map task's (the phase before the reduce).
        let input_schema = Arc::new(
            run.ctx.job.manifest.phases[d.map_phase]
                .output_schema
                .clone(),
        );
        let mut stages = vec![BoundStage {
            name: d.stage.clone(),
            histograms: crate::ops::histogram_columns(filter.as_ref(), &input_schema),
            totals: filter.totals(),
            op: filter,
            out_schema: Arc::new(plan.input_schema.clone()),
            then_keep: None,
        }];
        stages.extend(run.ctx.stages[run.phase].iter().cloned());
        records(run, stages, input_schema, d.map_phase).await
    }
}

/// Runs `stages` over the task's input slices (phase 0) or the committed files of
/// its upstream tasks in `upstream_phase`; a phase ending in a dedup stage also
/// writes its keys object.
async fn records(
    run: &TaskRun<'_>,
    stages: Vec<BoundStage>,
    input_schema: SchemaRef,
    upstream_phase: usize,
) -> Attempt {
    let (ctx, phase) = (run.ctx, run.phase);
    let job = &ctx.job;
    let plan = run.plan();
    let inputs: Vec<InputSlice> = if phase == 0 {
        run.manifest.inputs.clone()
    } else {
        let mut v = Vec::new();
        for up in &run.manifest.upstream {
            let prev = &job.manifest.phases[upstream_phase].name;
            match get_json::<CommitRecord>(
                run.store.as_ref(),
                &job.paths.commit(prev, up),
                &ctx.retry,
            )
            .await
            {
                Ok(Some(r)) if r.status == TaskStatus::Committed => {
                    if let Some(bad) = r.outputs.iter().find_map(|f| {
                        job.paths
                            .check_file(
                                &f.uri,
                                r.reused_from.as_deref(),
                                job.manifest.reused_from.as_deref(),
                            )
                            .err()
                    }) {
                        return Attempt::Failed(TaskError::StaleInput(bad));
                    }
                    v.extend(r.outputs.iter().map(|f| InputSlice {
                        uri: f.uri.clone(),
                        size: f.bytes,
                        etag: None,
                        format: Format::Parquet,
                        start: 0,
                        end: f.bytes,
                    }));
                }
                Ok(Some(r)) => {
                    return Attempt::Failed(TaskError::UpstreamFailed {
                        phase: prev.clone(),
                        task: up.clone(),
                        error: r.error.unwrap_or_default(),
                    });
                }
                Ok(None) => {
                    return Attempt::Failed(TaskError::UpstreamNotCommitted {
                        phase: prev.clone(),
                        task: up.clone(),
                    });
                }
                Err(e) => return Attempt::Failed(e.into()),
            }
        }
        v
    };
    let spec = &job.spec;
    let last = plan.last;
    // A phase ending in a dedup stage writes keys for the next (reduce) phase.
    let keys_of = job
        .manifest
        .phases
        .get(phase + 1)
        .filter(|p| p.kind == PhaseKind::Reduce)
        .and_then(|p| p.dedup.clone());
    let props = crate::io::write::parquet::properties(&spec.output);
    let pspec = PipelineSpec {
        registry: run.reg.clone(),
        handle: tokio::runtime::Handle::current(),
        inputs,
        input_schema,
        assign_ids: phase == 0,
        download: spec.input.download.clone(),
        stages,
        output_schema: Arc::new(plan.output_schema.clone()),
        out_dir: run.out_dir(),
        props: props.clone(),
        data_props: if last {
            props
        } else {
            crate::io::write::parquet::intermediate_properties(&spec.output)
        },
        target_file_bytes: if last {
            spec.output.target_file_bytes
        } else {
            spec.output.target_file_bytes.min(256 << 20)
        },
        // Intermediate phases stage Parquet; the last writes the output format.
        writer: match crate::io::write::writer(if last {
            spec.output.format
        } else {
            crate::spec::OutputFormat::Parquet
        }) {
            Ok(w) => w,
            Err(e) => return Attempt::Failed(TaskError::Output(e)),
        },
        task: run.task.to_string(),
        tokens: if last {
            spec.output.tokens.clone()
        } else {
            None
        },
        jsonl: match &spec.output.jsonl {
            Some(j) if last => {
                let mut j = j.clone();
                j.source.get_or_insert_with(|| spec.name.clone());
                if j.created.is_none() {
                    j.created = ["created", "warc_date", "date"]
                        .into_iter()
                        .find(|c| plan.output_schema.field_with_name(c).is_ok())
                        .map(str::to_string);
                }
                Some(j)
            }
            _ => None,
        },
        webdataset: match &spec.output.webdataset {
            Some(w) if last => {
                let mut w = w.clone();
                if w.caption.is_none() {
                    w.caption = ["caption", "text"]
                        .into_iter()
                        .find(|c| {
                            plan.output_schema
                                .field_with_name(c)
                                .is_ok_and(|f| f.data_type() == &arrow_schema::DataType::Utf8)
                        })
                        .map(str::to_string);
                }
                Some(w)
            }
            _ => None,
        },
        created_ms: run.ctx.job.manifest.created_ms,
        limit: if phase == 0 { spec.input.limit } else { None },
        batch_rows: spec.job.batch_rows,
        batch_bytes: spec.job.batch_bytes,
        channel_batches: spec.job.channel_batches,
        max_record_bytes: spec.input.max_record_bytes as usize,
        keep_rejected_records: spec.rejects.include_record,
        cancel: run.cancel.clone(),
        keys: keys_of.as_ref().map(|d| {
            let params = dedup::DedupParams::from(&d.params);
            pipeline::KeysSpec {
                entry: dedup::keys::entry_size(&params, &plan.output_schema),
                params,
                partitions: d.partitions,
            }
        }),
        // Per-source totals name input files, which only the tasks reading them know.
        record_sources: phase == 0
            && run
                .ctx
                .stages
                .iter()
                .flatten()
                .any(|s| s.totals.iter().any(|t| t.by_source)),
    };
    match tokio::task::spawn_blocking(move || pipeline::run(pspec)).await {
        Ok(Ok(out)) => {
            // Pass 1 of a dedup: the keys object, beside the staged records.
            let shuffle = match out.keys {
                Some(keys) => match dedup::shuffle::write_keys(run.reg, &run.out_dir(), keys).await
                {
                    Ok(f) => Some(f),
                    Err(e) => return Attempt::Failed(e.into()),
                },
                None => None,
            };
            Attempt::Done(Box::new(Produced {
                outputs: out.outputs,
                rejects: out.rejects,
                tables: out
                    .tables
                    .into_iter()
                    .flat_map(|(table, files)| {
                        files.into_iter().map(move |file| TableFile {
                            table: table.clone(),
                            file,
                        })
                    })
                    .collect(),
                stats: out.stats,
                shuffle,
                changed: None,
            }))
        }
        Ok(Err(
            PipelineError::Cancelled | PipelineError::Read(crate::io::read::ReadError::Cancelled),
        )) => Attempt::Cancelled,
        Ok(Err(e)) => Attempt::Failed(e.into()),
        // The panic's message, not tokio's (whose task id differs on every attempt).
        Err(e) => Attempt::Failed(TaskError::Panicked(pipeline::join_error("the pipeline", e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::records::{DedupPhase, DedupPhaseKeep, DedupPhaseKind, DedupPhaseParams};
    use arrow_schema::Schema;

    fn phase(kind: PhaseKind, dedup: Option<DedupPhaseKind>) -> PhasePlan {
        PhasePlan {
            name: "p01".into(),
            fingerprint: "fp".into(),
            stages: vec![],
            input_schema: Schema::empty(),
            output_schema: Schema::empty(),
            last: false,
            gpu: false,
            tasks: 1,
            kind,
            dedup: dedup.map(|kind| DedupPhase {
                stage: "dedup".into(),
                params: DedupPhaseParams {
                    key: "k".into(),
                    keep: DedupPhaseKeep::LowestId,
                    partitions: None,
                    memory_bytes: 1 << 20,
                    cluster_column: false,
                    against: None,
                    kind,
                    max_rounds: 4,
                },
                partitions: 2,
                map_phase: 0,
                step: 0,
                against_identity: None,
            }),
            task_digest: None,
            shard_digits: 0,
        }
    }

    /// Each phase kind gets its executor; a reduce phase's follows the dedup's kind.
    #[test]
    fn the_executor_follows_the_phase_kind() {
        let phash = || Some(DedupPhaseKind::Phash { radius: 2 });
        let exact = || Some(DedupPhaseKind::Exact);
        let cases = [
            (phase(PhaseKind::Map, None), "records"),
            (phase(PhaseKind::Reduce, exact()), "exact reduce"),
            (phase(PhaseKind::Reduce, phash()), "near-duplicate step"),
            (phase(PhaseKind::Propagate, phash()), "near-duplicate step"),
            (phase(PhaseKind::Apply, exact()), "apply"),
            (phase(PhaseKind::Apply, phash()), "apply"),
        ];
        for (p, want) in cases {
            assert_eq!(for_phase(&p).name(), want, "{:?}", p.kind);
        }
    }

    /// Whether a failure is retried is a property of the error: a failed upstream
    /// task, clusters that did not converge, an input that changed since planning,
    /// a missing manifest fail the task at once; storage errors and the like count
    /// towards `job.max_attempts`.
    #[test]
    fn retrying_is_a_property_of_the_error() {
        let fatal = [
            // An operator's deterministic failure repeats on every attempt.
            TaskError::Pipeline(PipelineError::Op(crate::ops::OpError::process(
                "lengths",
                &crate::ops::ProcessError::MissingColumn("text".into()),
            ))),
            TaskError::LostTooOften(3),
            TaskError::NoMapTask("t".into()),
            TaskError::UpstreamFailed {
                phase: "p00".into(),
                task: "t".into(),
                error: "boom".into(),
            },
            TaskError::Dedup(dedup::DedupError::NotConverged {
                max_rounds: 2,
                changed: 1,
                stage: "near".into(),
            }),
            TaskError::Pipeline(PipelineError::Read(crate::io::read::ReadError::Changed {
                uri: "u".into(),
                message: "etag".into(),
            })),
        ];
        for e in fatal {
            assert!(!e.is_retryable(), "{e}");
        }
        let retried = [
            TaskError::UpstreamNotCommitted {
                phase: "p00".into(),
                task: "t".into(),
            },
            TaskError::Dedup(dedup::DedupError::Plan("x".into())),
            TaskError::Panicked("the pipeline panicked: x".into()),
            // One worker's expired credentials (S3's 403) or a record only a newer
            // worker decodes: another worker may get past it.
            TaskError::Proto(crate::protocol::io::ProtoError::Store {
                path: "jobs/j/commits/p00/t.json".into(),
                source: object_store::Error::PermissionDenied {
                    path: "jobs/j/commits/p00/t.json".into(),
                    source: "expired token".into(),
                },
            }),
            TaskError::Proto(crate::protocol::io::ProtoError::Corrupt {
                path: "jobs/j/commits/p00/t.json".into(),
                message: "written by a newer mdf".into(),
            }),
            // A worker built without the output's writer: one with it may take the task.
            TaskError::Output(crate::io::write::WriteError::Unsupported { format: "lance" }),
            // A model runtime's failure may pass on another attempt (device memory).
            TaskError::Pipeline(PipelineError::Op(crate::ops::OpError::process(
                "embed",
                &crate::ops::ProcessError::Model(crate::ops::ModelError::Inference(
                    "CUDA out of memory".into(),
                )),
            ))),
        ];
        for e in retried {
            assert!(e.is_retryable(), "{e}");
        }
        assert_eq!(
            TaskError::UpstreamFailed {
                phase: "p00".into(),
                task: "t".into(),
                error: "boom".into(),
            }
            .to_string(),
            "upstream task p00/t failed: boom"
        );
    }
}
