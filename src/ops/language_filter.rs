//! `language_filter`: identifies each document's language, writes `language` (ISO
//! 639-1) and `language_score`, and keeps documents in `languages` (all, when empty)
//! whose score reaches `min_score`. Reasons: `language` (detail: the language and
//! score), `language_unknown`.
use super::params::{Params, params};
use super::{Drop, OpDef, Operator, Output, ProcessError, SchemaError, require_text, text_values};
use crate::kernels::lang;
use crate::spec::reader::Obj;
use arrow_array::builder::{Float64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

pub const DEF: OpDef = OpDef {
    name: "language_filter",
    summary: "writes language and language_score; keeps listed languages above a score",
    params: LanguageFilterParams::describe,
    example: r#"{"languages": ["en"]}"#,
    feature: None,
    build: Some(build),
};

struct Op {
    field: String,
    languages: Vec<String>,
    min_score: f64,
}

params! {
    /// `language_filter`.
    pub struct LanguageFilterParams {
        /// The text column.
        field: String = "text",
        /// ISO 639-1 codes to keep (all, when empty).
        languages: Vec<String>,
        /// The least identification score (0 to 1) to keep a document.
        min_score: f64 = 0.65,
    }
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = LanguageFilterParams::read(o)?;
    let languages = p.languages;
    let known = lang::known_codes();
    for (i, l) in languages.iter().enumerate() {
        if !known.contains(&l.as_str()) {
            o.sink.error(
                &format!("{}[{i}]", o.field_path("languages")),
                format!(
                    "unknown language code {l:?}, expected ISO 639-1, one of: {}",
                    known.join(", ")
                ),
            );
        }
    }
    let min_score = p.min_score;
    if !(0.0..=1.0).contains(&min_score) {
        o.error("min_score", "must be between 0 and 1");
    }
    Some(Box::new(Op {
        field: p.field,
        languages,
        min_score,
    }))
}

impl Operator for Op {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        require_text(input, &self.field)?;
        Ok(vec![
            Field::new("language", DataType::Utf8, true),
            Field::new("language_score", DataType::Float64, true),
        ])
    }

    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let ids = lang::identify_all(&text_values(batch, &self.field)?);
        let mut code = StringBuilder::new();
        let mut score = Float64Builder::new();
        let verdicts = ids
            .iter()
            .map(|r| {
                code.append_option(r.map(|x| x.0));
                score.append_option(r.map(|x| x.1));
                match r {
                    None => Some(Drop {
                        reason: "language_unknown",
                        detail: None,
                    }),
                    Some((l, s))
                        if *s < self.min_score
                            || (!self.languages.is_empty()
                                && !self.languages.iter().any(|x| x == l)) =>
                    {
                        Some(Drop {
                            reason: "language",
                            detail: Some(format!("{l} {s:.2}")),
                        })
                    }
                    Some(_) => None,
                }
            })
            .collect();
        Ok(Output::annotated(
            vec![
                Arc::new(code.finish()) as ArrayRef,
                Arc::new(score.finish()),
            ],
            verdicts,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{build, text_batch};
    use crate::ops::{output_schema, run_stage};
    use arrow_array::{Array, StringArray};

    #[test]
    fn keeps_listed_languages_and_writes_columns() {
        let op = build(
            &DEF,
            serde_json::json!({"languages": ["en"], "min_score": 0.5}),
        )
        .unwrap();
        let batch = text_batch(&[
            Some(
                "The committee published its annual report on the state of the national parks today.",
            ),
            Some(
                "Le comité a publié aujourd'hui son rapport annuel sur l'état des parcs nationaux.",
            ),
            Some(""),
        ]);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (kept, rejects) = run_stage("lang", op.as_ref(), batch, &schema, true).unwrap();
        assert_eq!(kept.num_rows(), 1);
        let l = kept.column_by_name("language").unwrap();
        assert_eq!(
            l.as_any().downcast_ref::<StringArray>().unwrap().value(0),
            "en"
        );
        let reasons: Vec<&str> = rejects.iter().map(|r| r.reason.as_str()).collect();
        assert_eq!(reasons, ["language", "language_unknown"]);
        assert!(rejects[0].detail.as_deref().unwrap().starts_with("fr "));
        assert!(build(&DEF, serde_json::json!({"languages": ["english"]})).is_err());
    }
}
