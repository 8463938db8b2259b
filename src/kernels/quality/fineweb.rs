//! FineWeb's line-level rules (Penedo et al. 2024).
use super::*;

/// FineWeb's line rules (defaults as published).
#[derive(Debug, Clone)]
pub struct FineWeb {
    pub line_punct_thr: f64,
    pub line_punct_exclude_zero: bool,
    pub short_line_thr: f64,
    pub short_line_length: usize,
    pub char_duplicates_ratio: f64,
    pub new_line_ratio: f64,
    /// How `new_line_ratio` counts words.
    pub words: WordSplit,
}

impl Default for FineWeb {
    fn default() -> Self {
        FineWeb {
            line_punct_thr: 0.12,
            line_punct_exclude_zero: false,
            short_line_thr: 0.67,
            short_line_length: 30,
            char_duplicates_ratio: 0.01,
            new_line_ratio: 0.3,
            words: WordSplit::Whitespace,
        }
    }
}

pub fn fineweb_quality(text: &str, f: &FineWeb) -> Option<&'static str> {
    let lines: Vec<&str> = text.split('\n').filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return Some("empty");
    }
    let n = lines.len() as f64;
    let ratio = lines
        .iter()
        .filter(|l| l.chars().last().is_some_and(segment::terminal))
        .count() as f64
        / n;
    if ratio < f.line_punct_thr && !(ratio == 0.0 && f.line_punct_exclude_zero) {
        return Some("line_punct_ratio");
    }
    if lines
        .iter()
        .filter(|l| l.chars().count() <= f.short_line_length)
        .count() as f64
        / n
        > f.short_line_thr
    {
        return Some("short_line_ratio");
    }
    let chars = text.chars().filter(|&c| c != '\n').count().max(1) as f64;
    if duplicates(lines.iter().copied()).1 as f64 / chars > f.char_duplicates_ratio {
        return Some("char_dup_ratio");
    }
    let words = words_by(text, f.words).len().max(1) as f64;
    if count_byte(text, b'\n') as f64 / words > f.new_line_ratio {
        return Some("list_ratio");
    }
    None
}
