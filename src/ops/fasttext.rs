//! `fasttext`: a fastText supervised classifier (`.bin` or quantized `.ftz`, fetched
//! by the worker) over a text column, with mdf's pure-Rust predictor
//! ([`crate::kernels::fasttext`]): writes the top label (its prefix stripped) and its
//! probability, or the probability of one named label (`score_label`, as DCLM-style
//! quality filters use `__label__hq`), and optionally the top-k lists. The text is
//! predicted as one line, newlines read as spaces (what fastText's `predict` is given
//! by the well-known recipes). Keeps every record: filter on the columns with a later
//! stage.
use super::params::{Params, params};
use super::{Asset, LoadError, OpDef, Operator, Output, ProcessError, SchemaError, text_values};
use crate::kernels::fasttext::{Model, Prediction};
use crate::spec::reader::Obj;
use arrow_array::builder::{
    Float32Builder, Float64Builder, ListBuilder, PrimitiveBuilder, StringBuilder,
};
use arrow_array::types::{Float32Type, Float64Type};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::{Arc, OnceLock};

pub const DEF: OpDef = OpDef {
    name: "fasttext",
    summary: "classifies text with a fastText model (.bin/.ftz): label and probability columns",
    params: FastTextParams::describe,
    example: r#"{"model": "models/quality.bin"}"#,
    feature: None,
    build: Some(build),
};

params! {
    /// `fasttext`.
    pub struct FastTextParams {
        /// The fastText supervised model, `.bin` or quantized `.ftz` (path or URI),
        /// fetched by the worker.
        model: String,
        /// The text column.
        field: String = "text",
        /// Labels in the top-k lists (the label column holds the first).
        k: usize [1, 100000] = 1,
        /// The least probability a listed label needs (fastText's `threshold`).
        threshold: f64 = 0.0,
        /// Stripped from the start of every label written (`__label__en` → `en`).
        strip_prefix: String = "__label__",
        /// The column of the top label (string; null when the text has no known
        /// token or no label passes `threshold`).
        label_column: String = "fasttext_label",
        /// The column of the probability.
        score_column: String = "fasttext_score",
        /// With it, the score column holds this label's probability (full label, as in
        /// the model: `__label__hq`) instead of the top label's, whatever `threshold`.
        score_label: Option<String>,
        /// `float32` (fastText's own precision) or `float64`.
        score_type: String = "float32",
        /// Also write `<label_column>_topk` and `<score_column>_topk`: the top `k`
        /// labels and probabilities, best first.
        topk_columns: bool = false,
    }
}

struct Op {
    p: FastTextParams,
    f64: bool,
    model: OnceLock<Loaded>,
}

struct Loaded {
    model: Model,
    /// The labels as written (prefix stripped).
    labels: Vec<String>,
    score_label: Option<u32>,
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = FastTextParams::read(o)?;
    let f64 = match p.score_type.as_str() {
        "float32" => false,
        "float64" => true,
        _ => {
            o.error("score_type", "expected float32 or float64");
            false
        }
    };
    if !(0.0..=1.0).contains(&p.threshold) {
        o.error("threshold", "must be between 0 and 1");
    }
    if p.label_column == p.score_column {
        o.error("score_column", "must differ from label_column");
    }
    Some(Box::new(Op {
        p,
        f64,
        model: OnceLock::new(),
    }))
}

/// Reads a model asset and strips `prefix` from its labels, for `fasttext` and
/// `language_filter`.
pub(crate) fn load_model(
    assets: &[(Asset, bytes::Bytes)],
    prefix: &str,
) -> Result<(Model, Vec<String>), LoadError> {
    let (a, bytes) = assets
        .first()
        .ok_or_else(|| LoadError::Invalid("params.model was not fetched".into()))?;
    let model = Model::from_bytes(bytes).map_err(|e| LoadError::Asset {
        param: a.param.clone(),
        uri: a.uri.clone(),
        message: e.to_string(),
    })?;
    let labels = model
        .labels()
        .iter()
        .map(|l| l.strip_prefix(prefix).unwrap_or(l).to_string())
        .collect();
    Ok((model, labels))
}

impl Operator for Op {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        super::require_text(input, &self.p.field)?;
        let score = if self.f64 {
            DataType::Float64
        } else {
            DataType::Float32
        };
        let mut v = vec![
            Field::new(&self.p.label_column, DataType::Utf8, true),
            Field::new(&self.p.score_column, score.clone(), true),
        ];
        if self.p.topk_columns {
            let item = |t| Arc::new(Field::new("item", t, true));
            v.push(Field::new(
                format!("{}_topk", self.p.label_column),
                DataType::List(item(DataType::Utf8)),
                true,
            ));
            v.push(Field::new(
                format!("{}_topk", self.p.score_column),
                DataType::List(item(score)),
                true,
            ));
        }
        Ok(v)
    }

    fn assets(&self) -> Vec<Asset> {
        vec![Asset {
            param: "params.model".into(),
            uri: self.p.model.clone(),
        }]
    }

    fn load(&self, assets: &[(Asset, bytes::Bytes)]) -> Result<(), LoadError> {
        let (model, labels) = load_model(assets, &self.p.strip_prefix)?;
        let score_label = match &self.p.score_label {
            None => None,
            Some(l) => Some(model.labels().iter().position(|x| x == l).ok_or_else(|| {
                LoadError::Invalid(format!(
                    "params.score_label: the model has no label {l:?} (labels: {})",
                    model.labels()[..model.labels().len().min(20)].join(", ")
                ))
            })? as u32),
        };
        let _ = self.model.set(Loaded {
            model,
            labels,
            score_label,
        });
        Ok(())
    }

    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let m = self
            .model
            .get()
            .ok_or(ProcessError::NotLoaded("fasttext"))?;
        let texts = text_values(batch, &self.p.field)?;
        let threshold = self.p.threshold as f32;
        let all = m.labels.len();
        // A named label's probability needs every label's (they are few), whatever
        // `threshold` (which the label and list columns obey) leaves out.
        let k = if m.score_label.is_some() && threshold == 0.0 {
            all
        } else {
            self.p.k
        };
        let preds = m.model.predict_all(&texts, k, threshold);
        let every = match m.score_label {
            Some(_) if k != all => Some(m.model.predict_all(&texts, all, 0.0)),
            _ => None,
        };
        let scored = every.as_ref().unwrap_or(&preds);
        let mut label = StringBuilder::new();
        let mut score: Vec<Option<f32>> = Vec::with_capacity(preds.len());
        for ((p, s), t) in preds.iter().zip(scored).zip(&texts) {
            label.append_option(p.first().map(|x| &m.labels[x.label as usize]));
            score.push(match m.score_label {
                // A text with no known token has no probabilities at all.
                Some(l) if t.is_some() && !s.is_empty() => {
                    Some(s.iter().find(|x| x.label == l).map_or(0.0, |x| x.prob))
                }
                Some(_) => None,
                None => p.first().map(|x| x.prob),
            });
        }
        let mut columns: Vec<ArrayRef> = vec![Arc::new(label.finish()), self.floats(&score)];
        if self.p.topk_columns {
            let top = |p: &Vec<Prediction>| p.iter().take(self.p.k).copied().collect::<Vec<_>>();
            let mut labels = ListBuilder::new(StringBuilder::new());
            let mut probs32 = ListBuilder::new(Float32Builder::new());
            let mut probs64 = ListBuilder::new(Float64Builder::new());
            for (p, t) in preds.iter().zip(&texts) {
                if t.is_none() {
                    labels.append_null();
                    probs32.append_null();
                    probs64.append_null();
                    continue;
                }
                for x in top(p) {
                    labels.values().append_value(&m.labels[x.label as usize]);
                    probs32.values().append_value(x.prob);
                    probs64.values().append_value(x.prob as f64);
                }
                labels.append(true);
                probs32.append(true);
                probs64.append(true);
            }
            columns.push(Arc::new(labels.finish()));
            columns.push(if self.f64 {
                Arc::new(probs64.finish())
            } else {
                Arc::new(probs32.finish())
            });
        }
        Ok(Output::columns(columns))
    }
}

impl Op {
    fn floats(&self, v: &[Option<f32>]) -> ArrayRef {
        if self.f64 {
            let mut b = PrimitiveBuilder::<Float64Type>::with_capacity(v.len());
            b.extend(v.iter().map(|x| x.map(f64::from)));
            Arc::new(b.finish())
        } else {
            let mut b = PrimitiveBuilder::<Float32Type>::with_capacity(v.len());
            b.extend(v.iter().copied());
            Arc::new(b.finish())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fasttext::tests::model_bytes;
    use crate::ops::testing::{build, text_batch};
    use arrow_array::{Array, Float32Array, Float64Array, ListArray, StringArray};

    fn asset() -> Vec<(Asset, bytes::Bytes)> {
        vec![(
            Asset {
                param: "params.model".into(),
                uri: "m.bin".into(),
            },
            bytes::Bytes::from(model_bytes(3, 2, 4, 50, 2)),
        )]
    }

    #[test]
    fn writes_top_label_score_and_lists() {
        let op = build(
            &DEF,
            serde_json::json!({"model": "m.bin", "k": 2, "topk_columns": true, "score_type": "float64"}),
        )
        .unwrap();
        let batch = text_batch(&[Some("hello world"), None, Some("hello\nworld")]);
        let fields = op.output_fields(&batch.schema()).unwrap();
        assert_eq!(fields.len(), 4);
        assert!(matches!(
            op.process(&batch),
            Err(ProcessError::NotLoaded(_))
        ));
        op.load(&asset()).unwrap();
        let out = op.process(&batch).unwrap();
        let label = out.columns[0]
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let score = out.columns[1]
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        let model = Model::from_bytes(&model_bytes(3, 2, 4, 50, 2)).unwrap();
        let want = model.predict("hello world", 2, 0.0);
        assert_eq!(
            label.value(0),
            model.labels()[want[0].label as usize].trim_start_matches("__label__")
        );
        assert_eq!(score.value(0), want[0].prob as f64);
        assert!(label.is_null(1) && score.is_null(1));
        // Newlines are read as spaces: the same as the one-line text.
        assert_eq!(label.value(2), label.value(0));
        assert_eq!(score.value(2), score.value(0));
        let lists = out.columns[2].as_any().downcast_ref::<ListArray>().unwrap();
        assert_eq!(lists.value(0).len(), 2);
        assert!(lists.is_null(1));
    }

    #[test]
    fn score_label_and_bad_models() {
        let op = build(
            &DEF,
            serde_json::json!({"model": "m.bin", "score_label": "__label__c"}),
        )
        .unwrap();
        op.load(&asset()).unwrap();
        let out = op.process(&text_batch(&[Some("hello world")])).unwrap();
        let score = out.columns[1]
            .as_any()
            .downcast_ref::<Float32Array>()
            .unwrap();
        let model = Model::from_bytes(&model_bytes(3, 2, 4, 50, 2)).unwrap();
        let all = model.predict("hello world", 3, 0.0);
        let c = all
            .iter()
            .find(|p| model.labels()[p.label as usize] == "__label__c");
        assert_eq!(score.value(0), c.unwrap().prob);

        // `threshold` leaves the label column empty, never the named label's score.
        let op = build(
            &DEF,
            serde_json::json!({"model": "m.bin", "score_label": "__label__c", "threshold": 0.99}),
        )
        .unwrap();
        op.load(&asset()).unwrap();
        let out = op.process(&text_batch(&[Some("hello world")])).unwrap();
        assert!(out.columns[0].is_null(0));
        let score = out.columns[1]
            .as_any()
            .downcast_ref::<Float32Array>()
            .unwrap();
        assert_eq!(score.value(0), c.unwrap().prob);

        let op = build(
            &DEF,
            serde_json::json!({"model": "m.bin", "score_label": "x"}),
        )
        .unwrap();
        let e = op.load(&asset()).unwrap_err().to_string();
        assert!(e.contains("params.score_label"), "{e}");
        let mut bad = asset();
        bad[0].1 = bytes::Bytes::from_static(b"not a model");
        let e = op.load(&bad).unwrap_err().to_string();
        assert!(e.starts_with("params.model (m.bin): "), "{e}");
        assert!(build(&DEF, serde_json::json!({"model": "m", "score_type": "f16"})).is_err());
        assert!(build(&DEF, serde_json::json!({"model": "m", "threshold": 2.0})).is_err());
        assert!(build(&DEF, serde_json::json!({})).is_err());
    }
}
