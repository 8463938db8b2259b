//! WebDataset output (`output.format: webdataset`) end to end: the bundled images
//! through `mdf run` into tar shards, read back by the `webdataset` Python package (the
//! loader training code uses): one sample per kept record, keyed by its id, the image
//! bytes exactly the source file's, `.json` with the other columns, `.txt` the caption;
//! the same records as the Parquet output of the same job; bad settings refused.
mod common;
use common::*;
use std::path::{Path, PathBuf};

fn spec(dir: &Path, name: &str, output: &str) -> PathBuf {
    let root = env!("CARGO_MANIFEST_DIR");
    write_spec(
        dir,
        &format!(
            r#"
version: 1
name: {name}
input: {{uris: ["{root}/examples/data/images/"], format: image_folder}}
stages:
  - op: image_metadata
output: {{uri: "{d}/{name}", overwrite: true, {output}}}
"#,
            d = dir.display()
        ),
    )
}

const READ: &str = r#"
import glob, json, sys
import webdataset as wds
out = []
for s in wds.WebDataset(sorted(glob.glob(sys.argv[1] + "/*.tar")), shardshuffle=False):
    img = [k for k in s if k not in ("__key__", "__url__", "json", "txt", "__local_path__")]
    meta = json.loads(s["json"])
    out.append({
        "key": s["__key__"],
        "ext": img[0] if img else None,
        "bytes": s[img[0]].hex() if img else None,
        "path": meta["path"],
        "width": meta.get("width"),
        "txt": s["txt"].decode() if "txt" in s else None,
    })
print(json.dumps(out))
"#;

#[test]
fn webdataset_shards_read_back_by_the_webdataset_package() {
    let d = tempfile::tempdir().unwrap();
    let jobs = d.path().join("jobs");
    let run = |s: &Path| {
        run_ok(
            mdf()
                .args(["run", s.to_str().unwrap(), "--workers", "2", "--job-root"])
                .arg(&jobs),
        )
    };
    run(&spec(
        d.path(),
        "pq",
        "format: parquet, drop_columns: [image]",
    ));
    let ids = output_ids(&d.path().join("pq"));
    assert!(ids.len() > 20);
    run(&spec(
        d.path(),
        "wds",
        "format: webdataset, webdataset: {caption: format}",
    ));
    let out = d.path().join("wds");
    let m = manifest(&out);
    for f in m["files"].as_array().unwrap() {
        let p = f["path"].as_str().unwrap();
        assert!(p.starts_with("shard-") && p.ends_with(".tar"), "{p}");
    }
    assert!(orphans(&out).is_empty(), "{:?}", orphans(&out));
    let Some(text) = python(&["-c", READ, out.to_str().unwrap()]) else {
        return;
    };
    let samples: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let mut keys: Vec<String> = samples
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_string())
        .collect();
    keys.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(keys, want, "one sample per record, keyed by its id");
    for s in &samples {
        let path = s["path"].as_str().unwrap();
        let bytes = std::fs::read(path.strip_prefix("file://").unwrap_or(path)).unwrap();
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert!(
            s["bytes"].as_str().unwrap() == hex,
            "{path}: the image bytes as read"
        );
        let ext = s["ext"].as_str().unwrap();
        assert!(
            (path.ends_with(".png") && ext == "png") || (path.ends_with(".jpg") && ext == "jpg"),
            "{path} as .{ext}"
        );
        assert!(s["width"].as_u64().unwrap() > 0);
        // `caption: format` here: the image's format as the `.txt` member.
        assert!(matches!(s["txt"].as_str(), Some("JPEG" | "PNG")), "{s}");
    }
}

/// The bundled example runs and its shards hold the images that passed the filter.
#[test]
fn the_bundled_example_runs() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    run_example("webdataset", &out, &d.path().join("jobs"), None);
    let m = manifest(&out);
    let rows: u64 = m["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rows"].as_u64().unwrap())
        .sum();
    assert!(rows > 20, "{rows} images in the shards");
}

#[test]
fn bad_webdataset_settings_are_refused_naming_the_field() {
    let d = tempfile::tempdir().unwrap();
    for (output, field) in [
        (
            "format: webdataset, drop_columns: [image]",
            "output.webdataset.image",
        ),
        (
            "format: webdataset, webdataset: {image: path}",
            "output.webdataset.image",
        ),
        (
            "format: webdataset, webdataset: {caption: height}",
            "output.webdataset.caption",
        ),
        (
            "format: parquet, webdataset: {image: image}",
            "output.webdataset",
        ),
        (
            "format: webdataset, row_group_rows: 10",
            "output.row_group_rows",
        ),
    ] {
        let s = spec(d.path(), "bad", output);
        let o = mdf().args(["run", s.to_str().unwrap()]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{output}: {}", stderr(&o));
        assert!(stderr(&o).contains(field), "{output}: {}", stderr(&o));
    }
}

/// Training shards hold only images that decode: the bundled example over photos
/// plus Pillow's truncated JPEG and PNG (found by a new user: its header-only
/// metadata stage let them into the shards, where loaders fail on them).
#[test]
fn the_example_keeps_undecodable_images_out_of_the_shards() {
    let pillow =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/images/pillow-tests");
    if !pillow.exists() {
        eprintln!("../shared/data/images absent: skipped");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let inp = d.path().join("in");
    std::fs::create_dir_all(&inp).unwrap();
    let bundled = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/images");
    for n in ["scene00-crop.jpg", "copy-of-scene05.jpg"] {
        std::fs::copy(bundled.join(n), inp.join(n)).unwrap();
    }
    for n in ["truncated_jpeg.jpg", "truncated_image.png"] {
        std::fs::copy(pillow.join(n), inp.join(n)).unwrap();
    }
    let out = d.path().join("out");
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/webdataset.yaml");
    let o = run_ok(
        mdf()
            .args(["run", example.to_str().unwrap(), "--input"])
            .arg(format!("{}/", inp.display()))
            .arg("--output")
            .arg(&out)
            .arg("--job-root")
            .arg(d.path().join("jobs")),
    );
    let st = status_json(&job_uri(&o));
    let m = manifest(&out);
    let rows: u64 = m["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rows"].as_u64().unwrap())
        .sum();
    assert_eq!(rows, 2, "{st:#}");
    assert_eq!(m["rejected"], 2, "{st:#}");
}
