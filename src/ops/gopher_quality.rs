//! `gopher_quality`: Gopher's document quality rules (word count, mean word length,
//! symbol ratios, bullet and ellipsis lines, alphabetic words, stop words) with the
//! published defaults; the reason names the rule (`gopher_short_doc`, ...).
use super::params::{Params, Rule, params};
use super::{OpDef, Operator, TextRule};
use crate::kernels::quality::{GopherQuality, gopher_quality};
use crate::spec::reader::Obj;

pub const DEF: OpDef = OpDef {
    name: "gopher_quality",
    summary: "Gopher quality rules (published thresholds)",
    params: GopherQualityParams::describe,
    example: "{}",
    feature: None,
    build: Some(build),
};

params! {
    /// `gopher_quality`; the defaults are Gopher's published thresholds; `off` switches a rule off.
    pub struct GopherQualityParams {
        /// The text column.
        field: String = "text",
        /// How words are cut: `whitespace` (white-space tokens, punctuation cut off
        /// their ends; fast), `uax29` (spaCy's patterns without English's special
        /// cases, Han and kana cut by Unicode word segmentation: language-neutral) or
        /// `spacy` (spaCy's English tokenizer: the words datatrove counts);
        /// docs/FILTERS.md.
        words: String = "whitespace",
        /// Fewer words: `gopher_short_doc`.
        min_doc_words: Rule<usize> = 50,
        /// More words: `gopher_long_doc`.
        max_doc_words: Rule<usize> = 100000,
        /// A lower mean word length: `gopher_below_avg_threshold`.
        min_avg_word_length: Rule<f64> [0.0, f64::INFINITY] = 3.0,
        /// A higher mean word length: `gopher_above_avg_threshold`.
        max_avg_word_length: Rule<f64> [0.0, f64::INFINITY] = 10.0,
        /// More `#` and ellipsis symbols per word: `gopher_too_many_hashes` /
        /// `gopher_too_many_ellipsis`.
        max_symbol_word_ratio: Rule<f64> [0.0, f64::INFINITY] = 0.1,
        /// More lines starting with a bullet: `gopher_too_many_bullets`.
        max_bullet_lines_ratio: Rule<f64> [0.0, 1.0] = 0.9,
        /// More lines ending with an ellipsis: `gopher_too_many_end_ellipsis`.
        max_ellipsis_lines_ratio: Rule<f64> [0.0, 1.0] = 0.3,
        /// More words without an alphabetic character: `gopher_below_alpha_threshold`.
        max_non_alpha_words_ratio: Rule<f64> [0.0, 1.0] = 0.8,
        /// Fewer of `stop_words`: `gopher_enough_stop_words`.
        min_stop_words: Rule<usize> = 2,
        /// The stop words counted for `min_stop_words`.
        stop_words: Vec<String> = ["the", "be", "to", "of", "and", "that", "have", "with"],
    }
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = GopherQualityParams::read(o)?;
    // Bounds that cross reject every page (a new spec's check: a stored job runs as
    // it was accepted).
    if let (Some(a), Some(b)) = (p.min_doc_words.0, p.max_doc_words.0)
        && a > b
        && o.new_rules
    {
        o.error("min_doc_words", "must not exceed max_doc_words");
    }
    if let (Some(a), Some(b)) = (p.min_avg_word_length.0, p.max_avg_word_length.0)
        && a > b
        && o.new_rules
    {
        o.error("min_avg_word_length", "must not exceed max_avg_word_length");
    }
    let words = super::params::word_split(o, &p.words)?;
    let q = GopherQuality {
        min_doc_words: p.min_doc_words.0,
        max_doc_words: p.max_doc_words.0,
        min_avg_word_length: p.min_avg_word_length.0,
        max_avg_word_length: p.max_avg_word_length.0,
        max_symbol_word_ratio: p.max_symbol_word_ratio.0,
        max_bullet_lines_ratio: p.max_bullet_lines_ratio.0,
        max_ellipsis_lines_ratio: p.max_ellipsis_lines_ratio.0,
        max_non_alpha_words_ratio: p.max_non_alpha_words_ratio.0,
        min_stop_words: p.min_stop_words.0,
        stop_words: p.stop_words,
        words,
    };
    Some(Box::new(TextRule {
        field: p.field,
        rule: move |t: &str| gopher_quality(t, &q),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::reader::Sink;

    #[test]
    fn the_declared_defaults_are_the_kernels() {
        let sink = Sink::default();
        let p = GopherQualityParams::read(&Obj::new(None, "params", &sink)).unwrap();
        let d = GopherQuality::default();
        assert_eq!(
            (p.min_doc_words.0, p.max_doc_words.0, p.min_stop_words.0),
            (d.min_doc_words, d.max_doc_words, d.min_stop_words)
        );
        assert_eq!(
            [
                p.min_avg_word_length.0,
                p.max_avg_word_length.0,
                p.max_symbol_word_ratio.0,
                p.max_bullet_lines_ratio.0,
                p.max_ellipsis_lines_ratio.0,
                p.max_non_alpha_words_ratio.0
            ],
            [
                d.min_avg_word_length,
                d.max_avg_word_length,
                d.max_symbol_word_ratio,
                d.max_bullet_lines_ratio,
                d.max_ellipsis_lines_ratio,
                d.max_non_alpha_words_ratio
            ]
        );
        assert_eq!(p.stop_words, d.stop_words);
    }

    #[test]
    fn drops_short_documents_by_rule_name() {
        let op = crate::ops::testing::build(&DEF, serde_json::json!({"min_doc_words": 3})).unwrap();
        let batch = crate::ops::testing::text_batch(&[
            Some("the cat and the dog sat with the owl"),
            Some("too short"),
        ]);
        let schema = crate::ops::output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (kept, rejects) =
            crate::ops::run_stage("gq", op.as_ref(), batch, &schema, false).unwrap();
        assert_eq!(kept.num_rows(), 1);
        assert_eq!(rejects[0].reason, "gopher_short_doc");
        assert_eq!(rejects[0].operator, "gq");
    }

    /// A rule is switched off with `off`, never by a value: `null` used to keep the
    /// default silently (now refused, with the hint), and `0` is a threshold
    /// (max_doc_words: 0 drops every page).
    #[test]
    fn off_switches_a_rule_off_and_zero_is_a_threshold() {
        let text = "cats dogs birds fish frogs owls bees ants";
        let verdict = |params: serde_json::Value| {
            let op = crate::ops::testing::build(&DEF, params).unwrap();
            let batch = crate::ops::testing::text_batch(&[Some(text)]);
            let schema = crate::ops::output_schema(op.as_ref(), &batch.schema()).unwrap();
            let (_, rejects) =
                crate::ops::run_stage("gq", op.as_ref(), batch, &schema, false).unwrap();
            rejects.first().map(|r| r.reason.clone())
        };
        use serde_json::json;
        assert_eq!(verdict(json!({})).as_deref(), Some("gopher_short_doc"));
        assert_eq!(
            verdict(json!({"min_doc_words": "off"})).as_deref(),
            Some("gopher_enough_stop_words")
        );
        assert_eq!(
            verdict(json!({"min_doc_words": "off", "min_stop_words": "off"})),
            None
        );
        assert_eq!(
            verdict(json!({"min_doc_words": "off", "min_stop_words": "off", "max_doc_words": 0}))
                .as_deref(),
            Some("gopher_long_doc")
        );
        let e = crate::ops::testing::build(&DEF, json!({"min_stop_words": -1}))
            .err()
            .unwrap();
        assert!(
            e.iter().any(|m| m.contains(
                "params.min_stop_words: expected a non-negative integer, found an integer (-1)"
            )),
            "{e:?}"
        );
        let e = crate::ops::testing::build(&DEF, json!({"min_stop_words": "none"}))
            .err()
            .unwrap();
        assert!(
            e.iter().any(|m| m.contains(
                "params.min_stop_words: expected a non-negative integer or off, found \"none\""
            )),
            "{e:?}"
        );
        // null (an empty YAML value) switches nothing off unseen: refused, with the hint.
        let e = crate::ops::testing::build(&DEF, json!({"min_stop_words": null}))
            .err()
            .unwrap();
        assert!(
            e.iter()
                .any(|m| m.contains("params.min_stop_words: null is not a threshold: write off")),
            "{e:?}"
        );
    }

    /// `words` picks the split, and the split changes what is counted: `don't` is
    /// one word to the white-space split and two (`do`, `n't`) to spaCy's; a name
    /// that is no split is refused naming the field.
    #[test]
    fn words_picks_the_split_and_refuses_an_unknown_one() {
        use serde_json::json;
        let text = "don't don't don't the with";
        let kept = |words: &str| {
            let op = crate::ops::testing::build(
                &DEF,
                json!({"words": words, "min_doc_words": 6, "min_stop_words": 0, "min_avg_word_length": "off"}),
            )
            .unwrap();
            let batch = crate::ops::testing::text_batch(&[Some(text)]);
            let schema = crate::ops::output_schema(op.as_ref(), &batch.schema()).unwrap();
            let (kept, _) =
                crate::ops::run_stage("gq", op.as_ref(), batch, &schema, false).unwrap();
            kept.num_rows()
        };
        assert_eq!(kept("whitespace"), 0, "5 words");
        assert_eq!(kept("spacy"), 1, "8 words");
        assert_eq!(kept("uax29"), 1, "8 words");
        let e = crate::ops::testing::build(&DEF, json!({"words": "nltk"}))
            .err()
            .unwrap();
        assert!(
            e.iter()
                .any(|m| m.contains("params.words") && m.contains("whitespace, uax29 or spacy")),
            "{e:?}"
        );
    }
}
