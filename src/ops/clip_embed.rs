//! `clip_embed`: the image tower of a CLIP-style ONNX model (`model`: a path or URI,
//! fetched by the worker) over the encoded images in `column`: preprocessing as
//! open_clip does it (bicubic resize of the shorter side, centre crop, CLIP mean/std;
//! [`crate::kernels::vision`]), `batch_size` images per inference call, fp32 or fp16
//! input as the model declares it, and an L2-normalised `embedding` column
//! (`FixedSizeList<Float32, dim>`). Images that do not decode are rejects with the
//! reason. While the model runs on one batch, the next is decoded and preprocessed on
//! the CPU threads (one batch ahead, so memory stays bounded), so a GPU never waits on
//! one image at a time.
//!
//! Params: `model` (required), `dim` (the embedding width, default 512; checked against
//! the model), `image_size` (default: the model's input size, else 224), `mean`/`std`,
//! `batch_size` (default 64), `precision` (`auto` | `fp32` | `fp16`: must match the
//! model's input), `column`, `max_pixels`, `max_bytes`, `fast_decode` (default true:
//! JPEGs decoded at the smallest DCT scale that keeps the shorter side ≥ image_size),
//! and the runtime's `library`, `provider` (`cpu` | `cuda`), `device`, `threads`.
use super::image_common as ic;
use super::onnx::{Model, RuntimeParams};
use super::{Asset, Drop, Filter, OpDef, Operator};
use crate::kernels::image::Limits;
use crate::kernels::vision::{CLIP_MEAN, CLIP_STD, clip_tensor, l2_normalize};
use crate::spec::reader::Obj;
use arrow_array::{ArrayRef, FixedSizeListArray, Float32Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::{Arc, OnceLock};

pub const DEF: OpDef = OpDef {
    name: "clip_embed",
    summary: "CLIP image embeddings from an ONNX model (embedding: L2-normalised)",
    build,
};

pub struct ClipEmbed {
    column: String,
    limits: Limits,
    model_uri: String,
    dim: usize,
    image_size: Option<usize>,
    mean: [f32; 3],
    std: [f32; 3],
    batch_size: usize,
    precision: Option<String>,
    fast_decode: bool,
    runtime: RuntimeParams,
    model: OnceLock<Model>,
}

fn triple(p: &Obj, key: &str, default: [f32; 3]) -> [f32; 3] {
    match p.opt_list(key) {
        None => default,
        Some(v) => {
            let xs: Vec<f32> = v
                .iter()
                .filter_map(|x| x.as_f64())
                .map(|x| x as f32)
                .collect();
            if xs.len() == 3 && v.len() == 3 {
                [xs[0], xs[1], xs[2]]
            } else {
                p.error(key, "expected three numbers (R, G, B)");
                default
            }
        }
    }
}

fn build(p: &Obj) -> Option<Operator> {
    let (column, limits) = ic::params(p);
    let model_uri = p.req_str("model")?;
    let precision = p.opt_str("precision").filter(|x| x != "auto");
    if let Some(x) = &precision
        && x != "fp32"
        && x != "fp16"
    {
        p.error(
            "precision",
            format!("unknown precision {x:?}, expected auto, fp32 or fp16"),
        );
    }
    let std = triple(p, "std", CLIP_STD);
    if std.iter().any(|s| *s <= 0.0) {
        p.error("std", "every std must be positive");
    }
    Some(Operator::Filter(Box::new(ClipEmbed {
        column,
        limits,
        model_uri,
        dim: p.u64_in("dim", 512, 1, 65_536) as usize,
        image_size: p.opt_u64("image_size").map(|x| x as usize),
        mean: triple(p, "mean", CLIP_MEAN),
        std,
        batch_size: p.u64_in("batch_size", 64, 1, 65_536) as usize,
        precision,
        fast_decode: p.opt_bool("fast_decode").unwrap_or(true),
        runtime: RuntimeParams::parse(p),
        model: OnceLock::new(),
    })))
}

/// The image size a model declares (`[N, 3, S, S]`), if static.
fn declared_size(m: &Model) -> Option<usize> {
    match m.input_shape.as_slice() {
        [_, 3, h, w] if h == w && *h > 0 => Some(*h as usize),
        _ => None,
    }
}

impl ClipEmbed {
    fn model(&self) -> Result<&Model, String> {
        self.model
            .get()
            .ok_or_else(|| "the model was not loaded (no assets)".to_string())
    }

    fn size(&self) -> usize {
        self.image_size
            .or_else(|| self.model.get().and_then(declared_size))
            .unwrap_or(224)
    }

    /// Decodes and preprocesses `imgs` in parallel: the batch tensor, and per image
    /// its row in it or why it has none.
    fn prepare(&self, imgs: &[Option<&[u8]>]) -> (Vec<f32>, Vec<Result<usize, Drop>>) {
        use rayon::prelude::*;
        let size = self.size();
        let min_side = self.fast_decode.then_some(size as u32);
        let per: Vec<Result<Vec<f32>, Drop>> = imgs
            .par_iter()
            .map(|b| {
                let b = b.ok_or_else(ic::missing)?;
                let d = ic::decode_cached(b, &self.limits, min_side);
                let d = d.as_ref().as_ref().map_err(ic::drop_of)?;
                let mut t = Vec::with_capacity(3 * size * size);
                let (w, h) = d.rgb.dimensions();
                clip_tensor(
                    d.rgb.as_raw(),
                    w as usize,
                    h as usize,
                    size,
                    &self.mean,
                    &self.std,
                    &mut t,
                );
                Ok(t)
            })
            .collect();
        let mut data = Vec::with_capacity(per.len() * 3 * size * size);
        let mut rows = Vec::with_capacity(per.len());
        let mut n = 0;
        for r in per {
            rows.push(r.map(|t| {
                data.extend_from_slice(&t);
                n += 1;
                n - 1
            }));
        }
        (data, rows)
    }

    /// Embeds one prepared chunk: `n` rows of L2-normalised vectors.
    fn infer(&self, data: Vec<f32>, n: usize) -> Result<Vec<f32>, String> {
        if n == 0 {
            return Ok(vec![]);
        }
        let size = self.size();
        let (shape, mut out) = self.model()?.run_f32(data, &[n, 3, size, size])?;
        if shape.len() != 2 || shape[0] != n || shape[1] != self.dim {
            return Err(format!(
                "the model returned shape {shape:?}, expected [{n}, {}] (params.dim)",
                self.dim
            ));
        }
        out.chunks_mut(self.dim).for_each(l2_normalize);
        Ok(out)
    }
}

/// The embedding column type for `dim`.
pub fn embedding_type(dim: usize) -> DataType {
    DataType::FixedSizeList(
        Arc::new(Field::new("item", DataType::Float32, false)),
        dim as i32,
    )
}

/// A `FixedSizeList<Float32, dim>` column from per-row vectors (`None`: null row).
pub fn embedding_array(rows: &[Option<&[f32]>], dim: usize) -> Result<ArrayRef, String> {
    let mut values = Vec::with_capacity(rows.len() * dim);
    let mut valid = Vec::with_capacity(rows.len());
    for r in rows {
        match r {
            Some(v) => values.extend_from_slice(v),
            None => values.extend(std::iter::repeat_n(0.0, dim)),
        }
        valid.push(r.is_some());
    }
    let field = Arc::new(Field::new("item", DataType::Float32, false));
    FixedSizeListArray::try_new(
        field,
        dim as i32,
        Arc::new(Float32Array::from(values)),
        Some(valid.into()),
    )
    .map(|a| Arc::new(a) as ArrayRef)
    .map_err(|e| e.to_string())
}

impl Filter for ClipEmbed {
    fn check(&self, input: &Schema) -> Result<(), String> {
        ic::require_binary(input, &self.column)
    }
    fn assets(&self) -> Vec<Asset> {
        vec![Asset {
            param: "params.model".into(),
            uri: self.model_uri.clone(),
        }]
    }
    fn load(&self, assets: &[(Asset, bytes::Bytes)]) -> Result<(), String> {
        let (_, bytes) = assets.first().ok_or("params.model was not fetched")?;
        let m = Model::load(
            bytes,
            &self.runtime,
            &format!("params.model ({})", self.model_uri),
        )?;
        use ort::value::TensorElementType as T;
        let declared = match m.input_type {
            T::Float32 => "fp32",
            T::Float16 => "fp16",
            other => {
                return Err(format!(
                    "params.model: takes {other:?} input, not an image tensor"
                ));
            }
        };
        if let Some(want) = &self.precision
            && want != declared
        {
            return Err(format!(
                "params.precision is {want}, but the model's input is {declared}"
            ));
        }
        if let Some(&d) = m.output_shape.last()
            && d > 0
            && d as usize != self.dim
        {
            return Err(format!(
                "params.dim is {}, but the model's embeddings have {d} dimensions",
                self.dim
            ));
        }
        if let (Some(s), Some(want)) = (declared_size(&m), self.image_size)
            && s != want
        {
            return Err(format!(
                "params.image_size is {want}, but the model takes {s}×{s} images"
            ));
        }
        // A second load of the same spec (another worker in this process) keeps the first.
        let _ = self.model.set(m);
        Ok(())
    }
    fn added_fields(&self, _input: &Schema) -> Vec<Field> {
        vec![Field::new("embedding", embedding_type(self.dim), true)]
    }
    fn filter(&self, batch: &RecordBatch) -> Result<Vec<Option<Drop>>, String> {
        Ok(self.annotate(batch)?.1)
    }
    fn annotate(&self, batch: &RecordBatch) -> Result<(Vec<ArrayRef>, Vec<Option<Drop>>), String> {
        let imgs = ic::values(batch, &self.column)?;
        let chunks: Vec<&[Option<&[u8]>]> = imgs.chunks(self.batch_size).collect();
        let mut vectors: Vec<Option<Vec<f32>>> = Vec::with_capacity(imgs.len());
        let mut drops = Vec::with_capacity(imgs.len());
        // Pipelined: chunk i+1 is prepared on the pool while chunk i is inferred.
        let mut next = chunks.first().map(|c| self.prepare(c));
        for i in 0..chunks.len() {
            let (data, rows) = next.take().expect("prepared chunk");
            let n = rows.iter().filter(|r| r.is_ok()).count();
            let (out, prepared) = rayon::join(
                || self.infer(data, n),
                || chunks.get(i + 1).map(|c| self.prepare(c)),
            );
            next = prepared;
            let out = out?;
            for r in rows {
                match r {
                    Ok(j) => {
                        vectors.push(Some(out[j * self.dim..(j + 1) * self.dim].to_vec()));
                        drops.push(None);
                    }
                    Err(d) => {
                        vectors.push(None);
                        drops.push(Some(d));
                    }
                }
            }
        }
        let refs: Vec<Option<&[f32]>> = vectors.iter().map(|v| v.as_deref()).collect();
        Ok((vec![embedding_array(&refs, self.dim)?], drops))
    }
}
