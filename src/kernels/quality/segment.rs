//! Words and sentences as datatrove's English tokenizer (spaCy's) cuts them: the
//! `words: uax29` option of the Gopher and FineWeb rules; also the sentence count of C4
//! (spaCy's sentencizer over [`super::spacy`]'s tokens) and datatrove's punctuation
//! sets (docs/FILTERS.md).
//!
//! spaCy splits at white space (datatrove drops the white-space tokens it keeps), cuts
//! the rest at prefixes, suffixes and infixes, and keeps URLs and contractions' pieces
//! as its English exceptions say. The `uax29` split is its patterns without the English
//! exceptions, English clitics cut off (`do` `n't`, `it` `'s`), and Han and kana cut at
//! their Unicode word boundaries (UAX #29). UAX #29 alone (each punctuation character
//! a token, `10:14` three, `____` one) agreed with datatrove's Gopher verdicts on 95 %
//! of real pages; it still cuts runs too long for the patterns ([`plain_uax29_span`]).
use super::punct_tables::{PUNCTUATION_SET, SENTENCE_END, TERMINAL_PUNCTUATION};
use std::sync::LazyLock;
use unicode_segmentation::UnicodeSegmentation;

/// How a rule splits a text into words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WordSplit {
    /// White-space tokens with their leading and trailing punctuation cut off: fast.
    #[default]
    Whitespace,
    /// spaCy's patterns without English's special cases, Han and kana cut by Unicode
    /// word segmentation (UAX #29): language-neutral, close to datatrove's counts.
    Uax29,
    /// spaCy's English tokenizer itself (its patterns and special cases): the words
    /// datatrove counts.
    Spacy,
}

impl WordSplit {
    pub fn name(self) -> &'static str {
        match self {
            WordSplit::Whitespace => "whitespace",
            WordSplit::Uax29 => "uax29",
            WordSplit::Spacy => "spacy",
        }
    }

    pub fn parse(s: &str) -> Option<WordSplit> {
        match s {
            "whitespace" => Some(WordSplit::Whitespace),
            "uax29" => Some(WordSplit::Uax29),
            "spacy" => Some(WordSplit::Spacy),
            _ => None,
        }
    }
}

fn in_table(c: char, t: &[char]) -> bool {
    t.binary_search(&c).is_ok()
}

/// In datatrove's `PUNCTUATION_SET`: a Gopher word of these only is a symbol.
#[inline]
pub(super) fn symbol(c: char) -> bool {
    if c.is_ascii() {
        // ASCII punctuation and the control characters but tab and newline.
        c.is_ascii_punctuation() || (c.is_ascii_control() && c != '\t' && c != '\n')
    } else {
        in_table(c, PUNCTUATION_SET)
    }
}

/// In datatrove's `TERMINAL_PUNCTUATION`: a line ending in one ends FineWeb's way.
#[inline]
pub(super) fn terminal(c: char) -> bool {
    if c.is_ascii() {
        matches!(c, '.' | '!' | '?')
    } else {
        in_table(c, TERMINAL_PUNCTUATION)
    }
}

/// Python's `str.isspace` (what splits spaCy's tokens).
pub(super) fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// spaCy's `is_punct`: every character a Unicode punctuation (P*) character.
fn punct_token(t: &str) -> bool {
    static P: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"^\p{P}+$").expect("punctuation"));
    if t.is_ascii() {
        return !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_punctuation() && !b"$+<=>^`|~".contains(&b));
    }
    P.is_match(t)
}

/// A Unicode punctuation (P*) character, as spaCy's `is_punct` tests each one.
fn is_punct_char(c: char) -> bool {
    if c.is_alphanumeric() {
        return false;
    }
    let mut b = [0u8; 4];
    punct_token(c.encode_utf8(&mut b))
}

/// A URL spaCy keeps whole: a scheme or `www.` and no white space.
fn url_like(s: &str) -> bool {
    let l = s.as_bytes();
    let starts = |p: &[u8]| l.len() > p.len() && l[..p.len()].eq_ignore_ascii_case(p);
    starts(b"http://") || starts(b"https://") || starts(b"www.")
}

/// English clitics spaCy's exceptions cut off a word: `n't` and `'s`, `'re`, `'ve`,
/// `'ll`, `'d`, `'m` (either apostrophe), in lower case as its exceptions spell them
/// (`Don't` is `Do` `n't`; `DON'T` stays whole). The byte where the clitic starts.
fn clitic(w: &str) -> Option<usize> {
    for (i, c) in w.char_indices().rev().take(4) {
        if c != '\'' && c != '\u{2019}' {
            continue;
        }
        let rest = &w[i + c.len_utf8()..];
        let before = &w[..i];
        if rest == "t" && before.ends_with('n') && before.len() > 1 {
            return Some(i - 1);
        }
        if matches!(rest, "s" | "re" | "ve" | "ll" | "d" | "m")
            && before.chars().last().is_some_and(char::is_alphabetic)
        {
            return Some(i);
        }
    }
    None
}

/// One UAX #29 segment, cut at spaCy's infixes and clitics.
fn piece<'a>(seg: &'a str, out: &mut Vec<&'a str>) {
    let mut start = 0;
    let mut prev: Option<char> = None;
    let mut it = seg.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        let next = it.peek().map(|&(_, n)| n);
        let cut = match (prev, c, next) {
            (Some(p), '.', Some(n)) => p.is_lowercase() && n.is_uppercase(),
            (Some(p), ':', Some(n)) => p.is_alphanumeric() && n.is_alphabetic(),
            _ => false,
        };
        if cut {
            if start < i {
                push_word(&seg[start..i], out);
            }
            out.push(&seg[i..i + 1]);
            start = i + 1;
        }
        prev = Some(c);
    }
    if start < seg.len() {
        push_word(&seg[start..], out);
    }
}

fn push_word<'a>(w: &'a str, out: &mut Vec<&'a str>) {
    match clitic(w) {
        Some(k) if k > 0 => {
            out.push(&w[..k]);
            out.push(&w[k..]);
        }
        _ => out.push(w),
    }
}

/// A run without white space longer than spaCy's patterns are run on
/// ([`super::spacy`]'s `MAX_SPAN`): cut by UAX #29 alone, with a run of periods kept
/// as one token, `.` between a lower- and an upper-case letter and `:` before a letter
/// cut out, English clitics cut off and a URL kept whole.
pub(super) fn plain_uax29_span<'a>(s: &'a str, out: &mut Vec<&'a str>) {
    // A URL: its leading and trailing punctuation cut off, the rest one token.
    let core_start = s
        .char_indices()
        .find(|&(_, c)| !matches!(c, '(' | '[' | '<' | '"' | '\'' | '«' | '“' | '‘'))
        .map_or(s.len(), |(i, _)| i);
    if url_like(&s[core_start..]) {
        for (i, c) in s[..core_start].char_indices() {
            out.push(&s[i..i + c.len_utf8()]);
        }
        let core = &s[core_start..];
        let end = core
            .char_indices()
            .rev()
            .find(|&(_, c)| {
                !matches!(
                    c,
                    '.' | ','
                        | ')'
                        | ']'
                        | '>'
                        | '"'
                        | '\''
                        | '!'
                        | '?'
                        | ';'
                        | ':'
                        | '»'
                        | '”'
                        | '’'
                )
            })
            .map_or(0, |(i, c)| i + c.len_utf8());
        out.push(&core[..end]);
        for (i, c) in core[end..].char_indices() {
            out.push(&core[end + i..end + i + c.len_utf8()]);
        }
        return;
    }
    // Periods in a row are one token (an ellipsis), as spaCy's suffix rule makes them.
    let mut dots: Option<usize> = None;
    let base = s.as_ptr() as usize;
    for seg in s.split_word_bounds() {
        let at = seg.as_ptr() as usize - base;
        if seg == "." {
            if dots.is_none() {
                dots = Some(at);
            }
            continue;
        }
        if let Some(d) = dots.take() {
            out.push(&s[d..at]);
        }
        piece(seg, out);
    }
    if let Some(d) = dots {
        out.push(&s[d..]);
    }
}

/// Calls `f` with every run of `text` without white space (Python's `isspace`, what
/// spaCy splits at), in order.
pub(super) fn for_each_span<'a>(text: &'a str, mut f: impl FnMut(&'a str)) {
    let mut run_start = None;
    for (i, c) in text.char_indices() {
        match (py_space(c), run_start) {
            (true, Some(s)) => {
                f(&text[s..i]);
                run_start = None;
            }
            (false, None) => run_start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = run_start {
        f(&text[s..]);
    }
}

/// The words of `text` as the `uax29` split cuts them, appended to `out`: each run
/// without white space cut by spaCy's patterns without English's special cases
/// ([`super::spacy::neutral_span`]); English clitics cut off a word (`do` `n't`); a
/// piece holding Han or kana cut where UAX #29 puts a word boundary with Han or kana on
/// a side ([`cut_han_and_kana`]), where spaCy's English keeps a whole clause of them as
/// one token. White space is dropped as datatrove drops it.
pub fn uax29_tokens<'a>(text: &'a str, out: &mut Vec<&'a str>) {
    let mut toks = Vec::new();
    for_each_span(text, |s| {
        toks.clear();
        super::spacy::neutral_span(s, &mut toks);
        for &t in &toks {
            if url_like(t) {
                out.push(t);
            } else if !t.is_ascii() && t.chars().any(han_or_kana) {
                cut_han_and_kana(t, out);
            } else {
                push_word(t, out);
            }
        }
    });
}

/// A token holding Han or kana, cut at the UAX #29 word boundaries that have Han or kana
/// on a side (each ideograph, a run of katakana, CJK punctuation apart); the text
/// between them stays as the patterns cut it (`午前` `10:30`, not `10` `:` `30`).
fn cut_han_and_kana<'a>(t: &'a str, out: &mut Vec<&'a str>) {
    let base = t.as_ptr() as usize;
    let mut other: Option<usize> = None;
    for seg in t.split_word_bounds() {
        let at = seg.as_ptr() as usize - base;
        if seg.chars().any(han_or_kana) {
            if let Some(o) = other.take() {
                push_word(&t[o..at], out);
            }
            out.push(seg);
        } else if other.is_none() {
            other = Some(at);
        }
    }
    if let Some(o) = other {
        push_word(&t[o..], out);
    }
}

/// A character of a script written without spaces between words that UAX #29 cuts by
/// itself: Han ideographs and radicals, hiragana, katakana (also half-width and the
/// phonetic extensions), the kana supplements, the CJK symbols, punctuation and
/// enclosed forms. (Thai, Lao, Khmer and Myanmar need a dictionary to cut words;
/// UAX #29 alone cuts them letter by letter, so a run of them stays one word.)
fn han_or_kana(c: char) -> bool {
    matches!(
        c,
        '\u{2e80}'..='\u{2fdf}'
            | '\u{3000}'..='\u{30ff}'
            | '\u{31f0}'..='\u{33ff}'
            | '\u{3400}'..='\u{4dbf}'
            | '\u{4e00}'..='\u{9fff}'
            | '\u{f900}'..='\u{faff}'
            | '\u{ff01}'..='\u{ff9f}'
            | '\u{1b000}'..='\u{1b16f}'
            | '\u{20000}'..='\u{323af}'
    )
}

/// Python's `str.splitlines()` (what datatrove's C4 and Gopher rules cut lines with):
/// `\n`, `\r\n`, `\r`, `\v`, `\f`, `\x1c`–`\x1e`, `\x85`, U+2028 and U+2029 end a
/// line; a break at the very end makes no empty last line.
pub fn py_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let t = rest?;
        if t.is_empty() {
            rest = None;
            return None;
        }
        for (i, c) in t.char_indices() {
            let brk = matches!(
                c,
                '\n' | '\r'
                    | '\u{b}'
                    | '\u{c}'
                    | '\u{1c}'
                    | '\u{1d}'
                    | '\u{1e}'
                    | '\u{85}'
                    | '\u{2028}'
                    | '\u{2029}'
            );
            if brk {
                let mut next = i + c.len_utf8();
                if c == '\r' && t[next..].starts_with('\n') {
                    next += 1;
                }
                rest = Some(&t[next..]);
                return Some(&t[..i]);
            }
        }
        rest = None;
        Some(t)
    })
}

/// The words of `text` as `split` cuts them, appended to `out`.
pub fn split_words<'a>(text: &'a str, split: WordSplit, out: &mut Vec<&'a str>) {
    match split {
        WordSplit::Whitespace => super::for_each_word(text, |w| out.push(w)),
        WordSplit::Uax29 => uax29_tokens(text, out),
        WordSplit::Spacy => super::spacy::tokens(text, out),
    }
}

/// The number of sentences spaCy's sentencizer finds in `line` (datatrove's
/// `split_into_sentences` for English): a token of `SENTENCE_END` ends one, and the
/// next token that is not punctuation starts the next.
pub fn sentences(line: &str) -> usize {
    // Most lines end one sentence, at their end: when every sentence end is in the
    // line's closing run of punctuation and that run holds no white-space token, no
    // token after an end can start a sentence: one sentence, without tokenizing.
    let body = line.trim_end_matches(|c: char| is_punct_char(c) || py_space(c));
    let tail = &line[body.len()..];
    let tail_space = tail.contains(|c: char| py_space(c) && c != ' ') || tail.contains("  ");
    if !body.chars().any(sentence_end) && !tail_space {
        return 1;
    }
    // Otherwise the sentencizer's walk over the tokens, run by run. A white-space run is
    // a token (not punctuation) unless it is the one space after a token. Only a span
    // with a sentence end in it needs spaCy's cut; another holds no end token, and
    // starts a sentence exactly when it holds a token that is not punctuation, that is,
    // a character that is not.
    let mut s = Sentencizer::default();
    let mut toks = Vec::new();
    let mut run_start = 0;
    let mut in_space: Option<bool> = None;
    let mut flush = |from: usize, to: usize, space: bool, s: &mut Sentencizer| {
        if space {
            let from = if from > 0 && line[from..].starts_with(' ') {
                from + 1
            } else {
                from
            };
            if from < to {
                s.token(false, false);
            }
            return;
        }
        let span = &line[from..to];
        if !span.chars().any(sentence_end) {
            s.token(false, !span.chars().any(|c| !is_punct_char(c)));
            return;
        }
        // An ASCII word and one `!` or `?` (a suffix spaCy always cuts), or a word
        // ending in a lower-case letter and a `.` (its suffix rule), unless the span or
        // the word is a special case.
        let last = *span.as_bytes().last().expect("not empty");
        let mark = matches!(last, b'.' | b'!' | b'?');
        // An ASCII last byte is a whole character: the head ends on a boundary.
        let head = if mark { &span[..span.len() - 1] } else { "" };
        let plain_word = mark
            && !head.is_empty()
            && head.bytes().all(|b| b.is_ascii_alphabetic())
            && (last != b'.' || head.as_bytes()[head.len() - 1].is_ascii_lowercase())
            && !super::spacy::is_special(span)
            && !super::spacy::is_special(head);
        if plain_word {
            s.token(false, false);
            s.token(true, true);
            return;
        }
        toks.clear();
        super::spacy::tokens(span, &mut toks);
        for t in &toks {
            let mut cs = t.chars();
            let end = matches!((cs.next(), cs.next()), (Some(c), None) if sentence_end(c));
            s.token(end, end || punct_token(t));
        }
    };
    for (i, c) in line.char_indices() {
        let sp = py_space(c);
        if let Some(was) = in_space
            && was != sp
        {
            flush(run_start, i, was, &mut s);
            run_start = i;
        }
        in_space = Some(sp);
    }
    if let Some(was) = in_space {
        flush(run_start, line.len(), was, &mut s);
    }
    s.n.max(1)
}

fn sentence_end(c: char) -> bool {
    if c.is_ascii() {
        matches!(c, '.' | '!' | '?')
    } else {
        in_table(c, SENTENCE_END)
    }
}

/// spaCy's `Sentencizer.predict` over a stream of tokens: the first starts a
/// sentence; after an end token, the next token that is neither an end nor
/// punctuation starts the next.
#[derive(Default)]
struct Sentencizer {
    n: usize,
    seen_end: bool,
}

impl Sentencizer {
    #[inline]
    fn token(&mut self, end: bool, punct: bool) {
        if self.n == 0 {
            self.n = 1;
        } else if self.seen_end && !end && !punct {
            self.n += 1;
            self.seen_end = false;
            return;
        }
        if end {
            self.seen_end = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(t: &str) -> Vec<&str> {
        let mut v = Vec::new();
        uax29_tokens(t, &mut v);
        v
    }

    /// Token lists spaCy 3.8.18's blank English tokenizer gives for the same texts.
    #[test]
    fn tokens_as_spacy_cuts_them() {
        // datatrove drops spaCy's white-space tokens (`strip_strings`).
        assert_eq!(toks("Hello  world"), ["Hello", "world"]);
        assert_eq!(toks("Hello \nworld"), ["Hello", "world"]);
        assert_eq!(toks(" lead"), ["lead"]);
        assert_eq!(toks("Wait... what?"), ["Wait", "...", "what", "?"]);
        assert_eq!(toks("don't stop"), ["do", "n't", "stop"]);
        assert_eq!(toks("It's here."), ["It", "'s", "here", "."]);
        assert_eq!(
            toks("ihn entführen.In der"),
            ["ihn", "entführen", ".", "In", "der"]
        );
        assert_eq!(
            toks("see (https://example.com/a?b=1)."),
            ["see", "(", "https://example.com/a?b=1", ")", "."]
        );
        assert_eq!(toks("well-known 3.14"), ["well", "-", "known", "3.14"]);
    }

    /// Where UAX #29 alone cut otherwise than spaCy (the `uax29` split before session
    /// 32), the patterns now cut as spaCy 3.8.18 does: times, dates and paths whole,
    /// `_` one by one, hyphens at a word's start kept on it, a period after one
    /// capital or inside an abbreviation kept, `:)`-like pairs as spaCy's patterns
    /// leave them.
    #[test]
    fn punctuation_as_spacys_patterns_cut_it() {
        assert_eq!(
            toks("at 10:14 on 03/09/99, ____ x"),
            [
                "at", "10:14", "on", "03/09/99", ",", "_", "_", "_", "_", "x"
            ]
        );
        assert_eq!(
            toks("--all -e x--y A-9 A.D. S."),
            ["--all", "-e", "x", "--", "y", "A-9", "A.D.", "S."]
        );
        assert_eq!(
            toks("(1km) $100 50% /etc/hosts"),
            [
                "(", "1", "km", ")", "$", "100", "50", "%", "/etc", "/", "hosts"
            ]
        );
        assert_eq!(toks("we'll I've"), ["we", "'ll", "I", "'ve"]);
        assert_eq!(toks("Don't DON'T I'M"), ["Do", "n't", "DON'T", "I'M"]);
    }

    /// English's special cases are not applied: spaCy keeps `i.e.` and `Mr.` whole,
    /// cuts `cannot` and `:)` its own way; the `uax29` split cuts them by the patterns.
    #[test]
    fn english_special_cases_are_not_applied() {
        assert_eq!(toks("i.e. Mr. Smith"), ["i.e", ".", "Mr", ".", "Smith"]);
        assert_eq!(toks("cannot :)"), ["cannot", ":", ")"]);
        let mut spacy = Vec::new();
        split_words("i.e. Mr. Smith cannot :)", WordSplit::Spacy, &mut spacy);
        assert_eq!(spacy, ["i.e.", "Mr.", "Smith", "can", "not", ":)"]);
    }

    /// Han and kana are cut at their UAX #29 word boundaries (each ideograph, a run of
    /// katakana, punctuation apart), where spaCy's English keeps the clause whole; a
    /// script that UAX #29 would cut letter by letter (Thai) stays whole.
    #[test]
    fn han_and_kana_are_cut_by_uax29() {
        assert_eq!(
            toks("日本語のテキストです。中文，很难。"),
            [
                "日",
                "本",
                "語",
                "の",
                "テキスト",
                "で",
                "す",
                "。",
                "中",
                "文",
                "，",
                "很",
                "难",
                "。"
            ]
        );
        assert_eq!(toks("午前10:30に"), ["午", "前", "10:30", "に"]);
        assert_eq!(toks("𱍐𱍑"), ["𱍐", "𱍑"]);
        assert_eq!(toks("ภาษาไทย ok"), ["ภาษาไทย", "ok"]);
        assert_eq!(toks("한국어 문장입니다."), ["한국어", "문장입니다", "."]);
    }

    /// A run too long for the patterns (over 1,000 bytes) is cut by UAX #29 alone, in
    /// linear time: where the patterns keep `1:2` and cut `____` into four, UAX #29
    /// cuts at the colon and keeps a run of `_`.
    #[test]
    fn long_runs_are_cut_by_uax29_alone() {
        assert_eq!(toks("1:2"), ["1:2"]);
        assert_eq!(toks("____").len(), 4);
        assert_eq!(toks(&"1:2".repeat(400)).len(), 801);
        assert_eq!(toks(&"_".repeat(1200)).len(), 1);
        assert_eq!(toks(&("(".repeat(900) + "x")).len(), 901);
        assert!(!toks(&"a.".repeat(500_000)).is_empty());
    }

    #[test]
    fn sentences_as_the_sentencizer_counts_them() {
        assert_eq!(sentences("Wait... what? Yes!"), 2);
        assert_eq!(sentences("He said \"go.\" Then left."), 2);
        assert_eq!(
            sentences("Sie wollten ihn entführen.In der Nacht kam er."),
            2
        );
        assert_eq!(sentences("One. Two. Three."), 3);
        assert_eq!(sentences("no end"), 1);
        assert_eq!(sentences("ends twice.\")!"), 1);
        assert_eq!(sentences("U.S. policy is fine"), 1);
        assert_eq!(sentences("Call 911. Now."), 2);
        assert_eq!(sentences(""), 1);
        assert_eq!(sentences("Meet on Wed. The room is 4B."), 1);
        assert_eq!(sentences("Enter your user id. Then click save."), 1);
        assert_eq!(sentences("Жоқ. Мен келемін."), 1);
        assert_eq!(sentences("It ends.\t!"), 2);
        assert_eq!(sentences("end.  ."), 2);
    }

    #[test]
    fn lines_as_python_splits_them() {
        let l = |t| py_lines(t).collect::<Vec<_>>();
        assert_eq!(l("a\n\nb\n"), ["a", "", "b"]);
        assert_eq!(
            l("a\r\nb\rc\u{2028}d\u{85}e\u{c}f"),
            ["a", "b", "c", "d", "e", "f"]
        );
        assert_eq!(l(""), Vec::<&str>::new());
        assert_eq!(l("\n"), [""]);
    }

    /// The sentencizer over every token of the line, as spaCy runs it.
    fn reference_sentences(line: &str) -> usize {
        // spaCy's tokens with its white-space ones (a run but for the one space after
        // a token), in order.
        let mut toks: Vec<&str> = Vec::new();
        let mut rest = line;
        let mut first = true;
        while !rest.is_empty() {
            let sp = rest.find(|c: char| !py_space(c)).unwrap_or(rest.len());
            if sp > 0 {
                let run = &rest[..sp];
                let run = if !first && run.starts_with(' ') {
                    &run[1..]
                } else {
                    run
                };
                if !run.is_empty() {
                    toks.push(run);
                }
            }
            rest = &rest[sp..];
            let w = rest.find(py_space).unwrap_or(rest.len());
            if w > 0 {
                super::super::spacy::tokens(&rest[..w], &mut toks);
            }
            rest = &rest[w..];
            first = false;
        }
        let mut s = Sentencizer::default();
        for t in &toks {
            let mut cs = t.chars();
            let end = matches!((cs.next(), cs.next()), (Some(c), None) if sentence_end(c));
            s.token(end, end || (!t.chars().all(py_space) && punct_token(t)));
        }
        s.n.max(1)
    }

    /// The span-by-span count with its shortcuts equals the walk over every token.
    #[test]
    fn sentence_shortcuts_agree_with_the_full_walk() {
        let pieces = [
            "word",
            "Word",
            "end.",
            "USA.",
            "U.S.",
            "Inc.",
            "dont.",
            "what?",
            "yes!",
            "3.14",
            "1.",
            "(see",
            "it)",
            "\"go.\"",
            "...",
            "…",
            "—",
            "e.g.",
            "x.Y",
            "http://a.b/c.",
            "。",
            "日本語。",
            "¿qué?",
            "'",
            "St.",
            "a.",
            "!",
            "Mr.",
        ];
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |m: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % m as u64) as usize
        };
        for _ in 0..5000 {
            let n = 1 + next(12);
            let line: Vec<&str> = (0..n).map(|_| pieces[next(pieces.len())]).collect();
            let line = line.join(if next(4) == 0 { "  " } else { " " });
            assert_eq!(sentences(&line), reference_sentences(&line), "{line:?}");
        }
    }

    /// The ASCII fast paths agree with the generated tables.
    #[test]
    fn ascii_fast_paths_match_the_tables() {
        for b in 0u8..128 {
            let c = b as char;
            assert_eq!(symbol(c), in_table(c, PUNCTUATION_SET), "{b}");
            assert_eq!(terminal(c), in_table(c, TERMINAL_PUNCTUATION), "{b}");
        }
        assert!(symbol('„') && !terminal('»') && !terminal('…') && terminal('。'));
    }
}
