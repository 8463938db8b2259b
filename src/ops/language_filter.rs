//! `language_filter`: identifies each document's language, writes `language` (ISO
//! 639-1) and `language_score`, and keeps documents in `languages` (all, when empty)
//! whose score reaches `min_score`. Reasons: `language` (detail: the language and
//! score), `language_unknown` (a text with no identifiable language), `missing_text`
//! (no text). With `model`, a fastText language-identification model
//! (lid.176, GlotLID) identifies instead of the built-in identifier: its top label,
//! `__label__` stripped (`en`, GlotLID's `eng_Latn`), and that label's probability.
use super::params::{Params, params};
use super::{
    Asset, Drop, LoadError, OpDef, Operator, Output, ProcessError, SchemaError, require_text,
    text_values,
};
use crate::kernels::fasttext::Model;
use crate::kernels::lang;
use crate::spec::reader::Obj;
use arrow_array::builder::{Float64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::sync::{Arc, OnceLock};

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
    /// The fastText model's URI, and the model with its labels once loaded.
    model: Option<String>,
    fasttext: OnceLock<(Model, Vec<String>)>,
}

params! {
    /// `language_filter`.
    pub struct LanguageFilterParams {
        /// The text column.
        field: String = "text",
        /// Languages to keep (all, when empty): ISO 639-1 codes, or with `model` the
        /// model's labels without `__label__` (checked when the model is loaded).
        languages: Vec<String>,
        /// The least identification score (0 to 1) to keep a document.
        min_score: f64 = 0.65,
        /// A fastText language-identification model (`lid.176.ftz`, `lid.176.bin`,
        /// GlotLID's `model.bin`; path or URI, fetched by the worker) to use instead of
        /// the built-in identifier. `language` is its top label without `__label__`
        /// (`en`; GlotLID: `eng_Latn`), `language_score` that label's probability.
        model: Option<String>,
    }
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = LanguageFilterParams::read(o)?;
    let languages = p.languages;
    let known = lang::known_codes();
    for (i, l) in languages.iter().enumerate() {
        if p.model.is_none() && !known.contains(&l.as_str()) {
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
        model: p.model,
        fasttext: OnceLock::new(),
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

    fn builtin_model(&self) -> Option<String> {
        self.model.is_none().then(lang::model_id)
    }
    fn assets(&self) -> Vec<Asset> {
        self.model
            .iter()
            .map(|uri| Asset {
                param: "params.model".into(),
                uri: uri.clone(),
            })
            .collect()
    }

    fn load(&self, assets: &[(Asset, bytes::Bytes)]) -> Result<(), LoadError> {
        if self.model.is_none() {
            return Ok(());
        }
        let (model, labels) = super::fasttext::load_model(assets, "__label__")?;
        for (i, l) in self.languages.iter().enumerate() {
            if !labels.contains(l) {
                let mut shown: Vec<&str> = labels.iter().map(String::as_str).collect();
                shown.sort_unstable();
                return Err(LoadError::Invalid(format!(
                    "params.languages[{i}]: {l:?} is not a label of params.model ({}); it has: {}",
                    self.model.as_deref().unwrap_or_default(),
                    shown.join(", ")
                )));
            }
        }
        let _ = self.fasttext.set((model, labels));
        Ok(())
    }

    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let texts = text_values(batch, &self.field)?;
        let ids: Vec<Option<(&str, f64)>> = match &self.model {
            None => lang::identify_all(&texts),
            Some(_) => {
                let (model, labels) = self
                    .fasttext
                    .get()
                    .ok_or(ProcessError::NotLoaded("language_filter"))?;
                model
                    .predict_all(&texts, 1, 0.0)
                    .iter()
                    .map(|p| {
                        p.first()
                            .map(|x| (labels[x.label as usize].as_str(), x.prob as f64))
                    })
                    .collect()
            }
        };
        let mut code = StringBuilder::new();
        let mut score = Float64Builder::new();
        let verdicts = ids
            .iter()
            .zip(&texts)
            .map(|(r, t)| {
                code.append_option(r.map(|x| x.0));
                score.append_option(r.map(|x| x.1));
                match r {
                    // No text at all: the reason every text filter gives.
                    None if t.is_none() => Some(Drop {
                        reason: "missing_text",
                        detail: None,
                    }),
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
            None,
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
        // An empty text has no language; no text at all is missing, as for every
        // text filter.
        assert_eq!(reasons, ["language", "language_unknown", "missing_text"]);
        assert!(rejects[0].detail.as_deref().unwrap().starts_with("fr "));
        assert!(build(&DEF, serde_json::json!({"languages": ["english"]})).is_err());
    }

    #[test]
    fn a_fasttext_model_identifies_instead() {
        use crate::kernels::fasttext::tests::model_bytes;
        let asset = |b: Vec<u8>| {
            vec![(
                Asset {
                    param: "params.model".into(),
                    uri: "lid.bin".into(),
                },
                bytes::Bytes::from(b),
            )]
        };
        // With a model, languages are the model's labels, checked at load.
        let op = build(
            &DEF,
            serde_json::json!({"model": "lid.bin", "languages": ["a"], "min_score": 0.0}),
        )
        .unwrap();
        assert_eq!(op.assets().len(), 1);
        op.load(&asset(model_bytes(1, 2, 4, 50, 1))).unwrap();
        let batch = text_batch(&[Some("hello world"), None]);
        let out = op.process(&batch).unwrap();
        let l = out.columns[0]
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert!(["a", "b", "c"].contains(&l.value(0)));
        let v = out.verdicts.unwrap();
        assert_eq!(v[0].is_none(), l.value(0) == "a");
        assert_eq!(v[1].as_ref().unwrap().reason, "missing_text");
        let op = build(
            &DEF,
            serde_json::json!({"model": "lid.bin", "languages": ["en"]}),
        )
        .unwrap();
        let e = op.load(&asset(model_bytes(1, 2, 4, 50, 1))).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("params.languages[0]: \"en\" is not a label"),
            "{e}"
        );
        let e = op.load(&asset(b"garbage".to_vec())).unwrap_err();
        assert!(e.to_string().starts_with("params.model (lid.bin): "), "{e}");
    }
}
