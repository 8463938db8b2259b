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
    let mut raw_scratch = Vec::new();
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
            pos = comment_end(b, lt);
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
        // The spec's tag name runs to white space, `/` or `>`: `<a.length` in a
        // script that leaked into the body is an unknown element, not a link.
        let mut tag = Tag::of_name(&b[name_start..name_end]);
        if tag_name_end(b, name_end) > name_end {
            name_end = tag_name_end(b, name_end);
            tag = Tag::other(&b[name_start..name_end]);
        }
        let tag_end = find_tag_end(b, name_end);
        let name = &b[name_start..name_end];
        let attrs = &html[name_end..attrs_end(b, name_end, tag_end)];
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
            let (end, next) = raw_text_end(b, pos, name, &mut raw_scratch);
            if tag == TAG_TITLE && title.is_none() {
                let t = collapse(&decode_entities(&html[pos..end]));
                if !t.is_empty() {
                    title = Some(t);
                }
            }
            pos = next;
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
            // A link does not nest: `<a>` closes a link left open, as parsers do
            // (one unclosed `<a>` must not make the rest of the page link text).
            // Only the link is closed: elements opened inside it stay open (a
            // card link around a `<div>`), and inside a skipped subtree (an SVG, a
            // button) nothing is closed.
            if in_link > 0
                && skip_depth.is_none()
                && let Some(i) = stack.iter().rposition(|e| e.tag == TAG_A)
            {
                stack.remove(i);
                in_link -= 1;
            }
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
                } else if text.is_empty() {
                    // A page this small has no boilerplate to tell apart: its
                    // visible text is its content.
                    tiny_page(&blocks)
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

// The parts of the extractor, one concern each; their items are this module's.
mod entities;
mod meta;
mod scan;
mod select;
mod tags;
mod text;
pub use entities::decode_entities;
use entities::*;
pub use meta::{Metadata, iso_date, metadata, url_date};
use scan::*;
use select::*;
use tags::*;
use text::*;

#[cfg(test)]
mod tests;
