//! Main-content extraction from HTML in one pass, without building a DOM: a byte
//! tokenizer feeds a stack of open elements; text is cut into blocks at block-level
//! tags, each block remembering its link text and whether it sits in boilerplate
//! (nav, footer, aside, forms, elements classed as menus, comments, share bars, ...)
//! or in marked-up content (`<article>`, `<main>`, `itemprop=articleBody`). Blocks are
//! then kept by region and by text and link density, in the manner of jusText and
//! boilerpipe. A CPU-time budget turns pathological input into an error instead of a
//! stalled task.
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use super::FastMap;

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

/// A block of text: its bytes in the page's text arena (`start..end`), the ids of
/// the open elements when it ended in the path arena (`path`, outermost first).
#[derive(Debug, Default, Clone)]
struct Block {
    start: usize,
    end: usize,
    link_chars: usize,
    boiler: bool,
    /// Boilerplate by tag, role or hiding only (see [`Elem::hard`]).
    hard: bool,
    content: bool,
    path: std::ops::Range<usize>,
    heading: bool,
    item: bool,
    /// A `<br>` was seen: the next text starts a new line of this block.
    newline: bool,
}

impl Block {
    fn new(start: usize) -> Block {
        Block {
            start,
            end: start,
            ..Block::default()
        }
    }
}

/// What [`extract`] builds for [`select`]: the blocks, their text and their paths,
/// each kept in one buffer (a page has thousands of blocks; one allocation each
/// was a fifth of the extraction time on documentation pages).
struct Blocks {
    list: Vec<Block>,
    text: String,
    paths: Vec<u32>,
    /// Ids of the elements that mark an article: `<article>`, `<main>`,
    /// `role=main`, `itemprop=articleBody` (in document order, so sorted).
    articles: Vec<u32>,
}

impl Blocks {
    fn text(&self, b: &Block) -> &str {
        &self.text[b.start..b.end]
    }

    fn path(&self, b: &Block) -> &[u32] {
        &self.paths[b.path.clone()]
    }
}

/// A lower-case tag name as one value: up to 16 bytes packed, a longer name
/// hashed with bit 127 set (packed ASCII never sets it). Names are ASCII letters,
/// digits, `-` and `:` (no NUL), so packing is one to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Tag(u128);

impl Tag {
    const fn of(name: &[u8]) -> Tag {
        let mut v = 0u128;
        let mut i = 0;
        if name.len() <= 16 {
            while i < name.len() {
                v |= (name[i].to_ascii_lowercase() as u128) << (8 * i);
                i += 1;
            }
            return Tag(v);
        }
        // FNV-1a, 128-bit.
        v = 0x6c62272e07bb014262b821756295c58d;
        while i < name.len() {
            v ^= name[i].to_ascii_lowercase() as u128;
            v = v.wrapping_mul(0x0000000001000000000000000000013B);
            i += 1;
        }
        Tag(v | 1 << 127)
    }

    /// [`Tag::of`] for a name scanned from a page (letters, digits, `-`, `:`): up to
    /// 16 bytes in one load, lower-cased by setting bit 5 of each byte, which those
    /// characters other than `A`–`Z` already have.
    #[inline]
    fn of_name(name: &[u8]) -> Tag {
        match name.len() {
            n @ 1..=16 => {
                let mut buf = [0u8; 16];
                buf[..n].copy_from_slice(name);
                let lower = 0x2020_2020_2020_2020_2020_2020_2020_2020u128 >> (128 - 8 * n);
                Tag(u128::from_le_bytes(buf) | lower)
            }
            _ => Tag::of(name),
        }
    }
}

/// The bytes of a tag name (as the tokenizer reads one).
const NAME_CHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        t[i] = c.is_ascii_alphanumeric() || c == b'-' || c == b':';
        i += 1;
    }
    t
};

const TAG_A: Tag = Tag::of(b"a");
const TAG_HEAD: Tag = Tag::of(b"head");
const TAG_TITLE: Tag = Tag::of(b"title");
const TAG_ARTICLE: Tag = Tag::of(b"article");
const TAG_MAIN: Tag = Tag::of(b"main");
const TAG_HTML: Tag = Tag::of(b"html");
const TAG_BODY: Tag = Tag::of(b"body");
const TAG_FORM: Tag = Tag::of(b"form");
const TAG_HEADER: Tag = Tag::of(b"header");
const TAG_LI: Tag = Tag::of(b"li");
const TAG_TD: Tag = Tag::of(b"td");
const TAG_DD: Tag = Tag::of(b"dd");
const TAG_BR: Tag = Tag::of(b"br");
const TAG_PRE: Tag = Tag::of(b"pre");

#[derive(Debug, Clone)]
struct Elem {
    tag: Tag,
    id: u32,
    boiler: bool,
    /// Boilerplate by tag, role or hiding (`nav`, `role=navigation`,
    /// `display:none`), which no descendant undoes; class words ("widget",
    /// "sidebar") are undone by a descendant with a content class ("post-body").
    hard: bool,
    content: bool,
    /// Inside `nav`, `footer`, `aside`, `menu` or `dialog`.
    in_box: bool,
    /// Inside `<pre>`: whitespace is kept (code, poems, ASCII tables).
    pre: bool,
}

const SKIP_RAW: &[&str] = &["script", "style", "template", "textarea", "title"];
const SKIP_TREE: &[&str] = &[
    "svg",
    "math",
    "iframe",
    "object",
    "select",
    "button",
    "head",
    "figure",
    "figcaption",
    "label",
    "rt",
    "rp",
];
/// Elements that may appear in `<head>` (with what trackers put in its `<noscript>`).
const IN_HEAD: &[&str] = &[
    "meta", "link", "title", "style", "script", "noscript", "base", "template", "img", "iframe",
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
    "recommendations",
    "recirc",
    "affiliate",
    "legend",
    "notice",
    "rating",
    "ratings",
    "donation",
    "prev",
    "gdpr",
    "contact",
    "btn",
    "privacy",
    "postmetadata",
    "meta",
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

// Tag kinds, as bits.
const K_BLOCK: u8 = 1;
const K_SKIP_RAW: u8 = 2;
const K_VOID: u8 = 4;
const K_BOILER: u8 = 8;
const K_SKIP_TREE: u8 = 16;
const K_IN_HEAD: u8 = 32;

/// Each known tag's kinds: one hash lookup per tag instead of a scan of six lists.
static TAG_KINDS: LazyLock<FastMap<Tag, u8>> = LazyLock::new(|| {
    let mut m = FastMap::default();
    for (list, bit) in [
        (BLOCK_TAGS, K_BLOCK),
        (SKIP_RAW, K_SKIP_RAW),
        (VOID, K_VOID),
        (BOILER_TAGS, K_BOILER),
        (SKIP_TREE, K_SKIP_TREE),
        (IN_HEAD, K_IN_HEAD),
    ] {
        for t in list {
            *m.entry(Tag::of(t.as_bytes())).or_insert(0) |= bit;
        }
    }
    m
});

fn tag_kind(tag: Tag) -> u8 {
    TAG_KINDS.get(&tag).copied().unwrap_or(0)
}

// Class and id word kinds.
const W_CONTENT: u8 = 1;
const W_BOILER: u8 = 2;
/// Boilerplate outside content only, and it does not stop a content word beside it
/// from undoing an ancestor's boilerplate: page builders call every block a widget
/// (`elementor-widget elementor-widget-theme-post-content` >
/// `elementor-widget-container` > the article's paragraphs).
const W_WEAK_BOILER: u8 = 4;
const WEAK_BOILER_WORDS: &[&str] = &["widget"];
/// Boilerplate whose own content a content word in the same token names
/// ("sidebar-content", "comment-body", "author-box--content"): the token stays
/// boilerplate.
const W_OWNS_CONTENT: u8 = 8;
/// A content class that names the post, not any box's inside: a specific content
/// word ("post", "entry", "article"), or two generic ones in one token.
const W_STRONG_CONTENT: u8 = 16;
const GENERIC_CONTENT_WORDS: &[&str] = &["content", "text", "main", "body"];
const OWNS_CONTENT_WORDS: &[&str] = &[
    "sidebar",
    "comment",
    "comments",
    "related",
    "footer",
    "author",
    "bio",
    "newsletter",
    "cookie",
    "cookies",
    "share",
    "sharing",
    "social",
];

static CLASS_WORDS: LazyLock<FastMap<&'static str, u8>> = LazyLock::new(|| {
    let mut m = FastMap::default();
    for w in BOILER_WORDS {
        *m.entry(*w).or_insert(0) |= W_BOILER;
    }
    for w in WEAK_BOILER_WORDS {
        *m.entry(*w).or_insert(0) |= W_WEAK_BOILER;
    }
    for w in CONTENT_WORDS {
        *m.entry(*w).or_insert(0) |= W_CONTENT;
        if !GENERIC_CONTENT_WORDS.contains(w) {
            *m.entry(*w).or_insert(0) |= W_STRONG_CONTENT;
        }
    }
    for w in OWNS_CONTENT_WORDS {
        *m.entry(*w).or_insert(0) |= W_OWNS_CONTENT;
    }
    m
});

/// The union of the kinds of the words in class and id values.
/// On an element that names a widget, a single content word is the widget's own
/// ("widget-content", `class="widget widget_text" id="text-6"` in a sidebar); it
/// takes two to name the post's content ("elementor-widget-theme-post-content").
/// In a token that names a sidebar, comments or the like, content words name that
/// box's content ("sidebar-content", "comment-body").
fn class_kinds(values: &[&str]) -> u8 {
    let (mut k, mut post_widget) = (0u8, false);
    for v in values {
        for token in v.split_ascii_whitespace() {
            let (mut t, mut contents) = (0u8, 0u32);
            for w in words_of(token) {
                let kind = CLASS_WORDS.get(w).copied().unwrap_or(0);
                contents += u32::from(kind & W_CONTENT != 0);
                t |= kind;
            }
            if contents >= 2 {
                t |= W_STRONG_CONTENT;
            }
            if t & W_OWNS_CONTENT != 0 {
                t &= !(W_CONTENT | W_STRONG_CONTENT);
            }
            post_widget |= t & W_WEAK_BOILER != 0 && contents >= 2;
            k |= t;
        }
    }
    if k & W_WEAK_BOILER != 0 && !post_widget {
        k &= !(W_CONTENT | W_STRONG_CONTENT);
    }
    k
}

fn words_of(v: &str) -> impl Iterator<Item = &str> {
    v.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// Extracts the main text and title of a document within `budget` of CPU time.
pub fn extract(html: &str, budget: Duration) -> Result<Extracted, ExtractError> {
    let start = Instant::now();
    let b = html.as_bytes();
    let mut stack: Vec<Elem> = Vec::new();
    let mut blocks = Blocks {
        list: Vec::new(),
        text: String::with_capacity(html.len() / 4),
        paths: Vec::new(),
        articles: Vec::new(),
    };
    let mut cur = Block::new(0);
    let mut title: Option<String> = None;
    let mut in_link = 0usize;
    let mut next_id = 0u32;
    let mut skip_depth: Option<usize> = None;
    let mut pos = 0usize;
    let mut steps = 0u32;
    // Scratch reused from tag to tag: the lower-cased attributes, and what
    // `Attrs::parse` needs.
    let (mut lower_attrs, mut scratch) = (String::new(), String::new());
    let flags = |stack: &[Elem]| {
        let last = stack.last();
        (
            last.is_some_and(|e| e.boiler),
            last.is_some_and(|e| e.hard),
            last.is_some_and(|e| e.content),
            last.is_some_and(|e| e.pre),
        )
    };
    while pos < b.len() {
        steps += 1;
        if steps.is_multiple_of(4096) && start.elapsed() > budget {
            return Err(ExtractError::Timeout);
        }
        let lt = find1(b'<', &b[pos..]).map(|i| pos + i).unwrap_or(b.len());
        if lt > pos && skip_depth.is_none() {
            let f = flags(&stack);
            push_text(&mut cur, &mut blocks.text, &html[pos..lt], in_link > 0, f);
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
        let mut name_end = name_start;
        while name_end < b.len() && NAME_CHAR[b[name_end] as usize] {
            name_end += 1;
        }
        if name_end == name_start {
            // A lone '<' in text.
            if skip_depth.is_none() {
                let f = flags(&stack);
                push_text(&mut cur, &mut blocks.text, "<", in_link > 0, f);
            }
            pos = lt + 1;
            continue;
        }
        let tag_end = find_tag_end(b, name_end);
        let name = &b[name_start..name_end];
        let tag = Tag::of_name(name);
        let attrs = &html[name_end..tag_end.saturating_sub(1).max(name_end)];
        pos = tag_end;
        let kind = tag_kind(tag);
        let is_block = kind & K_BLOCK != 0;
        if closing {
            if is_block {
                flush(&mut cur, &mut blocks, &stack);
            }
            // Closing an element closes the links left open inside it: an
            // unclosed `<a>` must not make the rest of the page link text.
            if let Some(i) = stack.iter().rposition(|e| e.tag == tag) {
                close_from(&mut stack, i, &mut in_link);
                if skip_depth.is_some_and(|d| d > stack.len()) {
                    skip_depth = None;
                }
            }
            continue;
        }
        // A body element inside `<head>` means the head was never closed: close
        // it there, as HTML parsers do, instead of skipping the whole page.
        if let Some(d) = skip_depth
            && stack.get(d - 1).is_some_and(|e| e.tag == TAG_HEAD)
            && kind & K_IN_HEAD == 0
        {
            close_from(&mut stack, d - 1, &mut in_link);
            skip_depth = None;
        }
        // `<title/>` (in SVG) has no raw text to skip: looking for its end tag would
        // swallow the page up to the next one.
        if kind & K_SKIP_RAW != 0 && !b[..tag_end].ends_with(b"/>") {
            // Raw text up to the matching end tag.
            scratch.clear();
            scratch.push_str("</");
            scratch.push_str(&html[name_start..name_end]);
            let end = find_ci(&b[pos..], scratch.as_bytes())
                .map(|i| pos + i)
                .unwrap_or(b.len());
            if tag == TAG_TITLE && title.is_none() {
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
        if tag == TAG_BR {
            // A line break, not a block: lines of a poem, an address or a list
            // written with `<br>` are one block, judged by their length together.
            cur.newline = true;
            continue;
        }
        if is_block {
            flush(&mut cur, &mut blocks, &stack);
        }
        if kind & K_VOID != 0 || b[..tag_end].ends_with(b"/>") {
            continue;
        }
        if tag == TAG_A {
            in_link += 1;
        }
        let (parent_boiler, parent_hard, parent_content, parent_pre) = flags(&stack);
        let mut hard = parent_hard || kind & K_BOILER != 0;
        let mut boiler = parent_boiler || hard;
        let article_or_main = tag == TAG_ARTICLE || tag == TAG_MAIN;
        let mut content = parent_content || article_or_main;
        // Page-level containers carry site-wide classes ("has-navigation"): their
        // class words say nothing about the content inside.
        let container = article_or_main || tag == TAG_HTML || tag == TAG_BODY;
        // Class and id are read together: `id="social-scroll" class="row body"` is content.
        let a = Attrs::parse(attrs, &mut lower_attrs, &mut scratch);
        let words = class_kinds(&[a.class, a.id]);
        let has_content_word = words & W_CONTENT != 0;
        if !container
            && !has_content_word
            && (words & W_BOILER != 0
                || (words & W_WEAK_BOILER != 0 && !parent_content)
                || tag == TAG_FORM)
        {
            boiler = true;
        }
        // A link's own class words ("tags-link", "share-link") do not make the
        // paragraph around it boilerplate.
        if tag == TAG_A && !parent_boiler {
            boiler = hard;
        }
        if has_content_word {
            content = true;
            // Only a specific content class ("post-body", "entry-content") undoes
            // boilerplate around it: a caption's or a teaser's inner `content` div
            // does not.
            if words & W_BOILER == 0 && words & W_STRONG_CONTENT != 0 && !hard {
                boiler = false;
            }
        }
        // An article resets boilerplate around it ("has-sidebar", a page-wide
        // `<header>`), not a `<footer>`'s or `<aside>`'s: an article there is a teaser.
        let in_box = stack.last().is_some_and(|e| e.in_box);
        if article_or_main && !in_box {
            boiler = false;
            hard = false;
        }
        if a.itemprop.contains("articlebody") || a.role == "main" {
            content = true;
            boiler = false;
            hard = false;
        }
        if matches!(a.role, "navigation" | "banner" | "contentinfo")
            || a.aria_hidden == "true"
            || a.hidden_style
            || (tag == TAG_HEADER && !parent_content)
        {
            boiler = true;
            hard = true;
        }
        if cur.start == blocks.text.len() {
            cur.heading =
                name.len() == 2 && matches!(name[0], b'h' | b'H') && name[1].is_ascii_digit();
            cur.item = tag == TAG_LI || tag == TAG_TD || tag == TAG_DD;
        }
        next_id += 1;
        if article_or_main || a.itemprop.contains("articlebody") || a.role == "main" {
            blocks.articles.push(next_id);
        }
        stack.push(Elem {
            tag,
            in_box: in_box || kind & K_BOILER != 0,
            pre: parent_pre || tag == TAG_PRE,
            id: next_id,
            boiler,
            hard,
            content,
        });
        if skip_depth.is_none() && kind & K_SKIP_TREE != 0 {
            skip_depth = Some(stack.len());
        }
        if stack.len() > 2048 {
            // Unclosed elements piling up: keep the stack bounded.
            stack.drain(..1024);
            // The skipped subtree keeps its place (or, drained, ends).
            skip_depth = skip_depth
                .and_then(|d| d.checked_sub(1024))
                .filter(|&d| d > 0);
            in_link = stack.iter().filter(|e| e.tag == TAG_A).count();
        }
    }
    flush(&mut cur, &mut blocks, &stack);
    Ok(Extracted {
        text: nfc({
            // Too little left: class words or a page-wide `<form>` may have marked
            // the article itself; choose again trusting only tags, roles and
            // hiding (as trafilatura falls back to a baseline extraction).
            let text = select(&blocks, false);
            if text.len() < FALLBACK_BELOW {
                let relaxed = select(&blocks, true);
                if relaxed.len() > text.len() {
                    relaxed
                } else {
                    text
                }
            } else {
                text
            }
        }),
        title: title.map(nfc),
    })
}

/// Unicode NFC, as text is compared and deduplicated: pages mix precomposed and
/// decomposed forms ("ä" as a + U+0308 from some editors, Bengali য় as one code point
/// or two). ASCII and already-NFC text (nearly all) is returned as it is.
fn nfc(s: String) -> String {
    use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};
    if s.is_ascii() || is_nfc_quick(s.chars()) == IsNormalized::Yes {
        s
    } else {
        s.nfc().collect()
    }
}

/// Bytes scanned inline, 16 at a time, before a search calls `memchr`: in tag-dense
/// pages most searches end within a few bytes, where the call costs more than the scan.
const SHORT: usize = 64;

/// The first byte of `hay` that is one of `needles`: [`SHORT`] bytes inline, then
/// `long` on the rest.
#[inline(always)]
fn find_any<const K: usize>(
    needles: [u8; K],
    hay: &[u8],
    long: impl FnOnce(&[u8]) -> Option<usize>,
) -> Option<usize> {
    let mut i = 0;
    while i + 16 <= hay.len() {
        if i >= SHORT {
            return long(&hay[i..]).map(|j| i + j);
        }
        let m = eq_mask(hay[i..i + 16].try_into().expect("16 bytes"), needles);
        if m != 0 {
            return Some(i + m.trailing_zeros() as usize);
        }
        i += 16;
    }
    hay[i..]
        .iter()
        .position(|c| needles.contains(c))
        .map(|j| i + j)
}

/// Bit `i` set where `chunk[i]` is one of `needles`: one SSE2 compare per needle.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn eq_mask<const K: usize>(chunk: &[u8; 16], needles: [u8; K]) -> u32 {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is enabled (the cfg above), and `chunk` is 16 readable bytes (an
    // unaligned load).
    unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        let mut m = _mm_setzero_si128();
        for n in needles {
            m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8(n as i8)));
        }
        _mm_movemask_epi8(m) as u32
    }
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline(always)]
fn eq_mask<const K: usize>(chunk: &[u8; 16], needles: [u8; K]) -> u32 {
    (0..16).fold(0, |m, i| m | u32::from(needles.contains(&chunk[i])) << i)
}

/// `memchr::memchr`, the first [`SHORT`] bytes inline.
#[inline(always)]
fn find1(n: u8, hay: &[u8]) -> Option<usize> {
    find_any([n], hay, |h| memchr::memchr(n, h))
}

/// `memchr::memchr3`, the first [`SHORT`] bytes inline.
#[inline(always)]
fn find3(a: u8, b: u8, c: u8, hay: &[u8]) -> Option<usize> {
    find_any([a, b, c], hay, |h| memchr::memchr3(a, b, c, h))
}

fn find_tag_end(b: &[u8], from: usize) -> usize {
    // As an HTML tokenizer does: a quote opens a quoted value only right after `=`
    // (whitespace between allowed); a stray apostrophe elsewhere is just a character.
    // Jumps between '>' and quotes with memchr rather than stepping byte by byte.
    const RUNAWAY: usize = 65536;
    let runaway = || {
        memchr::memchr(b'>', &b[from..])
            .map(|j| from + j + 1)
            .unwrap_or(b.len())
    };
    let mut i = from;
    while let Some(j) = find3(b'>', b'"', b'\'', &b[i..]) {
        let at = i + j;
        if at - from > RUNAWAY {
            return runaway(); // a runaway attribute value: give up on quoting
        }
        let c = b[at];
        if c == b'>' {
            return at + 1;
        }
        let after_eq = b[from..at]
            .iter()
            .rev()
            .find(|c| !c.is_ascii_whitespace())
            .is_some_and(|&p| p == b'=');
        if !after_eq {
            i = at + 1;
            continue;
        }
        match find1(c, &b[at + 1..]) {
            Some(k) if at + 1 + k - from <= RUNAWAY => i = at + 1 + k + 1,
            Some(_) => return runaway(),
            None if b.len() - from > RUNAWAY => return runaway(),
            None => return b.len(),
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

/// The attributes the extractor reads, from one pass over a tag's (lower-cased)
/// attribute text; the first occurrence of a name wins, as in HTML.
#[derive(Default)]
struct Attrs<'a> {
    class: &'a str,
    id: &'a str,
    itemprop: &'a str,
    role: &'a str,
    aria_hidden: &'a str,
    /// A `style` that hides the element (`display:none`).
    hidden_style: bool,
}

impl<'a> Attrs<'a> {
    /// `lower`: where the values read are lower-cased (names are matched ignoring
    /// case; other values are not copied); `scratch`: a buffer for the work. Both are
    /// kept by the caller between tags.
    fn parse(s: &str, lower: &'a mut String, scratch: &mut String) -> Attrs<'a> {
        // Ranges of `lower`: class, id, itemprop, role, aria-hidden.
        let mut at: [Option<std::ops::Range<usize>>; 5] = Default::default();
        let mut hidden_style = false;
        let mut seen_style = false;
        lower.clear();
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b'/') {
                i += 1;
            }
            let name_start = i;
            while i < b.len() && !(b[i].is_ascii_whitespace() || b[i] == b'=' || b[i] == b'/') {
                i += 1;
            }
            let name = &s[name_start..i];
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            let mut value = "";
            if i < b.len() && b[i] == b'=' {
                i += 1;
                while i < b.len() && b[i].is_ascii_whitespace() {
                    i += 1;
                }
                if i < b.len() && (b[i] == b'"' || b[i] == b'\'') {
                    let q = b[i];
                    let end = find1(q, &b[i + 1..]).map_or(b.len(), |e| i + 1 + e);
                    value = &s[i + 1..end];
                    i = end + 1;
                } else {
                    let start = i;
                    while i < b.len() && !b[i].is_ascii_whitespace() {
                        i += 1;
                    }
                    value = &s[start..i];
                }
            } else if name.is_empty() {
                i += 1; // a stray character: move on
                continue;
            }
            let is = |n: &str| name.len() == n.len() && name.eq_ignore_ascii_case(n);
            let slot = if is("class") {
                0
            } else if is("id") {
                1
            } else if is("itemprop") {
                2
            } else if is("role") {
                3
            } else if is("aria-hidden") {
                4
            } else {
                if is("style") && !seen_style {
                    seen_style = true;
                    scratch.clear();
                    scratch.extend(value.split_whitespace());
                    scratch.make_ascii_lowercase();
                    hidden_style = scratch.contains("display:none");
                }
                continue;
            };
            // The first occurrence of a name wins, as in HTML.
            if at[slot].is_none() {
                let start = lower.len();
                lower.push_str(value);
                lower[start..].make_ascii_lowercase();
                at[slot] = Some(start..lower.len());
            }
        }
        let lower: &'a str = lower;
        let get = |r: &Option<std::ops::Range<usize>>| r.clone().map_or("", |r| &lower[r]);
        Attrs {
            class: get(&at[0]),
            id: get(&at[1]),
            itemprop: get(&at[2]),
            role: get(&at[3]),
            aria_hidden: get(&at[4]),
            hidden_style,
        }
    }
}

/// Characters dropped from extracted text: soft hyphen, zero-width space, word
/// joiner, zero-width no-break space (BOM).
const INVISIBLE: [char; 4] = ['\u{ad}', '\u{200b}', '\u{2060}', '\u{feff}'];

/// Closes the open elements from `stack[i]` on, and the links among them.
fn close_from(stack: &mut Vec<Elem>, i: usize, in_link: &mut usize) {
    *in_link -= stack[i..].iter().filter(|e| e.tag == TAG_A).count();
    stack.truncate(i);
}

/// Appends a text node to the current block (whose text is the tail of `text`,
/// from `cur.start`).
fn push_text(
    cur: &mut Block,
    text: &mut String,
    raw: &str,
    link: bool,
    (boiler, hard, content, pre): (bool, bool, bool, bool),
) {
    if pre {
        push_preformatted(cur, text, raw, link, (boiler, hard, content));
        return;
    }
    let mut before = text.len();
    let newline = cur.newline && text.len() > cur.start;
    if newline {
        // A line broken by `<br>`: its trailing space goes, a newline comes.
        text.truncate(cur.start + text[cur.start..].trim_end().len());
        text.push('\n');
        before = text.len();
    }
    if !push_decoded(text, raw) {
        // Only whitespace: at most one space between the block's words.
        text.truncate(before);
        if text.len() > cur.start && !text.ends_with([' ', '\n']) {
            text.push(' ');
        }
        return;
    }
    cur.newline = false;
    if newline && text[before..].starts_with(' ') {
        text.remove(before);
    }
    note_node(cur, &text[before..], link, (boiler, hard, content));
}

/// What a text node (`node`, as appended) tells its block: link text, and the
/// boilerplate and content marks of the element it sits in.
fn note_node(cur: &mut Block, node: &str, link: bool, (boiler, hard, content): (bool, bool, bool)) {
    if link {
        cur.link_chars += node.trim().chars().count();
    }
    cur.boiler |= boiler;
    cur.hard |= hard;
    cur.content |= content;
}

/// [`push_text`] inside `<pre>`: entities decoded and invisible characters
/// dropped, but every space, tab and line break kept (`\r\n` as `\n`).
fn push_preformatted(
    cur: &mut Block,
    text: &mut String,
    raw: &str,
    link: bool,
    flags: (bool, bool, bool),
) {
    if cur.newline && text.len() > cur.start {
        text.push('\n');
    }
    cur.newline = false;
    let before = text.len();
    text.extend(
        decode_entities(raw)
            .chars()
            .filter(|c| *c != '\r' && !INVISIBLE.contains(c))
            .map(|c| if c == '\u{a0}' { ' ' } else { c }),
    );
    if !text[before..].trim().is_empty() {
        note_node(cur, &text[before..], link, flags);
    }
}

/// Ends the current block: its text trimmed, kept (with the path of open elements)
/// if any is left; the next block starts at the end of the text.
fn flush(cur: &mut Block, blocks: &mut Blocks, stack: &[Elem]) {
    let text = &mut blocks.text;
    let end = cur.start + text[cur.start..].trim_end().len();
    text.truncate(end);
    cur.start = end - text[cur.start..].trim_start().len();
    if cur.start < end {
        cur.end = end;
        let p = blocks.paths.len();
        blocks.paths.extend(stack.iter().map(|e| e.id));
        cur.path = p..blocks.paths.len();
        blocks.list.push(std::mem::replace(cur, Block::new(end)));
    } else {
        *cur = Block::new(end);
    }
}

/// Main text shorter than this (bytes) is chosen again with class-word boilerplate
/// ignored.
const FALLBACK_BELOW: usize = 500;

/// Share of the good text a content region must hold to be used.
const REGION_SHARE: f64 = 0.5;
/// Share of the good text the main container holds (0.6–0.7 score best on the
/// development set; 0.5 and 0.9 lose 0.001–0.003 F1).
const MAIN_SHARE: f64 = 0.7;
/// Good blocks outside the main container are kept from this many bytes.
const OUTSIDE_MIN: usize = 100;

/// Chooses the main-content blocks and joins them with newlines; `relaxed` trusts
/// only tag, role and hiding boilerplate (see [`FALLBACK_BELOW`]).
fn select(all_blocks: &Blocks, relaxed: bool) -> String {
    let blocks = &all_blocks.list[..];
    let text = |b: &Block| all_blocks.text(b);
    let chars = |b: &Block| text(b).chars().count();
    let boiler = |b: &Block| if relaxed { b.hard } else { b.boiler };
    // Classify: good (long, few links), short (neutral), bad. In a content region
    // (blocks under content markup), only its blocks are candidates.
    #[derive(Clone, Copy, PartialEq)]
    enum C {
        Good,
        Near,
        Bad,
    }
    let classify = |use_region: bool| -> Vec<C> {
        blocks
            .iter()
            .map(|b| {
                if boiler(b) || (use_region && !b.content) {
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
            .collect()
    };
    let mut class = classify(false);
    // The region is used when it holds enough of the good text: markup that says
    // "content" around a teaser box must not hide an article it does not mark.
    let (mut in_region, mut all) = (0usize, 0usize);
    for (b, c) in blocks.iter().zip(&class) {
        if *c == C::Good {
            all += text(b).len();
            if b.content {
                in_region += text(b).len();
            }
        }
    }
    if in_region >= 200 && in_region as f64 >= REGION_SHARE * all as f64 {
        class = classify(true);
    }
    // The main container: the deepest element holding at least MAIN_SHARE of the
    // good text. Outside it only long good blocks are kept (an article split
    // around an ad or a gallery); bios, calls to action and teasers are not.
    let mut under: crate::kernels::FastMap<u32, (usize, usize)> = Default::default();
    let mut good = 0usize;
    for (b, c) in blocks.iter().zip(&class) {
        if *c == C::Good {
            let n = text(b).len();
            good += n;
            for (depth, id) in all_blocks.path(b).iter().enumerate() {
                let e = under.entry(*id).or_insert((depth, 0));
                e.1 += n;
            }
        }
    }
    let main = under
        .iter()
        .filter(|(_, (_, n))| *n as f64 >= MAIN_SHARE * good as f64)
        .max_by_key(|(_, (d, _))| *d)
        .map(|(id, _)| *id);
    let inside = |b: &Block| main.is_none_or(|m| all_blocks.path(b).contains(&m));
    // The article around the main container: its good blocks before that
    // container are kept (a lead in the article's header, a summary box).
    let article = main.and_then(|m| {
        let b = blocks.iter().find(|b| all_blocks.path(b).contains(&m))?;
        let path = all_blocks.path(b);
        let upto = path.iter().position(|id| *id == m)?;
        path[..=upto]
            .iter()
            .rev()
            .find(|id| all_blocks.articles.binary_search(id).is_ok())
            .copied()
    });
    let first_inside = blocks.iter().position(inside).unwrap_or(0);
    let in_article = |b: &Block| article.is_some_and(|a| all_blocks.path(b).contains(&a));
    let mut out = String::new();
    for (i, b) in blocks.iter().enumerate() {
        let long_good = class[i] == C::Good
            && (text(b).len() >= OUTSIDE_MIN || (i < first_inside && in_article(b)));
        if !(inside(b) || long_good) {
            continue;
        }
        let keep = match class[i] {
            C::Good => true,
            C::Bad => false,
            // Near blocks survive when a good block is close by (context, as
            // jusText does).
            C::Near => {
                let near_good = |r: std::ops::Range<usize>| {
                    r.filter(|&j| j < blocks.len()).any(|j| class[j] == C::Good)
                };
                // Between good blocks; or leading into good text as a heading, or as
                // a short link-free line in content (a bold paragraph used as a
                // heading, a list's lead-in).
                near_good(i + 1..i + 3)
                    && (near_good(i.saturating_sub(2)..i)
                        || b.heading
                        || (b.content && b.link_chars == 0))
            }
        };
        if keep {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(text(b));
        }
    }
    out
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Byte classes of [`push_decoded`]: [`PLAIN`](super::text::PLAIN) bytes start no
/// whitespace, entity or [`INVISIBLE`] character (`WS_CLASS` with `&` and 0xEF, the
/// lead byte of U+FEFF, added; the other invisible characters start with lead bytes
/// of whitespace).
const NODE_CLASS: [u8; 256] = {
    use super::text::{OTHER, WS_CLASS};
    let mut t = WS_CLASS;
    t[b'&' as usize] = OTHER;
    t[0xEF] = OTHER;
    t
};

/// Appends a text node to `out` as `decode_entities`, then removing the [`INVISIBLE`]
/// characters, then collapsing each whitespace run (as `char::is_whitespace`) to one
/// space (a leading or trailing one kept) would, in one pass: text between the
/// irregular bytes is copied whole (a single space between two other bytes is
/// already collapsed). Returns whether any decoded character is not whitespace.
fn push_decoded(out: &mut String, raw: &str) -> bool {
    use super::text::{PLAIN, SPACE};
    struct Sink<'a> {
        out: &'a mut String,
        /// A whitespace run is open: one space is owed before the next text.
        space: bool,
        text: bool,
    }
    impl Sink<'_> {
        fn run(&mut self, run: &str) {
            if self.space {
                // A run starts with a space only where it may: it is that space.
                if !run.starts_with(' ') {
                    self.out.push(' ');
                }
                self.space = false;
            }
            self.out.push_str(run);
            self.text = true;
        }
        fn char(&mut self, c: char) {
            if INVISIBLE.contains(&c) {
                self.text = true;
            } else if c.is_whitespace() {
                self.space = true;
            } else {
                if self.space {
                    self.out.push(' ');
                    self.space = false;
                }
                self.out.push(c);
                self.text = true;
            }
        }
    }
    let b = raw.as_bytes();
    let mut sink = Sink {
        out,
        space: false,
        text: false,
    };
    let (mut i, mut from) = (0usize, 0usize);
    while i < b.len() {
        match NODE_CLASS[b[i] as usize] {
            PLAIN => {
                i += 1;
                continue;
            }
            SPACE
                if b.get(i + 1)
                    .is_some_and(|&c| NODE_CLASS[c as usize] == PLAIN) =>
            {
                i += 1;
                continue;
            }
            _ => {}
        }
        if from < i {
            sink.run(&raw[from..i]);
        }
        if b[i] == b'&' {
            match entity_at(raw, i) {
                Some((Entity::Char(c), len)) => {
                    sink.char(c);
                    i += len;
                }
                Some((Entity::Str(t), len)) => {
                    t.chars().for_each(|c| sink.char(c));
                    i += len;
                }
                // A bare '&' is text: it starts the next run.
                None => {
                    from = i;
                    i += 1;
                    continue;
                }
            }
        } else {
            let c = raw[i..].chars().next().expect("a char boundary");
            sink.char(c);
            i += c.len_utf8();
        }
        from = i;
    }
    if from < b.len() {
        sink.run(&raw[from..]);
    }
    if sink.space {
        sink.out.push(' ');
    }
    sink.text
}

enum Entity {
    Char(char),
    Str(&'static str),
}

/// The character reference starting with the `&` at `s[i]`, and its length in bytes.
#[inline]
fn entity_at(s: &str, i: usize) -> Option<(Entity, usize)> {
    let tail = &s[i + 1..];
    // A reference is at most 10 bytes before its `;`: look no further (a text of
    // `&`s without one must not be scanned to its end for each of them).
    let e = tail.bytes().take(11).position(|c| c == b';')?;
    let name = &tail[..e];
    let entity = if let Some(num) = name.strip_prefix('#') {
        let v = if let Some(h) = num.strip_prefix(['x', 'X']) {
            u32::from_str_radix(h, 16).ok()
        } else {
            num.parse().ok()
        };
        Entity::Char(v.and_then(char::from_u32)?)
    } else {
        Entity::Str(named(name)?)
    };
    Some((entity, e + 2))
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
        match entity_at(rest, i) {
            Some((c, len)) => {
                match c {
                    Entity::Char(c) => out.push(c),
                    Entity::Str(c) => out.push_str(c),
                }
                rest = &rest[i + len..];
            }
            None => {
                out.push('&');
                rest = &rest[i + 1..];
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

    /// Four ways real pages (trafilatura's evaluation set) lost their whole text.
    #[test]
    fn page_structures_that_used_to_lose_the_article() {
        let para = "This paragraph is the article: long enough, with no links in it, to be \
                    taken as main content by any reasonable extractor.";
        let ex = |html: &str| extract(html, Duration::from_secs(1)).unwrap().text;
        // Blogger: everything inside `class="widget Blog"`; the post body says content.
        let t = ex(&format!(
            "<body><div class='widget Blog'><h2>Title</h2><div class='post-body entry-content'>\
             <p>{para}</p><p>{para}</p><p>{para}</p><p>{para}</p></div>\
             <div class='share'><p>{para} (shared)</p></div></div></body>"
        ));
        assert!(t.contains(para), "{t}");
        assert!(!t.contains("(shared)"), "{t}");
        // ... but a content class does not undo a `nav` or a hidden element.
        let t = ex(&format!(
            "<body><nav><div class='content'><p>{para}</p></div></nav></body>"
        ));
        assert!(t.is_empty(), "{t}");
        // An `<a>` left open closes with its parent: the text after it is no link.
        let t = ex(&format!(
            "<body><div><span><a href='/x'>Adjust</span></div><p>{para}</p><p>{para} Two.</p></body>"
        ));
        assert!(t.contains("Two."), "{t}");
        // Ruby annotations (furigana) are a reading aid, not text: 子(こ)ども reads 子ども.
        let ja =
            "<ruby>子<rp>(</rp><rt>こ</rt><rp>)</rp></ruby>どもへの<ruby>虐待<rt>ぎゃくたい</rt>\
                  </ruby>をなくすための法律ができました。"
                .repeat(6);
        let t = ex(&format!(
            "<body><article><p>{para}</p><p>{ja}</p><p>{para}</p></article></body>"
        ));
        assert!(t.contains("子どもへの虐待をなくす"), "{t}");
        // Text comes out in NFC: a decomposed umlaut is one character.
        let t = ex(&format!(
            "<body><article><p>{para} {}</p></article></body>",
            "Gru\u{308}ße."
        ));
        assert!(t.contains("Grüße."), "{t}");
        // The article in `<noscript>` (the script copy is a template) is read.
        let t = ex(&format!(
            "<body><article><script type='text/template'><p>{para}</p></script>\
             <noscript><p>{para}</p></noscript></article></body>"
        ));
        assert!(t.contains(para), "{t}");
        // A `<head>` never closed ends at the first body element.
        let t = ex(&format!(
            "<html><head><title>T</title><div><p>{para}</p></div></html>"
        ));
        assert!(t.contains(para), "{t}");
        // A page-wide `<form>` (ASP.NET) marks everything; with too little left, the
        // choice is made again on tags alone, and the `nav` stays out.
        let t = ex(&format!(
            "<body><form id='aspnetForm'><nav><p>{para} (menu)</p></nav><p>{para}</p></form></body>"
        ));
        assert!(t.contains(para) && !t.contains("(menu)"), "{t}");
        // Elementor: widget wrappers around and inside the post content (and
        // enough other text that no fallback hides a miss).
        let t = ex(&format!(
            "<body><div class='elementor post'><div class='elementor-widget-wrap'>\
             <div class='elementor-widget elementor-widget-theme-post-content'>\
             <div class='elementor-widget-container'><p>{para} (post)</p><p>{para}</p><p>{para}</p>\
             <p>{para}</p><p>{para}</p></div></div></div></div>\
             <div><p>{para} (more)</p><p>{para} (more)</p><p>{para} (more)</p><p>{para} (more)</p>\
             <p>{para} (more)</p></div></body>"
        ));
        assert!(t.contains("(post)"), "{t}");
        // ... while a sidebar widget's own "widget-content" stays boilerplate.
        let t = ex(&format!(
            "<body><div class='post'><p>{para}</p><p>{para}</p><p>{para}</p><p>{para}</p>\
             <p>{para}</p></div><div class='sidebar'><div class='widget'>\
             <div class='widget-content'><p>{para} (widget)</p></div></div></div></body>"
        ));
        assert!(!t.contains("(widget)"), "{t}");
        // A short line leading into the text (a bold paragraph as a heading) is
        // kept; a short linked line in the same place is not.
        let t = ex(&format!(
            "<body><article><p><a href='/x'>All recipes</a></p><p><b>For the dough:</b></p>\
             <p>{para}</p><p>{para}</p></article></body>"
        ));
        assert!(
            t.contains("For the dough:") && !t.contains("All recipes"),
            "{t}"
        );
        // A self-closed `<title/>` in an SVG icon does not hide what follows.
        let t = ex(&format!(
            "<body><svg><title id='i'/><path d='M0'/></svg><p>{para}</p></body>"
        ));
        assert!(t.contains(para), "{t}");
        // Soft hyphens and zero-width spaces are dropped, not kept inside words.
        let t = ex(&format!(
            "<body><p>{para} Mag&shy;da\u{ad}le\u{200b}ner.</p></body>"
        ));
        assert!(t.contains("Magdalener."), "{t}");
    }

    /// Good text outside the container that holds most of it is kept only when
    /// long: a short bio or call to action next to the article is not.
    #[test]
    fn short_paragraphs_outside_the_main_container_are_dropped() {
        let para = "This paragraph is the article: long enough, with no links in it, to be \
                    taken as main content by any reasonable extractor.";
        let html = format!(
            "<body><div id='a'><p>{para}</p><p>{para}</p><p>{para}</p><p>{para}</p><p>{para}</p></div>\
             <div id='b'><p>Our author writes about cities, rivers and bridges (bio).</p>\
             <p>{para} (continued after the gallery)</p></div></body>"
        );
        let t = extract(&html, Duration::from_secs(1)).unwrap().text;
        assert!(t.contains("(continued after the gallery)"), "{t}");
        assert!(!t.contains("(bio)"), "{t}");
    }

    /// The rules that brought the development set past trafilatura (session 11),
    /// each on the smallest page that needs it.
    #[test]
    fn lines_captions_widgets_teasers_and_leads() {
        let para = "This paragraph is the article: long enough, with no links in it, to be \
                    taken as main content by any reasonable extractor.";
        let ex = |html: &str| extract(html, Duration::from_secs(1)).unwrap().text;
        let five = format!("<p>{para}</p>").repeat(5);
        // `<br>` breaks a line, not a block: short lines of a lyric are judged
        // together, and come out one per line without stray spaces.
        let t = ex(&format!(
            "<body><div class='post'>{five}<p>Go on, then <br> just go<br/>\n  Repeat chorus\
             <br><br>and smile at the end of the road</p></div></body>"
        ));
        assert!(
            t.contains("Go on, then\njust go\nRepeat chorus\nand smile at the end"),
            "{t:?}"
        );
        // Code keeps its lines and indentation; entities are decoded in it.
        let t = ex(&format!(
            "<body><article>{five}<pre><code>for x in xs:\r\n    <b>if</b> x &lt; 0:\n\
             \n        print(x)</code></pre><p>{para}</p></article></body>"
        ));
        assert!(
            t.contains("\nfor x in xs:\n    if x < 0:\n\n        print(x)\n"),
            "{t:?}"
        );
        // Figure captions and form labels are not text.
        let t = ex(&format!(
            "<body><article>{five}<figure><img src='x'><figcaption>A photo of the river \
             (credit: agency)</figcaption></figure><p>{para}</p><form><label>I accept the \
             privacy policy of this website and its newsletter</label></form></article></body>"
        ));
        assert!(
            t.contains(para) && !t.contains("credit") && !t.contains("I accept"),
            "{t}"
        );
        // A content word in the same token as "sidebar" names the sidebar's content.
        let t = ex(&format!(
            "<body><div class='main'>{five}<div class='sidebar'><div class='sidebar-content'>\
             <p>{para} (sidebar)</p></div></div></div></body>"
        ));
        assert!(t.contains(para) && !t.contains("(sidebar)"), "{t}");
        // A widget's id ("text-6", as WordPress numbers them) does not make it content.
        let t = ex(&format!(
            "<body><div class='content'>{five}<div class='sidebar'>\
             <div id='text-6' class='widget widget_text'><p>{para} (widget)</p></div></div>\
             </div></body>"
        ));
        assert!(t.contains(para) && !t.contains("(widget)"), "{t}");
        // An `<article>` in an `<aside>` is a teaser; one in a page-wide `<header>`
        // is the page.
        let t = ex(&format!(
            "<body><article>{five}</article><aside><article><p>{para} (teaser)</p>\
             </article></aside></body>"
        ));
        assert!(t.contains(para) && !t.contains("(teaser)"), "{t}");
        let t = ex(&format!(
            "<body><header id='branding'><article>{five}</article></header></body>"
        ));
        assert!(t.contains(para), "{t}");
        // The article's lead before its body is kept, short as it is; a short
        // paragraph outside the article is not.
        let t = ex(&format!(
            "<body><p>Our newsletter: the best stories each week.</p><article><header>\
             <div class='summary'>Banks worldwide finance projects that harm the climate.</div>\
             </header><div class='body'>{five}</div></article></body>"
        ));
        assert!(t.starts_with("Banks worldwide"), "{t}");
        assert!(!t.contains("newsletter"), "{t}");
    }

    #[test]
    fn attributes_are_read_in_one_pass() {
        let (mut lower, mut scratch) = (String::new(), String::new());
        let a = Attrs::parse(
            r#" CLASS="Main content" id=post-1 data-id="x" Role = 'MAIN' style="color:red; Display : None" aria-hidden=true href="/Some/Long/URL""#,
            &mut lower,
            &mut scratch,
        );
        // Names match ignoring case; the values read come lower-cased.
        assert_eq!(a.class, "main content");
        assert_eq!(a.id, "post-1", "data-id must not be taken for id");
        assert_eq!(a.role, "main");
        assert_eq!(a.aria_hidden, "true");
        assert!(a.hidden_style);
        // The first occurrence wins; valueless attributes and stray characters pass.
        let a = Attrs::parse(r#"hidden class=a class=b / = x"#, &mut lower, &mut scratch);
        assert_eq!(a.class, "a");
        assert!(!a.hidden_style);
        let a = Attrs::parse(r#"class="unterminated"#, &mut lower, &mut scratch);
        assert_eq!(a.class, "unterminated");
    }

    #[test]
    fn text_nodes_decode_drop_invisibles_and_collapse_in_one_pass() {
        // The definition, step by step: entities decoded, invisible characters
        // removed, every maximal run of `char::is_whitespace` one space.
        let reference = |s: &str| {
            let t = decode_entities(s).replace(INVISIBLE, "");
            let mut out = String::new();
            let mut space = false;
            for (i, part) in t.split(char::is_whitespace).enumerate() {
                space |= i > 0;
                if !part.is_empty() {
                    if space {
                        out.push(' ');
                        space = false;
                    }
                    out.push_str(part);
                }
            }
            if space {
                out.push(' ');
            }
            let text = !decode_entities(s).chars().all(char::is_whitespace);
            (out, text)
        };
        let pieces = [
            "a", "b c", " ", "\t\n", "\u{a0}", "\u{85}", "\u{1680}", "\u{2009}", "\u{202f}",
            "\u{3000}", "\u{2028}", "é", "\u{2019}", "\u{3001}", "\u{1681}", "\u{2060}", "\x0b",
            "\u{c0}", "", "\u{ad}", "\u{200b}", "\u{feff}", "\u{ef00}", "&amp;", "&nbsp;", "&shy;",
            "&#32;", "&#x2060;", "&", "&lt;b", "&nope;", "&amp", "&#10;x",
        ];
        // Every string of up to three pieces, so runs, entities and invisible
        // characters meet words and each other.
        let mut n = 0;
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    let s = format!("{a}{b}{c}");
                    let mut out = String::from("x");
                    let text = push_decoded(&mut out, &s);
                    let (want, want_text) = reference(&s);
                    assert_eq!((out, text), (format!("x{want}"), want_text), "{s:?}");
                    n += 1;
                }
            }
        }
        assert_eq!(n, pieces.len().pow(3));
    }

    #[test]
    fn tags_compare_by_lower_case_name_long_ones_too() {
        assert_eq!(Tag::of(b"DIV"), Tag::of(b"div"));
        assert_ne!(Tag::of(b"div"), Tag::of(b"dvi"));
        let long = b"my-very-long-custom-element";
        assert_eq!(Tag::of(long), Tag::of(b"MY-VERY-LONG-CUSTOM-ELEMENT"));
        assert_ne!(Tag::of(long), Tag::of(b"my-very-long-custom-elemenx"));
        assert_ne!(Tag::of(b"0123456789abcdef"), Tag::of(b"0123456789abcdef0"));
        assert_eq!(tag_kind(Tag::of(b"BlockQuote")), K_BLOCK);
        assert_eq!(tag_kind(Tag::of(b"custom-element")), 0);
        // The tokenizer's packing agrees with the constants' on every name shape.
        let chars = b"aZ09-:Hq";
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = 1 + (state % 24) as usize;
            let name: Vec<u8> = (0..len)
                .map(|i| chars[((state >> (i * 2 % 60)) % 8) as usize])
                .collect();
            assert!(name.iter().all(|&c| NAME_CHAR[c as usize]));
            assert_eq!(Tag::of_name(&name), Tag::of(&name), "{name:?}");
        }
        assert_eq!(Tag::of_name(b"SCRIPT"), Tag::of(b"script"));
        assert_eq!(Tag::of_name(b"H1"), Tag::of(b"h1"));
    }

    #[test]
    fn inline_searches_find_what_memchr_finds() {
        // Haystacks of every length around the 16-byte chunks and the inline head,
        // with needles at every position (and none).
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for len in 0..200usize {
            for _ in 0..20 {
                let mut hay: Vec<u8> = (0..len).map(|_| b'a' + (next() % 20) as u8).collect();
                for _ in 0..(next() % 3) {
                    if len > 0 {
                        let at = (next() as usize) % len;
                        hay[at] = [b'<', b'>', b'"', b'\''][(next() % 4) as usize];
                    }
                }
                assert_eq!(find1(b'<', &hay), memchr::memchr(b'<', &hay), "{hay:?}");
                assert_eq!(
                    find3(b'>', b'"', b'\'', &hay),
                    memchr::memchr3(b'>', b'"', b'\'', &hay),
                    "{hay:?}"
                );
            }
        }
    }

    #[test]
    fn tag_ends_honour_quotes_only_after_equals() {
        let end = |s: &str| find_tag_end(s.as_bytes(), 0);
        assert_eq!(end(r#"<a title="x>y">z"#), 15);
        assert_eq!(end(r#"<a title = 'x>y'>z"#), 17);
        // A stray apostrophe is not a quote.
        assert_eq!(end(r#"<a don't>z"#), 9);
        assert_eq!(end(r#"<a title="open"#), 14);
        // A runaway quoted value gives up quoting at the first '>'.
        let long = format!(r#"<a t="{}>rest"#, "x".repeat(70_000));
        assert_eq!(end(&long), 70_007);
    }

    #[test]
    fn entities_and_budget() {
        assert_eq!(
            decode_entities("a &amp; b &#233;&#x41; &nope; &"),
            "a & b éA &nope; &"
        );
        // A reference's name is at most 10 bytes before its `;`.
        assert_eq!(
            decode_entities("&#000000065;&#0000000065;"),
            "A&#0000000065;"
        );
        let ands = "&".repeat(50_000) + "amp;";
        assert_eq!(decode_entities(&ands), "&".repeat(50_000));
        let nasty = "<div>".repeat(200_000) + &"x ".repeat(100_000);
        assert_eq!(
            extract(&nasty, Duration::from_nanos(1)),
            Err(ExtractError::Timeout)
        );
        assert!(extract(&nasty, Duration::from_secs(30)).is_ok());
    }
}
