//! Model input tensors from decoded images, as the models' own Python pipelines make
//! them (on Pillow, so resizing goes through [`super::resample`], bit-exact):
//!
//! * [`Preprocess`]: resize (the shorter side, as torchvision's `Resize(int)`, or both
//!   sides to a square, as transformers' image processors), centre crop (offsets
//!   rounded like torchvision's `CenterCrop`), scale to [0, 1], normalise by mean and
//!   std; CHW. Its presets are open_clip's (CLIP), transformers' `SiglipImageProcessor`
//!   (SigLIP, SigLIP2) and torchvision's/timm's ImageNet evaluation transform.
//! * Open-NSFW: resized to 256×256 bilinear, JPEG round trip (see `nsfw_score`),
//!   centre crop 224, BGR, VGG mean subtracted; HWC.
//!
//! Plus the vector maths around embeddings and logits. Never allocates more than the
//! crop it returns: a shorter-side resize of an extreme panorama is refused, not run.
use super::resample::{Filter, resize_crop, resize_crop_nearest};

/// OpenAI CLIP's normalisation (open_clip's `OPENAI_DATASET_MEAN` / `_STD`), written
/// as published; they round to the same f32 values numpy gives them.
#[allow(clippy::excessive_precision)]
pub const CLIP_MEAN: [f32; 3] = [0.481_454_66, 0.457_827_5, 0.408_210_73];
#[allow(clippy::excessive_precision)]
pub const CLIP_STD: [f32; 3] = [0.268_629_54, 0.261_302_58, 0.275_777_1];
/// torchvision's / timm's ImageNet normalisation.
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];
/// SigLIP's (transformers' `IMAGENET_STANDARD_MEAN` / `_STD`).
pub const HALF: [f32; 3] = [0.5, 0.5, 0.5];

/// How an image is resized before the crop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resize {
    /// The shorter side to the target, the longer `int(target · long / short)`
    /// (torchvision's `Resize(int)`).
    ShorterSide,
    /// Both sides to the target (transformers' `size: {height, width}`).
    Square,
}

/// The resampling filter, with Pillow's semantics (antialiased when reducing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interpolation {
    Nearest,
    Bilinear,
    Bicubic,
}

impl Interpolation {
    pub fn parse(s: &str) -> Option<Interpolation> {
        match s {
            "nearest" => Some(Interpolation::Nearest),
            "bilinear" => Some(Interpolation::Bilinear),
            "bicubic" => Some(Interpolation::Bicubic),
            _ => None,
        }
    }
}

/// One image model's preprocessing: resize to `resize_to`, centre crop `size`×`size`,
/// `(v / 255 − mean) / std` per channel, CHW.
#[derive(Debug, Clone, PartialEq)]
pub struct Preprocess {
    /// The model's input side (the crop).
    pub size: usize,
    pub resize: Resize,
    /// The side the resize aims at (≥ `size`; equal: no margin is cropped).
    pub resize_to: usize,
    pub interpolation: Interpolation,
    pub mean: [f32; 3],
    pub std: [f32; 3],
}

/// Why an image cannot be preprocessed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unprocessable(pub String);

/// The longest side a resize may produce, in units of the target side: a shorter-side
/// resize of a 1×10,000 strip would make a 224×2,240,000 image (Pillow would, slowly).
pub const MAX_ELONGATION: usize = 64;

impl Preprocess {
    /// open_clip's: bicubic, shorter side to `size`, centre crop, CLIP mean/std.
    pub fn clip(size: usize) -> Preprocess {
        Preprocess {
            size,
            resize: Resize::ShorterSide,
            resize_to: size,
            interpolation: Interpolation::Bicubic,
            mean: CLIP_MEAN,
            std: CLIP_STD,
        }
    }

    /// transformers' `SiglipImageProcessor`: bicubic resize to `size`×`size`, no crop,
    /// mean = std = 0.5.
    pub fn siglip(size: usize) -> Preprocess {
        Preprocess {
            size,
            resize: Resize::Square,
            resize_to: size,
            interpolation: Interpolation::Bicubic,
            mean: HALF,
            std: HALF,
        }
    }

    /// torchvision's ImageNet evaluation (`Resize(int(size / 0.875))`, bilinear,
    /// `CenterCrop(size)`, ImageNet mean/std); timm's with `crop_pct` 0.875.
    pub fn imagenet(size: usize) -> Preprocess {
        Preprocess {
            size,
            resize: Resize::ShorterSide,
            resize_to: resize_side(size, 0.875),
            interpolation: Interpolation::Bilinear,
            mean: IMAGENET_MEAN,
            std: IMAGENET_STD,
        }
    }

    /// The size a `w`×`h` image is resized to, or why it cannot be.
    pub fn resized(&self, w: usize, h: usize) -> Result<(usize, usize), Unprocessable> {
        let t = self.resize_to;
        let dims = match self.resize {
            Resize::Square => (t, t),
            Resize::ShorterSide => {
                let (short, long) = (w.min(h), w.max(h));
                if short == 0 || long / short >= MAX_ELONGATION {
                    return Err(Unprocessable(format!(
                        "{w}×{h}: a shorter-side resize to {t} would be {}× longer than wide \
                         (at most {MAX_ELONGATION})",
                        long / short.max(1)
                    )));
                }
                let l = (t as f64 * long as f64 / short as f64) as usize;
                if w <= h { (t, l) } else { (l, t) }
            }
        };
        Ok(dims)
    }

    /// The tensor of an RGB image (`w`×`h`, interleaved) appended to `out` (CHW,
    /// `3·size·size` values; a crop larger than the resized image leaves zeros).
    pub fn tensor(
        &self,
        rgb: &[u8],
        w: usize,
        h: usize,
        out: &mut Vec<f32>,
    ) -> Result<(), Unprocessable> {
        let size = self.size;
        let (ow, oh) = self.resized(w, h)?;
        let (cw, ch) = (size.min(ow), size.min(oh));
        // Python's round (half to even), as torchvision's CenterCrop uses.
        let left = ((ow - cw) as f64 / 2.0).round_ties_even() as usize;
        let top = ((oh - ch) as f64 / 2.0).round_ties_even() as usize;
        // Only the crop is resampled: the same pixels as resizing, then cropping.
        let rect = (left, top, cw, ch);
        let crop = match self.interpolation {
            Interpolation::Nearest => resize_crop_nearest(rgb, 3, (w, h), (ow, oh), rect),
            Interpolation::Bilinear => {
                resize_crop(rgb, 3, (w, h), (ow, oh), Filter::Bilinear, rect)
            }
            Interpolation::Bicubic => resize_crop(rgb, 3, (w, h), (ow, oh), Filter::Bicubic, rect),
        };
        let start = out.len();
        out.resize(start + 3 * size * size, 0.0);
        let plane = size * size;
        for c in 0..3 {
            let (m, s) = (self.mean[c], self.std[c]);
            for y in 0..ch {
                let row = &crop[y * cw * 3..(y + 1) * cw * 3];
                let dst = &mut out[start + c * plane + y * size..];
                for x in 0..cw {
                    dst[x] = (row[x * 3 + c] as f32 / 255.0 - m) / s;
                }
            }
        }
        Ok(())
    }
}

/// timm's resize side for a crop fraction: `floor(size / crop_pct)`.
pub fn resize_side(size: usize, crop_pct: f64) -> usize {
    (size as f64 / crop_pct).floor() as usize
}

/// CLIP preprocessing of an RGB image (`w`×`h`, interleaved) into `out` (CHW,
/// `3·size·size` values appended): [`Preprocess::clip`] with this mean and std. An
/// image it cannot resize (see [`MAX_ELONGATION`]) appends zeros.
pub fn clip_tensor(
    rgb: &[u8],
    w: usize,
    h: usize,
    size: usize,
    mean: &[f32; 3],
    std: &[f32; 3],
    out: &mut Vec<f32>,
) {
    let p = Preprocess {
        mean: *mean,
        std: *std,
        ..Preprocess::clip(size)
    };
    if p.tensor(rgb, w, h, out).is_err() {
        out.resize(out.len() + 3 * size * size, 0.0);
    }
}

/// Softmax of each row of `n` values, in place (max subtracted first, as numpy and
/// scipy's references do).
pub fn softmax(row: &mut [f32]) {
    let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for v in row.iter_mut() {
        *v = (*v - m).exp();
        sum += *v;
    }
    if sum > 0.0 {
        row.iter_mut().for_each(|v| *v /= sum);
    }
}

/// The logistic function.
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
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
    fn presets_resize_as_their_libraries() {
        let p = Preprocess::imagenet(224);
        assert_eq!(p.resize_to, 256);
        assert_eq!(p.resized(640, 480), Ok((341, 256)));
        assert_eq!(Preprocess::siglip(224).resized(640, 480), Ok((224, 224)));
        assert_eq!(Preprocess::clip(224).resized(480, 640), Ok((224, 298)));
        // An extreme strip is refused with the reason, not resized to 224×14,336.
        let e = Preprocess::clip(224).resized(1, 64).unwrap_err();
        assert!(e.0.contains("1×64"), "{e:?}");
        let mut out = Vec::new();
        assert!(
            Preprocess::clip(4)
                .tensor(&[0; 3 * 64], 1, 64, &mut out)
                .is_err()
        );
        assert!(out.is_empty());
        // Nearest on a 2×1 image up to 4×4: each source pixel twice across.
        let p = Preprocess {
            interpolation: Interpolation::Nearest,
            mean: [0.0; 3],
            std: [1.0; 3],
            ..Preprocess::siglip(4)
        };
        let mut out = Vec::new();
        p.tensor(&[0, 0, 0, 255, 255, 255], 2, 1, &mut out).unwrap();
        assert_eq!(&out[0..4], &[0.0, 0.0, 1.0, 1.0]);
    }

    #[test]
    fn logits() {
        let mut r = [1.0f32, 2.0, 3.0];
        softmax(&mut r);
        assert!((r.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!((r[2] - 0.66524096).abs() < 1e-6);
        assert_eq!(sigmoid(0.0), 0.5);
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
