//! Pillow's `Image.resize` for 8-bit images, bit for bit: the same filter kernels
//! (bilinear, bicubic with a = −0.5, Lanczos-3), support widened by the scale when
//! reducing (antialiasing), coefficients normalised and converted to 22-bit fixed
//! point, horizontal pass then vertical, each rounded to 8 bits. Model preprocessing
//! that was defined on Pillow (open_clip, the Open-NSFW pipeline) is reproduced
//! exactly, not approximately.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
type Coeffs = Vec<(usize, Vec<i32>)>;

/// [`coeffs`] through a small per-thread cache: images of one source tend to share a
/// few sizes, and a Lanczos table costs two `sin` per tap (for a 125 → 32 reduction
/// that is ~1,500 `sin`, more than the resize itself). A hit returns exactly what
/// computing would.
fn coeffs_cached(in_size: usize, out_size: usize, f: Filter) -> std::rc::Rc<Coeffs> {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::rc::Rc;
    const ENTRIES: usize = 2048;
    thread_local! {
        static CACHE: RefCell<HashMap<(usize, usize, Filter), Rc<Coeffs>>> =
            RefCell::new(HashMap::new());
    }
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if let Some(k) = c.get(&(in_size, out_size, f)) {
            return k.clone();
        }
        if c.len() >= ENTRIES {
            c.clear();
        }
        let k = Rc::new(coeffs(in_size, out_size, f));
        c.insert((in_size, out_size, f), k.clone());
        k
    })
}

fn coeffs(in_size: usize, out_size: usize, f: Filter) -> Coeffs {
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
fn clip8(v: i32) -> u8 {
    if v >= (1i32 << PRECISION_BITS << 8) {
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
    resize_crop(px, ch, (w, h), (ow, oh), f, (0, 0, ow, oh))
}

super::avx2_dispatch! {
    /// The rectangle `(x, y, width, height)` of [`resize`]'s result, computing only the
    /// pixels it needs (a centre crop skips the columns and rows it drops). Sums are
    /// 32-bit as in Pillow (they cannot overflow: |weights| sum to < 2 in 22-bit fixed
    /// point); the vertical pass runs a row at a time so it vectorises.
    pub fn resize_crop(
        px: &[u8],
        ch: usize,
        size: (usize, usize),
        out_size: (usize, usize),
        f: Filter,
        crop: (usize, usize, usize, usize),
    ) -> Vec<u8> => resize_crop_any
}

#[inline(always)]
fn resize_crop_any(
    px: &[u8],
    ch: usize,
    (w, h): (usize, usize),
    (ow, oh): (usize, usize),
    f: Filter,
    (x0, y0, cw, crh): (usize, usize, usize, usize),
) -> Vec<u8> {
    assert_eq!(px.len(), w * h * ch, "pixel buffer size");
    assert!(
        x0 + cw <= ow && y0 + crh <= oh,
        "crop inside the resized image"
    );
    let half = 1i32 << (PRECISION_BITS - 1);
    let cy_all = (oh != h).then(|| coeffs_cached(h, oh, f));
    let cy = cy_all.as_ref().map(|c| &c[y0..y0 + crh]);
    // The input rows the vertical pass reads (all of the crop's when there is none).
    let (r0, r1) = match &cy {
        Some(cy) => lines_read(cy),
        None => (y0, y0 + crh),
    };
    let stride = cw * ch;
    let mut hor = vec![0u8; (r1 - r0) * stride];
    if ow != w {
        let cx = coeffs_cached(w, ow, f);
        let cx = &cx[x0..x0 + cw];
        for (y, out) in (r0..r1).zip(hor.chunks_exact_mut(stride.max(1))) {
            let row = &px[y * w * ch..(y + 1) * w * ch];
            match ch {
                1 => horizontal_row::<1>(row, out, cx, half),
                3 => horizontal_row::<3>(row, out, cx, half),
                4 => horizontal_row::<4>(row, out, cx, half),
                _ => horizontal_any(row, out, cx, half, ch),
            }
        }
    } else {
        for (y, out) in (r0..r1).zip(hor.chunks_exact_mut(stride.max(1))) {
            out.copy_from_slice(&px[(y * w + x0) * ch..(y * w + x0 + cw) * ch]);
        }
    }
    let Some(cy) = cy else { return hor };
    let mut out = vec![0u8; crh * stride];
    let mut acc = vec![0i32; stride];
    for ((ymin, k), dst) in cy.iter().zip(out.chunks_exact_mut(stride.max(1))) {
        let line = |i: usize| &hor[(ymin - r0 + i) * stride..][..stride];
        weighted_lines(k, line, half, &mut acc, dst);
    }
    out
}

/// The rectangle `(x, y, width, height)` of Pillow's `resize((ow, oh), NEAREST)`:
/// Pillow maps it to an affine scaling (`ImagingScaleAffine`), whose source position
/// starts at half a step and grows by repeated addition of the step, truncated.
pub fn resize_crop_nearest(
    px: &[u8],
    ch: usize,
    (w, h): (usize, usize),
    (ow, oh): (usize, usize),
    (x0, y0, cw, crh): (usize, usize, usize, usize),
) -> Vec<u8> {
    assert_eq!(px.len(), w * h * ch, "pixel buffer size");
    assert!(
        x0 + cw <= ow && y0 + crh <= oh,
        "crop inside the resized image"
    );
    // The source index of every output position, as Pillow accumulates it.
    fn table(n_in: usize, n_out: usize) -> Vec<usize> {
        let step = n_in as f64 / n_out as f64;
        let mut o = step * 0.5;
        (0..n_out)
            .map(|_| {
                let i = (o as usize).min(n_in - 1);
                o += step;
                i
            })
            .collect()
    }
    let xs = table(w, ow);
    let ys = table(h, oh);
    let mut out = Vec::with_capacity(cw * crh * ch);
    for &y in &ys[y0..y0 + crh] {
        let row = &px[y * w * ch..(y + 1) * w * ch];
        for &x in &xs[x0..x0 + cw] {
            out.extend_from_slice(&row[x * ch..(x + 1) * ch]);
        }
    }
    out
}

/// The input lines `[first, end)` a pass with coefficients `c` reads.
fn lines_read(c: &[(usize, Vec<i32>)]) -> (usize, usize) {
    (
        c.iter().map(|(m, _)| *m).min().unwrap_or(0),
        c.iter().map(|(m, k)| m + k.len()).max().unwrap_or(0),
    )
}

/// One output line as the weighted sum of whole input lines, `line(i)` for weight
/// `k[i]`, each as long as `dst`: 32-bit sums from `half`, rounded to 8 bits. A line
/// at a time, so the sums vectorise along it.
#[inline(always)]
fn weighted_lines<'a>(
    k: &[i32],
    line: impl Fn(usize) -> &'a [u8],
    half: i32,
    acc: &mut [i32],
    dst: &mut [u8],
) {
    acc.fill(half);
    for (i, &kk) in k.iter().enumerate() {
        for (a, &s) in acc.iter_mut().zip(line(i)) {
            *a += s as i32 * kk;
        }
    }
    for (d, &a) in dst.iter_mut().zip(acc.iter()) {
        *d = clip8(a);
    }
}

/// `src` (`w`×`h`, one byte per pixel, row-major) transposed: `out[x * h + y]`.
pub fn transpose(src: &[u8], w: usize, h: usize) -> Vec<u8> {
    assert_eq!(src.len(), w * h, "pixel buffer size");
    let mut out = vec![0u8; w * h];
    // Eight rows at a time: each column's eight bytes are one 8-byte store.
    let mut y0 = 0;
    while y0 + 8 <= h {
        let rows: [&[u8]; 8] = std::array::from_fn(|i| &src[(y0 + i) * w..][..w]);
        for x in 0..w {
            let bytes: [u8; 8] = std::array::from_fn(|i| rows[i][x]);
            out[x * h + y0..][..8].copy_from_slice(&bytes);
        }
        y0 += 8;
    }
    for y in y0..h {
        for (x, &v) in src[y * w..(y + 1) * w].iter().enumerate() {
            out[x * h + y] = v;
        }
    }
    out
}

super::avx2_dispatch! {
    /// [`resize`] of a grey image given column by column ([`transpose`]d), bit for
    /// bit; the result is row-major. The horizontal pass, most of a reduction's work,
    /// then runs down whole columns, every row at once, where row by row it is a
    /// short dot product per output pixel (the perceptual hashes' three resizes of
    /// one image share the transposition).
    pub fn resize_grey_columns(
        t: &[u8],
        size: (usize, usize),
        out_size: (usize, usize),
        f: Filter,
    ) -> Vec<u8> => resize_grey_columns_any
}

#[inline(always)]
fn resize_grey_columns_any(
    t: &[u8],
    (w, h): (usize, usize),
    (ow, oh): (usize, usize),
    f: Filter,
) -> Vec<u8> {
    assert_eq!(t.len(), w * h, "pixel buffer size");
    let half = 1i32 << (PRECISION_BITS - 1);
    let cy = (oh != h).then(|| coeffs_cached(h, oh, f));
    // The input rows the vertical pass reads.
    let (r0, r1) = match &cy {
        Some(cy) => lines_read(cy),
        None => (0, h),
    };
    let rows = r1 - r0;
    // hor[x * rows + r]: the horizontal pass, output column by output column.
    let mut hor = vec![0u8; ow * rows];
    if ow != w {
        let cx = coeffs_cached(w, ow, f);
        let mut acc = vec![0i32; rows];
        for ((xmin, k), dst) in cx.iter().zip(hor.chunks_exact_mut(rows.max(1))) {
            let column = |i: usize| &t[(xmin + i) * h + r0..][..rows];
            weighted_lines(k, column, half, &mut acc, dst);
        }
    } else {
        for (x, dst) in hor.chunks_exact_mut(rows.max(1)).enumerate() {
            dst.copy_from_slice(&t[x * h + r0..][..rows]);
        }
    }
    let mut out = vec![0u8; ow * oh];
    match cy {
        Some(cy) => {
            for ((ymin, k), dst) in cy.iter().zip(out.chunks_exact_mut(ow)) {
                for (x, d) in dst.iter_mut().enumerate() {
                    let col = &hor[x * rows + ymin - r0..][..k.len()];
                    let dot: i32 = col.iter().zip(k).map(|(&p, &w)| p as i32 * w).sum();
                    *d = clip8(half + dot);
                }
            }
        }
        None => {
            for (y, dst) in out.chunks_exact_mut(ow).enumerate() {
                for (x, d) in dst.iter_mut().enumerate() {
                    *d = hor[x * rows + y];
                }
            }
        }
    }
    out
}

/// One row's horizontal pass for `C` interleaved channels.
#[inline(always)]
fn horizontal_row<const C: usize>(row: &[u8], out: &mut [u8], cx: &[(usize, Vec<i32>)], half: i32) {
    for ((xmin, k), o) in cx.iter().zip(out.chunks_exact_mut(C)) {
        let src = &row[xmin * C..(xmin + k.len()) * C];
        let mut s = [half; C];
        for (p, &kk) in src.chunks_exact(C).zip(k) {
            for c in 0..C {
                s[c] += p[c] as i32 * kk;
            }
        }
        for c in 0..C {
            o[c] = clip8(s[c]);
        }
    }
}

#[inline(always)]
fn horizontal_any(row: &[u8], out: &mut [u8], cx: &[(usize, Vec<i32>)], half: i32, ch: usize) {
    for ((xmin, k), o) in cx.iter().zip(out.chunks_exact_mut(ch)) {
        for (c, o) in o.iter_mut().enumerate() {
            let mut s = half;
            for (i, &kk) in k.iter().enumerate() {
                s += row[(xmin + i) * ch + c] as i32 * kk;
            }
            *o = clip8(s);
        }
    }
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

    fn clip8_ref(v: i64) -> u8 {
        if v >= (1i64 << PRECISION_BITS << 8) {
            255
        } else if v <= 0 {
            0
        } else {
            (v >> PRECISION_BITS) as u8
        }
    }

    /// The straightforward version (64-bit sums, per channel), kept as the reference.
    fn resize_reference(
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
                        t[(y * ow + x) * ch + c] = clip8_ref(s);
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
                *d = clip8_ref(s);
            }
        }
        out
    }

    /// The column-major grey resize equals the row-major one (and so the reference)
    /// on reductions, enlargements and unchanged sides, in both builds.
    #[test]
    fn grey_by_columns_equals_resize() {
        let mut next = crate::kernels::xorshift(0x5851_F42D_4C95_7F2Du64);
        for case in 0..80 {
            let (w, h) = (1 + next() as usize % 140, 1 + next() as usize % 140);
            let (ow, oh) = match case % 4 {
                0 => (w, 1 + next() as usize % 40),
                1 => (1 + next() as usize % 40, h),
                _ => (1 + next() as usize % 60, 1 + next() as usize % 60),
            };
            let f = [Filter::Bilinear, Filter::Bicubic, Filter::Lanczos][case % 3];
            let px: Vec<u8> = (0..w * h).map(|_| next() as u8).collect();
            let t = transpose(&px, w, h);
            assert_eq!(t.len(), w * h);
            if w > 1 && h > 1 {
                assert_eq!((t[1], t[h]), (px[w], px[1]), "transpose {w}x{h}");
            }
            let want = resize(&px, 1, w, h, ow, oh, f);
            let what = format!("{w}x{h} -> {ow}x{oh} {f:?}");
            assert_eq!(resize_grey_columns(&t, (w, h), (ow, oh), f), want, "{what}");
            assert_eq!(
                resize_grey_columns_any(&t, (w, h), (ow, oh), f),
                want,
                "baseline {what}"
            );
        }
    }

    #[test]
    fn equals_the_reference_and_crops_are_exact() {
        let mut next = crate::kernels::xorshift(0x9E37_79B9_7F4A_7C15u64);
        for case in 0..60 {
            let ch = [1, 3, 4, 2][case % 4];
            let (w, h) = (1 + next() as usize % 90, 1 + next() as usize % 90);
            let (ow, oh) = (1 + next() as usize % 120, 1 + next() as usize % 120);
            let f = [Filter::Bilinear, Filter::Bicubic, Filter::Lanczos][case % 3];
            let px: Vec<u8> = (0..w * h * ch).map(|_| next() as u8).collect();
            let full = resize(&px, ch, w, h, ow, oh, f);
            assert_eq!(
                full,
                resize_reference(&px, ch, w, h, ow, oh, f),
                "{w}x{h} -> {ow}x{oh} c{ch} {f:?}"
            );
            // The baseline build of the code, which `resize` skips on an AVX2 machine.
            let all = (0, 0, ow, oh);
            assert_eq!(
                full,
                resize_crop_any(&px, ch, (w, h), (ow, oh), f, all),
                "baseline {w}x{h} -> {ow}x{oh} c{ch} {f:?}"
            );
            let (x0, y0) = (next() as usize % ow, next() as usize % oh);
            let (cw, crh) = (
                1 + next() as usize % (ow - x0),
                1 + next() as usize % (oh - y0),
            );
            let crop = resize_crop(&px, ch, (w, h), (ow, oh), f, (x0, y0, cw, crh));
            for y in 0..crh {
                let want = &full[((y0 + y) * ow + x0) * ch..((y0 + y) * ow + x0 + cw) * ch];
                assert_eq!(&crop[y * cw * ch..(y + 1) * cw * ch], want, "crop row {y}");
            }
        }
    }
}
