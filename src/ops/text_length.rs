//! `text_length`: adds `<prefix>chars` and `<prefix>words` (Unicode scalar values and
//! whitespace-separated words) of a text column.
use super::{OpDef, Operator, Refiner, require_text, text_values};
use crate::kernels::text;
use crate::spec::reader::Obj;
use arrow_array::{ArrayRef, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

pub const DEF: OpDef = OpDef {
    name: "text_length",
    summary: "adds character and word counts of a text column",
    build,
};

struct TextLength {
    /// Column to measure (default `text`).
    field: String,
    /// Prefix of the added columns (default `text_`): `text_chars`, `text_words`.
    prefix: String,
}

fn build(p: &Obj) -> Option<Operator> {
    let field = p.opt_str("field").unwrap_or_else(|| "text".into());
    let prefix = p.opt_str("prefix").unwrap_or_else(|| format!("{field}_"));
    Some(Operator::Refiner(Box::new(TextLength { field, prefix })))
}

impl Refiner for TextLength {
    fn histograms(&self) -> Vec<String> {
        vec![
            format!("{}chars", self.prefix),
            format!("{}words", self.prefix),
        ]
    }
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, String> {
        require_text(input, &self.field)?;
        Ok(vec![
            Field::new(format!("{}chars", self.prefix), DataType::UInt64, false),
            Field::new(format!("{}words", self.prefix), DataType::UInt64, false),
        ])
    }

    fn refine(&self, batch: &RecordBatch) -> Result<Vec<ArrayRef>, String> {
        let lens = text::lengths(&text_values(batch, &self.field)?);
        let chars = UInt64Array::from_iter_values(lens.iter().map(|l| l.0));
        let words = UInt64Array::from_iter_values(lens.iter().map(|l| l.1));
        Ok(vec![Arc::new(chars), Arc::new(words)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{build, text_batch};
    use crate::ops::{output_schema, run_stage};
    use arrow_array::Array;

    #[test]
    fn adds_counts_and_refuses_missing_columns() {
        let op = build(&DEF, serde_json::json!({})).unwrap();
        let batch = text_batch(&[Some("a bb ccc"), None]);
        let schema = output_schema("len", &op, &batch.schema()).unwrap();
        let (out, rejects) = run_stage("len", &op, batch, &schema, true).unwrap();
        assert!(rejects.is_empty());
        let chars = out.column_by_name("text_chars").unwrap();
        let chars = chars.as_any().downcast_ref::<UInt64Array>().unwrap();
        assert_eq!((chars.value(0), chars.value(1)), (8, 0));
        let bad = build(&DEF, serde_json::json!({"field": "body"})).unwrap();
        let e = output_schema("len", &bad, &text_batch(&[]).schema()).unwrap_err();
        assert_eq!(
            e,
            "params.field: no column \"body\" in the input (columns: id, text)"
        );
        assert_eq!(
            build(&DEF, serde_json::json!({"feild": "x"}))
                .err()
                .unwrap(),
            vec!["params.feild: unknown field, expected one of: field, prefix"]
        );
    }
}
