//! The language identifier's features and its training, shared by the build script
//! (which trains the model on the bundled corpora and writes the tables the binary
//! embeds) and `kernels::lang` (which reads documents with the same functions). One
//! source for both, so a document's n-grams are exactly those the model counted.
//!
//! Features: the letter 2- to 4-grams inside words (a word is a run of letters,
//! `char::is_alphabetic`, lowercased), as lingua counts them. Training data:
//! lingua's published n-gram frequencies for 52 of its languages
//! (`lingua.tsv.gz`, pseudo-counts out of [`SCALE`] letters, written by
//! `scripts/langid-lingua.py`), and the Universal Declaration of Human Rights
//! (`udhr.tsv.gz`) for the languages and writing systems lingua lacks, counted here
//! with the same features and scaled to the same [`SCALE`], so that every class's
//! smoothing is alike.
//!
//! The includer provides `super::letter_bitmap()`: one bit per Basic Multilingual
//! Plane code point, set where `char::is_alphabetic` holds (the standard library's
//! lookup is a binary search). The build script computes it; the library reads the
//! copy the build script wrote.
//!
//! The tables (`encode`, little-endian), read in place by `kernels::lang`:
//! ```text
//! MAGIC
//! u32 classes; per class: u8 length, the language code, u64 scripts, f32 unseen,
//!     u8 1 if counted from the UDHR
//! LETTER_BYTES bytes: the letter bitmap
//! u32 slot bits b; 2^b slots of (u64 n-gram hash, u32 start, u32 end), open
//!     addressing with linear probing from `slot_of`, load ≤ 1/2; end = 0: empty
//! u32 postings; per posting: u16 class, f32 log-probability minus the class's unseen
//! ```
#![allow(dead_code)] // each includer uses its half

/// The tables' first bytes (and their version).
pub const MAGIC: &[u8; 8] = b"MDFLID02";
/// The n-gram lengths counted: `MIN_N..=MAX_N`. Unigrams would add 1 % of errors'
/// worth of accuracy on lingua's sentences (0.985 against 0.984) for a third of the
/// time: each letter's posting list holds nearly every class of its writing system.
pub const MIN_N: usize = 2;
pub const MAX_N: usize = 4;
/// n-grams a class keeps, by length `MIN_N..=MAX_N` (the most frequent; the same caps
/// as `scripts/langid-lingua.py`'s).
const CAPS: [usize; MAX_N + 1 - MIN_N] = [3000, 5000, 5000];
/// Every class's counts are pseudo-counts out of this many letters.
const SCALE: f64 = 1e6;
/// The total every class's smoothing assumes: its 2-, 3- and 4-grams, each at most
/// [`SCALE`]. One total for all classes, so an n-gram no class knows scores the same
/// in each and moves no margin.
const TOTAL: f64 = 3.0 * SCALE;
/// Additive smoothing of the counts, and the vocabulary size it assumes.
const ALPHA: f64 = 0.5;
const VOCAB: f64 = 50_000.0;
/// Writing systems a class uses: those of at least this share of its letters.
const SCRIPT_SHARE: f64 = 0.02;
/// The letter bitmap's size: a bit per BMP code point.
pub const LETTER_BYTES: usize = 0x1_0000 / 8;
/// A slot: n-gram hash, start and end of its postings.
pub const SLOT_BYTES: usize = 16;
/// A posting: class, weight.
pub const POSTING_BYTES: usize = 6;

/// `char::is_alphabetic`, through the bitmap for the BMP.
#[inline]
pub fn is_letter(c: char) -> bool {
    let i = c as usize;
    if i < 0x80 {
        return c.is_ascii_alphabetic();
    }
    if i >= 0x1_0000 {
        return c.is_alphabetic();
    }
    super::letter_bitmap()[i / 8] >> (i % 8) & 1 == 1
}

/// The bitmap `is_letter` reads, computed.
pub fn compute_letter_bitmap() -> Vec<u8> {
    let mut b = vec![0u8; LETTER_BYTES];
    for (i, byte) in b.iter_mut().enumerate() {
        for j in 0..8 {
            if char::from_u32((i * 8 + j) as u32).is_some_and(char::is_alphabetic) {
                *byte |= 1 << j;
            }
        }
    }
    b
}

/// Hebrew points and Arabic harakat: marks `char::is_alphabetic` holds that a text
/// may or may not write (vowelled Hebrew, Arabic with tashkil). Dropped, so a
/// vowelled word reads as the same word unvowelled, as lingua's counts have it.
#[inline]
fn pointing(c: char) -> bool {
    matches!(c, '\u{0591}'..='\u{05C7}' | '\u{0610}'..='\u{061A}' | '\u{064B}'..='\u{065F}' | '\u{0670}' | '\u{06D6}'..='\u{06ED}')
}

/// Lowercase letters (Hebrew points and Arabic harakat dropped), every run of other
/// characters one space, a space at each end.
pub fn normalise(text: &str, out: &mut Vec<char>) {
    out.clear();
    out.push(' ');
    for ch in text.chars() {
        if is_letter(ch) {
            if pointing(ch) {
                continue;
            }
            if ch.is_ascii() {
                out.push(ch.to_ascii_lowercase());
            } else if ch == 'İ' {
                // Turkish capital dotted I: `i`, as lowercased Turkish text spells it
                // (`to_lowercase` adds a combining dot no corpus has).
                out.push('i');
            } else {
                out.extend(ch.to_lowercase());
            }
        } else if out.last() != Some(&' ') {
            out.push(' ');
        }
    }
    if out.last() != Some(&' ') {
        out.push(' ');
    }
}

/// An n-gram's hash (its length mixed in).
#[inline]
pub fn gram_hash(w: &[char]) -> u64 {
    let mut h = w.len() as u64;
    for &c in w {
        h = (h ^ c as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h ^ (h >> 29)
}

/// Calls `f` with each n-gram of normalised text, in text order: the [`MIN_N`]- to
/// [`MAX_N`]-grams inside words, and, in Devanagari, also the 3- and 4-grams that
/// start or end at a word's edge (a space at either end, none inside).
///
/// Word edges only in Devanagari: every class that writes it (Hindi, Marathi, Nepali)
/// is counted from the UDHR text, where edges can be counted, and its short function
/// words (`के`, `है`, `आहे`) are what tell the three apart; lingua's counts, which
/// every other script's close languages come from, have no edges. (Hindi on lingua's
/// sentences: 0.897 without them, 0.969 with.)
#[inline]
pub fn each_gram<'a>(chars: &'a [char], mut f: impl FnMut(&'a [char])) {
    for i in 0..chars.len() {
        grams_at(chars, i, &mut f);
    }
}

/// [`each_gram`]'s n-grams that start at `chars[i]`.
#[inline]
fn grams_at<'a>(chars: &'a [char], i: usize, f: &mut impl FnMut(&'a [char])) {
    let edge = chars[i] == ' ';
    for n in 1..=MAX_N {
        let Some(w) = chars.get(i..i + n) else {
            break;
        };
        if n == 1 {
            // A letter alone is no n-gram; a space starts edge n-grams.
            continue;
        }
        let end = w[n - 1] == ' ';
        if w[1..n - 1].contains(&' ') {
            break;
        }
        if edge || end {
            if n >= 3 && w.iter().all(|&c| c == ' ' || devanagari(c)) && w.iter().any(|&c| c != ' ')
            {
                f(w);
            }
            if end {
                break;
            }
        } else if n >= MIN_N {
            f(w);
        }
    }
}

#[inline]
fn devanagari(c: char) -> bool {
    ('\u{0900}'..='\u{097F}').contains(&c)
}

/// The hashes of [`each_gram`]'s n-grams, in text order.
pub fn ngrams(chars: &[char], out: &mut Vec<u64>) {
    each_gram(chars, |w| out.push(gram_hash(w)));
}

/// [`ngrams`] from position `from` on, until `out` holds at least `until` hashes (or
/// the text ends); returns the position to resume from. Resumed to the end, `out`
/// holds exactly what [`ngrams`] gives.
pub fn ngrams_until(chars: &[char], from: usize, out: &mut Vec<u64>, until: usize) -> usize {
    let mut i = from;
    while i < chars.len() && out.len() < until {
        grams_at(chars, i, &mut |w| out.push(gram_hash(w)));
        i += 1;
    }
    i
}

/// Writing systems by Unicode block, for narrowing the candidates: (first, last,
/// script number); blocks of one script share its number.
const SCRIPTS: &[(u32, u32, usize)] = &[
    (0x0041, 0x024F, 0),      // Latin
    (0x0370, 0x03FF, 1),      // Greek
    (0x0400, 0x052F, 2),      // Cyrillic
    (0x0530, 0x058F, 3),      // Armenian
    (0x0590, 0x05FF, 4),      // Hebrew
    (0x0600, 0x06FF, 5),      // Arabic
    (0x0900, 0x097F, 6),      // Devanagari
    (0x0980, 0x09FF, 7),      // Bengali
    (0x0A00, 0x0A7F, 8),      // Gurmukhi
    (0x0A80, 0x0AFF, 9),      // Gujarati
    (0x0B00, 0x0B7F, 10),     // Oriya
    (0x0B80, 0x0BFF, 11),     // Tamil
    (0x0C00, 0x0C7F, 12),     // Telugu
    (0x0C80, 0x0CFF, 13),     // Kannada
    (0x0D00, 0x0D7F, 14),     // Malayalam
    (0x0D80, 0x0DFF, 15),     // Sinhala
    (0x0E00, 0x0E7F, 16),     // Thai
    (0x1000, 0x109F, 17),     // Myanmar
    (0x10A0, 0x10FF, 18),     // Georgian
    (0x1100, 0x11FF, HANGUL), // Hangul Jamo
    (0x1200, 0x139F, 20),     // Ethiopic
    (0x1780, 0x17FF, 21),     // Khmer
    (0x1E00, 0x1EFF, 0),      // Latin Extended Additional (Vietnamese)
    (0x3040, 0x30FF, KANA),   // Hiragana and Katakana
    (0x3400, 0x4DBF, CJK),    // CJK Extension A
    (0x4E00, 0x9FFF, CJK),    // CJK
    (0xAC00, 0xD7AF, HANGUL), // Hangul syllables
    (0x0750, 0x077F, 5),      // Arabic Supplement
    (0xFB50, 0xFEFF, 5),      // Arabic presentation forms
];
pub const KANA: usize = 23;
pub const CJK: usize = 25;
pub const HANGUL: usize = 26;

fn script_of(c: char) -> Option<usize> {
    let c = c as u32;
    if c < 0x0041 {
        return None;
    }
    SCRIPTS
        .iter()
        .find(|&&(lo, hi, _)| (lo..=hi).contains(&c))
        .map(|&(_, _, s)| s)
}

/// Letters of another known writing system than `script` become word breaks: the
/// candidates are the classes of the text's main script, which know no n-gram of
/// another, so such n-grams would only dilute the evidence (an Urdu sentence behind
/// an English menu).
pub fn keep_script(chars: &mut [char], script: usize) {
    for c in chars.iter_mut() {
        if *c != ' ' && script_of(*c).is_some_and(|s| s != script) {
            *c = ' ';
        }
    }
}

/// Letters per writing system, and all letters.
pub fn script_shares(text: &str) -> ([u32; 32], u32) {
    let mut n = [0u32; 32];
    let mut total = 0;
    for c in text.chars().filter(|&c| is_letter(c)) {
        total += 1;
        if let Some(s) = script_of(c) {
            n[s] += 1;
        }
    }
    (n, total)
}

/// A trained model, before it is encoded.
pub struct Trained {
    /// Per class: language code, scripts (bit per script number), log-probability of
    /// an n-gram the class never saw, whether it was counted from the UDHR (a short
    /// text: real text in its language fits it less well than a lingua class's).
    pub classes: Vec<(String, u64, f32, bool)>,
    /// Per distinct n-gram, by hash: its range of `postings`.
    pub index: Vec<(u64, u32, u32)>,
    /// (class, log-probability of the n-gram minus the class's unseen), by n-gram.
    pub postings: Vec<(u16, f32)>,
}

/// Writing systems of at least [`SCRIPT_SHARE`] of the letters, weighted, as bits,
/// and the one with the most.
fn scripts_of(letters: impl Iterator<Item = (char, f64)>) -> (u64, usize) {
    let mut share = [0f64; 32];
    let mut total = 0.0;
    for (c, w) in letters {
        total += w;
        if let Some(s) = script_of(c) {
            share[s] += w;
        }
    }
    let bits = share
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0.0 && **n >= SCRIPT_SHARE * total)
        .fold(0u64, |m, (i, _)| m | 1 << i);
    let main = (0..share.len())
        .max_by(|&a, &b| share[a].total_cmp(&share[b]).then(b.cmp(&a)))
        .expect("scripts");
    (bits, main)
}

/// A class's n-grams: (letters, pseudo-count).
type Grams = Vec<(Vec<char>, f64)>;

/// One class's n-grams, each counted once: (text, pseudo-count). Kept: the
/// [`CAPS`] most frequent of each length (ties by the text, so the choice does not
/// depend on the input's order).
fn capped(mut grams: Grams) -> Grams {
    grams.sort_by(|a, b| {
        a.0.len()
            .cmp(&b.0.len())
            .then(b.1.total_cmp(&a.1))
            .then(a.0.cmp(&b.0))
    });
    let mut out = Vec::with_capacity(grams.len());
    for run in grams.chunk_by(|a, b| a.0.len() == b.0.len()) {
        out.extend(run.iter().take(CAPS[run[0].0.len() - MIN_N]).cloned());
    }
    out
}

/// Multinomial naive Bayes from both corpora:
/// - `lingua`: `ISO 639-1 code <TAB> n-gram <TAB> pseudo-count` lines, a class per
///   language;
/// - `udhr`: `class <TAB> ISO 639-1 code <TAB> text` lines, counted with [`ngrams`]'s
///   features; a class is kept where lingua has no class of its language in its
///   main writing system (Chinese, Japanese, Korean, the languages lingua lacks,
///   Cyrillic Azerbaijani, ...).
pub fn train(udhr: &str, lingua: &str) -> Trained {
    // (language, its n-grams), in order of first appearance.
    let mut sources: Vec<(String, Grams)> = Vec::new();
    for line in lingua.lines() {
        let mut f = line.split('\t');
        let (Some(lang), Some(gram), Some(count)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let count: f64 = count.parse().expect("a pseudo-count");
        if sources.last().is_none_or(|(l, _)| l != lang) {
            sources.push((lang.to_string(), Vec::new()));
        }
        let grams = &mut sources.last_mut().expect("pushed").1;
        let gram: Vec<char> = gram.chars().collect();
        if gram.len() >= MIN_N {
            grams.push((gram, count));
        }
    }
    let mut classes: Vec<(String, u64, Grams)> = sources
        .into_iter()
        .map(|(lang, grams)| {
            let grams = capped(grams);
            let letters = grams
                .iter()
                .flat_map(|(g, n)| g.iter().map(move |&c| (c, *n)));
            (lang, scripts_of(letters).0, grams)
        })
        .collect();
    let from_lingua = classes.len();
    let mut chars = Vec::new();
    for line in udhr.lines() {
        let mut f = line.splitn(3, '\t');
        let (Some(_), Some(lang), Some(body)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        normalise(body, &mut chars);
        let (scripts, main) = scripts_of(chars.iter().filter(|c| **c != ' ').map(|&c| (c, 1.0)));
        if classes[..from_lingua]
            .iter()
            .any(|(l, s, _)| l == lang && s & (1 << main) != 0)
        {
            continue;
        }
        let mut counts: std::collections::HashMap<&[char], f64> = Default::default();
        each_gram(&chars, |w| *counts.entry(w).or_default() += 1.0);
        let letters = chars.iter().filter(|c| **c != ' ').count().max(1) as f64;
        let grams = counts
            .into_iter()
            .map(|(g, c)| (g.to_vec(), c / letters * SCALE))
            .collect();
        classes.push((lang.to_string(), scripts, capped(grams)));
    }
    // (n-gram, class, pseudo-count) of every class, sorted by n-gram below.
    let mut counts: Vec<(u64, u16, f64)> = Vec::new();
    let mut out = Vec::with_capacity(classes.len());
    let unseen = (ALPHA / (TOTAL + ALPHA * VOCAB)).ln() as f32;
    for (c, (lang, scripts, grams)) in classes.into_iter().enumerate() {
        counts.extend(grams.iter().map(|(g, n)| (gram_hash(g), c as u16, *n)));
        out.push((lang, scripts, unseen, c >= from_lingua));
    }
    counts.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut index = Vec::new();
    let mut postings = Vec::with_capacity(counts.len());
    for run in counts.chunk_by(|a, b| a.0 == b.0) {
        let start = postings.len() as u32;
        for &(_, c, n) in run {
            // log((n + α) / (T + αV)) - log(α / (T + αV)) = log((n + α) / α)
            postings.push((c, ((n + ALPHA) / ALPHA).ln() as f32));
        }
        index.push((run[0].0, start, postings.len() as u32));
    }
    Trained {
        classes: out,
        index,
        postings,
    }
}

/// The first slot probed for an n-gram hash in a table of `2^bits` slots.
#[inline]
pub fn slot_of(hash: u64, bits: u32) -> usize {
    (hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

/// The tables of a trained model, as the module documentation lays them out.
pub fn encode(t: &Trained, letters: &[u8]) -> Vec<u8> {
    assert_eq!(letters.len(), LETTER_BYTES);
    let mut out = MAGIC.to_vec();
    out.extend((t.classes.len() as u32).to_le_bytes());
    for (lang, scripts, unseen, udhr) in &t.classes {
        out.push(u8::try_from(lang.len()).expect("a short language code"));
        out.extend(lang.as_bytes());
        out.extend(scripts.to_le_bytes());
        out.extend(unseen.to_le_bytes());
        out.push(u8::from(*udhr));
    }
    out.extend(letters);
    // At most half full, so a probe for an absent hash meets an empty slot soon.
    let bits = (2 * t.index.len().max(1))
        .next_power_of_two()
        .trailing_zeros();
    let mask = (1usize << bits) - 1;
    let mut slots = vec![(0u64, 0u32, 0u32); 1 << bits];
    for &(h, start, end) in &t.index {
        let mut s = slot_of(h, bits);
        while slots[s].2 != 0 {
            s = (s + 1) & mask;
        }
        slots[s] = (h, start, end);
    }
    out.extend(bits.to_le_bytes());
    for (h, start, end) in slots {
        out.extend(h.to_le_bytes());
        out.extend(start.to_le_bytes());
        out.extend(end.to_le_bytes());
    }
    out.extend((t.postings.len() as u32).to_le_bytes());
    for &(c, w) in &t.postings {
        out.extend(c.to_le_bytes());
        out.extend(w.to_le_bytes());
    }
    out
}
