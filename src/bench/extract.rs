//! Main-text extraction scored per source on several public benchmarks at once
//! (../shared/data/extraction-wceb: `<source>/ground-truth.json` + `<source>/html/<id>.html.gz`),
//! each source split into a tuning half and a held-out half by the parity of
//! crc32("source/id"). Two metrics:
//!
//! - **shingle F1**, the article-extraction literature's (Scrapinghub's
//!   article-extraction-benchmark): texts tokenised as `\w+` (Unicode letters, numbers
//!   and `_`, as Python's `re`), bags of 4-token shingles, each page's true/false
//!   positives and misses normalised to sum to one; precision is the mean over pages
//!   that predicted something, recall the mean over pages with a truth, F1 from the two
//!   means;
//! - **snippet F1** where a source has `with`/`without` snippets (WCXB), as
//!   `extract_quality` scores extraction-dev.
//!
//! `scripts/bench-extractors.py --sources` runs trafilatura, resiliparse and
//! readability on the same pages and scores them all with the same metric (in Python;
//! its score of mdf's dump equals this one's).
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use super::BenchError;

/// One page's shingle matches, normalised so that true positives, false positives and
/// misses sum to one (long pages weigh no more than short ones).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Match {
    pub tp: f64,
    pub fp: f64,
    pub fn_: f64,
}

/// `\w+` tokens as Python's `re` finds them: runs of Unicode letters (L*), numbers
/// (N*) and `_` (Python's `str.isalnum`; not marks, not the Alphabetic property's
/// symbols such as ⓘ). Characters newer than the Python's Unicode tables may still
/// differ.
pub fn tokens(text: &str) -> Vec<&str> {
    static WORD: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"[\p{L}\p{N}_]+").expect("valid"));
    WORD.find_iter(text).map(|m| m.as_str()).collect()
}

/// The bag of `n`-token shingles of `text` (a text of fewer tokens is one shingle).
fn shingles(text: &str, n: usize) -> crate::kernels::FastMap<Vec<&str>, u32> {
    let t = tokens(text);
    let mut bag = crate::kernels::FastMap::default();
    if t.is_empty() {
        return bag;
    }
    for i in 0..(t.len() + 1).saturating_sub(n).max(1) {
        *bag.entry(t[i..(i + n).min(t.len())].to_vec()).or_insert(0) += 1;
    }
    bag
}

/// Shingle matching of a prediction against the truth (4-token shingles).
pub fn shingle_match(truth: &str, pred: &str) -> Match {
    let (t, p) = (shingles(truth, 4), shingles(pred, 4));
    let (mut tp, mut fp, mut fn_) = (0f64, 0f64, 0f64);
    for (k, &pc) in &p {
        let tc = t.get(k).copied().unwrap_or(0);
        tp += f64::from(pc.min(tc));
        fp += f64::from(pc.saturating_sub(tc));
    }
    for (k, &tc) in &t {
        fn_ += f64::from(tc.saturating_sub(p.get(k).copied().unwrap_or(0)));
    }
    let s = tp + fp + fn_;
    if s > 0.0 {
        Match {
            tp: tp / s,
            fp: fp / s,
            fn_: fn_ / s,
        }
    } else {
        Match { tp, fp, fn_ }
    }
}

/// Precision, recall and F1 over pages, as the literature averages them.
pub fn shingle_prf(pages: &[Match]) -> (f64, f64, f64) {
    let score = |m: &Match, num: f64, other: f64| {
        if m.fp == 0.0 && m.fn_ == 0.0 {
            1.0
        } else if m.tp == 0.0 && other == 0.0 {
            0.0
        } else {
            m.tp / (m.tp + num)
        }
    };
    let mean = |v: Vec<f64>| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let p = mean(
        pages
            .iter()
            .filter(|m| m.tp + m.fp > 0.0)
            .map(|m| score(m, m.fp, m.fp))
            .collect(),
    );
    let r = mean(
        pages
            .iter()
            .filter(|m| m.tp + m.fn_ > 0.0)
            .map(|m| score(m, m.fn_, m.fn_))
            .collect(),
    );
    (p, r, 2.0 * p * r / (p + r).max(1e-12))
}

/// IEEE CRC-32, for the tuning/held-out split (Python's `zlib.crc32`).
fn crc32(s: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in s {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// The half of a source a page belongs to: "tuning" or "held-out".
pub fn half(source: &str, id: &str) -> &'static str {
    if crc32(format!("{source}/{id}").as_bytes()).is_multiple_of(2) {
        "tuning"
    } else {
        "held-out"
    }
}

/// One row of the report: a source's half.
#[derive(Debug, Clone)]
pub struct SourceRow {
    pub source: String,
    pub half: &'static str,
    pub pages: usize,
    /// Shingle precision, recall, F1.
    pub shingle: (f64, f64, f64),
    /// Snippet precision, recall, F1, where the source has snippets.
    pub snippet: Option<(f64, f64, f64)>,
}

/// What a multi-source run measured.
pub struct ExtractSources {
    pub rows: Vec<SourceRow>,
    pub pages: usize,
    pub bytes: usize,
    pub secs: f64,
}

impl ExtractSources {
    /// Macro average of the shingle F1 over the sources, for one half.
    pub fn macro_f1(&self, half: &str) -> f64 {
        let v: Vec<f64> = self
            .rows
            .iter()
            .filter(|r| r.half == half)
            .map(|r| r.shingle.2)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    }
}

/// Scores `kernels::html::extract` on every source under `dir`. Pages the set flags as
/// unable to yield their truth (`flag`) are left out. `dump`: each page's text and
/// declared metadata as JSON lines `{source, id, half, text, author, date, site_name,
/// canonical_url, description}`.
pub fn extract_sources(dir: &Path, dump: Option<&Path>) -> Result<ExtractSources, BenchError> {
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut sources: Vec<_> = std::fs::read_dir(dir)
        .map_err(BenchError::io(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("ground-truth.json").is_file())
        .collect();
    sources.sort();
    if sources.is_empty() {
        return Err(BenchError::Input(format!(
            "{}: no <source>/ground-truth.json",
            dir.display()
        )));
    }
    let mut out = dump
        .map(|p| {
            std::fs::File::create(p)
                .map(std::io::BufWriter::new)
                .map_err(BenchError::io(p))
        })
        .transpose()?;
    // (source, half) -> (shingle matches, snippet tp/fp/fn)
    type Half = (Vec<Match>, [usize; 3]);
    let mut acc: BTreeMap<(String, &'static str), Half> = BTreeMap::new();
    let (mut pages, mut bytes, mut secs) = (0usize, 0usize, 0f64);
    for src in &sources {
        let name = src
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let gt_path = src.join("ground-truth.json");
        let gt: BTreeMap<String, serde_json::Value> =
            serde_json::from_slice(&std::fs::read(&gt_path).map_err(BenchError::io(&gt_path))?)
                .map_err(|e| BenchError::Input(format!("{}: {e}", gt_path.display())))?;
        for (id, e) in &gt {
            if e.get("flag").is_some_and(|f| !f.is_null() && f != false) {
                continue;
            }
            let path = src.join("html").join(format!("{id}.html.gz"));
            let Ok(f) = std::fs::File::open(&path) else {
                continue;
            };
            let mut raw = Vec::new();
            flate2::read::MultiGzDecoder::new(f)
                .read_to_end(&mut raw)
                .map_err(BenchError::io(&path))?;
            let url = e["url"].as_str();
            let html = crate::kernels::http::decode_text(&raw, None, url).text;
            let t = Instant::now();
            let text = crate::kernels::html::extract(&html, Duration::from_secs(10))
                .map(|x| x.text)
                .unwrap_or_default();
            secs += t.elapsed().as_secs_f64();
            pages += 1;
            bytes += html.len();
            let h = half(&name, id);
            let truth = e["text"].as_str().unwrap_or("");
            let slot = acc.entry((name.clone(), h)).or_default();
            slot.0.push(shingle_match(truth, &text));
            let flat = norm(&text);
            let snippets = |k: &str| {
                e[k].as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.as_str())
                    .map(norm)
                    .collect::<Vec<_>>()
            };
            for s in snippets("with") {
                slot.1[if flat.contains(&s) { 0 } else { 2 }] += 1;
            }
            slot.1[1] += snippets("without")
                .iter()
                .filter(|s| flat.contains(s.as_str()))
                .count();
            if let Some(w) = out.as_mut() {
                use std::io::Write;
                let m = crate::kernels::html::metadata(&html, url);
                let line = serde_json::json!({
                    "source": name, "id": id, "half": h, "text": text,
                    "author": m.author, "date": m.date, "site_name": m.site_name,
                    "canonical_url": m.canonical_url, "description": m.description,
                });
                writeln!(w, "{line}").map_err(BenchError::io(dump.unwrap_or(dir)))?;
            }
        }
    }
    if let Some(mut w) = out {
        use std::io::Write;
        w.flush().map_err(BenchError::io(dump.unwrap_or(dir)))?;
    }
    let rows = acc
        .into_iter()
        .map(|((source, half), (m, [tp, fp, fn_]))| {
            let snippet = (tp + fn_ > 0).then(|| {
                let p = tp as f64 / (tp + fp).max(1) as f64;
                let r = tp as f64 / (tp + fn_).max(1) as f64;
                (p, r, 2.0 * p * r / (p + r).max(1e-12))
            });
            SourceRow {
                source,
                half,
                pages: m.len(),
                shingle: shingle_prf(&m),
                snippet,
            }
        })
        .collect();
    Ok(ExtractSources {
        rows,
        pages,
        bytes,
        secs: secs.max(1e-9),
    })
}

impl std::fmt::Display for ExtractSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "mdf bench extract --sources: {} pages, {:.1} MB of HTML, one core",
            self.pages,
            self.bytes as f64 / 1e6
        )?;
        writeln!(f)?;
        writeln!(
            f,
            "| source | half | pages | shingle P | shingle R | **shingle F1** | snippet F1 |"
        )?;
        writeln!(f, "|---|---|---|---|---|---|---|")?;
        for r in &self.rows {
            let snip = r.snippet.map_or("".into(), |s| format!("{:.3}", s.2));
            writeln!(
                f,
                "| {} | {} | {} | {:.3} | {:.3} | **{:.3}** | {snip} |",
                r.source, r.half, r.pages, r.shingle.0, r.shingle.1, r.shingle.2
            )?;
        }
        for h in ["tuning", "held-out"] {
            writeln!(
                f,
                "| **macro** | {h} | | | | **{:.3}** | |",
                self.macro_f1(h)
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "{:.0} pages/s, {:.1} MB/s of HTML (extraction only)",
            self.pages as f64 / self.secs,
            self.bytes as f64 / 1e6 / self.secs
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_python_word_runs() {
        assert_eq!(
            tokens("It's 2026—für_x, 東京!"),
            ["It", "s", "2026", "für_x", "東京"]
        );
        assert!(tokens(" .,; ").is_empty());
        // Marks and circled letters are not word characters to Python.
        assert_eq!(tokens("किताब ⓘ x"), ["क", "त", "ब", "x"]);
    }

    #[test]
    fn shingle_scores_follow_the_literature() {
        // Identical: all true positives.
        let m = shingle_match("a b c d e", "a b c d e");
        assert_eq!((m.tp, m.fp, m.fn_), (1.0, 0.0, 0.0));
        // Half the truth's shingles found, nothing extra.
        let m = shingle_match("a b c d e f g h i j", "a b c d e f");
        assert!((m.tp - 3.0 / 7.0).abs() < 1e-12 && m.fp == 0.0);
        // A short text is one shingle.
        let m = shingle_match("a b", "a b");
        assert_eq!(m.tp, 1.0);
        // Nothing predicted: no precision term, recall 0.
        let pages = [
            shingle_match("a b c d", ""),
            shingle_match("a b c d", "a b c d"),
        ];
        let (p, r, _) = shingle_prf(&pages);
        assert_eq!((p, r), (1.0, 0.5));
        // Python's zlib.crc32 of b"wcxb/0001" picks the half.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }
}
