//! The operator interface: one [`Operator`] trait (schema in → fields out, assets,
//! batch in → columns and per-record verdicts), typed params declared once per
//! operator ([`params`]), a registry by name, building a spec's stages
//! ([`build_stages`]), and [`run_stage`], which applies one operator to one batch.
//! An operator is one file: its params struct, its build, its schema check, the
//! kernel call, its tests. Operators never do I/O: the worker fetches their assets.
pub mod c4_quality;
#[cfg(feature = "onnx")]
pub mod clip_embed;
pub mod clip_score_filter;
#[cfg(test)]
mod conformance;
pub mod dedup;
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
pub mod model_params;
#[cfg(feature = "onnx")]
pub mod nsfw_score;
#[cfg(feature = "onnx")]
pub mod onnx;
pub mod params;
pub mod pii_redact;
mod reference;
pub mod text_length;
pub mod throttle;
pub mod url_filter;

pub use reference::{describe, reference_markdown};

use crate::records::Reject;
use crate::spec::reader::{Obj, Sink, SpecErrors};
use crate::spec::{OperatorCheck, Spec, UnknownOperator};
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use std::sync::Arc;

/// An error that fails the whole batch (and so the task attempt); per-record problems
/// are rejects instead.
#[derive(Debug, thiserror::Error)]
#[error("operator {operator}: {message}")]
pub struct OpError {
    pub operator: String,
    pub message: String,
}

impl OpError {
    /// The error of stage `stage`.
    pub fn new(stage: &str, e: impl std::fmt::Display) -> OpError {
        OpError {
            operator: stage.to_string(),
            message: e.to_string(),
        }
    }
}

/// Why an operator's output fields do not fit the input schema (reported at
/// planning, at the param's path: `stages[2].params.field: ...`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    /// A column the operator reads is not in the input.
    #[error("params.{param}: no column {column:?}{hint}")]
    MissingColumn {
        param: String,
        column: String,
        /// The rest of the message: ` in the input (columns: id, text)`, or which
        /// stage would add the column.
        hint: String,
    },
    /// A column it reads has another type.
    #[error("params.{param}: column {column:?} is {found}, {expected}")]
    WrongType {
        param: String,
        column: String,
        found: DataType,
        /// `expected a string`, `not numeric`, ...
        expected: String,
    },
    /// A column the operator writes (and does not rewrite) is already in the input.
    #[error("the input already has a {0:?} column")]
    Clash(String),
    /// An added field is named like an input column the operator does not replace.
    #[error("adds column {0:?}, which already exists")]
    Exists(String),
    /// A check written before this type (the dedup stage's); its message starts
    /// with the param path.
    #[error("{0}")]
    Other(String),
}

impl SchemaError {
    /// `params.x` of a missing column, listing the input's columns.
    pub fn missing(param: &str, column: &str, what: &str, input: &Schema) -> SchemaError {
        let cols: Vec<&str> = input.fields().iter().map(|f| f.name().as_str()).collect();
        SchemaError::MissingColumn {
            param: param.to_string(),
            column: column.to_string(),
            hint: format!("{what} in the input (columns: {})", cols.join(", ")),
        }
    }
}

/// Why an operator could not process a batch: the batch fails (and with it the task
/// attempt, which is retried), unlike a record's reject.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("no column {0:?}")]
    MissingColumn(String),
    #[error("column {column:?} is not {expected}")]
    WrongType {
        column: String,
        expected: &'static str,
    },
    /// `process` before `load` (the worker loads every asset first).
    #[error("{0} used before its assets were loaded")]
    NotLoaded(&'static str),
    #[error(transparent)]
    Arrow(#[from] ArrowError),
    /// A model's runtime failed (ONNX Runtime's message).
    #[error("{0}")]
    Model(String),
}

/// Why an operator could not take its fetched assets.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A list or model file that does not parse.
    #[error("{param} ({uri}): {message}")]
    Asset {
        param: String,
        uri: String,
        message: String,
    },
    #[error("{0}")]
    Invalid(String),
}

/// Why an operator drops a record.
#[derive(Debug, Clone, PartialEq)]
pub struct Drop {
    pub reason: &'static str,
    pub detail: Option<String>,
}

/// A file an operator needs (a block list, a model), named by a param. The worker
/// fetches it (operators do no I/O) and hands the bytes to `load` before any batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asset {
    /// The param that names it, for error messages (`params.domains[0]`).
    pub param: String,
    pub uri: String,
}

/// What an operator made of one batch.
#[derive(Debug, Default)]
pub struct Output {
    /// One array per output field (in `output_fields` order), each as long as the batch.
    pub columns: Vec<ArrayRef>,
    /// Per record: `None` keeps it, `Some` drops it with a reason. `None` here: the
    /// operator keeps every record (it only adds columns).
    pub verdicts: Option<Vec<Option<Drop>>>,
}

impl Output {
    /// Added columns, every record kept.
    pub fn columns(columns: Vec<ArrayRef>) -> Output {
        Output {
            columns,
            verdicts: None,
        }
    }
    /// Verdicts only, no column added.
    pub fn verdicts(verdicts: Vec<Option<Drop>>) -> Output {
        Output {
            columns: vec![],
            verdicts: Some(verdicts),
        }
    }
    /// Added columns (for every record) and verdicts.
    pub fn annotated(columns: Vec<ArrayRef>, verdicts: Vec<Option<Drop>>) -> Output {
        Output {
            columns,
            verdicts: Some(verdicts),
        }
    }
}

/// One operator of a stage: built from its params (see [`OpDef`]), bound to the
/// input schema at planning, loaded with its assets by the worker, then run on
/// batches. Filters, refiners and dedup-key producers are all operators: a filter
/// returns verdicts, a refiner columns, a key producer its `<stage>_key` column.
pub trait Operator: Send + Sync {
    /// The fields this operator writes given the input schema: appended, or with
    /// [`replaces`](Operator::replaces), rewriting the input column of that name.
    /// An error names the param and the column that do not fit.
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError>;
    /// Whether an output field named like an input column rewrites it (same type)
    /// instead of being refused as a duplicate (C4's line removal rewrites `text`).
    fn replaces(&self) -> bool {
        false
    }
    /// Files to fetch before the first batch.
    fn assets(&self) -> Vec<Asset> {
        vec![]
    }
    /// Receives the fetched assets, in the order `assets` listed them.
    fn load(&self, _assets: &[(Asset, bytes::Bytes)]) -> Result<(), LoadError> {
        Ok(())
    }
    /// The output columns (for every record, dropped ones too) and the verdicts.
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError>;
    /// Integer output columns worth a distribution in stats and the report (float
    /// columns always get one).
    fn histograms(&self) -> Vec<String> {
        vec![]
    }
    /// Whether a record's verdict depends on that record alone, so a batch it panics
    /// on may be run record by record and the panicking records quarantined. An
    /// operator whose verdicts hang together (the dedup apply: a quarantined
    /// representative would lose its whole cluster) says no.
    fn splittable(&self) -> bool {
        true
    }
}

/// The old filter interface, kept only for the dedup apply filter
/// (`worker::shuffle::Apply`) until the dedup subsystem implements [`Operator`]
/// itself; [`FilterOp`] adapts it.
pub trait Filter: Send + Sync {
    fn check(&self, input: &Schema) -> Result<(), String>;
    fn filter(&self, batch: &RecordBatch) -> Result<Vec<Option<Drop>>, String>;
    fn added_fields(&self, _input: &Schema) -> Vec<Field> {
        vec![]
    }
    fn annotate(&self, batch: &RecordBatch) -> Result<(Vec<ArrayRef>, Vec<Option<Drop>>), String> {
        Ok((vec![], self.filter(batch)?))
    }
    fn splittable(&self) -> bool {
        true
    }
}

/// A [`Filter`] as an [`Operator`].
pub struct FilterOp(pub Box<dyn Filter>);

impl Operator for FilterOp {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        self.0.check(input).map_err(SchemaError::Other)?;
        Ok(self.0.added_fields(input))
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let (columns, verdicts) = self.0.annotate(batch).map_err(ProcessError::Model)?;
        Ok(Output::annotated(columns, verdicts))
    }
    fn splittable(&self) -> bool {
        self.0.splittable()
    }
}

/// The bytes of decoded pixels the image stages' shared cache may hold per process.
pub fn image_decode_cache_bytes() -> usize {
    image_common::CACHE_BYTES
}

/// Builds an operator of stage `stage` from its params, recording every error in
/// the reader's sink (the caller refuses unknown keys with `finish`).
pub type BuildFn = fn(stage: &str, params: &Obj) -> Option<Box<dyn Operator>>;

/// A registry entry.
pub struct OpDef {
    pub name: &'static str,
    pub summary: &'static str,
    /// Every param with its type, default and meaning (`mdf ops NAME`,
    /// docs/OPERATORS.md).
    pub params: fn() -> Vec<params::ParamDoc>,
    /// The smallest params that build it (JSON), for the docs and the conformance
    /// test.
    pub example: &'static str,
    /// The cargo feature the operator needs, if any.
    pub feature: Option<&'static str>,
    /// `None` in builds without `feature`.
    pub build: Option<BuildFn>,
}

/// Every operator, those of features this build lacks included (they have no build).
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
    model_params::CLIP_EMBED,
    clip_score_filter::DEF,
    model_params::NSFW_SCORE,
];

/// The feature a known operator needs when this build lacks it.
pub fn feature_of(name: &str) -> Option<&'static str> {
    lookup(name).filter(|d| d.build.is_none())?.feature
}

/// An operator this build can run.
pub fn find(name: &str) -> Option<&'static OpDef> {
    lookup(name).filter(|d| d.build.is_some())
}

/// Any registered operator, whether or not this build can run it.
pub fn lookup(name: &str) -> Option<&'static OpDef> {
    REGISTRY.iter().find(|d| d.name == name)
}

/// The operators this build can run.
pub fn names() -> Vec<&'static str> {
    REGISTRY
        .iter()
        .filter(|d| d.build.is_some())
        .map(|d| d.name)
        .collect()
}

/// The registry as the spec sees it while validating: every stage's operator name
/// and params are checked here, so errors are reported with the rest of the spec's.
pub struct Catalog;

impl OperatorCheck for Catalog {
    fn check(&self, stage: &str, op: &str, params: &Obj) -> Result<(), UnknownOperator> {
        build_one(stage, op, params).map(|_| ())
    }
}

fn build_one(
    stage: &str,
    op: &str,
    params: &Obj,
) -> Result<Option<Box<dyn Operator>>, UnknownOperator> {
    let Some(build) = find(op).and_then(|d| d.build) else {
        return Err(match feature_of(op) {
            Some(f) => UnknownOperator(format!(
                "operator {op:?} needs mdf built with `--features {f}` (this build has no {f} support)"
            )),
            None => UnknownOperator(format!(
                "unknown operator {op:?}, expected one of: {}",
                names().join(", ")
            )),
        });
    };
    let built = build(stage, params);
    params.finish();
    Ok(built)
}

/// A spec's stages built into operators, in stage order (assets not loaded yet).
/// Every error is reported at once, each at its field path.
pub fn build_stages(spec: &Spec) -> Result<Vec<Arc<dyn Operator>>, SpecErrors> {
    let sink = Sink::default();
    let mut out = Vec::new();
    for (i, st) in spec.stages.iter().enumerate() {
        let path = format!("stages[{i}]");
        let o = Obj::new(Some(&st.params), &format!("{path}.params"), &sink);
        let before = sink.len();
        match build_one(&st.name, &st.op, &o) {
            Ok(Some(op)) if sink.len() == before => out.push(Arc::from(op)),
            Ok(_) => {}
            Err(e) => sink.error(&format!("{path}.op"), e.0),
        }
    }
    if sink.is_empty() {
        Ok(out)
    } else {
        Err(sink.into_errors())
    }
}

/// The assets of each stage of `spec`, in stage order (none for a stage that does not
/// build: validation reports it).
pub fn stage_assets(spec: &Spec) -> Vec<Vec<Asset>> {
    spec.stages
        .iter()
        .map(|st| {
            let sink = Sink::default();
            let o = Obj::new(Some(&st.params), "params", &sink);
            match build_one(&st.name, &st.op, &o) {
                Ok(Some(op)) => op.assets(),
                _ => vec![],
            }
        })
        .collect()
}

/// The params of the dedup stage `i` of `spec`, if it is one (a shim until the dedup
/// subsystem parses its own params).
pub fn dedup_params(spec: &Spec, i: usize) -> Option<dedup::DedupParams> {
    let st = spec
        .stages
        .get(i)
        .filter(|s| s.op == crate::spec::DEDUP_OP)?;
    let sink = Sink::default();
    dedup::parse(&Obj::new(Some(&st.params), "params", &sink))
}

/// The dedup stage that ends a pipeline phase, if one does, with its params.
pub fn dedup_ending(spec: &Spec, phase: &[usize]) -> Option<(usize, dedup::DedupParams)> {
    let &i = phase.last()?;
    Some((i, dedup_params(spec, i)?))
}

/// The schema after a stage, or what does not fit.
pub fn output_schema(op: &dyn Operator, input: &SchemaRef) -> Result<SchemaRef, SchemaError> {
    let replaces = op.replaces();
    let added = op.output_fields(input)?;
    let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
    for f in added {
        match input.index_of(f.name()) {
            Ok(i) if replaces && input.field(i).data_type() == f.data_type() => fields[i] = f,
            Ok(_) => return Err(SchemaError::Exists(f.name().clone())),
            Err(_) => fields.push(f),
        }
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// Applies one stage to a batch: the kept rows (with added columns, in `out_schema`)
/// and the rejects.
pub fn run_stage(
    stage: &str,
    op: &dyn Operator,
    batch: RecordBatch,
    out_schema: &SchemaRef,
    keep_records: bool,
) -> Result<(RecordBatch, Vec<Reject>), OpError> {
    run_stage_observed(stage, op, batch, out_schema, keep_records, &mut |_| {})
}

/// The columns whose distributions a stage records (see [`run_stage_observed`]):
/// every float column it writes (scores) and the integer ones its operator names
/// (lengths, sizes; not hashes).
pub fn histogram_columns(op: &dyn Operator, input: &Schema) -> Vec<String> {
    let named = op.histograms();
    op.output_fields(input)
        .unwrap_or_default()
        .iter()
        .filter(|f| {
            matches!(f.data_type(), DataType::Float32 | DataType::Float64)
                || named.contains(f.name())
        })
        .map(|f| f.name().clone())
        .collect()
}

/// [`run_stage`], handing `observe` the batch with the stage's columns added and no
/// row dropped yet (an operator's scores for the records it rejects too).
pub fn run_stage_observed(
    stage: &str,
    op: &dyn Operator,
    batch: RecordBatch,
    out_schema: &SchemaRef,
    keep_records: bool,
    observe: &mut dyn FnMut(&RecordBatch),
) -> Result<(RecordBatch, Vec<Reject>), OpError> {
    let err = |e: &dyn std::fmt::Display| OpError::new(stage, e);
    inject_panic(stage, &batch);
    let Output { columns, verdicts } = op.process(&batch).map_err(|e| err(&e))?;
    if let Some(v) = &verdicts
        && v.len() != batch.num_rows()
    {
        return Err(err(&"returned the wrong number of verdicts"));
    }
    // Rejected records are kept as they arrived, before any rewrite.
    let original = batch.clone();
    let batch = if columns.is_empty() {
        batch
    } else {
        let mut cols = batch.columns().to_vec();
        let in_schema = batch.schema();
        // Output fields in order: replaced ones keep their position, new ones follow.
        let fields = op.output_fields(&in_schema).map_err(|e| err(&e))?;
        if fields.len() != columns.len() {
            return Err(err(&"returned the wrong number of columns"));
        }
        for (field, a) in fields.iter().zip(columns) {
            match in_schema.index_of(field.name()) {
                Ok(i) if op.replaces() => cols[i] = a,
                _ => cols.push(a),
            }
        }
        RecordBatch::try_new(out_schema.clone(), cols)
            .map_err(|e| err(&format!("produced a bad batch: {e}")))?
    };
    observe(&batch);
    let Some(verdicts) = verdicts.filter(|v| v.iter().any(Option::is_some)) else {
        return Ok((batch, vec![]));
    };
    let keep = BooleanArray::from(verdicts.iter().map(Option::is_none).collect::<Vec<_>>());
    // The rejected rows are copied only when their records are kept.
    let records = if keep_records {
        let dropped_mask =
            BooleanArray::from(verdicts.iter().map(Option::is_some).collect::<Vec<_>>());
        let dropped = arrow_select::filter::filter_record_batch(&original, &dropped_mask)
            .map_err(|e| err(&e))?;
        crate::records::rows_as_json(&dropped)
    } else {
        vec![]
    };
    let ids = id_column(&original).map_err(|e| err(&e))?;
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
    let kept = arrow_select::filter::filter_record_batch(&batch, &keep).map_err(|e| err(&e))?;
    Ok((kept, rejects))
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

fn id_column(batch: &RecordBatch) -> Result<&StringArray, ProcessError> {
    batch
        .column_by_name(crate::records::ID)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or(ProcessError::WrongType {
            column: crate::records::ID.to_string(),
            expected: "a string id column",
        })
}

/// Checks that the column named by param `param` is a string column of `input`.
pub fn require_text_param(input: &Schema, param: &str, field: &str) -> Result<(), SchemaError> {
    match input.field_with_name(field) {
        Ok(f) if f.data_type() == &DataType::Utf8 => Ok(()),
        Ok(f) => Err(SchemaError::WrongType {
            param: param.to_string(),
            column: field.to_string(),
            found: f.data_type().clone(),
            expected: "expected a string".into(),
        }),
        Err(_) => Err(SchemaError::missing(param, field, "", input)),
    }
}

/// Checks that `field` (param `field`) is a string column of `input`.
pub fn require_text(input: &Schema, field: &str) -> Result<(), SchemaError> {
    require_text_param(input, "field", field)
}

/// Verdicts of a per-document rule over a text column, in parallel: a null text is
/// dropped as `missing_text`, otherwise `rule` names the reason to drop or keeps.
pub fn per_text(
    batch: &RecordBatch,
    field: &str,
    rule: impl Fn(&str) -> Option<&'static str> + Sync,
) -> Result<Vec<Option<Drop>>, ProcessError> {
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
) -> Result<Vec<Option<&'a str>>, ProcessError> {
    let col = batch
        .column_by_name(field)
        .ok_or_else(|| ProcessError::MissingColumn(field.to_string()))?;
    let arr =
        col.as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| ProcessError::WrongType {
                column: field.to_string(),
                expected: "a string",
            })?;
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

    /// Builds an operator of stage `stage` from JSON params; returns it or the error
    /// messages.
    pub fn build_as(
        def: &super::OpDef,
        stage: &str,
        params: serde_json::Value,
    ) -> Result<Box<dyn super::Operator>, Vec<String>> {
        let sink = Sink::default();
        let o = Obj::new(Some(&params), "params", &sink);
        let op = (def.build.expect("built in this build"))(stage, &o);
        o.finish();
        if sink.is_empty() {
            Ok(op.expect("built"))
        } else {
            Err(sink.into_errors().0.iter().map(|e| e.to_string()).collect())
        }
    }

    /// [`build_as`] a stage named like the operator.
    pub fn build(
        def: &super::OpDef,
        params: serde_json::Value,
    ) -> Result<Box<dyn super::Operator>, Vec<String>> {
        build_as(def, def.name, params)
    }

    /// A batch of `id` and an `image` column of encoded bytes.
    pub fn image_batch(images: &[Option<&[u8]>]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("image", DataType::Binary, true),
        ]));
        let ids: Vec<String> = (0..images.len()).map(|i| format!("r{i}")).collect();
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(ids)),
                Arc::new(arrow_array::BinaryArray::from(images.to_vec())),
            ],
        )
        .unwrap()
    }

    /// A `w`×`h` PNG: a gradient, or one flat grey when `flat`.
    pub fn png(w: u32, h: u32, flat: bool) -> Vec<u8> {
        let img = image::RgbImage::from_fn(w, h, |x, y| {
            if flat {
                image::Rgb([128, 128, 128])
            } else {
                image::Rgb([(x * 7) as u8, (y * 11) as u8, ((x + y) * 3) as u8])
            }
        });
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
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
