//! MinHash signatures and LSH band keys for near-duplicate detection (Broder 1997;
//! bands × rows banding as in Leskovec et al., *Mining of Massive Datasets* ch. 3),
//! with datatrove's defaults: word 5-grams over simplified text, 14 bands × 8 rows.
//!
//! Text is simplified (lowercased, punctuation removed, whitespace collapsed), cut into
//! word n-gram shingles, each hashed once with xxh3; the k = bands × rows permutations
//! are multiply-shift hashes `(a·x + b) >> 32` with odd 64-bit `a` (a universal family,
//! Dietzfelbinger et al.), so a signature costs one multiply-add per shingle and
//! permutation and the inner loop vectorises. Band `j`'s key is a 128-bit hash of
//! (j, its `rows` values): two documents share a band key with probability
//! 1 − (1 − J^rows)^bands for Jaccard similarity J.
use xxhash_rust::xxh3::{xxh3_64, xxh3_128};

/// MinHash parameters and the permutations they imply.
#[derive(Debug, Clone)]
pub struct MinHasher {
    pub n_gram: usize,
    pub bands: usize,
    pub rows: usize,
    a: Vec<u64>,
    b: Vec<u64>,
}

impl MinHasher {
    /// `seed` fixes the permutations: jobs compared with each other must share it.
    pub fn new(n_gram: usize, bands: usize, rows: usize, seed: u64) -> MinHasher {
        let k = bands * rows;
        // SplitMix64: a fixed, well-mixed sequence from the seed.
        let mut s = seed;
        let mut next = || {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let a = (0..k).map(|_| next() | 1).collect();
        let b = (0..k).map(|_| next()).collect();
        MinHasher {
            n_gram: n_gram.max(1),
            bands,
            rows,
            a,
            b,
        }
    }

    /// datatrove's defaults: 5-grams, 14 bands of 8 rows.
    pub fn default_params() -> MinHasher {
        MinHasher::new(5, 14, 8, 1)
    }

    pub fn k(&self) -> usize {
        self.a.len()
    }

    /// The shingle hashes of a text (deduplicated is not needed: min ignores repeats).
    pub fn shingles(&self, text: &str) -> Vec<u64> {
        let simple = simplify(text);
        let words: Vec<&str> = simple.split(' ').filter(|w| !w.is_empty()).collect();
        if words.is_empty() {
            return Vec::new();
        }
        let n = self.n_gram.min(words.len());
        // Byte spans of each word in `simple`, so an n-gram is one slice (words are
        // separated by exactly one space after simplification).
        let mut starts = Vec::with_capacity(words.len());
        let base = simple.as_ptr() as usize;
        for w in &words {
            starts.push((w.as_ptr() as usize - base, w.len()));
        }
        (0..=words.len() - n)
            .map(|i| {
                let (s, _) = starts[i];
                let (e, l) = starts[i + n - 1];
                xxh3_64(&simple.as_bytes()[s..e + l])
            })
            .collect()
    }

    /// The signature: per permutation, the minimum over the shingles (all `u32::MAX`
    /// for a text without words).
    pub fn signature(&self, text: &str) -> Vec<u32> {
        let sh = self.shingles(text);
        self.signature_of(&sh)
    }

    pub fn signature_of(&self, shingles: &[u64]) -> Vec<u32> {
        let mut sig = vec![u32::MAX; self.k()];
        min_hashes(&self.a, &self.b, shingles, &mut sig);
        sig
    }

    /// One 128-bit key per band.
    pub fn band_keys(&self, sig: &[u32]) -> Vec<u128> {
        let bytes: Vec<u8> = sig.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut out = Vec::with_capacity(self.bands);
        band_keys_le(&bytes, self.bands, self.rows, &mut out);
        out
    }

    /// The probability that two documents at Jaccard similarity `j` share a band.
    pub fn collision_probability(&self, j: f64) -> f64 {
        1.0 - (1.0 - j.powi(self.rows as i32)).powi(self.bands as i32)
    }
}

/// Per permutation `i`, the least of `(a[i]·x + b[i]) >> 32` over the shingles `x`,
/// folded into `sig`.
#[inline(always)]
fn min_hashes_generic(a: &[u64], b: &[u64], shingles: &[u64], sig: &mut [u32]) {
    for &x in shingles {
        for ((s, &a), &b) in sig.iter_mut().zip(a).zip(b) {
            let h = (a.wrapping_mul(x).wrapping_add(b) >> 32) as u32;
            *s = (*s).min(h);
        }
    }
}

super::avx2_dispatch! {
    /// [`min_hashes_generic`], with AVX2 where the CPU has it: the baseline's SSE2
    /// has no 64-bit multiply, so the permutations ran one at a time; AVX2 does
    /// four at once (the same wrapping arithmetic, so the same signature).
    fn min_hashes(a: &[u64], b: &[u64], shingles: &[u64], sig: &mut [u32]) -> () => min_hashes_generic
}

/// The band keys of a signature stored as little-endian u32s (as the `minhash`
/// stage writes it): band `j`'s key hashes `j` and its `rows` values.
pub fn band_keys_le(sig: &[u8], bands: usize, rows: usize, out: &mut Vec<u128>) {
    let mut buf = Vec::with_capacity(4 + 4 * rows);
    for j in 0..bands {
        buf.clear();
        buf.extend_from_slice(&(j as u32).to_le_bytes());
        buf.extend_from_slice(&sig[4 * j * rows..4 * (j + 1) * rows]);
        out.push(xxh3_128(&buf));
    }
}

/// The lowest byte of each value (b-bit MinHash with b = 8, Li & König 2010): a
/// quarter of the bytes, enough to verify a candidate pair.
pub fn low_bytes_le(sig: &[u8], out: &mut [u8]) {
    for (o, v) in out.iter_mut().zip(sig.chunks_exact(4)) {
        *o = v[0];
    }
}

/// The Jaccard similarity estimated from two 8-bit b-bit signatures of `k` values,
/// corrected for chance matches: J = (m/k − 2⁻⁸) / (1 − 2⁻⁸).
pub fn bbit_jaccard(a: &[u8], b: &[u8], k: usize) -> f64 {
    let m = a[..k].iter().zip(&b[..k]).filter(|(x, y)| x == y).count();
    let c = 1.0 / 256.0;
    ((m as f64 / k.max(1) as f64 - c) / (1.0 - c)).max(0.0)
}

/// The estimated Jaccard similarity of two signatures: the share of equal minima.
pub fn jaccard_estimate(a: &[u32], b: &[u32]) -> f64 {
    let eq = a.iter().zip(b).filter(|(x, y)| x == y).count();
    eq as f64 / a.len().max(1) as f64
}

/// Lowercase, punctuation to spaces, whitespace collapsed to one space (as
/// datatrove's `simplify_text` before shingling).
pub fn simplify(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = true;
    for c in text.chars() {
        if c.is_alphanumeric() {
            for l in c.to_lowercase() {
                out.push(l);
            }
            space = false;
        } else if !space {
            out.push(' ');
            space = true;
        }
    }
    if out.ends_with(' ') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// The dispatched min-hash loop (AVX2 where the CPU has it) folds exactly what the
    /// plain loop folds, for any permutation count and any shingles.
    #[test]
    fn dispatched_min_hashes_are_the_plain_loops() {
        let mut next = crate::kernels::xorshift(11);
        for k in [1usize, 3, 4, 7, 112, 129] {
            let a: Vec<u64> = (0..k).map(|_| next() | 1).collect();
            let b: Vec<u64> = (0..k).map(|_| next()).collect();
            for n in [0usize, 1, 5, 300] {
                let xs: Vec<u64> = (0..n).map(|_| next()).collect();
                let (mut fast, mut plain) = (vec![u32::MAX; k], vec![u32::MAX; k]);
                min_hashes(&a, &b, &xs, &mut fast);
                min_hashes_generic(&a, &b, &xs, &mut plain);
                assert_eq!(fast, plain, "k {k} n {n}");
            }
        }
    }

    fn words(seed: u64, n: usize) -> Vec<String> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                format!("w{}", (x >> 33) % 5000)
            })
            .collect()
    }

    fn true_jaccard(m: &MinHasher, a: &str, b: &str) -> f64 {
        let sa: HashSet<u64> = m.shingles(a).into_iter().collect();
        let sb: HashSet<u64> = m.shingles(b).into_iter().collect();
        sa.intersection(&sb).count() as f64 / sa.union(&sb).count().max(1) as f64
    }

    /// The 8-bit b-bit estimate tracks the true Jaccard similarity (within 0.08 at
    /// 112 permutations) and is near 0 for unrelated texts.
    #[test]
    fn bbit_estimate_tracks_jaccard() {
        let m = MinHasher::default_params();
        let base = words(7, 400);
        for keep in [400usize, 360, 300, 200, 100] {
            let mut other = base[..keep].to_vec();
            other.extend(words(99 + keep as u64, 400 - keep));
            let (a, b) = (base.join(" "), other.join(" "));
            let le = |t: &str| -> Vec<u8> {
                m.signature(t)
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect()
            };
            let (mut x, mut y) = (vec![0u8; m.k()], vec![0u8; m.k()]);
            low_bytes_le(&le(&a), &mut x);
            low_bytes_le(&le(&b), &mut y);
            let est = bbit_jaccard(&x, &y, m.k());
            let truth = true_jaccard(&m, &a, &b);
            assert!((est - truth).abs() < 0.08, "keep {keep}: {est} vs {truth}");
        }
    }

    #[test]
    fn simplification_and_shingles() {
        assert_eq!(
            simplify("  Hello,   World!! It's\n2024. "),
            "hello world it s 2024"
        );
        let m = MinHasher::new(2, 1, 1, 1);
        assert_eq!(m.shingles("a b c").len(), 2);
        assert_eq!(
            m.shingles("A, b").len(),
            1,
            "fewer words than n: one shingle"
        );
        assert_eq!(m.shingles("a b"), m.shingles("A  B!"));
        assert!(m.shingles(" ,. ").is_empty());
    }

    /// The estimate tracks the true Jaccard similarity of the shingle sets.
    #[test]
    fn estimates_track_true_jaccard() {
        let m = MinHasher::new(5, 32, 8, 7); // 256 permutations: tight estimates
        let base = words(1, 400);
        for edits in [0usize, 10, 40, 100, 200] {
            let mut other = base.clone();
            let fresh = words(99 + edits as u64, edits);
            for (i, w) in fresh.into_iter().enumerate() {
                other[(i * 7919) % 400] = w;
            }
            let (a, b) = (base.join(" "), other.join(" "));
            let j = true_jaccard(&m, &a, &b);
            let est = jaccard_estimate(&m.signature(&a), &m.signature(&b));
            assert!(
                (est - j).abs() < 0.09,
                "edits {edits}: true {j:.3} est {est:.3}"
            );
        }
    }

    /// Band collisions happen at the rate the banding predicts: near duplicates
    /// (J ≈ 0.9) almost always share a band, unrelated texts almost never.
    #[test]
    fn band_keys_collide_as_predicted() {
        let m = MinHasher::default_params();
        let mut near = 0;
        let mut far = 0;
        let trials = 200;
        for t in 0..trials {
            let base = words(1000 + t, 300);
            let mut other = base.clone();
            other[150] = "changed".into(); // 5 of ~296 shingles differ
            let unrelated = words(5000 + t, 300);
            let kb: HashSet<u128> = m
                .band_keys(&m.signature(&base.join(" ")))
                .into_iter()
                .collect();
            let ko = m.band_keys(&m.signature(&other.join(" ")));
            let ku = m.band_keys(&m.signature(&unrelated.join(" ")));
            near += usize::from(ko.iter().any(|k| kb.contains(k)));
            far += usize::from(ku.iter().any(|k| kb.contains(k)));
        }
        assert!(m.collision_probability(0.97) > 0.999);
        assert!(
            near >= trials as usize - 1,
            "near duplicates sharing a band: {near}/{trials}"
        );
        assert_eq!(far, 0, "unrelated texts sharing a band");
    }

    #[test]
    fn signatures_are_deterministic_per_seed() {
        let t = words(3, 50).join(" ");
        let a = MinHasher::new(5, 14, 8, 1);
        let b = MinHasher::new(5, 14, 8, 1);
        let c = MinHasher::new(5, 14, 8, 2);
        assert_eq!(a.signature(&t), b.signature(&t));
        assert_ne!(a.signature(&t), c.signature(&t));
        assert_eq!(a.signature("").len(), 112);
        assert!(a.signature("").iter().all(|&v| v == u32::MAX));
    }
}
