//! `length_filter`: drops records whose text column is shorter or longer than bounds
//! (in characters and/or words). Reasons: `too_short`, `too_long`, `missing_text`.
use super::{Drop, Filter, OpDef, Operator, require_text, text_values};
use crate::kernels::text;
use crate::spec::reader::Obj;
use arrow_array::RecordBatch;
use arrow_schema::Schema;

pub const DEF: OpDef = OpDef {
    name: "length_filter",
    summary: "drops records whose text is outside character/word bounds",
    build,
};

struct LengthFilter {
    field: String,
    min_chars: u64,
    max_chars: u64,
    min_words: u64,
    max_words: u64,
}

fn build(p: &Obj) -> Option<Operator> {
    let f = LengthFilter {
        field: p.opt_str("field").unwrap_or_else(|| "text".into()),
        min_chars: p.opt_u64("min_chars").unwrap_or(0),
        max_chars: p.opt_u64("max_chars").unwrap_or(u64::MAX),
        min_words: p.opt_u64("min_words").unwrap_or(0),
        max_words: p.opt_u64("max_words").unwrap_or(u64::MAX),
    };
    if f.min_chars > f.max_chars {
        p.sink
            .error(&p.field_path("min_chars"), "must not exceed max_chars");
    }
    if f.min_words > f.max_words {
        p.sink
            .error(&p.field_path("min_words"), "must not exceed max_words");
    }
    Some(Operator::Filter(Box::new(f)))
}

impl Filter for LengthFilter {
    fn check(&self, input: &Schema) -> Result<(), String> {
        require_text(input, &self.field)
    }

    fn filter(&self, batch: &RecordBatch) -> Result<Vec<Option<Drop>>, String> {
        let values = text_values(batch, &self.field)?;
        let lens = text::lengths(&values);
        Ok(values
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
            .collect())
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
        let schema = output_schema("lf", &op, &batch.schema()).unwrap();
        let (kept, rejects) = run_stage("lf", &op, batch, &schema, true).unwrap();
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
