//! `throttle`: passes records through unchanged at no more than `records_per_sec`.
//! For pacing a stage against a rate-limited downstream, and for tests that need tasks
//! to run long enough to be killed mid-way.
use super::{OpDef, Operator, Refiner};
use crate::spec::reader::Obj;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{Field, Schema};
use std::time::Duration;

pub const DEF: OpDef = OpDef {
    name: "throttle",
    summary: "limits throughput to records_per_sec (pacing, tests)",
    build,
};

struct Throttle {
    records_per_sec: f64,
}

fn build(p: &Obj) -> Option<Operator> {
    let r = p.opt_f64("records_per_sec");
    if r.is_none() {
        p.sink
            .error(&p.field_path("records_per_sec"), "missing required field");
    }
    let records_per_sec = r?;
    if records_per_sec <= 0.0 {
        p.sink
            .error(&p.field_path("records_per_sec"), "must be positive");
        return None;
    }
    Some(Operator::Refiner(Box::new(Throttle { records_per_sec })))
}

impl Refiner for Throttle {
    fn output_fields(&self, _: &Schema) -> Result<Vec<Field>, String> {
        Ok(vec![])
    }
    fn refine(&self, batch: &RecordBatch) -> Result<Vec<ArrayRef>, String> {
        let secs = batch.num_rows() as f64 / self.records_per_sec;
        std::thread::sleep(Duration::from_secs_f64(secs.min(3600.0)));
        Ok(vec![])
    }
}
