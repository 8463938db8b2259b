//! Image decoding with limits: the format from the bytes (not the name), the header
//! read before any pixel so decompression bombs are refused before allocation, EXIF
//! orientation applied, any colour mode to 8-bit RGB. When the caller needs only a
//! small image (hashes, quality at low resolution) a JPEG is decoded at 1/2, 1/4 or
//! 1/8 scale inside the DCT (jpeg-decoder), which skips most of the IDCT and colour
//! conversion. A decoder that panics on hostile bytes is caught and reported.
use image::{ImageDecoder, ImageFormat, ImageReader, RgbImage};
use std::io::Cursor;

/// What an image may cost before it is refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Width × height (Pillow warns past 89.5M and refuses past twice that).
    pub max_pixels: u64,
    /// Encoded size.
    pub max_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_pixels: 89_478_485,
            max_bytes: 64 << 20,
        }
    }
}

/// Why an image was not decoded: `reason` is the reject reason.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeError {
    pub reason: &'static str,
    pub detail: String,
}

impl DecodeError {
    fn new(reason: &'static str, detail: impl Into<String>) -> Self {
        DecodeError {
            reason,
            detail: detail.into(),
        }
    }
}

/// What the header says.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub format: &'static str,
    pub width: u32,
    pub height: u32,
    /// Pillow-style mode names: L, LA, RGB, RGBA, I;16, CMYK, ...
    pub mode: &'static str,
    /// The EXIF orientation turns the image a quarter (orientations 5-8): upright,
    /// its width and height swap.
    pub quarter_turn: bool,
}

impl Header {
    /// Width and height as the image is shown (after its EXIF orientation), as the
    /// pixels every decoding operator works on are.
    pub fn upright_size(&self) -> (u32, u32) {
        if self.quarter_turn {
            (self.height, self.width)
        } else {
            (self.width, self.height)
        }
    }
}

/// Whether an EXIF orientation swaps width and height.
fn turns_a_quarter(o: image::metadata::Orientation) -> bool {
    use image::metadata::Orientation::*;
    matches!(o, Rotate90 | Rotate270 | Rotate90FlipH | Rotate270FlipH)
}

/// The number of components a JPEG's frame header declares (4: CMYK or YCCK, which
/// decoders turn into RGB and report as such).
fn jpeg_components(bytes: &[u8]) -> Option<u8> {
    let mut i = 2;
    while i + 4 <= bytes.len() {
        if bytes[i] != 0xFF {
            return None;
        }
        let m = bytes[i + 1];
        if m == 0xFF {
            i += 1;
            continue;
        }
        // Markers without a length: TEM, RST0-7 (and a stray SOI).
        if m == 0x01 || (0xD0..=0xD8).contains(&m) {
            i += 2;
            continue;
        }
        let len = u16::from_be_bytes([bytes[i + 2], bytes[i + 3]]) as usize;
        // SOF0-SOF15, less DHT (C4), JPG (C8) and DAC (CC).
        if (0xC0..=0xCF).contains(&m) && !matches!(m, 0xC4 | 0xC8 | 0xCC) {
            return bytes.get(i + 9).copied();
        }
        if m == 0xDA || m == 0xD9 {
            return None;
        }
        i += 2 + len;
    }
    None
}

/// A decoded image: its header (full size, before orientation) and its pixels,
/// possibly reduced, oriented upright.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub header: Header,
    pub rgb: RgbImage,
    /// 1, 2, 4 or 8: the JPEG DCT scale the pixels were decoded at.
    pub scale: u32,
    /// Pillow's `convert("L")` of `rgb`, made on first use: quality and hashes
    /// both read it, from the same cached decode.
    luma: std::sync::OnceLock<Vec<u8>>,
}

impl Decoded {
    pub fn new(header: Header, rgb: RgbImage, scale: u32) -> Decoded {
        Decoded {
            header,
            rgb,
            scale,
            luma: Default::default(),
        }
    }

    /// The luma plane of [`Decoded::rgb`] ([`crate::kernels::imagehash::luma`]).
    pub fn luma(&self) -> &[u8] {
        self.luma
            .get_or_init(|| crate::kernels::imagehash::luma(&self.rgb))
    }
}

fn format_name(f: ImageFormat) -> &'static str {
    match f {
        ImageFormat::Jpeg => "JPEG",
        ImageFormat::Png => "PNG",
        ImageFormat::Gif => "GIF",
        ImageFormat::WebP => "WEBP",
        ImageFormat::Bmp => "BMP",
        ImageFormat::Tiff => "TIFF",
        ImageFormat::Ico => "ICO",
        ImageFormat::Avif => "AVIF",
        ImageFormat::Pnm => "PPM",
        _ => "OTHER",
    }
}

fn mode_name(c: image::ExtendedColorType) -> &'static str {
    use image::ExtendedColorType::*;
    match c {
        A8 => "A",
        L1 => "1",
        L2 | L4 | L8 => "L",
        La1 | La2 | La4 | La8 => "LA",
        Rgb1 | Rgb2 | Rgb4 | Rgb8 => "RGB",
        Rgba1 | Rgba2 | Rgba4 | Rgba8 => "RGBA",
        L16 => "I;16",
        La16 => "LA;16",
        Rgb16 => "RGB;16",
        Rgba16 => "RGBA;16",
        Bgr8 => "BGR",
        Bgra8 => "BGRA",
        Rgb32F => "RGB;32F",
        Rgba32F => "RGBA;32F",
        Cmyk8 => "CMYK",
        Cmyk16 => "CMYK;16",
        _ => "OTHER",
    }
}

/// Formats this build decodes.
fn supported(f: ImageFormat) -> bool {
    matches!(
        f,
        ImageFormat::Jpeg
            | ImageFormat::Png
            | ImageFormat::Gif
            | ImageFormat::WebP
            | ImageFormat::Bmp
            | ImageFormat::Tiff
    )
}

fn guarded<T>(f: impl FnOnce() -> Result<T, DecodeError>) -> Result<T, DecodeError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(DecodeError::new(
            "decode_error",
            format!("decoder panicked: {msg}"),
        ))
    })
}

type Reader<'a> = ImageReader<Cursor<&'a [u8]>>;

fn reader(bytes: &[u8]) -> Result<(Reader<'_>, ImageFormat), DecodeError> {
    let r = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| DecodeError::new("decode_error", e.to_string()))?;
    match r.format() {
        Some(f) if supported(f) => Ok((r, f)),
        Some(f) => Err(DecodeError::new(
            "unsupported_format",
            format!("{} images are not decoded", format_name(f)),
        )),
        None => Err(DecodeError::new(
            "unknown_format",
            "not an image format this build reads (JPEG, PNG, GIF, WebP, BMP, TIFF)",
        )),
    }
}

fn check_size(bytes: &[u8], limits: &Limits) -> Result<(), DecodeError> {
    if bytes.len() as u64 > limits.max_bytes {
        return Err(DecodeError::new(
            "too_large",
            format!("{} bytes > max_bytes {}", bytes.len(), limits.max_bytes),
        ));
    }
    if bytes.is_empty() {
        return Err(DecodeError::new("decode_error", "empty"));
    }
    Ok(())
}

fn check_pixels(w: u32, h: u32, limits: &Limits) -> Result<(), DecodeError> {
    if w == 0 || h == 0 {
        return Err(DecodeError::new("decode_error", format!("{w}×{h} image")));
    }
    let px = w as u64 * h as u64;
    if px > limits.max_pixels {
        return Err(DecodeError::new(
            "decompression_bomb",
            format!("{w}×{h} = {px} pixels > max_pixels {}", limits.max_pixels),
        ));
    }
    Ok(())
}

/// The header alone: format, size and mode, without decoding pixels.
pub fn probe(bytes: &[u8], limits: &Limits) -> Result<Header, DecodeError> {
    check_size(bytes, limits)?;
    // Most of the web: a JPEG whose headers the reduced-scale decoder reads (a
    // fraction of what building zune-jpeg's decoder costs); the rest goes to `image`.
    guarded(|| {
        if let Some(j) = crate::kernels::jpeg::Jpeg::parse(bytes) {
            check_pixels(j.width, j.height, limits)?;
            return Ok(Header {
                format: "JPEG",
                width: j.width,
                height: j.height,
                mode: jpeg_mode(&j),
                quarter_turn: j.exif.map(orientation_of).is_some_and(turns_a_quarter),
            });
        }
        probe_general(bytes, limits)
    })
}

/// [`probe`] by `image`'s decoders, any format.
fn probe_general(bytes: &[u8], limits: &Limits) -> Result<Header, DecodeError> {
    let (r, f) = reader(bytes)?;
    let mut d = r
        .into_decoder()
        .map_err(|e| DecodeError::new("decode_error", e.to_string()))?;
    let (w, h) = d.dimensions();
    check_pixels(w, h, limits)?;
    let mode = if f == ImageFormat::Jpeg && jpeg_components(bytes) == Some(4) {
        "CMYK"
    } else {
        mode_name(d.original_color_type())
    };
    let orientation = match d.exif_metadata() {
        Ok(Some(chunk)) => orientation_of(&chunk),
        _ => d
            .orientation()
            .unwrap_or(image::metadata::Orientation::NoTransforms),
    };
    Ok(Header {
        format: format_name(f),
        width: w,
        height: h,
        mode,
        quarter_turn: turns_a_quarter(orientation),
    })
}

/// Decodes an image to upright 8-bit RGB. With `min_side`, a JPEG whose shorter side
/// is at least twice `min_side` is decoded at the smallest DCT scale that keeps its
/// shorter side ≥ `min_side`; other formats decode at full size.
pub fn decode(
    bytes: &[u8],
    limits: &Limits,
    min_side: Option<u32>,
) -> Result<Decoded, DecodeError> {
    decode_matted(bytes, limits, min_side, None)
}

/// [`decode`], with an image that has alpha matted onto `matte` (as
/// [`super::image_resize::matte`]) instead of its alpha dropped.
pub fn decode_matted(
    bytes: &[u8],
    limits: &Limits,
    min_side: Option<u32>,
    matte: Option<[u8; 3]>,
) -> Result<Decoded, DecodeError> {
    check_size(bytes, limits)?;
    guarded(|| {
        let jpeg = image::guess_format(bytes).ok() == Some(ImageFormat::Jpeg);
        if jpeg {
            // zune-jpeg fills a cut-off scan with grey; Pillow (and a curator) calls
            // it truncated: a JPEG must end its scan with an EOI marker.
            if memchr::memmem::rfind(bytes, &[0xFF, 0xD9]).is_none() {
                return Err(DecodeError::new(
                    "truncated",
                    "JPEG without an end-of-image marker",
                ));
            }
            if let Some(min) = min_side
                && let Some(d) = jpeg_scaled(bytes, limits, min)?
            {
                return Ok(d);
            }
        }
        let (r, f) = reader(bytes)?;
        let mut d = r
            .into_decoder()
            .map_err(|e| DecodeError::new("decode_error", e.to_string()))?;
        let (w, h) = d.dimensions();
        check_pixels(w, h, limits)?;
        let orientation = match d.exif_metadata() {
            Ok(Some(chunk)) => orientation_of(&chunk),
            _ => d
                .orientation()
                .unwrap_or(image::metadata::Orientation::NoTransforms),
        };
        let header = Header {
            format: format_name(f),
            width: w,
            height: h,
            mode: if f == ImageFormat::Jpeg && jpeg_components(bytes) == Some(4) {
                "CMYK"
            } else {
                mode_name(d.original_color_type())
            },
            quarter_turn: turns_a_quarter(orientation),
        };
        let mut lim = image::Limits::default();
        // Decoded buffers: 4 channels × 16 bits at most, plus the RGB copy.
        lim.max_alloc = Some(limits.max_pixels.saturating_mul(16));
        d.set_limits(lim)
            .map_err(|e| DecodeError::new("decompression_bomb", e.to_string()))?;
        let mut img = image::DynamicImage::from_decoder(d).map_err(|e| {
            let reason = match &e {
                image::ImageError::Limits(_) => "decompression_bomb",
                _ => "decode_error",
            };
            DecodeError::new(reason, e.to_string())
        })?;
        img.apply_orientation(orientation);
        let rgb = match matte {
            Some(bg) if img.color().has_alpha() => {
                super::image_resize::matte(&img.into_rgba8(), bg)
            }
            _ => img.into_rgb8(),
        };
        Ok(Decoded::new(header, rgb, 1))
    })
}

/// The EXIF orientation of a chunk, with or without the `Exif\0\0` prefix some
/// writers leave in (WebP's EXIF chunk from Pillow has it).
fn orientation_of(chunk: &[u8]) -> image::metadata::Orientation {
    let tiff = chunk.strip_prefix(b"Exif\0\0").unwrap_or(chunk);
    image::metadata::Orientation::from_exif_chunk(tiff)
        .unwrap_or(image::metadata::Orientation::NoTransforms)
}

/// The mode `image` reports for a JPEG [`crate::kernels::jpeg`] reads: grey or colour
/// (YCbCr and Adobe RGB alike).
fn jpeg_mode(j: &crate::kernels::jpeg::Jpeg) -> &'static str {
    if j.components() == 1 { "L" } else { "RGB" }
}

/// The DCT scale (1, 2, 4 or 8) that keeps the shorter side ≥ `min_side`.
fn dct_scale(w: u32, h: u32, min_side: u32) -> u32 {
    let short = w.min(h);
    let mut scale = 1;
    while scale < 8 && short / (scale * 2) >= min_side {
        scale *= 2;
    }
    scale
}

/// A JPEG at reduced DCT scale: by [`crate::kernels::jpeg`] when it takes the file
/// (baseline, one scan: most of the web), else by jpeg-decoder; both give the same
/// pixels. `Ok(None)`: not small enough to scale, or a file neither takes (CMYK,
/// 16-bit, a header jpeg-decoder refuses): the caller decodes at full size, so a
/// quirk of these decoders never loses an image.
fn jpeg_scaled(
    bytes: &[u8],
    limits: &Limits,
    min_side: u32,
) -> Result<Option<Decoded>, DecodeError> {
    if let Some(j) = crate::kernels::jpeg::Jpeg::parse(bytes) {
        let (w, h) = (j.width, j.height);
        check_pixels(w, h, limits)?;
        let scale = dct_scale(w, h, min_side);
        if scale == 1 {
            return Ok(None);
        }
        if let Some((ow, oh, px)) = j.decode(scale) {
            return Ok(upright(w, h, jpeg_mode(&j), ow, oh, px, j.exif, scale));
        }
    }
    let mut dec = jpeg_decoder::Decoder::new(Cursor::new(bytes));
    if dec.read_info().is_err() {
        return Ok(None);
    }
    let Some(info) = dec.info() else {
        return Ok(None);
    };
    let (w, h) = (info.width as u32, info.height as u32);
    check_pixels(w, h, limits)?;
    let mode = match info.pixel_format {
        jpeg_decoder::PixelFormat::RGB24 => "RGB",
        jpeg_decoder::PixelFormat::L8 => "L",
        _ => return Ok(None),
    };
    let scale = dct_scale(w, h, min_side);
    if scale == 1 {
        return Ok(None);
    }
    let (ow, oh) = match dec.scale(w.div_ceil(scale) as u16, h.div_ceil(scale) as u16) {
        Ok(x) => x,
        Err(_) => return Ok(None),
    };
    let Ok(px) = dec.decode() else {
        return Ok(None);
    };
    let (ow, oh) = (ow as u32, oh as u32);
    let n = (ow * oh) as usize;
    let rgb = match info.pixel_format {
        jpeg_decoder::PixelFormat::RGB24 if px.len() >= 3 * n => {
            let mut px = px;
            px.truncate(3 * n);
            px
        }
        jpeg_decoder::PixelFormat::L8 if px.len() >= n => {
            px[..n].iter().flat_map(|&l| [l, l, l]).collect()
        }
        _ => return Ok(None),
    };
    Ok(upright(w, h, mode, ow, oh, rgb, dec.exif_data(), scale))
}

/// A reduced JPEG's pixels turned upright by its EXIF orientation.
#[allow(clippy::too_many_arguments)]
fn upright(
    w: u32,
    h: u32,
    mode: &'static str,
    ow: u32,
    oh: u32,
    rgb: Vec<u8>,
    exif: Option<&[u8]>,
    scale: u32,
) -> Option<Decoded> {
    let rgb = RgbImage::from_raw(ow, oh, rgb)?;
    let orientation = exif
        .map(orientation_of)
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut img = image::DynamicImage::ImageRgb8(rgb);
    img.apply_orientation(orientation);
    let header = Header {
        format: "JPEG",
        width: w,
        height: h,
        mode,
        quarter_turn: turns_a_quarter(orientation),
    };
    Some(Decoded::new(header, img.into_rgb8(), scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jpeg(w: u32, h: u32) -> Vec<u8> {
        let img = RgbImage::from_fn(w, h, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 128])
        });
        let mut out = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
            .encode_image(&img)
            .unwrap();
        out
    }

    #[test]
    fn reduced_jpeg_keeps_the_short_side_and_full_size_otherwise() {
        let b = jpeg(640, 480);
        let full = decode(&b, &Limits::default(), None).unwrap();
        assert_eq!(
            (full.rgb.width(), full.rgb.height(), full.scale),
            (640, 480, 1)
        );
        assert_eq!(full.header.format, "JPEG");
        let small = decode(&b, &Limits::default(), Some(64)).unwrap();
        assert_eq!(small.scale, 4);
        assert_eq!((small.rgb.width(), small.rgb.height()), (160, 120));
        assert_eq!((small.header.width, small.header.height), (640, 480));
        // The reduced image is the full one, downscaled: close on average.
        let mean = |i: &RgbImage| {
            i.pixels().map(|p| p[0] as f64).sum::<f64>() / (i.width() * i.height()) as f64
        };
        assert!((mean(&full.rgb) - mean(&small.rgb)).abs() < 3.0);
    }

    /// A header's size as shown: Pillow's orientation test files (orientations 2-8,
    /// JPEG and WebP, and a 2×1 JPEG at orientation 8 that shows 1×2), with the
    /// swap for 5-8 only; CMYK JPEGs are CMYK (decoders report them as RGB).
    #[test]
    fn headers_know_the_orientation_and_cmyk() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/data/images/pillow-tests");
        if !dir.exists() {
            eprintln!("../shared/data/images absent: skipped");
            return;
        }
        let read = |n: &str| std::fs::read(dir.join(n)).unwrap();
        for o in 2..=8 {
            for ext in ["jpg", "webp"] {
                let b = read(&format!("hopper_orientation_{o}.{ext}"));
                let Ok(h) = probe(&b, &Limits::default()) else {
                    continue; // a WebP this build does not read
                };
                assert_eq!(h.quarter_turn, o >= 5, "orientation {o} {ext}");
            }
        }
        let h = probe(&read("orientation_rectangle.jpg"), &Limits::default()).unwrap();
        assert_eq!((h.width, h.height, h.upright_size()), (2, 1, (1, 2)));
        // The decoded pixels agree with the upright size.
        let d = decode(&read("orientation_rectangle.jpg"), &Limits::default(), None).unwrap();
        assert_eq!(d.rgb.dimensions(), h.upright_size());
        let h = probe(&read("pil_sample_cmyk.jpg"), &Limits::default()).unwrap();
        assert_eq!(h.mode, "CMYK");
        let h = probe(&read("hopper.jpg"), &Limits::default()).unwrap();
        assert_eq!((h.mode, h.quarter_turn), ("RGB", false));
        // Standalone markers before the frame are stepped over; hostile bytes end
        // the walk without a panic.
        let sof = [0xFF, 0xC0, 0, 17, 8, 0, 1, 0, 1, 4];
        let mut b = vec![0xFF, 0xD8, 0xFF, 0xD0, 0xFF, 0x01];
        b.extend_from_slice(&sof);
        assert_eq!(jpeg_components(&b), Some(4));
        for junk in [
            &[0xFF, 0xD8][..],
            &[0xFF, 0xD8, 0xFF],
            &[0xFF, 0xD8, 0xFF, 0xE0, 0, 0],
            &[0xFF, 0xD8, 0, 0, 0, 0],
        ] {
            let _ = jpeg_components(junk);
        }
    }

    /// The JPEG header fast path says what `image` says, on every real JPEG in the
    /// shared data (Pillow's test suite: odd subsamplings, EXIF, CMYK, truncations;
    /// camera photos) and on generated ones.
    #[test]
    fn the_jpeg_probe_agrees_with_image_on_real_files() {
        let mut files: Vec<Vec<u8>> = vec![jpeg(640, 480), jpeg(1, 1), jpeg(33, 17)];
        for dir in ["pillow-tests", "photos"] {
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../shared/data/images")
                .join(dir);
            let mut stack = vec![root];
            while let Some(d) = stack.pop() {
                let Ok(rd) = std::fs::read_dir(&d) else {
                    continue;
                };
                for e in rd.flatten() {
                    let p = e.path();
                    if p.is_dir() {
                        stack.push(p);
                    } else if let Ok(b) = std::fs::read(&p)
                        && b.starts_with(&[0xFF, 0xD8])
                    {
                        files.push(b);
                    }
                }
            }
        }
        let tight = Limits {
            max_pixels: 10_000,
            ..Limits::default()
        };
        let mut fast = 0;
        for b in &files {
            if crate::kernels::jpeg::Jpeg::parse(b).is_none() {
                continue;
            }
            fast += 1;
            for l in [&Limits::default(), &tight] {
                let (a, e) = (probe(b, l), probe_general(b, l));
                match (&a, &e) {
                    (Ok(a), Ok(e)) => assert_eq!(
                        (a.format, a.width, a.height, a.mode),
                        (e.format, e.width, e.height, e.mode)
                    ),
                    (Err(a), Err(e)) => assert_eq!(a.reason, e.reason),
                    _ => panic!("fast {a:?} vs image {e:?}"),
                }
            }
        }
        assert!(fast >= 3, "{fast}");
        eprintln!("{fast} of {} JPEGs probed by the fast path", files.len());
    }

    #[test]
    fn bombs_garbage_and_oversize_are_refused_with_reasons() {
        let b = jpeg(100, 100);
        let tight = Limits {
            max_pixels: 5_000,
            max_bytes: 1 << 20,
        };
        assert_eq!(
            decode(&b, &tight, None).err().map(|e| e.reason),
            Some("decompression_bomb")
        );
        assert_eq!(probe(&b, &tight).unwrap_err().reason, "decompression_bomb");
        let tiny = Limits {
            max_pixels: 1 << 30,
            max_bytes: 100,
        };
        assert_eq!(
            decode(&b, &tiny, None).err().map(|e| e.reason),
            Some("too_large")
        );
        assert_eq!(
            decode(b"hello world, not an image", &Limits::default(), None)
                .err()
                .map(|e| e.reason),
            Some("unknown_format")
        );
        let cut = &b[..b.len() / 2];
        let reason = |r: Result<Decoded, DecodeError>| r.err().map(|e| e.reason);
        assert_eq!(
            reason(decode(cut, &Limits::default(), None)),
            Some("truncated")
        );
    }
}
