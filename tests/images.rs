//! Image kernels on real files: every file of Pillow's test suite goes through decode
//! without a panic (decodable ones give a header, the rest a reason), and the
//! perceptual hashes agree with the Python imagehash package on real photos
//! (reference numbers from scripts/imagehash-expected.py in tests/data/).
use mdf::kernels::image::{Limits, decode};
use mdf::kernels::imagehash::hashes;
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
