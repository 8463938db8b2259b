//! `text_length`: adds `<prefix>chars` and `<prefix>words` (Unicode scalar values and
//! whitespace-separated words) of a text column.
use super::params::{Params, params};
use super::{OpDef, Operator, Output, ProcessError, SchemaError, require_text, text_values};
use crate::kernels::text;
use crate::spec::reader::Obj;
use arrow_array::{ArrayRef, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

pub const DEF: OpDef = OpDef {
    name: "text_length",
    summary: "adds character and word counts of a text column",
    params: TextLengthParams::describe,
    example: "{}",
    feature: None,
    build: Some(build),
};

params! {
    /// `text_length`.
    pub struct TextLengthParams {
        /// The text column to measure.
        field: String = "text",
        /// Prefix of the added columns (`<prefix>chars`, `<prefix>words`); default
        /// `<field>_`.
        prefix: Option<String>,
    }
}

struct TextLength {
    field: String,
    prefix: String,
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = TextLengthParams::read(o)?;
    let prefix = p.prefix.unwrap_or_else(|| format!("{}_", p.field));
    Some(Box::new(TextLength {
        field: p.field,
        prefix,
    }))
}

impl Operator for TextLength {
    fn histograms(&self) -> Vec<String> {
        vec![
            format!("{}chars", self.prefix),
            format!("{}words", self.prefix),
        ]
    }
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        require_text(input, &self.field)?;
        Ok(vec![
            Field::new(format!("{}chars", self.prefix), DataType::UInt64, false),
            Field::new(format!("{}words", self.prefix), DataType::UInt64, false),
        ])
    }

    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let lens = text::lengths(&text_values(batch, &self.field)?);
        let chars = UInt64Array::from_iter_values(lens.iter().map(|l| l.0));
        let words = UInt64Array::from_iter_values(lens.iter().map(|l| l.1));
        Ok(Output::columns(vec![
            Arc::new(chars) as ArrayRef,
            Arc::new(words),
        ]))
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
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (out, rejects) = run_stage("len", op.as_ref(), batch, &schema, true).unwrap();
        assert!(rejects.is_empty());
        let chars = out.column_by_name("text_chars").unwrap();
        let chars = chars.as_any().downcast_ref::<UInt64Array>().unwrap();
        assert_eq!((chars.value(0), chars.value(1)), (8, 0));
        let bad = build(&DEF, serde_json::json!({"field": "body"})).unwrap();
        let e = output_schema(bad.as_ref(), &text_batch(&[]).schema()).unwrap_err();
        assert_eq!(
            e.to_string(),
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
