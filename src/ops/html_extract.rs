//! `html_extract`: main-content text and title from an HTML column (the WARC
//! reader's `html`), written as `text` and `title`; the HTML column can then be
//! dropped with `output.drop_columns`. A per-record CPU budget (`timeout_ms`) stops
//! pathological pages: they are rejected with reason `timeout`; pages with no main
//! text are rejected as `no_text`. With `metadata: true` it also writes what the page
//! declares about itself (JSON-LD, Open Graph, `<meta>`): `author`, `date_published`
//! (`YYYY-MM-DD`; from the address's path, the `url` column, where the page declares
//! none), `site_name`, `canonical_url` and `description`, null where absent.
use super::params::{Params, params};
use super::{Drop, OpDef, Operator, Output, ProcessError, SchemaError, require_text, text_values};
use crate::kernels::html::{ExtractError, Metadata, extract, metadata};
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
        /// Also write author, date_published, site_name, canonical_url and
        /// description as declared by the page (null where it declares none).
        metadata: bool = false,
    }
}

struct Op {
    field: String,
    budget: Duration,
    metadata: bool,
}

/// The metadata columns `metadata: true` adds, in order.
const META_COLUMNS: [&str; 5] = [
    "author",
    "date_published",
    "site_name",
    "canonical_url",
    "description",
];

fn meta_fields(m: &Metadata) -> [Option<&str>; 5] {
    [
        m.author.as_deref(),
        m.date.as_deref(),
        m.site_name.as_deref(),
        m.canonical_url.as_deref(),
        m.description.as_deref(),
    ]
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = HtmlExtractParams::read(o)?;
    Some(Box::new(Op {
        field: p.field,
        budget: Duration::from_millis(p.timeout_ms),
        metadata: p.metadata,
    }))
}

impl Operator for Op {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        require_text(input, &self.field)?;
        let meta: &[&str] = if self.metadata { &META_COLUMNS } else { &[] };
        let names: Vec<&str> = ["text", "title"].iter().chain(meta).copied().collect();
        for c in &names {
            if input.field_with_name(c).is_ok() {
                return Err(SchemaError::Clash(c.to_string()));
            }
        }
        Ok(names
            .into_iter()
            .map(|c| Field::new(c, DataType::Utf8, true))
            .collect())
    }

    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let html = text_values(batch, &self.field)?;
        // The page's address (the WARC reader's `url`) dates a page by its path.
        let urls = match batch.schema().field_with_name("url") {
            Ok(f) if self.metadata && f.data_type() == &DataType::Utf8 => {
                text_values(batch, "url")?
            }
            _ => vec![None; batch.num_rows()],
        };
        let results: Vec<_> = html
            .par_iter()
            .zip(urls.par_iter())
            .map(|(h, url)| {
                h.map(|h| {
                    let m = (self.metadata).then(|| metadata(h, *url));
                    (extract(h, self.budget), m)
                })
            })
            .collect();
        let (mut text, mut title) = (StringBuilder::new(), StringBuilder::new());
        let mut meta: Vec<StringBuilder> = (0..if self.metadata { 5 } else { 0 })
            .map(|_| StringBuilder::new())
            .collect();
        let mut put_meta = |m: Option<&Metadata>| {
            let values = m.map(meta_fields).unwrap_or_default();
            for (b, v) in meta.iter_mut().zip(values) {
                b.append_option(v);
            }
        };
        let verdicts = results
            .into_iter()
            .map(|r| match r {
                None => {
                    put_meta(None);
                    text.append_null();
                    title.append_null();
                    Some(Drop {
                        reason: "missing_html",
                        detail: None,
                    })
                }
                Some((Err(ExtractError::Timeout), m)) => {
                    put_meta(m.as_ref());
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
                Some((Ok(e), m)) => {
                    put_meta(m.as_ref());
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
        let mut columns = vec![
            Arc::new(text.finish()) as ArrayRef,
            Arc::new(title.finish()),
        ];
        columns.extend(meta.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
        Ok(Output::annotated(columns, verdicts))
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
    fn metadata_columns_when_asked_and_only_then() {
        let page = r#"<html><head><title>T</title><meta name="author" content="Ann Smith">
<meta property="og:site_name" content="Example"><link rel="canonical" href="https://e.com/x">
</head><body><main><p>The council met on Tuesday and approved the plan for the national parks.</p></main></body></html>"#;
        let batch = html_batch(&[Some(page), None]);
        let plain = build(&DEF, serde_json::json!({})).unwrap();
        let names = |s: &Schema| {
            s.fields()
                .iter()
                .map(|f| f.name().clone())
                .collect::<Vec<_>>()
        };
        let schema = output_schema(plain.as_ref(), &batch.schema()).unwrap();
        assert_eq!(names(&schema), ["id", "html", "text", "title"]);
        let op = build(&DEF, serde_json::json!({"metadata": true})).unwrap();
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        assert_eq!(
            names(&schema),
            [
                "id",
                "html",
                "text",
                "title",
                "author",
                "date_published",
                "site_name",
                "canonical_url",
                "description"
            ]
        );
        let (kept, rejects) = run_stage("html", op.as_ref(), batch, &schema, true).unwrap();
        assert_eq!((kept.num_rows(), rejects.len()), (1, 1));
        let col = |n: &str| {
            let a = kept.column_by_name(n).unwrap();
            let a = a.as_any().downcast_ref::<StringArray>().unwrap();
            (!a.is_null(0)).then(|| a.value(0).to_string())
        };
        assert_eq!(col("author").as_deref(), Some("Ann Smith"));
        assert_eq!(col("site_name").as_deref(), Some("Example"));
        assert_eq!(col("canonical_url").as_deref(), Some("https://e.com/x"));
        assert_eq!(col("date_published"), None);
        // A column of that name already in the input is refused, named.
        let with_author = Arc::new(Schema::new(vec![
            Field::new("html", DataType::Utf8, true),
            Field::new("author", DataType::Utf8, true),
        ]));
        assert_eq!(
            output_schema(op.as_ref(), &with_author).unwrap_err(),
            crate::ops::SchemaError::Clash("author".into())
        );
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
