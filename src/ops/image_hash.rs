//! `image_hash`: `phash`, `dhash`, `ahash` (UInt64, as the Python imagehash library
//! defines them; hex-print them with 16 digits to compare) and `phash_flat`. A flat
//! image (near-constant, or with an ill-defined phash) gets a null `phash` unless
//! `keep_flat: true`, so a `phash` dedup does not cluster every blank image together.
//! A JPEG whose shorter side is at least twice `min_side` (default 64) is decoded at a
//! reduced DCT scale (hashes within a bit or two of full-size ones; `min_side: 0`
//! decodes at full size). Undecodable images are rejects with the reason.
use super::image_common as ic;
use super::{Drop, Filter, OpDef, Operator};
use crate::kernels::image::Limits;
use crate::kernels::imagehash::hashes_with_luma;
use crate::spec::reader::Obj;
use arrow_array::{ArrayRef, BooleanArray, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

pub const DEF: OpDef = OpDef {
    name: "image_hash",
    summary: "adds perceptual hashes phash, dhash, ahash (imagehash-compatible)",
    build,
};

struct ImageHash {
    column: String,
    limits: Limits,
    min_side: Option<u32>,
    keep_flat: bool,
}

fn build(p: &Obj) -> Option<Operator> {
    let (column, limits) = ic::params(p);
    let min_side = p.u64_in("min_side", 64, 0, 1 << 16) as u32;
    Some(Operator::Filter(Box::new(ImageHash {
        column,
        limits,
        min_side: (min_side > 0).then_some(min_side),
        keep_flat: p.opt_bool("keep_flat").unwrap_or(false),
    })))
}

impl Filter for ImageHash {
    fn check(&self, input: &Schema) -> Result<(), String> {
        ic::require_binary(input, &self.column)
    }
    fn added_fields(&self, _input: &Schema) -> Vec<Field> {
        vec![
            Field::new("phash", DataType::UInt64, true),
            Field::new("dhash", DataType::UInt64, true),
            Field::new("ahash", DataType::UInt64, true),
            Field::new("phash_flat", DataType::Boolean, true),
        ]
    }
    fn filter(&self, batch: &RecordBatch) -> Result<Vec<Option<Drop>>, String> {
        Ok(self.annotate(batch)?.1)
    }
    fn annotate(&self, batch: &RecordBatch) -> Result<(Vec<ArrayRef>, Vec<Option<Drop>>), String> {
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
        Ok((
            vec![
                Arc::new(phash),
                Arc::new(dhash),
                Arc::new(ahash),
                Arc::new(flat),
            ],
            h.into_iter().map(|x| x.err()).collect(),
        ))
    }
}
