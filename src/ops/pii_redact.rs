//! `pii_redact`: replaces email addresses and IPv4 addresses in a text column (in
//! place) and adds `pii_redactions`, the number of replacements per record.
use super::params::{Params, params};
use super::{OpDef, Operator, Output, ProcessError, SchemaError, require_text, text_values};
use crate::spec::reader::Obj;
use arrow_array::builder::StringBuilder;
use arrow_array::{ArrayRef, RecordBatch, UInt32Array};
use arrow_schema::{DataType, Field, Schema};
use regex::Regex;
use std::sync::{Arc, LazyLock};

pub const DEF: OpDef = OpDef {
    name: "pii_redact",
    summary: "replaces email and IPv4 addresses in a text column",
    params: PiiRedactParams::describe,
    example: "{}",
    feature: None,
    build: Some(build),
};

params! {
    /// `pii_redact`.
    pub struct PiiRedactParams {
        /// The text column (rewritten in place; `pii_redactions` counts the
        /// replacements).
        field: String = "text",
        /// Replace email addresses.
        emails: bool = true,
        /// Replace IPv4 addresses.
        ips: bool = true,
        /// What an email address becomes.
        email_replacement: String = "email@example.com",
        /// What an IPv4 address becomes.
        ip_replacement: String = "0.0.0.0",
    }
}

// ASCII word boundaries (`(?-u:\b)`): the patterns are ASCII, and a Unicode `\b`
// keeps the regex engine off its DFA on non-ASCII text (several times slower).
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?-u:\b)")
        .expect("email regex")
});
static IPV4: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?-u:\b)")
        .expect("ip regex")
});

struct PiiRedact {
    field: String,
    emails: bool,
    ips: bool,
    email_replacement: String,
    ip_replacement: String,
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = PiiRedactParams::read(o)?;
    Some(Box::new(PiiRedact {
        field: p.field,
        emails: p.emails,
        ips: p.ips,
        email_replacement: p.email_replacement,
        ip_replacement: p.ip_replacement,
    }))
}

/// Redacts one text; returns the new text and the number of replacements.
pub fn redact(text: &str, emails: Option<&str>, ips: Option<&str>) -> (String, u32) {
    let mut n = 0u32;
    let mut out = std::borrow::Cow::Borrowed(text);
    // No '@', no email: most texts skip the email regex.
    if let Some(r) = emails.filter(|_| memchr::memchr(b'@', text.as_bytes()).is_some()) {
        let c = EMAIL.find_iter(&out).count() as u32;
        if c > 0 {
            n += c;
            out = std::borrow::Cow::Owned(EMAIL.replace_all(&out, regex::NoExpand(r)).into_owned());
        }
    }
    if let Some(r) = ips {
        let c = IPV4.find_iter(&out).count() as u32;
        if c > 0 {
            n += c;
            out = std::borrow::Cow::Owned(IPV4.replace_all(&out, regex::NoExpand(r)).into_owned());
        }
    }
    (out.into_owned(), n)
}

impl Operator for PiiRedact {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        require_text(input, &self.field)?;
        Ok(vec![
            Field::new(&self.field, DataType::Utf8, true),
            Field::new("pii_redactions", DataType::UInt32, false),
        ])
    }

    fn replaces(&self) -> bool {
        true
    }

    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        use rayon::prelude::*;
        let texts = text_values(batch, &self.field)?;
        let e = self.emails.then_some(self.email_replacement.as_str());
        let i = self.ips.then_some(self.ip_replacement.as_str());
        let done: Vec<Option<(String, u32)>> = texts
            .par_iter()
            .map(|t| t.map(|t| redact(t, e, i)))
            .collect();
        let mut b = StringBuilder::new();
        for d in &done {
            b.append_option(d.as_ref().map(|x| x.0.as_str()));
        }
        let counts = UInt32Array::from_iter_values(
            done.iter().map(|d| d.as_ref().map(|x| x.1).unwrap_or(0)),
        );
        Ok(Output::columns(vec![
            Arc::new(b.finish()) as ArrayRef,
            Arc::new(counts),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{build, text_batch};
    use crate::ops::{output_schema, run_stage};
    use arrow_array::{Array, StringArray};

    #[test]
    fn redacts_in_place_and_counts() {
        assert_eq!(
            redact(
                "mail jane.doe@mail.example.org or 10.0.0.255; not 999.1.1.1 nor v1.2.3",
                Some("E"),
                Some("I")
            ),
            ("mail E or I; not 999.1.1.1 nor v1.2.3".to_string(), 2)
        );
        let op = build(&DEF, serde_json::json!({})).unwrap();
        let batch = text_batch(&[Some("write to a@b.co"), None]);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        assert_eq!(
            schema.fields().len(),
            3,
            "text replaced in place, count added"
        );
        let (out, _) = run_stage("pii", op.as_ref(), batch, &schema, true).unwrap();
        let t = out
            .column_by_name("text")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap()
            .clone();
        assert_eq!(t.value(0), "write to email@example.com");
        assert!(t.is_null(1));
        assert_eq!(out.schema().field(1).name(), "text");
    }
}
