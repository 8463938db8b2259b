//! Model input tensors from decoded images, as the models' own Python pipelines make
//! them (on Pillow, so resizing goes through [`super::resample`], bit-exact):
//!
//! * CLIP (open_clip / OpenAI): shorter side resized to `size` with bicubic (the
//!   longer side `int(size · long / short)`, as torchvision computes it), centre crop
//!   `size`×`size` (offsets rounded like torchvision's `CenterCrop`), scaled to [0, 1],
//!   normalised by mean and std; CHW.
//! * Open-NSFW: resized to 256×256 bilinear, JPEG round trip (see `nsfw_score`),
//!   centre crop 224, BGR, VGG mean subtracted; HWC.
//!
//! Plus the vector maths around embeddings.
use super::resample::{Filter, resize_crop};

/// OpenAI CLIP's normalisation (open_clip's `OPENAI_DATASET_MEAN` / `_STD`), written
/// as published; they round to the same f32 values numpy gives them.
#[allow(clippy::excessive_precision)]
pub const CLIP_MEAN: [f32; 3] = [0.481_454_66, 0.457_827_5, 0.408_210_73];
#[allow(clippy::excessive_precision)]
pub const CLIP_STD: [f32; 3] = [0.268_629_54, 0.261_302_58, 0.275_777_1];

/// CLIP preprocessing of an RGB image (`w`×`h`, interleaved) into `out` (CHW,
/// `3·size·size` values appended).
pub fn clip_tensor(
    rgb: &[u8],
    w: usize,
    h: usize,
    size: usize,
    mean: &[f32; 3],
    std: &[f32; 3],
    out: &mut Vec<f32>,
) {
    let (ow, oh) = if w <= h {
        (size, (size as f64 * h as f64 / w as f64) as usize)
    } else {
        ((size as f64 * w as f64 / h as f64) as usize, size)
    };
    let (cw, ch) = (size.min(ow), size.min(oh));
    // Python's round (half to even), as torchvision's CenterCrop uses.
    let left = ((ow - cw) as f64 / 2.0).round_ties_even() as usize;
    let top = ((oh - ch) as f64 / 2.0).round_ties_even() as usize;
    // Only the crop is resampled: the same pixels as resizing, then cropping.
    let crop = resize_crop(
        rgb,
        3,
        (w, h),
        (ow, oh),
        Filter::Bicubic,
        (left, top, cw, ch),
    );
    let start = out.len();
    out.resize(start + 3 * size * size, 0.0);
    let plane = size * size;
    for c in 0..3 {
        let (m, s) = (mean[c], std[c]);
        for y in 0..ch {
            let row = &crop[y * cw * 3..(y + 1) * cw * 3];
            let dst = &mut out[start + c * plane + y * size..];
            for x in 0..cw {
                dst[x] = (row[x * 3 + c] as f32 / 255.0 - m) / s;
            }
        }
    }
}

/// Scales `v` to unit length in place (a zero vector stays zero).
pub fn l2_normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

/// Cosine of two vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

/// The Open-NSFW crop of a 256×256 RGB image (already through the JPEG round trip):
/// the centre 224×224, BGR, minus the VGG means, HWC.
pub fn nsfw_tensor(rgb256: &[u8], out: &mut Vec<f32>) {
    const MEAN_BGR: [f32; 3] = [104.0, 117.0, 123.0];
    let off = (256 - 224) / 2;
    for y in 0..224 {
        for x in 0..224 {
            let p = &rgb256[((off + y) * 256 + off + x) * 3..];
            for (c, m) in MEAN_BGR.iter().enumerate() {
                out.push(p[2 - c] as f32 - m);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_tensor_shapes_crops_and_normalises() {
        // 8×4 image, left half black, right half white → resized to 4 high, 8 wide;
        // the centre 4×4 crop straddles the edge.
        let (w, h) = (8, 4);
        let rgb: Vec<u8> = (0..w * h)
            .flat_map(|i| if i % w < 4 { [0u8; 3] } else { [255u8; 3] })
            .collect();
        let mut out = Vec::new();
        clip_tensor(&rgb, w, h, 4, &[0.0; 3], &[1.0; 3], &mut out);
        assert_eq!(out.len(), 3 * 16);
        // no resize (shorter side already 4): crop columns 2..6
        assert_eq!(&out[0..4], &[0.0, 0.0, 1.0, 1.0]);
        let mut out = Vec::new();
        clip_tensor(&[255, 0, 0], 1, 1, 2, &CLIP_MEAN, &CLIP_STD, &mut out);
        assert!((out[0] - (1.0 - CLIP_MEAN[0]) / CLIP_STD[0]).abs() < 1e-6);
        assert!((out[4] - (0.0 - CLIP_MEAN[1]) / CLIP_STD[1]).abs() < 1e-6);
    }

    #[test]
    fn vectors() {
        let mut v = [3.0, 4.0];
        l2_normalize(&mut v);
        assert_eq!(v, [0.6, 0.8]);
        assert!((cosine(&[1.0, 0.0], &[1.0, 1.0]) - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
    }
}
