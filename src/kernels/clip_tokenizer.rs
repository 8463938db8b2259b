//! CLIP's byte-level BPE tokenizer, as open_clip / OpenAI CLIP's `SimpleTokenizer`
//! does it, for the text tower of `clip_embed`.
//!
//! * The vocabulary comes from the merges file that ships with those packages
//!   (`bpe_simple_vocab_16e6.txt.gz`, gzip or plain): 256 byte symbols, the same with
//!   `</w>`, 48,894 merges, `<|startoftext|>` and `<|endoftext|>` (49,408 ids).
//! * Cleaning follows `basic_clean` + `whitespace_clean` + lower-casing: ftfy's
//!   `fix_text` fixes (HTML entities in lines without `<`, C1 controls as
//!   Windows-1252, Latin ligatures, full/half-width forms, curly quotes, line breaks,
//!   terminal escapes, control characters, NFC) except its mojibake detection
//!   (`fix_encoding`, a heuristic re-decoding that needs ftfy's statistics), then HTML
//!   unescaping twice, whitespace runs collapsed, lower case.
//! * Pre-tokenisation uses the same pattern; each piece's UTF-8 bytes become byte
//!   symbols and merge by rank, on ids rather than strings.
//! * [`ClipTokenizer::tokenize`] frames the ids as open_clip's `tokenize` does:
//!   `<|startoftext|>`, ids, `<|endoftext|>`, truncated to the context length with the
//!   last id forced to `<|endoftext|>`, zero padding.
use super::FastMap;
use regex::Regex;
use unicode_normalization::UnicodeNormalization;

/// The number of merges CLIP uses from the file (49152 − 256 − 2).
const MERGES: usize = 48_894;

pub struct ClipTokenizer {
    /// Byte → symbol id (its position in CLIP's byte alphabet).
    byte_id: [u32; 256],
    /// (left, right) symbol ids → (rank, merged id).
    ranks: FastMap<(u32, u32), (u32, u32)>,
    pat: Regex,
    pub sot: u32,
    pub eot: u32,
    pub vocab_size: usize,
}

/// CLIP's byte alphabet: printable Latin-1 bytes map to themselves, the rest to
/// U+0100 upwards; the order is the vocabulary's.
fn byte_alphabet() -> Vec<(u8, char)> {
    let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32)
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut cs = bs.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bs.contains(&b) {
            bs.push(b);
            cs.push(256 + n);
            n += 1;
        }
    }
    bs.iter()
        .zip(&cs)
        .map(|(&b, &c)| (b as u8, char::from_u32(c).expect("alphabet char")))
        .collect()
}

impl ClipTokenizer {
    /// A tokenizer from the merges file's bytes (gzip-compressed or plain).
    pub fn from_bytes(bytes: &[u8]) -> Result<ClipTokenizer, String> {
        let text = if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(bytes), &mut s)
                .map_err(|e| format!("not a gzip-compressed UTF-8 merges file: {e}"))?;
            s
        } else {
            String::from_utf8(bytes.to_vec()).map_err(|_| "the merges file is not UTF-8")?
        };
        Self::from_merges(&text)
    }

    /// A tokenizer from the merges file's text (a header line, then `left right`).
    pub fn from_merges(text: &str) -> Result<ClipTokenizer, String> {
        let merges: Vec<(&str, &str)> = text
            .split('\n')
            .skip(1)
            .take(MERGES)
            .enumerate()
            .map(|(i, l)| {
                let mut it = l.split_whitespace();
                match (it.next(), it.next(), it.next()) {
                    (Some(a), Some(b), None) => Ok((a, b)),
                    _ => Err(format!(
                        "merges line {}: expected two symbols: {l:?}",
                        i + 2
                    )),
                }
            })
            .collect::<Result<_, _>>()?;
        if merges.len() < MERGES {
            return Err(format!(
                "the merges file has {} merges, CLIP's has {MERGES} \
                 (bpe_simple_vocab_16e6.txt.gz from open_clip or CLIP)",
                merges.len()
            ));
        }
        let alphabet = byte_alphabet();
        // The vocabulary in order; a later duplicate string wins, as in a Python dict.
        let mut vocab: Vec<String> = alphabet.iter().map(|(_, c)| c.to_string()).collect();
        vocab.extend(alphabet.iter().map(|(_, c)| format!("{c}</w>")));
        vocab.extend(merges.iter().map(|(a, b)| format!("{a}{b}")));
        vocab.push("<|startoftext|>".into());
        vocab.push("<|endoftext|>".into());
        let mut encoder: FastMap<&str, u32> = FastMap::default();
        for (i, v) in vocab.iter().enumerate() {
            encoder.insert(v.as_str(), i as u32);
        }
        let mut byte_id = [0u32; 256];
        for (b, c) in &alphabet {
            byte_id[*b as usize] = encoder[c.to_string().as_str()];
        }
        let mut ranks = FastMap::default();
        for (r, (a, b)) in merges.iter().enumerate() {
            let id = |s: &str| {
                encoder
                    .get(s)
                    .copied()
                    .ok_or_else(|| format!("merge {}: {s:?} is not in the vocabulary", r + 1))
            };
            let merged = id(&format!("{a}{b}"))?;
            // A repeated pair takes its later rank, as Python's dict(zip(..)) does.
            ranks.insert((id(a)?, id(b)?), (r as u32, merged));
        }
        let pat = Regex::new(
            r"(?i)<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+",
        )
        .expect("pattern");
        Ok(ClipTokenizer {
            byte_id,
            ranks,
            pat,
            sot: encoder["<|startoftext|>"],
            eot: encoder["<|endoftext|>"],
            vocab_size: vocab.len(),
        })
    }

    /// The BPE ids of one pre-tokenised piece.
    fn bpe(&self, piece: &str, out: &mut Vec<u32>) {
        if piece == "<|startoftext|>" {
            return out.push(self.sot);
        }
        if piece == "<|endoftext|>" {
            return out.push(self.eot);
        }
        let mut word: Vec<u32> = piece.bytes().map(|b| self.byte_id[b as usize]).collect();
        let Some(last) = word.last_mut() else { return };
        *last += 256; // the `</w>` form of the last symbol
        while word.len() > 1 {
            let best = word
                .windows(2)
                .filter_map(|w| self.ranks.get(&(w[0], w[1])).map(|&r| (r, (w[0], w[1]))))
                .min_by_key(|(r, _)| r.0);
            let Some(((_, merged), (a, b))) = best else {
                break;
            };
            let mut next = Vec::with_capacity(word.len());
            let mut i = 0;
            while i < word.len() {
                if i + 1 < word.len() && word[i] == a && word[i + 1] == b {
                    next.push(merged);
                    i += 2;
                } else {
                    next.push(word[i]);
                    i += 1;
                }
            }
            word = next;
        }
        out.extend_from_slice(&word);
    }

    /// The ids of `text` (cleaned), without framing; `cache` memoises pieces.
    pub fn encode(&self, text: &str, cache: &mut FastMap<String, Vec<u32>>) -> Vec<u32> {
        self.encode_at_most(text, usize::MAX, cache)
    }

    /// The first ids of `text`: stops once it has `max` (a caption's tail past the
    /// context is never encoded). A piece longer than [`MAX_PIECE`] bytes (never a
    /// word) is cut there first, so BPE, quadratic in a piece's length, stays bounded.
    fn encode_at_most(
        &self,
        text: &str,
        max: usize,
        cache: &mut FastMap<String, Vec<u32>>,
    ) -> Vec<u32> {
        let text = clean(text);
        let mut ids = Vec::new();
        for m in self.pat.find_iter(&text) {
            if ids.len() >= max {
                break;
            }
            let mut piece = m.as_str();
            if piece.len() > MAX_PIECE {
                let mut end = MAX_PIECE;
                while !piece.is_char_boundary(end) {
                    end -= 1;
                }
                piece = &piece[..end];
            }
            if let Some(v) = cache.get(piece) {
                ids.extend_from_slice(v);
                continue;
            }
            let mut v = Vec::new();
            self.bpe(piece, &mut v);
            ids.extend_from_slice(&v);
            if cache.len() < 100_000 {
                cache.insert(piece.to_string(), v);
            }
        }
        ids
    }

    /// open_clip's `tokenize` of one text into `out` (its length is the context):
    /// start, ids, end; truncated with the end id last; zero padded.
    pub fn tokenize(&self, text: &str, out: &mut [i64], cache: &mut FastMap<String, Vec<u32>>) {
        out.fill(0);
        let n = out.len();
        if n == 0 {
            return;
        }
        // n − 1 ids are enough to know whether the text is truncated.
        let ids = self.encode_at_most(text, n.saturating_sub(1), cache);
        let all = std::iter::once(self.sot)
            .chain(ids)
            .chain(std::iter::once(self.eot));
        let mut len = 0;
        for (o, id) in out.iter_mut().zip(all) {
            *o = id as i64;
            len += 1;
        }
        if len == n {
            out[n - 1] = self.eot as i64;
        }
    }
}

/// Pieces are cut to this many bytes before BPE.
const MAX_PIECE: usize = 1024;

/// Windows-1252 for the C1 controls (ftfy's "sloppy" codec: unassigned bytes stay).
fn c1(c: char) -> char {
    const T: [u32; 32] = [
        0x20AC, 0x81, 0x201A, 0x192, 0x201E, 0x2026, 0x2020, 0x2021, 0x2C6, 0x2030, 0x160, 0x2039,
        0x152, 0x8D, 0x17D, 0x8F, 0x90, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
        0x2DC, 0x2122, 0x161, 0x203A, 0x153, 0x9D, 0x17E, 0x178,
    ];
    char::from_u32(T[c as usize - 0x80]).unwrap_or(c)
}

fn ligature(c: char) -> Option<&'static str> {
    Some(match c {
        'Ĳ' => "IJ",
        'ĳ' => "ij",
        'ŉ' => "ʼn",
        'Ǳ' => "DZ",
        'ǲ' => "Dz",
        'ǳ' => "dz",
        'Ǆ' => "DŽ",
        'ǅ' => "Dž",
        'ǆ' => "dž",
        'Ǉ' => "LJ",
        'ǈ' => "Lj",
        'ǉ' => "lj",
        'Ǌ' => "NJ",
        'ǋ' => "Nj",
        'ǌ' => "nj",
        'ﬀ' => "ff",
        'ﬁ' => "fi",
        'ﬂ' => "fl",
        'ﬃ' => "ffi",
        'ﬄ' => "ffl",
        'ﬅ' => "ſt",
        'ﬆ' => "st",
        _ => return None,
    })
}

fn is_control(c: char) -> bool {
    matches!(c as u32,
        0x00..=0x08 | 0x0B | 0x0E..=0x1F | 0x7F | 0x206A..=0x206F | 0xFEFF | 0xFFF9..=0xFFFC)
}

/// One pass of ftfy's character fixes, in its order.
fn fix_pass(s: &str) -> String {
    // fix_c1_controls, fix_latin_ligatures, fix_character_width, uncurl_quotes
    let mut a = String::with_capacity(s.len());
    for c in s.chars() {
        let c = if ('\u{80}'..='\u{9f}').contains(&c) {
            c1(c)
        } else {
            c
        };
        if let Some(l) = ligature(c) {
            a.push_str(l);
        } else if c == '\u{3000}' {
            a.push(' ');
        } else if ('\u{FF01}'..='\u{FFEF}').contains(&c) {
            a.extend(std::iter::once(c).nfkc());
        } else if c == '\u{02BC}' || ('\u{2018}'..='\u{201B}').contains(&c) {
            a.push('\'');
        } else if ('\u{201C}'..='\u{201F}').contains(&c) {
            a.push('"');
        } else {
            a.push(c);
        }
    }
    // fix_line_breaks
    if a.contains(['\r', '\u{2028}', '\u{2029}', '\u{85}']) {
        a = a
            .replace("\r\n", "\n")
            .replace(['\r', '\u{2028}', '\u{2029}', '\u{85}'], "\n");
    }
    // remove_terminal_escapes, then remove_control_chars
    if a.contains('\u{1b}') {
        static ANSI: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
        let re = ANSI.get_or_init(|| Regex::new(r"\x1b\[((?:\d|;)*)([a-zA-Z])").expect("ansi"));
        a = re.replace_all(&a, "").into_owned();
    }
    a.retain(|c| !is_control(c));
    a.as_str().nfc().collect()
}

/// CLIP's text cleaning (see the module docs).
pub fn clean(text: &str) -> String {
    let mut fixed = String::with_capacity(text.len());
    // ftfy unescapes HTML per line until the first line holding a '<'; its fixes run
    // until nothing changes.
    let mut unescape = true;
    for line in text.split_inclusive('\n') {
        unescape &= !line.contains('<');
        let mut s = line.to_string();
        for _ in 0..64 {
            let t = if unescape {
                fix_pass(&ftfy_unescape(&s))
            } else {
                fix_pass(&s)
            };
            if t == s {
                break;
            }
            s = t;
        }
        fixed.push_str(&s);
    }
    let once = python_unescape(&fixed);
    let twice = python_unescape(&once);
    let mut out = String::with_capacity(twice.len());
    for w in twice.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out.to_lowercase()
}

/// The tables of Python's `html.unescape` and ftfy's `unescape_html`
/// (html_entities.tsv, written by scripts/gen-html-entities.py).
struct Entities {
    html5: FastMap<&'static str, String>,
    upper: FastMap<&'static str, String>,
    charrefs: FastMap<u32, String>,
    invalid: super::FastSet<u32>,
}

static ENTITIES: std::sync::LazyLock<Entities> = std::sync::LazyLock::new(|| {
    let chars = |hex: &str| -> String {
        hex.split(' ')
            .filter(|h| !h.is_empty())
            .filter_map(|h| u32::from_str_radix(h, 16).ok().and_then(char::from_u32))
            .collect()
    };
    let mut e = Entities {
        html5: FastMap::default(),
        upper: FastMap::default(),
        charrefs: FastMap::default(),
        invalid: super::FastSet::default(),
    };
    for line in include_str!("html_entities.tsv").lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let num = || u32::from_str_radix(f[1], 16).unwrap_or(u32::MAX);
        match (f[0], f.len()) {
            ("E", 3) => drop(e.html5.insert(f[1], chars(f[2]))),
            ("U", 3) => drop(e.upper.insert(f[1], chars(f[2]))),
            ("C", 3) => drop(e.charrefs.insert(num(), chars(f[2]))),
            ("X", 2) => drop(e.invalid.insert(num())),
            _ => {}
        }
    }
    e
});

/// Python's `html.unescape`: named references from the HTML5 table (the longest
/// known prefix when the name is not one), numeric ones with the HTML5 rules for
/// invalid code points.
fn python_unescape(s: &str) -> std::borrow::Cow<'_, str> {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    if !s.contains('&') {
        return std::borrow::Cow::Borrowed(s);
    }
    let re = RE.get_or_init(|| {
        Regex::new(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\x0C <&#;]{1,32};?)").expect("charref")
    });
    re.replace_all(s, |c: &regex::Captures| replace_charref(&c[1]))
}

fn replace_charref(s: &str) -> String {
    let e = &*ENTITIES;
    if let Some(num) = s.strip_prefix('#') {
        let digits = num.trim_end_matches(';');
        let n = match digits.strip_prefix(['x', 'X']) {
            Some(h) => u32::from_str_radix(h, 16).ok(),
            None => digits.parse::<u32>().ok(),
        };
        // Too large for u32 is too large for Unicode.
        let Some(n) = n else {
            return "\u{FFFD}".into();
        };
        if let Some(v) = e.charrefs.get(&n) {
            return v.clone();
        }
        if (0xD800..=0xDFFF).contains(&n) || n > 0x10FFFF {
            return "\u{FFFD}".into();
        }
        if e.invalid.contains(&n) {
            return String::new();
        }
        return char::from_u32(n).map(String::from).unwrap_or_default();
    }
    if let Some(v) = e.html5.get(s) {
        return v.clone();
    }
    // The longest name that is a prefix (of two characters or more), as Python does.
    let starts: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
    for x in (2..starts.len()).rev() {
        if let Some(v) = e.html5.get(&s[..starts[x]]) {
            return format!("{v}{}", &s[starts[x]..]);
        }
    }
    format!("&{s}")
}

/// ftfy's `unescape_html`: `&name;` from the HTML5 table or its upper-cased variants,
/// `&#…;` only when Python decodes all of it.
fn ftfy_unescape(s: &str) -> std::borrow::Cow<'_, str> {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    if !s.contains('&') {
        return std::borrow::Cow::Borrowed(s);
    }
    let re = RE.get_or_init(|| Regex::new(r"&#?[0-9A-Za-z]{1,24};").expect("entity"));
    let e = &*ENTITIES;
    re.replace_all(s, |c: &regex::Captures| {
        let t = &c[0];
        let name = &t[1..];
        if let Some(v) = e.html5.get(name).or_else(|| e.upper.get(name)) {
            return v.clone();
        }
        if t.starts_with("&#") {
            let u = python_unescape(t);
            if !u.contains(';') {
                return u.into_owned();
            }
        }
        t.to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleaning_follows_ftfy_and_clip() {
        assert_eq!(
            clean("  It’s  “ﬁne”\r\n\tＦＵＬＬ&amp;amp; "),
            "it's \"fine\" full&"
        );
        assert_eq!(clean("a\u{85}b\u{1b}[31mred\u{7}"), "a…bred");
        assert_eq!(clean("<b>x&rsquo;s</b>"), "<b>x’s</b>");
        assert_eq!(clean("e\u{301}"), "é");
        // Python's html.unescape and ftfy's rules, as the review found them missing.
        assert_eq!(clean("&frac12; &copy 2020 P&EACUTE;REZ"), "½ © 2020 pérez");
        assert_eq!(clean("a&shy;b"), "a\u{ad}b");
        assert_eq!(
            clean("<b>&#146;&#0;&#28;x&#xD800;&#99999999999;"),
            "<b>’\u{fffd}x\u{fffd}\u{fffd}"
        );
        assert_eq!(clean("&amp;amp;amp;amp;lt;"), "<");
        assert_eq!(
            clean("&ntilde; &Ntilde; &NTILDE; &nTILDE;"),
            "ñ ñ ñ &ntilde;"
        );
    }

    #[test]
    fn alphabet_is_a_permutation_of_bytes() {
        let a = byte_alphabet();
        assert_eq!(a.len(), 256);
        let mut bytes: Vec<u8> = a.iter().map(|(b, _)| *b).collect();
        bytes.sort();
        assert!(bytes.iter().enumerate().all(|(i, &b)| i == b as usize));
        assert_eq!(a[0], (b'!', '!'));
        assert_eq!(a.iter().find(|(b, _)| *b == b' ').unwrap().1, 'Ġ');
    }

    /// A merges file with the full number of lines: a few real merges, then padding
    /// merges of unused symbols.
    fn toy() -> ClipTokenizer {
        let mut s = String::from("#version: 0.2\nh e\nl l\nhe ll\nhell o</w>\n");
        let mut n = 4;
        let alphabet: Vec<char> = byte_alphabet().iter().map(|(_, c)| *c).collect();
        'outer: for a in &alphabet {
            for b in &alphabet {
                if n == MERGES {
                    break 'outer;
                }
                if !(a.is_ascii_alphanumeric() && b.is_ascii_alphanumeric()) {
                    s.push_str(&format!("{a} {b}\n"));
                    n += 1;
                }
            }
        }
        ClipTokenizer::from_merges(&s).unwrap()
    }

    #[test]
    fn merges_by_rank_and_frames_like_open_clip() {
        let t = toy();
        assert_eq!(t.vocab_size, 49_408);
        assert_eq!((t.sot, t.eot), (49_406, 49_407));
        let mut cache = FastMap::default();
        // "hello" → he, ll → hell → hello</w>: one id, the fourth merge (512 + 3).
        assert_eq!(t.encode("Hello", &mut cache), vec![515]);
        // "hi": h + i</w> (no merge); '!' alone is '!</w>' = 256.
        let h = t.byte_id[b'h' as usize];
        let i = t.byte_id[b'i' as usize] + 256;
        assert_eq!(t.encode("hi !", &mut cache), vec![h, i, 256]);
        let mut out = [7i64; 6];
        t.tokenize("hello hello", &mut out, &mut cache);
        assert_eq!(out, [49_406, 515, 515, 49_407, 0, 0]);
        let mut short = [0i64; 3];
        t.tokenize("hello hello hello", &mut short, &mut cache);
        assert_eq!(short, [49_406, 515, 49_407]);
    }

    #[test]
    fn a_huge_caption_costs_only_its_context() {
        let t = toy();
        let mut cache = FastMap::default();
        let spam = format!("{} {}", "hello ".repeat(200_000), "x".repeat(1_000_000));
        // Without the early stop and the piece cap this runs for hours.
        let mut out = [0i64; 77];
        t.tokenize(&spam, &mut out, &mut cache);
        assert_eq!(out[0], 49_406);
        assert!(out[1..76].iter().all(|&x| x == 515));
        assert_eq!(out[76], 49_407);
        let mut one = [0i64; 4];
        t.tokenize(&"y".repeat(1_000_000), &mut one, &mut cache);
        assert_eq!(one[0], 49_406);
        assert_eq!(one[3], 49_407);
    }

    #[test]
    fn refuses_a_short_or_malformed_merges_file() {
        assert!(ClipTokenizer::from_merges("#v\na b\n").is_err());
        let e = ClipTokenizer::from_bytes(&[0x1f, 0x8b, 0, 1])
            .err()
            .unwrap();
        assert!(e.contains("gzip"), "{e}");
    }
}
