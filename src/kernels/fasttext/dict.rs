//! fastText's dictionary at prediction time: a token's id (an open-addressing table on
//! fastText's own FNV-1a hash, computed once per token), its character n-grams
//! (`<word>` split on UTF-8 characters, `minn..=maxn` long, hashed into `bucket`
//! rows), word n-grams (fastText's hash combination) and the pruned-bucket remap of
//! quantized models. The arithmetic keeps fastText's quirks: bytes hashed as signed
//! chars, word hashes sign-extended to 64 bits.
use super::FastTextError;
use super::read::File;
use crate::kernels::FastMap;

pub const EOS: &[u8] = b"</s>";
const LABEL: &[u8] = b"__label__";

/// fastText's `Dictionary::hash`: FNV-1a over the bytes as signed chars.
#[inline(always)]
fn fnv_step(h: u32, b: u8) -> u32 {
    (h ^ (b as i8 as i32 as u32)).wrapping_mul(16_777_619)
}

const FNV_OFFSET: u32 = 2_166_136_261;

#[inline]
pub fn hash(s: &[u8]) -> u32 {
    s.iter().fold(FNV_OFFSET, |h, &b| fnv_step(h, b))
}

/// The most input rows kept precomputed for the dictionary's words (256 MiB): a
/// file's words cost at most this, however long its words or wide its `maxn`; real
/// models stay far below it (lid.176.bin: about 20M).
pub const SUBWORD_BUDGET: usize = 1 << 26;

pub struct Dict {
    words: Vec<Box<[u8]>>,
    /// Label or word, per entry.
    is_label: Vec<bool>,
    nwords: usize,
    /// Entry ids by hash (`-1`: empty), a power of two long.
    table: Vec<i32>,
    /// Per word: its input rows (itself and its n-grams), `subword_at[i]..[i + 1]`,
    /// for the first `subword_at.len() - 1` words; the rest (past
    /// [`SUBWORD_BUDGET`]) compute theirs per token.
    subword_at: Vec<u32>,
    subwords: Vec<i32>,
    minn: i64,
    maxn: i64,
    bucket: u32,
    /// `pruneidx` of a quantized model: bucket → row after the words.
    prune: Option<FastMap<i32, i32>>,
}

impl Dict {
    pub fn new(f: &File) -> Result<Dict, FastTextError> {
        let size = f.entries.len();
        let cap = (size * 2).next_power_of_two().max(2);
        let mut d = Dict {
            words: f.entries.iter().map(|e| e.word.clone().into()).collect(),
            is_label: f.entries.iter().map(|e| e.kind == 1).collect(),
            nwords: f.nwords,
            table: vec![-1; cap],
            subword_at: Vec::with_capacity(f.nwords + 1),
            subwords: Vec::new(),
            minn: f.args.minn as i64,
            maxn: f.args.maxn as i64,
            bucket: f.args.bucket as u32,
            prune: f.prune.as_ref().map(|p| p.iter().copied().collect()),
        };
        if let Some((k, v)) = d.prune.iter().flatten().find(|(_, v)| **v < 0) {
            return Err(FastTextError::Invalid(format!(
                "pruneidx maps bucket {k} to row {v}"
            )));
        }
        for i in 0..size {
            let at = d.slot(&d.words[i], hash(&d.words[i]));
            if d.table[at] != -1 {
                return Err(FastTextError::Invalid(format!(
                    "dictionary entry {:?} appears twice",
                    String::from_utf8_lossy(&d.words[i])
                )));
            }
            d.table[at] = i as i32;
        }
        // fastText's initNgrams: a word's rows are itself, then its n-grams.
        let mut word = Vec::new();
        let mut rows = Vec::new();
        d.subword_at.push(0);
        for i in 0..f.nwords {
            rows.clear();
            rows.push(i as i32);
            if &*d.words[i] != EOS {
                word.clear();
                word.push(b'<');
                word.extend_from_slice(&d.words[i]);
                word.push(b'>');
                d.char_ngrams(&word, &mut |r| rows.push(r));
            }
            if d.subwords.len() + rows.len() > SUBWORD_BUDGET {
                break;
            }
            d.subwords.extend_from_slice(&rows);
            d.subword_at.push(d.subwords.len() as u32);
        }
        Ok(d)
    }

    /// Forgets the precomputed rows of every word from `n` on (tests: the budget).
    #[cfg(test)]
    pub fn truncate_subwords(&mut self, n: usize) {
        self.subword_at.truncate(n + 1);
        self.subwords.truncate(self.subword_at[n] as usize);
    }

    /// The highest input row a line can use (`None`: no row at all).
    pub fn max_id(&self) -> Option<usize> {
        let ngram = match &self.prune {
            Some(p) => p.values().map(|&v| v as usize).max(),
            None if self.bucket > 0 => Some(self.bucket as usize - 1),
            None => None,
        };
        match (ngram, self.nwords) {
            (Some(n), w) => Some(w + n),
            (None, 0) => None,
            (None, w) => Some(w - 1),
        }
    }

    /// The table slot of `w`: where it is, or the empty slot it would go in.
    #[inline]
    fn slot(&self, w: &[u8], h: u32) -> usize {
        let mask = self.table.len() - 1;
        let mut at = h as usize & mask;
        loop {
            let id = self.table[at];
            if id == -1 || &*self.words[id as usize] == w {
                return at;
            }
            at = (at + 1) & mask;
        }
    }

    /// fastText's `pushHash`: a bucket's input row, through the pruned remap.
    #[inline]
    fn push_bucket(&self, rows: &mut impl FnMut(i32), b: i32) {
        match &self.prune {
            None => rows(self.nwords as i32 + b),
            Some(p) => {
                if let Some(&r) = p.get(&b) {
                    rows(self.nwords as i32 + r)
                }
            }
        }
    }

    /// fastText's `computeSubwords` of a `<word>`.
    fn char_ngrams(&self, word: &[u8], rows: &mut impl FnMut(i32)) {
        if self.maxn <= 0 || self.bucket == 0 {
            return;
        }
        let len = word.len();
        for i in 0..len {
            if word[i] & 0xC0 == 0x80 {
                continue;
            }
            let mut h = FNV_OFFSET;
            let mut j = i;
            let mut n = 1i64;
            while j < len && n <= self.maxn {
                h = fnv_step(h, word[j]);
                j += 1;
                while j < len && word[j] & 0xC0 == 0x80 {
                    h = fnv_step(h, word[j]);
                    j += 1;
                }
                if n >= self.minn && !(n == 1 && (i == 0 || j == len)) {
                    self.push_bucket(rows, (h % self.bucket) as i32);
                }
                n += 1;
            }
        }
    }

    /// One token of a line (fastText's `getLine` body): its rows into `rows`, its
    /// hash into `hashes` when a word. True when the token is `</s>` (the line ends).
    #[inline]
    pub fn add_token(
        &self,
        token: &[u8],
        rows: &mut impl FnMut(i32),
        hashes: &mut Vec<i32>,
        buf: &mut Vec<u8>,
    ) -> bool {
        let h = hash(token);
        let id = self.table[self.slot(token, h)];
        let is_label = if id < 0 {
            token.starts_with(LABEL)
        } else {
            self.is_label[id as usize]
        };
        if !is_label {
            if id < 0 || (self.maxn > 0 && id as usize + 1 >= self.subword_at.len()) {
                // Out of the vocabulary, or a word past the precomputed budget: the
                // same rows, computed here.
                if id >= 0 {
                    rows(id);
                }
                if token != EOS {
                    buf.clear();
                    buf.push(b'<');
                    buf.extend_from_slice(token);
                    buf.push(b'>');
                    self.char_ngrams(buf, rows);
                }
            } else if self.maxn <= 0 {
                rows(id);
            } else {
                let i = id as usize;
                let (a, b) = (self.subword_at[i] as usize, self.subword_at[i + 1] as usize);
                for &r in &self.subwords[a..b] {
                    rows(r);
                }
            }
            hashes.push(h as i32);
        }
        token == EOS
    }

    /// fastText's `addWordNgrams`.
    pub fn add_word_ngrams(&self, hashes: &[i32], n: i32, rows: &mut impl FnMut(i32)) {
        if self.bucket == 0 {
            return;
        }
        let n = n.max(0) as usize;
        for i in 0..hashes.len() {
            let mut h = hashes[i] as i64 as u64;
            for &hj in hashes.iter().take(i + n).skip(i + 1) {
                h = h.wrapping_mul(116_049_371).wrapping_add(hj as i64 as u64);
                self.push_bucket(rows, (h % self.bucket as u64) as i32);
            }
        }
    }
}
