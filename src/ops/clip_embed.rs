//! `clip_embed`: the image tower of a CLIP-style ONNX model (`model`: a path or URI,
//! fetched by the worker) over the encoded images in `column`: `image_model`'s `clip`
//! preset ([`super::image_model`]: open_clip's bicubic resize of the shorter side,
//! centre crop, CLIP mean/std; its decoding, batching, model checks and pipelining),
//! `batch_size` images per inference call, fp32 or fp16 input as the model declares
//! it, and an L2-normalised `embedding` column (`FixedSizeList<Float32, dim>`). Images
//! that do not decode (or that the preset cannot resize: a strip 64 times longer than
//! wide) are rejects with the reason. While the model runs on one batch, the next is
//! decoded and preprocessed on the CPU threads (one batch ahead, so memory stays
//! bounded), so a GPU never waits on one image at a time.
//!
//! Params: `model` (required), `dim` (the embedding width, default 512; checked against
//! the model), `image_size` (default: the model's input size, else 224), `mean`/`std`,
//! `batch_size` (default 64), `precision` (`auto` | `fp32` | `fp16`: must match the
//! model's input), `column`, `max_pixels`, `max_bytes`, `fast_decode` (default true:
//! JPEGs decoded at the smallest DCT scale that keeps the shorter side ≥ image_size),
//! and the runtime's `library`, `provider` (`cpu` | `cuda`), `device`, `threads`.
//!
//! With a text tower (`text_model`, and `tokenizer`: CLIP's merges file,
//! `bpe_simple_vocab_16e6.txt.gz` from open_clip or CLIP), the captions in
//! `text_column` (default `caption`) are tokenised as open_clip does it
//! ([`crate::kernels::clip_tokenizer`]; `context_length` default: the model's, else 77),
//! embedded in the same batches, and `clip_score` (Float32) is the cosine of the two
//! L2-normalised embeddings, as LAION filtering uses it (`clip_score_filter`); null when
//! the caption is. `text_embedding: true` also keeps the text embeddings.
use super::image_common as ic;
use super::image_model::{ImageModel, Preprocessing, asset, pipelined, precision, triple};
use super::model_head::Head;
pub use super::model_head::{embedding_array, embedding_type};
use super::model_params::ClipEmbedParams;
use super::onnx::{Model, RuntimeParams};
use super::params::Params;
use super::{Asset, Drop, LoadError, ModelError, Operator, Output, ProcessError, SchemaError};
use crate::kernels::FastMap;
use crate::kernels::clip_tokenizer::ClipTokenizer;
use crate::kernels::vision::{CLIP_MEAN, CLIP_STD, Interpolation, Resize, l2_normalize};
use crate::spec::reader::Obj;
use arrow_array::{ArrayRef, Float32Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::{Arc, OnceLock};

/// `image_model`'s `clip` preset with an L2-normalised `embedding`, plus the text tower.
pub struct ClipEmbed {
    image: ImageModel,
    dim: usize,
    text: Option<TextTower>,
}

/// The optional text tower: captions → token ids → embeddings → `clip_score`.
struct TextTower {
    model_uri: String,
    tokenizer_uri: String,
    column: String,
    context_length: Option<usize>,
    keep_embedding: bool,
    model: OnceLock<Model>,
    tokenizer: OnceLock<ClipTokenizer>,
}

/// One chunk, decoded and tokenised: the image tensor, per record its row in it or
/// why it has none, and the token ids of the captions of records with an image.
struct Prepared {
    data: Vec<f32>,
    rows: Vec<Result<usize, Drop>>,
    tokens: Vec<i64>,
    /// Per record: its row in `tokens`, when it has an image and a caption.
    text_rows: Vec<Option<usize>>,
}

/// Per chunk: image embeddings and text embeddings, by row.
struct Inferred {
    images: Vec<f32>,
    texts: Vec<f32>,
}

/// Builds the operator (registered in `model_params`, outside the feature gate).
pub fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = ClipEmbedParams::read(o)?;
    let precision = precision(o, &p.precision);
    let std = triple(o, "std", p.std.as_ref(), CLIP_STD);
    if std.iter().any(|s| *s <= 0.0) {
        o.error("std", "every std must be positive");
    }
    let text = match (&p.text_model, &p.tokenizer) {
        (None, _) => None,
        (Some(_), None) => {
            o.error(
                "tokenizer",
                "text_model needs the tokenizer's merges file (bpe_simple_vocab_16e6.txt.gz)",
            );
            None
        }
        (Some(m), Some(t)) => Some(TextTower {
            model_uri: m.clone(),
            tokenizer_uri: t.clone(),
            column: p.text_column.clone(),
            context_length: p.context_length,
            keep_embedding: p.text_embedding,
            model: OnceLock::new(),
            tokenizer: OnceLock::new(),
        }),
    };
    let image = ImageModel {
        column: p.image.column.clone(),
        limits: p.image.limits(),
        model_uri: p.model.clone(),
        size_param: "image_size",
        pre: Preprocessing {
            size: p.image_size,
            resize: Resize::ShorterSide,
            crop_pct: 1.0,
            interpolation: Interpolation::Bicubic,
            mean: triple(o, "mean", p.mean.as_ref(), CLIP_MEAN),
            std,
        },
        input: None,
        output: None,
        batch_size: p.batch_size,
        precision,
        fast_decode: p.fast_decode,
        runtime: RuntimeParams::from_params(&p.runtime, o),
        head: Head::Embedding {
            name: "embedding".into(),
            dim: p.dim,
            normalize: true,
        },
        model: OnceLock::new(),
    };
    Some(Box::new(ClipEmbed {
        image,
        dim: p.dim,
        text,
    }))
}

impl TextTower {
    fn context(&self) -> usize {
        self.context_length
            .or_else(|| match self.model.get()?.input_shape.as_slice() {
                [_, c] if *c > 0 => Some(*c as usize),
                _ => None,
            })
            .unwrap_or(77)
    }

    fn parts(&self) -> Result<(&Model, &ClipTokenizer), ModelError> {
        match (self.model.get(), self.tokenizer.get()) {
            (Some(m), Some(t)) => Ok((m, t)),
            _ => Err(ModelError::Model(
                "the text model was not loaded (no assets)".into(),
            )),
        }
    }

    fn load(
        &self,
        assets: &[(Asset, bytes::Bytes)],
        dim: usize,
        rt: &RuntimeParams,
    ) -> Result<(), ModelError> {
        let model = asset(assets, "params.text_model")?;
        let m = Model::load(
            model,
            rt,
            &format!("params.text_model ({})", self.model_uri),
        )?;
        use ort::value::TensorElementType as T;
        if !matches!(m.input_type, T::Int64 | T::Int32) {
            return Err(ModelError::Model(format!(
                "params.text_model: takes {:?} input, not token ids (int64)",
                m.input_type
            )));
        }
        let declared = match m.input_shape.as_slice() {
            [_, c] => (*c > 0).then_some(*c as usize),
            s => {
                return Err(ModelError::Model(format!(
                    "params.text_model: input shape {s:?}, expected [batch, context] token ids"
                )));
            }
        };
        if let (Some(c), Some(want)) = (declared, self.context_length)
            && c != want
        {
            return Err(ModelError::Model(format!(
                "params.context_length is {want}, but the text model takes {c} tokens"
            )));
        }
        if let Some(&d) = m.output_shape.last()
            && d > 0
            && d as usize != dim
        {
            return Err(ModelError::Model(format!(
                "params.text_model: its embeddings have {d} dimensions, the image tower's \
                 (params.dim) {dim}"
            )));
        }
        let t = ClipTokenizer::from_bytes(asset(assets, "params.tokenizer")?).map_err(|e| {
            ModelError::Model(format!("params.tokenizer ({}): {e}", self.tokenizer_uri))
        })?;
        let _ = self.model.set(m);
        let _ = self.tokenizer.set(t);
        Ok(())
    }
}

impl Operator for ClipEmbed {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        ic::require_binary(input, &self.image.column)?;
        if let Some(t) = &self.text {
            super::require_text_param(input, "text_column", &t.column)?;
        }
        let mut v = vec![Field::new("embedding", embedding_type(self.dim), true)];
        if let Some(t) = &self.text {
            v.push(Field::new("clip_score", DataType::Float32, true));
            if t.keep_embedding {
                v.push(Field::new("text_embedding", embedding_type(self.dim), true));
            }
        }
        Ok(v)
    }
    fn assets(&self) -> Vec<Asset> {
        let mut v = vec![Asset {
            param: "params.model".into(),
            uri: self.image.model_uri.clone(),
        }];
        if let Some(t) = &self.text {
            v.push(Asset {
                param: "params.text_model".into(),
                uri: t.model_uri.clone(),
            });
            v.push(Asset {
                param: "params.tokenizer".into(),
                uri: t.tokenizer_uri.clone(),
            });
        }
        v
    }
    fn load(&self, assets: &[(Asset, bytes::Bytes)]) -> Result<(), LoadError> {
        Ok(self.load_models(assets)?)
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let (cols, drops) = self.annotate(batch)?;
        Ok(Output::annotated(cols, drops))
    }
}

impl ClipEmbed {
    /// Decodes and preprocesses `imgs` in parallel (`image_model`'s machinery), and
    /// tokenises the captions of the records with an image.
    fn prepare(&self, imgs: &[Option<&[u8]>], captions: Option<&[Option<&str>]>) -> Prepared {
        use rayon::prelude::*;
        let (data, rows) = self.image.prepare(imgs);
        let text_rows = vec![None; rows.len()];
        let mut p = Prepared {
            data,
            rows,
            tokens: Vec::new(),
            text_rows,
        };
        if let (Some(text), Some(captions)) = (&self.text, captions)
            && let Ok((_, tok)) = text.parts()
        {
            let ctx = text.context();
            let todo: Vec<(usize, &str)> = captions
                .iter()
                .enumerate()
                .filter(|(i, _)| p.rows[*i].is_ok())
                .filter_map(|(i, c)| c.map(|c| (i, c)))
                .collect();
            p.tokens = vec![0; todo.len() * ctx];
            p.tokens
                .par_chunks_mut(ctx)
                .zip(&todo)
                .for_each_init(FastMap::default, |cache, (out, (_, c))| {
                    tok.tokenize(c, out, cache)
                });
            for (j, (i, _)) in todo.iter().enumerate() {
                p.text_rows[*i] = Some(j);
            }
        }
        p
    }

    /// Runs one prepared chunk: `n` rows of L2-normalised image vectors, and as many
    /// text vectors as it has captions.
    fn infer(&self, data: Vec<f32>, n: usize, tokens: Vec<i64>) -> Result<Inferred, ModelError> {
        let mut r = Inferred {
            images: vec![],
            texts: vec![],
        };
        if n > 0 {
            let (shape, out) = self.image.infer(data, n)?;
            r.images = self.check_rows(shape, out, n, "model")?;
        }
        if let Some(text) = &self.text
            && !tokens.is_empty()
        {
            let (m, _) = text.parts()?;
            let ctx = text.context();
            let rows = tokens.len() / ctx;
            let (shape, out) = m.run_ids(tokens, &[rows, ctx])?;
            r.texts = self.check_rows(shape, out, rows, "text_model")?;
        }
        Ok(r)
    }

    /// `out` as `n` L2-normalised rows of `dim`, or why the model's shape is wrong.
    fn check_rows(
        &self,
        shape: Vec<usize>,
        mut out: Vec<f32>,
        n: usize,
        what: &str,
    ) -> Result<Vec<f32>, ModelError> {
        if shape.len() != 2 || shape[0] != n || shape[1] != self.dim {
            return Err(ModelError::Inference(format!(
                "params.{what} returned shape {shape:?}, expected [{n}, {}] (params.dim)",
                self.dim
            )));
        }
        out.chunks_mut(self.dim).for_each(l2_normalize);
        Ok(out)
    }

    fn load_models(&self, assets: &[(Asset, bytes::Bytes)]) -> Result<(), ModelError> {
        self.image.load_model(asset(assets, "params.model")?)?;
        if let Some(t) = &self.text {
            t.load(assets, self.dim, &self.image.runtime)?;
        }
        Ok(())
    }

    #[allow(clippy::type_complexity)]
    fn annotate(
        &self,
        batch: &RecordBatch,
    ) -> Result<(Vec<ArrayRef>, Vec<Option<Drop>>), ProcessError> {
        let imgs = ic::values(batch, &self.image.column)?;
        let captions = match &self.text {
            Some(t) => Some(super::text_values(batch, &t.column)?),
            None => None,
        };
        let dim = self.dim;
        let chunks = pipelined(
            imgs.len(),
            self.image.batch_size,
            |r| self.prepare(&imgs[r.clone()], captions.as_ref().map(|c| &c[r])),
            |p: Prepared| {
                let n = p.rows.iter().filter(|r| r.is_ok()).count();
                let out = self.infer(p.data, n, p.tokens)?;
                Ok::<_, ModelError>((p.rows, p.text_rows, out))
            },
        )?;
        let mut vectors: Vec<Option<Vec<f32>>> = Vec::with_capacity(imgs.len());
        let mut text_vectors: Vec<Option<Vec<f32>>> = Vec::with_capacity(imgs.len());
        let mut scores: Vec<Option<f32>> = Vec::with_capacity(imgs.len());
        let mut drops = Vec::with_capacity(imgs.len());
        for (rows, text_rows, out) in chunks {
            for (r, t) in rows.into_iter().zip(text_rows) {
                match r {
                    Ok(j) => {
                        let v = &out.images[j * dim..(j + 1) * dim];
                        let tv = t.map(|k| &out.texts[k * dim..(k + 1) * dim]);
                        scores.push(tv.map(|tv| v.iter().zip(tv).map(|(a, b)| a * b).sum()));
                        text_vectors.push(tv.map(|tv| tv.to_vec()));
                        vectors.push(Some(v.to_vec()));
                        drops.push(None);
                    }
                    Err(d) => {
                        vectors.push(None);
                        text_vectors.push(None);
                        scores.push(None);
                        drops.push(Some(d));
                    }
                }
            }
        }
        let refs: Vec<Option<&[f32]>> = vectors.iter().map(|v| v.as_deref()).collect();
        let mut cols = vec![embedding_array(&refs, dim)?];
        if let Some(t) = &self.text {
            cols.push(Arc::new(Float32Array::from(scores)) as ArrayRef);
            if t.keep_embedding {
                let refs: Vec<Option<&[f32]>> = text_vectors.iter().map(|v| v.as_deref()).collect();
                cols.push(embedding_array(&refs, dim)?);
            }
        }
        Ok((cols, drops))
    }
}
