//! fastText prediction speed on one core (`mdf bench fasttext`): mdf's predictor on a
//! model and a file of lines, fastest of three passes; with labelled sentences
//! (`<iso639-1>.txt.gz`), the language identification accuracy and speed of the
//! model (lid.176: its labels are ISO 639-1 codes) beside the built-in identifier.
//! scripts/bench-fasttext.py runs it beside the fastText C++ library.
use super::BenchError;
use crate::kernels::fasttext::Model;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::Instant;

pub struct FastTextReport {
    pub model: String,
    pub lines: usize,
    pub k: usize,
    pub lines_per_sec: f64,
    /// Per language-id engine: (name, macro accuracy, sentences/s), over `languages`.
    pub langid: Vec<(String, f64, f64)>,
    pub languages: usize,
    pub sentences: usize,
}

/// Times `model` on every line of `lines` (top `k`, one thread), and with `langid`
/// (a directory of labelled sentences, `per_language` each) compares it with the
/// built-in identifier on the languages both know.
pub fn fasttext(
    model: &Path,
    lines: &Path,
    k: usize,
    langid: Option<&Path>,
    per_language: usize,
) -> Result<FastTextReport, BenchError> {
    let bytes = std::fs::read(model).map_err(BenchError::io(model))?;
    let m = Model::from_bytes(&bytes)
        .map_err(|e| BenchError::Input(format!("{}: {e}", model.display())))?;
    let text = std::fs::read_to_string(lines).map_err(BenchError::io(lines))?;
    let lines_v: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        for l in &lines_v {
            m.predict_into(l.as_bytes(), k, 0.0, &mut out);
            std::hint::black_box(&out);
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    let mut report = FastTextReport {
        model: model
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned(),
        lines: lines_v.len(),
        k,
        lines_per_sec: lines_v.len() as f64 / best.max(1e-9),
        langid: vec![],
        languages: 0,
        sentences: 0,
    };
    if let Some(dir) = langid {
        langid_side_by_side(&m, dir, per_language, &mut report)?;
    }
    Ok(report)
}

/// A language identifier: text → its language code.
type Engine<'a> = Box<dyn FnMut(&str) -> Option<String> + 'a>;

fn langid_side_by_side(
    m: &Model,
    dir: &Path,
    per_language: usize,
    report: &mut FastTextReport,
) -> Result<(), BenchError> {
    let known = crate::kernels::lang::known_codes();
    let labels: Vec<&str> = m
        .labels()
        .iter()
        .map(|l| l.strip_prefix("__label__").unwrap_or(l))
        .collect();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(BenchError::io(dir))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    files.sort();
    let mut sets = Vec::new();
    for f in files {
        let name = f
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let Some(code) = name.strip_suffix(".txt.gz") else {
            continue;
        };
        if !known.contains(&code) || !labels.contains(&code) {
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
        sets.push((code.to_string(), lines));
    }
    report.languages = sets.len();
    report.sentences = sets.iter().map(|s| s.1.len()).sum();
    let mut out = Vec::new();
    let mut engines: Vec<(String, Engine)> = vec![
        (
            "built-in".into(),
            Box::new(|t: &str| crate::kernels::lang::identify(t).map(|x| x.0.to_string())),
        ),
        (
            format!("fastText {}", report.model),
            Box::new(|t: &str| {
                m.predict_text(t, 1, 0.0, &mut out);
                out.first().map(|p| labels[p.label as usize].to_string())
            }),
        ),
    ];
    for (name, f) in engines.iter_mut() {
        let (mut acc, mut secs) = (0.0, 0.0);
        for (code, lines) in &sets {
            let t = Instant::now();
            let right = lines
                .iter()
                .filter(|l| f(l).as_deref() == Some(code.as_str()))
                .count();
            secs += t.elapsed().as_secs_f64();
            acc += right as f64 / lines.len().max(1) as f64;
        }
        report.langid.push((
            name.clone(),
            acc / sets.len().max(1) as f64,
            report.sentences as f64 / f64::max(secs, 1e-9),
        ));
    }
    Ok(())
}

impl std::fmt::Display for FastTextReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "| predictor | model | lines | k | lines/s (one core) | µs/line |"
        )?;
        writeln!(f, "|---|---|---:|---:|---:|---:|")?;
        writeln!(
            f,
            "| mdf | {} | {} | {} | {:.0} | {:.2} |",
            self.model,
            self.lines,
            self.k,
            self.lines_per_sec,
            1e6 / self.lines_per_sec
        )?;
        if !self.langid.is_empty() {
            writeln!(f)?;
            writeln!(
                f,
                "Language identification on {} sentences of {} languages both engines know:",
                self.sentences, self.languages
            )?;
            writeln!(f)?;
            writeln!(
                f,
                "| identifier | macro accuracy | sentences/s (one core) |"
            )?;
            writeln!(f, "|---|---:|---:|")?;
            for (name, acc, speed) in &self.langid {
                writeln!(f, "| {name} | {acc:.4} | {speed:.0} |")?;
            }
        }
        Ok(())
    }
}
