//! Text kernels: lengths and normalised content hashes.
use rayon::prelude::*;

/// The byte length of the whitespace character (`char::is_whitespace`) starting at
/// byte `i` of `s`, or 0 if none starts there. Only the lead bytes of the non-ASCII
/// White_Space characters (U+0085, U+00A0, U+1680, U+2000–U+205F, U+3000) are
/// decoded, so byte-wise scans for whitespace stay byte-wise.
#[inline(always)]
pub fn whitespace_at(s: &str, i: usize) -> usize {
    match s.as_bytes()[i] {
        b if WS_CLASS[b as usize] == PLAIN => 0,
        b if b.is_ascii() => 1,
        _ => s[i..]
            .chars()
            .next()
            .filter(|c| c.is_whitespace())
            .map_or(0, char::len_utf8),
    }
}

/// Byte classes for scanners that skip what cannot be whitespace: [`PLAIN`] bytes
/// never start a White_Space character, [`SPACE`] is b' ', and the rest ([`OTHER`]:
/// the other ASCII whitespace, and the lead bytes above) go to [`whitespace_at`].
pub const WS_CLASS: [u8; 256] = {
    let mut t = [PLAIN; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = match i as u8 {
            b' ' => SPACE,
            b'\t' | b'\n' | b'\r' | 0x0B | 0x0C | 0xC2 | 0xE1 | 0xE2 | 0xE3 => OTHER,
            _ => PLAIN,
        };
        i += 1;
    }
    t
};
pub const PLAIN: u8 = 0;
pub const SPACE: u8 = 1;
pub const OTHER: u8 = 2;

/// Below this many rows a batch of short texts is processed on the calling thread.
const PAR_MIN: usize = 4096;
/// Text bytes from which a batch is worth splitting over the kernel threads: a
/// per-document kernel reads each byte once or a few times, ~1 ns a byte, so 64 KiB
/// is ~50 µs of work against rayon's few microseconds to split and join.
const PAR_MIN_BYTES: usize = 64 << 10;

/// Whether a per-document kernel over `texts` should run in parallel: many rows, or
/// few long ones (a batch of web pages is ~60 documents of 8 MiB together; counting
/// rows alone ran every per-page kernel of the text pipeline on one thread).
pub fn worth_parallel(texts: &[Option<&str>]) -> bool {
    texts.len() >= PAR_MIN
        || (texts.len() > 1
            && texts.iter().flatten().map(|t| t.len()).sum::<usize>() >= PAR_MIN_BYTES)
}

/// Unicode scalar values and whitespace-separated words of each text (`None` → 0, 0).
pub fn lengths(texts: &[Option<&str>]) -> Vec<(u64, u64)> {
    let one = |t: &Option<&str>| match t {
        Some(s) => (
            s.chars().count() as u64,
            s.split_whitespace().count() as u64,
        ),
        None => (0, 0),
    };
    if !worth_parallel(texts) {
        texts.iter().map(one).collect()
    } else {
        texts.par_iter().map(one).collect()
    }
}

/// How text is normalised before hashing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Normalise {
    pub lowercase: bool,
    pub collapse_whitespace: bool,
}

/// 128-bit content hash of each normalised text (`None` stays `None`).
pub fn content_hashes(texts: &[Option<&str>], norm: Normalise) -> Vec<Option<u128>> {
    let one = |t: &Option<&str>| t.map(|s| hash_normalised(s, norm));
    if !worth_parallel(texts) {
        texts.iter().map(one).collect()
    } else {
        texts.par_iter().map(one).collect()
    }
}

fn hash_normalised(s: &str, norm: Normalise) -> u128 {
    let mut h = blake3::Hasher::new();
    if !norm.lowercase && !norm.collapse_whitespace {
        h.update(s.as_bytes());
    } else {
        // Normalise into a buffer and hash it in large updates (blake3 is slow on
        // tiny ones); ASCII bytes take a fast path, other characters the Unicode one.
        let mut out: Vec<u8> = Vec::with_capacity(s.len());
        let mut pending_space = false;
        let mut started = false;
        let mut buf = [0u8; 4];
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let (c, len) = if b[i].is_ascii() {
                (b[i] as char, 1)
            } else {
                let c = s[i..].chars().next().expect("char boundary");
                (c, c.len_utf8())
            };
            i += len;
            if norm.collapse_whitespace && c.is_whitespace() {
                pending_space = started;
                continue;
            }
            if pending_space {
                out.push(b' ');
                pending_space = false;
            }
            started = true;
            if c.is_ascii() {
                out.push(if norm.lowercase {
                    c.to_ascii_lowercase() as u8
                } else {
                    c as u8
                });
            } else if norm.lowercase {
                for lc in c.to_lowercase() {
                    out.extend_from_slice(lc.encode_utf8(&mut buf).as_bytes());
                }
            } else {
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
        h.update(&out);
    }
    let out = h.finalize();
    u128::from_le_bytes(out.as_bytes()[..16].try_into().expect("16 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every White_Space character is seen by `whitespace_at` and starts with a byte
    /// `WS_CLASS` does not call plain; no other character is.
    #[test]
    fn whitespace_bytes_and_classes_cover_every_white_space_char() {
        let mut seen = 0;
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let s = c.to_string();
            let at = whitespace_at(&s, 0);
            assert_eq!(at > 0, c.is_whitespace(), "{c:?}");
            if c.is_whitespace() {
                seen += 1;
                assert_eq!(at, s.len(), "{c:?}");
                assert_ne!(WS_CLASS[s.as_bytes()[0] as usize], PLAIN, "{c:?}");
            }
        }
        assert_eq!(seen, 25);
        assert_eq!(WS_CLASS[b' ' as usize], SPACE);
    }

    #[test]
    fn lengths_count_chars_not_bytes() {
        assert_eq!(
            lengths(&[Some("héllo wörld"), None, Some("")]),
            vec![(11, 2), (0, 0), (0, 0)]
        );
    }

    #[test]
    fn parallel_path_matches_serial() {
        let owned: Vec<String> = (0..10_000).map(|i| "ab ".repeat(i % 7)).collect();
        let texts: Vec<Option<&str>> = owned.iter().map(|s| Some(s.as_str())).collect();
        let par = lengths(&texts);
        let ser: Vec<_> = texts.chunks(100).flat_map(lengths).collect();
        assert_eq!(par, ser);
    }

    #[test]
    fn normalisation_equates_case_and_spacing_only_when_asked() {
        let n = Normalise {
            lowercase: true,
            collapse_whitespace: true,
        };
        let h = content_hashes(
            &[
                Some("  Hello   World "),
                Some("hello world"),
                Some("hello worlds"),
            ],
            n,
        );
        assert_eq!(h[0], h[1]);
        assert_ne!(h[1], h[2]);
        let raw = Normalise {
            lowercase: false,
            collapse_whitespace: false,
        };
        let h2 = content_hashes(&[Some("Hello"), Some("hello")], raw);
        assert_ne!(h2[0], h2[1]);
    }
}
