//! Unit tests of the reader and predictor on a hand-built model; the comparison with
//! the `fasttext` package on real models is tests/fasttext.rs.
use super::*;

/// A tiny supervised model file: `words` then `labels`, dense matrices.
pub(crate) fn model_bytes(loss: i32, minn: i32, maxn: i32, bucket: i32, ngrams: i32) -> Vec<u8> {
    let dim = 3i32;
    let words: &[&str] = &["</s>", "hello", "world"];
    let labels: &[&str] = &["__label__a", "__label__b", "__label__c"];
    let mut b = Vec::new();
    b.extend(MAGIC.to_le_bytes());
    b.extend(VERSION.to_le_bytes());
    for v in [dim, 5, 5, 1, 5, ngrams, loss, 3, bucket, minn, maxn, 100] {
        b.extend(v.to_le_bytes());
    }
    b.extend(1e-4f64.to_le_bytes());
    let size = (words.len() + labels.len()) as i32;
    b.extend(size.to_le_bytes());
    b.extend((words.len() as i32).to_le_bytes());
    b.extend((labels.len() as i32).to_le_bytes());
    b.extend(100i64.to_le_bytes());
    b.extend((-1i64).to_le_bytes());
    for (i, w) in words.iter().chain(labels).enumerate() {
        b.extend(w.as_bytes());
        b.push(0);
        b.extend((30 - i as i64).to_le_bytes());
        b.push(u8::from(i >= words.len()));
    }
    b.push(0);
    let rows = words.len() as i64 + bucket as i64;
    b.extend(rows.to_le_bytes());
    b.extend((dim as i64).to_le_bytes());
    for i in 0..rows * dim as i64 {
        b.extend((((i * 7919) % 13) as f32 / 13.0 - 0.5).to_le_bytes());
    }
    b.push(0);
    b.extend((labels.len() as i64).to_le_bytes());
    b.extend((dim as i64).to_le_bytes());
    for i in 0..labels.len() as i64 * dim as i64 {
        b.extend((((i * 31) % 7) as f32 / 3.0 - 1.0).to_le_bytes());
    }
    b
}

#[test]
fn fnv_hash_sign_extends_bytes() {
    // fastText hashes bytes as signed chars: "é" (0xC3 0xA9) differs from FNV-1a.
    assert_eq!(dict::hash(b""), 2_166_136_261);
    assert_eq!(dict::hash(b"a"), 0xe40c292c);
    let plain = b"\xc3\xa9".iter().fold(2_166_136_261u32, |h, &b| {
        (h ^ b as u32).wrapping_mul(16_777_619)
    });
    assert_ne!(dict::hash("é".as_bytes()), plain);
}

#[test]
fn predicts_every_loss() {
    for loss in [1, 2, 3, 4] {
        let m = Model::from_bytes(&model_bytes(loss, 2, 4, 50, 2)).unwrap();
        let p = m.predict("hello world unknown", 3, 0.0);
        assert_eq!(p.len(), 3, "loss {loss}");
        assert!(p.windows(2).all(|w| w[0].prob >= w[1].prob));
        assert!(p.iter().all(|x| x.prob > 0.0 && x.prob <= 1.0 + 1e-4));
        if loss == 3 || loss == 1 {
            let s: f32 = p.iter().map(|x| x.prob).sum();
            assert!((s - 1.0).abs() < 1e-3, "loss {loss}: {s}");
        }
        // A newline ends the line; what follows it is ignored.
        assert_eq!(
            m.predict("hello\nworld", 3, 0.0),
            m.predict("hello", 3, 0.0)
        );
        assert_eq!(m.predict("hello", 0, 0.0), vec![]);
        assert!(m.predict("hello", 3, 1.1).is_empty());
    }
}

#[test]
fn bad_files_are_errors_never_panics() {
    let good = model_bytes(3, 2, 4, 50, 2);
    for n in 0..good.len() {
        assert!(Model::from_bytes(&good[..n]).is_err(), "truncated at {n}");
    }
    let mut bad = good.clone();
    bad[0] ^= 1;
    assert!(matches!(
        Model::from_bytes(&bad),
        Err(FastTextError::Magic(_))
    ));
    let mut bad = good.clone();
    bad[4] = 13;
    assert_eq!(
        Model::from_bytes(&bad).err(),
        Some(FastTextError::Version(13))
    );
    // Corrupt every header field in turn: an error or a model, never a panic.
    for at in 8..200 {
        for v in [0u8, 0xff, 0x7f] {
            let mut b = good.clone();
            b[at] = v;
            if let Ok(m) = Model::from_bytes(&b) {
                let _ = m.predict("hello world ünïcode", 5, 0.0);
            }
        }
    }
}
