//! `language_filter`: identifies each document's language, writes `language` (ISO
//! 639-1) and `language_score`, and keeps documents in `languages` (all, when empty)
//! whose score reaches `min_score`. Reasons: `language` (detail: the language and
//! score), `language_unknown`.
use super::{Drop, Filter, OpDef, Operator, require_text, text_values};
use crate::kernels::lang;
use crate::spec::reader::Obj;
use arrow_array::builder::{Float64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

pub const DEF: OpDef = OpDef {
    name: "language_filter",
    summary: "writes language and language_score; keeps listed languages above a score",
    build,
};

struct Op {
    field: String,
    languages: Vec<String>,
    min_score: f64,
}

fn build(p: &Obj) -> Option<Operator> {
    let languages = p.opt_str_list("languages").unwrap_or_default();
    let known = lang::known_codes();
    for (i, l) in languages.iter().enumerate() {
        if !known.contains(&l.as_str()) {
            p.sink.error(
                &format!("{}[{i}]", p.field_path("languages")),
                format!(
                    "unknown language code {l:?}, expected ISO 639-1, one of: {}",
                    known.join(", ")
                ),
            );
        }
    }
    let min_score = p.opt_f64("min_score").unwrap_or(0.65);
    if !(0.0..=1.0).contains(&min_score) {
        p.sink
            .error(&p.field_path("min_score"), "must be between 0 and 1");
    }
    Some(Operator::Filter(Box::new(Op {
        field: p.opt_str("field").unwrap_or_else(|| "text".into()),
        languages,
        min_score,
    })))
}

impl Filter for Op {
    fn check(&self, input: &Schema) -> Result<(), String> {
        require_text(input, &self.field)
    }

    fn added_fields(&self, _: &Schema) -> Vec<Field> {
        vec![
            Field::new("language", DataType::Utf8, true),
            Field::new("language_score", DataType::Float64, true),
        ]
    }

    fn filter(&self, batch: &RecordBatch) -> Result<Vec<Option<Drop>>, String> {
        Ok(self.annotate(batch)?.1)
    }

    fn annotate(&self, batch: &RecordBatch) -> Result<(Vec<ArrayRef>, Vec<Option<Drop>>), String> {
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
        Ok((
            vec![Arc::new(code.finish()), Arc::new(score.finish())],
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
        let schema = output_schema("lang", &op, &batch.schema()).unwrap();
        let (kept, rejects) = run_stage("lang", &op, batch, &schema, true).unwrap();
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
