//! What a model stage writes from its output tensor (`image_model`, `embedding_head`,
//! and `clip_embed` through `image_model`): an embedding column
//! (`FixedSizeList<Float32, dim>`, optionally L2-normalised) or named Float32 score
//! columns (`raw`, `softmax` or `sigmoid` of the logits; with `labels`, one column per
//! kept label). The output's width is checked against the params when the model loads
//! (naming `params.dim` or `params.labels`) and again on every result, so a model with
//! a dynamic width cannot write a wrong column. Never runs a model itself.
use super::model_params::ModelOutputParams;
use super::{Drop, ModelError};
use crate::kernels::vision::{l2_normalize, sigmoid, softmax};
use crate::spec::reader::Obj;
use arrow_array::{ArrayRef, FixedSizeListArray, Float32Array};
use arrow_schema::{DataType, Field};
use std::sync::Arc;

/// How logits become scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Raw,
    Softmax,
    Sigmoid,
}

/// The columns a model's output becomes.
#[derive(Debug, Clone, PartialEq)]
pub enum Head {
    Embedding {
        name: String,
        dim: usize,
        normalize: bool,
    },
    Scores {
        activation: Activation,
        /// The output's width: the number of labels, or 1 without them.
        width: usize,
        /// Per written column: its index in the output row and its name.
        columns: Vec<(usize, String)>,
        /// Whether labels were given (the error on a width mismatch names them).
        labelled: bool,
    },
}

impl Head {
    /// From the params, recording errors at their keys; `default_scores` is the
    /// activation when `scores` is absent (`None`: an embedding).
    pub fn from_params(p: &ModelOutputParams, o: &Obj, default_scores: Option<&str>) -> Head {
        let scores = p.scores.as_deref().or(default_scores);
        let Some(scores) = scores else {
            if !p.labels.is_empty() {
                o.error("labels", "labels name scores: set params.scores");
            }
            if p.dim.is_none() {
                o.error(
                    "dim",
                    "an embedding output needs its width (or set params.scores)",
                );
            }
            return Head::Embedding {
                name: p.name.clone().unwrap_or_else(|| "embedding".into()),
                dim: p.dim.unwrap_or(1),
                normalize: p.normalize,
            };
        };
        let activation = match scores {
            "raw" => Activation::Raw,
            "softmax" => Activation::Softmax,
            "sigmoid" => Activation::Sigmoid,
            other => {
                o.error(
                    "scores",
                    format!("unknown scores {other:?}, expected raw, softmax or sigmoid"),
                );
                Activation::Raw
            }
        };
        if p.normalize {
            o.error("normalize", "normalises an embedding, not scores");
        }
        let name = p.name.clone().unwrap_or_else(|| "score".into());
        let mut seen = std::collections::HashSet::new();
        for l in &p.labels {
            if !seen.insert(l.as_str()) {
                o.error("labels", format!("{l:?} is listed twice"));
            }
        }
        let columns = if p.labels.is_empty() {
            if !p.keep.is_empty() {
                o.error(
                    "keep",
                    "keep selects labels: name the scores in params.labels",
                );
            }
            vec![(0, name)]
        } else if p.keep.is_empty() {
            p.labels
                .iter()
                .enumerate()
                .map(|(i, l)| (i, format!("{name}_{l}")))
                .collect()
        } else {
            p.keep
                .iter()
                .filter_map(|k| match p.labels.iter().position(|l| l == k) {
                    Some(i) => Some((i, format!("{name}_{k}"))),
                    None => {
                        o.error("keep", format!("{k:?} is not one of params.labels"));
                        None
                    }
                })
                .collect()
        };
        Head::Scores {
            activation,
            width: p.labels.len().max(1),
            columns,
            labelled: !p.labels.is_empty(),
        }
    }

    /// The width the model's output rows must have.
    pub fn width(&self) -> usize {
        match self {
            Head::Embedding { dim, .. } => *dim,
            Head::Scores { width, .. } => *width,
        }
    }

    pub fn fields(&self) -> Vec<Field> {
        match self {
            Head::Embedding { name, dim, .. } => {
                vec![Field::new(name, embedding_type(*dim), true)]
            }
            Head::Scores { columns, .. } => columns
                .iter()
                .map(|(_, n)| Field::new(n, DataType::Float32, true))
                .collect(),
        }
    }

    /// Why an output of (declared or actual) `shape` does not fit, naming the param;
    /// −1 (or 0) dimensions are dynamic and pass.
    pub fn check_shape(&self, shape: &[i64], what: &str) -> Result<(), String> {
        let width = match (self, shape) {
            (Head::Scores { .. }, [_]) => 1,
            (_, [_, w]) => *w,
            (Head::Embedding { .. }, s) => {
                return Err(format!(
                    "{what}: output shape {s:?}, expected [batch, dim] embeddings (choose \
                     another with params.output)"
                ));
            }
            (Head::Scores { .. }, s) => {
                return Err(format!(
                    "{what}: output shape {s:?}, expected [batch, scores] (choose another \
                     with params.output)"
                ));
            }
        };
        if width <= 0 || width as usize == self.width() {
            return Ok(());
        }
        Err(match self {
            Head::Embedding { dim, .. } => {
                format!("params.dim is {dim}, but the model's embeddings have {width} dimensions")
            }
            Head::Scores { labelled: true, .. } => format!(
                "params.labels names {} scores, but the model's output has {width}",
                self.width()
            ),
            Head::Scores { .. } => format!(
                "the model's output has {width} scores: name them in params.labels (and \
                 choose some with params.keep)"
            ),
        })
    }

    /// The output columns of a batch: `out` holds `shape[0]` rows, and `rows[i]` is
    /// record i's row (`Err`: the record has none, a null).
    pub fn columns(
        &self,
        rows: &[Result<usize, Drop>],
        mut out: Vec<f32>,
        shape: &[usize],
    ) -> Result<Vec<ArrayRef>, ModelError> {
        let signed: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        // Deterministic (the same model gives the same shape): not retried.
        self.check_shape(&signed, "the model")
            .map_err(ModelError::Model)?;
        let n = rows.iter().filter(|r| r.is_ok()).count();
        let w = self.width();
        if out.len() != n * w {
            return Err(ModelError::Model(format!(
                "the model returned shape {shape:?} for {n} inputs"
            )));
        }
        let cols = match self {
            Head::Embedding { dim, normalize, .. } => {
                if *normalize {
                    out.chunks_mut(*dim).for_each(l2_normalize);
                }
                let refs: Vec<Option<&[f32]>> = rows
                    .iter()
                    .map(|r| r.as_ref().ok().map(|&j| &out[j * dim..(j + 1) * dim]))
                    .collect();
                vec![
                    embedding_array(&refs, *dim)
                        .map_err(|e| ModelError::Inference(e.to_string()))?,
                ]
            }
            Head::Scores {
                activation,
                columns,
                ..
            } => {
                match activation {
                    Activation::Raw => {}
                    Activation::Softmax => out.chunks_mut(w).for_each(softmax),
                    Activation::Sigmoid => out.iter_mut().for_each(|v| *v = sigmoid(*v)),
                }
                columns
                    .iter()
                    .map(|(i, _)| {
                        let v: Float32Array = rows
                            .iter()
                            .map(|r| r.as_ref().ok().map(|&j| out[j * w + i]))
                            .collect();
                        Arc::new(v) as ArrayRef
                    })
                    .collect()
            }
        };
        Ok(cols)
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
pub fn embedding_array(
    rows: &[Option<&[f32]>],
    dim: usize,
) -> Result<ArrayRef, arrow_schema::ArrowError> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::params::Params;
    use crate::spec::reader::Sink;
    use arrow_array::Array;

    fn head(v: serde_json::Value, default: Option<&str>) -> (Head, Vec<String>) {
        let sink = Sink::default();
        let o = Obj::new(Some(&v), "stages[0].params", &sink);
        let p = ModelOutputParams::read(&o).unwrap();
        let h = Head::from_params(&p, &o, default);
        o.finish();
        let e = sink.into_errors().0.iter().map(|e| e.to_string()).collect();
        (h, e)
    }

    #[test]
    fn params_name_their_errors() {
        let (_, e) = head(serde_json::json!({}), None);
        assert_eq!(
            e,
            ["stages[0].params.dim: an embedding output needs its width (or set params.scores)"]
        );
        let (_, e) = head(
            serde_json::json!({"scores": "tanh", "labels": ["a", "a"], "keep": ["b"]}),
            None,
        );
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e[0].contains("params.scores: unknown scores \"tanh\""));
        assert!(e[2].contains("params.keep: \"b\" is not one of params.labels"));
        let (h, e) = head(serde_json::json!({}), Some("raw"));
        assert!(e.is_empty());
        assert_eq!(h.fields()[0].name(), "score");
        assert!(h.check_shape(&[-1, 1], "m").is_ok());
        assert!(h.check_shape(&[-1], "m").is_ok());
        let err = h.check_shape(&[-1, 1000], "m").unwrap_err();
        assert!(err.contains("params.labels"), "{err}");
        assert!(
            h.check_shape(&[-1, 5, 7], "m")
                .unwrap_err()
                .contains("params.output")
        );
    }

    #[test]
    fn scores_by_label_with_nulls() {
        let (h, _) = head(
            serde_json::json!({"scores": "softmax", "name": "q", "labels": ["a", "b"], "keep": ["b"]}),
            None,
        );
        let names: Vec<String> = h.fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names, ["q_b"]);
        let rows = vec![
            Ok(0),
            Err(Drop {
                reason: "x",
                detail: None,
            }),
            Ok(1),
        ];
        let cols = h.columns(&rows, vec![0.0, 0.0, 0.0, 1.0], &[2, 2]).unwrap();
        let c = cols[0].as_any().downcast_ref::<Float32Array>().unwrap();
        assert_eq!(c.value(0), 0.5);
        assert!(c.is_null(1));
        assert!((c.value(2) - 0.7310586).abs() < 1e-6);
        assert!(h.columns(&rows, vec![0.0; 6], &[2, 3]).is_err());
    }
}
