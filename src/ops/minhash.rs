//! `minhash`: adds a MinHash signature of a text column (word n-grams over simplified
//! text, `bands × rows` permutations) as `FixedSizeBinary(4·bands·rows)`, little-endian
//! u32s, for a `dedup` stage with `kind: minhash` and the same bands and rows.
//! Records without words get a null signature and take no part in near-dedup.
use super::params::{Params, params};
use super::{OpDef, Operator, Output, ProcessError, SchemaError, require_text, text_values};
use crate::kernels::minhash::MinHasher;
use crate::spec::reader::Obj;
use arrow_array::{ArrayRef, FixedSizeBinaryArray, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

pub const DEF: OpDef = OpDef {
    name: "minhash",
    summary: "adds a MinHash signature (word n-grams) for near-duplicate dedup",
    params: MinHashParams::describe,
    example: "{}",
    feature: None,
    build: Some(build),
};

params! {
    /// `minhash`.
    pub struct MinHashParams {
        /// The text column.
        field: String = "text",
        /// The signature column added.
        column: String = "minhash",
        /// Words per shingle.
        n_gram: usize [1, 64] = 5,
        /// LSH bands (the dedup stage's `bands` must match).
        bands: usize [1, 512] = 14,
        /// Rows per band (the dedup stage's `rows` must match); bands × rows at most 512.
        rows: usize [1, 512] = 8,
        /// Seed of the permutations.
        seed: u64 = 1,
    }
}

struct MinHash {
    field: String,
    column: String,
    hasher: MinHasher,
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = MinHashParams::read(o)?;
    if p.bands * p.rows > crate::ops::dedup::MAX_PERMUTATIONS {
        o.error(
            "rows",
            format!(
                "bands × rows must be at most {}, found {}",
                crate::ops::dedup::MAX_PERMUTATIONS,
                p.bands * p.rows
            ),
        );
        return None;
    }
    Some(Box::new(MinHash {
        field: p.field,
        column: p.column,
        hasher: MinHasher::new(p.n_gram, p.bands, p.rows, p.seed),
    }))
}

impl Operator for MinHash {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        require_text(input, &self.field)?;
        Ok(vec![Field::new(
            &self.column,
            DataType::FixedSizeBinary(4 * self.hasher.k() as i32),
            true,
        )])
    }

    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        use rayon::prelude::*;
        let texts = text_values(batch, &self.field)?;
        let sigs: Vec<Option<Vec<u8>>> = texts
            .par_iter()
            .map(|t| {
                let sh = self.hasher.shingles(t.unwrap_or(""));
                (!sh.is_empty()).then(|| {
                    self.hasher
                        .signature_of(&sh)
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect()
                })
            })
            .collect();
        let arr = FixedSizeBinaryArray::try_from_sparse_iter_with_size(
            sigs.into_iter(),
            4 * self.hasher.k() as i32,
        )?;
        Ok(Output::columns(vec![Arc::new(arr) as ArrayRef]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{build, text_batch};
    use crate::ops::{output_schema, run_stage};
    use arrow_array::Array;

    #[test]
    fn signatures_agree_with_the_kernel_and_empty_texts_have_none() {
        let op = build(
            &DEF,
            serde_json::json!({"bands": 4, "rows": 2, "n_gram": 2}),
        )
        .unwrap();
        let batch = text_batch(&[Some("the cat sat on the mat"), Some(" ,. "), None]);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (out, _) = run_stage("mh", op.as_ref(), batch, &schema, true).unwrap();
        let c = out.column_by_name("minhash").unwrap();
        let c = c.as_any().downcast_ref::<FixedSizeBinaryArray>().unwrap();
        assert_eq!(c.value_length(), 32);
        let want: Vec<u8> = MinHasher::new(2, 4, 2, 1)
            .signature("the cat sat on the mat")
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(c.value(0), &want[..]);
        assert!(c.is_null(1) && c.is_null(2));
        assert!(build(&DEF, serde_json::json!({"bands": 100, "rows": 10})).is_err());
    }
}
