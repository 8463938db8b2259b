//! Exact-substring dedup's text side (docs/DEDUP.md, "Exact substrings"): a
//! document's tokens (whitespace-separated words) with their byte ranges, the 128-bit
//! hash of every window of `k` consecutive tokens, and the cut of marked token ranges
//! out of the text. Pure: text in, numbers and text out.
//!
//! A window's hash is xxh3-128 of its tokens joined by one space: tokens hold no
//! whitespace, so the joined bytes name the token sequence unambiguously, and two
//! windows that differ only in the whitespace between their words are the same
//! window. For text that is not built to collide, N windows have about N²/2¹²⁹
//! colliding pairs: 1.5 × 10⁻¹⁷ at N = 10¹¹ (a 100-billion-token corpus), far below
//! 10⁻¹² per corpus.

use xxhash_rust::xxh3::xxh3_128_with_seed;

/// The seed of window hashes (fixed: hashes are compared across tasks and jobs).
const SEED: u64 = 0x6d64_665f_7375_6273; // "mdf_subs"

/// A document's tokens: byte ranges into the text, in order.
pub fn tokens(text: &str) -> Vec<(u32, u32)> {
    let base = text.as_ptr() as usize;
    text.split_whitespace()
        .map(|w| {
            let s = w.as_ptr() as usize - base;
            (s as u32, (s + w.len()) as u32)
        })
        .collect()
}

/// The hash of every window of `k` tokens, by the position of its first token:
/// `(position, hash)` for positions `0..=tokens - k` (none for a shorter document).
pub fn window_hashes(text: &str, k: usize) -> Vec<(u32, u128)> {
    window_hashes_with(text, k, |w| xxh3_128_with_seed(w, SEED))
}

/// [`window_hashes`] of a batch of texts (`None`: no text, no windows), in parallel.
pub fn batch_window_hashes(texts: &[Option<&str>], k: usize) -> Vec<Vec<(u32, u128)>> {
    use rayon::prelude::*;
    texts
        .par_iter()
        .map(|t| t.map_or_else(Vec::new, |t| window_hashes(t, k)))
        .collect()
}

/// [`window_hashes`] with another hash function (tests force collisions with one).
pub fn window_hashes_with(text: &str, k: usize, hash: impl Fn(&[u8]) -> u128) -> Vec<(u32, u128)> {
    let toks = tokens(text);
    if k == 0 || toks.len() < k {
        return vec![];
    }
    // The tokens joined by single spaces, and where each starts and ends there.
    let mut joined = Vec::with_capacity(text.len());
    let mut spans = Vec::with_capacity(toks.len());
    for &(s, e) in &toks {
        if !joined.is_empty() {
            joined.push(b' ');
        }
        let a = joined.len();
        joined.extend_from_slice(&text.as_bytes()[s as usize..e as usize]);
        spans.push((a, joined.len()));
    }
    (0..=toks.len() - k)
        .map(|i| (i as u32, hash(&joined[spans[i].0..spans[i + k - 1].1])))
        .collect()
}

/// The hash of every window of `k` token ids (a tokenizer's tokens instead of words),
/// by position: xxh3-128 of the ids' little-endian bytes.
pub fn id_window_hashes(ids: &[u32], k: usize) -> Vec<(u32, u128)> {
    if k == 0 || ids.len() < k {
        return vec![];
    }
    let bytes: Vec<u8> = ids.iter().flat_map(|i| i.to_le_bytes()).collect();
    (0..=ids.len() - k)
        .map(|i| {
            (
                i as u32,
                xxh3_128_with_seed(&bytes[4 * i..4 * (i + k)], SEED),
            )
        })
        .collect()
}

/// A tokenizer's byte offsets (`start, end` of each token in turn, as `tokenize`
/// writes them) as token byte ranges, if they fit the text: pairs in order, each on
/// char boundaries within it.
pub fn offset_tokens(text: &str, offsets: &[u32]) -> Option<Vec<(u32, u32)>> {
    if !offsets.len().is_multiple_of(2) {
        return None;
    }
    let t: Vec<(u32, u32)> = offsets.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    let fits = |x: u32| (x as usize) <= text.len() && text.is_char_boundary(x as usize);
    t.iter()
        .all(|&(a, b)| a <= b && fits(a) && fits(b))
        .then_some(t)
}

/// Token ranges `[start, end)` sorted and merged where they overlap or touch.
pub fn merge(mut ranges: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    ranges.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Merged ranges `a` without merged ranges `b` (both sorted and disjoint).
pub fn subtract(a: &[(u32, u32)], b: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::with_capacity(a.len());
    let mut j = 0;
    for &(mut s, e) in a {
        while j < b.len() && b[j].1 <= s {
            j += 1;
        }
        let mut i = j;
        while i < b.len() && b[i].0 < e {
            if b[i].0 > s {
                out.push((s, b[i].0));
            }
            s = s.max(b[i].1);
            i += 1;
        }
        if s < e {
            out.push((s, e));
        }
    }
    out
}

/// The byte spans of merged token ranges: from the first byte of a range's first token
/// to the last byte of its last token (the whitespace around a span stays). Tokens
/// without bytes (special tokens at (0, 0), an empty piece) are ignored, and a span
/// gives up any bytes a token just outside its range also covers (a tokenizer's pieces
/// of one character share its bytes; the character stays with the token that is not
/// cut). Ranges past the document's tokens are clipped (they cannot come from its own
/// windows; a decision about another text is ignored rather than trusted).
pub fn byte_spans(tokens: &[(u32, u32)], ranges: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let n = tokens.len();
    let solid = |i: usize| tokens[i].0 < tokens[i].1;
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
    for &(a, b) in ranges {
        let (a, b) = ((a as usize).min(n), (b as usize).min(n));
        if a >= b {
            continue;
        }
        // The nearest tokens with bytes outside the range, on either side, and what
        // is left of each token in the range once their bytes are taken out.
        let before = (0..a).rev().find(|&i| solid(i)).map_or(0, |i| tokens[i].1);
        let after = (b..n).find(|&i| solid(i)).map_or(u32::MAX, |i| tokens[i].0);
        let left = (a..b)
            .map(|i| (tokens[i].0.max(before), tokens[i].1.min(after)))
            .filter(|&(s, e)| s < e);
        let (Some(s), Some(e)) = (left.clone().map(|x| x.0).min(), left.map(|x| x.1).max()) else {
            continue;
        };
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// The text without the byte spans (sorted, disjoint, on char boundaries: token
/// edges are).
pub fn cut(text: &str, spans: &[(u32, u32)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0usize;
    for &(s, e) in spans {
        out.push_str(&text[at..s as usize]);
        at = e as usize;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_whitespace_words_with_their_bytes() {
        let t = "  héllo\u{a0}wörld\n\tfoo  ";
        let toks = tokens(t);
        let words: Vec<&str> = toks
            .iter()
            .map(|&(s, e)| &t[s as usize..e as usize])
            .collect();
        assert_eq!(words, ["héllo", "wörld", "foo"]);
    }

    #[test]
    fn windows_ignore_the_whitespace_between_words_and_nothing_else() {
        let a = window_hashes("one two  three four", 3);
        let b = window_hashes("x one\ntwo three\u{2003}four", 3);
        assert_eq!(a.len(), 2);
        assert_eq!(b.len(), 3);
        assert_eq!(a[0].1, b[1].1);
        assert_eq!(a[1].1, b[2].1);
        assert_ne!(a[0].1, a[1].1);
        // "ab c" and "a bc" join differently: not the same window.
        assert_ne!(window_hashes("ab c", 2)[0].1, window_hashes("a bc", 2)[0].1);
        assert!(window_hashes("one two", 3).is_empty());
        assert!(window_hashes("", 1).is_empty());
    }

    #[test]
    fn marked_ranges_become_byte_spans_cut_from_the_text() {
        let t = "keep this then cut these words but keep the end";
        let toks = tokens(t);
        let ranges = merge(vec![(3, 5), (4, 6), (9, 10), (6, 6)]);
        assert_eq!(ranges, vec![(3, 6), (9, 10)]);
        let spans = byte_spans(&toks, &ranges);
        assert_eq!(
            &t[spans[0].0 as usize..spans[0].1 as usize],
            "cut these words"
        );
        assert_eq!(cut(t, &spans), "keep this then  but keep the ");
        // Touching ranges merge; ranges past the end are clipped.
        assert_eq!(merge(vec![(0, 2), (2, 4)]), vec![(0, 4)]);
        assert_eq!(byte_spans(&toks, &[(9, 40), (40, 50)]).len(), 1);
        // Pieces of one character: it stays with the piece that is not cut.
        let shared = [(0, 4), (0, 4), (0, 4), (4, 5)];
        assert_eq!(byte_spans(&shared, &[(0, 1), (2, 3)]), vec![]);
        assert_eq!(byte_spans(&shared, &[(0, 3)]), vec![(0, 4)]);
        // "cat 😀😀 mat" in byte-level pieces: cutting "cat" and the first emoji's
        // pieces leaves the second emoji whole.
        let emoji = [
            (0, 3),
            (4, 4),
            (4, 8),
            (4, 8),
            (4, 8),
            (4, 8),
            (8, 12),
            (8, 12),
            (8, 12),
            (8, 12),
            (13, 16),
        ];
        assert_eq!(byte_spans(&emoji, &[(0, 6)]), vec![(0, 8)]);
        assert_eq!(byte_spans(&emoji, &[(0, 3)]), vec![(0, 3)]);
        // Special tokens at (0, 0) around the text: a whole-record range cuts it all.
        let special = [(0, 0), (0, 3), (3, 7), (7, 11), (0, 0)];
        assert_eq!(byte_spans(&special, &[(0, 5)]), vec![(0, 11)]);
        assert_eq!(byte_spans(&special, &[(2, 5)]), vec![(3, 11)]);
        assert_eq!(byte_spans(&special, &[(4, 5)]), vec![]);
    }

    #[test]
    fn subtract_removes_every_kept_token() {
        let cut = [(0, 10), (12, 20), (30, 31)];
        let kept = [(2, 4), (5, 13), (19, 25), (30, 31)];
        assert_eq!(subtract(&cut, &kept), vec![(0, 2), (4, 5), (13, 19)]);
        assert_eq!(subtract(&cut, &[]), cut.to_vec());
        assert!(subtract(&[], &kept).is_empty());
        // Brute force over small random sets.
        let mut next = crate::kernels::xorshift(7);
        for _ in 0..300 {
            let mut r = |n| {
                merge(
                    (0..n)
                        .map(|_| {
                            let a = (next() % 60) as u32;
                            (a, a + (next() % 9) as u32)
                        })
                        .collect(),
                )
            };
            let (a, b) = (r(5), r(4));
            let inside = |v: &[(u32, u32)], x: u32| v.iter().any(|&(s, e)| s <= x && x < e);
            let got = subtract(&a, &b);
            for x in 0..80 {
                assert_eq!(
                    inside(&got, x),
                    inside(&a, x) && !inside(&b, x),
                    "{a:?} - {b:?}"
                );
            }
            assert!(got.iter().all(|&(s, e)| s < e));
        }
    }

    #[test]
    fn token_id_windows_and_offsets() {
        let a = id_window_hashes(&[1, 2, 3, 4], 2);
        let b = id_window_hashes(&[9, 2, 3], 2);
        assert_eq!(a.len(), 3);
        assert_eq!(a[1].1, b[1].1);
        assert_ne!(a[0].1, a[1].1);
        assert!(id_window_hashes(&[1], 2).is_empty());
        let t = "añb";
        assert_eq!(
            offset_tokens(t, &[0, 1, 1, 3, 3, 4]),
            Some(vec![(0, 1), (1, 3), (3, 4)])
        );
        assert_eq!(offset_tokens(t, &[0, 2]), None, "inside ñ");
        assert_eq!(offset_tokens(t, &[0, 9]), None, "past the end");
        assert_eq!(offset_tokens(t, &[3, 1]), None);
        assert_eq!(offset_tokens(t, &[0]), None);
    }
}
