//! `throttle`: passes records through unchanged at no more than `records_per_sec`.
//! For pacing a stage against a rate-limited downstream, and for tests that need tasks
//! to run long enough to be killed mid-way. With `when_env`, only processes whose
//! environment sets that variable are slowed: one slow machine among fast ones, for
//! straggler drills (`job.speculation`).
use super::params::{Params, params};
use super::{OpDef, Operator, Output, ProcessError, SchemaError};
use crate::spec::reader::Obj;
use arrow_array::RecordBatch;
use arrow_schema::{Field, Schema};
use std::time::Duration;

pub const DEF: OpDef = OpDef {
    name: "throttle",
    summary: "limits throughput to records_per_sec (pacing, tests)",
    params: ThrottleParams::describe,
    example: r#"{"records_per_sec": 1000}"#,
    feature: None,
    build: Some(build),
};

params! {
    /// `throttle`.
    pub struct ThrottleParams {
        /// The most records per second through the stage (positive).
        records_per_sec: f64,
        /// Throttle only in processes whose environment sets this variable (to a
        /// non-empty value); elsewhere records pass at full speed.
        when_env: Option<String>,
    }
}

struct Throttle {
    records_per_sec: f64,
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = ThrottleParams::read(o)?;
    if p.records_per_sec <= 0.0 {
        o.error("records_per_sec", "must be positive");
        return None;
    }
    let active = p
        .when_env
        .as_ref()
        .is_none_or(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
    Some(Box::new(Throttle {
        records_per_sec: if active {
            p.records_per_sec
        } else {
            f64::INFINITY
        },
    }))
}

impl Operator for Throttle {
    fn output_fields(&self, _: &Schema) -> Result<Vec<Field>, SchemaError> {
        Ok(vec![])
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let secs = batch.num_rows() as f64 / self.records_per_sec;
        if secs > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(secs.min(3600.0)));
        }
        Ok(Output::default())
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::testing::{build, text_batch};

    #[test]
    fn passes_records_through_and_needs_a_positive_rate() {
        let op = build(&super::DEF, serde_json::json!({"records_per_sec": 1e9})).unwrap();
        let batch = text_batch(&[Some("a"), None]);
        let schema = crate::ops::output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (out, rejects) =
            crate::ops::run_stage("t", op.as_ref(), batch.clone(), &schema, true).unwrap();
        assert_eq!((out, rejects.len()), (batch, 0));
        assert_eq!(
            build(&super::DEF, serde_json::json!({})).err().unwrap(),
            vec!["params.records_per_sec: missing required field"]
        );
        assert_eq!(
            build(&super::DEF, serde_json::json!({"records_per_sec": 0}))
                .err()
                .unwrap(),
            vec!["params.records_per_sec: must be positive"]
        );
    }
}
