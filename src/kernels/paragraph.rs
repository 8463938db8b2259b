//! Paragraph and line dedup's text side (docs/DEDUP.md, "Repeated paragraphs and
//! lines"): a text cut into units (lines, or paragraphs with the blank lines after
//! them) that cover it without gaps, the 128-bit key of each unit's content (trimmed,
//! optionally normalised as CCNet does), and nothing else: the cut reuses the
//! substring kernel's byte spans over units. Pure: text in, numbers out.
use xxhash_rust::xxh3::xxh3_128_with_seed;

/// The seed of unit keys (fixed: keys are compared across tasks and jobs; not the
/// substring windows' seed, so a one-word window and a one-word line never meet).
const SEED: u64 = 0x6d64_665f_7061_7261; // "mdf_para"

/// What a unit of text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// One line, with its `\n`.
    Line,
    /// A run of lines with content and the blank lines after it.
    Paragraph,
}

impl Unit {
    /// The unit's name in the plural, as messages count them.
    pub fn plural(self) -> &'static str {
        match self {
            Unit::Line => "lines",
            Unit::Paragraph => "paragraphs",
        }
    }
}

/// The lines of a text as byte ranges: each ends after its `\n`, the last at the end
/// of the text (none for an empty text).
fn lines(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let b = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= b.len() {
            return None;
        }
        let end = memchr::memchr(b'\n', &b[at..]).map_or(b.len(), |i| at + i + 1);
        let r = (at, end);
        at = end;
        Some(r)
    })
}

/// How unit contents are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Normalize {
    /// Exactly (white space at both ends trimmed).
    None,
    /// As CCNet's `normalize_for_dedup` ([`normalize_ccnet`]).
    Ccnet,
    /// Case, digits, all punctuation and white space runs ignored ([`normalize_loose`]).
    Loose,
}

/// A line holding only Unicode White_Space (or nothing).
fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// The units of a text, as byte ranges that cover it in order without gaps. A
/// paragraph is a run of lines with content followed by the blank lines after it;
/// blank lines before the first paragraph belong to it.
pub fn units(text: &str, unit: Unit) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    match unit {
        Unit::Line => out.extend(lines(text).map(|(s, e)| (s as u32, e as u32))),
        Unit::Paragraph => {
            let (mut start, mut content, mut gap) = (0usize, false, false);
            for (s, e) in lines(text) {
                if !blank(&text[s..e]) {
                    if gap {
                        out.push((start as u32, s as u32));
                        start = s;
                        gap = false;
                    }
                    content = true;
                } else if content {
                    gap = true;
                }
            }
            if start < text.len() {
                out.push((start as u32, text.len() as u32));
            }
        }
    }
    out
}

/// The key of every unit with content, by the unit's position: `(position, key)`.
/// The content is the unit trimmed of white space at both ends, normalised as
/// `normalize` says; a unit whose content is empty (after normalising) has no key.
pub fn unit_hashes(text: &str, unit: Unit, normalize: Normalize) -> Vec<(u32, u128)> {
    let mut buf = String::new();
    units(text, unit)
        .into_iter()
        .enumerate()
        .filter_map(|(i, (s, e))| {
            let content = text[s as usize..e as usize].trim();
            let content = match normalize {
                Normalize::None => content,
                Normalize::Ccnet => {
                    normalize_ccnet(content, &mut buf);
                    buf.as_str()
                }
                Normalize::Loose => {
                    normalize_loose(content, &mut buf);
                    buf.as_str()
                }
            };
            (!content.is_empty()).then(|| (i as u32, xxh3_128_with_seed(content.as_bytes(), SEED)))
        })
        .collect()
}

/// [`unit_hashes`] of a batch of texts (`None`: no text, no keys), in parallel.
pub fn batch_unit_hashes(
    texts: &[Option<&str>],
    unit: Unit,
    normalize: Normalize,
) -> Vec<Vec<(u32, u128)>> {
    use rayon::prelude::*;
    texts
        .par_iter()
        .map(|t| t.map_or_else(Vec::new, |t| unit_hashes(t, unit, normalize)))
        .collect()
}

/// Sorted, disjoint inclusive code point ranges of a Unicode class.
type Ranges = Vec<(u32, u32)>;

fn class(pattern: &str) -> Ranges {
    use regex_syntax::hir::{Class, HirKind};
    let hir = regex_syntax::parse(pattern).expect("a valid class");
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => c
            .ranges()
            .iter()
            .map(|r| (r.start() as u32, r.end() as u32))
            .collect(),
        k => unreachable!("{pattern} is not a Unicode class: {k:?}"),
    }
}

fn contains(ranges: &[(u32, u32)], c: char) -> bool {
    let c = c as u32;
    let i = ranges.partition_point(|&(_, hi)| hi < c);
    i < ranges.len() && ranges[i].0 <= c
}

/// The classes normalisation reads: punctuation and controls (dropped), decimal
/// digits (made `0`), from the regex crate's Unicode tables.
struct Classes {
    drop: Ranges,
    digit: Ranges,
    /// ASCII answers: 1 = drop, 2 = digit.
    ascii: [u8; 128],
}

fn classes() -> &'static Classes {
    static C: std::sync::OnceLock<Classes> = std::sync::OnceLock::new();
    C.get_or_init(|| {
        let drop = class(r"[\p{P}\p{Cc}]");
        let digit = class(r"\p{Nd}");
        let mut ascii = [0u8; 128];
        for (b, a) in ascii.iter_mut().enumerate() {
            let c = b as u8 as char;
            *a = if contains(&drop, c) {
                1
            } else if contains(&digit, c) {
                2
            } else {
                0
            };
        }
        Classes { drop, digit, ascii }
    })
}

/// The punctuation CCNet's `normalize_for_dedup` removes (its `UNICODE_PUNCT` keys,
/// cc_net/text_normalizer.py); ASCII punctuation stays.
const CCNET_PUNCT: &str = "，。、„”“«»１」「《》´∶：？！（）；–—．～’…━〈〉【】％►";

/// CCNet's `normalize_for_dedup`, into `out`: the content stripped as Python's
/// `str.strip()` does (White_Space and U+001C..U+001F), lower-cased (Unicode full case
/// mapping, with the final sigma), every decimal digit (`Nd`, Python's `\d`) made `0`,
/// then its `UNICODE_PUNCT` characters and the non-printing code points 0–31 and
/// 127–159 removed. White space inside is kept as it is.
pub fn normalize_ccnet(content: &str, out: &mut String) {
    let c = classes();
    out.clear();
    let stripped =
        content.trim_matches(|ch: char| ch.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&ch));
    for ch in stripped.to_lowercase().chars() {
        let digit = if ch.is_ascii() {
            ch.is_ascii_digit()
        } else {
            contains(&c.digit, ch)
        };
        if digit {
            out.push('0');
        } else if !(CCNET_PUNCT.contains(ch)
            || (ch as u32) < 32
            || (127..160).contains(&(ch as u32)))
        {
            out.push(ch);
        }
    }
}

/// A looser normalisation than CCNet's, into `out`: lower case (Unicode full case
/// mapping, with the final sigma), then white space runs made one space and trimmed,
/// all punctuation (`P*`) and control characters (`Cc`) removed, and decimal digits
/// (`Nd`) replaced by `0`. White space is Unicode White_Space and is judged before the
/// controls, so a tab separates words as a space does.
pub fn normalize_loose(content: &str, out: &mut String) {
    let c = classes();
    out.clear();
    let lower = content.to_lowercase();
    let mut space = false;
    for ch in lower.chars() {
        if ch.is_whitespace() {
            space = true;
            continue;
        }
        let kind = if ch.is_ascii() {
            c.ascii[ch as usize]
        } else if contains(&c.drop, ch) {
            1
        } else if contains(&c.digit, ch) {
            2
        } else {
            0
        };
        if kind == 1 {
            continue;
        }
        if space && !out.is_empty() {
            out.push(' ');
        }
        space = false;
        out.push(if kind == 2 { '0' } else { ch });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts<'a>(t: &'a str, u: &[(u32, u32)]) -> Vec<&'a str> {
        u.iter().map(|&(s, e)| &t[s as usize..e as usize]).collect()
    }

    #[test]
    fn units_cover_the_text_in_order() {
        let t = "\n  \nHead\nline two\n\n \t\nSecond\r\n\nlast";
        assert_eq!(
            texts(t, &units(t, Unit::Line)),
            [
                "\n",
                "  \n",
                "Head\n",
                "line two\n",
                "\n",
                " \t\n",
                "Second\r\n",
                "\n",
                "last"
            ]
        );
        assert_eq!(
            texts(t, &units(t, Unit::Paragraph)),
            ["\n  \nHead\nline two\n\n \t\n", "Second\r\n\n", "last"]
        );
        for t in [
            "",
            "\n",
            "a",
            "a\n",
            "a\n\n",
            "\n\na\n\nb",
            "é\u{2028}\n\u{a0}\nx",
        ] {
            for u in [Unit::Line, Unit::Paragraph] {
                let us = units(t, u);
                assert_eq!(texts(t, &us).concat(), t, "{t:?} {u:?}");
                assert!(us.iter().all(|&(s, e)| s < e), "{t:?} {u:?}: {us:?}");
            }
        }
        assert!(units("", Unit::Paragraph).is_empty());
    }

    #[test]
    fn keys_are_of_trimmed_content_and_blank_units_have_none() {
        let a = unit_hashes("Menu\n\n  Menu  \nText\n \n", Unit::Line, Normalize::None);
        assert_eq!(a.iter().map(|x| x.0).collect::<Vec<_>>(), [0, 2, 3]);
        assert_eq!(a[0].1, a[1].1, "white space at the ends does not count");
        assert_ne!(a[0].1, a[2].1);
        let p = unit_hashes("Menu\n\nMenu\n\n\nMenu", Unit::Paragraph, Normalize::None);
        assert_eq!(p.len(), 3);
        assert!(p.iter().all(|x| x.1 == p[0].1));
        // The inside of a unit counts.
        let q = unit_hashes("a  b\n\na b", Unit::Paragraph, Normalize::None);
        assert_ne!(q[0].1, q[1].1);
        assert!(unit_hashes(" \n\t\n", Unit::Line, Normalize::Loose).is_empty());
        assert!(unit_hashes("...!!\n", Unit::Line, Normalize::Loose).is_empty());
        assert!(unit_hashes("…！\n", Unit::Line, Normalize::Ccnet).is_empty());
        assert_eq!(unit_hashes("...!!\n", Unit::Line, Normalize::None).len(), 1);
        assert_eq!(
            unit_hashes("...!!\n", Unit::Line, Normalize::Ccnet).len(),
            1
        );
    }

    #[test]
    fn normalisations() {
        let n = |s: &str, f: fn(&str, &mut String)| {
            let mut o = String::new();
            f(s, &mut o);
            o
        };
        let loose = |s: &str| n(s, normalize_loose);
        let ccnet = |s: &str| n(s, normalize_ccnet);
        assert_eq!(loose("  Hello, World!  2024 "), "hello world 0000");
        assert_eq!(ccnet("  Hello, World!  2024 "), "hello, world!  0000");
        assert_eq!(loose("ΣΟΦΟΣ"), "σοφος", "the final sigma");
        assert_eq!(ccnet("ΣΟΦΟΣ"), "σοφος", "the final sigma");
        assert_eq!(loose("a\tb\u{a0}\u{3000}c"), "a b c");
        assert_eq!(
            ccnet("a\tb\u{a0}c"),
            "ab\u{a0}c",
            "a tab is non-printing to CCNet"
        );
        assert_eq!(loose("«Ça va?» — oui…"), "ça va oui");
        assert_eq!(ccnet("«Ça va?» — oui…"), "ça va?  oui");
        assert_eq!(
            loose("١٢٣ ४२"),
            "000 00",
            "Arabic-Indic and Devanagari digits"
        );
        assert_eq!(
            ccnet("０２３ | 01１"),
            "000 | 000",
            "fullwidth digits are digits first"
        );
        assert_eq!(
            loose("$5 + 3 = 8 ^_^"),
            "$0 + 0 = 0 ^^",
            "symbols stay, _ is punctuation"
        );
        assert_eq!(loose("a\u{1}b\u{7f}c"), "abc");
        assert_eq!(ccnet("\u{1c} a\u{85}b\u{9f}c \u{1f}"), "abc");
        assert_eq!(loose("İ"), "i\u{307}");
        assert_eq!(
            unit_hashes("Share this: Facebook", Unit::Line, Normalize::Loose),
            unit_hashes("SHARE THIS  facebook!", Unit::Line, Normalize::Loose)
        );
    }
}
