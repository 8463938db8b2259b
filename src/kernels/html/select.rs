//! Choosing the main-content blocks by region and text/link density.
use super::*;

/// Main text shorter than this (bytes) is chosen again with class-word boilerplate
/// ignored.
pub(super) const FALLBACK_BELOW: usize = 500;

/// Share of the good text a content region must hold to be used.
pub(super) const REGION_SHARE: f64 = 0.5;
/// Share of the good text the main container holds (0.6–0.7 score best on the
/// development set; 0.5 and 0.9 lose 0.001–0.003 F1).
pub(super) const MAIN_SHARE: f64 = 0.7;
/// What a CJK character counts for in the length thresholds (see [`units`]): 2 and 3
/// score alike on the held-out halves, 2 is kept.
pub(super) const WIDE: usize = 2;
/// Good blocks outside the main container are kept from this many bytes.
pub(super) const OUTSIDE_MIN: usize = 100;

/// Chooses the main-content blocks and joins them with newlines; `relaxed` trusts
/// only tag, role and hiding boilerplate (see [`FALLBACK_BELOW`]).
pub(super) fn select(all_blocks: &Blocks, relaxed: bool) -> String {
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
                let u = units(text(b), n);
                if density > 0.5 {
                    C::Bad
                } else if (u >= 50 && density < 0.25) || (use_region && b.item && density < 0.3) {
                    C::Good
                } else if b.heading || (use_region && u >= 20) || u < 30 {
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

/// Every block outside boilerplate and not mostly links, when together they are
/// under [`FALLBACK_BELOW`] bytes (a page of one line); otherwise nothing.
pub(super) fn tiny_page(all_blocks: &Blocks) -> String {
    // Neither boilerplate by class (a menu, a cookie notice) nor mostly link text.
    let visible = || {
        all_blocks
            .list
            .iter()
            .filter(|b| !b.boiler && b.link_chars * 2 < all_blocks.text(b).chars().count().max(1))
    };
    if visible()
        .map(|b| all_blocks.text(b).len() + 1)
        .sum::<usize>()
        > FALLBACK_BELOW
    {
        return String::new();
    }
    let mut out = String::new();
    for b in visible() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(all_blocks.text(b));
    }
    out
}

/// A block's length for the length thresholds: characters, with each CJK ideograph,
/// kana or Hangul syllable counted as [`WIDE`] (one carries about a word: a
/// 30-character Chinese sentence is as long as a 60-character English one).
pub(super) fn units(text: &str, chars: usize) -> usize {
    if text.is_ascii() {
        return chars;
    }
    let wide = text
        .chars()
        .filter(|&c| {
            matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
        })
        .count();
    chars + wide * (WIDE - 1)
}

pub(super) fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
