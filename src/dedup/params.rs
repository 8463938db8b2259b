//! `dedup`: the structural stage that ends a phase with a two-pass shuffle (see
//! docs/DEDUP.md): its parameters, how they are read from the spec (the registry
//! entry [`DEF`]) and checked against the input schema, and their conversion to and
//! from the protocol's persisted [`DedupPhaseParams`]. In its own phase the stage
//! changes nothing: the map task writes the keys object ([`super::keys`]); the
//! planner ([`super::plan`]) adds the reduce and apply phases after it.
use super::error::ParamsError;
use crate::ops::{OpDef, Operator};
use crate::protocol::records::{DedupPhaseKeep, DedupPhaseKind, DedupPhaseParams};
use crate::spec::reader::Obj;
use arrow_schema::{DataType, Schema};

pub const DEF: OpDef = OpDef {
    name: "dedup",
    summary: "removes records with equal keys (two-pass shuffle through the store)",
    build,
};

/// Which record of a cluster survives.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Keep {
    /// The lowest record id.
    LowestId,
    /// The highest value of a numeric column (ties: lowest id; null counts lowest).
    Highest(String),
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
}

impl DedupKind {
    pub fn is_exact(&self) -> bool {
        *self == DedupKind::Exact
    }
    /// Key entries per record: one, or one per band.
    pub fn keys_per_record(&self) -> u64 {
        match self {
            DedupKind::Exact => 1,
            DedupKind::Minhash { bands, .. } => *bands as u64,
            DedupKind::Phash { radius } => *radius as u64 + 1,
        }
    }
    /// Bytes of one map-side key entry.
    pub fn entry_bytes(&self) -> u64 {
        match self {
            DedupKind::Exact => 40,
            _ => 44 + self.payload_len() as u64,
        }
    }
    /// Bytes of verification data each near-duplicate key entry carries (the b-bit
    /// signature, one byte per permutation, or the hash), rounded up to a size the
    /// shuffle has an entry type for.
    pub fn payload_len(&self) -> usize {
        match self {
            DedupKind::Exact => 0,
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

fn build(p: &Obj) -> Option<Operator> {
    let key = p.req_str("key");
    let keep = match p.raw("keep") {
        None => Keep::LowestId,
        Some(serde_json::Value::String(s)) if s == "lowest_id" => Keep::LowestId,
        Some(serde_json::Value::String(s)) => {
            p.sink.error(
                &p.field_path("keep"),
                format!("expected lowest_id or {{highest: <column>}}, found {s:?}"),
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
        Some(other) => {
            p.sink.error(
                &p.field_path("kind"),
                format!("expected exact, minhash or phash, found {other:?}"),
            );
            DedupKind::Exact
        }
    };
    let max_rounds = if kind.is_exact() {
        default_rounds()
    } else {
        p.u64_in("max_rounds", default_rounds().into(), 2, 64) as u32
    };
    if against.is_some() && !kind.is_exact() {
        p.sink.error(
            &p.field_path("against"),
            "only exact dedup can run against an earlier job",
        );
    }
    Some(Operator::Dedup(DedupParams {
        key: key?,
        keep,
        partitions,
        memory_bytes,
        cluster_column,
        against,
        kind,
        max_rounds,
    }))
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

impl From<&DedupParams> for DedupPhaseParams {
    fn from(p: &DedupParams) -> Self {
        DedupPhaseParams {
            key: p.key.clone(),
            keep: match &p.keep {
                Keep::LowestId => DedupPhaseKeep::LowestId,
                Keep::Highest(c) => DedupPhaseKeep::Highest(c.clone()),
            },
            partitions: p.partitions,
            memory_bytes: p.memory_bytes,
            cluster_column: p.cluster_column,
            against: p.against.clone(),
            kind: match &p.kind {
                DedupKind::Exact => DedupPhaseKind::Exact,
                &DedupKind::Minhash {
                    bands,
                    rows,
                    threshold,
                } => DedupPhaseKind::Minhash {
                    bands,
                    rows,
                    threshold,
                },
                &DedupKind::Phash { radius } => DedupPhaseKind::Phash { radius },
            },
            max_rounds: p.max_rounds,
        }
    }
}

impl From<&DedupPhaseParams> for DedupParams {
    fn from(p: &DedupPhaseParams) -> Self {
        DedupParams {
            key: p.key.clone(),
            keep: match &p.keep {
                DedupPhaseKeep::LowestId => Keep::LowestId,
                DedupPhaseKeep::Highest(c) => Keep::Highest(c.clone()),
            },
            partitions: p.partitions,
            memory_bytes: p.memory_bytes,
            cluster_column: p.cluster_column,
            against: p.against.clone(),
            kind: DedupKind::from(&p.kind),
            max_rounds: p.max_rounds,
        }
    }
}

impl From<&DedupPhaseKind> for DedupKind {
    fn from(k: &DedupPhaseKind) -> Self {
        match k {
            DedupPhaseKind::Exact => DedupKind::Exact,
            &DedupPhaseKind::Minhash {
                bands,
                rows,
                threshold,
            } => DedupKind::Minhash {
                bands,
                rows,
                threshold,
            },
            &DedupPhaseKind::Phash { radius } => DedupKind::Phash { radius },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::Field;

    fn params(keep: Keep, kind: DedupKind, against: Option<&str>, cluster: bool) -> DedupParams {
        DedupParams {
            key: "content_key".into(),
            keep,
            partitions: None,
            memory_bytes: 1 << 30,
            cluster_column: cluster,
            against: against.map(Into::into),
            kind,
            max_rounds: 32,
        }
    }

    /// The persisted params are the JSON the operator's params had when they were the
    /// persisted type (format versions 1 and 2): byte for byte, both ways, so every
    /// job.json still reads and every fingerprint and task id stays the same.
    #[test]
    fn the_persisted_params_keep_the_layout_of_versions_1_and_2() {
        let minhash = DedupKind::Minhash {
            bands: 14,
            rows: 8,
            threshold: 0.8,
        };
        let cases = [
            (
                params(Keep::LowestId, DedupKind::Exact, None, false),
                r#"{"key":"content_key","keep":"lowest_id","partitions":null,"memory_bytes":1073741824,"cluster_column":false,"max_rounds":32}"#,
            ),
            (
                DedupParams {
                    partitions: Some(7),
                    memory_bytes: 4096,
                    ..params(
                        Keep::Highest("quality".into()),
                        DedupKind::Exact,
                        Some("s3://b/mdf/jobs/cc-1"),
                        true,
                    )
                },
                r#"{"key":"content_key","keep":{"highest":"quality"},"partitions":7,"memory_bytes":4096,"cluster_column":true,"against":"s3://b/mdf/jobs/cc-1","max_rounds":32}"#,
            ),
            (
                DedupParams {
                    max_rounds: 5,
                    ..params(Keep::LowestId, minhash, None, false)
                },
                r#"{"key":"content_key","keep":"lowest_id","partitions":null,"memory_bytes":1073741824,"cluster_column":false,"kind":{"type":"minhash","bands":14,"rows":8,"threshold":0.8},"max_rounds":5}"#,
            ),
            (
                params(
                    Keep::Highest("score".into()),
                    DedupKind::Phash { radius: 4 },
                    None,
                    true,
                ),
                r#"{"key":"content_key","keep":{"highest":"score"},"partitions":null,"memory_bytes":1073741824,"cluster_column":true,"kind":{"type":"phash","radius":4},"max_rounds":32}"#,
            ),
        ];
        for (p, want) in cases {
            let persisted = DedupPhaseParams::from(&p);
            assert_eq!(serde_json::to_string(&persisted).unwrap(), want);
            assert_eq!(
                serde_json::to_string(&p).unwrap(),
                want,
                "the runtime params"
            );
            let back: DedupPhaseParams = serde_json::from_str(want).unwrap();
            assert_eq!(back, persisted);
            assert_eq!(DedupParams::from(&back), p);
        }
        // Written before near duplicates: no kind, no max_rounds.
        let old: DedupPhaseParams = serde_json::from_str(
            r#"{"key":"k","keep":"lowest_id","partitions":2,"memory_bytes":4096,"cluster_column":false}"#,
        )
        .unwrap();
        assert_eq!(
            (old.kind.clone(), old.max_rounds),
            (DedupPhaseKind::Exact, 32)
        );
        assert_eq!(DedupParams::from(&old).kind, DedupKind::Exact);
    }

    #[test]
    fn check_names_the_param_in_its_message() {
        let schema = Schema::new(vec![Field::new("content_key", DataType::Utf8, true)]);
        let p = params(Keep::LowestId, DedupKind::Exact, None, false);
        let e = p.check(&schema).unwrap_err();
        assert!(matches!(e, ParamsError::KeyType { .. }));
        assert!(
            e.to_string()
                .starts_with("params.key: column \"content_key\" is Utf8")
        );
        let p = params(
            Keep::Highest("q".into()),
            DedupKind::Phash { radius: 2 },
            None,
            false,
        );
        let schema = Schema::new(vec![Field::new("content_key", DataType::UInt64, true)]);
        assert_eq!(
            p.check(&schema).unwrap_err().to_string(),
            "params.keep.highest: no column \"q\""
        );
    }
}
