//! `image_quality_filter`: keeps images within thresholds on any numeric column the
//! image stages add: `min_width`, `min_height`, `max_aspect_ratio`, `min_aspect_ratio`,
//! `min_bytes`, `max_bytes`, and `min_`/`max_` of `entropy`, `sharpness`, `brightness`,
//! `contrast`, `colorfulness`, `compression_artifacts` (e.g. `max_compression_artifacts`).
//! Each threshold's column must be in the input (the spec is refused otherwise); a
//! dropped record's reason is the threshold (`min_sharpness`) and its detail the value.
//! A null value fails a threshold on it.
use super::{Drop, Filter, OpDef, Operator};
use crate::spec::reader::Obj;
use arrow_array::{Array, Float64Array, RecordBatch};
use arrow_schema::{DataType, Schema};

pub const DEF: OpDef = OpDef {
    name: "image_quality_filter",
    summary: "drops images outside thresholds on size, aspect ratio and quality metrics",
    build,
};

const COLUMNS: [&str; 10] = [
    "width",
    "height",
    "aspect_ratio",
    "bytes",
    "entropy",
    "sharpness",
    "brightness",
    "contrast",
    "colorfulness",
    "compression_artifacts",
];

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

fn build(p: &Obj) -> Option<Operator> {
    let mut thresholds = Vec::new();
    for c in COLUMNS {
        for min in [true, false] {
            let key = format!("{}_{c}", if min { "min" } else { "max" });
            if let Some(v) = p.opt_f64(&key) {
                thresholds.push(Threshold {
                    name: Box::leak(key.into_boxed_str()),
                    column: c,
                    min,
                    value: v,
                });
            }
        }
    }
    if thresholds.is_empty() && p.keys().is_empty() {
        p.sink.error(
            &p.field_path("min_width"),
            "no threshold given (min_width, max_aspect_ratio, min_sharpness, ...)",
        );
    }
    Some(Operator::Filter(Box::new(ImageQualityFilter {
        thresholds,
    })))
}

impl Filter for ImageQualityFilter {
    fn check(&self, input: &Schema) -> Result<(), String> {
        for t in &self.thresholds {
            match input.field_with_name(t.column) {
                Ok(f) if f.data_type().is_numeric() => {}
                Ok(f) => {
                    return Err(format!(
                        "params.{}: column {:?} is {}, not numeric",
                        t.name,
                        t.column,
                        f.data_type()
                    ));
                }
                Err(_) => {
                    return Err(format!(
                        "params.{}: no column {:?} (add image_metadata or image_quality before this stage)",
                        t.name, t.column
                    ));
                }
            }
        }
        Ok(())
    }
    fn filter(&self, batch: &RecordBatch) -> Result<Vec<Option<Drop>>, String> {
        let mut out: Vec<Option<Drop>> = vec![None; batch.num_rows()];
        for t in &self.thresholds {
            let col = batch
                .column_by_name(t.column)
                .ok_or_else(|| format!("no column {:?}", t.column))?;
            let f = arrow_cast::cast(col, &DataType::Float64).map_err(|e| e.to_string())?;
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
        Ok(out)
    }
}
