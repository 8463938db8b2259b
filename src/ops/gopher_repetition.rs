//! `gopher_repetition`: Gopher's repetition rules (duplicate lines and paragraphs,
//! top n-grams, duplicated n-grams) with the published defaults; the reason names
//! the rule (`dup_line_frac`, `top_2_gram`, `duplicated_5_n_grams`, ...).
use super::params::{Params, Rule, params};
use super::{OpDef, Operator, TextRule};
use crate::kernels::quality::{GopherRepetition, gopher_repetition};
use crate::spec::reader::Obj;

pub const DEF: OpDef = OpDef {
    name: "gopher_repetition",
    summary: "Gopher repetition rules (published thresholds)",
    params: GopherRepetitionParams::describe,
    example: "{}",
    feature: None,
    build: Some(build),
};

params! {
    /// `gopher_repetition`; the defaults are Gopher's published thresholds (the
    /// n-gram thresholds are fixed at them); `off` switches a rule off.
    pub struct GopherRepetitionParams {
        /// The text column.
        field: String = "text",
        /// How words are cut: `whitespace` (white-space tokens, punctuation cut off
        /// their ends; fast), `uax29` (spaCy's patterns without English's special
        /// cases, Han and kana cut by Unicode word segmentation: language-neutral) or
        /// `spacy` (spaCy's English tokenizer: the words datatrove counts);
        /// docs/FILTERS.md.
        words: String = "whitespace",
        /// The largest fraction of duplicate lines: `dup_line_frac`.
        dup_line_frac: Rule<f64> [0.0, 1.0] = 0.3,
        /// The largest fraction of duplicate paragraphs: `dup_para_frac`.
        dup_para_frac: Rule<f64> [0.0, 1.0] = 0.3,
        /// The largest fraction of characters in duplicate lines: `dup_line_char_frac`.
        dup_line_char_frac: Rule<f64> [0.0, 1.0] = 0.2,
        /// The largest fraction of characters in duplicate paragraphs:
        /// `dup_para_char_frac`.
        dup_para_char_frac: Rule<f64> [0.0, 1.0] = 0.2,
    }
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = GopherRepetitionParams::read(o)?;
    let words = super::params::word_split(o, &p.words)?;
    let d = GopherRepetition::default();
    let r = GopherRepetition {
        dup_line_frac: p.dup_line_frac.0,
        dup_para_frac: p.dup_para_frac.0,
        dup_line_char_frac: p.dup_line_char_frac.0,
        dup_para_char_frac: p.dup_para_char_frac.0,
        top_n_grams: d.top_n_grams,
        dup_n_grams: d.dup_n_grams,
        words,
    };
    Some(Box::new(TextRule {
        field: p.field,
        rule: move |t: &str| gopher_repetition(t, &r),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::reader::Sink;

    #[test]
    fn the_declared_defaults_are_the_kernels() {
        let sink = Sink::default();
        let p = GopherRepetitionParams::read(&Obj::new(None, "params", &sink)).unwrap();
        let d = GopherRepetition::default();
        assert_eq!(
            [
                p.dup_line_frac.0,
                p.dup_para_frac.0,
                p.dup_line_char_frac.0,
                p.dup_para_char_frac.0
            ],
            [
                d.dup_line_frac,
                d.dup_para_frac,
                d.dup_line_char_frac,
                d.dup_para_char_frac
            ]
        );
    }

    #[test]
    fn drops_repeated_lines() {
        let op = crate::ops::testing::build(&DEF, serde_json::json!({})).unwrap();
        let rep = "same line here\n".repeat(10);
        let batch = crate::ops::testing::text_batch(&[Some(&rep)]);
        let schema = crate::ops::output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (kept, rejects) =
            crate::ops::run_stage("gr", op.as_ref(), batch, &schema, false).unwrap();
        assert_eq!(kept.num_rows(), 0);
        assert_eq!(rejects[0].reason, "dup_line_frac");
    }
}
