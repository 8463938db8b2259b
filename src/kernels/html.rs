//! Main-content extraction from HTML in one pass, without building a DOM: a byte
//! tokenizer feeds a stack of open elements; text is cut into blocks at block-level
//! tags, each block remembering its link text and whether it sits in boilerplate
//! (nav, footer, aside, forms, elements classed as menus, comments, share bars, ...)
//! or in marked-up content (`<article>`, `<main>`, `itemprop=articleBody`). Blocks are
//! then kept by region and by text and link density, in the manner of jusText and
//! boilerpipe. A CPU-time budget turns pathological input into an error instead of a
//! stalled task.
use std::time::{Duration, Instant};

/// What an extraction produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Extracted {
    pub title: Option<String>,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtractError {
    Timeout,
}

#[derive(Debug, Default, Clone)]
struct Block {
    text: String,
    link_chars: usize,
    boiler: bool,
    content: bool,
    heading: bool,
    item: bool,
}

#[derive(Debug, Clone)]
struct Elem {
    tag: String,
    boiler: bool,
    content: bool,
}

const SKIP_RAW: &[&str] = &[
    "script", "style", "noscript", "template", "textarea", "title",
];
const SKIP_TREE: &[&str] = &[
    "svg", "math", "iframe", "object", "select", "button", "head", "form", "figure",
];
const BOILER_TAGS: &[&str] = &["nav", "footer", "aside", "menu", "dialog"];
const BLOCK_TAGS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "table",
    "tr",
    "td",
    "th",
    "blockquote",
    "pre",
    "br",
    "hr",
    "figcaption",
    "address",
    "center",
    "body",
    "tbody",
    "thead",
    "caption",
];
const VOID: &[&str] = &[
    "br", "hr", "img", "meta", "link", "input", "source", "wbr", "area", "base", "col", "embed",
    "param", "track",
];
const BOILER_WORDS: &[&str] = &[
    "nav",
    "navbar",
    "navigation",
    "menu",
    "footer",
    "sidebar",
    "comments",
    "comment",
    "share",
    "sharing",
    "social",
    "cookie",
    "cookies",
    "banner",
    "breadcrumb",
    "breadcrumbs",
    "related",
    "advert",
    "advertisement",
    "ad",
    "ads",
    "sponsor",
    "sponsored",
    "promo",
    "subscribe",
    "newsletter",
    "widget",
    "popup",
    "modal",
    "login",
    "signup",
    "pagination",
    "pager",
    "masthead",
    "toolbar",
    "disclaimer",
    "teaser",
    "recommended",
    "tags",
    "byline",
    "copyright",
    "caption",
    "credit",
    "author",
    "bio",
    "subscription",
    "paywall",
];
const CONTENT_WORDS: &[&str] = &[
    "article",
    "content",
    "post",
    "entry",
    "story",
    "text",
    "main",
    "body",
    "articlebody",
];

fn words_of(v: &str) -> impl Iterator<Item = &str> {
    v.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// Extracts the main text and title of a document within `budget` of CPU time.
pub fn extract(html: &str, budget: Duration) -> Result<Extracted, ExtractError> {
    let start = Instant::now();
    let b = html.as_bytes();
    let mut stack: Vec<Elem> = Vec::new();
    let mut blocks: Vec<Block> = Vec::new();
    let mut cur = Block::default();
    let mut title: Option<String> = None;
    let mut in_link = 0usize;
    let mut skip_depth: Option<usize> = None;
    let mut pos = 0usize;
    let mut steps = 0u32;
    let flags = |stack: &[Elem]| {
        let last = stack.last();
        (
            last.is_some_and(|e| e.boiler),
            last.is_some_and(|e| e.content),
        )
    };
    while pos < b.len() {
        steps += 1;
        if steps.is_multiple_of(4096) && start.elapsed() > budget {
            return Err(ExtractError::Timeout);
        }
        let lt = memchr::memchr(b'<', &b[pos..])
            .map(|i| pos + i)
            .unwrap_or(b.len());
        if lt > pos && skip_depth.is_none() {
            let (boiler, content) = flags(&stack);
            push_text(&mut cur, &html[pos..lt], in_link > 0, boiler, content);
        }
        if lt >= b.len() {
            break;
        }
        // Comments, doctype, processing instructions.
        if b[lt..].starts_with(b"<!--") {
            pos = memchr::memmem::find(&b[lt + 4..], b"-->")
                .map(|i| lt + 4 + i + 3)
                .unwrap_or(b.len());
            continue;
        }
        if b.get(lt + 1).is_some_and(|&c| c == b'!' || c == b'?') {
            pos = memchr::memchr(b'>', &b[lt..])
                .map(|i| lt + i + 1)
                .unwrap_or(b.len());
            continue;
        }
        let closing = b.get(lt + 1) == Some(&b'/');
        let name_start = lt + 1 + usize::from(closing);
        let name_end = b[name_start..]
            .iter()
            .position(|c| !(c.is_ascii_alphanumeric() || *c == b'-' || *c == b':'))
            .map(|i| name_start + i)
            .unwrap_or(b.len());
        if name_end == name_start {
            // A lone '<' in text.
            if skip_depth.is_none() {
                let (boiler, content) = flags(&stack);
                push_text(&mut cur, "<", in_link > 0, boiler, content);
            }
            pos = lt + 1;
            continue;
        }
        let tag_end = find_tag_end(b, name_end);
        let name = html[name_start..name_end].to_ascii_lowercase();
        let attrs = &html[name_end..tag_end.saturating_sub(1).max(name_end)];
        pos = tag_end;
        let is_block = BLOCK_TAGS.contains(&name.as_str());
        if closing {
            if is_block {
                flush(&mut cur, &mut blocks);
            }
            if name == "a" {
                in_link = in_link.saturating_sub(1);
            }
            if let Some(i) = stack.iter().rposition(|e| e.tag == name) {
                stack.truncate(i);
                if skip_depth.is_some_and(|d| d > stack.len()) {
                    skip_depth = None;
                }
            }
            continue;
        }
        if SKIP_RAW.contains(&name.as_str()) {
            // Raw text up to the matching end tag.
            let close = format!("</{name}");
            let end = find_ci(&b[pos..], close.as_bytes())
                .map(|i| pos + i)
                .unwrap_or(b.len());
            if name == "title" && title.is_none() {
                let t = collapse(&decode_entities(&html[pos..end]));
                if !t.is_empty() {
                    title = Some(t);
                }
            }
            pos = memchr::memchr(b'>', &b[end..])
                .map(|i| end + i + 1)
                .unwrap_or(b.len());
            continue;
        }
        if is_block {
            flush(&mut cur, &mut blocks);
        }
        if name == "a" {
            in_link += 1;
        }
        if VOID.contains(&name.as_str()) || b[..tag_end].ends_with(b"/>") {
            continue;
        }
        let lower_attrs = attrs.to_ascii_lowercase();
        let (parent_boiler, parent_content) = flags(&stack);
        let mut boiler = parent_boiler || BOILER_TAGS.contains(&name.as_str());
        let mut content = parent_content || name == "article" || name == "main";
        // Page-level containers carry site-wide classes ("has-navigation"): their
        // class words say nothing about the content inside.
        let container = matches!(name.as_str(), "html" | "body" | "main" | "article");
        // Class and id are read together: `id="social-scroll" class="row body"` is content.
        let names = format!(
            "{} {}",
            attr(&lower_attrs, "class").unwrap_or(""),
            attr(&lower_attrs, "id").unwrap_or("")
        );
        let has_content_word = words_of(&names).any(|w| CONTENT_WORDS.contains(&w));
        if !container && !has_content_word && words_of(&names).any(|w| BOILER_WORDS.contains(&w)) {
            boiler = true;
        }
        if has_content_word {
            content = true;
        }
        if name == "article" || name == "main" {
            boiler = false;
        }
        if attr(&lower_attrs, "itemprop").is_some_and(|v| v.contains("articlebody"))
            || attr(&lower_attrs, "role").is_some_and(|v| v == "main")
        {
            content = true;
            boiler = false;
        }
        if attr(&lower_attrs, "role")
            .is_some_and(|v| v == "navigation" || v == "banner" || v == "contentinfo")
            || attr(&lower_attrs, "aria-hidden").is_some_and(|v| v == "true")
            || lower_attrs.contains("display:none")
            || lower_attrs.contains("display: none")
        {
            boiler = true;
        }
        if name == "header" && !parent_content {
            boiler = true;
        }
        if cur.text.is_empty() {
            cur.heading =
                name.len() == 2 && name.starts_with('h') && name.as_bytes()[1].is_ascii_digit();
            cur.item = name == "li" || name == "td" || name == "dd";
        }
        stack.push(Elem {
            tag: name.clone(),
            boiler,
            content,
        });
        if skip_depth.is_none() && SKIP_TREE.contains(&name.as_str()) {
            skip_depth = Some(stack.len());
        }
        if stack.len() > 2048 {
            // Unclosed elements piling up: keep the stack bounded.
            stack.drain(..1024);
        }
    }
    flush(&mut cur, &mut blocks);
    Ok(Extracted {
        title,
        text: select(&blocks),
    })
}

fn find_tag_end(b: &[u8], from: usize) -> usize {
    // As an HTML tokenizer does: a quote opens a quoted value only right after `=`;
    // a stray apostrophe elsewhere in a tag is just a character.
    let mut quote: Option<u8> = None;
    let mut after_eq = false;
    for (i, &c) in b[from..].iter().enumerate() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                b'"' | b'\'' if after_eq => quote = Some(c),
                b'>' => return from + i + 1,
                _ => {}
            },
        }
        if !c.is_ascii_whitespace() {
            after_eq = quote.is_none() && c == b'=';
        }
        if i > 65536 {
            // A runaway attribute value: give up on quoting.
            return memchr::memchr(b'>', &b[from..])
                .map(|j| from + j + 1)
                .unwrap_or(b.len());
        }
    }
    b.len()
}

fn find_ci(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let first = needle[0];
    let mut from = 0;
    while let Some(i) = memchr::memchr(first, &hay[from..]) {
        let at = from + i;
        if hay.len() >= at + needle.len() && hay[at..at + needle.len()].eq_ignore_ascii_case(needle)
        {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

fn attr<'a>(attrs: &'a str, key: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(i) = attrs[from..].find(key) {
        let at = from + i;
        let before_ok = at == 0 || attrs.as_bytes()[at - 1].is_ascii_whitespace();
        let rest = attrs[at + key.len()..].trim_start();
        if before_ok && let Some(v) = rest.strip_prefix('=') {
            let v = v.trim_start();
            return Some(match v.chars().next() {
                Some(q @ ('"' | '\'')) => v[1..].split(q).next().unwrap_or(""),
                _ => v
                    .split(|c: char| c.is_ascii_whitespace() || c == '>')
                    .next()
                    .unwrap_or(""),
            });
        }
        from = at + key.len();
    }
    None
}

fn push_text(cur: &mut Block, raw: &str, link: bool, boiler: bool, content: bool) {
    let t = decode_entities(raw);
    let t = collapse_keep_edges(&t);
    if t.trim().is_empty() {
        if !cur.text.is_empty() && !cur.text.ends_with(' ') {
            cur.text.push(' ');
        }
        return;
    }
    if link {
        cur.link_chars += t.trim().chars().count();
    }
    cur.boiler |= boiler;
    cur.content |= content;
    cur.text.push_str(&t);
}

fn flush(cur: &mut Block, blocks: &mut Vec<Block>) {
    let text = cur.text.trim().to_string();
    if !text.is_empty() {
        let mut b = std::mem::take(cur);
        b.text = text;
        blocks.push(b);
    } else {
        *cur = Block::default();
    }
}

/// Chooses the main-content blocks and joins them with newlines.
fn select(blocks: &[Block]) -> String {
    let chars = |b: &Block| b.text.chars().count();
    let content_chars: usize = blocks
        .iter()
        .filter(|b| b.content && !b.boiler)
        .map(chars)
        .sum();
    let use_region = content_chars >= 200;
    let candidate = |b: &Block| !b.boiler && (!use_region || b.content);
    // Classify: good (long, few links), short (neutral), bad.
    #[derive(Clone, Copy, PartialEq)]
    enum C {
        Good,
        Near,
        Bad,
    }
    let class: Vec<C> = blocks
        .iter()
        .map(|b| {
            if !candidate(b) {
                return C::Bad;
            }
            let n = chars(b).max(1);
            let density = b.link_chars as f64 / n as f64;
            if density > 0.5 {
                C::Bad
            } else if (n >= 50 && density < 0.25) || (use_region && b.item && density < 0.3) {
                C::Good
            } else if b.heading || (use_region && n >= 20) || n < 30 {
                C::Near
            } else {
                C::Good
            }
        })
        .collect();
    // Near blocks survive when a good block is close by (context, as jusText does).
    let mut out = String::new();
    for (i, b) in blocks.iter().enumerate() {
        let keep = match class[i] {
            C::Good => true,
            C::Bad => false,
            C::Near => {
                let near_good = |r: std::ops::Range<usize>| {
                    r.filter(|&j| j < blocks.len()).any(|j| class[j] == C::Good)
                };
                near_good(i.saturating_sub(2)..i) && near_good(i + 1..i + 3)
                    || (b.heading && near_good(i + 1..i + 3))
            }
        };
        if keep {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&b.text);
        }
    }
    out
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Collapses whitespace runs to one space, keeping a leading/trailing space if any.
fn collapse_keep_edges(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.chars() {
        if c.is_whitespace() {
            space = true;
        } else {
            if space {
                out.push(' ');
                space = false;
            }
            out.push(c);
        }
    }
    if space {
        out.push(' ');
    }
    out
}

/// Decodes numeric character references and the common named entities.
pub fn decode_entities(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains('&') {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        let end = tail.find(';').filter(|&e| e <= 10);
        let decoded = end.and_then(|e| {
            let name = &tail[..e];
            if let Some(num) = name.strip_prefix('#') {
                let v = if let Some(h) = num.strip_prefix(['x', 'X']) {
                    u32::from_str_radix(h, 16).ok()
                } else {
                    num.parse().ok()
                };
                v.and_then(char::from_u32).map(|c| (c.to_string(), e))
            } else {
                named(name).map(|c| (c.to_string(), e))
            }
        });
        match decoded {
            Some((c, e)) => {
                out.push_str(&c);
                rest = &tail[e + 1..];
            }
            None => {
                out.push('&');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

fn named(n: &str) -> Option<&'static str> {
    Some(match n {
        "amp" => "&",
        "lt" => "<",
        "gt" => ">",
        "quot" => "\"",
        "apos" => "'",
        "nbsp" => " ",
        "mdash" => "—",
        "ndash" => "–",
        "hellip" => "…",
        "rsquo" => "’",
        "lsquo" => "‘",
        "ldquo" => "“",
        "rdquo" => "”",
        "laquo" => "«",
        "raquo" => "»",
        "bdquo" => "„",
        "sbquo" => "‚",
        "copy" => "©",
        "reg" => "®",
        "trade" => "™",
        "euro" => "€",
        "pound" => "£",
        "yen" => "¥",
        "cent" => "¢",
        "deg" => "°",
        "middot" => "·",
        "bull" => "•",
        "shy" => "",
        "zwnj" => "",
        "zwj" => "",
        "auml" => "ä",
        "ouml" => "ö",
        "uuml" => "ü",
        "Auml" => "Ä",
        "Ouml" => "Ö",
        "Uuml" => "Ü",
        "szlig" => "ß",
        "eacute" => "é",
        "egrave" => "è",
        "ecirc" => "ê",
        "aacute" => "á",
        "agrave" => "à",
        "acirc" => "â",
        "iacute" => "í",
        "oacute" => "ó",
        "uacute" => "ú",
        "ntilde" => "ñ",
        "ccedil" => "ç",
        "Eacute" => "É",
        "times" => "×",
        "divide" => "÷",
        "sect" => "§",
        "para" => "¶",
        "iexcl" => "¡",
        "iquest" => "¿",
        "ordm" => "º",
        "ordf" => "ª",
        "frac12" => "½",
        "thinsp" => " ",
        "ensp" => " ",
        "emsp" => " ",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r##"<html><head><title>A Story &amp; More</title><script>var x = "<p>no</p>";</script></head>
<body><nav><a href="/">Home</a> <a href="/news">News</a></nav>
<div class="cookie-banner">We use cookies to improve your experience on this website.</div>
<article><h1>The River Project</h1>
<p>The city council approved the river restoration project on Tuesday after months of public hearings and debate.</p>
<p>Engineers expect the work to take three years, with the first phase focused on removing concrete banks.</p>
<div class="share-bar"><a href="#">Share on social networks</a></div>
</article>
<aside>Related: other stories you might like to read today and tomorrow.</aside>
<footer>Copyright 2024 Example News. All rights reserved. Imprint and privacy policy.</footer></body></html>"##;

    #[test]
    fn keeps_the_article_and_drops_boilerplate() {
        let e = extract(PAGE, Duration::from_secs(1)).unwrap();
        assert_eq!(e.title.as_deref(), Some("A Story & More"));
        assert!(e.text.contains("The city council approved"), "{}", e.text);
        assert!(e.text.contains("Engineers expect"), "{}", e.text);
        assert!(e.text.starts_with("The River Project"), "{}", e.text);
        for junk in [
            "Home",
            "cookies",
            "Share on",
            "Related:",
            "Copyright",
            "no</p>",
        ] {
            assert!(!e.text.contains(junk), "{junk} leaked: {}", e.text);
        }
    }

    #[test]
    fn entities_and_budget() {
        assert_eq!(
            decode_entities("a &amp; b &#233;&#x41; &nope; &"),
            "a & b éA &nope; &"
        );
        let nasty = "<div>".repeat(200_000) + &"x ".repeat(100_000);
        assert_eq!(
            extract(&nasty, Duration::from_nanos(1)),
            Err(ExtractError::Timeout)
        );
        assert!(extract(&nasty, Duration::from_secs(30)).is_ok());
    }
}
