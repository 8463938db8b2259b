//! `image_model` and `embedding_head` (built with `--features onnx`) against their
//! Python references on real photos, with models scripts/image-model-fixtures.py
//! generates (the real architectures' input/output shapes, tiny widths):
//! * `siglip` preprocessing equals transformers' SiglipImageProcessor, `imagenet` and
//!   the explicit overrides equal torchvision's PIL path (written with Pillow), within
//!   1e-5, and the models' outputs (pooled embeddings, softmax scores by label) equal
//!   onnxruntime-Python's on those tensors within 1e-5;
//! * `image_model`'s `clip` preset writes exactly `clip_embed`'s embeddings, and
//!   `embedding_head` scores them as onnxruntime-Python does;
//! * mismatched models are refused at load naming the param, bad params before any
//!   task, and images the preset cannot take are rejects with a reason.
//!
//! Skipped (with a message) when python3 lacks onnx / onnxruntime / transformers,
//! unless MDF_REQUIRE_ONNX is set (.ci/run sets it).
#![cfg(feature = "onnx")]
mod common;
use common::*;
use mdf::kernels::vision::{IMAGENET_MEAN, IMAGENET_STD, Interpolation, Preprocess, Resize};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const PNGS: [&str; 8] = [
    "astronaut.png",
    "chelsea.png",
    "coffee.png",
    "camera.png",
    "horse.png",
    "logo2.png",
    "motorcycle_left.png",
    "page.png",
];

fn photos() -> PathBuf {
    Path::new(ROOT).join("../shared/data/images/photos")
}

fn script(args: &[&str]) -> Option<serde_json::Value> {
    let mut v = vec![format!("{ROOT}/scripts/image-model-fixtures.py")];
    v.extend(args.iter().map(|s| s.to_string()));
    let v: Vec<&str> = v.iter().map(String::as_str).collect();
    Some(serde_json::from_str(&python(&v)?).unwrap())
}

struct Fixture {
    dir: tempfile::TempDir,
    lib: String,
    pngs: PathBuf,
}

impl Fixture {
    fn model(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
    fn images(&self) -> Vec<String> {
        PNGS.iter()
            .map(|n| self.pngs.join(n).display().to_string())
            .collect()
    }
}

fn fixture() -> Option<Fixture> {
    let lib = match std::env::var("ORT_DYLIB_PATH") {
        Ok(p) => p,
        Err(_) => python(&[
            "-c",
            "import onnxruntime, glob, os; print(sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), 'capi', 'libonnxruntime.so*')))[0])",
        ])?
        .trim()
        .to_string(),
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    python(&[
        &format!("{ROOT}/scripts/image-model-fixtures.py"),
        "models",
        d,
    ])?;
    python(&[&format!("{ROOT}/scripts/onnx-fixtures.py"), "models", d])?;
    let pngs = dir.path().join("pngs");
    std::fs::create_dir_all(&pngs).unwrap();
    for n in PNGS {
        std::fs::copy(photos().join(n), pngs.join(n)).unwrap();
    }
    Some(Fixture { dir, lib, pngs })
}

/// `mdf run` of `stages` over the images in `images`, one worker.
fn run(f: &Fixture, name: &str, stages: &str, images: &Path) -> std::process::Output {
    let out = f.dir.path().join(format!("out-{name}"));
    let spec = write_spec(
        f.dir.path(),
        &format!(
            "name: {name}\ninput: {{uris: [\"{}\"], format: image_folder}}\nstages:\n{stages}\n\
             output: {{uri: \"{}\", drop_columns: [image]}}\n",
            images.display(),
            out.display()
        ),
    );
    mdf()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--workers",
            "1",
            "--job-root",
        ])
        .arg(f.dir.path().join(format!("jobs-{name}")))
        .env("ORT_DYLIB_PATH", &f.lib)
        .output()
        .unwrap()
}

fn floats(v: &serde_json::Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Per output column: file name → its value(s) (an embedding, or one score).
fn by_name(out: &Path, column: &str) -> std::collections::BTreeMap<String, Vec<f32>> {
    use arrow_array::{Array, FixedSizeListArray, Float32Array};
    let mut m = std::collections::BTreeMap::new();
    for b in output_batches(out) {
        let paths = strings(std::slice::from_ref(&b), "path");
        let c = b
            .column_by_name(column)
            .unwrap_or_else(|| panic!("{column}"));
        for (i, p) in paths.iter().enumerate() {
            let name = p.rsplit('/').next().unwrap().to_string();
            let v = if let Some(l) = c.as_any().downcast_ref::<FixedSizeListArray>() {
                let v = l.value(i);
                v.as_any()
                    .downcast_ref::<Float32Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            } else {
                vec![c.as_any().downcast_ref::<Float32Array>().unwrap().value(i)]
            };
            m.insert(name, v);
        }
    }
    m
}

/// mdf's tensor of each image under `p`, compared with the reference's.
fn assert_tensors(p: &Preprocess, images: &[String], reference: &serde_json::Value, what: &str) {
    for (i, path) in images.iter().enumerate() {
        let rgb = image::open(path).unwrap().to_rgb8();
        let mut t = Vec::new();
        p.tensor(
            rgb.as_raw(),
            rgb.width() as usize,
            rgb.height() as usize,
            &mut t,
        )
        .unwrap();
        let diff = max_diff(&t, &floats(&reference["tensors"][i]));
        assert!(
            diff <= 1e-5,
            "{what} {path}: preprocessing differs by {diff}"
        );
    }
}

#[test]
fn siglip_preset_equals_transformers_and_onnxruntime() {
    let Some(f) = fixture() else { return };
    let imgs = f.images();
    let mut args = vec!["siglip", "-", "224"];
    args.extend(imgs.iter().map(String::as_str));
    let Some(r224) = script(&args) else { return };
    assert_tensors(&Preprocess::siglip(224), &imgs, &r224, "siglip 224");
    let dir = f.dir.path().display().to_string();
    args[1] = &dir;
    args[2] = "32";
    let Some(r32) = script(&args) else { return };
    assert_tensors(&Preprocess::siglip(32), &imgs, &r32, "siglip 32");

    // The job: the pooled output (the tower's second output), 3 images per call.
    let o = run(
        &f,
        "siglip",
        &format!(
            "  - op: image_model\n    params: {{model: \"{}\", preset: siglip, output: pooler_output, dim: 24, batch_size: 3}}",
            f.model("siglip-tower.onnx")
        ),
        &f.pngs,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let got = by_name(&f.dir.path().join("out-siglip"), "embedding");
    assert_eq!(got.len(), PNGS.len());
    for (i, n) in PNGS.iter().enumerate() {
        let diff = max_diff(&got[*n], &floats(&r32["outputs"][i]));
        assert!(diff <= 1e-5, "{n}: pooled embedding differs by {diff}");
    }
}

#[test]
fn imagenet_preset_and_overrides_equal_the_pillow_path_of_torchvision() {
    let Some(f) = fixture() else { return };
    let imgs = f.images();
    let (mean, std) = ("0.485,0.456,0.406", "0.229,0.224,0.225");
    let dir = f.dir.path().display().to_string();
    // Every resize mode and filter, reducing and at the models' real size.
    for (size, resize, crop, interp) in [
        (224, "shorter_side", "0.875", "bilinear"),
        (32, "shorter_side", "0.875", "bilinear"),
        (224, "square", "1.0", "nearest"),
        (40, "shorter_side", "1.0", "nearest"),
        (64, "square", "0.9", "bilinear"),
        (48, "shorter_side", "0.95", "bicubic"),
    ] {
        let s = size.to_string();
        let model = if size == 32 { dir.as_str() } else { "-" };
        let mut args = vec!["pillow", model, &s, resize, crop, interp, mean, std];
        args.extend(imgs.iter().map(String::as_str));
        let Some(r) = script(&args) else { return };
        let crop_pct: f64 = crop.parse().unwrap();
        let p = Preprocess {
            size,
            resize: if resize == "square" {
                Resize::Square
            } else {
                Resize::ShorterSide
            },
            resize_to: (size as f64 / crop_pct).floor() as usize,
            interpolation: Interpolation::parse(interp).unwrap(),
            mean: IMAGENET_MEAN,
            std: IMAGENET_STD,
        };
        if (resize, crop, interp) == ("shorter_side", "0.875", "bilinear") {
            assert_eq!(p, Preprocess::imagenet(size));
        }
        assert_tensors(&p, &imgs, &r, &format!("{size} {resize} {crop} {interp}"));
        if size != 32 {
            continue;
        }
        // The classifier's 1000 logits as softmax scores, two labels kept.
        let labels: Vec<String> = (0..1000).map(|i| format!("c{i}")).collect();
        let o = run(
            &f,
            "imagenet",
            &format!(
                "  - op: image_model\n    params: {{model: \"{}\", preset: imagenet, scores: softmax, name: cls, labels: [{}], keep: [c3, c500], batch_size: 5}}",
                f.model("imagenet-classifier.onnx"),
                labels.join(", ")
            ),
            &f.pngs,
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let out = f.dir.path().join("out-imagenet");
        for (col, k) in [("cls_c3", 3), ("cls_c500", 500)] {
            let got = by_name(&out, col);
            for (i, n) in PNGS.iter().enumerate() {
                let want = r["softmax"][i][k].as_f64().unwrap() as f32;
                let diff = (got[*n][0] - want).abs();
                assert!(diff <= 1e-5, "{n} {col}: {} vs {want}", got[*n][0]);
            }
        }
    }
}

#[test]
fn clip_preset_equals_clip_embed_and_heads_score_its_embeddings() {
    let Some(f) = fixture() else { return };
    let stages = format!(
        "  - op: clip_embed\n    params: {{model: \"{clip}\", dim: 16, batch_size: 3}}\n\
         \x20 - op: image_model\n    params: {{model: \"{clip}\", preset: clip, dim: 16, normalize: true, name: emb2}}\n\
         \x20 - op: embedding_head\n    params: {{model: \"{aes}\", normalize_input: true, name: aesthetic, batch_size: 2}}\n\
         \x20 - op: embedding_head\n    name: detector\n    params: {{model: \"{det}\", scores: softmax, name: aigc, labels: [real, fake], keep: [fake]}}",
        clip = f.model("clip-image.onnx"),
        aes = f.model("aesthetic-head.onnx"),
        det = f.model("detector-head.onnx"),
    );
    let o = run(&f, "heads", &stages, &f.pngs);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = f.dir.path().join("out-heads");
    let a = by_name(&out, "embedding");
    let b = by_name(&out, "emb2");
    assert_eq!(a.len(), PNGS.len());
    for (n, v) in &a {
        let same = v.iter().zip(&b[n]).all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(
            same,
            "{n}: image_model's clip preset differs from clip_embed"
        );
    }
    let names: Vec<&String> = a.keys().collect();
    let rows: Vec<&Vec<f32>> = a.values().collect();
    let rows_file = f.dir.path().join("rows.json");
    std::fs::write(&rows_file, serde_json::to_string(&rows).unwrap()).unwrap();
    let rows_file = rows_file.display().to_string();
    let aes = f.model("aesthetic-head.onnx");
    let Some(want) = script(&["head", &aes, &rows_file]) else {
        return;
    };
    let got = by_name(&out, "aesthetic");
    for (i, n) in names.iter().enumerate() {
        let w = want[i][0].as_f64().unwrap() as f32;
        assert!((got[*n][0] - w).abs() <= 1e-5, "{n}: {} vs {w}", got[*n][0]);
    }
    let det = f.model("detector-head.onnx");
    let Some(want) = script(&["head", &det, &rows_file]) else {
        return;
    };
    let got = by_name(&out, "aigc_fake");
    for (i, n) in names.iter().enumerate() {
        let l = floats(&want[i]);
        let p = 1.0 / (1.0 + (l[0] - l[1]).exp());
        assert!((got[*n][0] - p).abs() <= 1e-5, "{n}: {} vs {p}", got[*n][0]);
    }
}

#[test]
fn mismatched_models_and_bad_params_are_refused_naming_the_param() {
    let Some(f) = fixture() else { return };
    let one = f.dir.path().join("one");
    std::fs::create_dir_all(&one).unwrap();
    std::fs::copy(photos().join("chelsea.png"), one.join("chelsea.png")).unwrap();
    let sig = f.model("siglip-tower.onnx");
    let cls = f.model("imagenet-classifier.onnx");
    let aes = f.model("aesthetic-head.onnx");
    let im = |p: &str| format!("  - op: image_model\n    params: {{{p}}}");
    let cases = [
        (
            im(&format!("model: \"{sig}\", preset: siglip, dim: 24")),
            "choose another with params.output",
        ),
        (
            im(&format!(
                "model: \"{sig}\", input: image, output: pooler_output, dim: 24"
            )),
            "params.input is \"image\", but params.model",
        ),
        (
            im(&format!("model: \"{sig}\", output: embeds, dim: 24")),
            "params.output is \"embeds\"",
        ),
        (
            im(&format!("model: \"{sig}\", output: pooler_output, dim: 32")),
            "params.dim is 32, but the model's embeddings have 24",
        ),
        (
            im(&format!(
                "model: \"{sig}\", output: pooler_output, dim: 24, size: 64"
            )),
            "params.size is 64, but the model takes 32×32 images",
        ),
        (
            im(&format!(
                "model: \"{sig}\", output: pooler_output, dim: 24, precision: fp16"
            )),
            "params.precision is fp16, but the model's input is fp32",
        ),
        (
            im(&format!("model: \"{cls}\", scores: raw")),
            "the model's output has 1000 scores: name them in params.labels",
        ),
        (
            im(&format!(
                "model: \"{cls}\", scores: sigmoid, labels: [a, b]"
            )),
            "params.labels names 2 scores, but the model's output has 1000",
        ),
        (
            im(&format!("model: \"{aes}\", scores: raw")),
            "expected [batch, 3, size, size] images",
        ),
        (
            format!(
                "{}\n  - op: embedding_head\n    params: {{model: \"{aes}\"}}",
                im(&format!("model: \"{sig}\", output: pooler_output, dim: 24"))
            ),
            "params.column: \"embedding\" holds 24-wide embeddings, but params.model",
        ),
        (
            format!(
                "{}\n  - op: embedding_head\n    params: {{model: \"{sig}\"}}",
                im(&format!("model: \"{sig}\", output: pooler_output, dim: 24"))
            ),
            "expected [batch, width] embeddings",
        ),
    ];
    for (i, (stages, want)) in cases.iter().enumerate() {
        let o = run(&f, &format!("bad{i}"), stages, &one);
        assert!(!o.status.success(), "{stages} should fail");
        assert!(stderr(&o).contains(want), "{stages}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    }
    // Refused before any task starts, at the param's path.
    for (params, want) in [
        (
            "{model: m.onnx, preset: vit, dim: 8}",
            "stages[0].params.preset",
        ),
        (
            "{model: m.onnx, interpolation: lanczos, dim: 8}",
            "stages[0].params.interpolation",
        ),
        (
            "{model: m.onnx, resize: crop, dim: 8}",
            "stages[0].params.resize",
        ),
        ("{model: m.onnx}", "stages[0].params.dim"),
        ("{model: m.onnx, scores: tanh}", "stages[0].params.scores"),
        (
            "{model: m.onnx, scores: raw, keep: [a]}",
            "stages[0].params.keep",
        ),
        (
            "{model: m.onnx, dim: 8, crop_pct: 2}",
            "stages[0].params.crop_pct",
        ),
        (
            "{model: m.onnx, dim: 8, std: [1, 0, 1]}",
            "stages[0].params.std",
        ),
    ] {
        let spec = write_spec(
            f.dir.path(),
            &format!(
                "name: spec\ninput: {{uris: [\"{}\"], format: image_folder}}\nstages:\n  - op: image_model\n    params: {params}\noutput: {{uri: \"{}/o\"}}\n",
                one.display(),
                f.dir.path().display()
            ),
        );
        let o = mdf()
            .args(["run", spec.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{params}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{params}: {}", stderr(&o));
    }
}

#[test]
fn images_the_preset_cannot_take_are_rejects_with_a_reason() {
    let Some(f) = fixture() else { return };
    let dir = f.dir.path().join("odd");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(photos().join("chelsea.png"), dir.join("chelsea.png")).unwrap();
    // A 2×300 strip: a shorter-side resize would make it 32×4800, which the filtered
    // resizes take (computing only the crop) and nearest refuses.
    image::RgbImage::from_pixel(2, 300, image::Rgb([9, 99, 199]))
        .save(dir.join("strip.png"))
        .unwrap();
    let png = std::fs::read(photos().join("coffee.png")).unwrap();
    std::fs::write(dir.join("truncated.png"), &png[..png.len() / 3]).unwrap();
    let o = run(
        &f,
        "odd",
        &format!(
            "  - op: image_model\n    params: {{model: \"{}\", dim: 16, interpolation: nearest}}",
            f.model("clip-image.onnx")
        ),
        &dir,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = f.dir.path().join("out-odd");
    assert_eq!(by_name(&out, "embedding").len(), 1);
    let m = manifest(&out);
    let mut reasons = Vec::new();
    for r in m["rejects"].as_array().unwrap() {
        let b = read_parquet(&out.join("_rejects").join(r["path"].as_str().unwrap()));
        reasons.extend(strings(&b, "reason"));
    }
    reasons.sort();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons.contains(&"unprocessable_image".to_string()),
        "{reasons:?}"
    );
    // The same strip under a square resize (siglip), or clip's bicubic shorter-side
    // resize, is an ordinary image.
    let o = run(
        &f,
        "odd2",
        &format!(
            "  - op: image_model\n    params: {{model: \"{}\", preset: siglip, dim: 16}}",
            f.model("clip-image.onnx")
        ),
        &dir,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        by_name(&f.dir.path().join("out-odd2"), "embedding").len(),
        2
    );
    let o = run(
        &f,
        "odd3",
        &format!(
            "  - op: image_model\n    params: {{model: \"{}\", dim: 16}}",
            f.model("clip-image.onnx")
        ),
        &dir,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        by_name(&f.dir.path().join("out-odd3"), "embedding").len(),
        2
    );
}
