//! `fineweb_quality`: FineWeb's line rules (terminal punctuation, short lines,
//! duplicated line characters, newline-to-word ratio) with the published defaults;
//! the reason names the rule (`line_punct_ratio`, `short_line_ratio`, ...).
use super::params::{Params, Rule, params};
use super::{OpDef, Operator, TextRule};
use crate::kernels::quality::{FineWeb, fineweb_quality};
use crate::spec::reader::Obj;

pub const DEF: OpDef = OpDef {
    name: "fineweb_quality",
    summary: "FineWeb line rules (published thresholds)",
    params: FineWebQualityParams::describe,
    example: "{}",
    feature: None,
    build: Some(build),
};

params! {
    /// `fineweb_quality`; the defaults are FineWeb's; `off` switches a
    /// rule off.
    pub struct FineWebQualityParams {
        /// The text column.
        field: String = "text",
        /// How words are cut: `whitespace` (white-space tokens, punctuation cut off
        /// their ends; fast), `uax29` (spaCy's patterns without English's special
        /// cases, Han and kana cut by Unicode word segmentation: language-neutral) or
        /// `spacy` (spaCy's English tokenizer: the words datatrove counts);
        /// docs/FILTERS.md.
        words: String = "whitespace",
        /// The least fraction of lines ending in terminal punctuation:
        /// `line_punct_ratio`.
        line_punct_thr: Rule<f64> [0.0, 1.0] = 0.12,
        /// Keep documents where no line ends in punctuation (ratio 0).
        line_punct_exclude_zero: bool = false,
        /// The largest fraction of short lines: `short_line_ratio`.
        short_line_thr: Rule<f64> [0.0, 1.0] = 0.67,
        /// A line of at most this many characters is short.
        short_line_length: usize = 30,
        /// The largest fraction of characters in duplicate lines: `char_dup_ratio`.
        char_duplicates_ratio: Rule<f64> [0.0, 1.0] = 0.01,
        /// The most newlines per word: `list_ratio`.
        new_line_ratio: Rule<f64> [0.0, f64::INFINITY] = 0.3,
    }
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = FineWebQualityParams::read(o)?;
    let words = super::params::word_split(o, &p.words)?;
    let f = FineWeb {
        line_punct_thr: p.line_punct_thr.0.unwrap_or(f64::NEG_INFINITY),
        line_punct_exclude_zero: p.line_punct_exclude_zero,
        short_line_thr: p.short_line_thr.0.unwrap_or(f64::INFINITY),
        short_line_length: p.short_line_length,
        char_duplicates_ratio: p.char_duplicates_ratio.0.unwrap_or(f64::INFINITY),
        new_line_ratio: p.new_line_ratio.0.unwrap_or(f64::INFINITY),
        words,
    };
    Some(Box::new(TextRule {
        field: p.field,
        rule: move |t: &str| fineweb_quality(t, &f),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::reader::Sink;

    #[test]
    fn the_declared_defaults_are_the_kernels() {
        let sink = Sink::default();
        let p = FineWebQualityParams::read(&Obj::new(None, "params", &sink)).unwrap();
        let d = FineWeb::default();
        assert_eq!(
            (
                p.line_punct_thr.0.unwrap(),
                p.line_punct_exclude_zero,
                p.short_line_thr.0.unwrap(),
                p.short_line_length,
                p.char_duplicates_ratio.0.unwrap(),
                p.new_line_ratio.0.unwrap()
            ),
            (
                d.line_punct_thr,
                d.line_punct_exclude_zero,
                d.short_line_thr,
                d.short_line_length,
                d.char_duplicates_ratio,
                d.new_line_ratio
            )
        );
    }

    #[test]
    fn drops_lists_of_short_lines() {
        let op = crate::ops::testing::build(&DEF, serde_json::json!({})).unwrap();
        let list = "a\nb\nc\nd\ne\nf\n";
        let good = "The council met on Tuesday and approved the new plan for the park.";
        let batch = crate::ops::testing::text_batch(&[Some(list), Some(good)]);
        let schema = crate::ops::output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (kept, rejects) =
            crate::ops::run_stage("fw", op.as_ref(), batch, &schema, false).unwrap();
        assert_eq!(kept.num_rows(), 1);
        assert_eq!(rejects.len(), 1);
        assert_eq!(rejects[0].id, "r0");
    }

    /// Every rule off: the list of short lines passes (each off value is neutral for
    /// its comparison: -inf under `<`, +inf over `>`).
    #[test]
    fn every_rule_off_keeps_the_list() {
        let all_off = serde_json::json!({
            "line_punct_thr": "off", "short_line_thr": "off",
            "char_duplicates_ratio": "off", "new_line_ratio": "off"
        });
        let op = crate::ops::testing::build(&DEF, all_off).unwrap();
        let batch = crate::ops::testing::text_batch(&[Some("a\nb\nc\nd\ne\nf\na\na\n")]);
        let schema = crate::ops::output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (kept, rejects) =
            crate::ops::run_stage("fw", op.as_ref(), batch, &schema, false).unwrap();
        assert_eq!((kept.num_rows(), rejects.len()), (1, 0));
    }
}
