//! Hugging Face tokenizers (`tokenizer.json`, through the `tokenizers` crate): token
//! counts and ids of a batch of texts, and the padded, length-sorted batches an
//! encoder model takes. The file's own truncation and padding settings are replaced by
//! the caller's (counts see every token; a model batch is padded here, to the longest
//! text of the batch). Pure: bytes in, numbers out; batches encode on rayon.
use tokenizers::{
    EncodeInput, Encoding, TruncationDirection, TruncationParams, TruncationStrategy,
};

/// A loaded `tokenizer.json`.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// The pad id the file's padding settings name, if any.
    file_pad_id: Option<u32>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab", &self.vocab_size())
            .finish()
    }
}

/// One text's token ids and their byte offsets (`start, end` of each token in turn).
pub type IdsOffsets = (Vec<u32>, Vec<u32>);

/// Why a tokenizer does not load or encode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TokenizerError(pub String);

/// One padded batch for an encoder: `rows` × `len` ids, attention mask and token type
/// ids (row-major), the rows sorted by token count (shortest first) so a batch pads
/// to similar lengths; `order[r]` is the input index of row `r`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Padded {
    pub rows: usize,
    pub len: usize,
    pub ids: Vec<i64>,
    pub mask: Vec<i64>,
    pub type_ids: Vec<i64>,
    pub order: Vec<usize>,
}

impl Tokenizer {
    /// Parses a `tokenizer.json`; its truncation and padding settings are dropped.
    pub fn from_bytes(bytes: &[u8]) -> Result<Tokenizer, TokenizerError> {
        let mut inner = tokenizers::Tokenizer::from_bytes(bytes)
            .map_err(|e| TokenizerError(format!("not a tokenizer.json: {e}")))?;
        let file_pad_id = inner.get_padding().map(|p| p.pad_id);
        inner
            .with_truncation(None)
            .map_err(|e| TokenizerError(e.to_string()))?;
        inner.with_padding(None);
        Ok(Tokenizer { inner, file_pad_id })
    }

    /// The vocabulary size, added tokens included (the smallest embedding table that
    /// holds every id it produces).
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The id of `token`, if the vocabulary has it.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The id padding uses: the file's padding id if it sets one, else the first of
    /// `[PAD]`, `<pad>`, `<|padding|>` in the vocabulary, else 0 (padding is masked).
    pub fn default_pad_id(&self) -> u32 {
        self.file_pad_id
            .or_else(|| {
                ["[PAD]", "<pad>", "<|padding|>"]
                    .iter()
                    .find_map(|t| self.token_id(t))
            })
            .unwrap_or(0)
    }

    fn encode(
        &self,
        texts: &[&str],
        add_special_tokens: bool,
    ) -> Result<Vec<Encoding>, TokenizerError> {
        let inputs: Vec<EncodeInput> = texts.iter().map(|t| (*t).into()).collect();
        self.inner
            .encode_batch_fast(inputs, add_special_tokens)
            .map_err(|e| TokenizerError(format!("encoding: {e}")))
    }

    /// Tokens per text.
    pub fn counts(
        &self,
        texts: &[&str],
        add_special_tokens: bool,
    ) -> Result<Vec<u32>, TokenizerError> {
        Ok(self
            .encode(texts, add_special_tokens)?
            .iter()
            .map(|e| e.len() as u32)
            .collect())
    }

    /// Token ids per text.
    pub fn ids(
        &self,
        texts: &[&str],
        add_special_tokens: bool,
    ) -> Result<Vec<Vec<u32>>, TokenizerError> {
        Ok(self
            .encode(texts, add_special_tokens)?
            .into_iter()
            .map(|e| e.get_ids().to_vec())
            .collect())
    }

    /// Token ids per text with each token's byte range in the text (`start, end` in
    /// turn). Slower than [`Tokenizer::ids`]: offsets are tracked while encoding.
    pub fn ids_offsets(
        &self,
        texts: &[&str],
        add_special_tokens: bool,
    ) -> Result<Vec<IdsOffsets>, TokenizerError> {
        let inputs: Vec<EncodeInput> = texts.iter().map(|t| (*t).into()).collect();
        let enc = self
            .inner
            .encode_batch(inputs, add_special_tokens)
            .map_err(|e| TokenizerError(format!("encoding: {e}")))?;
        Ok(enc
            .into_iter()
            .map(|e| {
                let offsets = e
                    .get_offsets()
                    .iter()
                    .flat_map(|&(a, b)| [a as u32, b as u32])
                    .collect();
                (e.get_ids().to_vec(), offsets)
            })
            .collect())
    }

    /// A clone truncating to `max_length` tokens (special tokens included), keeping
    /// the start, as `transformers` does with `truncation=True`.
    pub fn truncating(&self, max_length: usize) -> Result<Tokenizer, TokenizerError> {
        let mut inner = self.inner.clone();
        inner
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(|e| TokenizerError(e.to_string()))?;
        Ok(Tokenizer {
            inner,
            file_pad_id: self.file_pad_id,
        })
    }

    /// `texts` encoded (special tokens added), sorted by length and cut into batches
    /// of at most `batch_size` rows, each padded with `pad_id` to its longest row.
    pub fn padded_batches(
        &self,
        texts: &[&str],
        batch_size: usize,
        pad_id: u32,
    ) -> Result<Vec<Padded>, TokenizerError> {
        let enc = self.encode(texts, true)?;
        Ok(pad_sorted(&enc, batch_size.max(1), pad_id))
    }
}

/// Sorts encodings by length (stable, so equal lengths keep input order) and pads
/// each run of `batch_size` to its longest.
fn pad_sorted(enc: &[Encoding], batch_size: usize, pad_id: u32) -> Vec<Padded> {
    let mut order: Vec<usize> = (0..enc.len()).collect();
    order.sort_by_key(|&i| enc[i].len());
    order
        .chunks(batch_size)
        .map(|rows| {
            let len = rows.iter().map(|&i| enc[i].len()).max().unwrap_or(0).max(1);
            let n = rows.len() * len;
            let mut p = Padded {
                rows: rows.len(),
                len,
                ids: vec![pad_id as i64; n],
                mask: vec![0; n],
                type_ids: vec![0; n],
                order: rows.to_vec(),
            };
            for (r, &i) in rows.iter().enumerate() {
                let e = &enc[i];
                let at = r * len;
                for (k, ((&id, &m), &t)) in e
                    .get_ids()
                    .iter()
                    .zip(e.get_attention_mask())
                    .zip(e.get_type_ids())
                    .enumerate()
                {
                    p.ids[at + k] = id as i64;
                    p.mask[at + k] = m as i64;
                    p.type_ids[at + k] = t as i64;
                }
            }
            p
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A tiny BERT-style WordPiece tokenizer.json: lowercasing, whitespace and
    /// punctuation splitting, `[CLS] … [SEP]`.
    pub fn wordpiece_json() -> String {
        let vocab = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", "##s", ".", "a",
            "dog",
        ];
        let v: serde_json::Map<String, serde_json::Value> = vocab
            .iter()
            .enumerate()
            .map(|(i, t)| (t.to_string(), serde_json::json!(i)))
            .collect();
        serde_json::json!({
            "version": "1.0",
            "truncation": {"direction": "Right", "max_length": 3, "strategy": "LongestFirst", "stride": 0},
            "padding": null,
            "added_tokens": [],
            "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                           "strip_accents": null, "lowercase": true},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                   "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
            "decoder": null,
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 100, "vocab": v}
        })
        .to_string()
    }

    #[test]
    fn counts_ids_and_the_files_truncation_is_dropped() {
        let t = Tokenizer::from_bytes(wordpiece_json().as_bytes()).unwrap();
        assert_eq!(t.vocab_size(), 13);
        let texts = ["The cats sat on the mat.", "", "a zebra"];
        assert_eq!(t.counts(&texts, false).unwrap(), [8, 0, 2]);
        assert_eq!(t.counts(&texts, true).unwrap(), [10, 2, 4]);
        assert_eq!(
            t.ids(&texts[..1], false).unwrap(),
            [vec![4, 5, 9, 6, 7, 4, 8, 10]]
        );
        assert_eq!(t.ids(&texts[2..], false).unwrap(), [vec![11, 1]]);
        assert_eq!(t.default_pad_id(), 0);
        let padded = wordpiece_json().replace(
            "\"padding\":null",
            r#""padding":{"strategy":"BatchLongest","direction":"Right","pad_to_multiple_of":null,"pad_id":12,"pad_type_id":0,"pad_token":"dog"}"#,
        );
        let t = Tokenizer::from_bytes(padded.as_bytes()).unwrap();
        assert_eq!(t.default_pad_id(), 12);
        // The file's padding is not applied: counts are unpadded.
        assert_eq!(t.counts(&texts, false).unwrap(), [8, 0, 2]);
    }

    #[test]
    fn batches_sort_by_length_pad_and_truncate() {
        let t = Tokenizer::from_bytes(wordpiece_json().as_bytes())
            .unwrap()
            .truncating(5)
            .unwrap();
        let texts = ["the cat sat on the mat", "dog", "a cat", ""];
        let b = t.padded_batches(&texts, 2, 0).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(
            (b[0].rows, b[0].len, b[0].order.clone()),
            (2, 3, vec![3, 1])
        );
        assert_eq!(b[0].ids, [2, 3, 0, 2, 12, 3]);
        assert_eq!(b[0].mask, [1, 1, 0, 1, 1, 1]);
        assert_eq!((b[1].len, b[1].order.clone()), (5, vec![2, 0]));
        // "the cat sat on the mat" truncated to [CLS] the cat sat [SEP].
        assert_eq!(&b[1].ids[5..], [2, 4, 5, 6, 3]);
        assert_eq!(&b[1].ids[..5], [2, 11, 5, 3, 0]);
        assert!(Tokenizer::from_bytes(b"{}").is_err());
        assert!(Tokenizer::from_bytes(b"not json").is_err());
    }
}
