//! `tokenize`: token counts (and optionally token ids) of a text column with any
//! Hugging Face `tokenizer.json` (`tokenizer`, fetched by the worker), encoded in
//! parallel through the `tokenizers` crate. Adds `count_column` (UInt32, histogrammed)
//! and, with `ids`, `ids_column` (List<UInt32>); a null text gets nulls. The stage's
//! stats total the counts over every record that reaches it, per language (the
//! `language_column`, when the input has it) and per source (the input file), shown
//! by `mdf status` and the report. The file's own truncation and padding are ignored:
//! every token counts.
use super::params::{Params, params};
use super::{
    Asset, LoadError, OpDef, Operator, Output, ProcessError, SchemaError, Total, require_text,
    text_values,
};
use crate::kernels::hf_tokenizer::Tokenizer;
use crate::spec::reader::Obj;
use arrow_array::builder::{ListBuilder, UInt32Builder};
use arrow_array::{ArrayRef, RecordBatch, UInt32Array};
use arrow_schema::{DataType, Field, Schema};
use std::sync::{Arc, OnceLock};

pub const DEF: OpDef = OpDef {
    name: "tokenize",
    summary: "token counts (and ids) with a tokenizer.json; totals per language and source",
    params: TokenizeParams::describe,
    example: r#"{"tokenizer": "models/tokenizer.json"}"#,
    feature: None,
    build: Some(build),
};

params! {
    /// `tokenize`.
    pub struct TokenizeParams {
        /// A Hugging Face `tokenizer.json` (path or URI), fetched by the worker.
        tokenizer: String,
        /// The text column.
        field: String = "text",
        /// The added count column (UInt32).
        count_column: String = "token_count",
        /// Also write the token ids (List<UInt32>).
        ids: bool = false,
        /// The ids column (with `ids`).
        ids_column: String = "token_ids",
        /// Also write each token's byte range in the text (List<UInt32>: start and
        /// end of each token in turn), which a substring dedup over tokens cuts by.
        offsets: bool = false,
        /// The offsets column (with `offsets`).
        offsets_column: String = "token_offsets",
        /// Count the tokenizer's special tokens (`[CLS]`, `<s>`, ...) as a model
        /// would see them.
        add_special_tokens: bool = false,
        /// The column whose values the stats total tokens by, when the input has it
        /// (`language_filter` writes `language`).
        language_column: String = "language",
        /// Texts per encoding call (each call runs in parallel).
        batch_size: usize [1, 1048576] = 1024,
    }
}

struct Tokenize {
    p: TokenizeParams,
    tokenizer: OnceLock<Tokenizer>,
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = TokenizeParams::read(o)?;
    if p.ids && p.ids_column == p.count_column {
        o.error("ids_column", "must differ from count_column");
    }
    if p.offsets && [&p.count_column, &p.ids_column].contains(&&p.offsets_column) {
        o.error(
            "offsets_column",
            "must differ from count_column and ids_column",
        );
    }
    Some(Box::new(Tokenize {
        p,
        tokenizer: OnceLock::new(),
    }))
}

impl Operator for Tokenize {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        require_text(input, &self.p.field)?;
        let mut out = vec![Field::new(&self.p.count_column, DataType::UInt32, true)];
        let list = || DataType::List(Arc::new(Field::new("item", DataType::UInt32, true)));
        if self.p.ids {
            out.push(Field::new(&self.p.ids_column, list(), true));
        }
        if self.p.offsets {
            out.push(Field::new(&self.p.offsets_column, list(), true));
        }
        Ok(out)
    }
    fn assets(&self) -> Vec<Asset> {
        vec![Asset {
            param: "params.tokenizer".into(),
            uri: self.p.tokenizer.clone(),
        }]
    }
    fn load(&self, assets: &[(Asset, bytes::Bytes)]) -> Result<(), LoadError> {
        let (a, bytes) = assets
            .first()
            .ok_or_else(|| LoadError::Invalid("params.tokenizer was not fetched".into()))?;
        let t = Tokenizer::from_bytes(bytes).map_err(|e| LoadError::Asset {
            param: a.param.clone(),
            uri: a.uri.clone(),
            message: e.0,
        })?;
        let _ = self.tokenizer.set(t);
        Ok(())
    }
    fn histograms(&self) -> Vec<String> {
        vec![self.p.count_column.clone()]
    }
    fn totals(&self) -> Vec<Total> {
        vec![Total {
            column: self.p.count_column.clone(),
            by: vec![self.p.language_column.clone()],
            by_source: true,
        }]
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let tok = self
            .tokenizer
            .get()
            .ok_or(ProcessError::NotLoaded("tokenize"))?;
        let texts = text_values(batch, &self.p.field)?;
        let present: Vec<&str> = texts.iter().flatten().copied().collect();
        let special = self.p.add_special_tokens;
        let fail = |e: crate::kernels::hf_tokenizer::TokenizerError| {
            ProcessError::Model(super::ModelError::Model(format!("params.tokenizer: {e}")))
        };
        let mut ids: Vec<Vec<u32>> = Vec::new();
        let mut offsets: Vec<Vec<u32>> = Vec::new();
        let mut counts: Vec<u32> = Vec::with_capacity(present.len());
        for chunk in present.chunks(self.p.batch_size) {
            if self.p.offsets {
                for (i, o) in tok.ids_offsets(chunk, special).map_err(fail)? {
                    counts.push(i.len() as u32);
                    if self.p.ids {
                        ids.push(i);
                    }
                    offsets.push(o);
                }
            } else if self.p.ids {
                let got = tok.ids(chunk, special).map_err(fail)?;
                counts.extend(got.iter().map(|v| v.len() as u32));
                ids.extend(got);
            } else {
                counts.extend(tok.counts(chunk, special).map_err(fail)?);
            }
        }
        let mut k = 0;
        let count_col: UInt32Array = texts
            .iter()
            .map(|t| {
                t.map(|_| {
                    k += 1;
                    counts[k - 1]
                })
            })
            .collect();
        let mut cols = vec![Arc::new(count_col) as ArrayRef];
        let list = |v: Vec<Vec<u32>>| -> ArrayRef {
            let mut b = ListBuilder::new(UInt32Builder::new());
            let mut it = v.into_iter();
            for t in &texts {
                match t {
                    Some(_) => {
                        b.values()
                            .append_slice(&it.next().expect("one encoding per text"));
                        b.append(true);
                    }
                    None => b.append(false),
                }
            }
            Arc::new(b.finish())
        };
        if self.p.ids {
            cols.push(list(ids));
        }
        if self.p.offsets {
            cols.push(list(offsets));
        }
        Ok(Output::columns(cols))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::hf_tokenizer::tests::wordpiece_json;
    use crate::ops::testing::{build, text_batch};
    use crate::ops::{histogram_columns, output_schema, run_stage};
    use arrow_array::{Array, ListArray};

    fn loaded(params: serde_json::Value) -> Box<dyn Operator> {
        let op = build(&DEF, params).unwrap();
        let assets: Vec<(Asset, bytes::Bytes)> = op
            .assets()
            .into_iter()
            .map(|a| (a, bytes::Bytes::from(wordpiece_json())))
            .collect();
        op.load(&assets).unwrap();
        op
    }

    /// Offsets are byte ranges of the text, one pair per id, and the ids are those
    /// written without offsets.
    #[test]
    fn offsets_are_the_tokens_byte_ranges() {
        let op = loaded(serde_json::json!({"tokenizer": "t.json", "ids": true, "offsets": true}));
        let plain = loaded(serde_json::json!({"tokenizer": "t.json", "ids": true}));
        let texts = [Some("The cät sat. The dog"), None, Some("")];
        let batch = text_batch(&texts);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (out, _) = run_stage("tok", op.as_ref(), batch.clone(), &schema, false).unwrap();
        let s2 = output_schema(plain.as_ref(), &batch.schema()).unwrap();
        let (p, _) = run_stage("tok", plain.as_ref(), batch, &s2, false).unwrap();
        let col = |b: &RecordBatch, c: &str| {
            b.column_by_name(c)
                .unwrap()
                .as_any()
                .downcast_ref::<ListArray>()
                .unwrap()
                .clone()
        };
        assert_eq!(col(&out, "token_ids"), col(&p, "token_ids"));
        let (ids, offs) = (col(&out, "token_ids"), col(&out, "token_offsets"));
        assert!(offs.is_null(1));
        let o = offs.value(0);
        let o = o
            .as_any()
            .downcast_ref::<arrow_array::UInt32Array>()
            .unwrap();
        assert_eq!(o.len(), 2 * ids.value(0).len());
        let t = texts[0].unwrap();
        let words: Vec<&str> = o
            .values()
            .chunks(2)
            .map(|w| &t[w[0] as usize..w[1] as usize])
            .collect();
        assert_eq!(words.first(), Some(&"The"));
        assert!(words.contains(&"sat") && words.contains(&"."), "{words:?}");
        assert!(build(
            &DEF,
            serde_json::json!({"tokenizer": "t", "offsets": true, "offsets_column": "token_count"})
        )
        .is_err());
    }

    #[test]
    fn counts_and_ids_with_nulls() {
        let op = loaded(serde_json::json!({"tokenizer": "t.json", "ids": true}));
        let batch = text_batch(&[Some("The cat sat."), None, Some("")]);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        assert_eq!(
            histogram_columns(op.as_ref(), &batch.schema()),
            ["token_count"]
        );
        let (out, rejects) = run_stage("tok", op.as_ref(), batch, &schema, false).unwrap();
        assert!(rejects.is_empty());
        let c = out
            .column_by_name("token_count")
            .unwrap()
            .as_any()
            .downcast_ref::<UInt32Array>()
            .unwrap();
        assert_eq!(c.iter().collect::<Vec<_>>(), [Some(4), None, Some(0)]);
        let ids = out
            .column_by_name("token_ids")
            .unwrap()
            .as_any()
            .downcast_ref::<ListArray>()
            .unwrap();
        assert!(ids.is_null(1));
        let first = ids.value(0);
        let first = first.as_any().downcast_ref::<UInt32Array>().unwrap();
        assert_eq!(first.values().to_vec(), [4, 5, 6, 10]);
        let op = loaded(serde_json::json!({"tokenizer": "t.json", "add_special_tokens": true}));
        let batch = text_batch(&[Some("The cat sat.")]);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (out, _) = run_stage("tok", op.as_ref(), batch, &schema, false).unwrap();
        let c = out
            .column(2)
            .as_any()
            .downcast_ref::<UInt32Array>()
            .unwrap();
        assert_eq!(c.value(0), 6);
    }

    #[test]
    fn bad_params_and_tokenizers_are_refused_naming_the_param() {
        assert_eq!(
            build(&DEF, serde_json::json!({})).err().unwrap(),
            ["params.tokenizer: missing required field"]
        );
        assert_eq!(
            build(
                &DEF,
                serde_json::json!({"tokenizer": "t", "ids": true, "ids_column": "token_count"})
            )
            .err()
            .unwrap(),
            ["params.ids_column: must differ from count_column"]
        );
        let op = build(&DEF, serde_json::json!({"tokenizer": "t.json"})).unwrap();
        let a = op.assets();
        let e = op
            .load(&[(a[0].clone(), bytes::Bytes::from_static(b"{\"model\": 3}"))])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("params.tokenizer (t.json): not a tokenizer.json"),
            "{e}"
        );
        // Not loaded: an error, not a panic.
        let batch = text_batch(&[Some("x")]);
        assert!(op.process(&batch).is_err());
    }
}
