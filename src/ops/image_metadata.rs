//! `image_metadata`: `width`, `height`, `format`, `bytes`, `mode`, `aspect_ratio`
//! (width / height) from the image header alone, no pixels decoded; the size as the
//! image is shown, after its EXIF orientation. An image whose
//! header does not parse, whose format is not read, or whose size passes the limits
//! (`max_pixels`, `max_bytes`: decompression bombs) is a reject with the reason.
use super::image_common as ic;
use super::params::{Params, params};
use super::{OpDef, Operator, Output, ProcessError, SchemaError};
use crate::kernels::image::{Limits, probe};
use crate::spec::reader::Obj;
use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

pub const DEF: OpDef = OpDef {
    name: "image_metadata",
    summary: "adds width, height, format, bytes, mode, aspect_ratio from the image header",
    params: ImageMetadataParams::describe,
    example: "{}",
    feature: None,
    build: Some(build),
};

struct ImageMetadata {
    column: String,
    limits: Limits,
}

params! {
    /// `image_metadata`.
    pub struct ImageMetadataParams {}
    flatten { image: ic::ImageParams }
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = ImageMetadataParams::read(o)?;
    Some(Box::new(ImageMetadata {
        limits: p.image.limits(),
        column: p.image.column,
    }))
}

impl Operator for ImageMetadata {
    /// Sizes after EXIF orientation, and CMYK named as such: a phase computed by a
    /// build from before either is not reused (`--reuse`) for one computed now.
    fn builtin_model(&self) -> Option<String> {
        Some("image_metadata upright sizes, CMYK mode (1)".into())
    }
    fn histograms(&self) -> Vec<String> {
        ["width", "height", "bytes"].map(String::from).to_vec()
    }
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        ic::require_binary(input, &self.column)?;
        Ok(vec![
            Field::new("width", DataType::UInt32, true),
            Field::new("height", DataType::UInt32, true),
            Field::new("format", DataType::Utf8, true),
            Field::new("bytes", DataType::UInt64, true),
            Field::new("mode", DataType::Utf8, true),
            Field::new("aspect_ratio", DataType::Float64, true),
        ])
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        use rayon::prelude::*;
        let v = ic::values(batch, &self.column)?;
        let heads: Vec<_> = v
            .par_iter()
            .map(|b| match b {
                None => Err(ic::missing()),
                Some(b) => probe(b, &self.limits)
                    .map(|h| (h, b.len() as u64))
                    .map_err(|e| ic::drop_of(&e)),
            })
            .collect();
        let ok = |f: &dyn Fn(&(crate::kernels::image::Header, u64)) -> u64| {
            heads
                .iter()
                .map(|h| h.as_ref().ok().map(f))
                .collect::<Vec<_>>()
        };
        // As the image is shown: after its EXIF orientation, as every operator that
        // decodes it sees it (a portrait phone photo stored landscape is portrait).
        let w: UInt32Array = ok(&|h| h.0.upright_size().0 as u64)
            .iter()
            .map(|x| x.map(|x| x as u32))
            .collect();
        let hgt: UInt32Array = ok(&|h| h.0.upright_size().1 as u64)
            .iter()
            .map(|x| x.map(|x| x as u32))
            .collect();
        let bytes: UInt64Array = ok(&|h| h.1).into_iter().collect();
        let format: StringArray = heads
            .iter()
            .map(|h| h.as_ref().ok().map(|h| h.0.format))
            .collect();
        let mode: StringArray = heads
            .iter()
            .map(|h| h.as_ref().ok().map(|h| h.0.mode))
            .collect();
        let ar: Float64Array = heads
            .iter()
            .map(|h| {
                h.as_ref().ok().map(|h| {
                    let (w, hh) = h.0.upright_size();
                    w as f64 / hh as f64
                })
            })
            .collect();
        let verdicts = heads.into_iter().map(|h| h.err()).collect();
        Ok(Output::annotated(
            vec![
                Arc::new(w) as ArrayRef,
                Arc::new(hgt),
                Arc::new(format),
                Arc::new(bytes),
                Arc::new(mode),
                Arc::new(ar),
            ],
            verdicts,
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
    fn reads_the_header_and_rejects_what_does_not_parse() {
        let op = build(&DEF, serde_json::json!({})).unwrap();
        let img = png(30, 20, false);
        let batch = image_batch(&[Some(&img), Some(b"not an image"), None]);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (kept, rejects) = run_stage("meta", op.as_ref(), batch, &schema, true).unwrap();
        assert_eq!(kept.num_rows(), 1);
        let u32s = |n: &str| {
            kept.column_by_name(n)
                .unwrap()
                .as_any()
                .downcast_ref::<UInt32Array>()
                .unwrap()
                .value(0)
        };
        assert_eq!((u32s("width"), u32s("height")), (30, 20));
        let ar = kept.column_by_name("aspect_ratio").unwrap();
        let ar = ar.as_any().downcast_ref::<Float64Array>().unwrap();
        assert_eq!(ar.value(0), 1.5);
        assert_eq!(rejects.len(), 2);
        assert_eq!(rejects[1].reason, "missing_image");
        assert_eq!(
            histogram_columns(op.as_ref(), &image_batch(&[]).schema()),
            ["width", "height", "bytes", "aspect_ratio"]
        );
    }

    #[test]
    fn its_limits_are_params() {
        let op = build(&DEF, serde_json::json!({"max_bytes": "10B"})).unwrap();
        let img = png(30, 20, false);
        let batch = image_batch(&[Some(&img)]);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (_, rejects) = run_stage("meta", op.as_ref(), batch, &schema, false).unwrap();
        assert_eq!(rejects[0].reason, "too_large");
        assert_eq!(
            build(&DEF, serde_json::json!({"max_bytes": "lots"}))
                .err()
                .unwrap(),
            vec!["params.max_bytes: expected a byte size such as 64MiB, found \"lots\""]
        );
    }
}
