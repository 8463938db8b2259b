//! spaCy's English tokenizer, the one datatrove 0.10.1 cuts English words and
//! sentences with: its own prefix, suffix, infix and URL patterns and its special cases
//! (generated from spaCy into `spacy_tables.rs` by `scripts/gen-spacy-en.py`), applied
//! by the algorithm of spaCy's `Tokenizer` (`_split_affixes` and `_attach_tokens`).
//! White-space tokens are dropped, as datatrove's `strip_strings` drops them. The
//! `words: spacy` option of the Gopher and FineWeb rules and the sentence count of
//! C4 (docs/FILTERS.md).
use super::spacy_tables::{INFIX, MATCHER, PREFIX, SPECIALS, SUFFIX, URL};
use crate::kernels::decont::push_parts;
use fancy_regex::Regex;
use std::sync::LazyLock;

struct En {
    #[cfg(test)]
    prefix: Regex,
    #[cfg(test)]
    suffix: Regex,
    infix: Regex,
    url: Regex,
}

static EN: LazyLock<En> = LazyLock::new(|| {
    let re = |p: &str| Regex::new(p).expect("spaCy's English patterns compile");
    En {
        // Anchored as a whole: each branch starts with `^`, but an unanchored search
        // would still try them all at every position.
        #[cfg(test)]
        prefix: re(&format!("^(?:{PREFIX})")),
        #[cfg(test)]
        suffix: re(SUFFIX),
        infix: re(INFIX),
        url: re(URL),
    }
});

/// The prefix and suffix patterns on the `regex` crate (finite automata, linear in the
/// text), for the ends that are not ASCII. On fancy-regex's backtracking VM one suffix
/// search took 45–95 µs, so a run of non-ASCII marks (`哈哈！！！…`, `»»»`, emoji),
/// one suffix per step of the affix loop, cut a page at 20–60 KB/s. The look-around
/// they hold moves out: the prefix's one look-ahead (`^\+(?![0-9])`) is on an ASCII
/// `+`, answered by hand; each suffix `(?<=X)Y$` becomes `X(Y)$`, its own automaton
/// (`X` is fixed-width, so the leftmost match has the longest `Y`). Python's
/// alternation and the `regex` crate's are both leftmost-first, and every suffix
/// ends at `$`, so the longest suffix any branch matches is the one spaCy takes.
/// Kept equal to the patterns by `automata_are_the_patterns`.
struct Automata {
    prefix: regex::Regex,
    /// The suffix branches without look-behind, as one.
    suffix: regex::Regex,
    /// The look-behind branches, `X(Y)$` each.
    suffix_behind: Vec<regex::Regex>,
}

/// Calls `f` with each character of a pattern outside escapes and classes and the group
/// depth after it (`(` one more, `)` one less), until `f` answers false.
fn walk(p: &str, mut f: impl FnMut(usize, char, i32) -> bool) {
    let (mut depth, mut class, mut esc) = (0i32, false, false);
    for (i, c) in p.char_indices() {
        if esc {
            esc = false;
            continue;
        }
        match c {
            '\\' => {
                esc = true;
                continue;
            }
            '[' if !class => {
                class = true;
                continue;
            }
            ']' if class => {
                class = false;
                continue;
            }
            _ if class => continue,
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        if !f(i, c, depth) {
            return;
        }
    }
}

/// The top-level branches of a pattern (split at `|` outside classes and groups).
fn branches(p: &str) -> Vec<&str> {
    let (mut out, mut start) = (Vec::new(), 0);
    walk(p, |i, c, depth| {
        if c == '|' && depth == 0 {
            out.push(&p[start..i]);
            start = i + 1;
        }
        true
    });
    out.push(&p[start..]);
    out
}

/// `(?<=X)Y` as `(X, Y)`; `None` for a branch without look-behind.
fn look_behind(b: &str) -> Option<(&str, &str)> {
    if !b.starts_with("(?<=") {
        return None;
    }
    let mut close = None;
    walk(b, |i, c, depth| {
        if c == ')' && depth == 0 {
            close = Some(i);
        }
        close.is_none()
    });
    let close = close?;
    Some((&b[4..close], &b[close + 1..]))
}

static AUTOMATA: LazyLock<Automata> = LazyLock::new(|| {
    let re = |p: &str| regex::Regex::new(p).expect("spaCy's patterns compile as automata");
    let prefix: Vec<&str> = branches(PREFIX)
        .into_iter()
        .filter(|b| !b.contains("(?!"))
        .collect();
    let (mut plain, mut behind) = (Vec::new(), Vec::new());
    for b in branches(SUFFIX) {
        match look_behind(b) {
            Some((x, y)) => behind.push(re(&format!("(?:{x})({y})"))),
            None => plain.push(b),
        }
    }
    Automata {
        prefix: re(&format!("^(?:{})", prefix.join("|"))),
        suffix: re(&format!("(?:{})", plain.join("|"))),
        suffix_behind: behind,
    }
});

/// Whether spaCy's English tokenizer has a special case for exactly `s`.
pub(super) fn is_special(s: &str) -> bool {
    special::<true>(s).is_some()
}

/// The special case for exactly `s`: English's (`EXCEPTIONS`), or none (the language-neutral
/// rules of the `uax29` split).
fn special<const EXCEPTIONS: bool>(s: &str) -> Option<&'static [&'static str]> {
    if !EXCEPTIONS {
        return None;
    }
    SPECIALS
        .binary_search_by(|(k, _)| (*k).cmp(s))
        .ok()
        .map(|i| SPECIALS[i].1)
}

fn push<'a, const EXCEPTIONS: bool>(s: &'a str, out: &mut Vec<&'a str>) {
    match special::<EXCEPTIONS>(s) {
        Some(p) => push_parts(s, p, out),
        None => out.push(s),
    }
}

fn prefix_len(s: &str) -> usize {
    if let Some(n) = prefix_ascii(s) {
        return n;
    }
    // Not ASCII first: the look-ahead branch (an ASCII `+`) cannot match.
    AUTOMATA.prefix.find(s).map_or(0, |m| m.end())
}

/// ASCII punctuation that is a prefix and a suffix of its own (spaCy's `LIST_PUNCT` and
/// `LIST_QUOTES`, the ASCII ones).
fn affix_punct(c: u8) -> bool {
    matches!(
        c,
        b',' | b':'
            | b';'
            | b'!'
            | b'?'
            | b'('
            | b')'
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'<'
            | b'>'
            | b'_'
            | b'#'
            | b'*'
            | b'&'
            | b'\''
            | b'"'
            | b'`'
    )
}

/// [`prefix_len`] when `s` starts with an ASCII character: the patterns' ASCII
/// branches by hand (`US$` the longest but for a run of periods, measured whole).
/// `None` leaves it to the patterns. Kept equal to them by
/// `affixes_by_hand_are_the_patterns`.
fn prefix_ascii(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let &c = b.first()?;
    if !c.is_ascii() {
        return None;
    }
    Some(match c {
        // `\+(?![0-9])`
        b'+' => usize::from(!b.get(1).is_some_and(u8::is_ascii_digit)),
        // `\.\.+`
        b'.' => match b.iter().take_while(|&&x| x == b'.').count() {
            1 => 0,
            n => n,
        },
        b'%' | b'=' | b'$' => 1,
        c if affix_punct(c) => 1,
        b'U' if b.starts_with(b"US$") => 3,
        b'C' | b'A' if b.get(1) == Some(&b'$') => 2,
        _ => 0,
    })
}

/// The units spaCy's suffix cuts off a number, the ASCII ones (`(?<=[0-9])(?:km|...)`).
const ASCII_UNITS: &[&str] = &[
    "km", "m", "dm", "cm", "mm", "ha", "nm", "yd", "in", "ft", "kg", "g", "mg", "t", "lb", "oz",
    "m/s", "km/h", "kmh", "mph", "hPa", "Pa", "mbar", "mb", "MB", "kb", "KB", "gb", "GB", "tb",
    "TB", "T", "G", "M", "K",
];

/// [`suffix_len`] when the end of `s` is ASCII: the patterns' ASCII branches by hand
/// (a period after a lower-case letter, a digit or punctuation, or after two upper-case
/// letters; units and currency after a digit; `'s`). `None` where a character the
/// answer depends on is not ASCII. Only for an `s` that does not end in two or more
/// periods ([`suffix_len`] measures that run first). Kept equal to the patterns by
/// `affixes_by_hand_are_the_patterns`.
fn suffix_ascii(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let n = b.len();
    let &c = b.last()?;
    let before = |k: usize| n.checked_sub(k + 1).map(|i| b[i]);
    let digit_before = |k: usize| before(k).is_some_and(|x| x.is_ascii_digit());
    if !c.is_ascii() {
        return None;
    }
    Some(match c {
        c if affix_punct(c) => 1,
        b'+' | b'%' => usize::from(digit_before(1)),
        b'$' => {
            if b.ends_with(b"US$") && digit_before(3) {
                3
            } else if (b.ends_with(b"C$") || b.ends_with(b"A$")) && digit_before(2) {
                2
            } else {
                usize::from(digit_before(1))
            }
        }
        b'.' => {
            let p = before(1)?;
            if !p.is_ascii() {
                return None;
            }
            // `(?<=[0-9{al}{e}{p}(?:{q})])\.`: its class, the ASCII members.
            if p.is_ascii_lowercase()
                || p.is_ascii_digit()
                || matches!(p, b'%' | b'-' | b'+' | b'|')
                || affix_punct(p)
            {
                1
            } else if p.is_ascii_uppercase() {
                match before(2) {
                    None => 0,
                    Some(q) if !q.is_ascii() => return None,
                    Some(q) => usize::from(q.is_ascii_uppercase()),
                }
            } else {
                0
            }
        }
        c if c.is_ascii_alphabetic() => {
            // The letters at the end, and what comes before them.
            let run = b
                .iter()
                .rev()
                .take_while(|x| x.is_ascii_alphabetic())
                .count();
            if before(run).is_some_and(|x| !x.is_ascii()) {
                // `µm`, `’s`, a letter the period rule's classes name.
                return None;
            }
            let mut best = 0;
            if (c == b's' || c == b'S') && before(1) == Some(b'\'') {
                best = 2;
            }
            for u in ASCII_UNITS {
                let u = u.as_bytes();
                if u.len() > best && b.ends_with(u) && digit_before(u.len()) {
                    best = u.len();
                }
            }
            best
        }
        _ => 0,
    })
}

/// The suffix at the end of `s`: searched in its last 48 characters (every suffix
/// pattern is a few characters with at most two of look-behind), but for a run of
/// periods (`\.\.+`, the one that can be long), measured whole.
fn suffix_len(s: &str) -> usize {
    let dots = s.len() - s.trim_end_matches('.').len();
    if dots >= 2 {
        return dots;
    }
    if let Some(n) = suffix_ascii(s) {
        return n;
    }
    let start = s.char_indices().rev().nth(47).map_or(0, |(i, _)| i);
    let w = &s[start..];
    let a = &*AUTOMATA;
    let mut best = a.suffix.find(w).map_or(0, |m| m.len());
    for r in &a.suffix_behind {
        if let Some(y) = r.captures(w).and_then(|c| c.get(1)) {
            best = best.max(y.len());
        }
    }
    best
}

/// Spans longer than this (bytes) are cut by UAX #29 instead: spaCy's affix loop is
/// quadratic in a run of affixes, and no word is this long.
const MAX_SPAN: usize = 1000;

/// Spans at most this long (bytes) are remembered: words; not base64 or minified code.
const MAX_CACHED: usize = 64;

fn matcher(key: &str) -> Option<&'static [&'static str]> {
    MATCHER
        .binary_search_by(|(k, _)| (*k).cmp(key))
        .ok()
        .map(|i| MATCHER[i].1)
}

/// The most tokens a special-case matcher pattern has (`MATCHER`).
const MAX_SPECIAL_TOKENS: usize = 11;

type SpanCache = std::cell::RefCell<crate::kernels::FastMap<Box<str>, Box<[u16]>>>;

thread_local! {
    /// Spans seen on this thread and where their tokens end (spaCy keeps such a cache
    /// too): words repeat, and the patterns are slow to run. One per rule set: with
    /// English's special cases, and without.
    static CACHE: SpanCache = SpanCache::default();
    static CACHE_NEUTRAL: SpanCache = SpanCache::default();
}

/// Spans the cache holds at most before it starts over.
const CACHE_SPANS: usize = 200_000;

/// One run of text without white space, as spaCy cuts it ([`span_uncached`]),
/// remembered per thread.
fn span<'a, const EXCEPTIONS: bool>(s: &'a str, out: &mut Vec<&'a str>) {
    // A word of letters (Unicode L*) only has no affix, infix or URL in it: it is
    // itself or a special case (`dont`, `Im`).
    if s.chars().all(is_letter) {
        push::<EXCEPTIONS>(s, out);
        return;
    }
    if s.len() > MAX_SPAN {
        super::segment::plain_uax29_span(s, out);
        return;
    }
    if s.len() > MAX_CACHED {
        span_uncached::<EXCEPTIONS>(s, out);
        return;
    }
    let cache = if EXCEPTIONS { &CACHE } else { &CACHE_NEUTRAL };
    let hit = cache.with(|c| {
        c.borrow().get(s).map(|ends| {
            let mut at = 0;
            for &e in ends.iter() {
                out.push(&s[at..e as usize]);
                at = e as usize;
            }
        })
    });
    if hit.is_some() {
        return;
    }
    let first = out.len();
    span_uncached::<EXCEPTIONS>(s, out);
    let base = s.as_ptr() as usize;
    let ends: Box<[u16]> = out[first..]
        .iter()
        .map(|t| (t.as_ptr() as usize - base + t.len()) as u16)
        .collect();
    cache.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CACHE_SPANS {
            c.clear();
        }
        c.insert(s.into(), ends);
    });
}

/// A letter as Python's `str.isalpha` has it (Unicode L*): not the enclosed letters
/// (`ⓐ`, `🄰`) that spaCy's symbol classes cut off.
fn is_letter(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphabetic();
    }
    static L: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"^\p{L}$").expect("letters"));
    let mut b = [0u8; 4];
    c.is_alphabetic() && L.is_match(c.encode_utf8(&mut b))
}

/// One run of text without white space, as spaCy cuts it: `_tokenize`, then its
/// special-case matcher (`_retokenize_special_spans`): a run of tokens that is a
/// matcher key's own tokens becomes that special case, longest first, leftmost first.
/// (spaCy's matcher also matches across a single space; here it stays in a span.)
fn span_uncached<'a, const EXCEPTIONS: bool>(s: &'a str, out: &mut Vec<&'a str>) {
    let mut toks = Vec::new();
    cut::<EXCEPTIONS>(s, &mut toks);
    if !EXCEPTIONS || toks.len() < 2 {
        out.extend(toks);
        return;
    }
    let base = s.as_ptr() as usize;
    let at = |t: &str| t.as_ptr() as usize - base;
    let mut i = 0;
    while i < toks.len() {
        let mut joined = false;
        for n in (2..=MAX_SPECIAL_TOKENS.min(toks.len() - i)).rev() {
            let (a, z) = (at(toks[i]), at(toks[i + n - 1]) + toks[i + n - 1].len());
            let key = &s[a..z];
            if matcher(key).is_some_and(|pat| pat == &toks[i..i + n])
                && let Some(p) = special::<EXCEPTIONS>(key)
            {
                push_parts(key, p, out);
                i += n;
                joined = true;
                break;
            }
        }
        if !joined {
            out.push(toks[i]);
            i += 1;
        }
    }
}

/// One run of text without white space, as spaCy's `_tokenize` cuts it.
fn cut<'a, const EXCEPTIONS: bool>(s: &'a str, out: &mut Vec<&'a str>) {
    if let Some(p) = special::<EXCEPTIONS>(s) {
        push_parts(s, p, out);
        return;
    }
    // _split_affixes: prefixes and suffixes off the ends while they come off.
    let mut prefixes: Vec<&'a str> = Vec::new();
    let mut suffixes: Vec<&'a str> = Vec::new();
    let mut string = s;
    let mut last = usize::MAX;
    while !string.is_empty() && string.len() != last {
        if special::<EXCEPTIONS>(string).is_some() {
            break;
        }
        last = string.len();
        let pre = prefix_len(string);
        if pre != 0 {
            let minus_pre = &string[pre..];
            if !minus_pre.is_empty() && special::<EXCEPTIONS>(minus_pre).is_some() {
                prefixes.push(&string[..pre]);
                string = minus_pre;
                break;
            }
        }
        let suf = suffix_len(&string[pre..]);
        if suf != 0 {
            let minus_suf = &string[..string.len() - suf];
            if !minus_suf.is_empty() && special::<EXCEPTIONS>(minus_suf).is_some() {
                suffixes.push(&string[string.len() - suf..]);
                string = minus_suf;
                break;
            }
        }
        if pre != 0 && suf != 0 && pre + suf <= string.len() {
            prefixes.push(&string[..pre]);
            suffixes.push(&string[string.len() - suf..]);
            string = &string[pre..string.len() - suf];
        } else if pre != 0 {
            prefixes.push(&string[..pre]);
            string = &string[pre..];
        } else if suf != 0 {
            suffixes.push(&string[string.len() - suf..]);
            string = &string[..string.len() - suf];
        }
        if special::<EXCEPTIONS>(string).is_some() {
            break;
        }
    }
    // _attach_tokens: the prefixes, the middle (a special case, a URL, or cut at its
    // infixes), the suffixes innermost first.
    for p in prefixes {
        push::<EXCEPTIONS>(p, out);
    }
    if !string.is_empty() {
        if let Some(p) = special::<EXCEPTIONS>(string) {
            push_parts(string, p, out);
        } else if string.contains('.') && EN.url.is_match(string).unwrap_or(false) {
            // (Every address the pattern takes has a period in its host.)
            out.push(string);
        } else if no_infix(string) {
            out.push(string);
        } else {
            let mut start = 0;
            for m in EN.infix.find_iter(string).flatten() {
                // An infix at the very start does not cut.
                if m.start() == 0 {
                    continue;
                }
                if m.start() != start {
                    out.push(&string[start..m.start()]);
                }
                if m.start() != m.end() {
                    out.push(&string[m.start()..m.end()]);
                }
                start = m.end();
            }
            if start < string.len() {
                out.push(&string[start..]);
            }
        }
    }
    for s in suffixes.into_iter().rev() {
        push::<EXCEPTIONS>(s, out);
    }
}

/// Whether the infix pattern cannot match in `s`: ASCII without any character an
/// infix is made of (every other infix is a non-ASCII symbol or dash).
fn no_infix(s: &str) -> bool {
    s.is_ascii()
        && !s.bytes().any(|b| {
            matches!(
                b,
                b'.' | b'+' | b'-' | b'*' | b'^' | b',' | b'~' | b':' | b'<' | b'>' | b'=' | b'/'
            )
        })
}

/// The words of `text` as datatrove's English word tokenizer gives them: spaCy's
/// tokens without the white-space ones, appended to `out`.
pub fn tokens<'a>(text: &'a str, out: &mut Vec<&'a str>) {
    super::segment::for_each_span(text, |s| span::<true>(s, out));
}

/// One run of text without white space cut by the patterns alone: spaCy's prefix,
/// suffix, infix and URL patterns as English uses them (built from spaCy's character
/// classes, which cover every script it knows), without English's special cases
/// (abbreviations, contractions, emoticons). The base of the `uax29` split.
pub(super) fn neutral_span<'a>(s: &'a str, out: &mut Vec<&'a str>) {
    span::<false>(s, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(t: &str) -> Vec<&str> {
        let mut v = Vec::new();
        tokens(t, &mut v);
        v
    }

    /// What datatrove's `split_into_words` (spaCy 3.8.18, English) answers for the same
    /// texts.
    #[test]
    fn words_as_datatrove_cuts_them() {
        let cases: &[(&str, &[&str])] = &[
            ("____ x", &["_", "_", "_", "_", "x"]),
            ("06-29-2004", &["06", "-", "29", "-", "2004"]),
            ("at 04:19 pm", &["at", "04:19", "pm"]),
            ("(773) 553-2105", &["(", "773", ")", "553", "-", "2105"]),
            ("wait.... now", &["wait", "....", "now"]),
            ("$100 and 50%", &["$", "100", "and", "50", "%"]),
            ("U.S.A. and A.B.C.", &["U.S.A.", "and", "A.B.C."]),
            ("x--y", &["x", "--", "y"]),
            ("http://x.com/a,", &["http://x.com/a", ","]),
            ("foo@bar.com", &["foo@bar.com"]),
            ("C++ and C#", &["C++", "and", "C", "#"]),
            ("co-op's", &["co", "-", "op", "'s"]),
            ("hello!!!", &["hello", "!", "!", "!"]),
            ("„Hallo“", &["„", "Hallo", "“"]),
            (
                "rock'n'roll 10,000.50 a,b",
                &["rock'n'roll", "10,000.50", "a", ",", "b"],
            ),
            (
                "end.\" Mr. Smith i.e. this etc.",
                &["end", ".", "\"", "Mr.", "Smith", "i.e.", "this", "etc", "."],
            ),
            ("dont cannot Im", &["do", "nt", "can", "not", "I", "m"]),
            (
                "He lives in the USA. Then",
                &["He", "lives", "in", "the", "USA", ".", "Then"],
            ),
            (
                "ihn entführen.In der",
                &["ihn", "entführen", ".", "In", "der"],
            ),
            (
                "/etc/hosts and/or 1/2",
                &["/etc", "/", "hosts", "and/or", "1/2"],
            ),
            ("Meet on Wed. The", &["Meet", "on", "We", "d.", "The"]),
            ("user id. Then", &["user", "i", "d.", "Then"]),
            ("x><(((*> fish", &["x", "><(((*>", "fish"]),
            ("ⓐⓑⓒ", &["ⓐ", "ⓑ", "ⓒ"]),
        ];
        for (text, want) in cases {
            assert_eq!(&toks(text), want, "{text:?}");
        }
    }

    /// The automata answer as the patterns do where an end is not ASCII: on every
    /// character the patterns name (literally or as a range's end) and every 251st code
    /// point, alone and beside the characters a look-behind or a longer branch turns
    /// on, and on every pair of the characters the patterns name literally.
    #[test]
    fn automata_are_the_patterns() {
        let escaped = |src: &str| -> Vec<char> {
            let b = src.as_bytes();
            let mut out = Vec::new();
            for i in 0..b.len() {
                let n = match (b[i], b.get(i + 1)) {
                    (b'\\', Some(b'u')) => 4,
                    (b'\\', Some(b'U')) => 8,
                    _ => continue,
                };
                if let Some(h) = src.get(i + 2..i + 2 + n)
                    && let Ok(v) = u32::from_str_radix(h, 16)
                    && let Some(c) = char::from_u32(v)
                {
                    out.push(c);
                }
            }
            out
        };
        let mut literal: Vec<char> = format!("{PREFIX}{SUFFIX}")
            .chars()
            .filter(|c| !c.is_ascii())
            .collect();
        literal.sort_unstable();
        literal.dedup();
        let mut chars = literal.clone();
        chars.extend(escaped(PREFIX));
        chars.extend(escaped(SUFFIX));
        chars.extend((0x80..0x11_0000).step_by(251).filter_map(char::from_u32));
        chars.retain(|c| !c.is_ascii());
        chars.sort_unstable();
        chars.dedup();
        let mut checked = 0usize;
        let mut check = |t: &str| {
            assert_eq!(prefix_len(t), prefix_pattern(t), "prefix of {t:?}");
            assert_eq!(suffix_len(t), suffix_pattern(t), "suffix of {t:?}");
            checked += 1;
        };
        let ctx = [
            "", "5", "a", "A", "AB", "°", "°C", "中", "x5", "..", "’", "km",
        ];
        for &c in &chars {
            for x in ctx {
                check(&format!("{x}{c}"));
                check(&format!("{c}{x}"));
            }
        }
        for &a in &literal {
            for &b in &literal {
                check(&format!("{a}{b}"));
                check(&format!("5{a}{b}"));
            }
        }
        assert!(checked > 100_000, "{checked}");
    }

    fn prefix_pattern(s: &str) -> usize {
        EN.prefix.find(s).ok().flatten().map_or(0, |m| m.end())
    }

    fn suffix_pattern(s: &str) -> usize {
        EN.suffix
            .find(s)
            .ok()
            .flatten()
            .map_or(0, |m| m.end() - m.start())
    }

    /// The hand-written ASCII affixes, infix and URL shortcuts answer as spaCy's
    /// patterns do: every string of up to three characters over ASCII and a few
    /// characters the patterns name (`°`, `µ`, `’`, `é`, `É`, `中`, `…`), every unit
    /// and currency after a digit, a letter and a symbol, and every span of the tests'
    /// texts.
    #[test]
    fn affixes_by_hand_are_the_patterns() {
        let mut alphabet: Vec<char> = (0x20u8..0x7f).map(char::from).collect();
        alphabet.extend(['°', 'µ', '’', 'é', 'É', '中', '…', '\u{a0}']);
        let mut checked = 0usize;
        let mut check = |t: &str| {
            if let Some(n) = prefix_ascii(t) {
                assert_eq!(n, prefix_pattern(t), "prefix of {t:?}");
                checked += 1;
            }
            let dots = t.len() - t.trim_end_matches('.').len();
            if dots < 2
                && let Some(n) = suffix_ascii(t)
            {
                assert_eq!(n, suffix_pattern(t), "suffix of {t:?}");
                checked += 1;
            }
            if no_infix(t) {
                assert!(EN.infix.find(t).ok().flatten().is_none(), "infix in {t:?}");
            }
            if !t.contains('.') {
                assert!(!EN.url.is_match(t).unwrap_or(false), "URL {t:?}");
            }
        };
        let mut t = String::new();
        for &a in &alphabet {
            check(a.encode_utf8(&mut [0; 4]));
            for &b in &alphabet {
                t.clear();
                t.extend([a, b]);
                check(&t);
                for &c in &alphabet {
                    t.clear();
                    t.extend([a, b, c]);
                    check(&t);
                }
            }
        }
        let units = ASCII_UNITS.iter().copied().chain([
            "µm", "µg", "km²", "$", "US$", "C$", "A$", "€", "%", "+", "'s", "’s", "'S", ".",
        ]);
        for u in units {
            for pre in ["5", "a", "A", "°", "µ", ".", "5a", "55", "x5", "°5"] {
                for word in ["", "x", "X", "9"] {
                    check(&format!("{word}{pre}{u}"));
                }
            }
        }
        assert!(checked > 1_000_000, "{checked}");
    }

    /// Hostile spans end, and quickly: a long run of prefixes, a long word with a
    /// suffix, a megabyte without white space (cut by UAX #29 past `MAX_SPAN`).
    #[test]
    fn hostile_spans_are_bounded() {
        assert_eq!(toks(&("(".repeat(900) + "x")).len(), 901);
        assert_eq!(toks(&("$".repeat(990) + "x")).len(), 991);
        assert_eq!(toks(&("a".repeat(20_000) + ",")).len(), 2);
        assert!(!toks(&"a.".repeat(500_000)).is_empty());
    }
}
