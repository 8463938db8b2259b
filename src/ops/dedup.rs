//! `dedup`: the structural stage that ends a phase with a two-pass shuffle (see
//! docs/DEDUP.md). In its own phase it changes nothing: the worker reads the key
//! column of the records that reach it and writes the keys object. The planner adds
//! the reduce and apply phases after it.
use super::{OpDef, Operator};
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
    Some(Operator::Dedup(DedupParams {
        key: key?,
        keep,
        partitions,
        memory_bytes,
        cluster_column,
        against,
    }))
}

impl DedupParams {
    /// The input must carry the key column (16-byte keys) and the `keep` column.
    pub fn check(&self, input: &Schema) -> Result<(), String> {
        match input.field_with_name(&self.key) {
            Ok(f) if f.data_type() == &DataType::FixedSizeBinary(16) => {}
            Ok(f) => {
                return Err(format!(
                    "params.key: column {:?} is {}, not a 16-byte key (add a key stage such as exact_key before dedup)",
                    self.key,
                    f.data_type()
                ));
            }
            Err(_) => {
                return Err(format!(
                    "params.key: no column {:?} (add a key stage such as exact_key before dedup)",
                    self.key
                ));
            }
        }
        if let Keep::Highest(c) = &self.keep {
            match input.field_with_name(c) {
                Ok(f) if f.data_type().is_numeric() => {}
                Ok(f) => {
                    return Err(format!(
                        "params.keep.highest: column {c:?} is {}, not numeric",
                        f.data_type()
                    ));
                }
                Err(_) => return Err(format!("params.keep.highest: no column {c:?}")),
            }
        }
        Ok(())
    }
}
