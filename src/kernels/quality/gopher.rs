//! Gopher quality and Gopher repetition (Rae et al. 2021, as datatrove implements them).
use super::*;

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
    /// How words are cut.
    pub words: WordSplit,
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
            words: WordSplit::Whitespace,
        }
    }
}

/// Word counts of a document for the Gopher rules: every word, the words with a
/// character outside datatrove's punctuation set (the rest are symbols) and their
/// characters, the words with a letter, and how many of the stop words occur.
#[derive(Default)]
struct WordStats {
    n_words: usize,
    n: usize,
    chars: usize,
    alpha: usize,
    stops_found: usize,
}

/// Whether `w` is a word, not a symbol: a character outside datatrove's
/// `PUNCTUATION_SET`.
#[inline]
fn non_symbol(w: &str) -> bool {
    let b = w.as_bytes();
    (b[0].is_ascii_alphanumeric()) || w.chars().any(|c| !segment::symbol(c))
}

#[inline]
fn letters(w: &str) -> (usize, bool) {
    if w.is_ascii() {
        (w.len(), w.bytes().any(|c| c.is_ascii_alphabetic()))
    } else {
        (w.chars().count(), w.chars().any(char::is_alphabetic))
    }
}

struct Stops<'q> {
    q: &'q GopherQuality,
    first: [bool; 256],
    seen: Vec<bool>,
    want: usize,
}

impl<'q> Stops<'q> {
    fn new(q: &'q GopherQuality) -> Self {
        let mut first = [false; 256];
        for s in &q.stop_words {
            if let Some(&c) = s.as_bytes().first() {
                first[c as usize] = true;
            }
        }
        Stops {
            q,
            first,
            seen: vec![false; q.stop_words.len()],
            want: q.min_stop_words.unwrap_or(0),
        }
    }

    #[inline]
    fn see(&mut self, w: &str, found: &mut usize) {
        if *found < self.want && self.first[w.as_bytes()[0] as usize] {
            for (i, s) in self.q.stop_words.iter().enumerate() {
                if !self.seen[i] && s == w {
                    self.seen[i] = true;
                    *found += 1;
                }
            }
        }
    }
}

/// [`WordStats`] over white-space tokens cut into pieces (`pieces`).
fn whitespace_stats(text: &str, q: &GopherQuality) -> WordStats {
    let mut st = WordStats::default();
    let mut stops = Stops::new(q);
    for_each_word(text, |w| {
        st.n_words += 1;
        stops.see(w, &mut st.stops_found);
        if non_symbol(w) {
            st.n += 1;
            let (c, a) = letters(w);
            st.chars += c;
            st.alpha += usize::from(a);
        }
    });
    st
}

/// [`WordStats`] over tokens cut as `split` cuts them (datatrove's way: every token
/// a word, a symbol when all its characters are punctuation).
fn token_stats(text: &str, q: &GopherQuality, split: WordSplit) -> WordStats {
    let mut toks = Vec::new();
    segment::split_words(text, split, &mut toks);
    let mut st = WordStats {
        n_words: toks.len(),
        ..WordStats::default()
    };
    let mut stops = Stops::new(q);
    for w in toks {
        stops.see(w, &mut st.stops_found);
        let (c, a) = letters(w);
        st.alpha += usize::from(a);
        if non_symbol(w) {
            st.n += 1;
            st.chars += c;
        }
    }
    st
}

/// The Gopher quality rules in their published order; one pass over the words
/// gathers what the word rules need.
pub fn gopher_quality(text: &str, q: &GopherQuality) -> Option<&'static str> {
    let WordStats {
        n_words,
        n,
        chars,
        alpha,
        stops_found,
    } = match q.words {
        WordSplit::Whitespace => whitespace_stats(text, q),
        split => token_stats(text, q, split),
    };
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
        for l in segment::py_lines(text) {
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
    /// How words are cut for the n-gram rules.
    pub words: WordSplit,
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
            words: WordSplit::Whitespace,
        }
    }
}

/// (duplicate elements, characters in duplicates) of a sequence.
pub(super) fn duplicates<'a>(xs: impl IntoIterator<Item = &'a str>) -> (usize, usize) {
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
pub(super) struct WordIds {
    pub(super) ids: Vec<u32>,
    chars: Vec<u32>,
}

impl WordIds {
    pub(super) fn new(words: &[&str]) -> WordIds {
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
pub(super) fn window_keys(ids: &[u32], n: usize) -> Vec<u64> {
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
pub(super) fn all_duplicate_chars(w: &WordIds, n: usize) -> usize {
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

/// Characters of the words that lie in a later occurrence of some `m`-gram (a window
/// equal to an earlier one; a hash collision counts as one). A repeated n-gram with
/// n ≥ m is made of such m-grams, and the repeats [`all_duplicate_chars`] counts do
/// not overlap, so for every n ≥ m it counts at most this: a duplicated-n-gram rule
/// whose threshold this does not pass cannot fire, and its pass is skipped.
///
/// With `prefix` (per window of the (m-1)-gram pass, whether its key occurs more
/// than once; [`top_n_gram`]), windows whose prefix is unique are unique m-grams
/// and are passed over.
pub(super) fn repeated_window_chars(w: &WordIds, m: usize, prefix: Option<&[bool]>) -> usize {
    let keys = window_keys(&w.ids, m);
    if keys.is_empty() {
        return 0;
    }
    // Flags of another length are not the (m-1)-gram pass's: not used.
    let prefix = prefix.filter(|p| p.len() == keys.len() + 1);
    let live = |i: usize| prefix.is_none_or(|p| p[i]);
    let mut first: FastMap<u64, u32> = FastMap::default();
    first.reserve(keys.iter().enumerate().filter(|&(i, _)| live(i)).count());
    // Words covered so far run to `covered` (windows come in order).
    let (mut covered, mut chars) = (0usize, 0usize);
    for (i, k) in keys.iter().enumerate() {
        if !live(i) {
            continue;
        }
        let j = *first.entry(*k).or_insert(i as u32) as usize;
        if j == i {
            continue;
        }
        let from = covered.max(i);
        let to = i + m;
        if from < to {
            chars += w.chars[from..to].iter().map(|&c| c as usize).sum::<usize>();
            covered = to;
        }
    }
    chars
}

/// The most frequent n-gram (first seen wins ties, as `Counter.most_common` does) as
/// (its first window, its count), and per window whether its key occurs more than
/// once. With `prefix` (the flags of the (n-1)-gram pass), only flagged windows are
/// counted: any other window starts a unique (n-1)-gram, so its n-gram is unique too
/// and cannot be the most frequent unless every n-gram is (then the first window is).
///
/// As before the pruning, a window whose 64-bit key collides with an earlier,
/// different n-gram's is not counted; which windows can meet such a collision differs
/// (pruned windows never occupy a key), so on a collision, unlikely past any real
/// page's length, the count can differ from the unpruned pass's.
pub(super) fn top_n_gram(
    w: &WordIds,
    n: usize,
    keys: &[u64],
    prefix: Option<&[bool]>,
) -> (Option<(usize, usize)>, Vec<bool>) {
    let same = |a: usize, b: usize| w.ids[a..a + n] == w.ids[b..b + n];
    // Flags of another length are not the (n-1)-gram pass's: not used.
    let prefix = prefix.filter(|p| p.len() == keys.len() + 1);
    let live = |i: usize| prefix.is_none_or(|p| p[i]);
    // key -> (count, first window with it, windows with it, collisions included)
    let mut counts: FastMap<u64, (usize, usize, usize)> = FastMap::default();
    counts.reserve(keys.iter().enumerate().filter(|&(i, _)| live(i)).count());
    for (i, k) in keys.iter().enumerate() {
        if !live(i) {
            continue;
        }
        let e = counts.entry(*k).or_insert((0, i, 0));
        e.2 += 1;
        if e.1 == i || same(e.1, i) {
            e.0 += 1;
        }
    }
    let mut best: Option<(usize, usize)> = None;
    let mut flags = vec![false; keys.len()];
    for (i, k) in keys.iter().enumerate() {
        if !live(i) {
            continue;
        }
        let (c, first, all) = counts[k];
        flags[i] = all > 1;
        if first == i && best.is_none_or(|(_, bc)| c > bc) {
            best = Some((i, c));
        }
    }
    // Only unique n-grams: the first window is the first of the most frequent.
    if best.is_none_or(|(_, c)| c < 2) && !keys.is_empty() {
        best = Some((0, 1));
    }
    (best, flags)
}

pub(super) fn top_name(n: usize) -> &'static str {
    match n {
        2 => "top_2_gram",
        3 => "top_3_gram",
        4 => "top_4_gram",
        _ => "top_n_gram",
    }
}

pub(super) fn dup_name(n: usize) -> &'static str {
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
    // Nothing to judge is not a page that passed: dropped as `empty`, as
    // fineweb_quality does (datatrove's GopherRepetitionFilter keeps it).
    if text.trim().is_empty() {
        return Some("empty");
    }
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
    let words = WordIds::new(&words_by(text, r.words));
    // Per window of the last pass (its n): whether another window has its key. An
    // n-gram occurs twice only if its first n-1 words do, so the next pass (n+1)
    // counts only the windows whose prefix was flagged: the rest are unique n-grams.
    let mut repeated: Option<(usize, Vec<bool>)> = None;
    for &(n, frac) in &r.top_n_grams {
        // A 0-gram rule has no n-gram to count (it never fires).
        if n == 0 || words.ids.len() < n {
            continue;
        }
        let keys = window_keys(&words.ids, n);
        let prefix = repeated
            .take()
            .filter(|(m, _)| *m + 1 == n)
            .map(|(_, flags)| flags);
        let (best, flags) = top_n_gram(&words, n, &keys, prefix.as_deref());
        repeated = Some((n, flags));
        // Its characters as datatrove joins it: with a space between words.
        if let Some((i, c)) = best
            && ((words.chars_of(i, n) + n - 1) * c) as f64 / len > frac
        {
            return Some(top_name(n));
        }
    }
    // A bound on every pass's count from one pass over the shortest n-grams: most
    // pages repeat too little for any rule to fire, and skip all six passes.
    let m = r.dup_n_grams.iter().map(|&(n, _)| n).min().unwrap_or(0);
    let prefix = repeated
        .as_ref()
        .filter(|(n, _)| n + 1 == m)
        .map(|(_, flags)| flags.as_slice());
    let bound =
        (m > 0 && r.dup_n_grams.len() > 1).then(|| repeated_window_chars(&words, m, prefix));
    for &(n, frac) in &r.dup_n_grams {
        if bound.is_some_and(|b| b as f64 / len <= frac) {
            continue;
        }
        if all_duplicate_chars(&words, n) as f64 / len > frac {
            return Some(dup_name(n));
        }
    }
    None
}
