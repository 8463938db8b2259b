//! The operator interface: one trait each for refiners (add columns), filters
//! (keep or drop with a reason) and dedup-key producers, a registry by name, and
//! [`run_stage`], which applies one operator to one batch. An operator is one file:
//! its params (parsed with the spec reader, unknown keys refused), its schema check,
//! the kernel call, its tests. Operators never do I/O.
pub mod c4_quality;
#[cfg(feature = "onnx")]
pub mod clip_embed;
pub mod clip_score_filter;
/// The `dedup` stage lives in the dedup subsystem (`crate::dedup::params`); this
/// alias keeps the registry entry and `Operator::Dedup` where they are until the
/// operator traits are reworked.
pub use crate::dedup::params as dedup;
pub mod exact_key;
pub mod fineweb_quality;
pub mod gopher_quality;
pub mod gopher_repetition;
pub mod html_extract;
mod image_common;
pub mod image_hash;
pub mod image_metadata;
pub mod image_quality;
pub mod image_quality_filter;
pub mod language_filter;
pub mod length_filter;
pub mod minhash;
#[cfg(feature = "onnx")]
pub mod nsfw_score;
#[cfg(feature = "onnx")]
pub mod onnx;
pub mod pii_redact;
pub mod text_length;
pub mod throttle;
pub mod url_filter;

use crate::records::Reject;
use crate::spec::reader::Obj;
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use std::sync::Arc;

/// An error that fails the whole batch (and so the task attempt); per-record problems
/// are rejects instead.
#[derive(Debug, thiserror::Error)]
#[error("operator {operator}: {message}")]
pub struct OpError {
    pub operator: String,
    pub message: String,
}

/// Why a filter drops a record.
#[derive(Debug, Clone, PartialEq)]
pub struct Drop {
    pub reason: &'static str,
    pub detail: Option<String>,
}

/// Adds columns computed from each record (or rewrites them, see `replaces`).
pub trait Refiner: Send + Sync {
    /// The fields appended, given the input schema; `Err` names the offending param.
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, String>;
    /// Whether an output field named like an input column replaces it (same type)
    /// instead of being refused as a duplicate.
    fn replaces(&self) -> bool {
        false
    }
    /// One array per output field, each as long as the batch.
    fn refine(&self, batch: &RecordBatch) -> Result<Vec<ArrayRef>, String>;
    /// Integer output columns worth a distribution in stats and the report (float
    /// columns always get one).
    fn histograms(&self) -> Vec<String> {
        vec![]
    }
}

/// A file an operator needs (a block list, a model), named by a param. The worker
/// fetches it (operators do no I/O) and hands the bytes to `load` before any batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asset {
    /// The param that names it, for error messages (`params.domains[0]`).
    pub param: String,
    pub uri: String,
}

/// Keeps or drops each record.
pub trait Filter: Send + Sync {
    fn check(&self, input: &Schema) -> Result<(), String>;
    /// Files to fetch before the first batch.
    fn assets(&self) -> Vec<Asset> {
        vec![]
    }
    /// Receives the fetched assets, in the order `assets` listed them.
    fn load(&self, _assets: &[(Asset, bytes::Bytes)]) -> Result<(), String> {
        Ok(())
    }
    /// `None` keeps the row; `Some` drops it with a reason.
    fn filter(&self, batch: &RecordBatch) -> Result<Vec<Option<Drop>>, String>;
    /// Columns a filter also writes for the rows it keeps (e.g. `language`).
    fn added_fields(&self, _input: &Schema) -> Vec<Field> {
        vec![]
    }
    /// Whether an added field named like an input column rewrites it (C4's line
    /// removal rewrites `text`).
    fn replaces(&self) -> bool {
        false
    }
    /// The added columns (for every row) and the verdicts; the default adds nothing.
    fn annotate(&self, batch: &RecordBatch) -> Result<(Vec<ArrayRef>, Vec<Option<Drop>>), String> {
        Ok((vec![], self.filter(batch)?))
    }
    /// Integer added columns worth a distribution (float columns always get one).
    fn histograms(&self) -> Vec<String> {
        vec![]
    }
    /// Whether a record's verdict depends on that record alone, so a batch it panics
    /// on may be run record by record and the panicking records quarantined. A filter
    /// whose verdicts hang together (the dedup apply: a quarantined representative
    /// would lose its whole cluster) says no.
    fn splittable(&self) -> bool {
        true
    }
}

/// Produces a 128-bit deduplication key per record (`None`: the record has no key).
/// The key is added as a `FixedSizeBinary(16)` column named `<stage>_key`, which the
/// dedup shuffle partitions by.
pub trait KeyProducer: Send + Sync {
    fn check(&self, input: &Schema) -> Result<(), String>;
    fn keys(&self, batch: &RecordBatch) -> Result<Vec<Option<u128>>, String>;
}

pub enum Operator {
    Refiner(Box<dyn Refiner>),
    Filter(Box<dyn Filter>),
    Keys(Box<dyn KeyProducer>),
    /// A dedup stage: identity inside its phase; the planner adds the shuffle phases.
    Dedup(dedup::DedupParams),
}

impl Operator {
    pub fn assets(&self) -> Vec<Asset> {
        match self {
            Operator::Filter(f) => f.assets(),
            _ => vec![],
        }
    }
    pub fn load(&self, assets: &[(Asset, bytes::Bytes)]) -> Result<(), String> {
        match self {
            Operator::Filter(f) => f.load(assets),
            _ => Ok(()),
        }
    }
    /// Whether a batch may be run record by record after a panic: refiners and key
    /// producers compute each record alone; a dedup stage must see the whole task.
    pub fn splittable(&self) -> bool {
        match self {
            Operator::Refiner(_) | Operator::Keys(_) => true,
            Operator::Filter(f) => f.splittable(),
            Operator::Dedup(_) => false,
        }
    }
}

impl std::fmt::Debug for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Operator::Refiner(_) => "Refiner",
            Operator::Filter(_) => "Filter",
            Operator::Keys(_) => "KeyProducer",
            Operator::Dedup(_) => "Dedup",
        })
    }
}

/// The bytes of decoded pixels the image stages' shared cache may hold per process.
pub fn image_decode_cache_bytes() -> usize {
    image_common::CACHE_BYTES
}

/// A registry entry.
pub struct OpDef {
    pub name: &'static str,
    pub summary: &'static str,
    /// Parses params; records every error in the reader's sink.
    pub build: fn(&Obj) -> Option<Operator>,
}

pub static REGISTRY: &[OpDef] = &[
    html_extract::DEF,
    text_length::DEF,
    length_filter::DEF,
    exact_key::DEF,
    minhash::DEF,
    dedup::DEF,
    throttle::DEF,
    url_filter::DEF,
    gopher_quality::DEF,
    gopher_repetition::DEF,
    c4_quality::DEF,
    fineweb_quality::DEF,
    language_filter::DEF,
    pii_redact::DEF,
    image_metadata::DEF,
    image_quality::DEF,
    image_quality_filter::DEF,
    image_hash::DEF,
    #[cfg(feature = "onnx")]
    clip_embed::DEF,
    clip_score_filter::DEF,
    #[cfg(feature = "onnx")]
    nsfw_score::DEF,
];

/// Operators that exist only in builds with a cargo feature, and that feature.
const GATED: &[(&str, &str)] = &[("clip_embed", "onnx"), ("nsfw_score", "onnx")];

/// The feature a known operator needs when this build lacks it.
pub fn feature_of(name: &str) -> Option<&'static str> {
    GATED
        .iter()
        .find(|(n, _)| *n == name && find(n).is_none())
        .map(|(_, f)| *f)
}

pub fn find(name: &str) -> Option<&'static OpDef> {
    REGISTRY.iter().find(|d| d.name == name)
}

pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|d| d.name).collect()
}

/// The schema after a stage, or a message naming what does not fit.
pub fn output_schema(stage: &str, op: &Operator, input: &SchemaRef) -> Result<SchemaRef, String> {
    let replaces = match op {
        Operator::Refiner(r) => r.replaces(),
        Operator::Filter(f) => f.replaces(),
        Operator::Keys(_) | Operator::Dedup(_) => false,
    };
    let added = match op {
        Operator::Dedup(d) => {
            d.check(input)?;
            vec![]
        }
        Operator::Refiner(r) => r.output_fields(input)?,
        Operator::Filter(f) => {
            f.check(input)?;
            f.added_fields(input)
        }
        Operator::Keys(k) => {
            k.check(input)?;
            vec![Field::new(
                format!("{stage}_key"),
                DataType::FixedSizeBinary(16),
                true,
            )]
        }
    };
    let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
    for f in added {
        match input.index_of(f.name()) {
            Ok(i) if replaces && input.field(i).data_type() == f.data_type() => fields[i] = f,
            Ok(_) => return Err(format!("adds column {:?}, which already exists", f.name())),
            Err(_) => fields.push(f),
        }
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// Applies one stage to a batch: the kept rows (with added columns, in `out_schema`)
/// and the rejects.
pub fn run_stage(
    stage: &str,
    op: &Operator,
    batch: RecordBatch,
    out_schema: &SchemaRef,
    keep_records: bool,
) -> Result<(RecordBatch, Vec<Reject>), OpError> {
    run_stage_observed(stage, op, batch, out_schema, keep_records, &mut |_| {})
}

/// The columns whose distributions a stage records (see [`run_stage_observed`]):
/// every float column it writes (scores) and the integer ones its operator names
/// (lengths, sizes; not hashes).
pub fn histogram_columns(op: &Operator, input: &Schema) -> Vec<String> {
    let (fields, named) = match op {
        Operator::Refiner(r) => (r.output_fields(input).unwrap_or_default(), r.histograms()),
        Operator::Filter(f) => (f.added_fields(input), f.histograms()),
        Operator::Keys(_) | Operator::Dedup(_) => return vec![],
    };
    fields
        .iter()
        .filter(|f| {
            matches!(f.data_type(), DataType::Float32 | DataType::Float64)
                || named.contains(f.name())
        })
        .map(|f| f.name().clone())
        .collect()
}

/// [`run_stage`], handing `observe` the batch with the stage's columns added and no
/// row dropped yet (a filter's scores for the records it rejects too).
pub fn run_stage_observed(
    stage: &str,
    op: &Operator,
    batch: RecordBatch,
    out_schema: &SchemaRef,
    keep_records: bool,
    observe: &mut dyn FnMut(&RecordBatch),
) -> Result<(RecordBatch, Vec<Reject>), OpError> {
    let err = |message: String| OpError {
        operator: stage.to_string(),
        message,
    };
    inject_panic(stage, &batch);
    match op {
        Operator::Dedup(_) => Ok((batch, vec![])),
        Operator::Refiner(r) => {
            let added = r.refine(&batch).map_err(err)?;
            let mut cols = batch.columns().to_vec();
            let in_schema = batch.schema();
            // Output fields in order: replaced ones keep their position, new ones follow.
            let names: Vec<String> = r
                .output_fields(&in_schema)
                .map_err(err)?
                .iter()
                .map(|f| f.name().clone())
                .collect();
            for (name, a) in names.iter().zip(added) {
                match in_schema.index_of(name) {
                    Ok(i) if r.replaces() => cols[i] = a,
                    _ => cols.push(a),
                }
            }
            let out = RecordBatch::try_new(out_schema.clone(), cols)
                .map_err(|e| err(format!("produced a bad batch: {e}")))?;
            observe(&out);
            Ok((out, vec![]))
        }
        Operator::Keys(k) => {
            let keys = k.keys(&batch).map_err(err)?;
            let arr = arrow_array::FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                keys.iter().map(|k| k.map(|v| v.to_le_bytes())),
                16,
            )
            .map_err(|e| err(e.to_string()))?;
            let mut cols = batch.columns().to_vec();
            cols.push(Arc::new(arr));
            let out = RecordBatch::try_new(out_schema.clone(), cols)
                .map_err(|e| err(format!("produced a bad batch: {e}")))?;
            Ok((out, vec![]))
        }
        Operator::Filter(f) => {
            let (added, verdicts) = f.annotate(&batch).map_err(err)?;
            if verdicts.len() != batch.num_rows() {
                return Err(err("returned the wrong number of verdicts".into()));
            }
            // Rejected records are kept as they arrived, before any rewrite.
            let original = batch.clone();
            let batch = if added.is_empty() {
                batch
            } else {
                let mut cols = batch.columns().to_vec();
                let in_schema = batch.schema();
                for (field, a) in f.added_fields(&in_schema).iter().zip(added) {
                    match in_schema.index_of(field.name()) {
                        Ok(i) if f.replaces() => cols[i] = a,
                        _ => cols.push(a),
                    }
                }
                RecordBatch::try_new(out_schema.clone(), cols)
                    .map_err(|e| err(format!("produced a bad batch: {e}")))?
            };
            observe(&batch);
            if verdicts.iter().all(Option::is_none) {
                return Ok((batch, vec![]));
            }
            let keep = BooleanArray::from(verdicts.iter().map(Option::is_none).collect::<Vec<_>>());
            // The rejected rows are copied only when their records are kept.
            let records = if keep_records {
                let dropped_mask = arrow_array::BooleanArray::from(
                    verdicts.iter().map(Option::is_some).collect::<Vec<_>>(),
                );
                let dropped = arrow_select::filter::filter_record_batch(&original, &dropped_mask)
                    .map_err(|e| err(e.to_string()))?;
                crate::records::rows_as_json(&dropped)
            } else {
                vec![]
            };
            let ids = id_column(&original).map_err(err)?;
            let mut records = records.into_iter();
            let rejects = verdicts
                .into_iter()
                .enumerate()
                .filter_map(|(row, d)| {
                    d.map(|d| Reject {
                        id: ids.value(row).to_string(),
                        reason: d.reason.to_string(),
                        operator: stage.to_string(),
                        detail: d.detail,
                        record: records.next(),
                    })
                })
                .collect();
            let kept = arrow_select::filter::filter_record_batch(&batch, &keep)
                .map_err(|e| err(e.to_string()))?;
            Ok((kept, rejects))
        }
    }
}

/// Panics as `MDF_FAULTS` rule `panic:<stage>:<substring>` says (tests only): when a
/// string value of a record of the batch contains the substring. The panic is a real
/// one, inside the stage, so the worker's handling of operator panics is tested whole.
fn inject_panic(stage: &str, batch: &RecordBatch) {
    for sub in crate::store::fault::panic_rules()
        .iter()
        .filter(|(s, _)| s == stage)
        .map(|(_, sub)| sub)
    {
        let hit = batch.columns().iter().any(|c| {
            c.as_any()
                .downcast_ref::<StringArray>()
                .is_some_and(|a| a.iter().flatten().any(|v| v.contains(sub.as_str())))
        });
        if hit {
            panic!("injected panic in stage {stage}: a record contains {sub:?}");
        }
    }
}

fn id_column(batch: &RecordBatch) -> Result<&StringArray, String> {
    batch
        .column_by_name(crate::records::ID)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| "batch has no string id column".to_string())
}

/// Checks that `field` is a string column of `input`.
pub fn require_text(input: &Schema, field: &str) -> Result<(), String> {
    match input.field_with_name(field) {
        Ok(f) if f.data_type() == &DataType::Utf8 => Ok(()),
        Ok(f) => Err(format!(
            "params.field: column {field:?} is {}, expected a string",
            f.data_type()
        )),
        Err(_) => {
            let cols: Vec<&str> = input.fields().iter().map(|f| f.name().as_str()).collect();
            Err(format!(
                "params.field: no column {field:?} in the input (columns: {})",
                cols.join(", ")
            ))
        }
    }
}

/// Verdicts of a per-document rule over a text column, in parallel: a null text is
/// dropped as `missing_text`, otherwise `rule` names the reason to drop or keeps.
pub fn per_text(
    batch: &RecordBatch,
    field: &str,
    rule: impl Fn(&str) -> Option<&'static str> + Sync,
) -> Result<Vec<Option<Drop>>, String> {
    use rayon::prelude::*;
    let texts = text_values(batch, field)?;
    Ok(texts
        .par_iter()
        .map(|t| match t {
            None => Some(Drop {
                reason: "missing_text",
                detail: None,
            }),
            Some(t) => rule(t).map(|reason| Drop {
                reason,
                detail: None,
            }),
        })
        .collect())
}

/// The values of a string column as options, for kernels.
pub fn text_values<'a>(
    batch: &'a RecordBatch,
    field: &str,
) -> Result<Vec<Option<&'a str>>, String> {
    let col = batch
        .column_by_name(field)
        .ok_or_else(|| format!("no column {field:?}"))?;
    let arr = col
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(|| format!("column {field:?} is not a string"))?;
    Ok((0..arr.len())
        .map(|i| (!arr.is_null(i)).then(|| arr.value(i)))
        .collect())
}

#[cfg(test)]
pub(crate) mod testing {
    use crate::spec::reader::{Obj, Sink};
    use arrow_array::{RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    /// Builds an operator from JSON params; returns it or the error messages.
    pub fn build(
        def: &super::OpDef,
        params: serde_json::Value,
    ) -> Result<super::Operator, Vec<String>> {
        let sink = Sink::default();
        let o = Obj::new(Some(&params), "params", &sink);
        let op = (def.build)(&o);
        o.finish();
        if sink.is_empty() {
            Ok(op.expect("built"))
        } else {
            Err(sink.into_errors().0.iter().map(|e| e.to_string()).collect())
        }
    }

    pub fn text_batch(texts: &[Option<&str>]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("text", DataType::Utf8, true),
        ]));
        let ids: Vec<String> = (0..texts.len()).map(|i| format!("r{i}")).collect();
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(ids)),
                Arc::new(StringArray::from(texts.to_vec())),
            ],
        )
        .unwrap()
    }
}
