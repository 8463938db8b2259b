//! `clip_score_filter`: keeps records whose image–text similarity (`clip_score`,
//! written by `clip_embed` with a text tower) is at least `min` (LAION-400M used 0.3
//! with ViT-B/32; LAION-5B 0.28) and, if given, at most `max`. A record without a score
//! (no caption) is a reject `missing_clip_score` unless `keep_missing: true`.
use super::{Drop, Filter, OpDef, Operator};
use crate::spec::reader::Obj;
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, Schema};

pub const DEF: OpDef = OpDef {
    name: "clip_score_filter",
    summary: "drops image–text pairs below a CLIP similarity (clip_score)",
    build,
};

struct ClipScoreFilter {
    column: String,
    min: Option<f64>,
    max: Option<f64>,
    keep_missing: bool,
}

fn build(p: &Obj) -> Option<Operator> {
    let min = p.opt_f64("min");
    let max = p.opt_f64("max");
    if min.is_none() && max.is_none() {
        p.error("min", "set min (e.g. 0.28) and/or max");
    }
    Some(Operator::Filter(Box::new(ClipScoreFilter {
        column: p.opt_str("column").unwrap_or_else(|| "clip_score".into()),
        min,
        max,
        keep_missing: p.opt_bool("keep_missing").unwrap_or(false),
    })))
}

impl Filter for ClipScoreFilter {
    fn check(&self, input: &Schema) -> Result<(), String> {
        match input.field_with_name(&self.column) {
            Ok(f) if matches!(f.data_type(), DataType::Float32 | DataType::Float64) => Ok(()),
            Ok(f) => Err(format!(
                "params.column: {:?} is {}, expected a float score",
                self.column,
                f.data_type()
            )),
            Err(_) => Err(format!(
                "params.column: no column {:?} (clip_embed writes clip_score when it has a text_model)",
                self.column
            )),
        }
    }
    fn filter(&self, batch: &RecordBatch) -> Result<Vec<Option<Drop>>, String> {
        let col = batch
            .column_by_name(&self.column)
            .ok_or_else(|| format!("no column {:?}", self.column))?;
        let v = arrow_cast::cast(col, &DataType::Float64).map_err(|e| e.to_string())?;
        let v = v
            .as_any()
            .downcast_ref::<arrow_array::Float64Array>()
            .ok_or("cast to Float64")?;
        Ok((0..v.len())
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
            .collect())
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
        f.check(&schema).unwrap();
        let r: Vec<Option<&str>> = f
            .filter(&batch)
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
        assert!(keep.filter(&batch).unwrap()[2].is_none());
    }
}
