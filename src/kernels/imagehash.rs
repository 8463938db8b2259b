//! Perceptual hashes as the Python `imagehash` library (4.3) defines them, so that
//! hashes agree with it: Pillow's RGB → L luma, Pillow's Lanczos resampling
//! ([`crate::kernels::resample`], bit for bit), then
//! * `phash`: 32×32, 2-D DCT-II, the top-left 8×8 coefficients, bit = coefficient >
//!   their median;
//! * `dhash`: 9×8, bit = pixel > its left neighbour;
//! * `ahash`: 8×8, bit = pixel > the mean.
//!
//! Bits are packed row-major, first bit most significant, so `format!("{:016x}")`
//! prints what `str(imagehash.phash(img))` prints.
use image::RgbImage;

super::avx2_dispatch! {
    /// Pillow's `convert("L")`: ITU-R 601-2 luma in 16-bit fixed point.
    pub fn luma(img: &RgbImage) -> Vec<u8> => luma_any
}

#[inline(always)]
pub(crate) fn luma_any(img: &RgbImage) -> Vec<u8> {
    let raw = img.as_raw();
    let mut out = vec![0u8; raw.len() / 3];
    for (o, p) in out.iter_mut().zip(raw.chunks_exact(3)) {
        *o =
            ((p[0] as u32 * 19595 + p[1] as u32 * 38470 + p[2] as u32 * 7471 + 0x8000) >> 16) as u8;
    }
    out
}

fn pack(bits: impl Iterator<Item = bool>) -> u64 {
    bits.fold(0u64, |acc, b| (acc << 1) | b as u64)
}

/// The three hashes of one image, and whether it is flat: near-constant at 32×32
/// (every flat image shares one phash, so equal hashes mean nothing there) or with
/// an ill-defined phash (see [`phash_of_gray32`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hashes {
    pub phash: u64,
    pub dhash: u64,
    pub ahash: u64,
    pub flat: bool,
}

/// The DCT-II basis for N = 32, rows k = 0..8 only (the coefficients phash keeps).
fn basis() -> &'static [[f64; 32]; 8] {
    static B: std::sync::OnceLock<[[f64; 32]; 8]> = std::sync::OnceLock::new();
    B.get_or_init(|| {
        let mut b = [[0.0; 32]; 8];
        for (k, row) in b.iter_mut().enumerate() {
            for (n, v) in row.iter_mut().enumerate() {
                *v = 2.0 * (std::f64::consts::PI * k as f64 * (2 * n + 1) as f64 / 64.0).cos();
            }
        }
        b
    })
}

/// The phash of a 32×32 grey image, and whether it is ill-defined: two or more of
/// the 64 coefficients tie with their median (to 1e-9 of the largest), so their bits
/// are decided by rounding noise (a chessboard, a linear gradient).
pub fn phash_of_gray32(g: &[u8]) -> (u64, bool) {
    let b = basis();
    // Along axis 0 (columns) first, as scipy's dct(dct(x, axis=0), axis=1); only the
    // 8 lowest frequencies of each axis are needed.
    let mut t = [[0.0f64; 32]; 8]; // t[k][x] = sum_y b[k][y] * g[y][x]
    for (k, bk) in b.iter().enumerate() {
        for (y, &w) in bk.iter().enumerate() {
            let row = &g[y * 32..y * 32 + 32];
            for x in 0..32 {
                t[k][x] += w * row[x] as f64;
            }
        }
    }
    let mut c = [0.0f64; 64];
    for k in 0..8 {
        for l in 0..8 {
            c[k * 8 + l] = (0..32).map(|x| b[l][x] * t[k][x]).sum();
        }
    }
    let mut sorted = c;
    sorted.sort_by(|a, b| a.total_cmp(b));
    let median = (sorted[31] + sorted[32]) / 2.0;
    let scale = c.iter().fold(0f64, |m, v| m.max(v.abs()));
    let ties = c
        .iter()
        .filter(|&&v| (v - median).abs() <= 1e-9 * scale)
        .count();
    (pack(c.iter().map(|&v| v > median)), ties >= 2)
}

/// Hashes of an RGB image (any size ≥ 1×1).
pub fn hashes(img: &RgbImage) -> Hashes {
    hashes_with_luma(img, &luma(img))
}

/// [`hashes`], given the image's [`luma`] already made.
pub fn hashes_with_luma(img: &RgbImage, luma: &[u8]) -> Hashes {
    use crate::kernels::resample::{Filter, resize_grey_columns, transpose};
    let (w, h) = (img.width() as usize, img.height() as usize);
    // Column by column: the three resizes' horizontal passes vectorise down columns.
    let g = transpose(luma, w, h);
    let resize = |g: &[u8], w, h, ow, oh| resize_grey_columns(g, (w, h), (ow, oh), Filter::Lanczos);
    let g32 = resize(&g, w, h, 32, 32);
    let mean32 = g32.iter().map(|&v| v as f64).sum::<f64>() / 1024.0;
    let var32 = g32
        .iter()
        .map(|&v| (v as f64 - mean32).powi(2))
        .sum::<f64>()
        / 1024.0;
    let g9x8 = resize(&g, w, h, 9, 8);
    let dhash = pack((0..8).flat_map(|r| {
        let row = &g9x8[r * 9..r * 9 + 9];
        (0..8).map(move |c| row[c + 1] > row[c])
    }));
    let g8 = resize(&g, w, h, 8, 8);
    let mean8 = g8.iter().map(|&v| v as f64).sum::<f64>() / 64.0;
    let ahash = pack(g8.iter().map(|&v| v as f64 > mean8));
    let (phash, tied) = phash_of_gray32(&g32);
    Hashes {
        phash,
        dhash,
        ahash,
        flat: var32.sqrt() < 2.0 || tied,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resize(px: &[u8], w: usize, h: usize, ow: usize, oh: usize) -> Vec<u8> {
        use crate::kernels::resample::{Filter, resize};
        resize(px, 1, w, h, ow, oh, Filter::Lanczos)
    }

    #[test]
    fn identity_resize_and_constant_images() {
        let px: Vec<u8> = (0..64).map(|i| (i * 3) as u8).collect();
        assert_eq!(resize(&px, 8, 8, 8, 8), px);
        let flat = RgbImage::from_pixel(50, 40, image::Rgb([90, 90, 90]));
        let h = hashes(&flat);
        assert!(h.flat);
        assert_eq!(resize(&luma(&flat), 50, 40, 32, 32), vec![90u8; 1024]);
    }

    #[test]
    fn gradients_hash_as_expected_and_small_changes_stay_close() {
        // Left-to-right gradient: every dhash bit set, ahash the right half, and a
        // phash that is ill-defined (only the first DCT row is non-zero): flagged.
        let img = RgbImage::from_fn(64, 64, |x, _| image::Rgb([(x * 4) as u8; 3]));
        let h = hashes(&img);
        assert_eq!(h.dhash, u64::MAX);
        assert_eq!(h.ahash, 0x0F0F_0F0F_0F0F_0F0F);
        assert!(h.flat);
        // A textured image: well defined, and robust to slight noise.
        let img = RgbImage::from_fn(64, 64, |x, y| {
            let v = (x * 3 + y * 5 + (x * y) % 23 * 4) % 256;
            image::Rgb([v as u8, (v / 2) as u8, 200])
        });
        let h = hashes(&img);
        assert!(!h.flat);
        let mut noisy = img.clone();
        for (i, p) in noisy.pixels_mut().enumerate() {
            p[0] = p[0].saturating_add((i % 3) as u8);
        }
        assert!((hashes(&noisy).phash ^ h.phash).count_ones() <= 4);
    }
}
