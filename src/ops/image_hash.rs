//! `image_hash`: `phash`, `dhash`, `ahash` (UInt64, as the Python imagehash library
//! defines them; hex-print them with 16 digits to compare) and `phash_flat`. A flat
//! image (near-constant, or with an ill-defined phash) gets a null `phash` unless
//! `keep_flat: true`, so a `phash` dedup does not cluster every blank image together.
//! A JPEG whose shorter side is at least twice `min_side` (default 64) is decoded at a
//! reduced DCT scale (hashes within a bit or two of full-size ones; `min_side: 0`
//! decodes at full size). Undecodable images are rejects with the reason.
use super::image_common as ic;
use super::params::{Params, params};
use super::{Drop, OpDef, Operator, Output, ProcessError, SchemaError};
use crate::kernels::image::Limits;
use crate::kernels::imagehash::hashes_with_luma;
use crate::spec::reader::Obj;
use arrow_array::{ArrayRef, BooleanArray, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

pub const DEF: OpDef = OpDef {
    name: "image_hash",
    summary: "adds perceptual hashes phash, dhash, ahash (imagehash-compatible)",
    params: ImageHashParams::describe,
    example: "{}",
    feature: None,
    build: Some(build),
};

struct ImageHash {
    column: String,
    limits: Limits,
    min_side: Option<u32>,
    keep_flat: bool,
}

params! {
    /// `image_hash`.
    pub struct ImageHashParams {
        /// A JPEG whose shorter side is at least twice this is decoded at a reduced
        /// DCT scale (0: always at full size).
        min_side: u32 [0, 65536] = 64,
        /// Keep the `phash` of flat images (otherwise null).
        keep_flat: bool = false,
    }
    flatten { image: ic::ImageParams }
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = ImageHashParams::read(o)?;
    Some(Box::new(ImageHash {
        limits: p.image.limits(),
        column: p.image.column,
        min_side: (p.min_side > 0).then_some(p.min_side),
        keep_flat: p.keep_flat,
    }))
}

impl Operator for ImageHash {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        ic::require_binary(input, &self.column)?;
        Ok(vec![
            Field::new("phash", DataType::UInt64, true),
            Field::new("dhash", DataType::UInt64, true),
            Field::new("ahash", DataType::UInt64, true),
            Field::new("phash_flat", DataType::Boolean, true),
        ])
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        use rayon::prelude::*;
        let v = ic::values(batch, &self.column)?;
        let h: Vec<Result<_, Drop>> = v
            .par_iter()
            .map(|b| {
                let b = b.ok_or_else(ic::missing)?;
                let d = ic::decode_cached(b, &self.limits, self.min_side);
                let d = d.as_ref().as_ref().map_err(ic::drop_of)?;
                Ok(hashes_with_luma(&d.rgb, d.luma()))
            })
            .collect();
        let ok = |x: &Result<crate::kernels::imagehash::Hashes, Drop>| x.as_ref().ok().copied();
        let phash: UInt64Array = h
            .iter()
            .map(|x| ok(x).filter(|h| self.keep_flat || !h.flat).map(|h| h.phash))
            .collect();
        let dhash: UInt64Array = h.iter().map(|x| ok(x).map(|h| h.dhash)).collect();
        let ahash: UInt64Array = h.iter().map(|x| ok(x).map(|h| h.ahash)).collect();
        let flat: BooleanArray = h.iter().map(|x| ok(x).map(|h| h.flat)).collect();
        Ok(Output::annotated(
            vec![
                Arc::new(phash) as ArrayRef,
                Arc::new(dhash),
                Arc::new(ahash),
                Arc::new(flat),
            ],
            h.into_iter().map(|x| x.err()).collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{build, image_batch, png};
    use crate::ops::{output_schema, run_stage};
    use arrow_array::Array;

    fn hashes(params: serde_json::Value, images: &[&[u8]]) -> (UInt64Array, usize) {
        let op = build(&DEF, params).unwrap();
        let batch = image_batch(&images.iter().map(|i| Some(*i)).collect::<Vec<_>>());
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (kept, rejects) = run_stage("ih", op.as_ref(), batch, &schema, false).unwrap();
        let p = kept.column_by_name("phash").unwrap();
        (
            p.as_any().downcast_ref::<UInt64Array>().unwrap().clone(),
            rejects.len(),
        )
    }

    #[test]
    fn equal_images_hash_equally_and_flat_ones_have_no_phash() {
        let (a, b, flat) = (png(64, 64, false), png(64, 64, false), png(64, 64, true));
        let (p, rejected) = hashes(serde_json::json!({}), &[&a, &b, &flat, b"junk"]);
        assert_eq!(rejected, 1);
        assert_eq!(p.value(0), p.value(1));
        assert!(p.is_null(2), "a flat image's phash is null");
        let (p, _) = hashes(serde_json::json!({"keep_flat": true}), &[&flat]);
        assert!(p.is_valid(0));
    }
}
