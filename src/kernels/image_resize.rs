//! Resizing at ingest as img2dataset does it, on Pillow's resampling
//! ([`super::resample`], bit for bit): the geometry of each `resize_mode`, alpha
//! matted onto white, white borders, and the encoders. Pure: pixels in, bytes out.
//!
//! | mode | the image becomes |
//! |---|---|
//! | `no` | unchanged |
//! | `keep_ratio` | shorter side = `image_size`, aspect kept |
//! | `keep_ratio_largest` | longer side = `image_size`, aspect kept |
//! | `center_crop` | shorter side = `image_size`, then the centred square |
//! | `border` | longer side = `image_size`, then padded to the square with white |
//!
//! Sizes follow albumentations' `smallest_max_size`/`longest_max_size` (which
//! img2dataset calls): scale = `image_size / side`, each side `round(side × scale)`
//! with ties to even; the crop's corner is `((w − s) // 2, (h − s) // 2)` and the
//! border's top-left padding `(s − w) // 2, (s − h) // 2`. With `only_if_bigger`, an
//! image whose judged side (shorter for `keep_ratio`/`center_crop`, longer for the
//! others) is not larger than `image_size` is left as it is.
use super::resample::{Filter, resize_crop};
use image::RgbImage;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    No,
    KeepRatio,
    KeepRatioLargest,
    CenterCrop,
    Border,
}

impl Mode {
    pub const NAMES: [&'static str; 5] = [
        "no",
        "keep_ratio",
        "keep_ratio_largest",
        "center_crop",
        "border",
    ];

    pub fn parse(s: &str) -> Option<Mode> {
        Some(match s {
            "no" => Mode::No,
            "keep_ratio" => Mode::KeepRatio,
            "keep_ratio_largest" => Mode::KeepRatioLargest,
            "center_crop" => Mode::CenterCrop,
            "border" => Mode::Border,
            _ => return None,
        })
    }
}

/// What to do to a `w`×`h` image: resize to `scaled`, keep the `crop` rectangle
/// `(x, y, w, h)` of that, then place it at `at` on a white `canvas`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub scaled: (u32, u32),
    pub crop: (u32, u32, u32, u32),
    pub canvas: (u32, u32),
    pub at: (u32, u32),
}

impl Plan {
    /// Nothing changes.
    pub fn is_identity(&self, w: u32, h: u32) -> bool {
        self.scaled == (w, h) && self.crop == (0, 0, w, h) && self.canvas == (w, h)
    }
}

/// albumentations' `py3round(dim * scale)`.
fn scaled_side(dim: u32, scale: f64) -> u32 {
    ((dim as f64 * scale).round_ties_even() as u32).max(1)
}

pub fn plan(w: u32, h: u32, mode: Mode, size: u32, only_if_bigger: bool) -> Plan {
    let same = Plan {
        scaled: (w, h),
        crop: (0, 0, w, h),
        canvas: (w, h),
        at: (0, 0),
    };
    let judged = match mode {
        Mode::No => return same,
        Mode::KeepRatio | Mode::CenterCrop => w.min(h),
        Mode::KeepRatioLargest | Mode::Border => w.max(h),
    };
    if only_if_bigger && judged <= size {
        return same;
    }
    let scale = size as f64 / judged as f64;
    let (sw, sh) = if judged == size {
        (w, h)
    } else {
        (scaled_side(w, scale), scaled_side(h, scale))
    };
    match mode {
        Mode::No => same,
        Mode::KeepRatio | Mode::KeepRatioLargest => Plan {
            scaled: (sw, sh),
            crop: (0, 0, sw, sh),
            canvas: (sw, sh),
            at: (0, 0),
        },
        Mode::CenterCrop => {
            let (cw, ch) = (size.min(sw), size.min(sh));
            Plan {
                scaled: (sw, sh),
                crop: ((sw - cw) / 2, (sh - ch) / 2, cw, ch),
                canvas: (cw, ch),
                at: (0, 0),
            }
        }
        Mode::Border => {
            let (cw, ch) = (size.max(sw), size.max(sh));
            Plan {
                scaled: (sw, sh),
                crop: (0, 0, sw, sh),
                canvas: (cw, ch),
                at: ((cw - sw) / 2, (ch - sh) / 2),
            }
        }
    }
}

/// Carries out a plan on upright RGB pixels.
pub fn apply(rgb: &RgbImage, p: &Plan, filter: Filter) -> RgbImage {
    let (w, h) = rgb.dimensions();
    if p.is_identity(w, h) {
        return rgb.clone();
    }
    let (cx, cy, cw, ch) = p.crop;
    let px = resize_crop(
        rgb.as_raw(),
        3,
        (w as usize, h as usize),
        (p.scaled.0 as usize, p.scaled.1 as usize),
        filter,
        (cx as usize, cy as usize, cw as usize, ch as usize),
    );
    if p.canvas == (cw, ch) {
        return RgbImage::from_raw(cw, ch, px).expect("crop size");
    }
    let mut out = RgbImage::from_pixel(p.canvas.0, p.canvas.1, image::Rgb([255, 255, 255]));
    let row = cw as usize * 3;
    let stride = p.canvas.0 as usize * 3;
    let buf: &mut [u8] = &mut out;
    for (y, src) in px.chunks_exact(row.max(1)).enumerate() {
        let at = (p.at.1 as usize + y) * stride + p.at.0 as usize * 3;
        buf[at..at + row].copy_from_slice(src);
    }
    out
}

/// Alpha matted onto a background as img2dataset does (`alpha/255 × c + (255 −
/// alpha)` for white, rounded to nearest: with integers no tie can occur).
pub fn matte(rgba: &image::RgbaImage, bg: [u8; 3]) -> RgbImage {
    let (w, h) = rgba.dimensions();
    let mut out = Vec::with_capacity(w as usize * h as usize * 3);
    for p in rgba.as_raw().chunks_exact(4) {
        let a = p[3] as u32;
        for c in 0..3 {
            let n = p[c] as u32 * a + bg[c] as u32 * (255 - a);
            out.push(((n + 127) / 255) as u8);
        }
    }
    RgbImage::from_raw(w, h, out).expect("size")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Baseline JPEG at `quality` with Pillow's default 4:2:0 chroma subsampling.
    Jpeg {
        quality: u8,
    },
    Png,
    /// Lossless WebP (the only WebP this build writes).
    Webp,
}

impl Encoding {
    /// The image format's name as `image_metadata` reports it.
    pub fn format(&self) -> &'static str {
        match self {
            Encoding::Jpeg { .. } => "JPEG",
            Encoding::Png => "PNG",
            Encoding::Webp => "WEBP",
        }
    }
    pub fn content_type(&self) -> &'static str {
        match self {
            Encoding::Jpeg { .. } => "image/jpeg",
            Encoding::Png => "image/png",
            Encoding::Webp => "image/webp",
        }
    }
}

pub fn encode(rgb: &RgbImage, e: Encoding) -> Result<Vec<u8>, String> {
    let (w, h) = rgb.dimensions();
    let mut out = Vec::new();
    match e {
        Encoding::Jpeg { quality } => {
            if w > u16::MAX as u32 || h > u16::MAX as u32 {
                return Err(format!("{w}x{h} is larger than a JPEG can be"));
            }
            let mut enc = jpeg_encoder::Encoder::new(&mut out, quality);
            enc.set_sampling_factor(jpeg_encoder::SamplingFactor::R_4_2_0);
            // libjpeg averages each 2×2 block of chroma; the crate's default takes
            // its top-left sample (3 dB further from the source on photos).
            enc.set_chroma_subsampling_method(jpeg_encoder::ChromaSubsamplingMethod::Average);
            enc.encode(
                rgb.as_raw(),
                w as u16,
                h as u16,
                jpeg_encoder::ColorType::Rgb,
            )
            .map_err(|e| e.to_string())?;
        }
        Encoding::Png => {
            use image::ImageEncoder;
            image::codecs::png::PngEncoder::new(&mut out)
                .write_image(rgb.as_raw(), w, h, image::ExtendedColorType::Rgb8)
                .map_err(|e| e.to_string())?;
        }
        Encoding::Webp => {
            use image::ImageEncoder;
            image::codecs::webp::WebPEncoder::new_lossless(&mut out)
                .write_image(rgb.as_raw(), w, h, image::ExtendedColorType::Rgb8)
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_of_each_mode() {
        let p = plan(400, 300, Mode::KeepRatio, 256, false);
        assert_eq!(p.scaled, (341, 256)); // 400 × 256/300 = 341.33
        assert_eq!(p.canvas, (341, 256));
        let p = plan(400, 300, Mode::KeepRatioLargest, 256, false);
        assert_eq!(p.scaled, (256, 192));
        let p = plan(400, 300, Mode::CenterCrop, 256, false);
        assert_eq!(
            (p.scaled, p.crop, p.canvas),
            ((341, 256), (42, 0, 256, 256), (256, 256))
        );
        let p = plan(400, 300, Mode::Border, 256, false);
        assert_eq!(
            (p.scaled, p.canvas, p.at),
            ((256, 192), (256, 256), (0, 32))
        );
        // Upscaling unless only_if_bigger.
        assert_eq!(
            plan(100, 50, Mode::KeepRatio, 256, false).scaled,
            (512, 256)
        );
        assert!(plan(100, 50, Mode::KeepRatio, 256, true).is_identity(100, 50));
        assert!(plan(300, 200, Mode::Border, 300, true).is_identity(300, 200));
        assert!(plan(300, 200, Mode::No, 16, false).is_identity(300, 200));
        // Ties go to even as Python's round: 3 × 0.5 = 1.5 → 2, 5 × 0.5 = 2.5 → 2.
        assert_eq!(plan(6, 3, Mode::KeepRatioLargest, 3, false).scaled, (3, 2));
        assert_eq!(plan(10, 5, Mode::KeepRatioLargest, 5, false).scaled, (5, 2));
        // A sliver never reaches zero.
        assert_eq!(
            plan(4000, 2, Mode::KeepRatioLargest, 100, false).scaled,
            (100, 1)
        );
    }

    #[test]
    fn border_pads_white_and_crop_keeps_the_centre() {
        let mut img = RgbImage::from_pixel(40, 20, image::Rgb([10, 20, 30]));
        img.put_pixel(20, 10, image::Rgb([200, 0, 0]));
        let p = plan(40, 20, Mode::Border, 40, false);
        let out = apply(&img, &p, Filter::Lanczos);
        assert_eq!(out.dimensions(), (40, 40));
        assert_eq!(out.get_pixel(0, 0).0, [255, 255, 255]);
        assert_eq!(out.get_pixel(0, 10).0, [10, 20, 30]);
        assert_eq!(out.get_pixel(20, 20).0, [200, 0, 0]);
        assert_eq!(out.get_pixel(0, 39).0, [255, 255, 255]);
        let p = plan(40, 20, Mode::CenterCrop, 20, false);
        let out = apply(&img, &p, Filter::Lanczos);
        assert_eq!(out.dimensions(), (20, 20));
        assert_eq!(out.get_pixel(10, 10).0, [200, 0, 0]);
    }

    #[test]
    fn matte_onto_white() {
        let px = image::RgbaImage::from_raw(3, 1, vec![0, 0, 0, 0, 0, 0, 0, 255, 100, 50, 0, 128])
            .unwrap();
        let m = matte(&px, [255, 255, 255]);
        // transparent → white; opaque → itself; half → between (100·128 + 255·127)/255.
        assert_eq!(m.as_raw()[..6], [255, 255, 255, 0, 0, 0]);
        assert_eq!(m.as_raw()[6], ((100 * 128 + 255 * 127 + 127) / 255) as u8);
    }

    #[test]
    fn encodings_decode_back() {
        let img = RgbImage::from_fn(33, 17, |x, y| image::Rgb([x as u8 * 7, y as u8 * 13, 90]));
        for e in [Encoding::Png, Encoding::Webp] {
            let b = encode(&img, e).unwrap();
            let back = image::load_from_memory(&b).unwrap().to_rgb8();
            assert_eq!(back, img, "{e:?} is lossless");
        }
        let b = encode(&img, Encoding::Jpeg { quality: 95 }).unwrap();
        assert_eq!(&b[..2], &[0xFF, 0xD8]);
        let back = image::load_from_memory(&b).unwrap().to_rgb8();
        assert_eq!(back.dimensions(), (33, 17));
    }
}
