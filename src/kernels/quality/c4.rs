//! C4's line and document rules (Raffel et al. 2020).
use super::*;

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

pub(super) const POLICY: &[&str] = &[
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
];

/// Removes `[12]`, `[edit]`, `[citation needed]`.
pub(super) fn strip_citations(line: &str) -> std::borrow::Cow<'_, str> {
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

/// Sentences in a line, as datatrove counts them for English (spaCy's sentencizer
/// over its tokens, [`segment::sentences`]).
pub(super) fn sentences(line: &str) -> usize {
    segment::sentences(line)
}

/// The line patterns of C4, matched case-insensitively in one pass: pattern 0 is
/// lorem ipsum, 1 javascript, the rest the policy phrases.
pub(super) static C4_LINE_PATTERNS: LazyLock<AhoCorasick> = LazyLock::new(|| {
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
    for raw in segment::py_lines(text) {
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
        // Not trimmed again: a citation cut from the end leaves the space before it,
        // and the line then has no terminal punctuation (datatrove's order).
        let line: &str = &line;
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
        // Only the rule's minimum is compared: once reached, no line needs counting.
        if n_sentences < c.min_num_sentences {
            n_sentences += sentences(line);
        }
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
