//! `text_model`: any ONNX text encoder (BERT, XLM-R, ModernBERT-style inputs:
//! `input_ids`, `attention_mask` and, when the model declares it, `token_type_ids`)
//! with its Hugging Face `tokenizer.json`: texts truncated to `max_length`, sorted by
//! token count and cut into batches of `batch_size` padded to their longest (results
//! in input order). Writes a pooled embedding (`task: embedding`: `cls` or masked
//! `mean` of `[N, T, H]` hidden states, or a `[N, H]` pooled output as is; optionally
//! L2-normalised) or scores from logits (`task: scores`: one Float32 column per label,
//! raw, softmax or sigmoid; with `int_score`, FineWeb-Edu's integer grade). A null
//! text gets null outputs. At load the model's inputs, their types, the output's shape
//! and the tokenizer's vocabulary (one probe inference with its highest id) are checked
//! against the params: a mismatch is refused naming the param.
use super::clip_embed::{embedding_array, embedding_type};
use super::model_params::TextModelParams;
use super::onnx::{Graph, RuntimeParams};
use super::params::Params;
use super::{
    Asset, LoadError, ModelError, Operator, Output, ProcessError, SchemaError, require_text,
    text_values,
};
use crate::kernels::encoder::{Activation, Pooling, activate, int_score, pool};
use crate::kernels::hf_tokenizer::Tokenizer;
use crate::kernels::vision::l2_normalize;
use crate::spec::reader::Obj;
use arrow_array::{ArrayRef, Float32Array, Int32Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use ort::value::TensorElementType;
use std::sync::{Arc, OnceLock};

const IDS: &str = "input_ids";
const MASK: &str = "attention_mask";
const TYPES: &str = "token_type_ids";

#[derive(Debug, Clone, PartialEq)]
enum Task {
    Embedding {
        pooling: Pooling,
        normalize: bool,
        dim: usize,
        column: String,
    },
    Scores {
        labels: Vec<String>,
        activation: Activation,
        int_score: bool,
    },
}

struct Loaded {
    graph: Graph,
    tokenizer: Tokenizer,
    output: String,
    pad_id: u32,
    token_types: bool,
}

struct TextModel {
    field: String,
    model_uri: String,
    tokenizer_uri: String,
    output: Option<String>,
    max_length: usize,
    batch_size: usize,
    pad_id: Option<u32>,
    task: Task,
    runtime: RuntimeParams,
    loaded: OnceLock<Loaded>,
}

/// Builds the operator (registered in `ops`, params in `model_params`).
pub fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = TextModelParams::read(o)?;
    let task = match p.task.as_str() {
        "embedding" => {
            let pooling = match p.pooling.as_str() {
                "cls" => Pooling::Cls,
                "mean" => Pooling::Mean,
                other => {
                    o.error(
                        "pooling",
                        format!("unknown pooling {other:?}, expected cls or mean"),
                    );
                    Pooling::Mean
                }
            };
            for k in ["labels", "int_score"] {
                if o.has(k) {
                    o.error(k, "only with task: scores");
                }
            }
            Task::Embedding {
                pooling,
                normalize: p.normalize,
                dim: p.dim,
                column: p.column,
            }
        }
        "scores" => {
            let activation = match p.activation.as_str() {
                "raw" => Activation::Raw,
                "softmax" => Activation::Softmax,
                "sigmoid" => Activation::Sigmoid,
                other => {
                    o.error(
                        "activation",
                        format!("unknown activation {other:?}, expected raw, softmax or sigmoid"),
                    );
                    Activation::Raw
                }
            };
            for k in ["pooling", "normalize", "dim", "column"] {
                if o.has(k) {
                    o.error(k, "only with task: embedding");
                }
            }
            let labels = if p.labels.is_empty() {
                vec!["score".to_string()]
            } else {
                p.labels
            };
            for (i, l) in labels.iter().enumerate() {
                if labels[..i].contains(l) || (p.int_score && l == "int_score") {
                    o.error("labels", format!("column {l:?} is named twice"));
                }
            }
            Task::Scores {
                labels,
                activation,
                int_score: p.int_score,
            }
        }
        other => {
            o.error(
                "task",
                format!("unknown task {other:?}, expected embedding or scores"),
            );
            return None;
        }
    };
    Some(Box::new(TextModel {
        field: p.field,
        model_uri: p.model,
        tokenizer_uri: p.tokenizer,
        output: p.output,
        max_length: p.max_length,
        batch_size: p.batch_size,
        pad_id: p.pad_id,
        task,
        runtime: RuntimeParams::from_params(&p.runtime, o),
        loaded: OnceLock::new(),
    }))
}

fn model_err(m: String) -> LoadError {
    LoadError::Model(ModelError::Model(m))
}

impl TextModel {
    fn load_model(&self, model: &[u8], tok: &[u8]) -> Result<Loaded, LoadError> {
        let tokenizer = Tokenizer::from_bytes(tok)
            .and_then(|t| t.truncating(self.max_length))
            .map_err(|e| LoadError::Asset {
                param: "params.tokenizer".into(),
                uri: self.tokenizer_uri.clone(),
                message: e.0,
            })?;
        let what = format!("params.model ({})", self.model_uri);
        let graph = Graph::load(model, &self.runtime, &what)?;
        let names: Vec<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
        for want in [IDS, MASK] {
            if !names.contains(&want) {
                return Err(model_err(format!(
                    "{what}: no input {want:?} (its inputs: {names:?}); a text encoder takes \
                     input_ids, attention_mask and optionally token_type_ids"
                )));
            }
        }
        for i in &graph.inputs {
            if ![IDS, MASK, TYPES].contains(&i.name.as_str()) {
                return Err(model_err(format!(
                    "{what}: unexpected input {:?} (mdf feeds input_ids, attention_mask and \
                     token_type_ids)",
                    i.name
                )));
            }
            if !matches!(i.ty, TensorElementType::Int64 | TensorElementType::Int32) {
                return Err(model_err(format!(
                    "{what}: input {:?} is {:?}, expected int64 (or int32)",
                    i.name, i.ty
                )));
            }
            if i.shape.len() != 2 {
                return Err(model_err(format!(
                    "{what}: input {:?} has shape {:?}, expected [batch, tokens]",
                    i.name, i.shape
                )));
            }
        }
        let output = match &self.output {
            Some(o) => graph.outputs.iter().find(|x| &x.name == o).ok_or_else(|| {
                let have: Vec<&str> = graph.outputs.iter().map(|x| x.name.as_str()).collect();
                model_err(format!(
                    "params.output: {what} has no output {o:?} (its outputs: {have:?})"
                ))
            })?,
            None => graph
                .outputs
                .first()
                .ok_or_else(|| model_err(format!("{what}: the model has no output")))?,
        };
        let ranks: &[usize] = match self.task {
            Task::Embedding { .. } => &[2, 3],
            Task::Scores { .. } => &[2],
        };
        if !ranks.contains(&output.shape.len()) {
            return Err(model_err(format!(
                "{what}: output {:?} has shape {:?}; task {} expects {}",
                output.name,
                output.shape,
                self.task_name(),
                match self.task {
                    Task::Embedding { .. } => "[N, T, H] hidden states or a [N, H] pooled output",
                    Task::Scores { .. } => "[N, labels] logits",
                }
            )));
        }
        let vocab = tokenizer.vocab_size();
        let pad_id = self.pad_id.unwrap_or_else(|| tokenizer.default_pad_id());
        if pad_id as usize >= vocab {
            return Err(LoadError::Invalid(format!(
                "params.pad_id: {pad_id} is outside the tokenizer's vocabulary ({vocab} tokens)"
            )));
        }
        let loaded = Loaded {
            token_types: names.contains(&TYPES),
            output: output.name.clone(),
            graph,
            tokenizer,
            pad_id,
        };
        self.probe(&loaded, vocab, &what)?;
        Ok(loaded)
    }

    fn task_name(&self) -> &'static str {
        match self.task {
            Task::Embedding { .. } => "embedding",
            Task::Scores { .. } => "scores",
        }
    }

    /// The width of one text's result (`dim`, or the number of labels).
    fn width(&self) -> usize {
        match &self.task {
            Task::Embedding { dim, .. } => *dim,
            Task::Scores { labels, .. } => labels.len(),
        }
    }

    /// One inference on the tokenizer's highest id: a vocabulary larger than the
    /// model's embedding table fails here (ONNX Runtime bounds-checks its gathers),
    /// and the output's width is checked against `dim` or `labels`.
    fn probe(&self, l: &Loaded, vocab: usize, what: &str) -> Result<(), LoadError> {
        let ids = vec![vocab.saturating_sub(1) as i64, l.pad_id as i64];
        let (shape, _) = self
            .run(l, ids, vec![1, 1], vec![0, 0], 1, 2)
            .map_err(|e| {
                model_err(format!(
                    "params.tokenizer ({}) does not fit {what}: a probe with its highest id \
                     ({}) failed: {e}",
                    self.tokenizer_uri,
                    vocab.saturating_sub(1)
                ))
            })?;
        let width = shape.last().copied().unwrap_or(0);
        if width != self.width() {
            let param = match self.task {
                Task::Embedding { .. } => "params.dim",
                Task::Scores { .. } => "params.labels",
            };
            return Err(model_err(format!(
                "{param}: {what} returns {width} values per text (output {:?}, shape {shape:?}), \
                 not {}",
                l.output,
                self.width()
            )));
        }
        Ok(())
    }

    fn run(
        &self,
        l: &Loaded,
        ids: Vec<i64>,
        mask: Vec<i64>,
        types: Vec<i64>,
        rows: usize,
        len: usize,
    ) -> Result<(Vec<usize>, Vec<f32>), ModelError> {
        let mut feeds = vec![(IDS, ids), (MASK, mask)];
        if l.token_types {
            feeds.push((TYPES, types));
        }
        l.graph.run_ints(feeds, &[rows, len], &l.output)
    }

    /// Per present text (in input order), its `width()` values.
    fn infer(&self, l: &Loaded, texts: &[&str]) -> Result<Vec<Vec<f32>>, ProcessError> {
        let batches = l
            .tokenizer
            .padded_batches(texts, self.batch_size, l.pad_id)
            .map_err(|e| ModelError::Model(format!("params.tokenizer: {e}")))?;
        let width = self.width();
        let mut out = vec![Vec::new(); texts.len()];
        for b in batches {
            let mask = b.mask.clone();
            let (shape, mut v) = self.run(l, b.ids, b.mask, b.type_ids, b.rows, b.len)?;
            let bad = || {
                ModelError::Inference(format!(
                    "output {:?} has shape {shape:?} for {} texts of {} tokens, expected {} \
                     values each",
                    l.output, b.rows, b.len, width
                ))
            };
            if shape.first() != Some(&b.rows) || shape.last() != Some(&width) {
                return Err(bad().into());
            }
            match &self.task {
                Task::Embedding {
                    pooling, normalize, ..
                } => {
                    if shape.len() == 3 {
                        if shape[1] != b.len {
                            return Err(bad().into());
                        }
                        v = pool(&v, &mask, b.rows, b.len, width, *pooling);
                    }
                    if *normalize {
                        v.chunks_mut(width).for_each(l2_normalize);
                    }
                }
                Task::Scores { activation, .. } => activate(&mut v, width, *activation),
            }
            for (r, chunk) in v.chunks(width).enumerate() {
                out[b.order[r]] = chunk.to_vec();
            }
        }
        Ok(out)
    }
}

impl Operator for TextModel {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        require_text(input, &self.field)?;
        Ok(match &self.task {
            Task::Embedding { dim, column, .. } => {
                vec![Field::new(column, embedding_type(*dim), true)]
            }
            Task::Scores {
                labels, int_score, ..
            } => {
                let mut f: Vec<Field> = labels
                    .iter()
                    .map(|l| Field::new(l, DataType::Float32, true))
                    .collect();
                if *int_score {
                    f.push(Field::new("int_score", DataType::Int32, true));
                }
                f
            }
        })
    }
    fn histograms(&self) -> Vec<String> {
        match &self.task {
            Task::Scores {
                int_score: true, ..
            } => vec!["int_score".into()],
            _ => vec![],
        }
    }
    fn assets(&self) -> Vec<Asset> {
        vec![
            Asset {
                param: "params.model".into(),
                uri: self.model_uri.clone(),
            },
            Asset {
                param: "params.tokenizer".into(),
                uri: self.tokenizer_uri.clone(),
            },
        ]
    }
    fn load(&self, assets: &[(Asset, bytes::Bytes)]) -> Result<(), LoadError> {
        let [(_, model), (_, tok)] = assets else {
            return Err(LoadError::Invalid(
                "params.model and params.tokenizer were not fetched".into(),
            ));
        };
        let l = self.load_model(model, tok)?;
        let _ = self.loaded.set(l);
        Ok(())
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let l = self
            .loaded
            .get()
            .ok_or(ProcessError::NotLoaded("text_model"))?;
        let texts = text_values(batch, &self.field)?;
        let present: Vec<&str> = texts.iter().flatten().copied().collect();
        let got = if present.is_empty() {
            vec![]
        } else {
            self.infer(l, &present)?
        };
        let mut it = got.iter();
        let rows: Vec<Option<&[f32]>> = texts
            .iter()
            .map(|t| t.map(|_| it.next().expect("a result per text").as_slice()))
            .collect();
        let cols: Vec<ArrayRef> = match &self.task {
            Task::Embedding { dim, .. } => vec![embedding_array(&rows, *dim)?],
            Task::Scores {
                labels, int_score, ..
            } => {
                let mut c: Vec<ArrayRef> = (0..labels.len())
                    .map(|k| {
                        Arc::new(Float32Array::from(
                            rows.iter().map(|r| r.map(|v| v[k])).collect::<Vec<_>>(),
                        )) as ArrayRef
                    })
                    .collect();
                if *int_score {
                    c.push(Arc::new(Int32Array::from(
                        rows.iter()
                            .map(|r| r.map(|v| self::int_score(v[0])))
                            .collect::<Vec<_>>(),
                    )));
                }
                c
            }
        };
        Ok(Output::columns(cols))
    }
}
