//! Image kernels on real files: every file of Pillow's test suite goes through decode
//! without a panic (decodable ones give a header, the rest a reason), and the
//! perceptual hashes agree with the Python imagehash package on real photos
//! (reference numbers from scripts/imagehash-expected.py in tests/data/).
mod common;
use common::*;
use mdf::kernels::image::{Limits, decode};
use mdf::kernels::imagehash::hashes;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

fn shared(p: &str) -> Option<PathBuf> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/images")
        .join(p);
    d.exists().then_some(d)
}

#[test]
fn hashes_agree_with_imagehash_on_real_photos() {
    let Some(dir) = shared("photos") else {
        eprintln!("../shared/data/images/photos absent: skipped");
        return;
    };
    let csv = include_str!("data/imagehash-photos.csv");
    let (mut worst, mut total, mut n) = ([0u32; 3], [0u32; 3], 0);
    let mut exact = 0;
    let mut flat = 0;
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let bytes = std::fs::read(dir.join(f[0])).unwrap();
        let d =
            decode(&bytes, &Limits::default(), None).unwrap_or_else(|e| panic!("{}: {e:?}", f[0]));
        let h = hashes(&d.rgb);
        let want: Vec<u64> = f[1..4]
            .iter()
            .map(|x| u64::from_str_radix(x, 16).unwrap())
            .collect();
        let got = [h.phash, h.dhash, h.ahash];
        if h.flat {
            // Ill-defined phash (a chessboard, a gradient): flagged, not compared.
            eprintln!("{:<36} flat: phash not compared", f[0]);
            flat += 1;
            continue;
        }
        for i in 0..3 {
            let dist = (got[i] ^ want[i]).count_ones();
            worst[i] = worst[i].max(dist);
            total[i] += dist;
        }
        exact += (got[0] == want[0]) as u32;
        n += 1;
        eprintln!(
            "{:<36} phash {:016x} vs {:016x} ({})",
            f[0],
            got[0],
            want[0],
            (got[0] ^ want[0]).count_ones()
        );
    }
    eprintln!(
        "{n} photos ({flat} flagged flat): phash equal on {exact}; mean/max Hamming distance phash {:.2}/{}, dhash {:.2}/{}, ahash {:.2}/{}",
        total[0] as f64 / n as f64,
        worst[0],
        total[1] as f64 / n as f64,
        worst[1],
        total[2] as f64 / n as f64,
        worst[2]
    );
    assert!(n >= 27 && flat <= 4, "{n} compared, {flat} flat");
    assert!(worst.iter().all(|&w| w <= 4), "worst distances {worst:?}");
    assert!(
        exact as f64 >= 0.9 * n as f64,
        "phash exactly equal on {exact} of {n}"
    );
}

/// Every file of Pillow's test suite (truncated, fuzzer crashes, bombs, bad EXIF
/// included) goes through decode without a panic; each outcome is compared with
/// what Pillow does (pillow-tests-decode.csv).
#[test]
fn pillow_test_suite_decodes_or_is_refused_with_a_reason() {
    let Some(csv) = shared("pillow-tests-decode.csv") else {
        eprintln!("../shared/data/images absent: skipped");
        return;
    };
    let root = csv.parent().unwrap().to_path_buf();
    let text = std::fs::read_to_string(&csv).unwrap();
    let supported = ["JPEG", "MPO", "PNG", "GIF", "WEBP", "BMP", "TIFF", ""];
    let (mut both_ok, mut both_fail, mut only_pillow, mut only_mdf, mut other) = (0, 0, 0, 0, 0);
    let mut reasons = std::collections::BTreeMap::new();
    let mut disagree = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.splitn(9, ',').collect();
        let bytes = std::fs::read(root.join(f[0])).unwrap();
        let got = decode(&bytes, &Limits::default(), None);
        match &got {
            Ok(d) => {
                assert!(d.rgb.width() > 0 && d.rgb.height() > 0, "{}", f[0]);
            }
            Err(e) => {
                assert!(
                    !e.reason.is_empty() && !e.detail.is_empty(),
                    "{}: {e:?}",
                    f[0]
                );
                *reasons.entry(e.reason).or_insert(0) += 1;
            }
        }
        let pillow_ok = f[7] == "1";
        if !supported.contains(&f[2]) && pillow_ok {
            other += 1; // a format this build does not read (AVIF, PPM, ICO, ...)
            assert!(got.is_err(), "{} ({}) decoded", f[0], f[2]);
            continue;
        }
        match (pillow_ok, got.is_ok()) {
            (true, true) => both_ok += 1,
            (false, false) => both_fail += 1,
            (true, false) => {
                only_pillow += 1;
                disagree.push(format!("{} pillow ok, mdf {:?}", f[0], got.err().unwrap()));
            }
            (false, true) => {
                only_mdf += 1;
                disagree.push(format!("{} pillow: {}", f[0], f[8]));
            }
        }
    }
    for d in &disagree {
        eprintln!("  {d}");
    }
    eprintln!(
        "pillow-tests: both decode {both_ok}, both refuse {both_fail}, only Pillow decodes {only_pillow}, only mdf decodes {only_mdf}, other formats refused {other}; reasons {reasons:?}"
    );
    assert!(both_ok >= 150, "{both_ok}");
    assert!(
        only_pillow <= 15,
        "{only_pillow} files Pillow decodes are refused"
    );
    assert!(
        only_mdf <= 10,
        "{only_mdf} files Pillow refuses decode here"
    );
}

fn reasons(out: &std::path::Path) -> BTreeMap<String, usize> {
    let m = manifest(out);
    let mut v = BTreeMap::new();
    for r in m["rejects"].as_array().unwrap() {
        let b = read_parquet(&out.join("_rejects").join(r["path"].as_str().unwrap()));
        for reason in strings(&b, "reason") {
            *v.entry(reason).or_insert(0) += 1;
        }
    }
    v
}

fn names(out: &std::path::Path) -> BTreeSet<String> {
    let m = manifest(out);
    let mut v = BTreeSet::new();
    for f in m["files"].as_array().unwrap() {
        let b = read_parquet(&out.join(f["path"].as_str().unwrap()));
        for p in strings(&b, "path") {
            v.insert(p.rsplit(['/', '#']).next().unwrap().to_string());
        }
    }
    v
}

/// examples/images.yaml on the bundled images: the broken files are rejects with
/// their reasons, blank and tiny images are filtered, and phash near-dedup keeps one
/// image per scene (the largest file), every planted copy removed.
#[test]
fn the_images_example_keeps_one_image_per_scene() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    run_ok(
        mdf()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["run", "examples/images.yaml", "-q", "-o"])
            .arg(&out)
            .arg("--job-root")
            .arg(d.path().join("jobs")),
    );
    let r = reasons(&out);
    assert_eq!(r.get("unknown_format"), Some(&1), "{r:?}");
    assert_eq!(r.get("truncated"), Some(&1), "{r:?}");
    assert_eq!(r.get("min_entropy"), Some(&2), "{r:?}");
    assert_eq!(r.get("min_width"), Some(&1), "{r:?}");
    assert_eq!(r.get("duplicate"), Some(&15), "{r:?}");
    let kept = names(&out);
    assert_eq!(kept.len(), 12, "{kept:?}");
    for i in 0..12 {
        assert_eq!(
            kept.iter()
                .filter(|n| n.starts_with(&format!("scene{i:02}")))
                .count(),
            1,
            "scene {i}: {kept:?}"
        );
    }
    // keep: {highest: bytes}: scene01's brightened PNG copy is its largest file.
    assert!(kept.contains("scene01-bright.png"), "{kept:?}");
    let cols = output_columns(&out);
    for c in [
        "width",
        "sharpness",
        "colorfulness",
        "phash",
        "dhash",
        "ahash",
        "phash_flat",
        "dup_cluster",
    ] {
        assert!(cols.contains(&c.to_string()), "{c}: {cols:?}");
    }
    assert!(!cols.contains(&"image".to_string()));
}

/// Every file of Pillow's test suite through a job: output or a reject with a
/// reason, the job never fails; then the same images as WebDataset shards (captions
/// and JSON beside them) and as Parquet with an image-bytes column hash the same.
#[test]
fn image_inputs_folder_webdataset_and_parquet_agree() {
    let Some(pillow) = shared("pillow-tests") else {
        eprintln!("../shared/data/images absent: skipped");
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let hash_stages = "stages:\n  - op: image_metadata\n  - op: image_hash\n";
    let job_with = |name: &str, input: String, extra: &str, stages: &str| {
        let out = d.path().join(name);
        let spec = write_spec(
            d.path(),
            &format!(
                "name: {name}\ninput: {{{input}}}\n{stages}output: {{uri: \"{}\", overwrite: true{extra}}}\njob: {{batch_rows: 64}}\n",
                out.display()
            ),
        );
        run_ok(
            mdf()
                .args([
                    "run",
                    spec.to_str().unwrap(),
                    "-q",
                    "--workers",
                    "2",
                    "--job-root",
                ])
                .arg(d.path().join(format!("jobs-{name}"))),
        );
        out
    };
    let job = |name: &str, input: String, extra: &str| job_with(name, input, extra, hash_stages);
    let folder = job(
        "folder",
        format!("uris: [\"{}/\"], format: image_folder", pillow.display()),
        "",
    );
    let files: usize = walk(&pillow)
        .iter()
        .filter(|p| mdf::spec::is_image_name(p))
        .count();
    let m = manifest(&folder);
    let (kept, rejected) = (
        m["rows"].as_u64().unwrap_or(0) as usize,
        m["rejected"].as_u64().unwrap_or(0) as usize,
    );
    let r = reasons(&folder);
    eprintln!(
        "pillow-tests as a folder: {files} image files, {kept} kept, {rejected} rejected: {r:?}"
    );
    assert_eq!(kept + rejected, files, "every file accounted for");
    assert!(kept >= 150 && r.keys().all(|k| !k.is_empty()));

    // WebDataset: the photos as samples with captions and JSON, in two shards.
    let photos = shared("photos").unwrap();
    let mut jpgs: Vec<_> = walk(&photos)
        .into_iter()
        .filter(|p| p.ends_with(".jpg") || p.ends_with(".png"))
        .collect();
    jpgs.sort();
    for (s, chunk) in jpgs.chunks(jpgs.len().div_ceil(2)).enumerate() {
        let f = std::fs::File::create(d.path().join(format!("shard-{s}.tar"))).unwrap();
        let mut t = tar::Builder::new(f);
        for (i, p) in chunk.iter().enumerate() {
            let key = format!("{s:02}{i:04}");
            let bytes = std::fs::read(photos.join(p)).unwrap();
            let ext = p.rsplit('.').next().unwrap();
            let mut add = |name: String, data: &[u8]| {
                let mut h = tar::Header::new_gnu();
                h.set_size(data.len() as u64);
                h.set_mode(0o644);
                h.set_cksum();
                t.append_data(&mut h, name, data).unwrap();
            };
            add(format!("{key}.{ext}"), &bytes);
            add(
                format!("{key}.txt"),
                format!("a photo called {p}").as_bytes(),
            );
            add(
                format!("{key}.json"),
                format!("{{\"url\": \"https://example.org/{p}\"}}").as_bytes(),
            );
        }
        // A sample without an image.
        let mut h = tar::Header::new_gnu();
        h.set_size(2);
        h.set_mode(0o644);
        h.set_cksum();
        t.append_data(&mut h, "lonely.txt", &b"hi"[..]).unwrap();
        t.finish().unwrap();
    }
    let wds = job(
        "wds",
        format!("uris: [\"{}/shard-*.tar\"]", d.path().display()),
        "",
    );
    assert_eq!(reasons(&wds).get("no_image"), Some(&2));
    let hashes = |out: &std::path::Path, key: &str| -> BTreeMap<String, String> {
        let m = manifest(out);
        let mut v = BTreeMap::new();
        for f in m["files"].as_array().unwrap() {
            let b = read_parquet(&out.join(f["path"].as_str().unwrap()));
            let dh: Vec<u64> = b
                .iter()
                .flat_map(|b| {
                    let a = b
                        .column_by_name("dhash")
                        .unwrap()
                        .as_any()
                        .downcast_ref::<arrow_array::UInt64Array>()
                        .unwrap()
                        .clone();
                    (0..a.len())
                        .map(move |i| {
                            if arrow_array::Array::is_valid(&a, i) {
                                a.value(i)
                            } else {
                                0
                            }
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            for (k, h) in strings(&b, key).into_iter().zip(dh) {
                v.insert(k, format!("{h:016x}"));
            }
        }
        v
    };
    let by_url: BTreeMap<String, String> = hashes(&wds, "url")
        .into_iter()
        .map(|(u, h)| (u.rsplit('/').next().unwrap().to_string(), h))
        .collect();
    assert_eq!(by_url.len(), jpgs.len());
    let caps = {
        let m = manifest(&wds);
        let b = read_parquet(&wds.join(m["files"][0]["path"].as_str().unwrap()));
        strings(&b, "caption")
    };
    assert!(
        caps.iter().all(|c| c.starts_with("a photo called ")),
        "{caps:?}"
    );

    // Parquet with an image-bytes column: the folder of photos kept with its bytes.
    let copied = job_with(
        "copied",
        format!(
            "uris: [\"{}/*.jpg\", \"{}/*.png\"]",
            photos.display(),
            photos.display()
        ),
        "",
        "",
    );
    let with_bytes = job(
        "photos",
        format!(
            "uris: [\"{}/*.jpg\", \"{}/*.png\"]",
            photos.display(),
            photos.display()
        ),
        "",
    );
    let pq_out = job(
        "parquet",
        format!(
            "uris: [\"{}/*.parquet\"], format: parquet",
            copied.display()
        ),
        ", drop_columns: [image]",
    );
    let by_path = |out: &std::path::Path| -> BTreeMap<String, String> {
        hashes(out, "path")
            .into_iter()
            .map(|(p, h)| (p.rsplit('/').next().unwrap().to_string(), h))
            .collect()
    };
    assert_eq!(by_path(&pq_out), by_path(&with_bytes));
    assert_eq!(
        by_path(&with_bytes),
        by_url,
        "folder and WebDataset hash alike"
    );
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(&p).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(
                    e.path()
                        .strip_prefix(dir)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    out
}

/// EXIF orientations 2–8 (Pillow's hopper_orientation_N, JPEG and WebP) are applied:
/// hashes equal imagehash's on the transposed image, whether the JPEG is decoded at
/// full size or at a reduced DCT scale (within 2 bits there).
#[test]
fn exif_orientation_is_applied_in_both_jpeg_paths() {
    let Some(dir) = shared("pillow-tests") else {
        return;
    };
    let csv = include_str!("data/imagehash-orientation.csv");
    let mut n = 0;
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let want = u64::from_str_radix(f[2], 16).unwrap(); // dhash: orientation-sensitive
        let bytes = std::fs::read(dir.join(f[0])).unwrap();
        let full = hashes(&decode(&bytes, &Limits::default(), None).unwrap().rgb);
        assert!(
            (full.dhash ^ want).count_ones() <= 1,
            "{}: {:016x} vs {want:016x}",
            f[0],
            full.dhash
        );
        let small = decode(&bytes, &Limits::default(), Some(32)).unwrap();
        if f[0].ends_with(".jpg") {
            assert_eq!(small.scale, 4, "{}", f[0]);
        }
        let d = (hashes(&small.rgb).dhash ^ want).count_ones();
        assert!(d <= 3, "{} reduced: {d} bits", f[0]);
        n += 1;
    }
    assert!(n >= 14);
}
