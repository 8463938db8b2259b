//! `image_quality_filter`: keeps images within thresholds on any numeric column the
//! image stages add: `min_width`, `min_height`, `max_aspect_ratio`, `min_aspect_ratio`,
//! `min_bytes`, `max_bytes`, and `min_`/`max_` of `entropy`, `sharpness`, `brightness`,
//! `contrast`, `colorfulness`, `compression_artifacts` (e.g. `max_compression_artifacts`).
//! Each threshold's column must be in the input (the spec is refused otherwise); a
//! dropped record's reason is the threshold (`min_sharpness`) and its detail the value.
//! A null value fails a threshold on it.
use super::params::{Params, params};
use super::{Drop, OpDef, Operator, Output, ProcessError, SchemaError};
use crate::spec::reader::Obj;
use arrow_array::{Array, Float64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

pub const DEF: OpDef = OpDef {
    name: "image_quality_filter",
    summary: "drops images outside thresholds on size, aspect ratio and quality metrics",
    params: ImageQualityFilterParams::describe,
    example: r#"{"min_width": 64}"#,
    feature: None,
    build: Some(build),
};

params! {
    /// `image_quality_filter`: at least one threshold. The reject reason is the
    /// threshold's name; a null value fails it.
    pub struct ImageQualityFilterParams {
        /// Drop images with a lower `width`.
        min_width: Option<f64>,
        /// Drop images with a higher `width`.
        max_width: Option<f64>,
        /// Drop images with a lower `height`.
        min_height: Option<f64>,
        /// Drop images with a higher `height`.
        max_height: Option<f64>,
        /// Drop images with a lower `aspect_ratio`.
        min_aspect_ratio: Option<f64>,
        /// Drop images with a higher `aspect_ratio`.
        max_aspect_ratio: Option<f64>,
        /// Drop images with a lower `bytes`.
        min_bytes: Option<f64>,
        /// Drop images with a higher `bytes`.
        max_bytes: Option<f64>,
        /// Drop images with a lower `entropy`.
        min_entropy: Option<f64>,
        /// Drop images with a higher `entropy`.
        max_entropy: Option<f64>,
        /// Drop images with a lower `sharpness`.
        min_sharpness: Option<f64>,
        /// Drop images with a higher `sharpness`.
        max_sharpness: Option<f64>,
        /// Drop images with a lower `brightness`.
        min_brightness: Option<f64>,
        /// Drop images with a higher `brightness`.
        max_brightness: Option<f64>,
        /// Drop images with a lower `contrast`.
        min_contrast: Option<f64>,
        /// Drop images with a higher `contrast`.
        max_contrast: Option<f64>,
        /// Drop images with a lower `colorfulness`.
        min_colorfulness: Option<f64>,
        /// Drop images with a higher `colorfulness`.
        max_colorfulness: Option<f64>,
        /// Drop images with a lower `compression_artifacts`.
        min_compression_artifacts: Option<f64>,
        /// Drop images with a higher `compression_artifacts`.
        max_compression_artifacts: Option<f64>,
    }
}

struct Threshold {
    /// `min_<column>` or `max_<column>` (the reject reason).
    name: &'static str,
    column: &'static str,
    min: bool,
    value: f64,
}

struct ImageQualityFilter {
    thresholds: Vec<Threshold>,
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = ImageQualityFilterParams::read(o)?;
    // In the order of the columns, each min before its max.
    let all = [
        ("min_width", p.min_width),
        ("max_width", p.max_width),
        ("min_height", p.min_height),
        ("max_height", p.max_height),
        ("min_aspect_ratio", p.min_aspect_ratio),
        ("max_aspect_ratio", p.max_aspect_ratio),
        ("min_bytes", p.min_bytes),
        ("max_bytes", p.max_bytes),
        ("min_entropy", p.min_entropy),
        ("max_entropy", p.max_entropy),
        ("min_sharpness", p.min_sharpness),
        ("max_sharpness", p.max_sharpness),
        ("min_brightness", p.min_brightness),
        ("max_brightness", p.max_brightness),
        ("min_contrast", p.min_contrast),
        ("max_contrast", p.max_contrast),
        ("min_colorfulness", p.min_colorfulness),
        ("max_colorfulness", p.max_colorfulness),
        ("min_compression_artifacts", p.min_compression_artifacts),
        ("max_compression_artifacts", p.max_compression_artifacts),
    ];
    let thresholds: Vec<Threshold> = all
        .into_iter()
        .filter_map(|(name, v)| {
            Some(Threshold {
                name,
                column: &name[4..],
                min: name.starts_with("min_"),
                value: v?,
            })
        })
        .collect();
    if thresholds.is_empty() && o.keys().is_empty() {
        o.error(
            "min_width",
            "no threshold given (min_width, max_aspect_ratio, min_sharpness, ...)",
        );
    }
    Some(Box::new(ImageQualityFilter { thresholds }))
}

impl Operator for ImageQualityFilter {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        for t in &self.thresholds {
            match input.field_with_name(t.column) {
                Ok(f) if f.data_type().is_numeric() => {}
                Ok(f) => {
                    return Err(SchemaError::WrongType {
                        param: t.name.to_string(),
                        column: t.column.to_string(),
                        found: f.data_type().clone(),
                        expected: "not numeric".into(),
                    });
                }
                Err(_) => {
                    return Err(SchemaError::MissingColumn {
                        param: t.name.to_string(),
                        column: t.column.to_string(),
                        hint: " (add image_metadata or image_quality before this stage)".into(),
                    });
                }
            }
        }
        Ok(vec![])
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let mut out: Vec<Option<Drop>> = vec![None; batch.num_rows()];
        for t in &self.thresholds {
            let col = batch
                .column_by_name(t.column)
                .ok_or_else(|| ProcessError::MissingColumn(t.column.to_string()))?;
            let f = arrow_cast::cast(col, &DataType::Float64)?;
            let f = f
                .as_any()
                .downcast_ref::<Float64Array>()
                .expect("cast to f64");
            for (i, o) in out.iter_mut().enumerate() {
                if o.is_some() {
                    continue;
                }
                let v = (!f.is_null(i)).then(|| f.value(i));
                let pass = v.is_some_and(|v| if t.min { v >= t.value } else { v <= t.value });
                if !pass {
                    *o = Some(Drop {
                        reason: t.name,
                        detail: Some(match v {
                            Some(v) => format!(
                                "{} {v:.4} {} {}",
                                t.column,
                                if t.min { "<" } else { ">" },
                                t.value
                            ),
                            None => format!("{} is null", t.column),
                        }),
                    });
                }
            }
        }
        Ok(Output::verdicts(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::build;
    use crate::ops::{output_schema, run_stage};
    use arrow_array::{StringArray, UInt32Array};
    use std::sync::Arc;

    #[test]
    fn drops_by_the_first_threshold_failed_with_its_value() {
        let op = build(
            &DEF,
            serde_json::json!({"max_width": 100, "min_width": 10, "min_height": 5}),
        )
        .unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("width", DataType::UInt32, true),
            Field::new("height", DataType::UInt32, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec!["a", "b", "c", "d"])),
                Arc::new(UInt32Array::from(vec![Some(50), Some(5), Some(500), None])),
                Arc::new(UInt32Array::from(vec![
                    Some(50),
                    Some(1),
                    Some(50),
                    Some(9),
                ])),
            ],
        )
        .unwrap();
        let out = output_schema(op.as_ref(), &schema).unwrap();
        let (kept, rejects) = run_stage("iqf", op.as_ref(), batch, &out, false).unwrap();
        assert_eq!(kept.num_rows(), 1);
        let got: Vec<(&str, &str, &str)> = rejects
            .iter()
            .map(|r| {
                (
                    r.id.as_str(),
                    r.reason.as_str(),
                    r.detail.as_deref().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("b", "min_width", "width 5.0000 < 10"),
                ("c", "max_width", "width 500.0000 > 100"),
                ("d", "min_width", "width is null"),
            ]
        );
    }

    #[test]
    fn needs_a_threshold_and_its_column() {
        assert_eq!(
            build(&DEF, serde_json::json!({})).err().unwrap(),
            vec![
                "params.min_width: no threshold given (min_width, max_aspect_ratio, min_sharpness, ...)"
            ]
        );
        let op = build(&DEF, serde_json::json!({"min_sharpness": 0.5})).unwrap();
        let e = output_schema(op.as_ref(), &crate::ops::testing::image_batch(&[]).schema())
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "params.min_sharpness: no column \"sharpness\" (add image_metadata or image_quality before this stage)"
        );
    }
}
