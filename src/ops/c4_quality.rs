//! `c4_quality`: C4's rules — drops boilerplate lines from the text column (rewriting
//! it) and drops documents for lorem ipsum, curly brackets, too few sentences, or a
//! word from an optional bad-words list (`bad_words`: files of one word or phrase a
//! line, e.g. the LDNOOBW lists). Reasons: `lorem_ipsum`, `curly_bracket`,
//! `too_few_sentences`, `badwords`.
use super::{Asset, Drop, Filter, OpDef, Operator, require_text, text_values};
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
    build,
};

struct Op {
    field: String,
    c4: C4,
    bad_words: Vec<String>,
    automaton: OnceLock<Option<AhoCorasick>>,
}

fn build(p: &Obj) -> Option<Operator> {
    let d = C4::default();
    let c4 = C4 {
        min_words_per_line: p
            .opt_u64("min_words_per_line")
            .map(|x| x as usize)
            .unwrap_or(d.min_words_per_line),
        max_word_length: p
            .opt_u64("max_word_length")
            .map(|x| x as usize)
            .unwrap_or(d.max_word_length),
        min_num_sentences: p
            .opt_u64("min_num_sentences")
            .map(|x| x as usize)
            .unwrap_or(d.min_num_sentences),
        remove_citations: p.opt_bool("remove_citations").unwrap_or(d.remove_citations),
        filter_no_terminal_punct: p
            .opt_bool("filter_no_terminal_punct")
            .unwrap_or(d.filter_no_terminal_punct),
        filter_lorem_ipsum: p
            .opt_bool("filter_lorem_ipsum")
            .unwrap_or(d.filter_lorem_ipsum),
        filter_javascript: p
            .opt_bool("filter_javascript")
            .unwrap_or(d.filter_javascript),
        filter_curly_bracket: p
            .opt_bool("filter_curly_bracket")
            .unwrap_or(d.filter_curly_bracket),
        filter_policy: p.opt_bool("filter_policy").unwrap_or(d.filter_policy),
    };
    let bad_words = p.opt_str_list("bad_words").unwrap_or_default();
    let automaton = OnceLock::new();
    if bad_words.is_empty() {
        let _ = automaton.set(None);
    }
    Some(Operator::Filter(Box::new(Op {
        field: p.opt_str("field").unwrap_or_else(|| "text".into()),
        c4,
        bad_words,
        automaton,
    })))
}

impl Filter for Op {
    fn check(&self, input: &Schema) -> Result<(), String> {
        require_text(input, &self.field)
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
    fn load(&self, assets: &[(Asset, Bytes)]) -> Result<(), String> {
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
            .then(|| AhoCorasick::new(&words).map_err(|e| e.to_string()))
            .transpose()?;
        let _ = self.automaton.set(ac);
        Ok(())
    }
    fn added_fields(&self, _: &Schema) -> Vec<Field> {
        vec![Field::new(&self.field, DataType::Utf8, true)]
    }
    fn replaces(&self) -> bool {
        true
    }
    fn filter(&self, batch: &RecordBatch) -> Result<Vec<Option<Drop>>, String> {
        Ok(self.annotate(batch)?.1)
    }
    fn annotate(&self, batch: &RecordBatch) -> Result<(Vec<ArrayRef>, Vec<Option<Drop>>), String> {
        let ac = self
            .automaton
            .get()
            .ok_or("c4_quality used before its bad-words list was loaded")?
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
        Ok((vec![Arc::new(b.finish())], verdicts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{build, text_batch};
    use crate::ops::{output_schema, run_stage};
    use arrow_array::{Array, StringArray};

    #[test]
    fn rewrites_kept_text_and_keeps_rejected_originals() {
        let op = build(&DEF, serde_json::json!({})).unwrap();
        let good = "Menu\nThe council met on Tuesday. It approved the plan.\nResidents spoke at length today.\nThe work starts in spring and ends.\nEngineers publish a report monthly.";
        let batch = text_batch(&[Some(good), Some("Too short.")]);
        let schema = output_schema("c4", &op, &batch.schema()).unwrap();
        assert_eq!(schema.fields().len(), 2, "text is rewritten in place");
        let (kept, rejects) = run_stage("c4", &op, batch, &schema, true).unwrap();
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
