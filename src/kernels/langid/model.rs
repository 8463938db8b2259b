//! The language identifier's features and its training, shared by the build script
//! (which trains the model on the bundled corpus and writes the tables the binary
//! embeds) and `kernels::lang` (which reads documents with the same functions). One
//! source for both, so a document's n-grams are exactly those the model counted.
//!
//! The includer provides `super::letter_bitmap()`: one bit per Basic Multilingual
//! Plane code point, set where `char::is_alphabetic` holds (the standard library's
//! lookup is a binary search). The build script computes it; the library reads the
//! copy the build script wrote.
//!
//! The tables (`encode`, little-endian), read in place by `kernels::lang`:
//! ```text
//! MAGIC
//! u32 classes; per class: u8 length, the language code, u64 scripts, f32 unseen
//! LETTER_BYTES bytes: the letter bitmap
//! u32 slot bits b; 2^b slots of (u64 n-gram hash, u32 start, u32 end), open
//!     addressing with linear probing from `slot_of`, load ≤ 1/2; end = 0: empty
//! u32 postings; per posting: u16 class, f32 log-probability minus the class's unseen
//! ```
#![allow(dead_code)] // each includer uses its half

/// The tables' first bytes (and their version).
pub const MAGIC: &[u8; 8] = b"MDFLID01";
/// The n-gram lengths counted.
pub const NS: [usize; 2] = [3, 4];
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

/// Lowercase letters, every run of other characters one space, a space at each end.
pub fn normalise(text: &str, out: &mut Vec<char>) {
    out.clear();
    out.push(' ');
    for ch in text.chars() {
        if is_letter(ch) {
            if ch.is_ascii() {
                out.push(ch.to_ascii_lowercase());
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

/// The hashes of the n-grams that do not span a word boundary inside them (a space
/// may only start or end one), in text order.
pub fn ngrams(chars: &[char], out: &mut Vec<u64>) {
    for i in 0..chars.len() {
        for n in NS {
            let Some(w) = chars.get(i..i + n) else {
                break;
            };
            if w[1..n - 1].contains(&' ') {
                break;
            }
            let mut h = n as u64;
            for &c in w {
                h = (h ^ c as u64).wrapping_mul(0x0100_0000_01b3);
            }
            out.push(h ^ (h >> 29));
        }
    }
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
    /// an n-gram the class never saw.
    pub classes: Vec<(String, u64, f32)>,
    /// Per distinct n-gram, by hash: its range of `postings`.
    pub index: Vec<(u64, u32, u32)>,
    /// (class, log-probability of the n-gram minus the class's unseen), by n-gram.
    pub postings: Vec<(u16, f32)>,
}

/// Multinomial naive Bayes counts from the corpus: one line per class,
/// `class <TAB> language code <TAB> text`.
pub fn train(corpus: &str) -> Trained {
    let mut classes = Vec::new();
    // (n-gram, class, count) of every class, sorted by n-gram below.
    let mut counts: Vec<(u64, u16, u32)> = Vec::new();
    let mut chars = Vec::new();
    let mut grams = Vec::new();
    for line in corpus.lines() {
        let mut f = line.splitn(3, '\t');
        let (Some(_), Some(lang), Some(body)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let c = classes.len() as u16;
        let (share, total_letters) = script_shares(body);
        let scripts = share
            .iter()
            .enumerate()
            .filter(|(_, n)| **n as f64 >= SCRIPT_SHARE * total_letters as f64)
            .fold(0u64, |m, (i, _)| m | 1 << i);
        normalise(body, &mut chars);
        grams.clear();
        ngrams(&chars, &mut grams);
        let total = grams.len() as f64;
        grams.sort_unstable();
        for run in grams.chunk_by(|a, b| a == b) {
            counts.push((run[0], c, run.len() as u32));
        }
        let unseen = (ALPHA / (total + ALPHA * VOCAB)).ln() as f32;
        classes.push((lang.to_string(), scripts, unseen));
    }
    counts.sort_unstable_by_key(|x| x.0);
    let mut index = Vec::new();
    let mut postings = Vec::with_capacity(counts.len());
    for run in counts.chunk_by(|a, b| a.0 == b.0) {
        let start = postings.len() as u32;
        for &(_, c, n) in run {
            // log((n + α) / (T + αV)) - log(α / (T + αV)) = log((n + α) / α)
            postings.push((c, ((n as f64 + ALPHA) / ALPHA).ln() as f32));
        }
        index.push((run[0].0, start, postings.len() as u32));
    }
    Trained {
        classes,
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
    for (lang, scripts, unseen) in &t.classes {
        out.push(u8::try_from(lang.len()).expect("a short language code"));
        out.extend(lang.as_bytes());
        out.extend(scripts.to_le_bytes());
        out.extend(unseen.to_le_bytes());
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
