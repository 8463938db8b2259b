//! Persisted records of the job protocol (docs/PROTOCOL.md §1). Every record carries
//! `version`; readers accept every version up to [`VERSION`] and refuse newer ones
//! with a clear error. Fixtures in `tests/fixtures/v1/` pin the format.
use crate::spec::Format;
use crate::store::RequestSnapshot;
use arrow_schema::Schema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The protocol version this build writes. Version 2 (issue 22): jobs own their output
/// and rejects prefixes through `_mdf_owner.json` markers, pin assets and inputs to
/// their planned etags, and derive dedup fingerprints from the shuffle. A version-1
/// build must not run such a job (its finalize would sweep a shared rejects prefix),
/// so it refuses the records as newer; this build reads version-1 records as before.
pub const VERSION: u32 = 2;

/// The format version of a sharded job's `job.json` and shard records
/// (docs/PROTOCOL.md §1, "Sharded phases"); the newest this build reads.
pub const SHARDED_VERSION: u32 = 3;

/// Name of the phase that publishes the output manifest.
pub const FINALIZE: &str = "finalize";

/// `p00`, `p01`, ...
pub fn phase_name(i: usize) -> String {
    format!("p{i:02}")
}

/// One phase of a planned job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhasePlan {
    pub name: String,
    pub fingerprint: String,
    /// Indices into the spec's `stages`.
    pub stages: Vec<usize>,
    pub input_schema: Schema,
    pub output_schema: Schema,
    /// Whether this phase writes the job's output.
    pub last: bool,
    /// Whether its tasks need a GPU worker.
    pub gpu: bool,
    pub tasks: u64,
    /// What its tasks do (docs/DEDUP.md); absent in v1 records written before dedup.
    #[serde(default, skip_serializing_if = "PhaseKind::is_map")]
    pub kind: PhaseKind,
    /// For the three phases of a dedup stage: its plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup: Option<DedupPhase>,
    /// blake3 of the phase's sorted task ids, one per line (format version 2): a
    /// listing of its task manifests is believed only when it hashes to this, so a
    /// stray manifest (left by a crashed submit of another plan under the same job
    /// id) can never stand in for a planned task that a lagging LIST left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_digest: Option<String>,
    /// Hex digits of a task id that name its shard (format version 3); 0 (absent):
    /// not sharded, laid out as before.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shard_digits: u32,
}

/// The [`PhasePlan::task_digest`] of sorted task ids.
pub fn task_digest<S: AsRef<str>>(sorted_ids: &[S]) -> String {
    let mut h = TaskDigest::default();
    for id in sorted_ids {
        h.add(id.as_ref());
    }
    h.finish()
}

/// [`task_digest`] an id at a time (ids added in sorted order).
pub struct TaskDigest(blake3::Hasher);

impl Default for TaskDigest {
    fn default() -> Self {
        Self(blake3::Hasher::new())
    }
}

impl TaskDigest {
    pub fn add(&mut self, id: impl AsRef<[u8]>) {
        self.0.update(id.as_ref());
        self.0.update(b"\n");
    }
    pub fn finish(&self) -> String {
        self.0.finalize().to_hex().to_string()
    }
}

/// The role of a phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseKind {
    /// Stages over the records of one upstream task (or of input slices).
    #[default]
    Map,
    /// Dedup pass 2: one task per key range, after every map task is terminal.
    Reduce,
    /// Dedup finalisation: one task per map task, after every reduce task is terminal.
    Apply,
    /// Near duplicates: a label-propagation step over the verified record–bucket
    /// graph, one task per partition (`DedupPhase::step` says which).
    Propagate,
}

impl PhaseKind {
    pub fn is_map(&self) -> bool {
        *self == PhaseKind::Map
    }
}

/// A dedup stage as planned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DedupPhase {
    /// The dedup stage's name (the `operator` of `duplicate` rejects).
    pub stage: String,
    pub params: DedupPhaseParams,
    /// Key partitions = reduce tasks.
    pub partitions: u32,
    /// Index of the map phase whose records are deduplicated.
    pub map_phase: usize,
    /// Near duplicates: 0 for the candidates reduce and the apply phase; step `s` ≥ 1
    /// of label propagation in a `Propagate` phase (odd: by record, even: by bucket).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub step: u32,
    /// With `params.against`: the earlier job's identity when this job was planned
    /// (`dedup::plan::against_identity`: its URI, id, spec hash, creation time). A task
    /// reading the earlier job's index checks it, so a job replaced under the same URI
    /// since is refused rather than mixed in. Absent in older jobs (not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against_identity: Option<String>,
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}

/// A dedup stage's parameters as planned into `job.json` (the `params` of
/// [`DedupPhase`]). The protocol owns this layout: the dedup subsystem converts its
/// own parameters into it when planning and back when running a task, so an
/// operator's param struct never becomes part of the persisted format. The JSON is
/// that of format versions 1 and 2 (phase fingerprints and task ids hash it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DedupPhaseParams {
    /// The key column.
    pub key: String,
    pub keep: DedupPhaseKeep,
    /// Reduce tasks as the spec gave them; `None` = `auto` (see [`DedupPhase::partitions`]).
    pub partitions: Option<u32>,
    /// Reduce buffer before sorted runs spill to local disk.
    pub memory_bytes: u64,
    /// Whether the apply phase adds `dup_cluster`.
    pub cluster_column: bool,
    /// An earlier job's URI (incremental dedup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<String>,
    #[serde(default, skip_serializing_if = "DedupPhaseKind::is_exact")]
    pub kind: DedupPhaseKind,
    /// Near duplicates: label-propagation rounds before the job fails.
    #[serde(default = "default_max_rounds")]
    pub max_rounds: u32,
}

fn default_max_rounds() -> u32 {
    32
}

/// Which record of a cluster survives (`keep`): `"lowest_id"` or `{"highest": column}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DedupPhaseKeep {
    LowestId,
    Highest(String),
    /// Semantic dedup: the member most similar to its cluster's centroid.
    NearestCentroid,
}

/// What "duplicate" means (`kind`, absent for exact): `{"type": "minhash", ...}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum DedupPhaseKind {
    #[default]
    Exact,
    Minhash {
        bands: u32,
        rows: u32,
        threshold: f64,
    },
    Phash {
        radius: u32,
    },
    /// Exact substrings (docs/DEDUP.md): windows of `min_tokens` words.
    Substring {
        min_tokens: u32,
        keep_first: bool,
        min_chars: u32,
        /// A token ids column (List<UInt32>, `tokenize` with `ids`) whose tokens the
        /// windows are made of, instead of whitespace words.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<String>,
        /// With `tokens`: the tokens' byte offsets (List<UInt32>, start and end of each
        /// token in turn: `tokenize` with `offsets`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        offsets: Option<String>,
    },
    /// Repeated paragraphs or lines (docs/DEDUP.md): units occurring at least
    /// `min_count` times are cut.
    Paragraph {
        unit: DedupPhaseUnit,
        min_count: u32,
        keep_first: bool,
        normalize: DedupPhaseNormalize,
        min_chars: u32,
    },
    /// Embeddings within cosine distance `eps` (docs/SEMANTIC.md): k-means centroids
    /// (`clusters`, absent = auto) from `sample` vectors, `iterations` at most, the
    /// sample chosen by `seed`. Phases after the map: centroids (step 0, one task),
    /// assign (step 1) and reduce (step 2), one task per partition each.
    Semantic {
        eps: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        clusters: Option<u32>,
        sample: u32,
        iterations: u32,
        seed: u64,
    },
}

/// How a paragraph dedup compares units: `"none"`, `"ccnet"` or `"loose"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DedupPhaseNormalize {
    None,
    Ccnet,
    Loose,
}

/// A paragraph dedup's unit: `"paragraph"` or `"line"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DedupPhaseUnit {
    Paragraph,
    Line,
}

impl DedupPhaseKind {
    pub fn is_exact(&self) -> bool {
        *self == DedupPhaseKind::Exact
    }
    /// Whether `o` makes the same keys (so one job's keys objects are an index for the
    /// other's `against`): exact keys, or the same near kind with the same band layout.
    /// A MinHash threshold may differ (the later job verifies with its own).
    pub fn same_bands(&self, o: &DedupPhaseKind) -> bool {
        match (self, o) {
            (DedupPhaseKind::Exact, DedupPhaseKind::Exact) => true,
            (
                DedupPhaseKind::Minhash { bands, rows, .. },
                DedupPhaseKind::Minhash {
                    bands: b2,
                    rows: r2,
                    ..
                },
            ) => (bands, rows) == (b2, r2),
            (DedupPhaseKind::Phash { radius }, DedupPhaseKind::Phash { radius: r2 }) => {
                radius == r2
            }
            _ => false,
        }
    }
    /// Embeddings by k-means clusters (docs/SEMANTIC.md).
    pub fn is_semantic(&self) -> bool {
        matches!(self, DedupPhaseKind::Semantic { .. })
    }
    /// Reduced by label propagation (MinHash, phash): the near-duplicate phases.
    pub fn is_near(&self) -> bool {
        matches!(
            self,
            DedupPhaseKind::Minhash { .. } | DedupPhaseKind::Phash { .. }
        )
    }
}

/// `jobs/<id>/job.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobManifest {
    pub version: u32,
    pub job_id: String,
    pub spec_hash: String,
    /// The resolved spec tree (overrides and interpolation applied).
    pub spec: serde_json::Value,
    pub mdf_version: String,
    pub created_ms: u64,
    pub output_uri: String,
    pub rejects_uri: String,
    pub phases: Vec<PhasePlan>,
    pub finalize_task: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused_from: Option<String>,
    /// The output and rejects prefixes hold an [`OwnerMarker`] naming this job (jobs
    /// submitted since the markers exist); finalize sweeps only prefixes whose marker
    /// names this job. False for older jobs: they sweep only their output prefix.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub owner_markers: bool,
    /// The etag of each operator asset file (block lists, models) when the job was
    /// planned, by URI: workers load exactly that version, and fail with
    /// `input_changed` if it was rewritten since. Empty for older jobs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub asset_etags: BTreeMap<String, String>,
}

/// `<prefix>/_mdf_owner.json`: the job that owns an output or rejects prefix (written
/// create-only by submit, before any task exists). A job deletes objects only under
/// prefixes whose marker names it; another job may not write inside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerMarker {
    pub version: u32,
    pub job_id: String,
    pub job_uri: String,
    /// `output` or `rejects`.
    pub role: String,
}

/// The file name of an [`OwnerMarker`].
pub const OWNER_MARKER: &str = "_mdf_owner.json";

/// The file name of a finished job's output manifest, at the output prefix.
pub const MANIFEST: &str = "_manifest.json";

/// Where side tables are published, under the output (`_tables/<stage>/`).
pub const TABLES_DIR: &str = "_tables";

/// A contiguous piece of one input file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSlice {
    pub uri: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    pub format: Format,
    /// Byte range owned by the task: records that *start* in `[start, end)`.
    pub start: u64,
    pub end: u64,
}

/// `tasks/<phase>/<task>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskManifest {
    pub version: u32,
    pub job_id: String,
    pub phase: String,
    pub task_id: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputSlice>,
    /// Tasks of the previous phase whose committed output this task reads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstream: Vec<String>,
}

/// `shards/<phase>/<prefix>.json`: the task manifests of one shard of a sharded phase,
/// sorted by task id (written by submit, create-only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskShard {
    pub version: u32,
    pub job_id: String,
    pub phase: String,
    pub prefix: String,
    pub tasks: Vec<TaskManifest>,
}

/// `done/<phase>/<prefix>.json`: every task of a shard is terminal; their commit
/// records, read by key, sorted by task id (create-only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardDone {
    pub version: u32,
    pub job_id: String,
    pub phase: String,
    pub prefix: String,
    pub records: Vec<CommitRecord>,
}

/// `parts/<phase>/<prefix>/<random>.json`: commit records one worker wrote in a shard
/// it left before the shard was complete, copied for the shard marker's writer
/// (docs/PROTOCOL.md §1; create-only, an optimisation: never required).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardPart {
    pub version: u32,
    pub job_id: String,
    pub phase: String,
    pub prefix: String,
    pub worker: String,
    pub records: Vec<CommitRecord>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LeaseKind {
    Lease,
    Release,
}

/// `leases/<phase>/<task>/<seq>.json` (and slot leases).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    pub version: u32,
    pub seq: u64,
    pub kind: LeaseKind,
    pub attempt: String,
    pub worker: String,
    /// Number of distinct attempts that held this lease before this one.
    pub epoch: u64,
    pub expires_at_ms: u64,
    pub written_ms: u64,
    pub write_id: String,
    /// Consecutive failures with `last_error`.
    #[serde(default)]
    pub failures: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Takeovers of expired leases (workers lost mid-task).
    #[serde(default)]
    pub lost: u32,
    /// When this attempt claimed the lease, on the holder's clock (the same clock as
    /// `written_ms`): how long an attempt has run, for backup attempts (PROTOCOL.md
    /// §4). Absent in records of older workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    Committed,
    Failed,
}

/// One file a task wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputFile {
    pub uri: String,
    pub rows: u64,
    pub bytes: u64,
    pub blake3: String,
}

/// Per-stage counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageStats {
    pub stage: String,
    pub records_in: u64,
    pub records_out: u64,
    pub rejected: u64,
    pub nanos: u64,
    /// Rejects by reason, from this stage only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reasons: BTreeMap<String, u64>,
    /// Batches processed, and their durations: entry `i` counts batches that took
    /// [2^i, 2^(i+1)) microseconds (merged across tasks by adding).
    #[serde(default)]
    pub batches: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batch_micros_log2: Vec<u64>,
    /// Distributions of the numeric columns this stage writes (scores, lengths),
    /// over every record that reached it, by column name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub histograms: BTreeMap<String, Histogram>,
    /// Sums of the integer columns this stage writes that its operator totals (token
    /// counts), by column name. Absent in records written before them (they read as
    /// empty), ignored by builds that predate them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub totals: BTreeMap<String, ColumnTotal>,
}

/// The [`ColumnTotal::by`] group of sums per source: the input file a record was read
/// from, by its [`crate::records::file_key`] (the first 16 digits of its id); the
/// files' URIs are in [`TaskStats::sources`].
pub const BY_SOURCE: &str = "source";

/// The [`ColumnTotal::by`] key of records whose group column is null.
pub const NO_GROUP: &str = "(null)";

/// A column's sum over the records that reached a stage, overall and per group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ColumnTotal {
    pub sum: u64,
    /// Records with a value.
    pub records: u64,
    /// Group (a column's name, or [`BY_SOURCE`]) → the group column's value → sum.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by: BTreeMap<String, BTreeMap<String, u64>>,
}

impl ColumnTotal {
    pub fn add(&mut self, o: &ColumnTotal) {
        self.sum += o.sum;
        self.records += o.records;
        for (g, vals) in &o.by {
            let mine = self.by.entry(g.clone()).or_default();
            for (k, v) in vals {
                *mine.entry(k.clone()).or_default() += v;
            }
        }
    }
}

/// The [`TaskStats::histograms`] entry of an exact dedup reduce: this job's records
/// per distinct key.
pub const CLUSTER_SIZE: &str = "cluster_size";
/// The entry of a near-dedup candidates reduce: records per verified group of a
/// band bucket (a connected component may join several groups).
pub const NEAR_GROUP_SIZE: &str = "near_group_size";

/// A distribution that merges exactly across tasks: fixed log-linear buckets (each
/// power of two split in 8, so a bucket spans at most 12.5% of its values; integers
/// up to 16 get a bucket each), the same for every value range, so no task needs to
/// know the range in advance. NaN is not counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    pub count: u64,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
    /// Bucket index (see [`Histogram::bucket`]) to count.
    pub buckets: BTreeMap<i32, u64>,
}

impl Histogram {
    /// The bucket of `v`: 0 for zero; for positive `v` one more than the top 15 bits
    /// of its IEEE-754 form (exponent and 3 mantissa bits, ordered like the values);
    /// negative values mirror positive ones.
    pub fn bucket(v: f64) -> i32 {
        if v == 0.0 {
            return 0;
        }
        let i = (v.abs().to_bits() >> 49) as i32 + 1;
        if v < 0.0 { -i } else { i }
    }

    /// The values `[lo, hi)` of bucket `b` (for negative buckets `(lo, hi]`).
    pub fn bounds(b: i32) -> (f64, f64) {
        if b == 0 {
            return (0.0, 0.0);
        }
        let m = b.unsigned_abs() as u64 - 1;
        let (lo, hi) = (f64::from_bits(m << 49), f64::from_bits((m + 1) << 49));
        if b < 0 { (-hi, -lo) } else { (lo, hi) }
    }

    pub fn record(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        if self.count == 0 || v < self.min {
            self.min = v;
        }
        if self.count == 0 || v > self.max {
            self.max = v;
        }
        self.count += 1;
        self.sum += v;
        *self.buckets.entry(Self::bucket(v)).or_default() += 1;
    }

    pub fn merge(&mut self, o: &Histogram) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 || o.min < self.min {
            self.min = o.min;
        }
        if self.count == 0 || o.max > self.max {
            self.max = o.max;
        }
        self.count += o.count;
        self.sum += o.sum;
        for (b, c) in &o.buckets {
            *self.buckets.entry(*b).or_default() += c;
        }
    }

    /// Approximately the value below which a share `q` of the values fall: the
    /// middle of its bucket, clamped to the observed range.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let want = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, c) in &self.buckets {
            seen += c;
            if seen >= want {
                let (lo, hi) = Self::bounds(*b);
                return Some(((lo + hi) / 2.0).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// Counts in `n` equal-width bins over `[min, max]`, each bucket's count put in the
    /// bin of its midpoint (clamped to the range): for charts.
    pub fn bins(&self, n: usize) -> Vec<(f64, f64, u64)> {
        if self.count == 0 || n == 0 {
            return vec![];
        }
        let (lo, hi) = (self.min, self.max);
        let width = if hi > lo { (hi - lo) / n as f64 } else { 1.0 };
        let n = if hi > lo { n } else { 1 };
        let mut out: Vec<(f64, f64, u64)> = (0..n)
            .map(|i| (lo + i as f64 * width, lo + (i + 1) as f64 * width, 0))
            .collect();
        for (b, c) in &self.buckets {
            let (a, z) = Self::bounds(*b);
            let mid = ((a + z) / 2.0).clamp(lo, hi);
            let i = (((mid - lo) / width) as usize).min(n - 1);
            out[i].2 += c;
        }
        out
    }
}

impl StageStats {
    /// Counts one batch of `nanos`.
    pub fn record_batch(&mut self, nanos: u64) {
        let micros = (nanos / 1000).max(1);
        let i = 63 - micros.leading_zeros() as usize;
        if self.batch_micros_log2.len() <= i {
            self.batch_micros_log2.resize(i + 1, 0);
        }
        self.batch_micros_log2[i] += 1;
        self.batches += 1;
        self.nanos += nanos;
    }

    /// The batch duration below which a share `q` of the batches fall (an upper bound
    /// from the histogram), in microseconds.
    pub fn batch_quantile_micros(&self, q: f64) -> Option<u64> {
        let total: u64 = self.batch_micros_log2.iter().sum();
        if total == 0 {
            return None;
        }
        let want = (q * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.batch_micros_log2.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Some(1u64 << (i + 1));
            }
        }
        None
    }

    pub fn add(&mut self, s: &StageStats) {
        self.records_in += s.records_in;
        self.records_out += s.records_out;
        self.rejected += s.rejected;
        self.nanos += s.nanos;
        self.batches += s.batches;
        for (k, v) in &s.reasons {
            *self.reasons.entry(k.clone()).or_default() += v;
        }
        if self.batch_micros_log2.len() < s.batch_micros_log2.len() {
            self.batch_micros_log2.resize(s.batch_micros_log2.len(), 0);
        }
        for (a, b) in self.batch_micros_log2.iter_mut().zip(&s.batch_micros_log2) {
            *a += b;
        }
        for (k, h) in &s.histograms {
            self.histograms.entry(k.clone()).or_default().merge(h);
        }
        for (k, t) in &s.totals {
            self.totals.entry(k.clone()).or_default().add(t);
        }
    }
}

/// What a task did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskStats {
    pub records_in: u64,
    pub records_out: u64,
    pub rejected: u64,
    pub rejects_by_reason: BTreeMap<String, u64>,
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub stages: Vec<StageStats>,
    /// Phase-level distributions (a dedup reduce's cluster sizes), by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub histograms: BTreeMap<String, Histogram>,
    /// The input files this task read, by file key → URI, when a stage of the job
    /// totals by source ([`BY_SOURCE`]); empty otherwise and in older records.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sources: BTreeMap<String, String>,
}

impl TaskStats {
    pub fn add(&mut self, o: &TaskStats) {
        self.records_in += o.records_in;
        self.records_out += o.records_out;
        self.rejected += o.rejected;
        self.input_bytes += o.input_bytes;
        self.output_bytes += o.output_bytes;
        for (k, v) in &o.rejects_by_reason {
            *self.rejects_by_reason.entry(k.clone()).or_default() += v;
        }
        for (k, h) in &o.histograms {
            self.histograms.entry(k.clone()).or_default().merge(h);
        }
        for (k, u) in &o.sources {
            self.sources.entry(k.clone()).or_insert_with(|| u.clone());
        }
        for s in &o.stages {
            match self.stages.iter_mut().find(|x| x.stage == s.stage) {
                Some(x) => x.add(s),
                None => self.stages.push(s.clone()),
            }
        }
    }
}

/// `commits/<phase>/<task>.json`: the terminal state of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitRecord {
    pub version: u32,
    pub job_id: String,
    pub phase: String,
    pub task_id: String,
    pub status: TaskStatus,
    pub attempt: String,
    pub worker: String,
    pub epoch: u64,
    pub write_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub outputs: Vec<OutputFile>,
    #[serde(default)]
    pub rejects: Vec<OutputFile>,
    #[serde(default)]
    pub stats: TaskStats,
    #[serde(default)]
    pub requests: RequestSnapshot,
    pub started_ms: u64,
    pub finished_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused_from: Option<String>,
    /// Dedup: the keys object of a map task, or the decisions object of a reduce task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle: Option<OutputFile>,
    /// Near-duplicate record steps: how many records' labels changed (none at all,
    /// over every task of a step, means the components are final).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<u64>,
    /// Committed by a backup attempt (`job.speculation`), which won against the
    /// attempt holding the task's lease.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub speculative: bool,
    /// Side table files (`ops::Operator::table`), by stage. Absent in records of
    /// jobs without such a stage; an older build cannot run those (it does not know
    /// their operators), so the field needs no new version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<TableFile>,
}

impl CommitRecord {
    /// Every staged file the record names: outputs, rejects, side tables and the
    /// shuffle object.
    pub fn staged_files(&self) -> impl Iterator<Item = &OutputFile> {
        self.outputs
            .iter()
            .chain(&self.rejects)
            .chain(self.tables.iter().map(|t| &t.file))
            .chain(&self.shuffle)
    }
}

/// One file of a stage's side table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableFile {
    /// The stage's name.
    pub table: String,
    pub file: OutputFile,
}

/// `speculation/<phase>/<k:05>.json`: one of a phase's budget of backup attempts,
/// taken (create-only) by the worker that runs the backup of `task`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpeculationToken {
    pub version: u32,
    pub task: String,
    pub worker: String,
    pub attempt: String,
    pub write_id: String,
    pub written_ms: u64,
}

/// One file listed in the output manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// Relative to the manifest's directory (data) or the rejects URI (rejects).
    pub path: String,
    pub rows: u64,
    pub bytes: u64,
    pub blake3: String,
    pub task: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedTask {
    pub phase: String,
    pub task: String,
    pub error: String,
}

/// `<output>/_manifest.json`: exactly the committed files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputManifest {
    pub version: u32,
    pub job_id: String,
    pub job_uri: String,
    pub rows: u64,
    pub rejected: u64,
    pub files: Vec<ManifestFile>,
    pub rejects_uri: String,
    pub rejects: Vec<ManifestFile>,
    pub failed_tasks: Vec<FailedTask>,
    /// Side tables by stage, paths relative to the manifest's directory
    /// (`_tables/<stage>/...`). Absent when no stage has one.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub tables: BTreeMap<String, Vec<ManifestFile>>,
}

/// `submissions/<name>.json`: what a backend was asked to run for this job, so
/// `mdf status` can show it (docs/PROTOCOL.md §1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Submission {
    pub version: u32,
    /// `aws-batch` or `k8s`.
    pub backend: String,
    /// The backend's id (the Batch job id; the k8s Job name).
    pub id: String,
    pub name: String,
    /// The Batch job queue or the k8s namespace.
    pub queue: String,
    pub job_definition: String,
    /// Workers asked for (the array size).
    pub workers: u32,
    pub resources: String,
    pub submitted_ms: u64,
}

/// `workers/<worker>.json`: requests a worker made outside any task.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerStats {
    pub version: u32,
    pub worker: String,
    pub tasks_committed: u64,
    pub tasks_failed: u64,
    pub claims_lost: u64,
    pub requests: RequestSnapshot,
    pub updated_ms: u64,
    /// Backup attempts of stragglers this worker ran, and how many committed.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub backups: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub backups_won: u64,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// Why a record's `version` field refuses it. All are fatal: rereading the same
/// bytes gives the same answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("{what}: not valid JSON: {message}")]
    NotJson { what: String, message: String },
    #[error("{what}: missing version")]
    Missing { what: String },
    #[error(
        "{what}: written by a newer mdf (format version {found}, this build reads up to {SHARDED_VERSION})"
    )]
    Newer { what: String, found: u32 },
}

/// Checks the `version` field of a record before full decoding.
pub fn check_version(what: &str, bytes: &[u8]) -> Result<(), VersionError> {
    #[derive(Deserialize)]
    struct V {
        version: Option<u32>,
    }
    let v: V = serde_json::from_slice(bytes).map_err(|e| VersionError::NotJson {
        what: what.to_string(),
        message: e.to_string(),
    })?;
    match v.version {
        None => Err(VersionError::Missing {
            what: what.to_string(),
        }),
        Some(found) if found > SHARDED_VERSION => Err(VersionError::Newer {
            what: what.to_string(),
            found,
        }),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod stage_stats_tests {
    use super::StageStats;

    #[test]
    fn batch_histogram_quantiles_and_merge() {
        let mut a = StageStats::default();
        for micros in [3u64, 3, 3, 3, 3, 3, 3, 3, 3, 900] {
            a.record_batch(micros * 1000);
        }
        assert_eq!(a.batches, 10);
        assert_eq!(a.batch_quantile_micros(0.5), Some(4), "3 µs is in [2, 4)");
        assert_eq!(
            a.batch_quantile_micros(0.95),
            Some(1024),
            "900 µs is in [512, 1024)"
        );
        let mut b = StageStats::default();
        b.record_batch(5_000_000);
        a.add(&b);
        assert_eq!(a.batches, 11);
        assert_eq!(a.batch_micros_log2.iter().sum::<u64>(), 11);
        assert_eq!(
            a.batch_quantile_micros(1.0),
            Some(8192),
            "5 ms is in [4096, 8192) µs"
        );
        assert_eq!(StageStats::default().batch_quantile_micros(0.5), None);
    }

    #[test]
    fn histogram_buckets_are_ordered_and_narrow() {
        use super::Histogram;
        let vals = [
            -3.5, -1.0, -0.001, 0.0, 1e-9, 0.5, 0.51, 1.0, 2.0, 3.0, 17.0, 1e6,
        ];
        let buckets: Vec<i32> = vals.iter().map(|v| Histogram::bucket(*v)).collect();
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
        for v in vals {
            let (lo, hi) = Histogram::bounds(Histogram::bucket(v));
            if v > 0.0 {
                assert!(lo <= v && v < hi, "{v} in [{lo}, {hi})");
                assert!(hi / lo <= 1.126, "{v}: bucket [{lo}, {hi}) too wide");
            } else if v < 0.0 {
                assert!(lo < v && v <= hi, "{v} in ({lo}, {hi}]");
            }
        }
        // Integers up to 16 each get a bucket of their own (cluster sizes).
        let ints: std::collections::BTreeSet<i32> =
            (1..=16).map(|i| Histogram::bucket(i as f64)).collect();
        assert_eq!(ints.len(), 16);
    }

    #[test]
    fn histogram_merges_exactly_and_answers_quantiles() {
        use super::Histogram;
        let values: Vec<f64> = (0..10_000)
            .map(|i| (i as f64 * 0.37).sin().abs() * 40.0)
            .collect();
        let mut whole = Histogram::default();
        values.iter().for_each(|v| whole.record(*v));
        let mut parts = Histogram::default();
        for chunk in values.chunks(777) {
            let mut h = Histogram::default();
            chunk.iter().for_each(|v| h.record(*v));
            parts.merge(&h);
        }
        assert_eq!(whole.buckets, parts.buckets);
        assert_eq!(
            (whole.count, whole.min, whole.max),
            (parts.count, parts.min, parts.max)
        );
        assert!((whole.sum - parts.sum).abs() < 1e-6);
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        for q in [0.1, 0.5, 0.9, 0.99] {
            let exact = sorted[(q * sorted.len() as f64) as usize - 1];
            let got = whole.quantile(q).unwrap();
            assert!(
                (got - exact).abs() <= exact * 0.13 + 1e-9,
                "q{q}: {got} vs {exact}"
            );
        }
        let bins = whole.bins(20);
        assert_eq!(bins.len(), 20);
        assert_eq!(bins.iter().map(|b| b.2).sum::<u64>(), whole.count);
        whole.record(f64::NAN);
        assert_eq!(whole.count, 10_000, "NaN is not counted");
        assert_eq!(Histogram::default().quantile(0.5), None);
    }
}
