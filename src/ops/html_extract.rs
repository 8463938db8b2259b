//! `html_extract`: main-content text and title from an HTML column (the WARC
//! reader's `html`), written as `text` and `title`; the HTML column can then be
//! dropped with `output.drop_columns`. A per-record CPU budget (`timeout_ms`) stops
//! pathological pages: they are rejected with reason `timeout`; pages with no main
//! text are rejected as `no_text`.
use super::params::{Params, params};
use super::{Drop, OpDef, Operator, Output, ProcessError, SchemaError, require_text, text_values};
use crate::kernels::html::{ExtractError, extract};
use crate::spec::reader::Obj;
use arrow_array::builder::StringBuilder;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use rayon::prelude::*;
use std::sync::Arc;
use std::time::Duration;

pub const DEF: OpDef = OpDef {
    name: "html_extract",
    summary: "main-content text and title from HTML, with a per-record time budget",
    params: HtmlExtractParams::describe,
    example: "{}",
    feature: None,
    build: Some(build),
};

params! {
    /// `html_extract`.
    pub struct HtmlExtractParams {
        /// The HTML column (the WARC reader's `html`).
        field: String = "html",
        /// CPU budget per page in milliseconds; slower pages: `timeout`.
        timeout_ms: u64 [1, 600000] = 2000,
    }
}

struct Op {
    field: String,
    budget: Duration,
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = HtmlExtractParams::read(o)?;
    Some(Box::new(Op {
        field: p.field,
        budget: Duration::from_millis(p.timeout_ms),
    }))
}

impl Operator for Op {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        require_text(input, &self.field)?;
        for c in ["text", "title"] {
            if input.field_with_name(c).is_ok() {
                return Err(SchemaError::Clash(c.to_string()));
            }
        }
        Ok(vec![
            Field::new("text", DataType::Utf8, true),
            Field::new("title", DataType::Utf8, true),
        ])
    }

    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let html = text_values(batch, &self.field)?;
        let results: Vec<_> = html
            .par_iter()
            .map(|h| h.map(|h| extract(h, self.budget)))
            .collect();
        let (mut text, mut title) = (StringBuilder::new(), StringBuilder::new());
        let verdicts = results
            .into_iter()
            .map(|r| match r {
                None => {
                    text.append_null();
                    title.append_null();
                    Some(Drop {
                        reason: "missing_html",
                        detail: None,
                    })
                }
                Some(Err(ExtractError::Timeout)) => {
                    text.append_null();
                    title.append_null();
                    Some(Drop {
                        reason: "timeout",
                        detail: Some(format!(
                            "extraction took over {} ms",
                            self.budget.as_millis()
                        )),
                    })
                }
                Some(Ok(e)) => {
                    let empty = e.text.trim().is_empty();
                    text.append_value(&e.text);
                    title.append_option(e.title.as_deref());
                    empty.then_some(Drop {
                        reason: "no_text",
                        detail: None,
                    })
                }
            })
            .collect();
        Ok(Output::annotated(
            vec![
                Arc::new(text.finish()) as ArrayRef,
                Arc::new(title.finish()),
            ],
            verdicts,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::build;
    use crate::ops::{output_schema, run_stage};
    use arrow_array::{Array, StringArray};

    fn html_batch(pages: &[Option<&str>]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("html", DataType::Utf8, true),
        ]));
        let ids: Vec<String> = (0..pages.len()).map(|i| format!("r{i}")).collect();
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(ids)),
                Arc::new(StringArray::from(pages.to_vec())),
            ],
        )
        .unwrap()
    }

    #[test]
    fn extracts_text_and_title_and_rejects_pages_without_text() {
        let op = build(&DEF, serde_json::json!({})).unwrap();
        let page = "<html><head><title>Parks</title></head><body><main><p>The council met on Tuesday and approved the plan for the national parks.</p></main></body></html>";
        let batch = html_batch(&[Some(page), None, Some("<html><body></body></html>")]);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (kept, rejects) = run_stage("html", op.as_ref(), batch, &schema, true).unwrap();
        assert_eq!(kept.num_rows(), 1);
        let col = |n: &str| {
            kept.column_by_name(n)
                .unwrap()
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .value(0)
                .to_string()
        };
        assert!(col("text").contains("The council met"), "{}", col("text"));
        assert_eq!(col("title"), "Parks");
        let reasons: Vec<&str> = rejects.iter().map(|r| r.reason.as_str()).collect();
        assert_eq!(reasons, ["missing_html", "no_text"]);
        // The rejected record is kept as it arrived: without the added columns.
        assert!(!rejects[0].record.as_deref().unwrap().contains("title"));
    }

    #[test]
    fn refuses_an_input_that_already_has_text() {
        let op = build(&DEF, serde_json::json!({"field": "text"})).unwrap();
        let e =
            output_schema(op.as_ref(), &crate::ops::testing::text_batch(&[]).schema()).unwrap_err();
        assert_eq!(e, crate::ops::SchemaError::Clash("text".into()));
        assert_eq!(
            build(&DEF, serde_json::json!({"timeout_ms": 0}))
                .err()
                .unwrap(),
            vec!["params.timeout_ms: must be between 1 and 600000, found 0"]
        );
    }
}
