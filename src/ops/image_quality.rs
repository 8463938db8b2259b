//! `image_quality`: `compression_artifacts`, `entropy`, `sharpness`, `brightness`,
//! `contrast`, `colorfulness` (see `kernels::image_quality`), computed on the image
//! decoded upright; a JPEG whose shorter side is at least twice `min_side` (default
//! 64) is decoded at a reduced DCT scale first (the same default, 64, as `image_hash`, so the two
//! stages share one decode), so sharpness is measured at that working resolution
//! (`min_side: 0` measures at full size). Undecodable images are
//! rejects with the decoder's reason.
use super::image_common as ic;
use super::params::{Params, params};
use super::{Drop, OpDef, Operator, Output, ProcessError, SchemaError};
use crate::kernels::image::Limits;
use crate::kernels::image_quality::quality;
use crate::spec::reader::Obj;
use arrow_array::{ArrayRef, Float64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

pub const DEF: OpDef = OpDef {
    name: "image_quality",
    summary: "adds compression_artifacts (JPEG blockiness), entropy, sharpness, brightness, contrast, colorfulness",
    params: ImageQualityParams::describe,
    example: "{}",
    feature: None,
    build: Some(build),
};

pub const FIELDS: [&str; 6] = [
    "compression_artifacts",
    "entropy",
    "sharpness",
    "brightness",
    "contrast",
    "colorfulness",
];

struct ImageQuality {
    column: String,
    limits: Limits,
    min_side: Option<u32>,
}

params! {
    /// `image_quality`.
    pub struct ImageQualityParams {
        /// A JPEG whose shorter side is at least twice this is decoded at a reduced
        /// DCT scale (0: always at full size).
        min_side: u32 [0, 65536] = 64,
    }
    flatten { image: ic::ImageParams }
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = ImageQualityParams::read(o)?;
    Some(Box::new(ImageQuality {
        limits: p.image.limits(),
        column: p.image.column,
        min_side: (p.min_side > 0).then_some(p.min_side),
    }))
}

impl Operator for ImageQuality {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        ic::require_binary(input, &self.column)?;
        Ok(FIELDS
            .iter()
            .map(|f| Field::new(*f, DataType::Float64, true))
            .collect())
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        use rayon::prelude::*;
        let v = ic::values(batch, &self.column)?;
        let q: Vec<Result<_, Drop>> = v
            .par_iter()
            .map(|b| {
                let b = b.ok_or_else(ic::missing)?;
                let d = ic::decode_cached(b, &self.limits, self.min_side);
                let d = d.as_ref().as_ref().map_err(ic::drop_of)?;
                let l = d.luma();
                let block = if d.header.format == "JPEG" {
                    8 / d.scale
                } else {
                    0
                };
                Ok(quality(&d.rgb, l, block))
            })
            .collect();
        let col = |f: fn(&crate::kernels::image_quality::Quality) -> f64| -> ArrayRef {
            Arc::new(
                q.iter()
                    .map(|x| x.as_ref().ok().map(f))
                    .collect::<Float64Array>(),
            )
        };
        let cols = vec![
            col(|q| q.compression_artifacts),
            col(|q| q.entropy),
            col(|q| q.sharpness),
            col(|q| q.brightness),
            col(|q| q.contrast),
            col(|q| q.colorfulness),
        ];
        Ok(Output::annotated(
            cols,
            q.into_iter().map(|x| x.err()).collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{build, image_batch, png};
    use crate::ops::{histogram_columns, output_schema, run_stage};
    use arrow_array::Array;

    #[test]
    fn scores_decodable_images_and_rejects_the_rest() {
        let op = build(&DEF, serde_json::json!({"min_side": 0})).unwrap();
        let img = png(64, 48, false);
        let batch = image_batch(&[Some(&img), Some(b"junk")]);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        assert_eq!(
            histogram_columns(op.as_ref(), &batch.schema()),
            FIELDS.map(String::from)
        );
        let (kept, rejects) = run_stage("iq", op.as_ref(), batch, &schema, false).unwrap();
        assert_eq!((kept.num_rows(), rejects.len()), (1, 1));
        for f in FIELDS {
            let c = kept.column_by_name(f).unwrap();
            let v = c.as_any().downcast_ref::<Float64Array>().unwrap();
            assert!(v.is_valid(0) && v.value(0).is_finite(), "{f}");
        }
        assert_eq!(rejects[0].operator, "iq");
    }
}
