//! `fineweb_quality`: FineWeb's line rules (terminal punctuation, short lines,
//! duplicated line characters, newline-to-word ratio) with the published defaults;
//! the reason names the rule (`line_punct_ratio`, `short_line_ratio`, ...).
use super::{Drop, Filter, OpDef, Operator, per_text, require_text};
use crate::kernels::quality::{FineWeb, fineweb_quality};
use crate::spec::reader::Obj;
use arrow_array::RecordBatch;
use arrow_schema::Schema;

pub const DEF: OpDef = OpDef {
    name: "fineweb_quality",
    summary: "FineWeb line rules (published thresholds)",
    build,
};

struct Op {
    field: String,
    f: FineWeb,
}

fn build(p: &Obj) -> Option<Operator> {
    let d = FineWeb::default();
    let f = FineWeb {
        line_punct_thr: p.opt_f64("line_punct_thr").unwrap_or(d.line_punct_thr),
        line_punct_exclude_zero: p
            .opt_bool("line_punct_exclude_zero")
            .unwrap_or(d.line_punct_exclude_zero),
        short_line_thr: p.opt_f64("short_line_thr").unwrap_or(d.short_line_thr),
        short_line_length: p
            .opt_u64("short_line_length")
            .map(|x| x as usize)
            .unwrap_or(d.short_line_length),
        char_duplicates_ratio: p
            .opt_f64("char_duplicates_ratio")
            .unwrap_or(d.char_duplicates_ratio),
        new_line_ratio: p.opt_f64("new_line_ratio").unwrap_or(d.new_line_ratio),
    };
    Some(Operator::Filter(Box::new(Op {
        field: p.opt_str("field").unwrap_or_else(|| "text".into()),
        f,
    })))
}

impl Filter for Op {
    fn check(&self, input: &Schema) -> Result<(), String> {
        require_text(input, &self.field)
    }
    fn filter(&self, batch: &RecordBatch) -> Result<Vec<Option<Drop>>, String> {
        per_text(batch, &self.field, |t| fineweb_quality(t, &self.f))
    }
}
