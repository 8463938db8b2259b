//! `embedding_head`: an ONNX model over an existing embedding column
//! (`FixedSizeList<Float32, D>`, e.g. `clip_embed`'s or `image_model`'s), writing score
//! columns (or an embedding) through [`super::model_head`]: the LAION aesthetic
//! predictor (an MLP over L2-normalised CLIP ViT-L/14 embeddings, `[N, 768] → [N, 1]`),
//! AI-generated-image detectors and other linear probes. The model must take one
//! `[N, D]` float input with D the column's width: checked once both are known (the
//! model loaded, the stage bound to its input schema, in either order) and on every
//! batch, naming the param. A record
//! whose embedding is null is a reject (`missing_embedding`); never a panic.
use super::image_model::{asset, concat_parts, pipelined};
use super::model_head::Head;
use super::model_params::EmbeddingHeadParams;
use super::onnx::{Model, RuntimeParams};
use super::params::Params;
use super::{Asset, Drop, LoadError, ModelError, Operator, Output, ProcessError, SchemaError};
use crate::kernels::vision::l2_normalize;
use crate::spec::reader::Obj;
use arrow_array::{Array, ArrayRef, FixedSizeListArray, Float32Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::{Mutex, OnceLock};

pub struct EmbeddingHead {
    column: String,
    model_uri: String,
    normalize_input: bool,
    input: Option<String>,
    output: Option<String>,
    batch_size: usize,
    runtime: RuntimeParams,
    head: Head,
    /// The column's width as the schema had it (`output_fields`), checked at load.
    width: Mutex<Option<usize>>,
    model: OnceLock<Model>,
}

pub fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = EmbeddingHeadParams::read(o)?;
    Some(Box::new(EmbeddingHead {
        column: p.column.clone(),
        model_uri: p.model.clone(),
        normalize_input: p.normalize_input,
        input: p.input.clone(),
        output: p.out.output.clone(),
        batch_size: p.batch_size,
        runtime: RuntimeParams::from_params(&p.runtime, o),
        head: Head::from_params(&p.out, o, Some("raw")),
        width: Mutex::new(None),
        model: OnceLock::new(),
    }))
}

/// The width of an embedding column type, if it is one.
fn width_of(t: &DataType) -> Option<usize> {
    match t {
        DataType::FixedSizeList(f, w) if f.data_type() == &DataType::Float32 => Some(*w as usize),
        _ => None,
    }
}

impl EmbeddingHead {
    fn model(&self) -> Result<&Model, ModelError> {
        self.model
            .get()
            .ok_or_else(|| ModelError::Model("the model was not loaded (no assets)".into()))
    }

    /// The model's declared input width, if static.
    fn model_width(m: &Model) -> Option<usize> {
        match m.input_shape.as_slice() {
            [_, d] if *d > 0 => Some(*d as usize),
            _ => None,
        }
    }

    fn check_width(&self, column: usize) -> Result<(), ModelError> {
        match self.model.get().and_then(Self::model_width) {
            Some(d) if d != column => Err(ModelError::Model(format!(
                "params.column: {:?} holds {column}-wide embeddings, but params.model ({}) \
                 takes {d}",
                self.column, self.model_uri
            ))),
            _ => Ok(()),
        }
    }
}

impl Operator for EmbeddingHead {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        let f = input
            .field_with_name(&self.column)
            .map_err(|_| SchemaError::missing("column", &self.column, " of embeddings", input))?;
        let Some(w) = width_of(f.data_type()) else {
            return Err(SchemaError::WrongType {
                param: "column".into(),
                column: self.column.clone(),
                found: f.data_type().clone(),
                expected: "expected embeddings (FixedSizeList<Float32>)".into(),
            });
        };
        *self.width.lock().unwrap_or_else(|e| e.into_inner()) = Some(w);
        // A worker loads the model before it binds the stages: checked here then.
        self.check_width(w)
            .map_err(|e| SchemaError::Other(e.to_string()))?;
        Ok(self.head.fields())
    }
    fn assets(&self) -> Vec<Asset> {
        vec![Asset {
            param: "params.model".into(),
            uri: self.model_uri.clone(),
        }]
    }
    fn load(&self, assets: &[(Asset, bytes::Bytes)]) -> Result<(), LoadError> {
        let what = format!("params.model ({})", self.model_uri);
        let m = Model::load_io(
            asset(assets, "params.model")?,
            &self.runtime,
            &what,
            self.input.as_deref(),
            self.output.as_deref(),
        )?;
        use ort::value::TensorElementType as T;
        if !matches!(m.input_type, T::Float32 | T::Float16) {
            return Err(ModelError::Model(format!(
                "{what}: takes {:?} input, not embeddings (float)",
                m.input_type
            ))
            .into());
        }
        if m.input_shape.len() != 2 {
            return Err(ModelError::Model(format!(
                "{what}: input shape {:?}, expected [batch, width] embeddings",
                m.input_shape
            ))
            .into());
        }
        self.head
            .check_shape(&m.output_shape, &what)
            .map_err(ModelError::Model)?;
        let _ = self.model.set(m);
        let seen = *self.width.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = seen {
            self.check_width(w)?;
        }
        Ok(())
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let col = batch
            .column_by_name(&self.column)
            .ok_or_else(|| ProcessError::MissingColumn(self.column.clone()))?;
        let list = col
            .as_any()
            .downcast_ref::<FixedSizeListArray>()
            .ok_or_else(|| ProcessError::WrongType {
                column: self.column.clone(),
                expected: "embeddings (FixedSizeList<Float32>)",
            })?;
        let d = list.value_length() as usize;
        self.check_width(d)?;
        let values = list
            .values()
            .as_any()
            .downcast_ref::<Float32Array>()
            .ok_or_else(|| ProcessError::WrongType {
                column: self.column.clone(),
                expected: "embeddings (FixedSizeList<Float32>)",
            })?;
        let model = self.model()?;
        let prepare = |r: std::ops::Range<usize>| {
            let per: Vec<Result<Vec<f32>, Drop>> = r
                .map(|i| {
                    if list.is_null(i) {
                        return Err(Drop {
                            reason: "missing_embedding",
                            detail: None,
                        });
                    }
                    let o = list.value_offset(i) as usize;
                    let mut v = values.values()[o..o + d].to_vec();
                    if self.normalize_input {
                        l2_normalize(&mut v);
                    }
                    Ok(v)
                })
                .collect();
            super::onnx::stack(per)
        };
        let chunks = pipelined(
            list.len(),
            self.batch_size,
            prepare,
            |(data, rows): (Vec<f32>, Vec<Result<usize, Drop>>)| {
                let n = rows.iter().filter(|r| r.is_ok()).count();
                let (shape, out) = if n == 0 {
                    (vec![0, self.head.width()], vec![])
                } else {
                    model.run_f32(data, &[n, d])?
                };
                let cols = self.head.columns(&rows, out, &shape)?;
                Ok::<_, ModelError>((cols, rows))
            },
        )?;
        let mut drops = Vec::with_capacity(list.len());
        let mut parts: Vec<Vec<ArrayRef>> = vec![vec![]; self.head.fields().len()];
        for (cols, rows) in chunks {
            drops.extend(rows.into_iter().map(|r| r.err()));
            for (p, c) in parts.iter_mut().zip(cols) {
                p.push(c);
            }
        }
        Ok(Output::annotated(concat_parts(parts, &self.head)?, drops))
    }
}
