//! `dedup`: the structural stage that ends a phase with a two-pass shuffle (see
//! docs/DEDUP.md). In its own phase it changes nothing: the worker reads the key
//! column of the records that reach it and writes the keys object. The planner adds
//! the reduce and apply phases after it.
use super::params::ParamDoc;
use super::{OpDef, Operator, Output, ProcessError, SchemaError};
use crate::spec::reader::Obj;
use arrow_schema::{DataType, Schema};

pub const DEF: OpDef = OpDef {
    name: "dedup",
    summary: "removes records with equal keys (two-pass shuffle through the store)",
    params: params_doc,
    example: r#"{"key": "exact_key_key"}"#,
    feature: None,
    build: Some(build),
};

/// Which record of a cluster survives.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Keep {
    /// The lowest record id.
    LowestId,
    /// The highest value of a numeric column (ties: lowest id; null counts lowest).
    Highest(String),
    /// Semantic dedup: the member most similar to its cluster's centroid (SemDeDup's
    /// rule; ties: lowest id).
    NearestCentroid,
}

/// What "duplicate" means: equal keys, or near duplicates found through band keys
/// and verified (docs/DEDUP.md).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum DedupKind {
    /// Equal 16-byte keys.
    #[default]
    Exact,
    /// MinHash signatures (`minhash` stage): LSH bands, then estimated Jaccard
    /// similarity at least `threshold`.
    Minhash {
        bands: u32,
        rows: u32,
        threshold: f64,
    },
    /// 64-bit perceptual hashes within Hamming distance `radius` (exact, by
    /// pigeonhole bands).
    Phash { radius: u32 },
    /// Exact substrings: every window of `min_tokens` whitespace tokens of the text
    /// column that occurs more than once in the corpus is cut, at every occurrence
    /// but the first (`keep_first`) or at all of them; a record left with fewer than
    /// `min_chars` non-whitespace characters is rejected.
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
    /// Repeated paragraphs (or lines): every unit of the text column that occurs at
    /// least `min_count` times in the corpus is cut, at every occurrence but the first
    /// (`keep_first`) or at all of them; `normalize` says how units compare; a
    /// record left with fewer than `min_chars` non-whitespace characters is rejected.
    Paragraph {
        unit: Unit,
        min_count: u32,
        keep_first: bool,
        normalize: Normalize,
        min_chars: u32,
    },
    /// Embeddings (docs/SEMANTIC.md): records whose unit vectors have cosine
    /// similarity at least `1 − eps`, found within the clusters of a spherical k-means
    /// (`clusters` centroids, `None` = one per 5,000 records) trained on the `sample`
    /// vectors lowest by a hash of id and `seed`, `iterations` at most.
    Semantic {
        eps: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        clusters: Option<u32>,
        sample: u32,
        iterations: u32,
        seed: u64,
    },
}

pub use crate::kernels::paragraph::{Normalize, Unit};

impl DedupKind {
    pub fn is_exact(&self) -> bool {
        *self == DedupKind::Exact
    }
    /// Near duplicates: reduced by label propagation (MinHash, phash).
    pub fn is_near(&self) -> bool {
        matches!(self, DedupKind::Minhash { .. } | DedupKind::Phash { .. })
    }
    /// Cuts spans out of texts (substrings, paragraphs) instead of dropping records:
    /// no clusters, `keep` is first or none.
    pub fn cuts_text(&self) -> bool {
        matches!(
            self,
            DedupKind::Substring { .. } | DedupKind::Paragraph { .. }
        )
    }
    /// Key entries per record: one, one per band, or (substrings) one per token,
    /// estimated for a 2 KiB record of about 5 bytes per token.
    pub fn keys_per_record(&self) -> u64 {
        match self {
            DedupKind::Exact => 1,
            DedupKind::Substring { .. } => 400,
            DedupKind::Paragraph { .. } => 30,
            DedupKind::Semantic { .. } => 1,
            DedupKind::Minhash { bands, .. } => *bands as u64,
            DedupKind::Phash { radius } => *radius as u64 + 1,
        }
    }
    /// Bytes of one map-side key entry.
    pub fn entry_bytes(&self) -> u64 {
        match self {
            DedupKind::Exact => 40,
            DedupKind::Substring { .. } | DedupKind::Paragraph { .. } => 36,
            // A 512-d vector (the plan's estimate; the map sizes entries by the column).
            DedupKind::Semantic { .. } => crate::kernels::semantic::entry_bytes(512) as u64,
            _ => 44 + self.payload_len() as u64,
        }
    }
    /// Bytes of verification data each near-duplicate key entry carries (the b-bit
    /// signature, one byte per permutation, or the hash), rounded up to a size the
    /// shuffle has an entry type for.
    pub fn payload_len(&self) -> usize {
        match self {
            DedupKind::Exact
            | DedupKind::Substring { .. }
            | DedupKind::Paragraph { .. }
            | DedupKind::Semantic { .. } => 0,
            DedupKind::Phash { .. } => 8,
            DedupKind::Minhash { bands, rows, .. } => {
                let k = (bands * rows) as usize;
                *PAYLOADS
                    .iter()
                    .find(|&&p| p >= k)
                    .unwrap_or(&MAX_PERMUTATIONS)
            }
        }
    }
}

/// The payload sizes near-duplicate entries come in.
pub const PAYLOADS: [usize; 6] = [64, 128, 192, 256, 384, 512];
/// The most MinHash permutations (bands × rows) a near-duplicate dedup verifies.
pub const MAX_PERMUTATIONS: usize = 512;

/// The parameters of a dedup stage, as planned into the job manifest.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DedupParams {
    /// The key column: FixedSizeBinary(16), as key producers write it.
    pub key: String,
    pub keep: Keep,
    /// Reduce tasks (key ranges); `None` = chosen from the job's input size.
    pub partitions: Option<u32>,
    /// Reduce buffer before sorted runs spill to local disk.
    pub memory_bytes: u64,
    /// Adds `dup_cluster` (the representative's id) to every record of a cluster.
    pub cluster_column: bool,
    /// An earlier job's URI: records whose key its corpus already has are
    /// duplicates of its record (incremental dedup; its records are not re-read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<String>,
    #[serde(default, skip_serializing_if = "DedupKind::is_exact")]
    pub kind: DedupKind,
    /// Near duplicates: the most label-propagation rounds before the job fails
    /// rather than return clusters that are not yet connected components.
    #[serde(default = "default_rounds")]
    pub max_rounds: u32,
}

fn default_rounds() -> u32 {
    32
}

/// The column `cluster_column: true` adds in the apply phase.
pub const CLUSTER_COLUMN: &str = "dup_cluster";

/// Parses a dedup stage's params (every error into the reader's sink).
pub fn parse(p: &Obj) -> Option<DedupParams> {
    let key = p.req_str("key");
    let kind_name = p.raw("kind").and_then(|k| k.as_str());
    let substring = matches!(kind_name, Some("substring" | "paragraph"));
    let semantic = kind_name == Some("semantic");
    let mut keep_first = true;
    let keep = match p.raw("keep") {
        None if semantic => Keep::NearestCentroid,
        None => Keep::LowestId,
        Some(serde_json::Value::String(s)) if semantic && s == "nearest_centroid" => {
            Keep::NearestCentroid
        }
        Some(serde_json::Value::String(s)) if substring && (s == "first" || s == "none") => {
            keep_first = s == "first";
            Keep::LowestId
        }
        Some(k) if substring => {
            p.sink.error(
                &p.field_path("keep"),
                format!(
                    "{}: expected first or none, found {k}",
                    kind_name.unwrap_or_default()
                ),
            );
            Keep::LowestId
        }
        Some(serde_json::Value::String(s)) if s == "lowest_id" => Keep::LowestId,
        Some(serde_json::Value::String(s)) if s == "nearest_centroid" => {
            p.sink.error(
                &p.field_path("keep"),
                "nearest_centroid is for semantic dedup only (kind: semantic)",
            );
            Keep::LowestId
        }
        Some(serde_json::Value::String(s)) => {
            p.sink.error(
                &p.field_path("keep"),
                format!(
                    "expected lowest_id{} or {{highest: <column>}}, found {s:?}",
                    if semantic { ", nearest_centroid" } else { "" }
                ),
            );
            Keep::LowestId
        }
        Some(_) => {
            let k = p.obj("keep");
            let col = k.req_str("highest");
            k.finish();
            col.map(Keep::Highest).unwrap_or(Keep::LowestId)
        }
    };
    let partitions = match p.raw("partitions") {
        None => None,
        Some(serde_json::Value::String(s)) if s == "auto" => None,
        Some(_) => Some(p.u64_in("partitions", 1, 1, 65_536) as u32),
    };
    let memory_bytes = p.opt_bytes("memory").unwrap_or(1 << 30);
    if memory_bytes < 4096 {
        p.sink
            .error(&p.field_path("memory"), "must be at least 4KiB");
    }
    let cluster_column = p.opt_bool("cluster_column").unwrap_or(false);
    let against = p.opt_str("against");
    let kind = match p.opt_str("kind").as_deref() {
        None | Some("exact") => DedupKind::Exact,
        Some("minhash") => {
            let bands = p.u64_in("bands", 14, 1, 512) as u32;
            let rows = p.u64_in("rows", 8, 1, 512) as u32;
            if (bands * rows) as usize > MAX_PERMUTATIONS {
                p.sink.error(
                    &p.field_path("rows"),
                    format!(
                        "bands × rows must be at most {MAX_PERMUTATIONS}, found {}",
                        bands * rows
                    ),
                );
            }
            let threshold = p.opt_f64("threshold").unwrap_or(0.8);
            if !(threshold > 0.0 && threshold <= 1.0) {
                p.sink.error(
                    &p.field_path("threshold"),
                    format!("must be in (0, 1], found {threshold}"),
                );
            }
            DedupKind::Minhash {
                bands,
                rows,
                threshold,
            }
        }
        Some("phash") => DedupKind::Phash {
            radius: p.u64_in("radius", 4, 0, 31) as u32,
        },
        Some("substring") => {
            let tokens = p.opt_str("tokens");
            let offsets = tokens.as_ref().map(|_| {
                p.opt_str("offsets")
                    .unwrap_or_else(|| "token_offsets".into())
            });
            if tokens.is_none() && p.raw("offsets").is_some() {
                p.sink.error(
                    &p.field_path("offsets"),
                    "only with tokens (a token ids column)",
                );
            }
            DedupKind::Substring {
                min_tokens: p.u64_in("min_tokens", 50, 2, 1000) as u32,
                keep_first,
                min_chars: p.u64_in("min_chars", 50, 0, u32::MAX.into()) as u32,
                tokens,
                offsets,
            }
        }
        Some("paragraph") => {
            let unit = match p.opt_str("unit").as_deref() {
                None | Some("paragraph") => Unit::Paragraph,
                Some("line") => Unit::Line,
                Some(other) => {
                    p.sink.error(
                        &p.field_path("unit"),
                        format!("expected paragraph or line, found {other:?}"),
                    );
                    Unit::Paragraph
                }
            };
            DedupKind::Paragraph {
                unit,
                min_count: p.u64_in("min_count", 2, 2, 100_000) as u32,
                keep_first,
                normalize: match p.raw("normalize") {
                    None => Normalize::None,
                    Some(serde_json::Value::String(s)) if s == "none" => Normalize::None,
                    Some(serde_json::Value::String(s)) if s == "ccnet" => Normalize::Ccnet,
                    Some(serde_json::Value::String(s)) if s == "loose" => Normalize::Loose,
                    Some(other) => {
                        p.sink.error(
                            &p.field_path("normalize"),
                            format!("expected none, ccnet or loose, found {other}"),
                        );
                        Normalize::None
                    }
                },
                min_chars: p.u64_in("min_chars", 50, 0, u32::MAX.into()) as u32,
            }
        }
        Some("semantic") => {
            let eps = p.opt_f64("eps").unwrap_or(0.05);
            // Below 1e-5 the f32 rounding of the vectors themselves decides: a
            // normalised f32 vector's dot with itself may be 1 − 1e-7.
            if !(1e-5..1.0).contains(&eps) {
                p.sink.error(
                    &p.field_path("eps"),
                    format!("must be in [0.00001, 1), found {eps}"),
                );
            }
            let clusters = match p.raw("clusters") {
                None => None,
                Some(serde_json::Value::String(s)) if s == "auto" => None,
                Some(_) => Some(p.u64_in("clusters", 1, 1, 65_536) as u32),
            };
            let sample = p.u64_in("sample", 100_000, 1, 10_000_000) as u32;
            if let Some(k) = clusters
                && k > sample
            {
                p.sink.error(
                    &p.field_path("clusters"),
                    format!("more clusters ({k}) than sample vectors ({sample})"),
                );
            }
            DedupKind::Semantic {
                eps,
                clusters,
                sample,
                iterations: p.u64_in("iterations", 20, 1, 1000) as u32,
                seed: p.opt_u64("seed").unwrap_or(1),
            }
        }
        Some(other) => {
            p.sink.error(
                &p.field_path("kind"),
                format!(
                    "expected exact, minhash, phash, substring, paragraph or semantic, found {other:?}"
                ),
            );
            DedupKind::Exact
        }
    };
    if substring && cluster_column {
        p.sink.error(
            &p.field_path("cluster_column"),
            format!(
                "{} dedup cuts spans out of records, it has no clusters",
                kind_name.unwrap_or_default()
            ),
        );
    }
    let max_rounds = if !kind.is_near() {
        default_rounds()
    } else {
        p.u64_in("max_rounds", default_rounds().into(), 2, 64) as u32
    };
    if against.is_some() && matches!(kind, DedupKind::Semantic { .. }) {
        p.sink.error(
            &p.field_path("against"),
            "semantic dedup cannot run against an earlier job yet (its clusters are this job's)",
        );
    }
    if against.is_some() && kind.cuts_text() {
        p.sink.error(
            &p.field_path("against"),
            "only exact and near-duplicate (minhash, phash) dedup can run against an earlier job",
        );
    }
    Some(DedupParams {
        key: key?,
        keep,
        partitions,
        memory_bytes,
        cluster_column,
        against,
        kind,
        max_rounds,
    })
}

// Shim until the dedup subsystem owns this stage: the stage as an operator (the
// identity inside its phase; the planner adds the shuffle phases), and its params
// described by hand.

fn build(_stage: &str, p: &Obj) -> Option<Box<dyn Operator>> {
    parse(p).map(|d| Box::new(DedupStage(d)) as Box<dyn Operator>)
}

struct DedupStage(DedupParams);

impl Operator for DedupStage {
    fn output_fields(&self, input: &Schema) -> Result<Vec<arrow_schema::Field>, SchemaError> {
        self.0
            .check(input)
            .map_err(|e| SchemaError::Other(e.to_string()))?;
        Ok(vec![])
    }
    fn process(&self, _: &arrow_array::RecordBatch) -> Result<Output, ProcessError> {
        Ok(Output::default())
    }
    /// A dedup stage must see the whole task.
    fn splittable(&self) -> bool {
        false
    }
}

fn params_doc() -> Vec<ParamDoc> {
    let p = |name, ty, default: Option<&'static str>, doc: &str| ParamDoc {
        name,
        ty,
        default,
        required: default.is_none(),
        range: None,
        doc: doc.to_string(),
    };
    vec![
        p(
            "key",
            "string",
            None,
            "The key column: a 16-byte key (exact), a MinHash signature (minhash), a 64-bit perceptual hash (phash), or the text column (substring, paragraph).",
        ),
        p(
            "kind",
            "string",
            Some("\"exact\""),
            "exact, minhash, phash, substring (exact-substring dedup: repeated spans of min_tokens words are cut out of the text), paragraph (paragraphs or lines that repeat across the corpus are cut out of the text) or semantic (embeddings closer than eps in cosine distance, SemDeDup: docs/SEMANTIC.md).",
        ),
        p(
            "keep",
            "string or map",
            Some("\"lowest_id\""),
            "Which record of a cluster survives: lowest_id, or {highest: <numeric column>}; semantic also nearest_centroid (its default: the member most similar to its k-means centroid). substring, paragraph: first (the occurrence in the lowest record id, then position, stays) or none (every occurrence is cut).",
        ),
        p(
            "partitions",
            "integer or \"auto\"",
            Some("\"auto\""),
            "Reduce tasks (key ranges), 1 to 65536; auto: from the input size.",
        ),
        p(
            "memory",
            "byte size",
            Some("\"1GiB\""),
            "Reduce buffer before sorted runs spill to local disk (at least 4KiB).",
        ),
        p(
            "cluster_column",
            "boolean",
            Some("false"),
            "Adds dup_cluster (the representative's id) to every record of a cluster.",
        ),
        p(
            "against",
            "string",
            Some("none"),
            "An earlier job's URI: records whose key its corpus already has (exact), or whose cluster holds one of its records (minhash, phash), are duplicates.",
        ),
        p(
            "bands",
            "integer",
            Some("14"),
            "minhash: LSH bands, 1 to 512 (as in the minhash stage).",
        ),
        p(
            "rows",
            "integer",
            Some("8"),
            "minhash: rows per band, 1 to 512; bands × rows at most 512.",
        ),
        p(
            "threshold",
            "number",
            Some("0.8"),
            "minhash: the least estimated Jaccard similarity of duplicates, in (0, 1].",
        ),
        p(
            "radius",
            "integer",
            Some("4"),
            "phash: the largest Hamming distance of duplicates, 0 to 31.",
        ),
        p(
            "min_tokens",
            "integer",
            Some("50"),
            "substring: the shortest repeated span cut, in whitespace-separated words (or tokens), 2 to 1000.",
        ),
        p(
            "tokens",
            "string",
            Some("none"),
            "substring: a token ids column (tokenize with ids: true) to make windows of, instead of whitespace words.",
        ),
        p(
            "offsets",
            "string",
            Some("\"token_offsets\""),
            "substring, with tokens: the tokens' byte offsets (tokenize with offsets: true), which the cut spans follow.",
        ),
        p(
            "min_chars",
            "integer",
            Some("50"),
            "substring, paragraph: a record left with fewer non-whitespace characters is rejected (substring_duplicate, paragraph_duplicate).",
        ),
        p(
            "unit",
            "string",
            Some("\"paragraph\""),
            "paragraph: paragraph (lines with content and the blank lines after them) or line.",
        ),
        p(
            "min_count",
            "integer",
            Some("2"),
            "paragraph: a unit occurring at least this many times in the corpus (every occurrence counts, on any page) is repeated, 2 to 100000.",
        ),
        p(
            "normalize",
            "string",
            Some("\"none\""),
            "paragraph: how units compare: none (exactly, white space at the ends trimmed), ccnet (CCNet's normalize_for_dedup: lower case, digits as 0, its Unicode punctuation and non-printing characters removed) or loose (also every punctuation character removed and white space runs made one space).",
        ),
        p(
            "eps",
            "number",
            Some("0.05"),
            "semantic: records whose embeddings have cosine similarity at least 1 − eps are duplicates, 0.00001 ≤ eps < 1.",
        ),
        p(
            "clusters",
            "integer or \"auto\"",
            Some("\"auto\""),
            "semantic: k-means clusters (pairs are compared within a cluster), 1 to 65536; auto: one per 5,000 records.",
        ),
        p(
            "sample",
            "integer",
            Some("100000"),
            "semantic: vectors the k-means trains on (the lowest by a hash of id and seed); sample × (40 + 4 × dimension) bytes must fit in half of memory.",
        ),
        p(
            "iterations",
            "integer",
            Some("20"),
            "semantic: the most k-means iterations (it stops when no sample vector changes cluster), 1 to 1000.",
        ),
        p(
            "seed",
            "integer",
            Some("1"),
            "semantic: which vectors form the sample (and so the initial centroids).",
        ),
        p(
            "max_rounds",
            "integer",
            Some("32"),
            "minhash, phash: the most label-propagation rounds, 2 to 64.",
        ),
    ]
}

/// A dedup stage whose input lacks what its params name. The message starts with the
/// param's path (`params.key: ...`), which the planner turns into the field path.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamsError {
    #[error("params.key: column {key:?} is {found}, not {what}")]
    NearKeyType {
        key: String,
        found: DataType,
        what: String,
    },
    #[error("params.key: no column {key:?} ({what})")]
    NoNearKey { key: String, what: String },
    #[error(
        "params.key: column {key:?} is {found}, not a 16-byte key (add a key stage such as exact_key before dedup)"
    )]
    KeyType { key: String, found: DataType },
    #[error("params.key: no column {key:?} (add a key stage such as exact_key before dedup)")]
    NoKey { key: String },
    #[error("params.keep.highest: column {column:?} is {found}, not numeric")]
    KeepType { column: String, found: DataType },
    #[error("params.keep.highest: no column {column:?}")]
    NoKeep { column: String },
    #[error(
        "params.sample: {sample} vectors of {dim} dimensions take {need} bytes, more than half of params.memory ({memory} bytes): lower sample or raise memory"
    )]
    Sample {
        sample: u32,
        dim: usize,
        need: u64,
        memory: u64,
    },
    #[error(
        "params.clusters: {clusters} centroids of {dim} dimensions take {need} bytes to train and assign with, more than half of params.memory ({memory} bytes): lower clusters or raise memory"
    )]
    Clusters {
        clusters: u32,
        dim: usize,
        need: u64,
        memory: u64,
    },
    #[error("params.keep: nearest_centroid is for semantic dedup only")]
    KeepNearest,
    #[error("params.{param}: column {column:?} {message}")]
    Column {
        param: &'static str,
        column: String,
        message: String,
    },
}

impl DedupParams {
    /// The input must carry the key column (16-byte keys) and the `keep` column.
    pub fn check(&self, input: &Schema) -> Result<(), ParamsError> {
        let near = match &self.kind {
            DedupKind::Exact => None,
            DedupKind::Minhash { bands, rows, .. } => Some((
                vec![DataType::FixedSizeBinary((4 * bands * rows) as i32)],
                format!(
                    "a MinHash signature of {} permutations (a minhash stage with bands {bands}, rows {rows})",
                    bands * rows
                ),
            )),
            DedupKind::Phash { .. } => Some((
                vec![DataType::UInt64, DataType::Int64, DataType::Utf8],
                "a 64-bit perceptual hash (uint64, int64 or 16 hex digits)".to_string(),
            )),
            DedupKind::Substring {
                tokens, offsets, ..
            } => {
                let list = DataType::List(std::sync::Arc::new(arrow_schema::Field::new(
                    "item",
                    DataType::UInt32,
                    true,
                )));
                for (param, col) in [("tokens", tokens), ("offsets", offsets)] {
                    let Some(col) = col else { continue };
                    match input.field_with_name(col) {
                        Ok(f) if matches!(f.data_type(), DataType::List(i) if i.data_type() == &DataType::UInt32) =>
                            {}
                        Ok(f) => {
                            return Err(ParamsError::Column {
                                param,
                                column: col.clone(),
                                message: format!("is {}, not {list}", f.data_type()),
                            });
                        }
                        Err(_) => {
                            return Err(ParamsError::Column {
                                param,
                                column: col.clone(),
                                message: "is missing (add a tokenize stage with ids: true, offsets: true)".into(),
                            });
                        }
                    }
                }
                Some((
                    vec![DataType::Utf8],
                    "the text column substrings are cut from (a string)".to_string(),
                ))
            }
            DedupKind::Paragraph { .. } => Some((
                vec![DataType::Utf8],
                "the text column repeated paragraphs are cut from (a string)".to_string(),
            )),
            DedupKind::Semantic {
                sample, clusters, ..
            } => {
                let what = "an embedding (fixed_size_list<float32> of 1 to 4096)".to_string();
                let d = match input.field_with_name(&self.key) {
                    Ok(f) => crate::kernels::semantic::dim_of(f.data_type()).ok_or_else(|| {
                        ParamsError::NearKeyType {
                            key: self.key.clone(),
                            found: f.data_type().clone(),
                            what: what.clone(),
                        }
                    })?,
                    Err(_) => {
                        return Err(ParamsError::NoNearKey {
                            key: self.key.clone(),
                            what,
                        });
                    }
                };
                let need = *sample as u64 * crate::kernels::semantic::entry_bytes(d) as u64;
                if need > self.memory_bytes / 2 {
                    return Err(ParamsError::Sample {
                        sample: *sample,
                        dim: d,
                        need,
                        memory: self.memory_bytes,
                    });
                }
                if let Some(k) = clusters {
                    let need = crate::kernels::semantic::centroid_bytes(*k as usize, d);
                    if need > self.memory_bytes / 2 {
                        return Err(ParamsError::Clusters {
                            clusters: *k,
                            dim: d,
                            need,
                            memory: self.memory_bytes,
                        });
                    }
                }
                return self.check_keep(input);
            }
        };
        if let Some((types, what)) = near {
            match input.field_with_name(&self.key) {
                Ok(f) if types.contains(f.data_type()) => {}
                Ok(f) => {
                    return Err(ParamsError::NearKeyType {
                        key: self.key.clone(),
                        found: f.data_type().clone(),
                        what,
                    });
                }
                Err(_) => {
                    return Err(ParamsError::NoNearKey {
                        key: self.key.clone(),
                        what,
                    });
                }
            }
            return self.check_keep(input);
        }
        match input.field_with_name(&self.key) {
            Ok(f) if f.data_type() == &DataType::FixedSizeBinary(16) => {}
            Ok(f) => {
                return Err(ParamsError::KeyType {
                    key: self.key.clone(),
                    found: f.data_type().clone(),
                });
            }
            Err(_) => {
                return Err(ParamsError::NoKey {
                    key: self.key.clone(),
                });
            }
        }
        self.check_keep(input)
    }

    fn check_keep(&self, input: &Schema) -> Result<(), ParamsError> {
        if self.keep == Keep::NearestCentroid && !matches!(self.kind, DedupKind::Semantic { .. }) {
            return Err(ParamsError::KeepNearest);
        }
        if let Keep::Highest(c) = &self.keep {
            match input.field_with_name(c) {
                Ok(f) if f.data_type().is_numeric() => {}
                Ok(f) => {
                    return Err(ParamsError::KeepType {
                        column: c.clone(),
                        found: f.data_type().clone(),
                    });
                }
                Err(_) => return Err(ParamsError::NoKeep { column: c.clone() }),
            }
        }
        Ok(())
    }
}
