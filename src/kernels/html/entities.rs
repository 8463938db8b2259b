//! Whitespace, invisible characters and HTML entities in text nodes.
use super::*;

/// Byte classes of [`push_decoded`]: [`PLAIN`](crate::kernels::text::PLAIN) bytes start no
/// whitespace, entity or [`INVISIBLE`] character (`WS_CLASS` with `&` and 0xEF, the
/// lead byte of U+FEFF, added; the other invisible characters start with lead bytes
/// of whitespace).
pub(super) const NODE_CLASS: [u8; 256] = {
    use crate::kernels::text::{OTHER, WS_CLASS};
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
pub(super) fn push_decoded(out: &mut String, raw: &str) -> bool {
    use crate::kernels::text::{PLAIN, SPACE};
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

pub(super) enum Entity {
    Char(char),
    Str(&'static str),
}

/// The character reference starting with the `&` at `s[i]`, and its length in bytes.
#[inline]
pub(super) fn entity_at(s: &str, i: usize) -> Option<(Entity, usize)> {
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

pub(super) fn named(n: &str) -> Option<&'static str> {
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
