//! URL blocklisting: a domain list checked with a subdomain suffix walk
//! (`a.b.example.com` → `b.example.com` → `example.com`), a URL list, banned words and
//! soft-banned words among the URL's alphanumeric words, and banned subwords anywhere
//! in the URL with non-alphanumerics removed (one Aho-Corasick pass). Domains, URLs
//! and words are kept as 64-bit xxh3 hashes: domains in an open-addressing table
//! ([`U64Set`]: 4.5M domains in 64 MB, behind a cache-sized Bloom prefilter, both
//! prefetched a batch at a time), the rest in identity-hashed sets. Pure: lists
//! arrive as bytes.
use aho_corasick::AhoCorasick;
use rayon::prelude::*;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Read;
use xxhash_rust::xxh3::xxh3_64;

/// A hasher for keys that are already hashes.
#[derive(Default)]
pub struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

pub type HashedSet = HashSet<u64, BuildHasherDefault<Identity>>;

/// A set of 64-bit hashes in one open-addressing table (linear probing, at most
/// three quarters full: 4.5M domains in 64 MB), so a lookup is one slot and its
/// neighbours, and a batch can prefetch the slots it is about to read: with millions
/// of domains the table is far larger than the caches, and each listed host would
/// otherwise wait for memory alone.
#[derive(Default)]
pub struct U64Set {
    /// 0: empty (the key 0 is `has_zero`).
    slots: Vec<u64>,
    len: usize,
    has_zero: bool,
}

impl U64Set {
    /// Slot of `k`: bits the prefilter does not use for its block.
    #[inline]
    fn home(&self, k: u64) -> usize {
        (k.rotate_right(32) as usize) & (self.slots.len() - 1)
    }

    pub fn insert(&mut self, k: u64) -> bool {
        if k == 0 {
            let new = !self.has_zero;
            self.has_zero = true;
            self.len += usize::from(new);
            return new;
        }
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            let bigger = vec![0; (self.slots.len() * 2).max(16)];
            let old = std::mem::replace(&mut self.slots, bigger);
            for k in old.into_iter().filter(|&k| k != 0) {
                self.place(k);
            }
        }
        let new = self.place(k);
        self.len += usize::from(new);
        new
    }

    fn place(&mut self, k: u64) -> bool {
        let mask = self.slots.len() - 1;
        let mut i = self.home(k);
        loop {
            match self.slots[i] {
                0 => {
                    self.slots[i] = k;
                    return true;
                }
                x if x == k => return false,
                _ => i = (i + 1) & mask,
            }
        }
    }

    #[inline]
    pub fn contains(&self, k: u64) -> bool {
        if k == 0 {
            return self.has_zero;
        }
        if self.slots.is_empty() {
            return false;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(k);
        loop {
            match self.slots[i] {
                0 => return false,
                x if x == k => return true,
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Asks the CPU to start loading the slot of `k`.
    #[inline]
    fn prefetch(&self, k: u64) {
        if !self.slots.is_empty() {
            prefetch(&self.slots[self.home(k)]);
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.has_zero
            .then_some(0)
            .into_iter()
            .chain(self.slots.iter().copied().filter(|&k| k != 0))
    }
}

#[inline]
fn prefetch<T>(at: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint; the pointer is to a live value.
    unsafe {
        core::arch::x86_64::_mm_prefetch(
            at as *const T as *const i8,
            core::arch::x86_64::_MM_HINT_T0,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Why a URL is blocked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub reason: &'static str,
    pub detail: String,
}

/// A blocked Bloom filter: one 64-byte block per key, six bits set in it. Small enough
/// to stay in cache, it answers "certainly not listed" for almost every host suffix
/// without touching the large exact set.
#[derive(Default)]
struct Prefilter {
    blocks: Vec<[u64; 8]>,
    mask: u64,
}

impl Prefilter {
    fn build(keys: &U64Set) -> Self {
        let n = (keys.len() / 48).max(1).next_power_of_two();
        let mut p = Prefilter {
            blocks: vec![[0u64; 8]; n],
            mask: n as u64 - 1,
        };
        for k in keys.iter() {
            let (b, bits) = p.locate(k);
            for (w, m) in bits {
                p.blocks[b][w] |= m;
            }
        }
        p
    }

    #[inline]
    fn locate(&self, k: u64) -> (usize, [(usize, u64); 6]) {
        let b = (k & self.mask) as usize;
        let mut x = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 10;
        let mut bits = [(0usize, 0u64); 6];
        for slot in &mut bits {
            let pos = (x & 511) as usize;
            *slot = (pos >> 6, 1u64 << (pos & 63));
            x >>= 9;
        }
        (b, bits)
    }

    /// Asks the CPU to start loading the block of `k`.
    #[inline]
    fn prefetch(&self, k: u64) {
        if !self.blocks.is_empty() {
            prefetch(&self.blocks[(k & self.mask) as usize]);
        }
    }

    #[inline]
    fn may_contain(&self, k: u64) -> bool {
        if self.blocks.is_empty() {
            return true;
        }
        // The same bits as `locate`, tested as they are computed: most absent keys
        // fail on the first or second bit.
        let block = &self.blocks[(k & self.mask) as usize];
        let mut x = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 10;
        for _ in 0..6 {
            let pos = (x & 511) as usize;
            if block[pos >> 6] & (1u64 << (pos & 63)) == 0 {
                return false;
            }
            x >>= 9;
        }
        true
    }
}

#[derive(Default)]
pub struct UrlBlocklist {
    domains: U64Set,
    prefilter: Prefilter,
    urls: HashedSet,
    /// The hosts of `urls`: a URL whose host is not among them skips the URL list
    /// (no lowercased copy and no hash of the whole URL), with the host hash the
    /// domain check already computed.
    url_hosts: HashedSet,
    banned_words: HashedSet,
    soft_words: HashedSet,
    soft_threshold: usize,
    subwords: Option<AhoCorasick>,
    subword_list: Vec<String>,
    /// Shortest and longest banned/soft word: other tokens are not hashed.
    word_len: (usize, usize),
}

impl std::fmt::Debug for UrlBlocklist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "UrlBlocklist({} domains, {} urls)",
            self.domains.len(),
            self.urls.len()
        )
    }
}

fn h(s: &str) -> u64 {
    xxh3_64(s.as_bytes())
}

/// Lowercase alphanumerics only (`"2 Girls-1 cup"` → `"2girls1cup"`).
pub fn normalise(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// What follows `scheme://` (the whole URL when there is no `://`). A memchr for the
/// first ':' instead of a substring search: this runs for every URL.
#[inline]
fn after_scheme(url: &str) -> &str {
    let b = url.as_bytes();
    let mut from = 0;
    while let Some(i) = memchr::memchr(b':', &b[from..]) {
        let at = from + i;
        if b[at + 1..].starts_with(b"//") {
            return &url[at + 3..];
        }
        from = at + 1;
    }
    url
}

/// The host of a URL, lowercased, without port, userinfo or trailing dot.
pub fn host(url: &str) -> &str {
    authority_host(after_scheme(url))
}

/// The host of what follows `scheme://` (or of a URL list entry, which has no scheme).
fn authority_host(rest: &str) -> &str {
    let end = rest
        .bytes()
        .position(|b| b == b'/' || b == b'?' || b == b'#')
        .unwrap_or(rest.len());
    let auth = &rest[..end];
    let auth = auth.rsplit_once('@').map(|(_, h)| h).unwrap_or(auth);
    let host = if auth.starts_with('[') {
        auth.split_inclusive(']').next().unwrap_or(auth)
    } else {
        auth.split(':').next().unwrap_or(auth)
    };
    host.trim_end_matches('.')
}

/// Host suffixes checked per URL at most (`a.b.c.d.example.com` and its parents).
const MAX_SUFFIXES: usize = 8;

/// Hashes of the lowercased host and its parent domains (down to two labels).
#[inline]
fn suffix_hashes(url: &str, out: &mut [u64; MAX_SUFFIXES]) -> usize {
    let host = host(url).as_bytes();
    let mut buf = [0u8; 256];
    if host.is_empty() || host.len() > buf.len() {
        return 0;
    }
    let lower = &mut buf[..host.len()];
    for (d, s) in lower.iter_mut().zip(host) {
        *d = s.to_ascii_lowercase();
    }
    let mut n = 0;
    let mut start = 0;
    loop {
        let d = &lower[start..];
        out[n] = xxh3_64(d);
        n += 1;
        match memchr::memchr(b'.', d) {
            Some(i) if n < MAX_SUFFIXES && memchr::memchr(b'.', &d[i + 1..]).is_some() => {
                start += i + 1
            }
            _ => return n,
        }
    }
}

/// A URL without its scheme, as UT1 lists URLs.
pub fn without_scheme(url: &str) -> &str {
    after_scheme(url)
}

impl UrlBlocklist {
    pub fn new(soft_threshold: usize) -> Self {
        UrlBlocklist {
            soft_threshold: soft_threshold.max(1),
            ..Default::default()
        }
    }

    pub fn add_domain(&mut self, d: &str) {
        let d = d.trim().trim_end_matches('.').to_ascii_lowercase();
        if !d.is_empty() && !d.starts_with('#') {
            self.domains.insert(h(&d));
        }
    }

    pub fn add_url(&mut self, u: &str) {
        let u = without_scheme(u.trim()).to_ascii_lowercase();
        if !u.is_empty() && !u.starts_with('#') {
            self.urls.insert(h(&u));
            self.url_hosts.insert(h(authority_host(&u)));
        }
    }

    fn note_word_len(&mut self, n: usize) {
        let (lo, hi) = self.word_len;
        self.word_len = (if lo == 0 { n } else { lo.min(n) }, hi.max(n));
    }

    pub fn add_banned_word(&mut self, w: &str) {
        let w = normalise(w);
        if !w.is_empty() {
            self.note_word_len(w.len());
            self.banned_words.insert(h(&w));
        }
    }

    pub fn add_soft_word(&mut self, w: &str) {
        let w = normalise(w);
        if !w.is_empty() {
            self.note_word_len(w.len());
            self.soft_words.insert(h(&w));
        }
    }

    /// Sets the banned subwords (normalised; lines starting with `#` skipped).
    pub fn set_subwords<'a>(
        &mut self,
        words: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), String> {
        self.subword_list = words
            .into_iter()
            .filter(|w| !w.trim_start().starts_with('#'))
            .map(normalise)
            .filter(|w| !w.is_empty())
            .collect();
        if self.subword_list.is_empty() {
            self.subwords = None;
            return Ok(());
        }
        self.subwords = Some(
            aho_corasick::AhoCorasickBuilder::new()
                .kind(Some(aho_corasick::AhoCorasickKind::DFA))
                .build(&self.subword_list)
                .map_err(|e| e.to_string())?,
        );
        Ok(())
    }

    pub fn domain_count(&self) -> usize {
        self.domains.len()
    }

    /// Builds the cache-resident prefilter; call after the last `add_domain`.
    pub fn seal(&mut self) {
        self.prefilter = Prefilter::build(&self.domains);
    }

    /// Checks one URL; `None` keeps it. Allocation-free unless the URL is blocked or
    /// longer than 512 bytes.
    pub fn check(&self, url: &str) -> Option<Blocked> {
        let mut hs = [0u64; MAX_SUFFIXES];
        let n = suffix_hashes(url, &mut hs);
        let pass = self.prefilter_passes(&hs[..n]);
        self.domain_hit(url, &hs[..n], pass)
            .or_else(|| self.check_rest(url, hs[..n].first().copied()))
    }

    /// Which suffix hashes the prefilter lets through, as bits (bit i: `hs[i]`).
    #[inline]
    fn prefilter_passes(&self, hs: &[u64]) -> u8 {
        if self.domains.is_empty() {
            return 0;
        }
        hs.iter().enumerate().fold(0, |m, (i, &k)| {
            m | u8::from(self.prefilter.may_contain(k)) << i
        })
    }

    /// The listed host suffix, if any, given the suffix hashes and which of them
    /// the prefilter let through.
    #[inline]
    fn domain_hit(&self, url: &str, hs: &[u64], pass: u8) -> Option<Blocked> {
        for (i, &hd) in hs.iter().enumerate() {
            if pass & 1 << i != 0 && self.domains.contains(hd) {
                let host = host(url).to_ascii_lowercase();
                let d = host.splitn(i + 1, '.').last().unwrap_or(&host).to_string();
                return Some(Blocked {
                    reason: "blocked_domain",
                    detail: d,
                });
            }
        }
        None
    }

    /// Checks a batch on this thread in three passes over each group of URLs: host
    /// suffixes hashed and their prefilter blocks prefetched; the exact-set slots of
    /// those the prefilter passes prefetched; then the checks. The cache misses of a
    /// group overlap instead of following one another.
    pub fn check_serial(&self, urls: &[Option<&str>]) -> Vec<Option<Blocked>> {
        const GROUP: usize = 32;
        let mut out = Vec::with_capacity(urls.len());
        let mut hs = [[0u64; MAX_SUFFIXES]; GROUP];
        let mut ns = [0usize; GROUP];
        let mut pass = [0u8; GROUP];
        for group in urls.chunks(GROUP) {
            for (i, u) in group.iter().enumerate() {
                ns[i] = u.map(|u| suffix_hashes(u, &mut hs[i])).unwrap_or(0);
                for &k in &hs[i][..ns[i]] {
                    self.prefilter.prefetch(k);
                }
            }
            // Suffixes the prefilter lets through (listed ones, and its ~1 % false
            // positives) have their exact-set slots loaded together too.
            for i in 0..group.len() {
                pass[i] = self.prefilter_passes(&hs[i][..ns[i]]);
                for (j, &k) in hs[i][..ns[i]].iter().enumerate() {
                    if pass[i] & 1 << j != 0 {
                        self.domains.prefetch(k);
                    }
                }
            }
            for (i, u) in group.iter().enumerate() {
                out.push(u.and_then(|u| {
                    self.domain_hit(u, &hs[i][..ns[i]], pass[i])
                        .or_else(|| self.check_rest(u, hs[i][..ns[i]].first().copied()))
                }));
            }
        }
        out
    }

    /// Every rule but the domain list; `host_hash` is the hash of the lowercased host
    /// when it is known.
    fn check_rest(&self, url: &str, host_hash: Option<u64>) -> Option<Blocked> {
        let want_url =
            !self.urls.is_empty() && host_hash.is_none_or(|hh| self.url_hosts.contains(&hh));
        if !want_url
            && self.banned_words.is_empty()
            && self.soft_words.is_empty()
            && self.subwords.is_none()
        {
            return None;
        }
        let bytes = url.as_bytes();
        let mut stack = [0u8; 512];
        let mut heap = Vec::new();
        let lower: &mut [u8] = if bytes.len() <= stack.len() {
            &mut stack[..bytes.len()]
        } else {
            heap.resize(bytes.len(), 0);
            &mut heap
        };
        for (d, s) in lower.iter_mut().zip(bytes) {
            *d = s.to_ascii_lowercase();
        }
        // ASCII lowercasing keeps UTF-8 valid.
        let lower = std::str::from_utf8(lower).unwrap_or(url);
        if want_url {
            let u = without_scheme(lower);
            let bare = u.trim_end_matches('/');
            if self.urls.contains(&h(u)) || (bare.len() != u.len() && self.urls.contains(&h(bare)))
            {
                return Some(Blocked {
                    reason: "blocked_url",
                    detail: u.to_string(),
                });
            }
        }
        if !self.banned_words.is_empty() || !self.soft_words.is_empty() {
            let (lo, hi) = self.word_len;
            let mut soft: [u64; 8] = [0; 8];
            let mut n_soft = 0usize;
            let mut first_soft: Vec<&str> = Vec::new();
            for w in lower.split(|c: char| !c.is_ascii_alphanumeric()) {
                if w.len() < lo || w.len() > hi {
                    continue;
                }
                let hw = h(w);
                if self.banned_words.contains(&hw) {
                    return Some(Blocked {
                        reason: "banned_word",
                        detail: w.to_string(),
                    });
                }
                if self.soft_words.contains(&hw) && !soft[..n_soft.min(8)].contains(&hw) {
                    if n_soft < 8 {
                        soft[n_soft] = hw;
                    }
                    n_soft += 1;
                    first_soft.push(w);
                }
            }
            if n_soft >= self.soft_threshold {
                return Some(Blocked {
                    reason: "soft_banned_words",
                    detail: first_soft.join(","),
                });
            }
        }
        if let Some(ac) = &self.subwords {
            let mut norm = [0u8; 512];
            let mut k = 0;
            let mut long = Vec::new();
            for &b in lower.as_bytes() {
                if b.is_ascii_alphanumeric() {
                    if k < norm.len() {
                        norm[k] = b;
                    } else {
                        if long.is_empty() {
                            long.extend_from_slice(&norm);
                        }
                        long.push(b);
                    }
                    k += 1;
                }
            }
            let hay: &[u8] = if long.is_empty() { &norm[..k] } else { &long };
            if let Some(m) = ac.find(hay) {
                return Some(Blocked {
                    reason: "banned_subword",
                    detail: self.subword_list[m.pattern().as_usize()].clone(),
                });
            }
        }
        None
    }

    /// Checks a batch (in parallel when large).
    pub fn check_all(&self, urls: &[Option<&str>]) -> Vec<Option<Blocked>> {
        if urls.len() < 4096 {
            self.check_serial(urls)
        } else {
            urls.par_chunks(1024)
                .flat_map_iter(|c| self.check_serial(c))
                .collect()
        }
    }
}

/// What to take from a list file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Domains,
    Urls,
}

/// Lines of a list: plain text, gzip text, or a tar.gz archive in which members named
/// `domains` / `urls` (UT1 layout: `<category>/domains`) are read, optionally only for
/// the given categories.
pub fn list_lines(
    bytes: &[u8],
    kind: ListKind,
    categories: &[String],
    mut each: impl FnMut(&str),
) -> Result<usize, String> {
    let gz = bytes.starts_with(&[0x1f, 0x8b]);
    let mut plain = Vec::new();
    let data: &[u8] = if gz {
        flate2::read::MultiGzDecoder::new(bytes)
            .read_to_end(&mut plain)
            .map_err(|e| format!("not valid gzip: {e}"))?;
        &plain
    } else {
        bytes
    };
    let is_tar = data.len() > 262 && &data[257..262] == b"ustar";
    let mut n = 0;
    let mut lines = |text: &[u8]| {
        for l in text.split(|&b| b == b'\n') {
            let l = String::from_utf8_lossy(l);
            let l = l.trim();
            if !l.is_empty() && !l.starts_with('#') {
                each(l);
                n += 1;
            }
        }
    };
    if !is_tar {
        lines(data);
        return Ok(n);
    }
    let want = match kind {
        ListKind::Domains => "domains",
        ListKind::Urls => "urls",
    };
    let mut ar = tar::Archive::new(data);
    for entry in ar
        .entries()
        .map_err(|e| format!("not a valid tar archive: {e}"))?
    {
        let mut entry = entry.map_err(|e| format!("bad tar entry: {e}"))?;
        let path = entry
            .path()
            .map_err(|e| e.to_string())?
            .to_string_lossy()
            .into_owned();
        let mut parts = path.trim_end_matches('/').rsplit('/');
        if parts.next() != Some(want) {
            continue;
        }
        let category = parts.next().unwrap_or("");
        if !categories.is_empty() && !categories.iter().any(|c| c == category) {
            continue;
        }
        let mut buf = Vec::with_capacity(entry.size() as usize);
        entry
            .read_to_end(&mut buf)
            .map_err(|e| format!("{path}: {e}"))?;
        lines(&buf);
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list() -> UrlBlocklist {
        let mut b = UrlBlocklist::new(2);
        b.add_domain("bad.example");
        b.add_domain("evil.co.uk");
        b.add_url("shady.org/path/page.html");
        b.add_banned_word("xxx");
        b.add_soft_word("hot");
        b.add_soft_word("girls");
        b.set_subwords(["2 girls 1 cup", "# comment"]).unwrap();
        b.seal();
        b
    }

    #[test]
    fn the_prefilter_never_hides_a_listed_domain() {
        let mut b = UrlBlocklist::new(2);
        for i in 0..100_000 {
            b.add_domain(&format!("site{i}.example"));
        }
        b.seal();
        let urls: Vec<String> = (0..100_000)
            .map(|i| format!("http://www.site{i}.example/x"))
            .collect();
        let refs: Vec<Option<&str>> = urls.iter().map(|u| Some(u.as_str())).collect();
        assert!(
            b.check_serial(&refs)
                .iter()
                .all(|v| v.as_ref().is_some_and(|v| v.reason == "blocked_domain"))
        );
        let others: Vec<String> = (0..10_000)
            .map(|i| format!("http://other{i}.example/x"))
            .collect();
        let refs: Vec<Option<&str>> = others.iter().map(|u| Some(u.as_str())).collect();
        assert!(b.check_all(&refs).iter().all(Option::is_none));
    }

    /// The domain table answers as a `HashSet` would, through every growth, for
    /// keys that collide on their home slot, and for the key 0.
    #[test]
    fn the_domain_table_is_a_set() {
        let mut ours = U64Set::default();
        let mut std = HashSet::new();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for i in 0..50_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Every third key has one of 8 values in its home-slot bits: long
            // collision chains, across every growth.
            let k = if i % 3 == 0 {
                (x & !(0xFFFF << 32)) | (i & 7) << 32
            } else {
                x
            };
            let k = if i == 777 { 0 } else { k };
            assert_eq!(ours.insert(k), std.insert(k));
            if i % 5 == 0 {
                assert!(!ours.insert(k), "a second insert is not new");
            }
        }
        assert_eq!(ours.len(), std.len());
        assert_eq!(ours.iter().collect::<HashSet<_>>(), std);
        assert!(ours.contains(0));
        let mut y = 99u64;
        for _ in 0..50_000 {
            y = y
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            assert_eq!(ours.contains(y), std.contains(&y));
        }
        for k in &std {
            assert!(ours.contains(*k));
        }
        assert!(!U64Set::default().contains(5) && !U64Set::default().contains(0));
    }

    #[test]
    fn url_list_matches_whatever_the_host_looks_like() {
        let mut b = UrlBlocklist::new(2);
        let long = format!("{}.com", "a".repeat(300));
        b.add_url("Shady.ORG/Path");
        b.add_url("http://host.net:8080/a?u=http://other.com/x");
        b.add_url("user@login.io/");
        b.add_url(&format!("{long}/p"));
        b.add_domain("unrelated.example");
        b.seal();
        let r = |u: &str| b.check(u).map(|x| x.reason);
        assert_eq!(r("https://SHADY.org/path"), Some("blocked_url"));
        assert_eq!(r("https://shady.org/path/"), Some("blocked_url"));
        assert_eq!(r("https://shady.org/other"), None);
        assert_eq!(
            r("http://HOST.net:8080/a?u=http://other.com/x"),
            Some("blocked_url")
        );
        assert_eq!(r("http://other.com/x"), None);
        assert_eq!(r("https://user@login.io/"), Some("blocked_url"));
        assert_eq!(r(&format!("http://{long}/p")), Some("blocked_url"));
        let refs = [Some("https://shady.org/path"), Some("https://ok.org/path")];
        let got: Vec<_> = b
            .check_serial(&refs)
            .into_iter()
            .map(|x| x.map(|x| x.reason))
            .collect();
        assert_eq!(got, [Some("blocked_url"), None]);
    }

    #[test]
    fn each_rule_fires_with_its_reason() {
        let b = list();
        let r = |u: &str| b.check(u).map(|x| (x.reason, x.detail));
        assert_eq!(
            r("https://a.b.Bad.Example:8080/x"),
            Some(("blocked_domain", "bad.example".into()))
        );
        assert_eq!(
            r("http://user@evil.co.uk./"),
            Some(("blocked_domain", "evil.co.uk".into()))
        );
        assert_eq!(
            r("http://notbad.example/"),
            None,
            "suffix walk is by labels, not characters"
        );
        assert_eq!(
            r("https://shady.org/path/page.html"),
            Some(("blocked_url", "shady.org/path/page.html".into()))
        );
        assert_eq!(
            r("https://ok.org/XXX-videos"),
            Some(("banned_word", "xxx".into()))
        );
        assert_eq!(r("https://ok.org/xxxy"), None, "words, not substrings");
        assert_eq!(
            r("https://ok.org/hot-news"),
            None,
            "one soft word is below the threshold"
        );
        assert_eq!(
            r("https://ok.org/hot-girls"),
            Some(("soft_banned_words", "hot,girls".into()))
        );
        assert_eq!(
            r("https://ok.org/2-Girls_1cup"),
            Some(("banned_subword", "2girls1cup".into()))
        );
        assert_eq!(r("https://example.com/fine"), None);
    }

    #[test]
    fn hosts() {
        assert_eq!(host("https://u:p@Host.com:99/a?b"), "Host.com");
        assert_eq!(host("http://[::1]:80/"), "[::1]");
        assert_eq!(host("example.org/path"), "example.org");
    }

    #[test]
    fn lists_from_text_gzip_and_ut1_tar() {
        let mut got = vec![];
        assert_eq!(
            list_lines(b"# c\na.com\n\nb.com\n", ListKind::Domains, &[], |l| got
                .push(l.to_string()))
            .unwrap(),
            2
        );
        let mut ar = tar::Builder::new(Vec::new());
        for (p, body) in [
            ("blacklists/adult/domains", "x.com\n"),
            ("blacklists/adult/urls", "x.com/a\n"),
            ("blacklists/games/domains", "g.com\n"),
        ] {
            let mut h = tar::Header::new_gnu();
            h.set_size(body.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            ar.append_data(&mut h, p, body.as_bytes()).unwrap();
        }
        let tarball = ar.into_inner().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tarball).unwrap();
        let tgz = gz.finish().unwrap();
        let mut d = vec![];
        list_lines(&tgz, ListKind::Domains, &[], |l| d.push(l.to_string())).unwrap();
        assert_eq!(d, ["x.com", "g.com"]);
        let mut d = vec![];
        list_lines(&tgz, ListKind::Domains, &["games".into()], |l| {
            d.push(l.to_string())
        })
        .unwrap();
        assert_eq!(d, ["g.com"]);
        let mut u = vec![];
        list_lines(&tgz, ListKind::Urls, &[], |l| u.push(l.to_string())).unwrap();
        assert_eq!(u, ["x.com/a"]);
    }
}
