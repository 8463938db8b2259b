//! `exact_key`: a dedup-key producer: 128-bit hash of a text column after optional
//! lowercasing and whitespace collapsing. Records with equal keys are exact
//! duplicates for the dedup shuffle.
use super::{KeyProducer, OpDef, Operator, require_text, text_values};
use crate::kernels::text::{self, Normalise};
use crate::spec::reader::Obj;
use arrow_array::RecordBatch;
use arrow_schema::Schema;

pub const DEF: OpDef = OpDef {
    name: "exact_key",
    summary: "adds a 128-bit normalised content hash as a dedup key",
    build,
};

struct ExactKey {
    field: String,
    norm: Normalise,
}

fn build(p: &Obj) -> Option<Operator> {
    Some(Operator::Keys(Box::new(ExactKey {
        field: p.opt_str("field").unwrap_or_else(|| "text".into()),
        norm: Normalise {
            lowercase: p.opt_bool("lowercase").unwrap_or(true),
            collapse_whitespace: p.opt_bool("collapse_whitespace").unwrap_or(true),
        },
    })))
}

impl KeyProducer for ExactKey {
    fn check(&self, input: &Schema) -> Result<(), String> {
        require_text(input, &self.field)
    }
    fn keys(&self, batch: &RecordBatch) -> Result<Vec<Option<u128>>, String> {
        Ok(text::content_hashes(
            &text_values(batch, &self.field)?,
            self.norm,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{build, text_batch};
    use crate::ops::{output_schema, run_stage};
    use arrow_array::{Array, FixedSizeBinaryArray};

    #[test]
    fn equal_normalised_texts_share_a_key() {
        let op = build(&DEF, serde_json::json!({})).unwrap();
        let batch = text_batch(&[Some("A  b"), Some("a b"), Some("a c"), None]);
        let schema = output_schema("dk", &op, &batch.schema()).unwrap();
        let (out, _) = run_stage("dk", &op, batch, &schema, true).unwrap();
        let k = out.column_by_name("dk_key").unwrap();
        let k = k.as_any().downcast_ref::<FixedSizeBinaryArray>().unwrap();
        assert_eq!(k.value(0), k.value(1));
        assert_ne!(k.value(1), k.value(2));
        assert!(k.is_null(3));
    }
}
