//! Image decode on arbitrary bytes: no panic, no allocation past the limits, and on
//! success the hashes and quality metrics run too (they see every decoded size).
#![no_main]
use libfuzzer_sys::fuzz_target;
use mdf::kernels::{image, image_quality, imagehash};

fuzz_target!(|data: &[u8]| {
    let limits = image::Limits {
        max_pixels: 16 << 20,
        max_bytes: 8 << 20,
    };
    let _ = image::probe(data, &limits);
    for min_side in [None, Some(64)] {
        if let Ok(d) = image::decode(data, &limits, min_side) {
            assert!(d.rgb.width() > 0 && d.rgb.height() > 0);
            assert!(u64::from(d.header.width) * u64::from(d.header.height) <= limits.max_pixels);
            let l = imagehash::luma(&d.rgb);
            let _ = image_quality::quality(&d.rgb, &l, 8 / d.scale);
            let _ = imagehash::hashes(&d.rgb);
        }
    }
});
