//! Tag names packed into one value, the tag and class-word tables.
use super::*;

/// A lower-case tag name as one value: up to 16 bytes packed, a longer name
/// hashed with bit 127 set (packed ASCII never sets it). Names are ASCII letters,
/// digits, `-` and `:` (no NUL), so packing is one to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Tag(u128);

impl Tag {
    pub(super) const fn of(name: &[u8]) -> Tag {
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

    /// A name with characters no known tag has (`a.length`, `script\0`): always the
    /// hashed form, so it never equals a known tag however its bytes pack.
    pub(super) fn other(name: &[u8]) -> Tag {
        let mut v: u128 = 0x6c62272e07bb014262b821756295c58d;
        for &c in name {
            v ^= c.to_ascii_lowercase() as u128;
            v = v.wrapping_mul(0x0000000001000000000000000000013B);
        }
        Tag(v | 1 << 127)
    }

    /// [`Tag::of`] for a name scanned from a page (letters, digits, `-`, `:`): up to
    /// 16 bytes in one load, lower-cased by setting bit 5 of each byte, which those
    /// characters other than `A`–`Z` already have.
    #[inline]
    pub(super) fn of_name(name: &[u8]) -> Tag {
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
pub(super) const NAME_CHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        t[i] = c.is_ascii_alphanumeric() || c == b'-' || c == b':';
        i += 1;
    }
    t
};

pub(super) const TAG_A: Tag = Tag::of(b"a");
pub(super) const TAG_HEAD: Tag = Tag::of(b"head");
pub(super) const TAG_TITLE: Tag = Tag::of(b"title");
pub(super) const TAG_ARTICLE: Tag = Tag::of(b"article");
pub(super) const TAG_MAIN: Tag = Tag::of(b"main");
pub(super) const TAG_HTML: Tag = Tag::of(b"html");
pub(super) const TAG_BODY: Tag = Tag::of(b"body");
pub(super) const TAG_FORM: Tag = Tag::of(b"form");
pub(super) const TAG_HEADER: Tag = Tag::of(b"header");
pub(super) const TAG_LI: Tag = Tag::of(b"li");
pub(super) const TAG_TD: Tag = Tag::of(b"td");
pub(super) const TAG_DD: Tag = Tag::of(b"dd");
pub(super) const TAG_BR: Tag = Tag::of(b"br");
pub(super) const TAG_PRE: Tag = Tag::of(b"pre");

#[derive(Debug, Clone)]
pub(super) struct Elem {
    pub(super) tag: Tag,
    pub(super) id: u32,
    pub(super) boiler: bool,
    /// Boilerplate by tag, role or hiding (`nav`, `role=navigation`,
    /// `display:none`), which no descendant undoes; class words ("widget",
    /// "sidebar") are undone by a descendant with a content class ("post-body").
    pub(super) hard: bool,
    pub(super) content: bool,
    /// Inside `nav`, `footer`, `aside`, `menu` or `dialog`.
    pub(super) in_box: bool,
    /// Inside `<pre>`: whitespace is kept (code, poems, ASCII tables).
    pub(super) pre: bool,
}

pub(super) const SKIP_RAW: &[&str] = &["script", "style", "template", "textarea", "title"];
pub(super) const SKIP_TREE: &[&str] = &[
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
pub(super) const IN_HEAD: &[&str] = &[
    "meta", "link", "title", "style", "script", "noscript", "base", "template", "img", "iframe",
];
pub(super) const BOILER_TAGS: &[&str] = &["nav", "footer", "aside", "menu", "dialog"];
pub(super) const BLOCK_TAGS: &[&str] = &[
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
pub(super) const VOID: &[&str] = &[
    "br", "hr", "img", "meta", "link", "input", "source", "wbr", "area", "base", "col", "embed",
    "param", "track",
];
pub(super) const BOILER_WORDS: &[&str] = &[
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
pub(super) const CONTENT_WORDS: &[&str] = &[
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
pub(super) const K_BLOCK: u8 = 1;
pub(super) const K_SKIP_RAW: u8 = 2;
pub(super) const K_VOID: u8 = 4;
pub(super) const K_BOILER: u8 = 8;
pub(super) const K_SKIP_TREE: u8 = 16;
pub(super) const K_IN_HEAD: u8 = 32;

/// Each known tag's kinds: one hash lookup per tag instead of a scan of six lists.
pub(super) static TAG_KINDS: LazyLock<FastMap<Tag, u8>> = LazyLock::new(|| {
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

pub(super) fn tag_kind(tag: Tag) -> u8 {
    TAG_KINDS.get(&tag).copied().unwrap_or(0)
}

// Class and id word kinds.
pub(super) const W_CONTENT: u8 = 1;
pub(super) const W_BOILER: u8 = 2;
/// Boilerplate outside content only, and it does not stop a content word beside it
/// from undoing an ancestor's boilerplate: page builders call every block a widget
/// (`elementor-widget elementor-widget-theme-post-content` >
/// `elementor-widget-container` > the article's paragraphs).
pub(super) const W_WEAK_BOILER: u8 = 4;
pub(super) const WEAK_BOILER_WORDS: &[&str] = &["widget"];
/// Boilerplate whose own content a content word in the same token names
/// ("sidebar-content", "comment-body", "author-box--content"): the token stays
/// boilerplate.
pub(super) const W_OWNS_CONTENT: u8 = 8;
/// A content class that names the post, not any box's inside: a specific content
/// word ("post", "entry", "article"), or two generic ones in one token.
pub(super) const W_STRONG_CONTENT: u8 = 16;
pub(super) const GENERIC_CONTENT_WORDS: &[&str] = &["content", "text", "main", "body"];
pub(super) const OWNS_CONTENT_WORDS: &[&str] = &[
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

pub(super) static CLASS_WORDS: LazyLock<FastMap<&'static str, u8>> = LazyLock::new(|| {
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
pub(super) fn class_kinds(values: &[&str]) -> u8 {
    let (mut k, mut post_widget) = (0u8, false);
    for v in values {
        for token in v.split_ascii_whitespace() {
            let (mut t, mut contents) = (0u8, 0u32);
            for w in words_of(token) {
                let kind = CLASS_WORDS
                    .get(w)
                    .copied()
                    .unwrap_or_else(|| compound_kind(w));
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

/// Class words run together without a separator ("postcomments", "commentlist",
/// "storybody", "relatedlinks"): a boilerplate stem at either end of the word with a
/// class or part word for the rest, or a content name followed by a generic content
/// word. Only the ends are compared until a stem matches, so an unknown word costs a
/// few byte comparisons.
pub(super) fn compound_kind(w: &str) -> u8 {
    if w.len() < 7 {
        return 0;
    }
    // The rest must start with a class word, a part name or a digit:
    // `commentlist`, `postcomments`, `relatedarticlerow`, `footer1`, not
    // `socialite`, `unrelated`, `commenter` or `filesharing`.
    let part = |r: &str| {
        r.bytes().next().is_some_and(|c| c.is_ascii_digit())
            || (2..=r.len()).any(|i| {
                r.get(..i)
                    .is_some_and(|p| CLASS_WORDS.contains_key(p) || PART_WORDS.contains(&p))
            })
    };
    for stem in COMPOUND_BOILER {
        let rest = w
            .strip_prefix(stem)
            .filter(|r| part(r))
            .or_else(|| w.strip_suffix(stem).filter(|r| part(r)));
        if rest.is_some() {
            return CLASS_WORDS.get(stem).copied().unwrap_or(0);
        }
    }
    for tail in ["body", "content", "text"] {
        if let Some(head) = w.strip_suffix(tail)
            && matches!(head, "article" | "story" | "entry" | "post" | "main")
        {
            return W_CONTENT | W_STRONG_CONTENT;
        }
    }
    0
}

/// Names of parts that class words are run together with.
const PART_WORDS: &[&str] = &[
    "list",
    "links",
    "link",
    "box",
    "wrap",
    "wrapper",
    "area",
    "section",
    "block",
    "container",
    "item",
    "items",
    "form",
    "count",
    "title",
    "header",
    "head",
    "area",
    "bar",
    "panel",
    "module",
    "page",
    "site",
    "user",
    "top",
    "bottom",
    "left",
    "right",
    "inner",
    "outer",
    "holder",
    "thread",
    "buttons",
    "button",
    "icons",
    "icon",
    "widget",
    "wrap",
    "zone",
    "col",
    "column",
];

/// Boilerplate words recognised at the ends of a compound word (see
/// [`compound_kind`]): long and distinctive enough not to end unrelated words.
const COMPOUND_BOILER: &[&str] = &[
    "comments",
    "comment",
    "sidebar",
    "related",
    "footer",
    "newsletter",
    "social",
    "sharing",
    "breadcrumb",
    "navigation",
    "navbar",
    "advert",
    "sponsor",
    "subscribe",
    "cookie",
    "pagination",
];

pub(super) fn words_of(v: &str) -> impl Iterator<Item = &str> {
    v.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
}
