//! `gopher_repetition`: Gopher's repetition rules (duplicate lines and paragraphs,
//! top n-grams, duplicated n-grams) with the published defaults; the reason names
//! the rule (`dup_line_frac`, `top_2_gram`, `duplicated_5_n_grams`, ...).
use super::{Drop, Filter, OpDef, Operator, per_text, require_text};
use crate::kernels::quality::{GopherRepetition, gopher_repetition};
use crate::spec::reader::Obj;
use arrow_array::RecordBatch;
use arrow_schema::Schema;

pub const DEF: OpDef = OpDef {
    name: "gopher_repetition",
    summary: "Gopher repetition rules (published thresholds)",
    build,
};

struct Op {
    field: String,
    r: GopherRepetition,
}

fn build(p: &Obj) -> Option<Operator> {
    let d = GopherRepetition::default();
    let fl = |k: &str, v: Option<f64>| p.opt_f64(k).or(v);
    let r = GopherRepetition {
        dup_line_frac: fl("dup_line_frac", d.dup_line_frac),
        dup_para_frac: fl("dup_para_frac", d.dup_para_frac),
        dup_line_char_frac: fl("dup_line_char_frac", d.dup_line_char_frac),
        dup_para_char_frac: fl("dup_para_char_frac", d.dup_para_char_frac),
        top_n_grams: d.top_n_grams,
        dup_n_grams: d.dup_n_grams,
    };
    Some(Operator::Filter(Box::new(Op {
        field: p.opt_str("field").unwrap_or_else(|| "text".into()),
        r,
    })))
}

impl Filter for Op {
    fn check(&self, input: &Schema) -> Result<(), String> {
        require_text(input, &self.field)
    }
    fn filter(&self, batch: &RecordBatch) -> Result<Vec<Option<Drop>>, String> {
        per_text(batch, &self.field, |t| gopher_repetition(t, &self.r))
    }
}
