//! The reduced-scale JPEG decoder (`kernels::jpeg`) against jpeg-decoder's scaled
//! decode, which it must reproduce byte for byte wherever it takes a file: real
//! photos and Pillow's test images, encoder output with every chroma subsampling and
//! restart intervals, and every truncation and many corruptions of a real file.
use mdf::kernels::jpeg::Jpeg;
use std::path::Path;

/// jpeg-decoder at 1/`scale`, as RGB (grey repeated).
fn reference(bytes: &[u8], scale: u32) -> Option<(u32, u32, Vec<u8>)> {
    let mut d = jpeg_decoder::Decoder::new(std::io::Cursor::new(bytes));
    d.read_info().ok()?;
    let info = d.info()?;
    let (w, h) = (info.width as u32, info.height as u32);
    let (ow, oh) = d
        .scale(w.div_ceil(scale) as u16, h.div_ceil(scale) as u16)
        .ok()?;
    let px = d.decode().ok()?;
    let n = ow as usize * oh as usize;
    let rgb = match info.pixel_format {
        jpeg_decoder::PixelFormat::RGB24 => px[..3 * n].to_vec(),
        jpeg_decoder::PixelFormat::L8 => px[..n].iter().flat_map(|&l| [l, l, l]).collect(),
        _ => return None,
    };
    Some((ow as u32, oh as u32, rgb))
}

/// Decodes at every scale; where `kernels::jpeg` takes the file its pixels must be
/// jpeg-decoder's. Returns how many scales it took.
fn check(bytes: &[u8], what: &str) -> usize {
    let Some(j) = Jpeg::parse(bytes) else {
        return 0;
    };
    let mut taken = 0;
    for scale in [2, 4, 8] {
        if let Some(ours) = j.decode(scale) {
            let want = reference(bytes, scale);
            assert!(
                want.is_some(),
                "{what} at 1/{scale}: jpeg-decoder refuses it"
            );
            let want = want.unwrap();
            assert_eq!(
                (ours.0, ours.1),
                (want.0, want.1),
                "{what} at 1/{scale}: size"
            );
            if ours.2 != want.2 {
                let at = ours
                    .2
                    .iter()
                    .zip(&want.2)
                    .position(|(a, b)| a != b)
                    .unwrap();
                panic!(
                    "{what} at 1/{scale} ({}x{}): first difference at byte {at}: {} vs {}",
                    ours.0, ours.1, ours.2[at], want.2[at]
                );
            }
            taken += 1;
        }
    }
    taken
}

fn jpegs_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            jpegs_under(&p, out);
        } else if std::fs::read(&p).is_ok_and(|b| b.starts_with(&[0xFF, 0xD8])) {
            out.push(p);
        }
    }
}

#[test]
fn equals_jpeg_decoder_on_real_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/images");
    let mut files = Vec::new();
    jpegs_under(&root, &mut files);
    files.sort();
    let (mut taken, mut declined) = (0, 0);
    for f in &files {
        let b = std::fs::read(f).unwrap();
        match check(&b, &f.display().to_string()) {
            0 => declined += 1,
            _ => taken += 1,
        }
    }
    eprintln!("{taken} JPEGs decoded and equal, {declined} declined (progressive, CMYK, ...)");
    // The photos are baseline: most files must take the fast path.
    assert!(taken >= 20, "only {taken} of {} JPEGs taken", files.len());
}

fn encode(
    w: u16,
    h: u16,
    gray: bool,
    sampling: jpeg_encoder::SamplingFactor,
    restart: u16,
    q: u8,
) -> Vec<u8> {
    let mut next = mdf::kernels::xorshift((w as u64) << 32 | (h as u64) << 16 | q as u64 | 1);
    // A photo-like mix: gradients plus noise, so every coefficient band is used.
    let ch = if gray { 1 } else { 3 };
    let mut px = Vec::with_capacity(w as usize * h as usize * ch);
    for y in 0..h as u32 {
        for x in 0..w as u32 {
            for c in 0..ch as u32 {
                let v = (x * (3 + c) + y * (5 - c) + (next() % 48) as u32) % 256;
                px.push(v as u8);
            }
        }
    }
    let mut out = Vec::new();
    let mut e = jpeg_encoder::Encoder::new(&mut out, q);
    e.set_sampling_factor(sampling);
    e.set_restart_interval(restart);
    let ct = if gray {
        jpeg_encoder::ColorType::Luma
    } else {
        jpeg_encoder::ColorType::Rgb
    };
    e.encode(&px, w, h, ct).unwrap();
    out
}

#[test]
fn equals_jpeg_decoder_for_every_subsampling_size_and_restart_interval() {
    use jpeg_encoder::SamplingFactor::*;
    let samplings = [
        F_1_1, F_2_1, F_1_2, F_2_2, F_4_1, F_1_4, F_4_2, F_2_4, R_4_4_4, R_4_2_0,
    ];
    let sizes = [
        (1, 1),
        (7, 3),
        (8, 8),
        (17, 33),
        (64, 48),
        (250, 3),
        (3, 250),
        (131, 97),
    ];
    // jpeg-encoder writes a scan per component for some factors; those may be
    // declined (the general decoder takes them), every single-scan file is taken.
    let scans = |b: &[u8]| b.windows(2).filter(|w| w == &[0xFF, 0xDA]).count();
    let mut n = 0;
    for (i, &s) in samplings.iter().enumerate() {
        for (k, &(w, h)) in sizes.iter().enumerate() {
            let restart = [0, 1, 3, 7][(i + k) % 4];
            let q = [50, 75, 90, 100][(i * 3 + k) % 4];
            let b = encode(w, h, false, s, restart, q);
            let what = format!("{w}x{h} {s:?} restart {restart} q{q}");
            let taken = check(&b, &what);
            if scans(&b) == 1 {
                assert_eq!(taken, 3, "{what}: declined");
                n += 1;
            }
        }
    }
    for &(w, h) in &sizes {
        let b = encode(w, h, true, F_1_1, 2, 85);
        assert_eq!(
            check(&b, &format!("grey {w}x{h}")),
            3,
            "grey {w}x{h}: declined"
        );
        n += 1;
    }
    assert!(n >= 50, "{n} single-scan files");
}

#[test]
fn truncated_and_corrupted_files_are_declined_or_equal() {
    let photos = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/images/photos");
    let mut files = Vec::new();
    jpegs_under(&photos, &mut files);
    files.sort();
    // A small real file keeps this quick: every cut point, and byte flips.
    let b = encode(120, 90, false, jpeg_encoder::SamplingFactor::F_2_2, 4, 80);
    let full = check(&b, "whole");
    assert_eq!(full, 3);
    let mut declined = 0;
    for cut in 0..b.len() - 1 {
        let mut t = b[..cut].to_vec();
        // Even with an end-of-image marker after the cut the scan is short of data.
        t.extend_from_slice(&[0xFF, 0xD9]);
        if check(&t, &format!("cut at {cut}")) == 0 {
            declined += 1;
        }
    }
    assert!(
        declined >= b.len() - 10,
        "cut files taken: {}",
        b.len() - 1 - declined
    );
    let mut next = mdf::kernels::xorshift(0x2545_F491_4F6C_DD1D);
    for i in 0..3000 {
        let mut t = b.clone();
        let at = next() as usize % t.len();
        t[at] ^= 1 << (i % 8);
        // Either declined or what jpeg-decoder makes of the same bytes.
        check(&t, &format!("bit {} of byte {at} flipped", i % 8));
    }
    if let Some(f) = files.first() {
        let b = std::fs::read(f).unwrap();
        for cut in (0..b.len()).step_by(b.len() / 97 + 1) {
            check(&b[..cut], &format!("{} cut at {cut}", f.display()));
        }
    }
}

/// Replaces a jpeg-encoder file's frame: size, each component's sampling factors, and
/// the scan data, written here as `mcus` MCUs of flat blocks (DC difference 0, then
/// end of block) with the standard tables jpeg-encoder writes.
fn with_frame(base: &[u8], (w, h): (u16, u16), factors: [u8; 3], mcus: usize) -> Vec<u8> {
    let sof = base.windows(2).position(|p| p == [0xFF, 0xC0]).unwrap();
    let sos = base.windows(2).position(|p| p == [0xFF, 0xDA]).unwrap();
    let mut out = base[..sos].to_vec();
    out[sof + 5..sof + 7].copy_from_slice(&h.to_be_bytes());
    out[sof + 7..sof + 9].copy_from_slice(&w.to_be_bytes());
    for (k, f) in factors.iter().enumerate() {
        out[sof + 11 + 3 * k] = *f;
    }
    let len = u16::from_be_bytes([base[sos + 2], base[sos + 3]]) as usize;
    out.extend_from_slice(&base[sos..sos + 2 + len]);
    // Luma: DC category 0 is `00`, EOB `1010`; chroma: `00` and `00`.
    let mut bits = String::new();
    for _ in 0..mcus {
        for (k, f) in factors.iter().enumerate() {
            let block = if k == 0 { "001010" } else { "0000" };
            bits.push_str(&block.repeat(((f >> 4) * (f & 15)) as usize));
        }
    }
    while !bits.len().is_multiple_of(8) {
        bits.push('1');
    }
    for i in (0..bits.len()).step_by(8) {
        let b = u8::from_str_radix(&bits[i..i + 8], 2).unwrap();
        out.push(b);
        if b == 0xFF {
            out.push(0);
        }
    }
    out.extend_from_slice(&[0xFF, 0xD9]);
    out
}

/// Inserts a segment just before the scan.
fn with_segment(base: &[u8], seg: &[u8]) -> Vec<u8> {
    let sos = base.windows(2).position(|p| p == [0xFF, 0xDA]).unwrap();
    [&base[..sos], seg, &base[sos..]].concat()
}

#[test]
fn headers_jpeg_decoder_refuses_are_declined() {
    let base = encode(16, 16, false, jpeg_encoder::SamplingFactor::F_1_1, 0, 80);
    // The hand-written scans are good JPEG: with 4:2:0 factors both decoders take it.
    let good = with_frame(&base, (16, 16), [0x22, 0x11, 0x11], 1);
    assert_eq!(check(&good, "hand-written 4:2:0"), 3);
    let declined = |b: &[u8], what: &str| {
        assert!(reference(b, 8).is_none(), "{what}: jpeg-decoder takes it");
        let ours = Jpeg::parse(b).and_then(|j| j.decode(8));
        assert!(ours.is_none(), "{what}: taken");
    };
    // 18 blocks per MCU (JPEG allows 10).
    declined(
        &with_frame(&base, (32, 32), [0x44, 0x11, 0x11], 1),
        "4x4 luma",
    );
    // Luma 3×1 over chroma 2×1: no integer ratio, even where the output is one
    // pixel wide and no upsampling runs.
    declined(
        &with_frame(&base, (8, 8), [0x31, 0x21, 0x21], 1),
        "3:2 ratio",
    );
    // An empty Huffman table, and (after a baseline frame) table id 2, even unused.
    let mut empty = vec![0xFF, 0xC4, 0x00, 0x13, 0x03];
    empty.extend_from_slice(&[0; 16]);
    declined(&with_segment(&good, &empty), "empty DHT");
    let mut id2 = vec![0xFF, 0xC4, 0x00, 0x14, 0x12, 1];
    id2.extend_from_slice(&[0; 15]);
    id2.push(0x00);
    declined(&with_segment(&good, &id2), "DHT id 2 in a baseline file");
}
