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

/// Punctuation characters (ASCII and common Unicode), for word tokenizing.
fn is_punct(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(
            c,
            '…' | '“'
                | '”'
                | '‘'
                | '’'
                | '«'
                | '»'
                | '–'
                | '—'
                | '。'
                | '、'
                | '，'
                | '！'
                | '？'
                | '：'
                | '；'
                | '（'
                | '）'
                | '「'
                | '」'
                | '¿'
                | '¡'
                | '·'
        )
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

/// Word tokens in the manner of NLTK's word tokenizer: whitespace-separated, with
/// leading and trailing punctuation split off as tokens of their own.
pub fn words(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for tok in tokens(text) {
        for w in pieces(tok).into_iter().flatten() {
            out.push(w);
        }
    }
    out
}

/// Gopher quality thresholds (defaults as published).
#[derive(Debug, Clone)]
pub struct GopherQuality {
    pub min_doc_words: Option<usize>,
    pub max_doc_words: Option<usize>,
    pub min_avg_word_length: Option<f64>,
    pub max_avg_word_length: Option<f64>,
    pub max_symbol_word_ratio: Option<f64>,
    pub max_bullet_lines_ratio: Option<f64>,
    pub max_ellipsis_lines_ratio: Option<f64>,
    pub max_non_alpha_words_ratio: Option<f64>,
    pub min_stop_words: Option<usize>,
    pub stop_words: Vec<String>,
}

impl Default for GopherQuality {
    fn default() -> Self {
        GopherQuality {
            min_doc_words: Some(50),
            max_doc_words: Some(100_000),
            min_avg_word_length: Some(3.0),
            max_avg_word_length: Some(10.0),
            max_symbol_word_ratio: Some(0.1),
            max_bullet_lines_ratio: Some(0.9),
            max_ellipsis_lines_ratio: Some(0.3),
            max_non_alpha_words_ratio: Some(0.8),
            min_stop_words: Some(2),
            stop_words: ["the", "be", "to", "of", "and", "that", "have", "with"]
                .map(String::from)
                .to_vec(),
        }
    }
}

/// The Gopher quality rules in their published order; one pass over the words
/// gathers what the word rules need.
pub fn gopher_quality(text: &str, q: &GopherQuality) -> Option<&'static str> {
    // Words, words with a non-punctuation character (by construction the middle
    // piece of a token, see `pieces`) and their characters, words with a letter,
    // and which stop words occur.
    let (mut n_words, mut n, mut chars, mut alpha) = (0usize, 0usize, 0usize, 0usize);
    let mut stop_first = [false; 256];
    for s in &q.stop_words {
        if let Some(&c) = s.as_bytes().first() {
            stop_first[c as usize] = true;
        }
    }
    let mut stop_seen = vec![false; q.stop_words.len()];
    let mut stops_found = 0usize;
    let want_stops = q.min_stop_words.unwrap_or(0);
    for tok in tokens(text) {
        let [lead, core, trail] = pieces(tok);
        n_words += usize::from(lead.is_some()) + usize::from(trail.is_some());
        for w in [lead, trail].into_iter().flatten().chain(core) {
            if stops_found < want_stops && stop_first[w.as_bytes()[0] as usize] {
                for (i, s) in q.stop_words.iter().enumerate() {
                    if !stop_seen[i] && s == w {
                        stop_seen[i] = true;
                        stops_found += 1;
                    }
                }
            }
        }
        if let Some(w) = core {
            n_words += 1;
            n += 1;
            if w.is_ascii() {
                chars += w.len();
                alpha += usize::from(w.bytes().any(|c| c.is_ascii_alphabetic()));
            } else {
                chars += w.chars().count();
                alpha += usize::from(w.chars().any(char::is_alphabetic));
            }
        }
    }
    let n_words_f = n_words.max(1) as f64;
    if q.min_doc_words.is_some_and(|m| n < m) {
        return Some("gopher_short_doc");
    }
    if q.max_doc_words.is_some_and(|m| n > m) {
        return Some("gopher_long_doc");
    }
    let avg = chars as f64 / n.max(1) as f64;
    if q.min_avg_word_length.is_some_and(|m| avg < m) {
        return Some("gopher_below_avg_threshold");
    }
    if q.max_avg_word_length.is_some_and(|m| avg > m) {
        return Some("gopher_above_avg_threshold");
    }
    if let Some(m) = q.max_symbol_word_ratio {
        if count_byte(text, b'#') as f64 / n_words_f > m {
            return Some("gopher_too_many_hashes");
        }
        if (count_str(text, "...") + count_str(text, "…")) as f64 / n_words_f > m {
            return Some("gopher_too_many_ellipsis");
        }
    }
    if q.max_bullet_lines_ratio.is_some() || q.max_ellipsis_lines_ratio.is_some() {
        let (mut lines, mut bullets, mut ellipsis) = (0usize, 0usize, 0usize);
        for l in text.lines() {
            lines += 1;
            let t = l.trim_start();
            bullets += usize::from(t.starts_with('•') || t.starts_with('-'));
            let t = l.trim_end();
            ellipsis += usize::from(t.ends_with("...") || t.ends_with('…'));
        }
        let n_lines = lines.max(1) as f64;
        if q.max_bullet_lines_ratio
            .is_some_and(|m| bullets as f64 / n_lines > m)
        {
            return Some("gopher_too_many_bullets");
        }
        if q.max_ellipsis_lines_ratio
            .is_some_and(|m| ellipsis as f64 / n_lines > m)
        {
            return Some("gopher_too_many_end_ellipsis");
        }
    }
    if q.max_non_alpha_words_ratio
        .is_some_and(|m| (alpha as f64 / n_words_f) < m)
    {
        return Some("gopher_below_alpha_threshold");
    }
    if q.min_stop_words.is_some_and(|m| stops_found < m) {
        return Some("gopher_enough_stop_words");
    }
    None
}

/// Gopher repetition thresholds (defaults as published).
#[derive(Debug, Clone)]
pub struct GopherRepetition {
    pub dup_line_frac: Option<f64>,
    pub dup_para_frac: Option<f64>,
    pub dup_line_char_frac: Option<f64>,
    pub dup_para_char_frac: Option<f64>,
    pub top_n_grams: Vec<(usize, f64)>,
    pub dup_n_grams: Vec<(usize, f64)>,
}

impl Default for GopherRepetition {
    fn default() -> Self {
        GopherRepetition {
            dup_line_frac: Some(0.3),
            dup_para_frac: Some(0.3),
            dup_line_char_frac: Some(0.2),
            dup_para_char_frac: Some(0.2),
            top_n_grams: vec![(2, 0.2), (3, 0.18), (4, 0.16)],
            dup_n_grams: vec![
                (5, 0.15),
                (6, 0.14),
                (7, 0.13),
                (8, 0.12),
                (9, 0.11),
                (10, 0.10),
            ],
        }
    }
}

/// (duplicate elements, characters in duplicates) of a sequence.
fn duplicates<'a>(xs: impl IntoIterator<Item = &'a str>) -> (usize, usize) {
    let mut seen = FastSet::default();
    let (mut n, mut chars) = (0, 0);
    for x in xs {
        if !seen.insert(x) {
            n += 1;
            chars += x.chars().count();
        }
    }
    (n, chars)
}

/// A document's words as small integers (equal words, equal ids) with their
/// character counts: n-grams are then compared as word sequences (the Gopher paper's
/// definition) by hashing a few integers, and no string is built per n-gram.
struct WordIds {
    ids: Vec<u32>,
    chars: Vec<u32>,
}

impl WordIds {
    fn new(words: &[&str]) -> WordIds {
        let mut intern: FastMap<&str, u32> = FastMap::default();
        intern.reserve(words.len());
        let mut ids = Vec::with_capacity(words.len());
        let mut chars = Vec::with_capacity(words.len());
        for w in words {
            let next = intern.len() as u32;
            ids.push(*intern.entry(w).or_insert(next));
            chars.push(w.chars().count() as u32);
        }
        WordIds { ids, chars }
    }

    /// Characters of the n-gram at `i`, joined without separators.
    fn chars_of(&self, i: usize, n: usize) -> usize {
        self.chars[i..i + n].iter().map(|&c| c as usize).sum()
    }
}

/// A rolling (polynomial) hash of every window of `n` word ids: one multiply-add per
/// word instead of hashing `n` ids per window. Equal windows have equal keys; callers
/// confirm a key match by comparing the windows, so a collision never makes two
/// different n-grams count as one.
fn window_keys(ids: &[u32], n: usize) -> Vec<u64> {
    const P: u64 = 0x9E37_79B9_7F4A_7C15;
    if n == 0 || ids.len() < n {
        return Vec::new();
    }
    let top = P.wrapping_pow(n as u32 - 1);
    let v = |x: u32| x as u64 + 1;
    let mut h = ids[..n]
        .iter()
        .fold(0u64, |h, &x| h.wrapping_mul(P).wrapping_add(v(x)));
    let mut out = Vec::with_capacity(ids.len() - n + 1);
    out.push(h);
    for i in n..ids.len() {
        h = h
            .wrapping_sub(v(ids[i - n]).wrapping_mul(top))
            .wrapping_mul(P)
            .wrapping_add(v(ids[i]));
        out.push(h);
    }
    out
}

/// Characters covered by repeated word n-grams, counting non-overlapping repeats.
fn all_duplicate_chars(w: &WordIds, n: usize) -> usize {
    let keys = window_keys(&w.ids, n);
    let mut seen: FastMap<u64, u32> = FastMap::default();
    seen.reserve(keys.len());
    let same = |a: usize, b: usize| w.ids[a..a + n] == w.ids[b..b + n];
    let (mut i, mut chars) = (0, 0);
    while i < keys.len() {
        match seen.get(&keys[i]) {
            Some(&j) if same(j as usize, i) => {
                chars += w.chars_of(i, n);
                i += n;
            }
            Some(_) => i += 1, // a hash collision: a different n-gram
            None => {
                seen.insert(keys[i], i as u32);
                i += 1;
            }
        }
    }
    chars
}

fn top_name(n: usize) -> &'static str {
    match n {
        2 => "top_2_gram",
        3 => "top_3_gram",
        4 => "top_4_gram",
        _ => "top_n_gram",
    }
}

fn dup_name(n: usize) -> &'static str {
    const NAMES: [&str; 6] = [
        "duplicated_5_n_grams",
        "duplicated_6_n_grams",
        "duplicated_7_n_grams",
        "duplicated_8_n_grams",
        "duplicated_9_n_grams",
        "duplicated_10_n_grams",
    ];
    NAMES
        .get(n.wrapping_sub(5))
        .copied()
        .unwrap_or("duplicated_n_grams")
}

pub fn gopher_repetition(text: &str, r: &GopherRepetition) -> Option<&'static str> {
    let len = text.chars().count().max(1) as f64;
    let paras: Vec<&str> = split_runs(text.trim(), 2);
    let (pd, pc) = duplicates(paras.iter().copied());
    if r.dup_para_frac
        .is_some_and(|m| pd as f64 / paras.len().max(1) as f64 > m)
    {
        return Some("dup_para_frac");
    }
    if r.dup_para_char_frac.is_some_and(|m| pc as f64 / len > m) {
        return Some("dup_para_char_frac");
    }
    let lines: Vec<&str> = split_runs(text, 1);
    let (ld, lc) = duplicates(lines.iter().copied());
    if r.dup_line_frac
        .is_some_and(|m| ld as f64 / lines.len().max(1) as f64 > m)
    {
        return Some("dup_line_frac");
    }
    if r.dup_line_char_frac.is_some_and(|m| lc as f64 / len > m) {
        return Some("dup_line_char_frac");
    }
    let words = WordIds::new(&words(text));
    for &(n, frac) in &r.top_n_grams {
        if words.ids.len() < n {
            continue;
        }
        let keys = window_keys(&words.ids, n);
        let same = |a: usize, b: usize| words.ids[a..a + n] == words.ids[b..b + n];
        // key -> (count, first window with it)
        let mut counts: FastMap<u64, (usize, usize)> = FastMap::default();
        counts.reserve(keys.len());
        for (i, k) in keys.iter().enumerate() {
            let e = counts.entry(*k).or_insert((0, i));
            if e.1 == i || same(e.1, i) {
                e.0 += 1;
            }
        }
        // The most frequent n-gram (first seen wins ties, as Counter.most_common does).
        let mut best: Option<(usize, usize)> = None;
        for (i, k) in keys.iter().enumerate() {
            let (c, first) = counts[k];
            if first == i && best.is_none_or(|(_, bc)| c > bc) {
                best = Some((i, c));
            }
        }
        // Its characters as datatrove joins it: with a space between words.
        if let Some((i, c)) = best
            && ((words.chars_of(i, n) + n - 1) * c) as f64 / len > frac
        {
            return Some(top_name(n));
        }
    }
    for &(n, frac) in &r.dup_n_grams {
        if all_duplicate_chars(&words, n) as f64 / len > frac {
            return Some(dup_name(n));
        }
    }
    None
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

/// FineWeb's line rules (defaults as published).
#[derive(Debug, Clone)]
pub struct FineWeb {
    pub line_punct_thr: f64,
    pub line_punct_exclude_zero: bool,
    pub short_line_thr: f64,
    pub short_line_length: usize,
    pub char_duplicates_ratio: f64,
    pub new_line_ratio: f64,
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
        }
    }
}

/// Sentence-ending punctuation across scripts.
fn terminal(c: char) -> bool {
    matches!(
        c,
        '.' | '!'
            | '?'
            | '"'
            | '\''
            | '。'
            | '！'
            | '？'
            | '…'
            | '؟'
            | '۔'
            | '।'
            | '॥'
            | '」'
            | '』'
            | '”'
            | '’'
            | '»'
    )
}

pub fn fineweb_quality(text: &str, f: &FineWeb) -> Option<&'static str> {
    let lines: Vec<&str> = text.split('\n').filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return Some("empty");
    }
    let n = lines.len() as f64;
    let ratio = lines
        .iter()
        .filter(|l| l.chars().last().is_some_and(terminal))
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
    let words = words(text).len().max(1) as f64;
    if count_byte(text, b'\n') as f64 / words > f.new_line_ratio {
        return Some("list_ratio");
    }
    None
}

/// C4's rules (Raffel et al. 2020, as datatrove implements them): lines are dropped
/// (no terminal punctuation, fewer than 3 words, a word over 1,000 characters,
/// "javascript", cookie/privacy policy boilerplate; citation marks removed) and whole
/// documents are dropped (lorem ipsum, curly brackets, fewer than 5 sentences, a bad
/// word).
#[derive(Debug, Clone)]
pub struct C4 {
    pub min_words_per_line: usize,
    pub max_word_length: usize,
    pub min_num_sentences: usize,
    pub remove_citations: bool,
    pub filter_no_terminal_punct: bool,
    pub filter_lorem_ipsum: bool,
    pub filter_javascript: bool,
    pub filter_curly_bracket: bool,
    pub filter_policy: bool,
}

impl Default for C4 {
    fn default() -> Self {
        C4 {
            min_words_per_line: 3,
            max_word_length: 1000,
            min_num_sentences: 5,
            remove_citations: true,
            filter_no_terminal_punct: true,
            filter_lorem_ipsum: true,
            filter_javascript: true,
            filter_curly_bracket: true,
            filter_policy: true,
        }
    }
}

const POLICY: &[&str] = &[
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
];

/// Removes `[12]`, `[edit]`, `[citation needed]`.
fn strip_citations(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.contains('[') {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find('[') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let end = tail.find(']');
        let cut = end.filter(|&e| {
            let inner = &tail[1..e];
            inner.chars().all(|c| c.is_ascii_digit())
                || inner == "edit"
                || inner == "citation needed"
        });
        match cut {
            Some(e) => rest = &tail[e + 1..],
            None => {
                out.push('[');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// Sentences in a line: ends of `.`, `!` or `?` followed by a space or the end.
fn sentences(line: &str) -> usize {
    let b = line.as_bytes();
    let n = (0..b.len())
        .filter(|&i| matches!(b[i], b'.' | b'!' | b'?') && (i + 1 == b.len() || b[i + 1] == b' '))
        .count();
    n.max(1)
}

/// The line patterns of C4, matched case-insensitively in one pass: pattern 0 is
/// lorem ipsum, 1 javascript, the rest the policy phrases.
static C4_LINE_PATTERNS: LazyLock<AhoCorasick> = LazyLock::new(|| {
    let pats = ["lorem ipsum", "javascript"]
        .into_iter()
        .chain(POLICY.iter().copied());
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(pats)
        .expect("fixed patterns")
});

/// Applies C4: the cleaned text, or the rule that drops the document.
pub fn c4_quality(
    text: &str,
    c: &C4,
    bad_words: Option<&aho_corasick::AhoCorasick>,
) -> Result<String, &'static str> {
    let mut out = String::with_capacity(text.len());
    let mut n_sentences = 0;
    for raw in text.lines() {
        let line = raw.trim();
        let mut n_words = 0;
        let mut too_long = false;
        for w in line.split_whitespace() {
            n_words += 1;
            // chars <= bytes: only a long word needs its characters counted.
            if w.len() > c.max_word_length && w.chars().count() > c.max_word_length {
                too_long = true;
                break;
            }
        }
        if too_long {
            continue;
        }
        let line = if c.remove_citations {
            strip_citations(line)
        } else {
            std::borrow::Cow::Borrowed(line)
        };
        let line = line.trim();
        if c.filter_no_terminal_punct
            && (!line.ends_with(['.', '?', '!', '"', '\'']) || line.ends_with("..."))
        {
            continue;
        }
        if n_words < c.min_words_per_line {
            continue;
        }
        let (mut lorem, mut javascript, mut policy) = (false, false, false);
        for m in C4_LINE_PATTERNS.find_iter(line) {
            match m.pattern().as_usize() {
                0 => lorem = true,
                1 => javascript = true,
                _ => policy = true,
            }
        }
        if c.filter_lorem_ipsum && lorem {
            return Err("lorem_ipsum");
        }
        if c.filter_javascript && javascript {
            continue;
        }
        if c.filter_curly_bracket && line.contains('{') {
            return Err("curly_bracket");
        }
        if c.filter_policy && policy {
            continue;
        }
        n_sentences += sentences(line);
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
    }
    if n_sentences < c.min_num_sentences {
        return Err("too_few_sentences");
    }
    if let Some(ac) = bad_words {
        let lower = out.to_lowercase();
        for m in ac.find_iter(&lower) {
            let before = lower[..m.start()].chars().next_back();
            let after = lower[m.end()..].chars().next();
            if !before.is_some_and(char::is_alphanumeric)
                && !after.is_some_and(char::is_alphanumeric)
            {
                return Err("badwords");
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The tokenizer and Gopher quality rules as first written (a vector of words,
    // one pass per rule): the fused versions must agree with them.
    /// Word tokens in the manner of NLTK's word tokenizer: whitespace-separated, with
    /// leading and trailing punctuation split off as tokens of their own.
    fn reference_words(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        for tok in text.split_whitespace() {
            let start = tok
                .char_indices()
                .find(|&(_, c)| !is_punct(c))
                .map(|(i, _)| i);
            let Some(start) = start else {
                out.push(tok);
                continue;
            };
            let end = tok
                .char_indices()
                .rev()
                .find(|&(_, c)| !is_punct(c))
                .map(|(i, c)| i + c.len_utf8())
                .unwrap_or(tok.len());
            if start > 0 {
                out.push(&tok[..start]);
            }
            out.push(&tok[start..end]);
            if end < tok.len() {
                out.push(&tok[end..]);
            }
        }
        out
    }

    fn reference_gopher_quality(text: &str, q: &GopherQuality) -> Option<&'static str> {
        let words = reference_words(text);
        let n_words = words.len().max(1) as f64;
        let non_symbol: Vec<&&str> = words
            .iter()
            .filter(|w| w.chars().any(|c| !is_punct(c)))
            .collect();
        let n = non_symbol.len();
        if q.min_doc_words.is_some_and(|m| n < m) {
            return Some("gopher_short_doc");
        }
        if q.max_doc_words.is_some_and(|m| n > m) {
            return Some("gopher_long_doc");
        }
        let avg =
            non_symbol.iter().map(|w| w.chars().count()).sum::<usize>() as f64 / n.max(1) as f64;
        if q.min_avg_word_length.is_some_and(|m| avg < m) {
            return Some("gopher_below_avg_threshold");
        }
        if q.max_avg_word_length.is_some_and(|m| avg > m) {
            return Some("gopher_above_avg_threshold");
        }
        if let Some(m) = q.max_symbol_word_ratio {
            if count_byte(text, b'#') as f64 / n_words > m {
                return Some("gopher_too_many_hashes");
            }
            if (count_str(text, "...") + count_str(text, "…")) as f64 / n_words > m {
                return Some("gopher_too_many_ellipsis");
            }
        }
        let lines: Vec<&str> = text.lines().collect();
        let n_lines = lines.len().max(1) as f64;
        if let Some(m) = q.max_bullet_lines_ratio {
            let bullets = lines.iter().filter(|l| {
                let t = l.trim_start();
                t.starts_with('•') || t.starts_with('-')
            });
            if bullets.count() as f64 / n_lines > m {
                return Some("gopher_too_many_bullets");
            }
        }
        if let Some(m) = q.max_ellipsis_lines_ratio {
            let ell = lines.iter().filter(|l| {
                let t = l.trim_end();
                t.ends_with("...") || t.ends_with('…')
            });
            if ell.count() as f64 / n_lines > m {
                return Some("gopher_too_many_end_ellipsis");
            }
        }
        if let Some(m) = q.max_non_alpha_words_ratio
            && (words
                .iter()
                .filter(|w| w.chars().any(char::is_alphabetic))
                .count() as f64
                / n_words)
                < m
        {
            return Some("gopher_below_alpha_threshold");
        }
        if let Some(m) = q.min_stop_words {
            // Distinct stop words present; stops looking once there are enough.
            let mut found = 0;
            for s in &q.stop_words {
                if found >= m {
                    break;
                }
                if words.iter().any(|w| w == s) {
                    found += 1;
                }
            }
            if found < m {
                return Some("gopher_enough_stop_words");
            }
        }
        None
    }

    #[test]
    fn fused_gopher_quality_agrees_with_the_rule_by_rule_reference() {
        // Pieces that exercise every rule: punctuation around and inside words,
        // Unicode whitespace and punctuation, bullets, ellipses, hashes, digits.
        let pieces = [
            "the",
            "be",
            "to",
            "of",
            "and",
            "that",
            "have",
            "with",
            "river",
            "x",
            "—",
            "“quoted”",
            "(paren)",
            "...",
            "…",
            "#tag",
            "##",
            "- item",
            "• item",
            "123",
            "naïve",
            "word.",
            "¿qué?",
            "日本語",
            "\u{a0}",
            "\u{3000}",
            "\n",
            "\n\n",
            " ",
            "a-b",
            "'",
            "extraordinarily",
            ".,;",
            "Ünïcödé",
            "end...",
            "\t",
        ];
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |m: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % m as u64) as usize
        };
        let variants = [
            GopherQuality::default(),
            GopherQuality {
                min_doc_words: Some(5),
                min_stop_words: Some(3),
                ..GopherQuality::default()
            },
            GopherQuality {
                min_doc_words: None,
                max_symbol_word_ratio: None,
                max_bullet_lines_ratio: Some(0.2),
                max_ellipsis_lines_ratio: Some(0.1),
                max_non_alpha_words_ratio: Some(0.95),
                ..GopherQuality::default()
            },
        ];
        let mut fired = std::collections::BTreeSet::new();
        for _ in 0..3000 {
            let len = next(160);
            let mut t = String::new();
            for _ in 0..len {
                t.push_str(pieces[next(pieces.len())]);
                if next(3) > 0 {
                    t.push(' ');
                }
            }
            assert_eq!(words(&t), reference_words(&t), "{t:?}");
            for q in &variants {
                let got = gopher_quality(&t, q);
                assert_eq!(got, reference_gopher_quality(&t, q), "{t:?}");
                fired.insert(got);
            }
        }
        // The texts reached most outcomes, so the comparison covered them.
        assert!(fired.len() >= 9, "{fired:?}");
    }

    /// Varied English-like prose: `n` sentences of twelve pseudo-random words.
    fn prose(n: usize) -> String {
        let vocab = [
            "the",
            "river",
            "of",
            "quiet",
            "mountains",
            "and",
            "that",
            "city",
            "with",
            "ancient",
            "walls",
            "have",
            "seen",
            "many",
            "travellers",
            "crossing",
            "bridges",
            "under",
            "autumn",
            "skies",
            "where",
            "merchants",
            "sold",
            "spices",
            "silver",
            "lanterns",
            "glowing",
            "evenings",
            "stories",
            "be",
            "to",
            "told",
        ];
        let mut x: u64 = 12345;
        let mut out = String::new();
        for _ in 0..n {
            let words: Vec<&str> = (0..12)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    vocab[(x >> 33) as usize % vocab.len()]
                })
                .collect();
            out += &words.join(" ");
            out += ". ";
        }
        out
    }

    #[test]
    fn tokens_split_punctuation_like_nltk() {
        assert_eq!(
            words("Hello, world... (really)!"),
            ["Hello", ",", "world", "...", "(", "really", ")!"]
        );
    }

    #[test]
    fn gopher_quality_rule_by_rule() {
        let q = GopherQuality::default();
        let varied = prose(60);
        assert_eq!(gopher_quality(&varied, &q), None);
        assert_eq!(
            gopher_quality("too short to keep", &q),
            Some("gopher_short_doc")
        );
        let tiny = "a b c d e f g h the of ".repeat(10);
        assert_eq!(
            gopher_quality(&tiny, &q),
            Some("gopher_below_avg_threshold")
        );
        let long = "internationalization characterization the of ".repeat(20);
        assert_eq!(
            gopher_quality(&long, &q),
            Some("gopher_above_avg_threshold")
        );
        let hashes = format!("{} {}", varied, "#tag ".repeat(120));
        assert_eq!(gopher_quality(&hashes, &q), Some("gopher_too_many_hashes"));
        let ell = format!("{varied}{}fine.", "wait... ".repeat(150));
        assert_eq!(gopher_quality(&ell, &q), Some("gopher_too_many_ellipsis"));
        let bullets: String = (0..60)
            .map(|i| format!("- item number {i} of the list\n"))
            .collect();
        assert_eq!(
            gopher_quality(&bullets, &q),
            Some("gopher_too_many_bullets")
        );
        let trailing: String = (0..60)
            .map(|i| format!("a line {i} that trails off and the rest…\n"))
            .collect();
        assert_eq!(
            gopher_quality(&trailing, &q),
            Some("gopher_too_many_end_ellipsis")
        );
        let numbers: String = (0..80)
            .map(|i| format!("{} ", 1000 + i))
            .collect::<String>()
            + "the of words here and there";
        assert_eq!(
            gopher_quality(&numbers, &q),
            Some("gopher_below_alpha_threshold")
        );
        let no_stop: String = (0..60)
            .map(|i| format!("Lorem ipsum dolor sit amet number{i}. "))
            .collect();
        assert_eq!(
            gopher_quality(&no_stop, &q),
            Some("gopher_enough_stop_words")
        );
    }

    #[test]
    fn rolling_ngram_keys_agree_with_naive_counting() {
        // Naive: n-grams as joined strings, exactly as datatrove's loop.
        fn naive(words: &[&str], n: usize) -> usize {
            let mut seen = std::collections::HashSet::new();
            let (mut i, mut chars) = (0, 0);
            while i + n <= words.len() {
                let g = words[i..i + n].join("\u{1}");
                if seen.contains(&g) {
                    chars += words[i..i + n]
                        .iter()
                        .map(|w| w.chars().count())
                        .sum::<usize>();
                    i += n;
                } else {
                    seen.insert(g);
                    i += 1;
                }
            }
            chars
        }
        let vocab = ["a", "bb", "ccc", "dé", "e"];
        let mut x = 12345u64;
        for len in [0usize, 1, 5, 40, 400] {
            let words: Vec<&str> = (0..len)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    vocab[(x >> 33) as usize % vocab.len()]
                })
                .collect();
            let ids = WordIds::new(&words);
            for n in 1..=10 {
                assert_eq!(
                    all_duplicate_chars(&ids, n),
                    naive(&words, n),
                    "len {len} n {n}"
                );
                let keys = window_keys(&ids.ids, n);
                assert_eq!(keys.len(), (len + 1).saturating_sub(n));
                for (i, k) in keys.iter().enumerate() {
                    let direct = window_keys(&ids.ids[i..i + n], n)[0];
                    assert_eq!(*k, direct, "rolled key equals the directly computed one");
                }
            }
        }
    }

    #[test]
    fn gopher_repetition_rule_by_rule() {
        let r = GopherRepetition::default();
        let ok: String = prose(80).split(". ").collect::<Vec<_>>().join(".\n\n");
        assert_eq!(gopher_repetition(&ok, &r), None);
        let paras = "same paragraph here\n\n".repeat(50) + &ok;
        assert_eq!(gopher_repetition(&paras, &r), Some("dup_para_frac"));
        let lines: String = (0..20)
            .map(|i| format!("unique line {i}\nrepeated line\n"))
            .collect();
        assert_eq!(gopher_repetition(&lines, &r), Some("dup_line_frac"));
        let bigram = "buy now ".repeat(30) + &ok[..200];
        assert_eq!(gopher_repetition(&bigram, &r), Some("top_2_gram"));
        // A repeated passage too long to be a top n-gram: caught by duplicated n-grams.
        let passage = prose(3);
        let dup = format!(
            "{}{passage}{}{passage}{}",
            prose(4),
            &prose(9)[600..],
            &prose(12)[900..]
        );
        assert_eq!(
            gopher_repetition(&dup, &r).map(|x| x.starts_with("duplicated_")),
            Some(true),
            "{:?}",
            gopher_repetition(&dup, &r)
        );
    }

    #[test]
    fn c4_rule_by_rule() {
        let c = C4::default();
        let good = "The council met on Tuesday to discuss the plan.\nIt approved the budget after a long debate.\nResidents spoke for and against it at length.\nThe work starts in spring and ends next year.\nEngineers will publish a report every month.";
        assert_eq!(c4_quality(good, &c, None).as_deref(), Ok(good));
        let noisy = format!(
            "Menu\nHome About\n{good}\nPlease enable JavaScript to view this page.\nRead our privacy policy for details.\nIt cost a lot.[12] Really.[citation needed]"
        );
        let cleaned = c4_quality(&noisy, &c, None).unwrap();
        assert!(
            cleaned.starts_with("The council") && cleaned.ends_with("It cost a lot. Really."),
            "{cleaned}"
        );
        assert_eq!(
            c4_quality("Only one sentence here is fine.", &c, None),
            Err("too_few_sentences")
        );
        assert_eq!(
            c4_quality(&format!("{good}\nLorem ipsum dolor sit amet."), &c, None),
            Err("lorem_ipsum")
        );
        assert_eq!(
            c4_quality(&format!("{good}\nfunction f() {{ return 1; }}."), &c, None),
            Err("curly_bracket")
        );
        let bad = aho_corasick::AhoCorasick::new(["budget"]).unwrap();
        assert_eq!(c4_quality(good, &c, Some(&bad)), Err("badwords"));
        let partial = aho_corasick::AhoCorasick::new(["plan"]).unwrap();
        assert!(
            c4_quality(&good.replace("plan", "planet"), &c, Some(&partial)).is_ok(),
            "whole words only"
        );
    }

    #[test]
    fn fineweb_rule_by_rule() {
        let f = FineWeb::default();
        let ok: String = (0..10)
            .map(|i| format!("This is a reasonably long line of prose number {i}, ending well.\n"))
            .collect();
        assert_eq!(fineweb_quality(&ok, &f), None);
        assert_eq!(fineweb_quality("\n \n", &f), Some("empty"));
        let no_punct: String = (0..10)
            .map(|i| format!("a long line without any terminal punctuation {i}\n"))
            .collect();
        assert_eq!(fineweb_quality(&no_punct, &f), Some("line_punct_ratio"));
        let short: String = (0..10).map(|i| format!("Short {i}.\n")).collect();
        assert_eq!(fineweb_quality(&short, &f), Some("short_line_ratio"));
        let dup = ok.clone() + "This is a reasonably long line of prose number 1, ending well.\n";
        assert_eq!(fineweb_quality(&dup, &f), Some("char_dup_ratio"));
        let list: String = (0..10)
            .map(|i| format!("This is a longer list entry {i} that ends.\n\n\n\n"))
            .collect();
        assert_eq!(fineweb_quality(&list, &f), Some("list_ratio"));
    }
}
