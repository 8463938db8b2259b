//! `mdf bench images`: the image kernels on one core over a folder of images, fastest
//! of three passes (this is a shared machine).
use super::BenchError;
use std::time::Instant;

/// What `mdf bench images` measured: one row per kernel.
pub struct ImagesReport {
    pub files: usize,
    pub bytes: usize,
    /// (kernel, seconds per image, images per second).
    pub rows: Vec<(String, f64, f64)>,
}

/// The image kernels on one core over every file in `dir` (scripts/bench-images.py
/// --make): header probe, full decode, reduced JPEG decode, quality, hashes, CLIP
/// preprocessing. MDF_BENCH_ONLY=TEXT times only the timed kernels whose label
/// contains TEXT (e.g. "min side 64"), for profiling one of them.
pub fn images(dir: &std::path::Path) -> Result<ImagesReport, BenchError> {
    use crate::kernels::{image, image_quality, imagehash};
    let mut files: Vec<Vec<u8>> = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .map_err(BenchError::io(dir))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    names.sort();
    for p in names {
        files.push(std::fs::read(&p).map_err(BenchError::io(&p))?);
    }
    let n = files.len() as f64;
    let lim = image::Limits::default();
    // The fastest of three passes: this is a shared machine.
    let only = std::env::var("MDF_BENCH_ONLY").ok();
    let rows = std::cell::RefCell::new(Vec::new());
    let time = |label: &str, f: &dyn Fn(&[u8]) -> u64| {
        if only.as_deref().is_some_and(|o| !label.contains(o)) {
            return;
        }
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            let mut acc = 0u64;
            for b in &files {
                acc = acc.wrapping_add(f(b));
            }
            best = best.min(t.elapsed().as_secs_f64());
            std::hint::black_box(acc);
        }
        rows.borrow_mut()
            .push((label.to_string(), best / n, n / best));
    };
    time("header probe", &|b| {
        image::probe(b, &lim).map_or(0, |h| h.width as u64)
    });
    time("decode, full size", &|b| {
        image::decode(b, &lim, None).map_or(0, |d| d.rgb.width() as u64)
    });
    time("decode, min side 128 (JPEG DCT scaling)", &|b| {
        image::decode(b, &lim, Some(128)).map_or(0, |d| d.rgb.width() as u64)
    });
    time("decode, min side 64", &|b| {
        image::decode(b, &lim, Some(64)).map_or(0, |d| d.rgb.width() as u64)
    });
    time(
        "decode, min side 32 (1/8: DC only for a ~500 px image)",
        &|b| image::decode(b, &lim, Some(32)).map_or(0, |d| d.rgb.width() as u64),
    );
    let small: Vec<_> = files
        .iter()
        .filter_map(|b| image::decode(b, &lim, Some(128)).ok())
        .collect();
    let t = Instant::now();
    for d in &small {
        let l = imagehash::luma(&d.rgb);
        std::hint::black_box(image_quality::quality(&d.rgb, &l, 8 / d.scale));
    }
    let s = t.elapsed().as_secs_f64();
    rows.borrow_mut()
        .push(("quality, at min side 128".into(), s / n, n / s));
    let tiny: Vec<_> = files
        .iter()
        .filter_map(|b| image::decode(b, &lim, Some(64)).ok())
        .collect();
    let t = Instant::now();
    for d in &tiny {
        std::hint::black_box(imagehash::hashes(&d.rgb));
    }
    let s = t.elapsed().as_secs_f64();
    rows.borrow_mut()
        .push(("phash + dhash + ahash, at min side 64".into(), s / n, n / s));
    // clip_embed's CPU side per image: decode at the smallest DCT scale keeping the
    // shorter side ≥ 224, then open_clip's bicubic resize, centre crop and mean/std.
    use crate::kernels::vision::{CLIP_MEAN, CLIP_STD, clip_tensor};
    time(
        "CLIP preprocessing: decode (min side 224) + resize + crop + normalise, 224²",
        &|b| {
            image::decode(b, &lim, Some(224)).map_or(0, |d| {
                let mut t = Vec::with_capacity(3 * 224 * 224);
                let (w, h) = d.rgb.dimensions();
                clip_tensor(
                    d.rgb.as_raw(),
                    w as usize,
                    h as usize,
                    224,
                    &CLIP_MEAN,
                    &CLIP_STD,
                    &mut t,
                );
                t.len() as u64
            })
        },
    );
    // image_model's other presets: SigLIP (bicubic square resize, no crop) and
    // ImageNet (bilinear shorter side to 256, centre crop 224).
    use crate::kernels::vision::Preprocess;
    for (what, p) in [
        (
            "SigLIP preprocessing: decode (min side 224) + square resize + normalise, 224²",
            Preprocess::siglip(224),
        ),
        (
            "ImageNet preprocessing: decode (min side 256) + resize 256 + crop + normalise, 224²",
            Preprocess::imagenet(224),
        ),
    ] {
        time(what, &|b| {
            image::decode(b, &lim, Some(p.resize_to as u32)).map_or(0, |d| {
                let mut t = Vec::with_capacity(3 * 224 * 224);
                let (w, h) = d.rgb.dimensions();
                let _ = p.tensor(d.rgb.as_raw(), w as usize, h as usize, &mut t);
                t.len() as u64
            })
        });
    }
    Ok(ImagesReport {
        files: files.len(),
        bytes: files.iter().map(Vec::len).sum(),
        rows: rows.into_inner(),
    })
}

impl std::fmt::Display for ImagesReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "mdf bench images: {} files, {:.0} KiB average, one core",
            self.files,
            self.bytes as f64 / self.files as f64 / 1024.0
        )?;
        writeln!(f)?;
        writeln!(f, "| kernel | per image | images/s |")?;
        writeln!(f, "|---|---|---|")?;
        for (label, secs, per_sec) in &self.rows {
            writeln!(f, "| {label} | {:.0} µs | {per_sec:.0} |", secs * 1e6)?;
        }
        Ok(())
    }
}
