//! Byte scanning: inline SIMD-style searches, tag ends, attributes.

/// Bytes scanned inline, 16 at a time, before a search calls `memchr`: in tag-dense
/// pages most searches end within a few bytes, where the call costs more than the scan.
pub(super) const SHORT: usize = 64;

/// The first byte of `hay` that is one of `needles`: [`SHORT`] bytes inline, then
/// `long` on the rest.
#[inline(always)]
pub(super) fn find_any<const K: usize>(
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
pub(super) fn eq_mask<const K: usize>(chunk: &[u8; 16], needles: [u8; K]) -> u32 {
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
pub(super) fn eq_mask<const K: usize>(chunk: &[u8; 16], needles: [u8; K]) -> u32 {
    (0..16).fold(0, |m, i| m | u32::from(needles.contains(&chunk[i])) << i)
}

/// `memchr::memchr`, the first [`SHORT`] bytes inline.
#[inline(always)]
pub(super) fn find1(n: u8, hay: &[u8]) -> Option<usize> {
    find_any([n], hay, |h| memchr::memchr(n, h))
}

/// `memchr::memchr3`, the first [`SHORT`] bytes inline.
#[inline(always)]
pub(super) fn find3(a: u8, b: u8, c: u8, hay: &[u8]) -> Option<usize> {
    find_any([a, b, c], hay, |h| memchr::memchr3(a, b, c, h))
}

/// The next attribute of a tag's attribute text from byte `*i`, as an HTML tokenizer
/// reads it: a name, then `=` and a quoted or bare value (a name alone has value "").
#[inline]
pub(super) fn next_attr<'a>(s: &'a str, i: &mut usize) -> Option<(&'a str, &'a str)> {
    let b = s.as_bytes();
    loop {
        while *i < b.len() && (b[*i].is_ascii_whitespace() || b[*i] == b'/') {
            *i += 1;
        }
        if *i >= b.len() {
            return None;
        }
        let name_start = *i;
        while *i < b.len() && !(b[*i].is_ascii_whitespace() || b[*i] == b'=' || b[*i] == b'/') {
            *i += 1;
        }
        let name = &s[name_start..*i];
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
        if *i < b.len() && b[*i] == b'=' {
            *i += 1;
            while *i < b.len() && b[*i].is_ascii_whitespace() {
                *i += 1;
            }
            if *i < b.len() && (b[*i] == b'"' || b[*i] == b'\'') {
                let q = b[*i];
                let end = find1(q, &b[*i + 1..]).map_or(b.len(), |e| *i + 1 + e);
                let value = &s[*i + 1..end];
                *i = end + 1;
                return Some((name, value));
            }
            let start = *i;
            while *i < b.len() && !b[*i].is_ascii_whitespace() {
                *i += 1;
            }
            return Some((name, &s[start..*i]));
        } else if name.is_empty() {
            *i += 1; // a stray character: move on
            continue;
        }
        return Some((name, ""));
    }
}

/// Where a tag name that continues at `i` ends by the spec's rule: at white space,
/// `/` or `>` (`<a.length` is one unknown name, not `a`).
pub(super) fn tag_name_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && !matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0c | b'/' | b'>') {
        i += 1;
    }
    i
}

/// Raw text (script, style, title, ...) from `pos` to its end tag `</name`, ignoring
/// case: where the text ends, and where scanning goes on (after that tag's `>`).
pub(super) fn raw_text_end(
    b: &[u8],
    pos: usize,
    name: &[u8],
    scratch: &mut Vec<u8>,
) -> (usize, usize) {
    scratch.clear();
    scratch.extend_from_slice(b"</");
    scratch.extend_from_slice(name);
    let end = find_ci(&b[pos..], scratch).map_or(b.len(), |i| pos + i);
    (
        end,
        memchr::memchr(b'>', &b[end..]).map_or(b.len(), |i| end + i + 1),
    )
}

/// Where a comment that starts at `lt` (`<!--`) ends: `<!-->` and `<!--->` are whole
/// (empty) comments, as the spec has them; otherwise after the next `-->`.
pub(super) fn comment_end(b: &[u8], lt: usize) -> usize {
    if b[lt + 4..].starts_with(b">") {
        lt + 5
    } else if b[lt + 4..].starts_with(b"->") {
        lt + 6
    } else {
        memchr::memmem::find(&b[lt + 4..], b"-->").map_or(b.len(), |i| lt + 7 + i)
    }
}

/// Where a tag's attributes end: before its `>`, or at the end of a page cut off
/// inside the tag (never inside a character).
pub(super) fn attrs_end(b: &[u8], name_end: usize, tag_end: usize) -> usize {
    if tag_end > name_end && b[tag_end - 1] == b'>' {
        tag_end - 1
    } else {
        tag_end.max(name_end)
    }
}

pub(super) fn find_tag_end(b: &[u8], from: usize) -> usize {
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

pub(super) fn find_ci(hay: &[u8], needle: &[u8]) -> Option<usize> {
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
pub(super) struct Attrs<'a> {
    pub(super) class: &'a str,
    pub(super) id: &'a str,
    pub(super) itemprop: &'a str,
    pub(super) role: &'a str,
    pub(super) aria_hidden: &'a str,
    /// A `style` that hides the element (`display:none`).
    pub(super) hidden_style: bool,
}

impl<'a> Attrs<'a> {
    /// `lower`: where the values read are lower-cased (names are matched ignoring
    /// case; other values are not copied); `scratch`: a buffer for the work. Both are
    /// kept by the caller between tags.
    pub(super) fn parse(s: &str, lower: &'a mut String, scratch: &mut String) -> Attrs<'a> {
        // Ranges of `lower`: class, id, itemprop, role, aria-hidden.
        let mut at: [Option<std::ops::Range<usize>>; 5] = Default::default();
        let mut hidden_style = false;
        let mut seen_style = false;
        lower.clear();
        let mut i = 0;
        while let Some((name, value)) = next_attr(s, &mut i) {
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
