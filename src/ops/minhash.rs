//! `minhash`: adds a MinHash signature of a text column (word n-grams over simplified
//! text, `bands × rows` permutations) as `FixedSizeBinary(4·bands·rows)`, little-endian
//! u32s, for a `dedup` stage with `kind: minhash` and the same bands and rows.
//! Records without words get a null signature and take no part in near-dedup.
use super::{OpDef, Operator, Refiner, require_text, text_values};
use crate::kernels::minhash::MinHasher;
use crate::spec::reader::Obj;
use arrow_array::{ArrayRef, FixedSizeBinaryArray, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

pub const DEF: OpDef = OpDef {
    name: "minhash",
    summary: "adds a MinHash signature (word n-grams) for near-duplicate dedup",
    build,
};

struct MinHash {
    field: String,
    column: String,
    hasher: MinHasher,
}

fn build(p: &Obj) -> Option<Operator> {
    let field = p.opt_str("field").unwrap_or_else(|| "text".into());
    let column = p.opt_str("column").unwrap_or_else(|| "minhash".into());
    let n_gram = p.u64_in("n_gram", 5, 1, 64) as usize;
    let bands = p.u64_in("bands", 14, 1, 512) as usize;
    let rows = p.u64_in("rows", 8, 1, 512) as usize;
    let seed = p.opt_u64("seed").unwrap_or(1);
    if bands * rows > crate::ops::dedup::MAX_PERMUTATIONS {
        p.sink.error(
            &p.field_path("rows"),
            format!(
                "bands × rows must be at most {}, found {}",
                crate::ops::dedup::MAX_PERMUTATIONS,
                bands * rows
            ),
        );
        return None;
    }
    Some(Operator::Refiner(Box::new(MinHash {
        field,
        column,
        hasher: MinHasher::new(n_gram, bands, rows, seed),
    })))
}

impl Refiner for MinHash {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, String> {
        require_text(input, &self.field)?;
        Ok(vec![Field::new(
            &self.column,
            DataType::FixedSizeBinary(4 * self.hasher.k() as i32),
            true,
        )])
    }

    fn refine(&self, batch: &RecordBatch) -> Result<Vec<ArrayRef>, String> {
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
        )
        .map_err(|e| e.to_string())?;
        Ok(vec![Arc::new(arr)])
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
        let schema = output_schema("mh", &op, &batch.schema()).unwrap();
        let (out, _) = run_stage("mh", &op, batch, &schema, true).unwrap();
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
