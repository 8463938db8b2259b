//! `exact_key`: a dedup-key producer: 128-bit hash of a text column after optional
//! lowercasing and whitespace collapsing. Records with equal keys are exact
//! duplicates for the dedup shuffle. The key is added as a `FixedSizeBinary(16)`
//! column named `<stage>_key` (null: the record has no key), which the dedup shuffle
//! partitions by.
use super::params::{Params, params};
use super::{OpDef, Operator, Output, ProcessError, SchemaError, require_text, text_values};
use crate::kernels::text::{self, Normalise};
use crate::spec::reader::Obj;
use arrow_array::{FixedSizeBinaryArray, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

pub const DEF: OpDef = OpDef {
    name: "exact_key",
    summary: "adds a 128-bit normalised content hash as a dedup key",
    params: ExactKeyParams::describe,
    example: "{}",
    feature: None,
    build: Some(build),
};

params! {
    /// `exact_key`.
    pub struct ExactKeyParams {
        /// The text column to hash.
        field: String = "text",
        /// Lowercase before hashing.
        lowercase: bool = true,
        /// Collapse runs of whitespace before hashing.
        collapse_whitespace: bool = true,
    }
}

struct ExactKey {
    /// `<stage>_key`.
    column: String,
    field: String,
    norm: Normalise,
}

fn build(stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = ExactKeyParams::read(o)?;
    Some(Box::new(ExactKey {
        column: format!("{stage}_key"),
        field: p.field,
        norm: Normalise {
            lowercase: p.lowercase,
            collapse_whitespace: p.collapse_whitespace,
        },
    }))
}

impl Operator for ExactKey {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        require_text(input, &self.field)?;
        Ok(vec![Field::new(
            &self.column,
            DataType::FixedSizeBinary(16),
            true,
        )])
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let keys = text::content_hashes(&text_values(batch, &self.field)?, self.norm);
        let arr = FixedSizeBinaryArray::try_from_sparse_iter_with_size(
            keys.iter().map(|k| k.map(|v| v.to_le_bytes())),
            16,
        )?;
        Ok(Output::columns(vec![Arc::new(arr)]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{build_as, text_batch};
    use crate::ops::{output_schema, run_stage};
    use arrow_array::Array;

    #[test]
    fn equal_normalised_texts_share_a_key() {
        let op = build_as(&DEF, "dk", serde_json::json!({})).unwrap();
        let batch = text_batch(&[Some("A  b"), Some("a b"), Some("a c"), None]);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (out, _) = run_stage("dk", op.as_ref(), batch, &schema, true).unwrap();
        let k = out.column_by_name("dk_key").unwrap();
        let k = k.as_any().downcast_ref::<FixedSizeBinaryArray>().unwrap();
        assert_eq!(k.value(0), k.value(1));
        assert_ne!(k.value(1), k.value(2));
        assert!(k.is_null(3));
    }
}
