//! Pigeonhole band keys for 64-bit perceptual hashes: with the bits cut into
//! `radius + 1` contiguous bands, two hashes within Hamming distance `radius` differ in
//! at most `radius` bands, so they agree on at least one: equal band keys find every
//! pair within the radius (exactly, not approximately), and the true distance then
//! verifies each candidate (Manku et al., "Detecting near-duplicates for web
//! crawling", WWW 2007).
use xxhash_rust::xxh3::xxh3_128;

/// The bit ranges of the bands for a radius (at most 63: one bit per band).
pub fn bands(radius: u32) -> Vec<(u32, u32)> {
    let n = radius.min(63) + 1;
    (0..n).map(|i| (i * 64 / n, (i + 1) * 64 / n)).collect()
}

/// One 128-bit key per band: (band index, the band's bits).
pub fn band_keys(hash: u64, radius: u32) -> Vec<u128> {
    bands(radius)
        .into_iter()
        .enumerate()
        .map(|(i, (lo, hi))| {
            let width = hi - lo;
            let mask = if width == 64 {
                u64::MAX
            } else {
                (1u64 << width) - 1
            };
            let bits = (hash >> lo) & mask;
            let mut buf = [0u8; 12];
            buf[..4].copy_from_slice(&(i as u32).to_le_bytes());
            buf[4..].copy_from_slice(&bits.to_le_bytes());
            xxh3_128(&buf)
        })
        .collect()
}

pub fn distance(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Against brute force over all pairs: every pair within the radius shares a band
    /// key (recall 1), and verification by distance leaves exactly those pairs.
    #[test]
    fn every_pair_within_the_radius_shares_a_band() {
        let mut next = crate::kernels::xorshift(0x1234_5678u64);
        for radius in [0u32, 1, 4, 8, 12] {
            let mut hashes = Vec::new();
            for _ in 0..150 {
                let h = next();
                hashes.push(h);
                // Planted neighbours at every distance up to radius + 2.
                for d in 0..=radius + 2 {
                    let mut v = h;
                    let mut flipped = HashSet::new();
                    while flipped.len() < d as usize {
                        flipped.insert(next() % 64);
                    }
                    for b in &flipped {
                        v ^= 1 << b;
                    }
                    hashes.push(v);
                }
            }
            let keys: Vec<HashSet<u128>> = hashes
                .iter()
                .map(|&h| band_keys(h, radius).into_iter().collect())
                .collect();
            let (mut within, mut found) = (0, 0);
            for i in 0..hashes.len() {
                for j in i + 1..hashes.len() {
                    let close = distance(hashes[i], hashes[j]) <= radius;
                    let candidate = !keys[i].is_disjoint(&keys[j]);
                    within += usize::from(close);
                    found += usize::from(close && candidate);
                }
            }
            assert!(within > 0);
            assert_eq!(found, within, "radius {radius}: recall must be exact");
        }
        assert_eq!(
            bands(4),
            vec![(0, 12), (12, 25), (25, 38), (38, 51), (51, 64)]
        );
    }
}
