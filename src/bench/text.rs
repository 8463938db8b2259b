//! Text benchmarks on one core: language identification accuracy and speed, main-text
//! extraction quality and speed, URL filter throughput, MinHash signatures.
use super::BenchError;
use std::time::Instant;

/// Result of a language-id accuracy run.
pub struct LangidReport {
    pub per_language: Vec<(String, f64)>,
    pub macro_accuracy: f64,
    pub total: usize,
    pub per_sec: f64,
    pub unsupported: Vec<String>,
}

/// The `<code>.txt.gz` files of labelled sentences under `dir`, by name.
fn sentence_files(dir: &std::path::Path) -> Result<Vec<(String, std::path::PathBuf)>, BenchError> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(BenchError::io(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let name = p.file_name()?.to_string_lossy().into_owned();
            Some((name.strip_suffix(".txt.gz")?.to_string(), p))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Accuracy of `kernels::lang::identify` on `<code>.txt.gz` files of labelled sentences.
pub fn langid_accuracy(
    dir: &std::path::Path,
    per_language: usize,
) -> Result<LangidReport, BenchError> {
    use std::io::{BufRead, BufReader};
    let known = crate::kernels::lang::known_codes();
    let (mut per, mut unsupported, mut total, mut secs) = (Vec::new(), Vec::new(), 0usize, 0f64);
    for (code, f) in sentence_files(dir)? {
        let code = code.as_str();
        if !known.contains(&code) {
            unsupported.push(code.to_string());
            continue;
        }
        let r = BufReader::new(flate2::read::GzDecoder::new(
            std::fs::File::open(&f).map_err(BenchError::io(&f))?,
        ));
        let lines: Vec<String> = r
            .lines()
            .take(per_language)
            .collect::<Result<_, _>>()
            .map_err(BenchError::io(&f))?;
        let t = Instant::now();
        let right = lines
            .iter()
            .filter(|l| crate::kernels::lang::identify(l).map(|x| x.0) == Some(code))
            .count();
        secs += t.elapsed().as_secs_f64();
        total += lines.len();
        per.push((code.to_string(), right as f64 / lines.len().max(1) as f64));
    }
    let macro_accuracy = per.iter().map(|x| x.1).sum::<f64>() / per.len().max(1) as f64;
    Ok(LangidReport {
        per_language: per,
        macro_accuracy,
        total,
        per_sec: total as f64 / secs.max(1e-9),
        unsupported,
    })
}

/// Writes, for each labelled sentence under `dir` (as [`langid_accuracy`] reads them)
/// and each line `{"id", "lang", "text"}` of `texts`, a JSON line `{set, id, lang,
/// got, margin, ngrams, known}` with the identifier's answer and evidence.
pub fn langid_dump(
    dir: &std::path::Path,
    per_language: usize,
    texts: Option<&std::path::Path>,
    out: &std::path::Path,
) -> Result<(), BenchError> {
    use std::io::{BufRead, BufReader, Write};
    let mut w = std::io::BufWriter::new(std::fs::File::create(out).map_err(BenchError::io(out))?);
    let mut put = |set: &str, id: String, lang: &str, text: &str| -> Result<(), BenchError> {
        let (got, e) = match crate::kernels::lang::identify_evidence(text) {
            Some((l, e)) => (Some(l), Some(e)),
            None => (None, None),
        };
        let line = serde_json::json!({
            "set": set, "id": id, "lang": lang, "got": got,
            "margin": e.map(|e| if e.margin.is_finite() { e.margin } else { 1e9 }),
            "ngrams": e.map(|e| e.ngrams), "known": e.map(|e| e.known),
            "fit": e.map(|e| e.fit), "udhr": e.map(|e| e.udhr),
        });
        writeln!(w, "{line}").map_err(BenchError::io(out))
    };
    for (code, f) in sentence_files(dir)? {
        let r = BufReader::new(flate2::read::GzDecoder::new(
            std::fs::File::open(&f).map_err(BenchError::io(&f))?,
        ));
        for (i, l) in r.lines().take(per_language).enumerate() {
            put(
                "sentences",
                format!("{code}/{i}"),
                &code,
                &l.map_err(BenchError::io(&f))?,
            )?;
        }
    }
    if let Some(t) = texts {
        let r = BufReader::new(std::fs::File::open(t).map_err(BenchError::io(t))?);
        for l in r.lines() {
            let v: serde_json::Value = serde_json::from_str(&l.map_err(BenchError::io(t))?)
                .map_err(|e| BenchError::Input(format!("{}: {e}", t.display())))?;
            let s = |k: &str| v[k].as_str().unwrap_or("").to_string();
            put("pages", s("id"), &s("lang"), &s("text"))?;
        }
    }
    w.flush().map_err(BenchError::io(out))
}

/// Result of an extraction quality run.
pub struct ExtractReport {
    pub pages: usize,
    pub bytes: usize,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub secs: f64,
}

/// Snippet precision/recall/F1 of `kernels::html::extract` on a trafilatura-style
/// evaluation set: a "with" snippet found is a true positive, missing a false negative;
/// a "without" snippet found is a false positive.
pub fn extract_quality(dev: &std::path::Path, limit: usize) -> Result<ExtractReport, BenchError> {
    use std::io::Read;
    let eval_path = dev.join("evaldata.json");
    let eval: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&eval_path).map_err(BenchError::io(&eval_path))?)
            .map_err(|e| BenchError::Input(format!("{}: {e}", eval_path.display())))?;
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    // MDF_BENCH_MISSES=1: each missed snippet and each boilerplate one kept, for tuning.
    let show = std::env::var_os("MDF_BENCH_MISSES").is_some();
    // MDF_BENCH_DUMP=<dir>: each page's extracted text as <dir>/<file>.txt.
    let dump = std::env::var_os("MDF_BENCH_DUMP").map(std::path::PathBuf::from);
    let (mut tp, mut fp, mut fn_, mut pages, mut bytes, mut secs) =
        (0usize, 0usize, 0usize, 0usize, 0usize, 0f64);
    for (url, e) in eval
        .as_object()
        .ok_or_else(|| BenchError::Input("evaldata.json is not a map".into()))?
        .iter()
        .take(limit)
    {
        let Some(file) = e["file"].as_str() else {
            continue;
        };
        let path = dev.join("html").join(format!("{file}.gz"));
        let Ok(f) = std::fs::File::open(&path) else {
            continue;
        };
        let mut raw = Vec::new();
        flate2::read::MultiGzDecoder::new(f)
            .read_to_end(&mut raw)
            .map_err(BenchError::io(&path))?;
        let html = crate::kernels::http::decode_text(&raw, None, Some(url)).text;
        let t = Instant::now();
        let text = crate::kernels::html::extract(&html, std::time::Duration::from_secs(10))
            .map(|x| x.text)
            .unwrap_or_default();
        secs += t.elapsed().as_secs_f64();
        if let Some(d) = &dump {
            std::fs::create_dir_all(d).map_err(BenchError::io(d))?;
            let out = d.join(format!("{file}.txt"));
            std::fs::write(&out, &text).map_err(BenchError::io(&out))?;
        }
        let text = norm(&text);
        pages += 1;
        bytes += html.len();
        for s in e["with"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str())
        {
            if text.contains(&norm(s)) {
                tp += 1
            } else {
                fn_ += 1;
                if show {
                    eprintln!("MISS {file}: {s}");
                }
            }
        }
        for s in e["without"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str())
        {
            if text.contains(&norm(s)) {
                fp += 1;
                if show {
                    eprintln!("KEPT {file}: {s}");
                }
            }
        }
    }
    let precision = tp as f64 / (tp + fp).max(1) as f64;
    let recall = tp as f64 / (tp + fn_).max(1) as f64;
    Ok(ExtractReport {
        pages,
        bytes,
        precision,
        recall,
        f1: 2.0 * precision * recall / (precision + recall).max(1e-9),
        secs: secs.max(1e-9),
    })
}

/// Result of an extraction speed run.
pub struct ExtractSpeed {
    pub pages: usize,
    pub bytes: usize,
    /// Seconds of the fastest of three passes.
    pub secs: f64,
}

/// Extraction speed on every HTML file under `dir`, fastest of three passes.
/// MDF_BENCH_DUMP=<dir> writes each page's text as `<n>.txt` (files in path order)
/// to compare two builds.
pub fn extract_speed(dir: &std::path::Path) -> Result<ExtractSpeed, BenchError> {
    fn walk(d: &std::path::Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
        for e in std::fs::read_dir(d)? {
            let p = e?.path();
            if p.is_dir() {
                walk(&p, out)?;
            } else if p.extension().is_some_and(|x| x == "html" || x == "htm") {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut paths = Vec::new();
    walk(dir, &mut paths).map_err(BenchError::io(dir))?;
    paths.sort();
    let docs: Vec<String> = paths
        .iter()
        .map(|p| {
            let raw = std::fs::read(p).map_err(BenchError::io(p))?;
            Ok(crate::kernels::http::decode_text(&raw, None, None)
                .text
                .into_owned())
        })
        .collect::<Result<_, BenchError>>()?;
    let bytes = docs.iter().map(String::len).sum();
    let budget = std::time::Duration::from_secs(10);
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        for d in &docs {
            std::hint::black_box(crate::kernels::html::extract(d, budget).ok());
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    if let Some(out) = std::env::var_os("MDF_BENCH_DUMP").map(std::path::PathBuf::from) {
        std::fs::create_dir_all(&out).map_err(BenchError::io(&out))?;
        for (i, d) in docs.iter().enumerate() {
            let x = crate::kernels::html::extract(d, budget).unwrap_or_default();
            let title = x.title.unwrap_or_default();
            let file = out.join(format!("{i}.txt"));
            std::fs::write(&file, format!("{title}\n\n{}", x.text))
                .map_err(BenchError::io(&file))?;
        }
    }
    Ok(ExtractSpeed {
        pages: docs.len(),
        bytes,
        secs: best.max(1e-9),
    })
}

impl std::fmt::Display for ExtractSpeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "mdf bench extract: {} pages, {:.1} MB of HTML, one core, fastest of 3",
            self.pages,
            self.bytes as f64 / 1e6
        )?;
        writeln!(f)?;
        writeln!(f, "| measure | value |")?;
        writeln!(f, "|---|---|")?;
        writeln!(
            f,
            "| pages/s (extraction only) | {:.0} |",
            self.pages as f64 / self.secs
        )?;
        writeln!(
            f,
            "| MB/s of HTML | {:.1} |",
            self.bytes as f64 / 1e6 / self.secs
        )?;
        Ok(())
    }
}

impl std::fmt::Display for ExtractReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "mdf bench extract: {} pages, {:.1} MB of HTML, one core",
            self.pages,
            self.bytes as f64 / 1e6
        )?;
        writeln!(f)?;
        writeln!(f, "| measure | value |")?;
        writeln!(f, "|---|---|")?;
        writeln!(f, "| precision | {:.3} |", self.precision)?;
        writeln!(f, "| recall | {:.3} |", self.recall)?;
        writeln!(f, "| **F1** | **{:.3}** |", self.f1)?;
        writeln!(
            f,
            "| pages/s (extraction only) | {:.0} |",
            self.pages as f64 / self.secs
        )?;
        writeln!(
            f,
            "| MB/s of HTML | {:.1} |",
            self.bytes as f64 / 1e6 / self.secs
        )?;
        Ok(())
    }
}

impl std::fmt::Display for LangidReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "mdf bench langid: {} languages known to the detector, {} sentences",
            self.per_language.len(),
            self.total
        )?;
        writeln!(f)?;
        writeln!(f, "| language | accuracy |")?;
        writeln!(f, "|---|---|")?;
        for (l, a) in &self.per_language {
            writeln!(f, "| {l} | {a:.3} |")?;
        }
        writeln!(
            f,
            "| **all (macro average)** | **{:.3}** |",
            self.macro_accuracy
        )?;
        writeln!(f, "| sentences/s, one core | {:.0} |", self.per_sec)?;
        if !self.unsupported.is_empty() {
            writeln!(
                f,
                "\nnot supported by the detector (not scored): {}",
                self.unsupported.join(", ")
            )?;
        }
        Ok(())
    }
}

/// URL filter throughput on one core with a real block list loaded: `n` URLs, one
/// in ten on a listed domain.
pub fn url_filter(
    blocklist: &std::path::Path,
    words: Option<&std::path::Path>,
    n: usize,
) -> Result<UrlFilterReport, BenchError> {
    use crate::kernels::url::{ListKind, UrlBlocklist, list_lines};
    let bytes = std::fs::read(blocklist).map_err(BenchError::io(blocklist))?;
    let t0 = Instant::now();
    let mut b = UrlBlocklist::new(2);
    let mut sample = Vec::new();
    let mut i = 0usize;
    list_lines(&bytes, ListKind::Domains, &[], |d| {
        b.add_domain(d);
        if i.is_multiple_of(997) {
            sample.push(d.to_string());
        }
        i += 1;
    })
    .map_err(BenchError::step("reading the block list"))?;
    list_lines(&bytes, ListKind::Urls, &[], |u| b.add_url(u))
        .map_err(BenchError::step("reading the block list"))?;
    if let Some(w) = words {
        let read = |f: &str| {
            let p = w.join(f);
            std::fs::read(&p).map_err(BenchError::io(&p))
        };
        list_lines(&read("banned_words.txt")?, ListKind::Domains, &[], |l| {
            b.add_banned_word(l)
        })
        .map_err(BenchError::step("reading the block list"))?;
        list_lines(
            &read("soft_banned_words.txt")?,
            ListKind::Domains,
            &[],
            |l| b.add_soft_word(l),
        )
        .map_err(BenchError::step("reading the block list"))?;
        let text = String::from_utf8_lossy(&read("banned_subwords.txt")?).into_owned();
        b.set_subwords(text.lines())
            .map_err(BenchError::step("reading the block list"))?;
    }
    b.seal();
    let t_load = t0.elapsed();
    // 90% ordinary URLs, 10% on listed domains (with a subdomain, so the walk runs).
    let urls: Vec<String> = (0..n)
        .map(|k| {
            if k % 10 == 0 {
                format!("https://www.{}/page/{k}.html", sample[k % sample.len()])
            } else {
                format!(
                    "https://blog{}.example{}.com/2024/05/article-about-topic-{k}?ref=home",
                    k % 977,
                    k % 31
                )
            }
        })
        .collect();
    let refs: Vec<Option<&str>> = urls.iter().map(|u| Some(u.as_str())).collect();
    let t1 = Instant::now();
    let mut blocked = 0usize;
    for chunk in refs.chunks(4096) {
        blocked += b.check_serial(chunk).iter().filter(|v| v.is_some()).count();
    }
    let secs = t1.elapsed().as_secs_f64();
    Ok(UrlFilterReport {
        domains: b.domain_count(),
        load_secs: t_load.as_secs_f64(),
        urls: n,
        blocked,
        words: words.is_some(),
        secs,
    })
}

/// What `mdf bench url-filter` measured.
pub struct UrlFilterReport {
    pub domains: usize,
    /// Seconds to load the lists (decompress + hash).
    pub load_secs: f64,
    pub urls: usize,
    pub blocked: usize,
    /// Whether the word lists were loaded too.
    pub words: bool,
    pub secs: f64,
}

/// What `mdf bench minhash` measured.
pub struct MinhashReport {
    pub docs: usize,
    pub bytes: usize,
    pub keys: usize,
    pub secs: f64,
}

impl std::fmt::Display for UrlFilterReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "mdf bench url-filter: {} domains loaded, one core",
            self.domains
        )?;
        writeln!(f)?;
        writeln!(f, "| measure | value |")?;
        writeln!(f, "|---|---|")?;
        writeln!(
            f,
            "| list load (decompress + hash) | {:.2} s |",
            self.load_secs
        )?;
        writeln!(
            f,
            "| URLs checked | {} ({} blocked) |",
            self.urls, self.blocked
        )?;
        writeln!(
            f,
            "| word lists | {} |",
            if self.words {
                "banned, soft, subwords"
            } else {
                "none"
            }
        )?;
        writeln!(
            f,
            "| throughput, one core | {:.2} M URLs/s |",
            self.urls as f64 / self.secs / 1e6
        )?;
        Ok(())
    }
}

/// MinHash signatures and band keys on one core (datatrove's defaults: 5-grams,
/// 14 × 8) over the `text` field of a JSONL file.
pub fn minhash(jsonl: &std::path::Path) -> Result<MinhashReport, BenchError> {
    let texts: Vec<String> = std::fs::read_to_string(jsonl)
        .map_err(BenchError::io(jsonl))?
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["text"].as_str().map(str::to_string))
        .collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    let m = crate::kernels::minhash::MinHasher::default_params();
    let t = Instant::now();
    let mut keys = 0usize;
    for x in &texts {
        let sig = m.signature(x);
        keys += m.band_keys(&sig).len();
    }
    let secs = t.elapsed().as_secs_f64();
    Ok(MinhashReport {
        docs: texts.len(),
        bytes,
        keys,
        secs,
    })
}

impl std::fmt::Display for MinhashReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "mdf bench minhash: {} docs, {:.1} MB of text, 5-grams, 14 bands x 8 rows, one core",
            self.docs,
            self.bytes as f64 / 1e6
        )?;
        writeln!(f)?;
        writeln!(f, "| measure | value |")?;
        writeln!(f, "|---|---|")?;
        writeln!(f, "| docs/s | {:.0} |", self.docs as f64 / self.secs)?;
        writeln!(
            f,
            "| MB/s of text | {:.1} |",
            self.bytes as f64 / self.secs / 1e6
        )?;
        writeln!(f, "| band keys | {} |", self.keys)?;
        Ok(())
    }
}
