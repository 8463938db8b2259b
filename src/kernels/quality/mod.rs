//! Document quality heuristics with their published default thresholds: Gopher
//! quality and Gopher repetition (Rae et al. 2021, as datatrove implements them) and
//! FineWeb's line-level rules (Penedo et al. 2024). Each check returns the rule that
//! fired, named as datatrove names it, so rejects say exactly why.
use std::sync::LazyLock;

use aho_corasick::AhoCorasick;

use super::{FastMap, FastSet};

/// Occurrences of a byte in a text.
fn count_byte(text: &str, b: u8) -> usize {
    memchr::memchr_iter(b, text.as_bytes()).count()
}

/// Occurrences of a substring in a text (non-overlapping, as `str::matches`).
fn count_str(text: &str, pat: &str) -> usize {
    memchr::memmem::find_iter(text.as_bytes(), pat.as_bytes()).count()
}

/// Punctuation cut off a white-space token's ends when splitting words: ASCII
/// punctuation, datatrove's `PUNCTUATION_SET` (`„`, CJK and other scripts' marks) and
/// the openers spaCy cuts as prefixes (`‘`, `¿`, `¡`, `·`).
fn is_punct(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation();
    }
    matches!(c, '‘' | '¿' | '¡' | '·') || segment::symbol(c)
}

/// Maximal runs of non-whitespace, as `str::split_whitespace` gives them, found
/// byte by byte ([`super::text::whitespace_at`]).
struct Tokens<'a> {
    text: &'a str,
    i: usize,
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a str;

    #[inline]
    fn next(&mut self) -> Option<&'a str> {
        let (text, b) = (self.text, self.text.as_bytes());
        let mut start = self.i;
        let mut i = self.i;
        while i < b.len() {
            let ws = super::text::whitespace_at(text, i);
            if ws == 0 {
                i += 1;
                continue;
            }
            if start < i {
                self.i = i + ws;
                return Some(&text[start..i]);
            }
            i += ws;
            start = i;
        }
        self.i = b.len();
        (start < b.len()).then(|| &text[start..])
    }
}

fn tokens(text: &str) -> Tokens<'_> {
    Tokens { text, i: 0 }
}

/// A token's word pieces: leading punctuation, the word, trailing punctuation (each
/// `None` when absent). A token of punctuation only is one leading piece; the middle
/// piece, when present, starts and ends with a non-punctuation character.
#[inline]
fn pieces(tok: &str) -> [Option<&str>; 3] {
    let b = tok.as_bytes();
    // An ASCII first (last) byte is the whole first (last) character.
    let start = if b[0] < 0x80 && !b[0].is_ascii_punctuation() {
        Some(0)
    } else {
        tok.char_indices()
            .find(|&(_, c)| !is_punct(c))
            .map(|(i, _)| i)
    };
    let Some(start) = start else {
        return [Some(tok), None, None];
    };
    let last = b[b.len() - 1];
    let end = if last < 0x80 && !last.is_ascii_punctuation() {
        tok.len()
    } else {
        tok.char_indices()
            .rev()
            .find(|&(_, c)| !is_punct(c))
            .map(|(i, c)| i + c.len_utf8())
            .unwrap_or(tok.len())
    };
    [
        (start > 0).then(|| &tok[..start]),
        Some(&tok[start..end]),
        (end < tok.len()).then(|| &tok[end..]),
    ]
}

/// Calls `f` with every word of the white-space split, in order: each token's pieces
/// (`pieces`).
#[inline]
fn for_each_word<'a>(text: &'a str, mut f: impl FnMut(&'a str)) {
    for tok in tokens(text) {
        for w in pieces(tok).into_iter().flatten() {
            f(w);
        }
    }
}

/// Word tokens in the manner of a word tokenizer, fast: whitespace-separated, with
/// leading and trailing punctuation split off as tokens of their own (datatrove drops
/// the white-space tokens spaCy makes, so there are none here either).
pub fn words(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for_each_word(text, |w| out.push(w));
    out
}

/// The words of `text` as `split` cuts them.
pub fn words_by(text: &str, split: WordSplit) -> Vec<&str> {
    let mut out = Vec::new();
    segment::split_words(text, split, &mut out);
    out
}

/// Splits at runs of at least `min` newlines.
fn split_runs(text: &str, min: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let (mut start, mut i) = (0, 0);
    while i < b.len() {
        if b[i] == b'\n' {
            let mut j = i;
            while j < b.len() && b[j] == b'\n' {
                j += 1;
            }
            if j - i >= min {
                out.push(&text[start..i]);
                start = j;
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out.push(&text[start..]);
    out
}

// One file per rule family; their items are this module's.
mod c4;
mod fineweb;
mod gopher;
mod punct_tables;
pub mod segment;
mod spacy;
mod spacy_tables;
pub use c4::*;
pub use fineweb::*;
pub use gopher::*;
pub use segment::WordSplit;

#[cfg(test)]
mod tests;
