//! `c4_quality`: C4's rules — drops boilerplate lines from the text column (rewriting
//! it) and drops documents for lorem ipsum, curly brackets, too few sentences, or a
//! word from an optional bad-words list (`bad_words`: files of one word or phrase a
//! line, e.g. the LDNOOBW lists). Reasons: `lorem_ipsum`, `curly_bracket`,
//! `too_few_sentences`, `badwords`.
use super::params::{Params, Rule, params};
use super::{
    Asset, Drop, LoadError, OpDef, Operator, Output, ProcessError, SchemaError, require_text,
    text_values,
};
use crate::kernels::quality::{C4, c4_quality};
use crate::spec::reader::Obj;
use aho_corasick::AhoCorasick;
use arrow_array::builder::StringBuilder;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use rayon::prelude::*;
use std::sync::{Arc, OnceLock};

pub const DEF: OpDef = OpDef {
    name: "c4_quality",
    summary: "C4 line and document rules (published defaults), optional bad words",
    params: C4QualityParams::describe,
    example: "{}",
    feature: None,
    build: Some(build),
};

params! {
    /// `c4_quality`; the defaults are C4's; `off` switches a rule off.
    pub struct C4QualityParams {
        /// The text column (rewritten: boilerplate lines removed).
        field: String = "text",
        /// Lines with fewer words are removed.
        min_words_per_line: Rule<usize> = 3,
        /// Lines with a longer word are removed.
        max_word_length: Rule<usize> = 1000,
        /// Fewer sentences left: `too_few_sentences`.
        min_num_sentences: Rule<usize> = 5,
        /// Remove Wikipedia-style citations (`[1]`, `[citation needed]`).
        remove_citations: bool = true,
        /// Remove lines that do not end in terminal punctuation.
        filter_no_terminal_punct: bool = true,
        /// Drop documents containing "lorem ipsum": `lorem_ipsum`.
        filter_lorem_ipsum: bool = true,
        /// Remove lines mentioning javascript.
        filter_javascript: bool = true,
        /// Drop documents containing a curly bracket: `curly_bracket`.
        filter_curly_bracket: bool = true,
        /// Remove lines about terms of use, privacy and cookie policies.
        filter_policy: bool = true,
        /// Files (paths or URIs) of one bad word or phrase a line (e.g. the LDNOOBW
        /// lists; `#` comments); a document containing one: `badwords`.
        bad_words: Vec<String>,
    }
}

struct Op {
    field: String,
    c4: C4,
    bad_words: Vec<String>,
    automaton: OnceLock<Option<AhoCorasick>>,
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = C4QualityParams::read(o)?;
    let c4 = C4 {
        min_words_per_line: p.min_words_per_line.0.unwrap_or(0),
        max_word_length: p.max_word_length.0.unwrap_or(usize::MAX),
        min_num_sentences: p.min_num_sentences.0.unwrap_or(0),
        remove_citations: p.remove_citations,
        filter_no_terminal_punct: p.filter_no_terminal_punct,
        filter_lorem_ipsum: p.filter_lorem_ipsum,
        filter_javascript: p.filter_javascript,
        filter_curly_bracket: p.filter_curly_bracket,
        filter_policy: p.filter_policy,
    };
    let automaton = OnceLock::new();
    if p.bad_words.is_empty() {
        let _ = automaton.set(None);
    }
    Some(Box::new(Op {
        field: p.field,
        c4,
        bad_words: p.bad_words,
        automaton,
    }))
}

impl Operator for Op {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        require_text(input, &self.field)?;
        Ok(vec![Field::new(&self.field, DataType::Utf8, true)])
    }
    fn assets(&self) -> Vec<Asset> {
        self.bad_words
            .iter()
            .enumerate()
            .map(|(i, u)| Asset {
                param: format!("params.bad_words[{i}]"),
                uri: u.clone(),
            })
            .collect()
    }
    fn load(&self, assets: &[(Asset, Bytes)]) -> Result<(), LoadError> {
        let mut words = Vec::new();
        for (_, b) in assets {
            for l in String::from_utf8_lossy(b).lines() {
                let l = l.trim().to_lowercase();
                if !l.is_empty() && !l.starts_with('#') {
                    words.push(l);
                }
            }
        }
        let ac = (!words.is_empty())
            .then(|| AhoCorasick::new(&words).map_err(|e| LoadError::Invalid(e.to_string())))
            .transpose()?;
        let _ = self.automaton.set(ac);
        Ok(())
    }
    fn replaces(&self) -> bool {
        true
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let ac = self
            .automaton
            .get()
            .ok_or(ProcessError::NotLoaded("c4_quality"))?
            .as_ref();
        let texts = text_values(batch, &self.field)?;
        let results: Vec<_> = texts
            .par_iter()
            .map(|t| t.map(|t| c4_quality(t, &self.c4, ac)))
            .collect();
        let mut b = StringBuilder::new();
        let verdicts = results
            .into_iter()
            .map(|r| match r {
                None => {
                    b.append_null();
                    Some(Drop {
                        reason: "missing_text",
                        detail: None,
                    })
                }
                Some(Ok(t)) => {
                    b.append_value(t);
                    None
                }
                Some(Err(reason)) => {
                    b.append_null();
                    Some(Drop {
                        reason,
                        detail: None,
                    })
                }
            })
            .collect();
        Ok(Output::annotated(
            vec![Arc::new(b.finish()) as ArrayRef],
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

    /// `min_num_sentences: off` keeps a page of one sentence, which the default (5)
    /// drops (datatrove's -1); a line rule still applies: at 9 words a line the line
    /// goes, and with the sentence rule off nothing drops the emptied page.
    #[test]
    fn rules_switched_off_keep_what_they_would_drop() {
        let text = "One sentence only, ending here.";
        let run = |params: serde_json::Value| {
            let op = build(&DEF, params).unwrap();
            let batch = text_batch(&[Some(text)]);
            let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
            let (kept, rejects) = run_stage("c4", op.as_ref(), batch, &schema, false).unwrap();
            let t = kept.column_by_name("text").map(|c| {
                let a = c.as_any().downcast_ref::<StringArray>().unwrap();
                (0..a.len())
                    .map(|i| a.value(i).to_string())
                    .collect::<Vec<_>>()
            });
            (rejects.len(), t.unwrap_or_default())
        };
        assert_eq!(run(serde_json::json!({})).0, 1);
        assert_eq!(
            run(serde_json::json!({"min_num_sentences": "off"})),
            (0, vec![text.to_string()])
        );
        assert_eq!(
            run(serde_json::json!({"min_num_sentences": "off", "min_words_per_line": 9})),
            (0, vec![String::new()])
        );
    }

    #[test]
    fn rewrites_kept_text_and_keeps_rejected_originals() {
        let op = build(&DEF, serde_json::json!({})).unwrap();
        let good = "Menu\nThe council met on Tuesday. It approved the plan.\nResidents spoke at length today.\nThe work starts in spring and ends.\nEngineers publish a report monthly.";
        let batch = text_batch(&[Some(good), Some("Too short.")]);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        assert_eq!(schema.fields().len(), 2, "text is rewritten in place");
        let (kept, rejects) = run_stage("c4", op.as_ref(), batch, &schema, true).unwrap();
        let t = kept
            .column_by_name("text")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap()
            .clone();
        assert_eq!(t.len(), 1);
        assert!(t.value(0).starts_with("The council"), "{}", t.value(0));
        assert_eq!(rejects[0].reason, "too_few_sentences");
        assert_eq!(
            rejects[0].record.as_deref(),
            Some(r#"{"id":"r1","text":"Too short."}"#)
        );
    }
}
