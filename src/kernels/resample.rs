//! Pillow's `Image.resize` for 8-bit images, bit for bit: the same filter kernels
//! (bilinear, bicubic with a = −0.5, Lanczos-3), support widened by the scale when
//! reducing (antialiasing), coefficients normalised and converted to 22-bit fixed
//! point, horizontal pass then vertical, each rounded to 8 bits. Model preprocessing
//! that was defined on Pillow (open_clip, the Open-NSFW pipeline) is reproduced
//! exactly, not approximately.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    Bilinear,
    Bicubic,
    Lanczos,
}

impl Filter {
    fn support(self) -> f64 {
        match self {
            Filter::Bilinear => 1.0,
            Filter::Bicubic => 2.0,
            Filter::Lanczos => 3.0,
        }
    }

    fn weight(self, x: f64) -> f64 {
        match self {
            Filter::Bilinear => {
                let x = x.abs();
                if x < 1.0 { 1.0 - x } else { 0.0 }
            }
            Filter::Bicubic => {
                const A: f64 = -0.5;
                let x = x.abs();
                if x < 1.0 {
                    ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
                } else if x < 2.0 {
                    (((x - 5.0) * x + 8.0) * x - 4.0) * A
                } else {
                    0.0
                }
            }
            Filter::Lanczos => {
                fn sinc(x: f64) -> f64 {
                    if x == 0.0 {
                        1.0
                    } else {
                        let p = x * std::f64::consts::PI;
                        p.sin() / p
                    }
                }
                if (-3.0..3.0).contains(&x) {
                    sinc(x) * sinc(x / 3.0)
                } else {
                    0.0
                }
            }
        }
    }
}

const PRECISION_BITS: u32 = 32 - 8 - 2;

/// Per output pixel: the first input pixel and the fixed-point weights.
fn coeffs(in_size: usize, out_size: usize, f: Filter) -> Vec<(usize, Vec<i32>)> {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = f.support() * filterscale;
    let ss = 1.0 / filterscale;
    (0..out_size)
        .map(|xx| {
            let center = (xx as f64 + 0.5) * scale;
            let xmin = ((center - support + 0.5) as i64).max(0) as usize;
            let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
            let mut w: Vec<f64> = (xmin..xmax)
                .map(|x| f.weight((x as f64 - center + 0.5) * ss))
                .collect();
            let sum: f64 = w.iter().sum();
            if sum != 0.0 {
                w.iter_mut().for_each(|v| *v /= sum);
            }
            let k = w
                .iter()
                .map(|&v| {
                    let s = v * (1u32 << PRECISION_BITS) as f64;
                    (if v < 0.0 { s - 0.5 } else { s + 0.5 }) as i32
                })
                .collect();
            (xmin, k)
        })
        .collect()
}

#[inline]
fn clip8(v: i64) -> u8 {
    if v >= (1i64 << PRECISION_BITS << 8) {
        255
    } else if v <= 0 {
        0
    } else {
        (v >> PRECISION_BITS) as u8
    }
}

/// Resizes interleaved 8-bit pixels with `ch` channels from `w`×`h` to `ow`×`oh`, as
/// Pillow's `resize((ow, oh), filter)` does.
pub fn resize(
    px: &[u8],
    ch: usize,
    w: usize,
    h: usize,
    ow: usize,
    oh: usize,
    f: Filter,
) -> Vec<u8> {
    assert_eq!(px.len(), w * h * ch, "pixel buffer size");
    let half = 1i64 << (PRECISION_BITS - 1);
    let horizontal: Vec<u8> = if ow != w {
        let cx = coeffs(w, ow, f);
        let mut t = vec![0u8; ow * h * ch];
        for y in 0..h {
            let row = &px[y * w * ch..(y + 1) * w * ch];
            for (x, (xmin, k)) in cx.iter().enumerate() {
                for c in 0..ch {
                    let mut s = half;
                    for (i, kk) in k.iter().enumerate() {
                        s += row[(xmin + i) * ch + c] as i64 * *kk as i64;
                    }
                    t[(y * ow + x) * ch + c] = clip8(s);
                }
            }
        }
        t
    } else {
        px.to_vec()
    };
    if oh == h {
        return horizontal;
    }
    let cy = coeffs(h, oh, f);
    let mut out = vec![0u8; ow * oh * ch];
    let stride = ow * ch;
    for (y, (ymin, k)) in cy.iter().enumerate() {
        let dst = &mut out[y * stride..(y + 1) * stride];
        for (x, d) in dst.iter_mut().enumerate() {
            let mut s = half;
            for (i, kk) in k.iter().enumerate() {
                s += horizontal[(ymin + i) * stride + x] as i64 * *kk as i64;
            }
            *d = clip8(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_and_constant_images() {
        let px: Vec<u8> = (0..5 * 4 * 3).map(|i| (i * 7 % 256) as u8).collect();
        for f in [Filter::Bilinear, Filter::Bicubic, Filter::Lanczos] {
            assert_eq!(resize(&px, 3, 5, 4, 5, 4, f), px);
            let flat = vec![77u8; 40 * 30 * 3];
            assert!(resize(&flat, 3, 40, 30, 17, 11, f).iter().all(|&v| v == 77));
            assert!(resize(&flat, 3, 40, 30, 91, 64, f).iter().all(|&v| v == 77));
        }
    }

    #[test]
    fn kernels_are_pillows() {
        // Values of Pillow's filters at a few points.
        assert_eq!(Filter::Bicubic.weight(0.0), 1.0);
        assert!((Filter::Bicubic.weight(1.5) - (-0.0625)).abs() < 1e-12);
        assert!((Filter::Bilinear.weight(0.25) - 0.75).abs() < 1e-12);
        assert!((Filter::Lanczos.weight(0.5) - 0.6079271018540267).abs() < 1e-12);
        // A 2:1 bilinear reduction averages with weights widened by the scale.
        let px = [0u8, 255, 0, 255];
        assert_eq!(resize(&px, 1, 4, 1, 2, 1, Filter::Bilinear), [109, 146]);
    }
}
