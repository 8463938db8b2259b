//! What the image operators share: the encoded-image column, decode limits as
//! params, and decoding a batch in parallel with per-record rejects.
use super::Drop;
use crate::kernels::image::{DecodeError, Limits};
use crate::spec::reader::Obj;
use arrow_array::{Array, BinaryArray, LargeBinaryArray, RecordBatch};
use arrow_schema::{DataType, Schema};

/// Reads `column` (default `image`), `max_pixels` and `max_bytes`.
pub fn params(p: &Obj) -> (String, Limits) {
    let column = p.opt_str("column").unwrap_or_else(|| "image".into());
    let d = Limits::default();
    let limits = Limits {
        max_pixels: p.u64_in("max_pixels", d.max_pixels, 1, 1 << 40),
        max_bytes: p.opt_bytes("max_bytes").unwrap_or(d.max_bytes),
    };
    (column, limits)
}

pub fn require_binary(input: &Schema, column: &str) -> Result<(), String> {
    match input.field_with_name(column) {
        Ok(f) if matches!(f.data_type(), DataType::Binary | DataType::LargeBinary) => Ok(()),
        Ok(f) => Err(format!(
            "params.column: column {column:?} is {}, not encoded image bytes (binary)",
            f.data_type()
        )),
        Err(_) => Err(format!(
            "params.column: no column {column:?} of image bytes in the input (columns: {})",
            input
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The bytes of each row (None for null).
pub fn values<'a>(batch: &'a RecordBatch, column: &str) -> Result<Vec<Option<&'a [u8]>>, String> {
    let col = batch
        .column_by_name(column)
        .ok_or_else(|| format!("no column {column:?}"))?;
    if let Some(a) = col.as_any().downcast_ref::<BinaryArray>() {
        return Ok((0..a.len())
            .map(|i| a.is_valid(i).then(|| a.value(i)))
            .collect());
    }
    if let Some(a) = col.as_any().downcast_ref::<LargeBinaryArray>() {
        return Ok((0..a.len())
            .map(|i| a.is_valid(i).then(|| a.value(i)))
            .collect());
    }
    Err(format!("column {column:?} is not binary"))
}

/// The reject of an image that did not decode.
pub fn drop_of(e: &DecodeError) -> Drop {
    Drop {
        reason: e.reason,
        detail: Some(e.detail.clone()),
    }
}

pub fn missing() -> Drop {
    Drop {
        reason: "missing_image",
        detail: None,
    }
}
