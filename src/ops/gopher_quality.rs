//! `gopher_quality`: Gopher's document quality rules (word count, mean word length,
//! symbol ratios, bullet and ellipsis lines, alphabetic words, stop words) with the
//! published defaults; the reason names the rule (`gopher_short_doc`, ...).
use super::{Drop, Filter, OpDef, Operator, per_text, require_text};
use crate::kernels::quality::{GopherQuality, gopher_quality};
use crate::spec::reader::Obj;
use arrow_array::RecordBatch;
use arrow_schema::Schema;

pub const DEF: OpDef = OpDef {
    name: "gopher_quality",
    summary: "Gopher quality rules (published thresholds)",
    build,
};

struct Op {
    field: String,
    q: GopherQuality,
}

fn build(p: &Obj) -> Option<Operator> {
    let d = GopherQuality::default();
    let us = |k: &str, v: Option<usize>| p.opt_u64(k).map(|x| x as usize).or(v);
    let fl = |k: &str, v: Option<f64>| p.opt_f64(k).or(v);
    let q = GopherQuality {
        min_doc_words: us("min_doc_words", d.min_doc_words),
        max_doc_words: us("max_doc_words", d.max_doc_words),
        min_avg_word_length: fl("min_avg_word_length", d.min_avg_word_length),
        max_avg_word_length: fl("max_avg_word_length", d.max_avg_word_length),
        max_symbol_word_ratio: fl("max_symbol_word_ratio", d.max_symbol_word_ratio),
        max_bullet_lines_ratio: fl("max_bullet_lines_ratio", d.max_bullet_lines_ratio),
        max_ellipsis_lines_ratio: fl("max_ellipsis_lines_ratio", d.max_ellipsis_lines_ratio),
        max_non_alpha_words_ratio: fl("max_non_alpha_words_ratio", d.max_non_alpha_words_ratio),
        min_stop_words: us("min_stop_words", d.min_stop_words),
        stop_words: p.opt_str_list("stop_words").unwrap_or(d.stop_words),
    };
    Some(Operator::Filter(Box::new(Op {
        field: p.opt_str("field").unwrap_or_else(|| "text".into()),
        q,
    })))
}

impl Filter for Op {
    fn check(&self, input: &Schema) -> Result<(), String> {
        require_text(input, &self.field)
    }
    fn filter(&self, batch: &RecordBatch) -> Result<Vec<Option<Drop>>, String> {
        per_text(batch, &self.field, |t| gopher_quality(t, &self.q))
    }
}
