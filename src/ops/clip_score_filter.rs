//! `clip_score_filter`: keeps records whose image–text similarity (`clip_score`,
//! written by `clip_embed` with a text tower) is at least `min` (LAION-400M used 0.3
//! with ViT-B/32; LAION-5B 0.28) and, if given, at most `max`. A record without a score
//! (no caption) is a reject `missing_clip_score` unless `keep_missing: true`.
use super::params::{Params, params};
use super::{Drop, OpDef, Operator, Output, ProcessError, SchemaError};
use crate::spec::reader::Obj;
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

pub const DEF: OpDef = OpDef {
    name: "clip_score_filter",
    summary: "drops image–text pairs below a CLIP similarity (clip_score)",
    params: ClipScoreFilterParams::describe,
    example: r#"{"min": 0.28}"#,
    feature: None,
    build: Some(build),
};

struct ClipScoreFilter {
    column: String,
    min: Option<f64>,
    max: Option<f64>,
    keep_missing: bool,
}

params! {
    /// `clip_score_filter`: set `min` and/or `max`.
    pub struct ClipScoreFilterParams {
        /// The least score kept (LAION-400M used 0.3 with ViT-B/32; LAION-5B 0.28).
        min: Option<f64>,
        /// The highest score kept.
        max: Option<f64>,
        /// The score column (`clip_embed` writes `clip_score` when it has a `text_model`).
        column: String = "clip_score",
        /// Keep records without a score (no caption) instead of rejecting them as
        /// `missing_clip_score`.
        keep_missing: bool = false,
    }
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = ClipScoreFilterParams::read(o)?;
    if p.min.is_none() && p.max.is_none() {
        o.error("min", "set min (e.g. 0.28) and/or max");
    }
    Some(Box::new(ClipScoreFilter {
        column: p.column,
        min: p.min,
        max: p.max,
        keep_missing: p.keep_missing,
    }))
}

impl Operator for ClipScoreFilter {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        match input.field_with_name(&self.column) {
            Ok(f) if matches!(f.data_type(), DataType::Float32 | DataType::Float64) => Ok(vec![]),
            Ok(f) => Err(SchemaError::WrongType {
                param: "column".into(),
                column: self.column.clone(),
                found: f.data_type().clone(),
                expected: "expected a float score".into(),
            }),
            Err(_) => Err(SchemaError::MissingColumn {
                param: "column".into(),
                column: self.column.clone(),
                hint: " (clip_embed writes clip_score when it has a text_model)".into(),
            }),
        }
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let col = batch
            .column_by_name(&self.column)
            .ok_or_else(|| ProcessError::MissingColumn(self.column.clone()))?;
        let v = arrow_cast::cast(col, &DataType::Float64)?;
        let v = v
            .as_any()
            .downcast_ref::<arrow_array::Float64Array>()
            .ok_or_else(|| ProcessError::WrongType {
                column: self.column.clone(),
                expected: "castable to Float64",
            })?;
        Ok(Output::verdicts(
            (0..v.len())
                .map(|i| {
                    if v.is_null(i) {
                        return (!self.keep_missing).then_some(Drop {
                            reason: "missing_clip_score",
                            detail: None,
                        });
                    }
                    let s = v.value(i);
                    let low = self.min.is_some_and(|m| s < m);
                    let high = self.max.is_some_and(|m| s > m);
                    (low || high).then(|| Drop {
                        reason: "clip_score",
                        detail: Some(format!("{s:.4}")),
                    })
                })
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Float32Array;
    use arrow_schema::Field;
    use std::sync::Arc;

    #[test]
    fn thresholds_and_missing_scores() {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "clip_score",
            DataType::Float32,
            true,
        )]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Float32Array::from(vec![
                Some(0.1),
                Some(0.3),
                None,
                Some(0.9),
            ]))],
        )
        .unwrap();
        let f = ClipScoreFilter {
            column: "clip_score".into(),
            min: Some(0.28),
            max: Some(0.8),
            keep_missing: false,
        };
        f.output_fields(&schema).unwrap();
        let r: Vec<Option<&str>> = f
            .process(&batch)
            .unwrap()
            .verdicts
            .unwrap()
            .iter()
            .map(|d| d.as_ref().map(|d| d.reason))
            .collect();
        assert_eq!(
            r,
            [
                Some("clip_score"),
                None,
                Some("missing_clip_score"),
                Some("clip_score")
            ]
        );
        let keep = ClipScoreFilter {
            keep_missing: true,
            ..f
        };
        assert!(keep.process(&batch).unwrap().verdicts.unwrap()[2].is_none());
    }
}
