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
    let ja = "<ruby>子<rp>(</rp><rt>こ</rt><rp>)</rp></ruby>どもへの<ruby>虐待<rt>ぎゃくたい</rt>\
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

/// Structures from the extraction-wceb tuning halves where the page came out empty
/// or wrong.
#[test]
fn links_tag_names_tiny_pages_and_run_together_class_words() {
    let para = "This paragraph is the article: long enough, with no links in it, to be \
                taken as main content by any reasonable extractor.";
    let ex = |html: &str| extract(html, Duration::from_secs(1)).unwrap().text;
    // A script that leaked into the page (a truncated capture): `<a.length` is an
    // unknown element by the spec's tag-name rule, not a link left open.
    let t = ex(&format!(
        "<html><body>for(i=0;a&&i<a.length&&(x=a[i]);i++) x.src=1;\n<div><p>{para}</p><p>{para}</p></div></body></html>"
    ));
    assert!(t.contains("This paragraph is the article"), "{t}");
    // An `<a>` never closed is closed by the next `<a>`: the article after the menu
    // is not link text.
    let t = ex(&format!(
        "<html><body><div><a href=/>Home<a href=/n>News</a></div><div><p>{para}</p><p>{para}</p></div></body></html>"
    ));
    assert!(t.contains("This paragraph is the article"), "{t}");
    // A page of one short line is its own content.
    assert_eq!(
        ex("<html><head><title>T</title></head><body> Test </body></html>"),
        "Test"
    );
    // ...but a short page of navigation stays empty.
    assert_eq!(
        ex("<html><body><nav><a href=/>Home</a></nav></body></html>"),
        ""
    );
    // Class words run together: comments in `postcomments`/`commentlist`, the
    // story in `storybody`; `commentary` is not a comment box.
    let t = ex(&format!(
        "<html><body><div class=storybody><p>{para}</p><p>{para}</p></div>\
         <div class=postcomments><ul class=commentlist><li><p>A reader wrote this long comment \
         about the article, which is not part of the article itself at all.</p></li></ul></div></body></html>"
    ));
    assert!(
        t.contains("This paragraph") && !t.contains("A reader wrote"),
        "{t}"
    );
    assert_eq!(class_kinds(&["commentlist"]) & W_BOILER, W_BOILER);
    assert_eq!(class_kinds(&["relatedlinks"]) & W_BOILER, W_BOILER);
    assert_eq!(class_kinds(&["commentary"]), 0);
    assert_eq!(class_kinds(&["storybody"]), W_CONTENT | W_STRONG_CONTENT);
}

#[test]
fn metadata_from_json_ld_open_graph_and_meta_names() {
    let page = r#"<html><head>
<meta property="og:site_name" content="The Daily &amp; Co">
<meta name="author" content="Meta Author">
<meta property="article:published_time" content="2024-03-05T10:00:00Z">
<meta name="description" content="  A short
   description. ">
<link rel="stylesheet" href="/s.css"><link rel="canonical" href="https://example.com/a/b">
<script>var s = '<meta name="author" content="Not This">';</script>
<script type="application/ld+json">{"@context":"https://schema.org","@graph":[
 {"@type":"WebSite","name":"Site"},
 {"@type":["NewsArticle"],"author":[{"@type":"Person","name":"Ada Lovelace"},{"name":"Charles Babbage"}],
  "datePublished":"2024-03-04","publisher":{"@type":"Organization","name":"Daily Publishing"}}]}</script>
</head><body><p>Text.</p></body></html>"#;
    let m = metadata(page, None);
    assert_eq!(m.author.as_deref(), Some("Ada Lovelace, Charles Babbage"));
    assert_eq!(m.date.as_deref(), Some("2024-03-04"));
    assert_eq!(m.site_name.as_deref(), Some("Daily Publishing"));
    assert_eq!(m.canonical_url.as_deref(), Some("https://example.com/a/b"));
    assert_eq!(m.description.as_deref(), Some("A short description."));
    // Without JSON-LD, the `<meta>` names; a script's text is never read as tags.
    let page = page.replace("application/ld+json", "text/plain");
    let m = metadata(&page, None);
    assert_eq!(m.author.as_deref(), Some("Meta Author"));
    assert_eq!(m.date.as_deref(), Some("2024-03-05"));
    assert_eq!(m.site_name.as_deref(), Some("The Daily & Co"));
    // Nothing declared: nothing guessed; broken JSON-LD and junk dates ignored.
    let m = metadata(
        r#"<html><head><script type="application/ld+json">{"@type": "Article",</script>
<meta name="date" content="yesterday"><meta property="article:author" content="https://x.com/u">
<link rel="canonical" href="/relative"></head><body>By Someone, 2024-01-01</body></html>"#,
        Some("https://e.com/news/item?d=2024/01/01/"),
    );
    assert_eq!(m, Metadata::default());
    // Dates: the forms pages use; impossible ones refused.
    for (v, want) in [
        ("2008-01-16T08:29:00-08:00", Some("2008-01-16")),
        ("2008/01/16", Some("2008-01-16")),
        ("20080116", Some("2008-01-16")),
        ("2023-02-29", None),
        ("1850-01-01", None),
        ("16/01/2008", None),
        ("2008-13-01", None),
        ("2008-01-1é", None),
        ("200801é", None),
        ("é", None),
    ] {
        assert_eq!(iso_date(v).as_deref(), want, "{v}");
    }
    // The address's date where the page declares none; a declared one wins.
    for (url, want) in [
        ("https://e.com/2008/01/16/story.html", Some("2008-01-16")),
        ("https://e.com/blog/2008-1-6-x", None),
        ("https://e.com/blog/2008-01-06-title", Some("2008-01-06")),
        ("https://e.com/2008/13/16/", None),
        ("https://e.com/id/2008/1234/5", None),
    ] {
        assert_eq!(url_date(url).as_deref(), want, "{url}");
    }
    let m = metadata(
        r#"<p>By <time itemprop="datePublished" datetime="2020-05-06T07:00">May 6</time></p>
<meta name="author" content="By Jane Doe">"#,
        Some("https://e.com/2008/01/16/x"),
    );
    assert_eq!(m.date.as_deref(), Some("2020-05-06"));
    assert_eq!(m.author.as_deref(), Some("Jane Doe"));
    assert_eq!(
        metadata("<p>x</p>", Some("https://e.com/2008/01/16/x"))
            .date
            .as_deref(),
        Some("2008-01-16")
    );
    // A hostile value is bounded.
    let long = format!(
        r#"<meta name="description" content="{}">"#,
        "x ".repeat(100_000)
    );
    assert_eq!(
        metadata(&long, None).description.unwrap().chars().count(),
        1000
    );
}

/// The hostile review's inputs for the issue-24 changes.
#[test]
fn hostile_pages_for_links_tags_metadata_and_tiny_pages() {
    let para = "This paragraph is the article: long enough, with no links in it, to be \
                taken as main content by any reasonable extractor.";
    let ex = |html: &str| extract(html, Duration::from_secs(1)).unwrap().text;
    // A page cut off inside a tag, ending in a multi-byte character: no panic.
    for page in [
        "<p>text</p><img alt=\"caf\u{FFFD}",
        "<p>x</p><o:p\u{FFFD}",
        "<a\u{FFFD}",
    ] {
        let _ = ex(page);
        let _ = metadata(page, None);
    }
    // `content=Jane` at the very end is not cut to "Jan".
    assert_eq!(
        metadata("<meta name=author content=Jane", None)
            .author
            .as_deref(),
        Some("Jane")
    );
    // A card link around a block: only the link closes at the next `<a>`; the
    // article after the card is kept.
    let t = ex(&format!(
        "<html><body><div class=entry-content><p>{para}</p><a class=card><div>teaser \
         <a>x</a> tail</div></a><p>{para} Second.</p><p>{para} Third.</p></div></body></html>"
    ));
    assert!(t.contains("Second.") && t.contains("Third."), "{t}");
    // Inside a skipped subtree (an SVG in a link) nothing is closed or leaked.
    let t = ex(&format!(
        "<html><body><p>{para}</p><p><a href=/x><svg><a href=#i><text>SVGLABEL</text></a>\
         <text>SVGMORE</text></svg>Link</a></p><p>{para}</p></body></html>"
    ));
    assert!(!t.contains("SVGLABEL") && !t.contains("SVGMORE"), "{t}");
    // A tiny page of menu links, a cookie notice and a share link stays empty.
    assert_eq!(
        ex(
            "<html><body><div class=menu><a href=/>Home</a> <a href=/a>About</a></div>\
            <div class=cookie-notice>Accept cookies</div><p><a href=/s>Share on Facebook</a></p></body></html>"
        ),
        ""
    );
    // A NUL in a tag name is not the tag without it: `<script\0>` does not swallow
    // the article.
    let t = ex(&format!(
        "<html><body><script\0>x</script\0><p>{para}</p><p>{para}</p></body></html>"
    ));
    assert!(t.contains("This paragraph"), "{t}");
    // `<!-->` is a whole comment.
    let t = ex(&format!(
        "<html><body><!--><p>{para}</p><p>{para}</p><!-- x --></body></html>"
    ));
    assert!(t.contains("This paragraph"), "{t}");
    // Topic words are not boilerplate stems.
    for w in [
        "socialite",
        "unrelated",
        "commenter",
        "antisocial",
        "filesharing",
        "cookiecutter",
        "navigational",
        "relatedness",
    ] {
        assert_eq!(class_kinds(&[w]) & W_BOILER, 0, "{w}");
    }
    // Metadata: raw-text elements and custom elements are not tags; microdata is
    // read after the page-level names.
    let m = metadata(
        r#"<textarea><meta name=author content=Evil></textarea><script-loader>
<meta name=description content=Seen></script-loader><!-->
<div itemscope itemtype=https://schema.org/Comment><meta itemprop=author content=Commenter></div>
<meta name=author content=Real>"#,
        None,
    );
    assert_eq!(m.author.as_deref(), Some("Real"));
    assert_eq!(m.description.as_deref(), Some("Seen"));
    // One tag naming a key thousands of times over a huge value: bounded work.
    let keys = "description ".repeat(5000);
    let page = format!(
        r#"<meta property="{keys}" content="{}x">"#,
        " ".repeat(400_000)
    );
    assert_eq!(metadata(&page, None).description, None);
    let page = format!(
        r#"<meta property="{keys}" content="{}">"#,
        "word ".repeat(100_000)
    );
    assert_eq!(
        metadata(&page, None).description.unwrap().chars().count(),
        1000
    );
}

/// A Chinese or Japanese sentence of 30 characters says as much as an English one of
/// 60: the length thresholds count CJK characters twice (a blog of short Chinese
/// lines was taken for boilerplate).
#[test]
fn cjk_lines_count_as_long_as_what_they_say() {
    let line = "一波波接續性低溫寒流報到已將新竹尖石鄉後山一帶層層山巒披上嫣紅的彩衣";
    assert!(line.chars().count() < 50 && units(line, line.chars().count()) >= 50);
    let body: String = (0..6).map(|i| format!("<p>{line}{i}</p>")).collect();
    let page = format!(
        "<html><body><div class=menu><a href=/>首頁</a></div><div>{body}</div></body></html>"
    );
    let t = extract(&page, Duration::from_secs(1)).unwrap().text;
    assert_eq!(t.lines().count(), 6, "{t}");
    assert_eq!(units("plain ascii", 11), 11);
}
