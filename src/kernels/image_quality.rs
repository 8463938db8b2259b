//! Technical image quality from the pixels, in one pass over the luma plus one over
//! the colours:
//! * `brightness`: mean luma / 255; `contrast`: RMS contrast, std of luma / 255;
//! * `entropy`: Shannon entropy of the luma histogram in bits (0–8), as Pillow's
//!   `Image.entropy()` on an L image;
//! * `sharpness`: variance of the 4-neighbour Laplacian of the luma (Pech-Pacheco et
//!   al. 2000), at the resolution given (quality operators use the decoded image,
//!   JPEGs at a reduced DCT scale; see `image_quality`);
//! * `colorfulness`: Hasler & Süsstrunk (2003), σ_rgyb + 0.3·μ_rgyb;
//! * `compression_artifacts`: JPEG blockiness, the mean absolute luma step across the
//!   8×8 block grid (scaled with the decode) over the mean step inside blocks: ≈ 1
//!   without visible blocks, larger with them; 0 when the image is too small.
use image::RgbImage;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Quality {
    pub brightness: f64,
    pub contrast: f64,
    pub entropy: f64,
    pub sharpness: f64,
    pub colorfulness: f64,
    pub compression_artifacts: f64,
}

super::avx2_dispatch! {
    /// `block` is the block-grid period in pixels of `img` (8 at full scale, 8 / scale
    /// for a JPEG decoded at reduced scale; below 2 the measure is 0).
    pub fn quality(img: &RgbImage, luma: &[u8], block: u32) -> Quality => quality_any
}

#[inline(always)]
fn quality_any(img: &RgbImage, luma: &[u8], block: u32) -> Quality {
    let (w, h) = (img.width() as usize, img.height() as usize);
    let n = (w * h).max(1) as f64;
    // Integer sums throughout (exact, and 3× faster than f64 accumulation).
    // Four histograms, so runs of one value (flat areas) do not wait on each other's
    // increments (a store-to-load chain through one counter).
    let mut h4 = [[0u64; 256]; 4];
    let mut quads = luma.chunks_exact(4);
    for q in &mut quads {
        h4[0][q[0] as usize] += 1;
        h4[1][q[1] as usize] += 1;
        h4[2][q[2] as usize] += 1;
        h4[3][q[3] as usize] += 1;
    }
    for &v in quads.remainder() {
        h4[0][v as usize] += 1;
    }
    let hist: [u64; 256] = std::array::from_fn(|v| h4.iter().map(|h| h[v]).sum::<u64>());
    let (mut s, mut s2) = (0u64, 0u64);
    for (v, &c) in hist.iter().enumerate() {
        s += v as u64 * c;
        s2 += (v * v) as u64 * c;
    }
    let mean = s as f64 / n;
    let var = (s2 as f64 / n - mean * mean).max(0.0);
    let entropy = hist
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum::<f64>()
        // A flat image sums to -0.0 (-1 · log2 1), shown as "-0.0000": plain zero.
        + 0.0;
    // Laplacian variance over the interior, in runs of at most 1,024 pixels summed in
    // i32 (|l| ≤ 1,020, so l² · 1,024 < 2³¹): slices without index checks vectorise.
    let (mut ls, mut ls2, mut ln) = (0i64, 0i64, 0i64);
    if w >= 3 && h >= 3 {
        for y in 1..h - 1 {
            let up = &luma[(y - 1) * w + 1..y * w - 1];
            let down = &luma[(y + 1) * w + 1..(y + 2) * w - 1];
            let row = &luma[y * w..(y + 1) * w];
            let (left, mid, right) = (&row[..w - 2], &row[1..w - 1], &row[2..]);
            for start in (0..w - 2).step_by(1024) {
                let end = (start + 1024).min(w - 2);
                let (mut s1, mut s2) = (0i32, 0i32);
                for i in start..end {
                    let l = up[i] as i32 + down[i] as i32 + left[i] as i32 + right[i] as i32
                        - 4 * mid[i] as i32;
                    s1 += l;
                    s2 += l * l;
                }
                ls += s1 as i64;
                ls2 += s2 as i64;
            }
            ln += (w - 2) as i64;
        }
    }
    let sharpness = if ln > 0 {
        let m = ls as f64 / ln as f64;
        (ls2 as f64 / ln as f64 - m * m).max(0.0)
    } else {
        0.0
    };
    // Colourfulness, with yb doubled to stay integral; runs of 4,096 pixels in i32
    // (yb2² ≤ 260,100).
    let (mut a, mut a2, mut b, mut b2) = (0i64, 0i64, 0i64, 0i64);
    for run in img.as_raw().chunks(3 * 4096) {
        let (mut ra, mut ra2, mut rb, mut rb2) = (0i32, 0i32, 0i32, 0i32);
        for p in run.chunks_exact(3) {
            let (r, g, bl) = (p[0] as i32, p[1] as i32, p[2] as i32);
            let rg = r - g;
            let yb2 = r + g - 2 * bl;
            ra += rg;
            ra2 += rg * rg;
            rb += yb2;
            rb2 += yb2 * yb2;
        }
        a += ra as i64;
        a2 += ra2 as i64;
        b += rb as i64;
        b2 += rb2 as i64;
    }
    let (ma, mb) = (a as f64 / n, b as f64 / n / 2.0);
    let (va, vb) = (
        (a2 as f64 / n - ma * ma).max(0.0),
        (b2 as f64 / n / 4.0 - mb * mb).max(0.0),
    );
    let sd = (va + vb).sqrt();
    let colorfulness = sd + 0.3 * (ma * ma + mb * mb).sqrt();
    Quality {
        brightness: mean / 255.0,
        contrast: var.sqrt() / 255.0,
        entropy,
        sharpness,
        colorfulness,
        compression_artifacts: blockiness(luma, w, h, block as usize),
    }
}

/// Σ |a[i] − b[i]|, in runs short enough for 32-bit sums (which vectorise).
#[inline(always)]
fn sad(a: &[u8], b: &[u8]) -> u64 {
    a.chunks(1 << 16)
        .zip(b.chunks(1 << 16))
        .map(|(a, b)| {
            a.iter()
                .zip(b)
                .map(|(x, y)| x.abs_diff(*y) as u32)
                .sum::<u32>() as u64
        })
        .sum()
}

#[inline(always)]
fn blockiness(luma: &[u8], w: usize, h: usize, block: usize) -> f64 {
    if block < 2 || w < 2 * block || h < 2 * block {
        return 0.0;
    }
    let (mut edge, mut ne, mut inner, mut ni) = (0u64, 0u64, 0u64, 0u64);
    for y in 0..h {
        let row = &luma[y * w..(y + 1) * w];
        // All steps, then the ones across the grid (no division per pixel).
        let all = sad(&row[1..], &row[..w - 1]);
        let grid: u64 = (block..w)
            .step_by(block)
            .map(|x| row[x].abs_diff(row[x - 1]) as u64)
            .sum();
        let n_grid = ((w - 1) / block) as u64;
        edge += grid;
        ne += n_grid;
        inner += all - grid;
        ni += (w - 1) as u64 - n_grid;
    }
    for y in 1..h {
        let d = sad(&luma[(y - 1) * w..y * w], &luma[y * w..(y + 1) * w]);
        if y % block == 0 {
            edge += d;
            ne += w as u64;
        } else {
            inner += d;
            ni += w as u64;
        }
    }
    let (e, i) = (
        edge as f64 / ne.max(1) as f64,
        inner as f64 / ni.max(1) as f64,
    );
    if i < 1e-9 {
        if e < 1e-9 { 1.0 } else { e }
    } else {
        e / i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::imagehash::luma;

    #[test]
    fn flat_noise_and_blocks() {
        let flat = RgbImage::from_pixel(64, 64, image::Rgb([255, 0, 0]));
        let q = quality(&flat, &luma(&flat), 8);
        assert_eq!(q.entropy, 0.0);
        assert!(q.entropy.is_sign_positive(), "not -0.0");
        assert_eq!(q.sharpness, 0.0);
        assert_eq!(q.contrast, 0.0);
        // pure red: rg = 255, yb = 127.5, no spread
        assert!((q.colorfulness - 0.3 * (255f64.powi(2) + 127.5f64.powi(2)).sqrt()).abs() < 1e-6);
        let mut x = 1u32;
        let noise = RgbImage::from_fn(64, 64, |_, _| {
            x = x.wrapping_mul(1103515245).wrapping_add(12345);
            image::Rgb([(x >> 16) as u8; 3])
        });
        let qn = quality(&noise, &luma(&noise), 8);
        assert!(qn.entropy > 7.5 && qn.sharpness > 1000.0 && qn.colorfulness < 1e-6);
        assert!((qn.compression_artifacts - 1.0).abs() < 0.2);
        // 8×8 blocks of constant colour: every step is on the grid.
        let blocks = RgbImage::from_fn(64, 64, |x, y| {
            image::Rgb([((x / 8 * 37 + y / 8 * 91) % 256) as u8; 3])
        });
        let qb = quality(&blocks, &luma(&blocks), 8);
        assert!(
            qb.compression_artifacts > 10.0,
            "{}",
            qb.compression_artifacts
        );
    }

    #[test]
    fn the_baseline_and_avx2_builds_agree() {
        // `quality` and `luma` run the AVX2 build on a machine that has it; the
        // baseline one (`*_any`) must give the same values, bit for bit.
        let mut next = crate::kernels::xorshift(7);
        for (w, h) in [(1, 1), (3, 3), (17, 5), (64, 48), (1031, 3), (5, 1500)] {
            let img = RgbImage::from_fn(w, h, |_, _| {
                let v = next();
                image::Rgb([v as u8, (v >> 8) as u8, (v >> 16) as u8])
            });
            let l = luma(&img);
            assert_eq!(l, crate::kernels::imagehash::luma_any(&img));
            assert_eq!(quality(&img, &l, 4), quality_any(&img, &l, 4), "{w}x{h}");
        }
    }
}
