//! What a planned job will cost before it runs, for `mdf plan`: the task split,
//! requests per phase (with their price bound) and a worker's peak memory. Reads only
//! operator asset sizes (HEAD); writes nothing.
use super::plan::Plan;
use crate::protocol::records::PhaseKind;
use crate::spec::Spec;
use crate::store::Registry;

/// Requests S3 charges at most for a PUT, per 1,000 (all requests are counted as PUTs).
pub const PUT_PRICE_PER_1K: f64 = 0.005;

/// The requests of a planned job.
#[derive(Debug, Clone, PartialEq)]
pub struct Requests {
    /// Per phase, in plan order: its requests.
    pub phases: Vec<u64>,
    /// The finalize task: one GET per commit record, publishing, the manifest.
    pub finalize: u64,
    pub total: u64,
}

impl Requests {
    /// An upper bound of their price in dollars.
    pub fn price_bound(&self) -> f64 {
        self.total as f64 * PUT_PRICE_PER_1K / 1000.0
    }
}

/// Requests per phase: a map task ~8 (docs/PERFORMANCE.md: 7.8 amortised, with
/// listing), a reduce task 2 ranged GETs per map task, an apply task 2 per reduce
/// task; the finalize task one GET per commit.
pub fn requests(p: &Plan) -> Requests {
    let mut phases = Vec::with_capacity(p.phases.len());
    let mut tasks_total = 0u64;
    for (i, ph) in p.phases.iter().enumerate() {
        let per = match ph.kind {
            PhaseKind::Map => 8,
            PhaseKind::Reduce | PhaseKind::Propagate => 8 + 2 * p.phases[i - 1].tasks,
            PhaseKind::Apply => 8 + 2 * p.phases[i - 1].tasks,
        };
        phases.push(per * ph.tasks);
        tasks_total += ph.tasks;
    }
    let finalize = tasks_total + 10;
    let total = phases.iter().sum::<u64>() + finalize;
    Requests {
        phases,
        finalize,
        total,
    }
}

/// The input bytes of each task of the first phase, smallest first.
pub fn task_sizes(p: &Plan) -> Vec<u64> {
    // A task that cannot be read back from planning's local sort counts as empty.
    let mut v: Vec<u64> = p
        .first_tasks()
        .into_iter()
        .flatten()
        .map(|t| t.map_or(0, |t| t.inputs.iter().map(|s| s.end - s.start).sum()))
        .collect();
    v.sort_unstable();
    v
}

/// A worker's memory at most, by part, in bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Memory {
    /// The pipeline's bounded channels (reader → stages → writer).
    pub pipeline: u64,
    /// A row group being written.
    pub row_group: u64,
    /// The largest dedup reduce buffer of the job's phases.
    pub dedup: u64,
    /// Operator assets on disk (held at about 4× that in memory).
    pub assets_on_disk: u64,
    /// A task's share of the process-wide image decode cache, when an image stage runs.
    pub image_cache: u64,
}

impl Memory {
    /// What the assets take in memory.
    pub fn assets(&self) -> u64 {
        self.assets_on_disk * 4
    }

    /// Everything, plus 64 MiB for the rest of the process.
    pub fn total(&self) -> u64 {
        self.pipeline + self.row_group + self.dedup + self.assets() + self.image_cache + (64 << 20)
    }
}

/// A worker's memory at most for the planned job; asset sizes by HEAD (an asset that
/// cannot be read counts 0: the plan already checked them).
pub async fn memory(spec: &Spec, p: &Plan, reg: &Registry) -> Memory {
    let j = &spec.job;
    let pipeline = (2 * j.channel_batches + 3) as u64 * j.batch_bytes as u64;
    let row_group = spec.output.row_group_rows as u64 * 2048;
    let dedup = p
        .phases
        .iter()
        .filter_map(|ph| ph.dedup.as_ref())
        .map(|d| d.params.memory_bytes)
        .max()
        .unwrap_or(0);
    let mut assets_on_disk = 0u64;
    for stage in crate::ops::stage_assets(spec) {
        for asset in stage {
            if let Ok((store, u)) = reg.resolve(&asset.uri)
                && let Ok(m) = object_store::ObjectStoreExt::head(store.as_ref(), &u.path).await
            {
                assets_on_disk += m.size;
            }
        }
    }
    // Image stages share one process-wide decode cache.
    let images = spec
        .stages
        .iter()
        .any(|s| matches!(s.op.as_str(), "image_quality" | "image_hash"));
    let image_cache = if images {
        crate::ops::image_decode_cache_bytes() as u64
    } else {
        0
    };
    Memory {
        pipeline,
        row_group,
        dedup,
        assets_on_disk,
        image_cache,
    }
}
