//! Benchmark decontamination by word n-grams, normalised and tokenized as datatrove
//! 0.10's `datatrove.pipeline.decont` does it for English, so the same documents are
//! flagged: [`simplify`] is its `simplify_text` (lowercase, digit runs as `0`, its
//! punctuation list as spaces, whitespace collapsed, diacritics removed), [`words`]
//! cuts the result as spaCy's English tokenizer does (from tables probed out of spaCy
//! itself, `tables.rs`), and an [`Index`] holds the 64-bit hashes of every n-gram of
//! every benchmark item. A document is contaminated when one of its n-grams is in the
//! index. Pure: the operator (`ops::decontaminate`) reads the benchmark files.
mod tables;

use regex::Regex;
use std::collections::HashMap;
use std::sync::OnceLock;
use unicode_normalization::UnicodeNormalization;
use xxhash_rust::xxh3::xxh3_64;

fn in_ranges(c: char, ranges: &[(char, char)]) -> bool {
    ranges
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// Python's `str.isspace` (what `re`'s `\s` and `str.strip` use on text).
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn numbers() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"\p{Nd}+(?:[.,،٫⎖⎗⎘]\p{Nd}+)?").expect("numbers"))
}

fn marks() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"\p{Mn}+").expect("marks"))
}

/// datatrove's `simplify_text` with its default `TextNormConfig`, step for step.
pub fn simplify(text: &str) -> String {
    let lower = text.to_lowercase();
    let numbered = numbers().replace_all(&lower, "0");
    // Punctuation to spaces, then runs of whitespace to one space, ends stripped.
    let mut spaced = String::with_capacity(numbered.len());
    let mut pending = false;
    for c in numbered.chars() {
        let blank = py_space(c) || in_ranges(c, tables::PUNCTUATION);
        if blank {
            pending = !spaced.is_empty();
        } else {
            if pending {
                spaced.push(' ');
                pending = false;
            }
            spaced.push(c);
        }
    }
    if spaced.is_ascii() {
        return spaced;
    }
    let nfd: String = spaced.nfd().collect();
    let bare = marks().replace_all(&nfd, "");
    bare.trim_matches(py_space).to_string()
}

/// spaCy's special cases, and the longest key: a longer string is never looked up
/// (hashing it on every step of peeling a long run of affixes would be quadratic).
struct Specials {
    map: HashMap<&'static str, &'static [&'static str]>,
    longest: usize,
}

impl Specials {
    fn get(&self, s: &str) -> Option<&&'static [&'static str]> {
        if s.len() > self.longest {
            return None;
        }
        self.map.get(s)
    }
    fn contains_key(&self, s: &str) -> bool {
        self.get(s).is_some()
    }
}

fn specials() -> &'static Specials {
    static S: OnceLock<Specials> = OnceLock::new();
    S.get_or_init(|| Specials {
        map: tables::SPECIALS.iter().copied().collect(),
        longest: tables::SPECIALS
            .iter()
            .map(|(k, _)| k.len())
            .max()
            .unwrap_or(0),
    })
}

fn first_len(s: &str, set: &[(char, char)]) -> usize {
    match s.chars().next() {
        Some(c) if in_ranges(c, set) => c.len_utf8(),
        _ => 0,
    }
}

/// The byte length of the suffix spaCy's suffix search finds at the end of `s`: the
/// leftmost start at which a suffix reaches the end (a unit or currency after an
/// ASCII digit, or one suffix character).
fn suffix_len(s: &str) -> usize {
    // Only the last few characters can start a suffix (the longest is a unit of a
    // few bytes): scanning from the start would make peeling a long run of suffix
    // characters (`★★★…`) quadratic.
    let longest = tables::AFTER_DIGIT
        .iter()
        .map(|u| u.len())
        .max()
        .unwrap_or(0)
        .max(4);
    let mut from = s.len().saturating_sub(longest);
    while !s.is_char_boundary(from) {
        from -= 1;
    }
    for (p, _) in s[from..].char_indices().map(|(i, c)| (i + from, c)) {
        let rest = &s[p..];
        let after_digit = s[..p].ends_with(|c: char| c.is_ascii_digit());
        if after_digit && tables::AFTER_DIGIT.contains(&rest) {
            return rest.len();
        }
        let mut cs = rest.chars();
        if let (Some(c), None) = (cs.next(), cs.next())
            && in_ranges(c, tables::SUFFIX)
        {
            return rest.len();
        }
    }
    0
}

/// Appends the words of one space-free span, as spaCy's tokenizer splits it: special
/// cases, then prefixes and suffixes peeled alternately (a special case ends the
/// peeling), then infixes.
fn split_span<'a>(span: &'a str, out: &mut Vec<&'a str>) {
    let sp = specials();
    if let Some(parts) = sp.get(span) {
        push_parts(span, parts, out);
        return;
    }
    let mut prefixes: Vec<&str> = Vec::new();
    let mut suffixes: Vec<&str> = Vec::new();
    let mut s = span;
    let mut last = usize::MAX;
    while !s.is_empty() && s.len() != last {
        if sp.contains_key(s) {
            break;
        }
        last = s.len();
        let pre = first_len(s, tables::PREFIX);
        if pre != 0 {
            let rest = &s[pre..];
            if !rest.is_empty() && sp.contains_key(rest) {
                prefixes.push(&s[..pre]);
                s = rest;
                break;
            }
        }
        let suf = suffix_len(&s[pre..]);
        if suf != 0 {
            let rest = &s[..s.len() - suf];
            if !rest.is_empty() && sp.contains_key(rest) {
                suffixes.push(&s[s.len() - suf..]);
                s = rest;
                break;
            }
        }
        if pre != 0 && suf != 0 && pre + suf <= s.len() {
            prefixes.push(&s[..pre]);
            suffixes.push(&s[s.len() - suf..]);
            s = &s[pre..s.len() - suf];
        } else if pre != 0 {
            prefixes.push(&s[..pre]);
            s = &s[pre..];
        } else if suf != 0 {
            suffixes.push(&s[s.len() - suf..]);
            s = &s[..s.len() - suf];
        }
        if !s.is_empty() && sp.contains_key(s) {
            break;
        }
    }
    out.extend(prefixes);
    if !s.is_empty() {
        if let Some(parts) = sp.get(s) {
            push_parts(s, parts, out);
        } else {
            // Infixes: each one a word, the text between them words; one at the very
            // start does not split.
            let mut start = 0;
            for (i, c) in s.char_indices() {
                if i == 0 || !in_ranges(c, tables::INFIX) {
                    continue;
                }
                if i != start {
                    out.push(&s[start..i]);
                }
                out.push(&s[i..i + c.len_utf8()]);
                start = i + c.len_utf8();
            }
            if start < s.len() {
                out.push(&s[start..]);
            }
        }
    }
    out.extend(suffixes.into_iter().rev());
}

/// Appends a special case's parts as slices of `s` (they concatenate to it).
pub(crate) fn push_parts<'a>(s: &'a str, parts: &[&str], out: &mut Vec<&'a str>) {
    let mut at = 0;
    for p in parts {
        out.push(&s[at..at + p.len()]);
        at += p.len();
    }
}

/// The words of simplified text, as datatrove's English word tokenizer (spaCy's) cuts
/// them; empty ones dropped.
pub fn words<'a>(simplified: &'a str, out: &mut Vec<&'a str>) {
    for span in simplified.split(' ').filter(|s| !s.is_empty()) {
        split_span(span, out);
    }
}

/// The hash of each word.
fn word_hashes(words: &[&str]) -> Vec<u64> {
    words.iter().map(|w| xxh3_64(w.as_bytes())).collect()
}

/// Calls `f(position, hash)` for every n-gram of `n` words: the 64-bit hash of its
/// words' own hashes, so equal word sequences hash alike whatever the text around
/// them.
fn for_each_ngram(hashes: &[u64], n: usize, mut f: impl FnMut(usize, u64)) {
    if n == 0 || hashes.len() < n {
        return;
    }
    let mut buf = Vec::with_capacity(n * 8);
    for (i, w) in hashes.windows(n).enumerate() {
        buf.clear();
        for h in w {
            buf.extend_from_slice(&h.to_le_bytes());
        }
        f(i, xxh3_64(&buf));
    }
}

/// One benchmark item of an [`Index`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Index into the index's benchmark names.
    pub benchmark: u32,
    pub id: String,
}

/// The n-grams of a set of benchmarks' items.
#[derive(Debug, Default)]
pub struct Index {
    n: usize,
    pub benchmarks: Vec<String>,
    pub items: Vec<Item>,
    /// n-gram hash → the first item holding it.
    first: super::FastMap<u64, u32>,
    /// The further items of n-grams more than one item holds.
    more: super::FastMap<u64, Vec<u32>>,
}

/// What one benchmark added to an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Added {
    pub items: u64,
    /// Items with fewer than `n` words: no n-gram, never matched.
    pub too_short: u64,
    pub ngrams: u64,
}

impl Index {
    pub fn new(n: usize) -> Index {
        Index {
            n,
            ..Default::default()
        }
    }

    pub fn n(&self) -> usize {
        self.n
    }

    /// Distinct n-grams held.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    /// Starts a benchmark; its items follow with [`Index::add`].
    pub fn benchmark(&mut self, name: &str) -> u32 {
        self.benchmarks.push(name.to_string());
        (self.benchmarks.len() - 1) as u32
    }

    /// Adds an item whose text is `segments` in order (a question, then its answer):
    /// every n-gram of their words run together, those across a boundary too (as
    /// datatrove's indexer with `find_query_ngrams` and `find_overlap_ngrams`).
    /// Returns the item's n-gram count.
    pub fn add(&mut self, benchmark: u32, id: String, segments: &[&str]) -> u64 {
        let simplified: Vec<String> = segments.iter().map(|s| simplify(s)).collect();
        let mut ws = Vec::new();
        for s in &simplified {
            words(s, &mut ws);
        }
        let item = self.items.len() as u32;
        self.items.push(Item { benchmark, id });
        let mut count = 0;
        let (first, more) = (&mut self.first, &mut self.more);
        for_each_ngram(&word_hashes(&ws), self.n, |_, h| {
            count += 1;
            match first.get(&h) {
                None => {
                    first.insert(h, item);
                }
                Some(&f) if f == item => {}
                Some(_) => {
                    let v = more.entry(h).or_default();
                    if v.last() != Some(&item) {
                        v.push(item);
                    }
                }
            }
        });
        count
    }

    /// The matches of one document: each item sharing an n-gram with it, once, with
    /// the first such n-gram (its normalised words), in the order they occur.
    pub fn matches(&self, text: &str) -> Vec<Match> {
        if self.first.is_empty() {
            return vec![];
        }
        let simplified = simplify(text);
        let mut ws = Vec::new();
        words(&simplified, &mut ws);
        let mut out: Vec<Match> = Vec::new();
        let mut seen = super::FastSet::default();
        for_each_ngram(&word_hashes(&ws), self.n, |i, h| {
            let Some(&f) = self.first.get(&h) else {
                return;
            };
            let extra = self.more.get(&h).map(Vec::as_slice).unwrap_or(&[]);
            for &item in std::iter::once(&f).chain(extra) {
                if seen.insert(item) {
                    out.push(Match {
                        item,
                        ngram: ws[i..i + self.n].join(" "),
                    });
                }
            }
        });
        out
    }
}

/// A document's n-gram shared with a benchmark item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// Index into [`Index::items`].
    pub item: u32,
    /// The n-gram, as normalised words joined by spaces.
    pub ngram: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<String> {
        let s = simplify(text);
        let mut w = Vec::new();
        words(&s, &mut w);
        w.into_iter().map(str::to_string).collect()
    }

    #[test]
    fn simplify_is_datatrove_simplify_text() {
        // Expected values printed by datatrove 0.10's simplify_text.
        assert_eq!(simplify("  Hello,   World!\n"), "hello world");
        assert_eq!(simplify("It costs 3.50 or 1,000,000"), "it costs 0 or 0 0");
        assert_eq!(simplify("Café naïve Ångström"), "cafe naive angstrom");
        assert_eq!(simplify("a\u{301} b"), "a b");
        assert_eq!(simplify("x \u{301} y"), "x  y");
        assert_eq!(simplify("٣٤٥ and ５"), "0 and 0");
        assert_eq!(simplify("‘quoted’"), "‘quoted");
    }

    #[test]
    fn words_cut_as_spacy_does() {
        // Expected values printed by datatrove's English word tokenizer (spaCy 3.8).
        assert_eq!(toks("I cannot"), ["i", "can", "not"]);
        assert_eq!(toks("Don't go"), ["don", "t", "go"]);
        assert_eq!(toks("dont go"), ["do", "nt", "go"]);
        assert_eq!(toks("5km and £20m"), ["0", "km", "and", "£", "0", "m"]);
        assert_eq!(toks("30°C"), ["0", "°", "c"]);
        assert_eq!(toks("★★★"), ["★", "★", "★"]);
        assert_eq!(toks("‘dont"), ["‘", "do", "nt"]);
        assert_eq!(toks("intel® core™"), ["intel", "®", "core", "™"]);
        assert_eq!(toks("x  y"), ["x", "y"]);
        // Punctuation that only appears after the decomposition: spaCy still cuts it.
        assert_eq!(toks("if a≠b then"), ["if", "a", "=", "b", "then"]);
        assert_eq!(
            toks("x\u{37e}y"),
            ["x;y"],
            "a prefix and suffix, not an infix"
        );
    }

    #[test]
    fn long_runs_of_affix_characters_are_cut_in_linear_time() {
        let stars = "★".repeat(200_000);
        let t = std::time::Instant::now();
        assert_eq!(toks(&stars).len(), 200_000);
        let units = format!("0{}", "km".repeat(100_000));
        assert!(!toks(&units).is_empty());
        assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
    }

    #[test]
    fn special_cases_concatenate_to_their_key() {
        for (k, parts) in tables::SPECIALS {
            assert_eq!(parts.concat(), *k);
        }
    }

    #[test]
    fn index_matches_across_segments_and_reports_each_item_once() {
        let mut ix = Index::new(3);
        let b = ix.benchmark("quiz");
        assert_eq!(
            ix.add(b, "q1".into(), &["What is the", "capital of France"]),
            4
        );
        assert_eq!(ix.add(b, "q2".into(), &["two words"]), 0);
        ix.add(b, "q3".into(), &["the capital of Spain"]);
        let m = ix.matches("Tell me: WHAT is the capital of France? And the capital of Spain.");
        let got: Vec<(u32, &str)> = m.iter().map(|m| (m.item, m.ngram.as_str())).collect();
        assert_eq!(
            got,
            [(0, "what is the"), (2, "the capital of")],
            "q1 first at its first n-gram; q3 shares 'the capital of' with q1"
        );
        assert!(ix.matches("nothing in common here at all").is_empty());
    }
}
