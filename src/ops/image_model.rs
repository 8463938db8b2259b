//! `image_model`: any ONNX image model (`[N, 3, S, S]` float input, fp32 or fp16, on
//! the CPU or CUDA) over the encoded images in `column`, `batch_size` images per
//! inference call, writing an embedding column or score columns ([`super::model_head`]).
//! Preprocessing is a preset equal to its family's reference library
//! ([`crate::kernels::vision::Preprocess`]: `clip` = open_clip, `siglip` =
//! transformers' SiglipImageProcessor, `imagenet` = torchvision/timm) with explicit
//! overrides (`size`, `resize`, `crop_pct`, `interpolation`, `mean`, `std`). A model
//! whose input, dtype, shape or output width does not fit the params is refused at
//! load naming the param; an image that does not decode or cannot be preprocessed is a
//! reject with the reason. While the model runs on one batch, the next is decoded and
//! preprocessed on the CPU threads (one batch ahead, so memory stays bounded).
//!
//! `clip_embed` is this operator's `clip` preset with an L2-normalised embedding (and
//! its own text tower): it builds an [`ImageModel`] and uses [`ImageModel::prepare`],
//! [`ImageModel::infer`] and [`pipelined`].
use super::image_common as ic;
use super::model_head::Head;
use super::model_params::ImageModelParams;
use super::onnx::{Model, RuntimeParams};
use super::params::Params;
use super::{Asset, Drop, LoadError, ModelError, Operator, Output, ProcessError, SchemaError};
use crate::kernels::image::Limits;
use crate::kernels::vision::{Interpolation, Preprocess, Resize, resize_side};
use crate::spec::reader::Obj;
use arrow_array::RecordBatch;
use arrow_schema::{Field, Schema};
use std::ops::Range;
use std::sync::OnceLock;

/// The image side of a model's input, its resize and normalisation, with the side
/// left open until the model says it.
#[derive(Debug, Clone, PartialEq)]
pub struct Preprocessing {
    /// `params.size` (or clip_embed's `image_size`); default: the model's, else 224.
    pub size: Option<usize>,
    pub resize: Resize,
    pub crop_pct: f64,
    pub interpolation: Interpolation,
    pub mean: [f32; 3],
    pub std: [f32; 3],
}

pub struct ImageModel {
    pub column: String,
    pub limits: Limits,
    pub model_uri: String,
    /// The param naming the input side in errors (`size`, or clip_embed's `image_size`).
    pub size_param: &'static str,
    pub pre: Preprocessing,
    pub input: Option<String>,
    pub output: Option<String>,
    pub batch_size: usize,
    pub precision: Option<String>,
    pub fast_decode: bool,
    pub runtime: RuntimeParams,
    pub head: Head,
    pub model: OnceLock<Model>,
}

/// Three numbers (R, G, B), or an error at `key`.
pub fn triple(o: &Obj, key: &str, given: Option<&Vec<f64>>, default: [f32; 3]) -> [f32; 3] {
    match given {
        None => default,
        Some(v) if v.len() == 3 => [v[0] as f32, v[1] as f32, v[2] as f32],
        Some(_) => {
            o.error(key, "expected three numbers (R, G, B)");
            default
        }
    }
}

/// `auto` as none; anything but fp32/fp16 an error at `precision`.
pub fn precision(o: &Obj, p: &str) -> Option<String> {
    let precision = Some(p.to_string()).filter(|x| x != "auto");
    if let Some(x) = &precision
        && x != "fp32"
        && x != "fp16"
    {
        o.error(
            "precision",
            format!("unknown precision {x:?}, expected auto, fp32 or fp16"),
        );
    }
    precision
}

/// Builds the operator (registered in `ops`, its params outside the feature gate).
pub fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = ImageModelParams::read(o)?;
    let base = match p.preset.as_str() {
        "clip" => Preprocess::clip(224),
        "siglip" => Preprocess::siglip(224),
        "imagenet" => Preprocess::imagenet(224),
        other => {
            o.error(
                "preset",
                format!("unknown preset {other:?}, expected clip, siglip or imagenet"),
            );
            Preprocess::clip(224)
        }
    };
    let resize = match p.resize.as_deref() {
        None => base.resize,
        Some("shorter_side") => Resize::ShorterSide,
        Some("square") => Resize::Square,
        Some(other) => {
            o.error(
                "resize",
                format!("unknown resize {other:?}, expected shorter_side or square"),
            );
            base.resize
        }
    };
    let interpolation = match p.interpolation.as_deref() {
        None => base.interpolation,
        Some(s) => Interpolation::parse(s).unwrap_or_else(|| {
            o.error(
                "interpolation",
                format!("unknown interpolation {s:?}, expected nearest, bilinear or bicubic"),
            );
            base.interpolation
        }),
    };
    let std = triple(o, "std", p.std.as_ref(), base.std);
    if std.iter().any(|s| *s <= 0.0) {
        o.error("std", "every std must be positive");
    }
    let crop_pct = p
        .crop_pct
        .unwrap_or(base.size as f64 / base.resize_to as f64);
    Some(Box::new(ImageModel {
        column: p.image.column.clone(),
        limits: p.image.limits(),
        model_uri: p.model.clone(),
        size_param: "size",
        pre: Preprocessing {
            size: p.size,
            resize,
            crop_pct,
            interpolation,
            mean: triple(o, "mean", p.mean.as_ref(), base.mean),
            std,
        },
        input: p.input.clone(),
        output: p.out.output.clone(),
        batch_size: p.batch_size,
        precision: precision(o, &p.precision),
        fast_decode: p.fast_decode,
        runtime: RuntimeParams::from_params(&p.runtime, o),
        head: Head::from_params(&p.out, o, None),
        model: OnceLock::new(),
    }))
}

/// Runs `infer` on chunks of `bs` of `len` items while the next chunk is prepared on
/// the rayon pool: a GPU never waits on one image at a time, and at most two chunks
/// are in memory.
pub fn pipelined<P: Send, R: Send, E: Send>(
    len: usize,
    bs: usize,
    prepare: impl Fn(Range<usize>) -> P + Sync,
    infer: impl Fn(P) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E> {
    let chunks = len.div_ceil(bs);
    let range = |i: usize| i * bs..((i + 1) * bs).min(len);
    let mut out = Vec::with_capacity(chunks);
    let mut next = (chunks > 0).then(|| prepare(range(0)));
    for i in 0..chunks {
        let p = next.take().expect("prepared chunk");
        let (r, prepared) = rayon::join(
            || infer(p),
            || (i + 1 < chunks).then(|| prepare(range(i + 1))),
        );
        next = prepared;
        out.push(r?);
    }
    Ok(out)
}

/// The image side a model declares (`[N, 3, S, S]`), if static.
fn declared_size(m: &Model) -> Option<usize> {
    match m.input_shape.as_slice() {
        [_, 3, h, w] if h == w && *h > 0 => Some(*h as usize),
        _ => None,
    }
}

impl ImageModel {
    pub fn model(&self) -> Result<&Model, ModelError> {
        self.model
            .get()
            .ok_or_else(|| ModelError::Model("the model was not loaded (no assets)".into()))
    }

    /// The preprocessing at the model's input side.
    pub fn preprocess(&self) -> Preprocess {
        let size = self
            .pre
            .size
            .or_else(|| self.model.get().and_then(declared_size))
            .unwrap_or(224);
        Preprocess {
            size,
            resize: self.pre.resize,
            resize_to: resize_side(size, self.pre.crop_pct).max(size),
            interpolation: self.pre.interpolation,
            mean: self.pre.mean,
            std: self.pre.std,
        }
    }

    /// Decodes and preprocesses `imgs` in parallel: the batch tensor, and per record
    /// its row in it or why it has none.
    pub fn prepare(&self, imgs: &[Option<&[u8]>]) -> (Vec<f32>, Vec<Result<usize, Drop>>) {
        use rayon::prelude::*;
        let pre = self.preprocess();
        let min_side = self.fast_decode.then_some(pre.resize_to as u32);
        let per: Vec<Result<Vec<f32>, Drop>> = imgs
            .par_iter()
            .map(|b| {
                let b = b.ok_or_else(ic::missing)?;
                let d = ic::decode_cached(b, &self.limits, min_side);
                let d = d.as_ref().as_ref().map_err(ic::drop_of)?;
                let mut t = Vec::with_capacity(3 * pre.size * pre.size);
                let (w, h) = d.rgb.dimensions();
                pre.tensor(d.rgb.as_raw(), w as usize, h as usize, &mut t)
                    .map_err(|e| Drop {
                        reason: "unprocessable_image",
                        detail: Some(e.0),
                    })?;
                Ok(t)
            })
            .collect();
        super::onnx::stack(per)
    }

    /// Runs `n` prepared images; the output's shape and values.
    pub fn infer(&self, data: Vec<f32>, n: usize) -> Result<(Vec<usize>, Vec<f32>), ModelError> {
        if n == 0 {
            return Ok((vec![0, self.head.width()], vec![]));
        }
        let size = self.preprocess().size;
        self.model()?.run_f32(data, &[n, 3, size, size])
    }

    /// Loads the model from its fetched bytes, refusing one whose input or output
    /// does not fit the params (naming the param).
    pub fn load_model(&self, bytes: &[u8]) -> Result<(), ModelError> {
        let what = format!("params.model ({})", self.model_uri);
        let m = Model::load_io(
            bytes,
            &self.runtime,
            &what,
            self.input.as_deref(),
            self.output.as_deref(),
        )?;
        use ort::value::TensorElementType as T;
        let declared = match m.input_type {
            T::Float32 => "fp32",
            T::Float16 => "fp16",
            other => {
                return Err(ModelError::Model(format!(
                    "params.model: takes {other:?} input, not an image tensor"
                )));
            }
        };
        if let Some(want) = &self.precision
            && want != declared
        {
            return Err(ModelError::Model(format!(
                "params.precision is {want}, but the model's input is {declared}"
            )));
        }
        match m.input_shape.as_slice() {
            [_, c, h, w] if (*c == 3 || *c <= 0) && (h == w || *h <= 0 || *w <= 0) => {}
            s => {
                return Err(ModelError::Model(format!(
                    "params.model: input shape {s:?}, expected [batch, 3, size, size] images"
                )));
            }
        }
        self.head
            .check_shape(&m.output_shape, "params.model")
            .map_err(ModelError::Model)?;
        if let (Some(s), Some(want)) = (declared_size(&m), self.pre.size)
            && s != want
        {
            return Err(ModelError::Model(format!(
                "params.{} is {want}, but the model takes {s}×{s} images",
                self.size_param
            )));
        }
        // A second load of the same spec (another worker in this process) keeps the first.
        let _ = self.model.set(m);
        Ok(())
    }
}

/// The fetched bytes of the asset named by `param`.
pub fn asset<'a>(assets: &'a [(Asset, bytes::Bytes)], param: &str) -> Result<&'a [u8], ModelError> {
    assets
        .iter()
        .find(|(a, _)| a.param == param)
        .map(|(_, b)| b.as_ref())
        .ok_or_else(|| ModelError::Model(format!("{param} was not fetched")))
}

impl Operator for ImageModel {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        ic::require_binary(input, &self.column)?;
        Ok(self.head.fields())
    }
    fn assets(&self) -> Vec<Asset> {
        vec![Asset {
            param: "params.model".into(),
            uri: self.model_uri.clone(),
        }]
    }
    fn load(&self, assets: &[(Asset, bytes::Bytes)]) -> Result<(), LoadError> {
        Ok(self.load_model(asset(assets, "params.model")?)?)
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let imgs = ic::values(batch, &self.column)?;
        let chunks = pipelined(
            imgs.len(),
            self.batch_size,
            |r| self.prepare(&imgs[r]),
            |(data, rows)| {
                let n = rows.iter().filter(|r| r.is_ok()).count();
                let (shape, out) = self.infer(data, n)?;
                let cols = self.head.columns(&rows, out, &shape)?;
                Ok::<_, ModelError>((cols, rows))
            },
        )?;
        let mut drops = Vec::with_capacity(imgs.len());
        let mut parts: Vec<Vec<arrow_array::ArrayRef>> = vec![vec![]; self.head.fields().len()];
        for (cols, rows) in chunks {
            drops.extend(rows.into_iter().map(|r| r.err()));
            for (p, c) in parts.iter_mut().zip(cols) {
                p.push(c);
            }
        }
        let columns = concat_parts(parts, &self.head)?;
        Ok(Output::annotated(columns, drops))
    }
}

/// One column per output field from its per-chunk pieces (an empty batch: empty
/// columns of the field types).
pub fn concat_parts(
    parts: Vec<Vec<arrow_array::ArrayRef>>,
    head: &Head,
) -> Result<Vec<arrow_array::ArrayRef>, ProcessError> {
    parts
        .into_iter()
        .zip(head.fields())
        .map(|(p, f)| {
            if p.is_empty() {
                return Ok(arrow_array::new_empty_array(f.data_type()));
            }
            let refs: Vec<&dyn arrow_array::Array> = p.iter().map(|a| a.as_ref()).collect();
            Ok(arrow_select::concat::concat(&refs)?)
        })
        .collect()
}
