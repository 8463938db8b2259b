//! `image_resize` against Pillow on the shared real photos (PNG, JPEG, GIF, TIFF; grey,
//! RGB, RGBA, EXIF-rotated), for every img2dataset resize mode: the same sizes, pixels
//! within one grey level where the decoders agree (every non-JPEG source, lossless
//! output), and mdf's JPEG against Pillow's at the same quality: ≥ 60 dB from the
//! same pixels, ≥ 44 dB where the JPEG decoders differ (scripts/resize-reference.py).
mod common;
use common::*;
use std::path::{Path, PathBuf};

fn photos() -> Option<PathBuf> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/images/photos");
    d.exists().then_some(d)
}

/// Runs `image_resize` with `params` over the photos; the output's Parquet files.
fn resize(dir: &Path, photos: &Path, name: &str, params: &str) -> Vec<String> {
    let spec = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &spec,
        format!(
            "version: 1\nname: {name}\ninput: {{uris: [\"{}/\"], format: image_folder}}\n\
             stages:\n  - op: image_resize\n    params: {params}\n\
             output: {{uri: out-{name}}}\n",
            photos.display()
        ),
    )
    .unwrap();
    run_ok(mdf().current_dir(dir).args([
        "run",
        spec.to_str().unwrap(),
        "-q",
        "--job-root",
        "jobs",
    ]));
    let out = dir.join(format!("out-{name}"));
    let m = manifest(&out);
    m["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| out.join(f["path"].as_str().unwrap()).display().to_string())
        .collect()
}

fn summary(o: &str) -> serde_json::Value {
    for l in o.lines() {
        eprintln!("{l}");
    }
    serde_json::from_str(o.lines().last().unwrap()).unwrap()
}

#[test]
fn every_mode_matches_pillow_on_real_photos() {
    let Some(photos) = photos() else {
        eprintln!("../shared/data/images/photos absent: skipped");
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/resize-reference.py");
    for (name, mode, size, only, filter) in [
        ("kr", "keep_ratio", 256, false, "lanczos"),
        ("cc", "center_crop", 224, false, "bicubic"),
        ("bd", "border", 300, false, "bilinear"),
        ("krl", "keep_ratio_largest", 512, true, "lanczos"),
        ("no", "no", 64, false, "lanczos"),
    ] {
        let files = resize(
            d.path(),
            &photos,
            name,
            &format!(
                "{{image_size: {size}, resize_mode: {mode}, resize_only_if_bigger: {only}, filter: {filter}, encode_format: png}}"
            ),
        );
        let mut args = vec![
            script.to_string(),
            mode.into(),
            size.to_string(),
            only.to_string(),
            filter.into(),
            "png".into(),
            "95".into(),
            photos.display().to_string(),
        ];
        args.extend(files);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let Some(o) = python(&args) else { return };
        let s = summary(&o);
        assert!(s["n"].as_u64().unwrap() >= 30, "{name}: {s}");
        // PNG, GIF and TIFF decode identically in both, and Pillow's resampling is
        // reproduced bit for bit; JPEG decoders (zune-jpeg, libjpeg-turbo) round
        // their IDCT and upsampling differently by a level or two.
        assert!(s["worst_max"].as_u64().unwrap() <= 8, "{name}: {s}");
        assert!(s["mean_of_means"].as_f64().unwrap() <= 0.05, "{name}: {s}");
        for l in o
            .lines()
            .filter(|l| !l.contains(".jpg\"") && l.contains("\"path\""))
        {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert!(v["max"].as_u64().unwrap() <= 1, "{name}: {l}");
        }
    }
    let files = resize(
        d.path(),
        &photos,
        "jpg",
        "{image_size: 256, resize_mode: center_crop, encode_format: jpg, encode_quality: 95}",
    );
    let mut args = vec![
        script.to_string(),
        "center_crop".into(),
        "256".into(),
        "false".into(),
        "lanczos".into(),
        "jpg".into(),
        "95".into(),
        photos.display().to_string(),
    ];
    args.extend(files);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let Some(o) = python(&args) else { return };
    summary(&o);
    // The encoder is libjpeg's at the same quality (tables, 4:2:0 by 2×2 averages):
    // from the same pixels the two JPEGs decode alike; JPEG sources carry the
    // decoders' difference through.
    let mut jpeg_sources = 0;
    for l in o.lines().filter(|l| l.contains("\"path\"")) {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let p = v["psnr"].as_f64().unwrap();
        if l.contains(".jpg\"") {
            jpeg_sources += 1;
            assert!(p >= 44.0, "{l}");
        } else {
            assert!(p >= 60.0, "{l}");
        }
    }
    assert!(jpeg_sources >= 4);
}
