//! `url_filter`: drops records whose URL is on a domain or URL block list (UT1
//! `.tar.gz` archives, plain or gzip text; local or `s3://`), contains a banned word,
//! at least `soft_word_threshold` soft-banned words, or a banned subword. Reasons:
//! `blocked_domain`, `blocked_url`, `banned_word`, `soft_banned_words`,
//! `banned_subword`, each with the matching entry as detail.
use super::params::{Params, params};
use super::{
    Asset, Drop, LoadError, OpDef, Operator, Output, ProcessError, SchemaError, require_text,
    text_values,
};
use crate::kernels::url::{ListKind, UrlBlocklist, list_lines};
use crate::spec::reader::Obj;
use arrow_array::RecordBatch;
use arrow_schema::{Field, Schema};
use bytes::Bytes;
use std::sync::OnceLock;

pub const DEF: OpDef = OpDef {
    name: "url_filter",
    summary: "drops records by domain/URL block lists and banned words in the URL",
    params: UrlFilterParams::describe,
    example: r#"{"domains": ["lists/domains.txt"]}"#,
    feature: None,
    build: Some(build),
};

params! {
    /// `url_filter`: at least one list is needed. Every list is a file (path or URI,
    /// plain or gzip text, one entry a line), fetched by the worker.
    pub struct UrlFilterParams {
        /// The URL column.
        field: String = "url",
        /// UT1 `.tar.gz` archives: both their `domains` and `urls` members are used.
        blocklists: Vec<String>,
        /// Domain lists: a URL on a listed domain or its subdomains: `blocked_domain`.
        domains: Vec<String>,
        /// URL lists: a listed URL: `blocked_url`.
        urls: Vec<String>,
        /// UT1 categories to read from `blocklists` (all, when empty).
        categories: Vec<String>,
        /// Word lists: a URL containing one as a word: `banned_word`.
        banned_words: Vec<String>,
        /// Word lists: a URL with at least `soft_word_threshold` of them:
        /// `soft_banned_words`.
        soft_banned_words: Vec<String>,
        /// How many soft-banned words drop a URL.
        soft_word_threshold: usize [1, 1000] = 2,
        /// Subword lists: a URL containing one anywhere: `banned_subword`.
        banned_subwords: Vec<String>,
    }
}

struct UrlFilter {
    field: String,
    /// UT1 archives: both their `domains` and `urls` members are used.
    blocklists: Vec<String>,
    domains: Vec<String>,
    urls: Vec<String>,
    categories: Vec<String>,
    banned_words: Vec<String>,
    soft_banned_words: Vec<String>,
    soft_word_threshold: usize,
    banned_subwords: Vec<String>,
    list: OnceLock<UrlBlocklist>,
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = UrlFilterParams::read(o)?;
    let f = UrlFilter {
        field: p.field,
        blocklists: p.blocklists,
        domains: p.domains,
        urls: p.urls,
        categories: p.categories,
        banned_words: p.banned_words,
        soft_banned_words: p.soft_banned_words,
        soft_word_threshold: p.soft_word_threshold,
        banned_subwords: p.banned_subwords,
        list: OnceLock::new(),
    };
    if f.assets().is_empty() {
        o.sink.error(
            &o.path,
            "needs at least one of blocklists, domains, urls, banned_words, soft_banned_words, banned_subwords",
        );
    }
    Some(Box::new(f))
}

impl UrlFilter {
    fn groups(&self) -> [(&'static str, &Vec<String>); 6] {
        [
            ("blocklists", &self.blocklists),
            ("domains", &self.domains),
            ("urls", &self.urls),
            ("banned_words", &self.banned_words),
            ("soft_banned_words", &self.soft_banned_words),
            ("banned_subwords", &self.banned_subwords),
        ]
    }
}

impl Operator for UrlFilter {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        require_text(input, &self.field)?;
        Ok(vec![])
    }

    fn assets(&self) -> Vec<Asset> {
        let mut out = Vec::new();
        for (param, list) in self.groups() {
            for (i, uri) in list.iter().enumerate() {
                out.push(Asset {
                    param: format!("params.{param}[{i}]"),
                    uri: uri.clone(),
                });
            }
        }
        out
    }

    fn load(&self, assets: &[(Asset, Bytes)]) -> Result<(), LoadError> {
        let mut b = UrlBlocklist::new(self.soft_word_threshold);
        let mut subwords = Vec::new();
        for (a, bytes) in assets {
            let err = |message: String| LoadError::Asset {
                param: a.param.clone(),
                uri: a.uri.clone(),
                message,
            };
            let group = a
                .param
                .trim_start_matches("params.")
                .split('[')
                .next()
                .unwrap_or("");
            match group {
                "blocklists" => {
                    list_lines(bytes, ListKind::Domains, &self.categories, |l| {
                        b.add_domain(l)
                    })
                    .map_err(err)?;
                    list_lines(bytes, ListKind::Urls, &self.categories, |l| b.add_url(l))
                        .map_err(err)?;
                }
                "domains" => {
                    list_lines(bytes, ListKind::Domains, &self.categories, |l| {
                        b.add_domain(l)
                    })
                    .map_err(err)?;
                }
                "urls" => {
                    list_lines(bytes, ListKind::Urls, &self.categories, |l| b.add_url(l))
                        .map_err(err)?;
                }
                "banned_words" => {
                    list_lines(bytes, ListKind::Domains, &[], |l| b.add_banned_word(l))
                        .map_err(err)?;
                }
                "soft_banned_words" => {
                    list_lines(bytes, ListKind::Domains, &[], |l| b.add_soft_word(l))
                        .map_err(err)?;
                }
                "banned_subwords" => {
                    list_lines(bytes, ListKind::Domains, &[], |l| {
                        subwords.push(l.to_string())
                    })
                    .map_err(err)?;
                }
                other => {
                    return Err(LoadError::Invalid(format!("unknown asset group {other}")));
                }
            }
        }
        b.set_subwords(subwords.iter().map(String::as_str))
            .map_err(LoadError::Invalid)?;
        b.seal();
        let _ = self.list.set(b);
        Ok(())
    }

    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let list = self
            .list
            .get()
            .ok_or(ProcessError::NotLoaded("url_filter"))?;
        let urls = text_values(batch, &self.field)?;
        Ok(Output::verdicts(
            list.check_all(&urls)
                .into_iter()
                .map(|v| {
                    v.map(|b| Drop {
                        reason: b.reason,
                        detail: Some(b.detail),
                    })
                })
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::build;
    use arrow_array::StringArray;
    use arrow_schema::{DataType, Field};
    use std::sync::Arc;

    #[test]
    fn filters_after_loading_its_lists() {
        let op = build(
            &DEF,
            serde_json::json!({"domains": ["d.txt"], "banned_words": ["w.txt"]}),
        )
        .unwrap();
        let f = op.as_ref();
        let assets = f.assets();
        assert_eq!(
            assets.iter().map(|a| a.param.as_str()).collect::<Vec<_>>(),
            ["params.domains[0]", "params.banned_words[0]"]
        );
        let loaded: Vec<(Asset, Bytes)> = assets
            .into_iter()
            .zip([Bytes::from("bad.com\n"), Bytes::from("casino\n")])
            .collect();
        f.load(&loaded).unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("url", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["a", "b", "c"])),
                Arc::new(StringArray::from(vec![
                    Some("http://x.bad.com/"),
                    Some("http://ok.org/casino-royale"),
                    Some("http://ok.org/"),
                ])),
            ],
        )
        .unwrap();
        let v = f.process(&batch).unwrap().verdicts.unwrap();
        let reasons: Vec<Option<&str>> = v.iter().map(|d| d.as_ref().map(|d| d.reason)).collect();
        assert_eq!(reasons, [Some("blocked_domain"), Some("banned_word"), None]);
        assert!(
            build(&DEF, serde_json::json!({})).is_err(),
            "a filter with no list is refused"
        );
    }
}
