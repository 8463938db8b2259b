//! Page metadata that curators keep beside the text: author, publication date, site
//! name, canonical URL and description, read from what the page declares about
//! itself: JSON-LD (`<script type="application/ld+json">`, schema.org's Article and
//! its kinds), Open Graph and `article:` properties, and the common `<meta name>`
//! conventions (Dublin Core, Parse.ly, Sailthru, citation_*), as trafilatura's
//! metadata extraction reads them. Nothing is guessed from the visible text: a field
//! a page does not declare is `None`. Values are entity-decoded, white space
//! collapsed, and bounded in length (a hostile page cannot make a column huge).
use super::*;

/// What a page declares about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    pub author: Option<String>,
    /// The publication date as `YYYY-MM-DD`.
    pub date: Option<String>,
    pub site_name: Option<String>,
    /// An absolute `http(s)` URL.
    pub canonical_url: Option<String>,
    pub description: Option<String>,
}

/// Longest value kept (characters); longer ones are cut at a character boundary.
const MAX_CHARS: usize = 1000;
/// JSON-LD bodies larger than this are not parsed.
const MAX_JSON_LD: usize = 256 * 1024;

/// Candidates, best first: JSON-LD, then the `<meta>` names in this order.
const AUTHOR: &[&str] = &[
    "author",
    "article:author",
    "parsely-author",
    "sailthru.author",
    "byl",
    "dc.creator",
    "dcterms.creator",
    "citation_author",
    "itemprop:author",
];
const DATE: &[&str] = &[
    "article:published_time",
    "datepublished",
    "og:published_time",
    "parsely-pub-date",
    "sailthru.date",
    "pubdate",
    "publish-date",
    "publish_date",
    "date",
    "dc.date",
    "dc.date.issued",
    "dcterms.created",
    "dcterms.date",
    "citation_publication_date",
    "citation_date",
    "itemprop:datepublished",
];
const SITE: &[&str] = &["og:site_name", "application-name", "twitter:site"];
const DESCRIPTION: &[&str] = &["description", "og:description", "twitter:description"];

/// Every `<meta>` name read, in the order of the lists above (a page's other names
/// are not kept: a hostile page cannot grow this).
fn known_key(k: &str) -> Option<u8> {
    [AUTHOR, DATE, SITE, DESCRIPTION, &["og:url"]]
        .iter()
        .flat_map(|l| l.iter())
        .position(|x| x.eq_ignore_ascii_case(k))
        .and_then(|i| u8::try_from(i).ok())
}

/// Values kept per name (the first ones win anyway).
const PER_KEY: u8 = 4;

/// Keeps `v` for the name `i` unless that name already has [`PER_KEY`] values.
fn keep<'a>(metas: &mut Vec<(u8, &'a str)>, per_key: &mut [u8; 64], i: u8, v: &'a str) {
    if per_key[usize::from(i)] < PER_KEY {
        per_key[usize::from(i)] += 1;
        metas.push((i, v));
    }
}

/// Reads the page's metadata in one pass over its tags; `url`, the page's address,
/// gives the date where the page declares none and its path carries one
/// (`/2008/01/16/`, `/2008-01-16-title`).
pub fn metadata(html: &str, url: Option<&str>) -> Metadata {
    let b = html.as_bytes();
    // (index of a known name, content), in page order, at most PER_KEY per name.
    let mut metas: Vec<(u8, &str)> = Vec::new();
    let mut per_key = [0u8; 64];
    let mut canonical: Option<&str> = None;
    let mut scratch = Vec::new();
    let mut ld = Metadata::default();
    let mut pos = 0;
    while let Some(i) = memchr::memchr(b'<', &b[pos..]) {
        let lt = pos + i;
        if b[lt..].starts_with(b"<!--") {
            pos = comment_end(b, lt);
            continue;
        }
        // The spec's tag name: a letter, then anything up to white space, `/` or `>`.
        if !b.get(lt + 1).is_some_and(u8::is_ascii_alphabetic) {
            pos = lt + 1;
            continue;
        }
        let name_end = tag_name_end(b, lt + 1);
        let name = &b[lt + 1..name_end];
        let tag_end = find_tag_end(b, name_end);
        let attrs = &html[name_end..attrs_end(b, name_end, tag_end)];
        pos = tag_end;
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        if is(b"meta") {
            let a = attr_pairs(attrs);
            let content = get(&a, "content");
            let mut keys = |k: Option<&str>, prefix: &str| {
                let (Some(k), Some(v)) = (k, content) else {
                    return;
                };
                // `property="dc:description og:description"` names several.
                for k in k.split_ascii_whitespace().take(8) {
                    let key = if prefix.is_empty() {
                        known_key(k)
                    } else {
                        known_key(&format!("{prefix}{}", k.get(..40).unwrap_or(k)))
                    };
                    if let Some(i) = key {
                        keep(&mut metas, &mut per_key, i, v);
                    }
                }
            };
            keys(get(&a, "property"), "");
            keys(get(&a, "name"), "");
            keys(get(&a, "itemprop"), "itemprop:");
        } else if is(b"time") {
            // `<time itemprop="datePublished" datetime=...>`, `<time pubdate datetime=...>`.
            let a = attr_pairs(attrs);
            let published = get(&a, "itemprop")
                .is_some_and(|p| p.eq_ignore_ascii_case("datepublished"))
                || get(&a, "pubdate").is_some();
            if published
                && let Some(v) = get(&a, "datetime")
                && let Some(i) = known_key("itemprop:datepublished")
            {
                keep(&mut metas, &mut per_key, i, v);
            }
        } else if is(b"link") {
            let a = attr_pairs(attrs);
            if canonical.is_none()
                && get(&a, "rel").is_some_and(|r| {
                    r.split_ascii_whitespace()
                        .any(|r| r.eq_ignore_ascii_case("canonical"))
                })
            {
                canonical = get(&a, "href");
            }
        } else if SKIP_RAW.iter().any(|r| is(r.as_bytes())) && !b[..tag_end].ends_with(b"/>") {
            // Raw text to the end tag (script, style, template, textarea, title):
            // JSON-LD is read, the rest skipped, never taken for tags.
            let (end, next) = raw_text_end(b, pos, name, &mut scratch);
            let is_ld = is(b"script")
                && get(&attr_pairs(attrs), "type")
                    .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/ld+json"));
            if is_ld && end - pos <= MAX_JSON_LD {
                json_ld(&html[pos..end], &mut ld);
            }
            pos = next;
        }
    }
    let meta = |keys: &[&str], ok: &dyn Fn(&str) -> bool| {
        keys.iter().find_map(|k| {
            let k = known_key(k);
            metas
                .iter()
                .filter(|(n, _)| Some(*n) == k)
                .map(|(_, v)| clean(v))
                .find(|v| !v.is_empty() && ok(v))
        })
    };
    let any = |_: &str| true;
    // `article:author` is often a profile URL, not a name.
    let name_like = |v: &str| !v.starts_with("http://") && !v.starts_with("https://");
    Metadata {
        author: ld
            .author
            .or_else(|| meta(AUTHOR, &name_like))
            .map(|a| strip_by(&a).to_string()),
        date: ld
            .date
            .or_else(|| meta(DATE, &|v| iso_date(v).is_some()).and_then(|v| iso_date(&v)))
            .or_else(|| url.and_then(url_date)),
        site_name: ld.site_name.or_else(|| meta(SITE, &any)),
        canonical_url: canonical
            .map(clean)
            .filter(|u| absolute(u))
            .or_else(|| meta(&["og:url"], &absolute)),
        description: ld.description.or_else(|| meta(DESCRIPTION, &any)),
    }
}

/// "By Jane Doe" is Jane Doe.
fn strip_by(a: &str) -> &str {
    match a.get(..3) {
        Some(p) if p.eq_ignore_ascii_case("by ") => a[3..].trim_start(),
        _ => a,
    }
}

/// A date in a URL's path: `/2008/01/16/` or a segment starting `2008-01-16`.
pub fn url_date(url: &str) -> Option<String> {
    let path = url.split(['?', '#']).next()?;
    let path = path.split_once("://").map_or(path, |(_, rest)| rest);
    let segs: Vec<&str> = path.split('/').skip(1).collect();
    let digits = |s: &str, n: std::ops::RangeInclusive<usize>| {
        n.contains(&s.len()) && s.bytes().all(|c| c.is_ascii_digit())
    };
    for w in segs.windows(3) {
        if digits(w[0], 4..=4) && digits(w[1], 1..=2) && digits(w[2], 1..=2) {
            let d = format!("{}-{:0>2}-{:0>2}", w[0], w[1], w[2]);
            if let Some(d) = iso_date(&d) {
                return Some(d);
            }
        }
    }
    segs.iter().find_map(|s| {
        let head = s.get(..10)?;
        (head.as_bytes()[4] == b'-' && head.as_bytes()[7] == b'-')
            .then(|| iso_date(head))
            .flatten()
    })
}

fn absolute(u: &str) -> bool {
    (u.starts_with("https://") || u.starts_with("http://")) && !u.contains(char::is_whitespace)
}

/// Entity-decoded, white space collapsed, at most [`MAX_CHARS`] characters (the raw
/// value is cut first, so a huge attribute costs no more than a long one).
fn clean(v: &str) -> String {
    let mut cut = v.len().min(8 * MAX_CHARS);
    while !v.is_char_boundary(cut) {
        cut -= 1;
    }
    let v = collapse(&decode_entities(&v[..cut]));
    match v.char_indices().nth(MAX_CHARS) {
        Some((i, _)) => v[..i].to_string(),
        None => v,
    }
}

/// `YYYY-MM-DD` from a date that starts with one (ISO 8601, `2008/01/16`,
/// `20080116`), years 1900–2099 and real months and days only.
pub fn iso_date(v: &str) -> Option<String> {
    let d: Vec<u32> = {
        let v = v.trim();
        let digits = |s: &str| s.bytes().all(|c| c.is_ascii_digit()) && !s.is_empty();
        if v.get(..8).is_some_and(digits) {
            vec![
                v[..4].parse().ok()?,
                v[4..6].parse().ok()?,
                v[6..8].parse().ok()?,
            ]
        } else {
            let head = v.get(..10)?;
            let parts: Vec<&str> = head.split(['-', '/', '.']).collect();
            if parts.len() != 3 || parts[0].len() != 4 || !parts.iter().all(|p| digits(p)) {
                return None;
            }
            parts
                .iter()
                .map(|p| p.parse().ok())
                .collect::<Option<_>>()?
        }
    };
    let (y, m, day) = (d[0], d[1], d[2]);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    ((1900..2100).contains(&y) && (1..=12).contains(&m) && day >= 1 && day <= days[m as usize - 1])
        .then(|| format!("{y:04}-{m:02}-{day:02}"))
}

/// Attribute name/value pairs of a tag.
fn attr_pairs(s: &str) -> Vec<(&str, &str)> {
    let mut i = 0;
    std::iter::from_fn(|| next_attr(s, &mut i)).collect()
}

/// The first value of an attribute, by name ignoring case.
fn get<'a>(a: &[(&str, &'a str)], name: &str) -> Option<&'a str> {
    a.iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
}

/// schema.org kinds whose fields describe the page's main text.
const LD_TYPES: &[&str] = &[
    "article",
    "newsarticle",
    "blogposting",
    "reportagenewsarticle",
    "analysisnewsarticle",
    "opinionnewsarticle",
    "scholarlyarticle",
    "techarticle",
    "report",
    "webpage",
    "posting",
    "socialmediaposting",
    "discussionforumposting",
    "liveblogposting",
    "review",
    "recipe",
];

/// Fills the fields a JSON-LD block gives that are still empty; invalid JSON is
/// ignored (pages ship broken JSON-LD often).
fn json_ld(body: &str, out: &mut Metadata) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body.trim()) else {
        return;
    };
    let mut nodes = Vec::new();
    collect_nodes(&v, &mut nodes, 0);
    for n in nodes {
        let ty = |n: &serde_json::Value| match &n["@type"] {
            serde_json::Value::String(s) => vec![s.to_ascii_lowercase()],
            serde_json::Value::Array(a) => a
                .iter()
                .filter_map(|t| t.as_str().map(str::to_ascii_lowercase))
                .collect(),
            _ => vec![],
        };
        let types = ty(n);
        if !types.iter().any(|t| LD_TYPES.contains(&t.as_str())) {
            continue;
        }
        if out.author.is_none() {
            out.author = ld_names(&n["author"]).or_else(|| ld_names(&n["creator"]));
        }
        if out.date.is_none() {
            out.date = ["datePublished", "dateCreated", "uploadDate"]
                .iter()
                .find_map(|k| n[*k].as_str().and_then(iso_date));
        }
        if out.site_name.is_none() {
            out.site_name = ld_names(&n["publisher"]);
        }
        if out.description.is_none() {
            out.description = n["description"]
                .as_str()
                .map(clean)
                .filter(|d| !d.is_empty());
        }
    }
}

/// Objects of a JSON-LD document: the top level, arrays of them, and `@graph`.
fn collect_nodes<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a serde_json::Value>, depth: u32) {
    if depth > 4 {
        return;
    }
    match v {
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_nodes(x, out, depth + 1)),
        serde_json::Value::Object(o) => {
            out.push(v);
            if let Some(g) = o.get("@graph") {
                collect_nodes(g, out, depth + 1);
            }
        }
        _ => {}
    }
}

/// A person or organisation as text: a string, an object's `name`, or a list of
/// them joined with ", ".
fn ld_names(v: &serde_json::Value) -> Option<String> {
    let one = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Some(clean(s)),
        serde_json::Value::Object(o) => o.get("name").and_then(|n| n.as_str()).map(clean),
        _ => None,
    };
    let names: Vec<String> = match v {
        serde_json::Value::Array(a) => a.iter().filter_map(one).collect(),
        v => one(v).into_iter().collect(),
    };
    let names: Vec<String> = names
        .into_iter()
        .filter(|n| !n.is_empty() && !n.starts_with("http"))
        .collect();
    (!names.is_empty()).then(|| clean(&names.join(", ")))
}
