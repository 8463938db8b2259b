//! Unit tests of the reader and predictor on a hand-built model; the comparison with
//! the `fasttext` package on real models is tests/fasttext.rs.
use super::*;

/// A tiny supervised model file: `words` then `labels`, dense matrices.
pub(crate) fn model_bytes(loss: i32, minn: i32, maxn: i32, bucket: i32, ngrams: i32) -> Vec<u8> {
    let labels: Vec<(String, i64)> = ["a", "b", "c"]
        .iter()
        .enumerate()
        .map(|(i, l)| (format!("__label__{l}"), 27 - i as i64))
        .collect();
    Spec {
        loss,
        minn,
        maxn,
        bucket,
        ngrams,
        labels,
        input: |i| ((i * 7919) % 13) as f32 / 13.0 - 0.5,
        output: |i| ((i * 31) % 7) as f32 / 3.0 - 1.0,
    }
    .bytes()
}

/// A dense supervised model: dim 3, the words `</s> hello world`, `labels` with
/// their counts, matrix values by flat index.
pub(crate) struct Spec {
    pub loss: i32,
    pub minn: i32,
    pub maxn: i32,
    pub bucket: i32,
    pub ngrams: i32,
    pub labels: Vec<(String, i64)>,
    pub input: fn(i64) -> f32,
    pub output: fn(i64) -> f32,
}

impl Spec {
    pub fn bytes(&self) -> Vec<u8> {
        let dim = 3i32;
        let words: &[&str] = &["</s>", "hello", "world"];
        let mut b = Vec::new();
        b.extend(MAGIC.to_le_bytes());
        b.extend(VERSION.to_le_bytes());
        for v in [
            dim,
            5,
            5,
            1,
            5,
            self.ngrams,
            self.loss,
            3,
            self.bucket,
            self.minn,
            self.maxn,
            100,
        ] {
            b.extend(v.to_le_bytes());
        }
        b.extend(1e-4f64.to_le_bytes());
        let size = (words.len() + self.labels.len()) as i32;
        b.extend(size.to_le_bytes());
        b.extend((words.len() as i32).to_le_bytes());
        b.extend((self.labels.len() as i32).to_le_bytes());
        b.extend(100i64.to_le_bytes());
        b.extend((-1i64).to_le_bytes());
        for (i, w) in words.iter().enumerate() {
            b.extend(w.as_bytes());
            b.push(0);
            b.extend((30 - i as i64).to_le_bytes());
            b.push(0);
        }
        for (l, count) in &self.labels {
            b.extend(l.as_bytes());
            b.push(0);
            b.extend(count.to_le_bytes());
            b.push(1);
        }
        b.push(0);
        let rows = words.len() as i64 + self.bucket as i64;
        b.extend(rows.to_le_bytes());
        b.extend((dim as i64).to_le_bytes());
        for i in 0..rows * dim as i64 {
            b.extend((self.input)(i).to_le_bytes());
        }
        b.push(0);
        b.extend((self.labels.len() as i64).to_le_bytes());
        b.extend((dim as i64).to_le_bytes());
        for i in 0..self.labels.len() as i64 * dim as i64 {
            b.extend((self.output)(i).to_le_bytes());
        }
        b
    }
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

#[test]
fn hostile_label_counts_build_a_tree_never_panic() {
    // fastText's buildTree takes a count of 1e15 or more for "no node yet": such
    // counts (or sums past i64) made it pick unbuilt nodes (a cycle, or past the end).
    for counts in [
        vec![1_000_000_000_000_000i64; 3],
        vec![i64::MAX, i64::MAX, i64::MAX, 5],
        vec![i64::MIN, -1, 0, i64::MAX],
        vec![4_000_000_000_000_000_000, 4_000_000_000_000_000_000, 1, 1],
    ] {
        let labels = counts
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("__label__{i}"), *c))
            .collect();
        let spec = Spec { labels, ..base(1) };
        let m = Model::from_bytes(&spec.bytes()).unwrap();
        let p = m.predict("hello world", counts.len(), 0.0);
        assert_eq!(p.len(), counts.len(), "{counts:?}");
        let mut seen: Vec<u32> = p.iter().map(|x| x.label).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), counts.len(), "{counts:?}: every leaf once");
    }
}

fn base(loss: i32) -> Spec {
    Spec {
        loss,
        minn: 2,
        maxn: 4,
        bucket: 50,
        ngrams: 2,
        labels: vec![("__label__a".into(), 2), ("__label__b".into(), 1)],
        input: |i| ((i * 7919) % 13) as f32 / 13.0 - 0.5,
        output: |i| ((i * 31) % 7) as f32 / 3.0 - 1.0,
    }
}

#[test]
fn a_deep_hierarchical_softmax_tree_does_not_overflow_the_stack() {
    // Equal counts make fastText's Huffman tree a chain as long as the labels; with
    // outputs that send every step left at no cost, the search walks all of it (the
    // recursion overflowed a 2 MiB thread stack).
    let n = 200_000;
    let spec = Spec {
        labels: (0..n).map(|i| (format!("__label__{i}"), 0)).collect(),
        input: |_| 1.0,
        output: |_| -100.0,
        ..base(1)
    };
    let m = Model::from_bytes(&spec.bytes()).unwrap();
    let p = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || m.predict("hello world", 2, 0.0))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(p.len(), 2);
}

#[test]
fn n_gram_widths_from_the_header_are_bounded() {
    // A 1 MB token costs len x maxn, a line's tokens x wordNgrams: a header claiming
    // 2^31 is refused at load, not run for hours on the first long text.
    for (maxn, ngrams) in [(i32::MAX, 2), (4, i32::MAX), (MAX_NGRAM + 1, 1)] {
        let e = Model::from_bytes(&model_bytes(3, 1, maxn, 50, ngrams)).err();
        assert!(
            matches!(e, Some(FastTextError::Unsupported(_))),
            "maxn {maxn} wordNgrams {ngrams}: {e:?}"
        );
    }
    // Without buckets neither is used.
    assert!(Model::from_bytes(&model_bytes(3, 1, i32::MAX, 0, i32::MAX)).is_ok());
    assert!(Model::from_bytes(&model_bytes(3, 1, MAX_NGRAM, 50, MAX_NGRAM)).is_ok());
}

/// The rows of a line collected whole, then summed (what fastText does), for
/// comparison with the chunked sum.
fn naive(m: &Model, text: &str) -> Vec<f32> {
    let mut ids = Vec::new();
    let mut hashes = Vec::new();
    let mut buf = Vec::new();
    let mut push = |r: i32| ids.push(r);
    for t in text.split([' ', '\n']).filter(|t| !t.is_empty()) {
        m.dict
            .add_token(t.as_bytes(), &mut push, &mut hashes, &mut buf);
    }
    m.dict
        .add_token(dict::EOS, &mut push, &mut hashes, &mut buf);
    m.dict
        .add_word_ngrams(&hashes, m.args.word_ngrams, &mut push);
    let mut h = vec![0f32; m.args.dim as usize];
    m.add_rows(&ids, &mut h);
    let a = (1.0 / ids.len() as f64) as f32;
    h.iter().map(|x| x * a).collect()
}

#[test]
fn long_texts_are_summed_in_chunks_exactly() {
    let m = Model::from_bytes(&model_bytes(3, 2, 4, 50, 3)).unwrap();
    let long_token = "hé".repeat(200_000);
    let many = "hello world ünï ".repeat(20_000);
    for text in [long_token.as_str(), many.as_str(), "hello"] {
        let mut s = Scratch::default();
        let n = m.hidden(text.as_bytes(), false, &mut s);
        assert!(n > 0);
        assert_eq!(s.hidden, naive(&m, text), "{}", &text[..5]);
        // The buffer holds a chunk, not the text's millions of rows.
        assert!(s.ids.capacity() <= CHUNK, "{}", s.ids.capacity());
    }
}

#[test]
fn words_past_the_subword_budget_get_the_same_rows() {
    let m = Model::from_bytes(&model_bytes(3, 2, 4, 50, 2)).unwrap();
    let mut cut = Model::from_bytes(&model_bytes(3, 2, 4, 50, 2)).unwrap();
    // As if the budget ran out after `</s>`: `hello` and `world` compute their rows.
    cut.dict.truncate_subwords(1);
    for text in ["hello world", "world </s> hello", "hello\tworld x"] {
        assert_eq!(m.predict(text, 3, 0.0), cut.predict(text, 3, 0.0), "{text}");
    }
}

#[test]
fn top_k_is_the_head_of_every_label_ranked() {
    // The k best through the heap equal the first k of all labels, every loss.
    for loss in [1, 2, 3, 4] {
        let spec = Spec {
            labels: (0..300)
                .map(|i| (format!("__label__{i}"), 1000 - i as i64))
                .collect(),
            output: |i| ((i * 7919) % 101) as f32 / 50.0 - 1.0,
            ..base(loss)
        };
        let m = Model::from_bytes(&spec.bytes()).unwrap();
        let all = m.predict("hello world ünï", 300, 0.0);
        assert_eq!(all.len(), 300, "loss {loss}");
        for k in [1, 2, 7, 150, 299] {
            // The same scores as the head of the ranking; of tied labels, those
            // fastText's heap keeps (tests/fasttext.rs compares them with fastText).
            let top = m.predict("hello world ünï", k, 0.0);
            let probs = |p: &[Prediction]| p.iter().map(|x| x.prob).collect::<Vec<_>>();
            assert_eq!(probs(&top), probs(&all[..k]), "loss {loss} k {k}");
        }
    }
}

#[test]
fn a_word_vector_model_is_refused_from_its_header() {
    // args.model 1 (cbow) or 2 (skipgram): refused before its matrices are read, so
    // a header alone says so (not "truncated").
    let mut b = model_bytes(3, 2, 4, 50, 2);
    b[8 + 7 * 4..8 + 8 * 4].copy_from_slice(&2i32.to_le_bytes());
    b.truncate(8 + 12 * 4 + 8);
    assert!(matches!(
        Model::from_bytes(&b),
        Err(FastTextError::Unsupported(m)) if m.contains("unsupervised")
    ));
}

#[test]
fn tied_labels_are_kept_as_fastexts_heap_keeps_them() {
    // libstdc++'s push_heap/pop_heap with a strict `>`: of two labels with the same
    // probability, a top-1 keeps the later one (the one-vs-all sigmoid is a table of
    // 512 values, so ties are common; the package returns the later label).
    let mut heap = Vec::new();
    for (i, l) in [-1.0f32, -0.5, -0.5, -2.0].into_iter().enumerate() {
        if heap.len() == 1 && l < heap_min(&heap) {
            continue;
        }
        heap_push(&mut heap, 1, Cand(l, i as i32));
    }
    assert_eq!(heap, [Cand(-0.5, 2)]);
    // And a full sort is best first.
    let mut heap = Vec::new();
    for (i, l) in [-3.0f32, -1.0, -2.0, -0.5, -4.0].into_iter().enumerate() {
        heap_push(&mut heap, 10, Cand(l, i as i32));
    }
    sort_heap(&mut heap);
    let labels: Vec<i32> = heap.iter().map(|c| c.1).collect();
    assert_eq!(labels, [3, 1, 2, 0, 4]);
}
