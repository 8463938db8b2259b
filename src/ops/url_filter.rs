//! `url_filter`: drops records whose URL is on a domain or URL block list (UT1
//! `.tar.gz` archives, plain or gzip text; local or `s3://`), contains a banned word,
//! at least `soft_word_threshold` soft-banned words, or a banned subword. Reasons:
//! `blocked_domain`, `blocked_url`, `banned_word`, `soft_banned_words`,
//! `banned_subword`, each with the matching entry as detail.
use super::{Asset, Drop, Filter, OpDef, Operator, require_text, text_values};
use crate::kernels::url::{ListKind, UrlBlocklist, list_lines};
use crate::spec::reader::Obj;
use arrow_array::RecordBatch;
use arrow_schema::Schema;
use bytes::Bytes;
use std::sync::OnceLock;

pub const DEF: OpDef = OpDef {
    name: "url_filter",
    summary: "drops records by domain/URL block lists and banned words in the URL",
    build,
};

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

fn build(p: &Obj) -> Option<Operator> {
    let f = UrlFilter {
        field: p.opt_str("field").unwrap_or_else(|| "url".into()),
        blocklists: p.opt_str_list("blocklists").unwrap_or_default(),
        domains: p.opt_str_list("domains").unwrap_or_default(),
        urls: p.opt_str_list("urls").unwrap_or_default(),
        categories: p.opt_str_list("categories").unwrap_or_default(),
        banned_words: p.opt_str_list("banned_words").unwrap_or_default(),
        soft_banned_words: p.opt_str_list("soft_banned_words").unwrap_or_default(),
        soft_word_threshold: p.u64_in("soft_word_threshold", 2, 1, 1000) as usize,
        banned_subwords: p.opt_str_list("banned_subwords").unwrap_or_default(),
        list: OnceLock::new(),
    };
    if f.assets().is_empty() {
        p.sink.error(
            &p.path,
            "needs at least one of blocklists, domains, urls, banned_words, soft_banned_words, banned_subwords",
        );
    }
    Some(Operator::Filter(Box::new(f)))
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

impl Filter for UrlFilter {
    fn check(&self, input: &Schema) -> Result<(), String> {
        require_text(input, &self.field)
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

    fn load(&self, assets: &[(Asset, Bytes)]) -> Result<(), String> {
        let mut b = UrlBlocklist::new(self.soft_word_threshold);
        let mut subwords = Vec::new();
        for (a, bytes) in assets {
            let err = |e: String| format!("{} ({}): {e}", a.param, a.uri);
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
                other => return Err(format!("unknown asset group {other}")),
            }
        }
        b.set_subwords(subwords.iter().map(String::as_str))?;
        b.seal();
        let _ = self.list.set(b);
        Ok(())
    }

    fn filter(&self, batch: &RecordBatch) -> Result<Vec<Option<Drop>>, String> {
        let list = self
            .list
            .get()
            .ok_or("url_filter used before its lists were loaded")?;
        let urls = text_values(batch, &self.field)?;
        Ok(list
            .check_all(&urls)
            .into_iter()
            .map(|v| {
                v.map(|b| Drop {
                    reason: b.reason,
                    detail: Some(b.detail),
                })
            })
            .collect())
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
        let Operator::Filter(f) = &op else { panic!() };
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
        let v = f.filter(&batch).unwrap();
        let reasons: Vec<Option<&str>> = v.iter().map(|d| d.as_ref().map(|d| d.reason)).collect();
        assert_eq!(reasons, [Some("blocked_domain"), Some("banned_word"), None]);
        assert!(
            build(&DEF, serde_json::json!({})).is_err(),
            "a filter with no list is refused"
        );
    }
}
