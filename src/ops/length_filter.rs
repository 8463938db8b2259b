//! `length_filter`: drops records whose text column is shorter or longer than bounds
//! (in characters and/or words). Reasons: `too_short`, `too_long`, `missing_text`.
use super::params::{Params, params};
use super::{Drop, OpDef, Operator, Output, ProcessError, SchemaError, require_text, text_values};
use crate::kernels::text;
use crate::spec::reader::Obj;
use arrow_array::RecordBatch;
use arrow_schema::{Field, Schema};

pub const DEF: OpDef = OpDef {
    name: "length_filter",
    summary: "drops records whose text is outside character/word bounds",
    params: LengthFilterParams::describe,
    example: r#"{"min_words": 50}"#,
    feature: None,
    build: Some(build),
};

params! {
    /// `length_filter`.
    pub struct LengthFilterParams {
        /// The text column.
        field: String = "text",
        /// Fewer characters (Unicode scalar values): `too_short`.
        min_chars: u64 = 0,
        /// More characters: `too_long`; default no limit.
        max_chars: Option<u64>,
        /// Fewer whitespace-separated words: `too_short`.
        min_words: u64 = 0,
        /// More words: `too_long`; default no limit.
        max_words: Option<u64>,
    }
}

struct LengthFilter {
    field: String,
    min_chars: u64,
    max_chars: u64,
    min_words: u64,
    max_words: u64,
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = LengthFilterParams::read(o)?;
    let f = LengthFilter {
        field: p.field,
        min_chars: p.min_chars,
        max_chars: p.max_chars.unwrap_or(u64::MAX),
        min_words: p.min_words,
        max_words: p.max_words.unwrap_or(u64::MAX),
    };
    if f.min_chars > f.max_chars {
        o.error("min_chars", "must not exceed max_chars");
    }
    if f.min_words > f.max_words {
        o.error("min_words", "must not exceed max_words");
    }
    Some(Box::new(f))
}

impl Operator for LengthFilter {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        require_text(input, &self.field)?;
        Ok(vec![])
    }

    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let values = text_values(batch, &self.field)?;
        let lens = text::lengths(&values);
        Ok(Output::verdicts(
            values
                .iter()
                .zip(lens)
                .map(|(v, (chars, words))| {
                    if v.is_none() {
                        return Some(Drop {
                            reason: "missing_text",
                            detail: None,
                        });
                    }
                    if chars < self.min_chars || words < self.min_words {
                        return Some(Drop {
                            reason: "too_short",
                            detail: Some(format!("{chars} chars, {words} words")),
                        });
                    }
                    if chars > self.max_chars || words > self.max_words {
                        return Some(Drop {
                            reason: "too_long",
                            detail: Some(format!("{chars} chars, {words} words")),
                        });
                    }
                    None
                })
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{build, text_batch};
    use crate::ops::{output_schema, run_stage};

    #[test]
    fn drops_with_reasons_and_keeps_the_record() {
        let op = build(&DEF, serde_json::json!({"min_chars": 3, "max_words": 2})).unwrap();
        let batch = text_batch(&[Some("ok go"), Some("no"), None, Some("one two three")]);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (kept, rejects) = run_stage("lf", op.as_ref(), batch, &schema, true).unwrap();
        assert_eq!(kept.num_rows(), 1);
        let got: Vec<(&str, &str)> = rejects
            .iter()
            .map(|r| (r.id.as_str(), r.reason.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("r1", "too_short"),
                ("r2", "missing_text"),
                ("r3", "too_long")
            ]
        );
        assert_eq!(
            rejects[0].record.as_deref(),
            Some(r#"{"id":"r1","text":"no"}"#)
        );
        assert_eq!(rejects[0].operator, "lf");
    }

    #[test]
    fn refuses_inverted_bounds() {
        let e = build(&DEF, serde_json::json!({"min_chars": 9, "max_chars": 3}))
            .err()
            .unwrap();
        assert_eq!(e, vec!["params.min_chars: must not exceed max_chars"]);
    }
}
