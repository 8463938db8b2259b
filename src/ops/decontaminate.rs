//! `decontaminate`: drops (or tags) documents that share a word n-gram with an item of
//! an evaluation benchmark, normalised and cut into words as datatrove 0.10's n-gram
//! decontamination does ([`crate::kernels::decont`]), so the same documents are
//! flagged. The benchmarks are JSONL (optionally gzipped) or Parquet files; an item's
//! text is its `fields` in order (a question, then its answer), and every n-gram of
//! it counts, those across fields too. Which items matched which documents goes to the
//! stage's side table (`<output>/_tables/<stage>/`): one row per document and item,
//! with the first shared n-gram. The coordinator loads the benchmarks at submit, so a
//! file without one usable item is refused before any task starts.
use super::params::{Params, params};
use super::{Asset, Drop, LoadError, OpDef, Operator, Output, ProcessError, SchemaError};
use crate::kernels::decont::{Index, Match};
use crate::spec::reader::Obj;
use arrow_array::builder::{StringBuilder, UInt32Builder};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use std::sync::{Arc, OnceLock};

pub const DEF: OpDef = OpDef {
    name: "decontaminate",
    summary: "drops or tags documents sharing a word n-gram with a benchmark item (datatrove's n-gram decontamination); matches in a side table",
    params: DecontParams::describe,
    example: r#"{"benchmarks": ["evals/mmlu.jsonl"], "fields": ["question", "answer"]}"#,
    feature: None,
    build: Some(build),
};

params! {
    /// `decontaminate`.
    pub struct DecontParams {
        /// Benchmark files (paths or URIs): JSONL, gzipped JSONL or Parquet (by the
        /// `.parquet` suffix), one item per line or row. A benchmark is named by its
        /// file name without extensions.
        benchmarks: Vec<String>,
        /// The fields of an item whose text is matched, in order: strings, lists of
        /// strings, or numbers; a field an item lacks or holds null is skipped.
        fields: Vec<String>,
        /// The field naming an item in the side table; without it, its line or row
        /// number (from 0).
        id_field: Option<String>,
        /// Words per n-gram (13 as GPT-3 used; datatrove's default is 12).
        n: usize [1, 1000] = 13,
        /// The text column of the documents.
        field: String = "text",
        /// `drop`: contaminated documents become rejects (`contaminated`, detail: the
        /// benchmark, item and n-gram); `tag`: they are kept, and the columns say it.
        action: String = "drop",
        /// The column naming the benchmark of a document's first match (null when
        /// clean); `<column>_items` counts the items it matched.
        column: String = "contamination",
        /// The most items of one document listed in the side table (the first ones
        /// it matches; `<column>_items` counts them all): a page that dumps a whole
        /// benchmark does not write a row per item.
        max_table_items: usize [1, 1000000] = 100,
    }
}

struct Op {
    p: DecontParams,
    drop: bool,
    index: OnceLock<Index>,
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = DecontParams::read(o)?;
    let drop = match p.action.as_str() {
        "drop" => true,
        "tag" => false,
        _ => {
            o.error("action", "expected drop or tag");
            true
        }
    };
    if p.benchmarks.is_empty() {
        o.error("benchmarks", "name at least one benchmark file");
    }
    if p.fields.is_empty() {
        o.error("fields", "name at least one field of the benchmark items");
    }
    Some(Box::new(Op {
        p,
        drop,
        index: OnceLock::new(),
    }))
}

/// The benchmarks' names: each file's name without extensions (`mmlu.jsonl.gz` →
/// `mmlu`), with as many of its folders as it takes to tell them apart (Hugging Face
/// layouts name every file `test-00000-of-00001.parquet`: `mmlu/test-00000-of-00001`).
fn benchmark_names(uris: &[String]) -> Vec<String> {
    let parts: Vec<Vec<&str>> = uris
        .iter()
        .map(|u| {
            let mut p: Vec<&str> = u.split('/').filter(|s| !s.is_empty()).collect();
            if let Some(last) = p.last_mut() {
                *last = last
                    .split('.')
                    .next()
                    .filter(|s| !s.is_empty())
                    .unwrap_or(last);
            }
            p
        })
        .collect();
    let name = |p: &[&str], k: usize| p[p.len().saturating_sub(k)..].join("/");
    let longest = parts.iter().map(Vec::len).max().unwrap_or(1);
    (1..=longest)
        .map(|k| parts.iter().map(|p| name(p, k)).collect::<Vec<_>>())
        .find(|names| {
            let set: std::collections::BTreeSet<&String> = names.iter().collect();
            set.len() == names.len()
        })
        .unwrap_or_else(|| uris.to_vec())
}

/// The text segments of one JSON value of a field.
fn segments_of(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Number(n) => out.push(n.to_string()),
        serde_json::Value::Bool(b) => out.push(b.to_string()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| segments_of(x, out)),
        // SQuAD's `answers: {text: [...], answer_start: [...]}`: its strings.
        serde_json::Value::Object(o) => o
            .values()
            .filter(|x| !x.is_number())
            .for_each(|x| segments_of(x, out)),
        serde_json::Value::Null => {}
    }
}

/// The most text a gzipped benchmark may inflate to (the largest public benchmarks
/// are a few hundred MB).
const MAX_BENCHMARK_BYTES: u64 = 2 << 30;

/// The items of a benchmark file as (id, segments), JSON objects either way.
fn items(bytes: &[u8], uri: &str, p: &DecontParams) -> Result<Vec<(String, Vec<String>)>, String> {
    let rows: Vec<serde_json::Map<String, serde_json::Value>> = if uri.ends_with(".parquet") {
        parquet_rows(bytes)?
    } else {
        let text = if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut s = String::new();
            let gz = flate2::read::MultiGzDecoder::new(bytes);
            std::io::Read::read_to_string(
                &mut std::io::Read::take(gz, MAX_BENCHMARK_BYTES + 1),
                &mut s,
            )
            .map_err(|e| format!("not gzipped UTF-8 JSONL: {e}"))?;
            if s.len() as u64 > MAX_BENCHMARK_BYTES {
                return Err(format!(
                    "inflates to over {} GiB: not a benchmark (a gzip bomb?)",
                    MAX_BENCHMARK_BYTES >> 30
                ));
            }
            s
        } else {
            String::from_utf8(bytes.to_vec()).map_err(|e| format!("not UTF-8: {e}"))?
        };
        let mut rows = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<serde_json::Value>(line) {
                Ok(serde_json::Value::Object(m)) => rows.push(m),
                Ok(_) => return Err(format!("line {}: not a JSON object", i + 1)),
                Err(e) => return Err(format!("line {}: {e}", i + 1)),
            }
        }
        rows
    };
    Ok(rows
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            let id = match p.id_field.as_ref().and_then(|f| row.get(f)) {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(v) if !v.is_null() => v.to_string(),
                _ => i.to_string(),
            };
            let mut segs = Vec::new();
            for f in &p.fields {
                if let Some(v) = row.get(f) {
                    segments_of(v, &mut segs);
                }
            }
            (id, segs)
        })
        .collect())
}

fn parquet_rows(bytes: &[u8]) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, String> {
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::copy_from_slice(bytes),
    )
    .and_then(|b| b.build())
    .map_err(|e| format!("not Parquet: {e}"))?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| format!("not Parquet: {e}"))?;
        let mut w = arrow_json::ArrayWriter::new(Vec::new());
        w.write(&batch).map_err(|e| e.to_string())?;
        w.finish().map_err(|e| e.to_string())?;
        let json: Vec<serde_json::Map<String, serde_json::Value>> =
            serde_json::from_slice(&w.into_inner()).map_err(|e| e.to_string())?;
        rows.extend(json);
    }
    Ok(rows)
}

fn table_schema() -> SchemaRef {
    static S: OnceLock<SchemaRef> = OnceLock::new();
    S.get_or_init(|| {
        Arc::new(Schema::new(vec![
            Field::new(crate::records::ID, DataType::Utf8, false),
            Field::new("benchmark", DataType::Utf8, false),
            Field::new("item", DataType::Utf8, false),
            Field::new("ngram", DataType::Utf8, false),
        ]))
    })
    .clone()
}

impl Operator for Op {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        super::require_text(input, &self.p.field)?;
        Ok(vec![
            Field::new(&self.p.column, DataType::Utf8, true),
            Field::new(format!("{}_items", self.p.column), DataType::UInt32, false),
        ])
    }

    fn assets(&self) -> Vec<Asset> {
        self.p
            .benchmarks
            .iter()
            .enumerate()
            .map(|(i, uri)| Asset {
                param: format!("params.benchmarks[{i}]"),
                uri: uri.clone(),
            })
            .collect()
    }

    fn load(&self, assets: &[(Asset, bytes::Bytes)]) -> Result<(), LoadError> {
        if self.index.get().is_some() {
            return Ok(());
        }
        let mut index = Index::new(self.p.n);
        let names = benchmark_names(&self.p.benchmarks);
        for (k, (a, bytes)) in assets.iter().enumerate() {
            let bad = |message: String| LoadError::Asset {
                param: a.param.clone(),
                uri: a.uri.clone(),
                message,
            };
            let rows = items(bytes, &a.uri, &self.p).map_err(bad)?;
            let b = index.benchmark(names.get(k).unwrap_or(&a.uri));
            let mut usable = 0;
            for (id, segs) in rows {
                let refs: Vec<&str> = segs.iter().map(String::as_str).collect();
                if index.add(b, id, &refs) > 0 {
                    usable += 1;
                }
            }
            if usable == 0 {
                return Err(bad(format!(
                    "no item has {} words in fields {:?}: an empty benchmark would decontaminate nothing",
                    self.p.n, self.p.fields
                )));
            }
        }
        let _ = self.index.set(index);
        Ok(())
    }

    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        use rayon::prelude::*;
        let index = self
            .index
            .get()
            .ok_or(ProcessError::NotLoaded("decontaminate"))?;
        let texts = super::text_values(batch, &self.p.field)?;
        let found: Vec<Vec<Match>> = texts
            .par_iter()
            .map(|t| t.map(|t| index.matches(t)).unwrap_or_default())
            .collect();
        let ids = batch
            .column_by_name(crate::records::ID)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>());
        let name = |m: &Match| {
            let it = &index.items[m.item as usize];
            (
                index.benchmarks[it.benchmark as usize].as_str(),
                it.id.as_str(),
            )
        };
        let mut first = StringBuilder::new();
        let mut count = UInt32Builder::new();
        let mut t: [StringBuilder; 4] = Default::default();
        let mut verdicts = Vec::with_capacity(found.len());
        for (row, ms) in found.iter().enumerate() {
            count.append_value(ms.len() as u32);
            let Some(m0) = ms.first() else {
                first.append_null();
                verdicts.push(None);
                continue;
            };
            let (b0, i0) = name(m0);
            first.append_value(b0);
            verdicts.push(self.drop.then(|| Drop {
                reason: "contaminated",
                detail: Some(format!("{b0}:{i0}: {}", m0.ngram)),
            }));
            for m in ms.iter().take(self.p.max_table_items) {
                let (b, i) = name(m);
                t[0].append_value(ids.map(|a| a.value(row)).unwrap_or_default());
                t[1].append_value(b);
                t[2].append_value(i);
                t[3].append_value(&m.ngram);
            }
        }
        let columns: Vec<ArrayRef> = vec![Arc::new(first.finish()), Arc::new(count.finish())];
        let rows = RecordBatch::try_new(
            table_schema(),
            t.iter_mut()
                .map(|b| Arc::new(b.finish()) as ArrayRef)
                .collect(),
        )?;
        Ok(Output::annotated(columns, verdicts).with_table(rows))
    }

    fn histograms(&self) -> Vec<String> {
        vec![format!("{}_items", self.p.column)]
    }

    fn table(&self) -> Option<SchemaRef> {
        Some(table_schema())
    }

    fn load_at_plan(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing;

    fn op(params: serde_json::Value, files: &[(&str, &[u8])]) -> Box<dyn Operator> {
        let op = testing::build(&DEF, params).unwrap();
        let assets: Vec<(Asset, bytes::Bytes)> = op
            .assets()
            .into_iter()
            .zip(files)
            .map(|(a, (_, b))| (a, bytes::Bytes::copy_from_slice(b)))
            .collect();
        op.load(&assets).unwrap();
        op
    }

    const QUIZ: &[u8] = b"{\"id\": \"q1\", \"question\": \"Which river flows through the old town of\", \"answer\": \"the city of Prague in Bohemia\"}\n{\"id\": 7, \"question\": \"short\"}\n";

    #[test]
    fn drops_documents_sharing_an_ngram_across_fields_and_reports_them() {
        let op = op(
            serde_json::json!({"benchmarks": ["evals/quiz.jsonl"], "fields": ["question", "answer"], "id_field": "id", "n": 5}),
            &[("evals/quiz.jsonl", QUIZ)],
        );
        let batch = testing::text_batch(&[
            Some("Trivia: which RIVER flows through the Old Town... of the city?"),
            Some("the old town of the city of Prague"),
            Some("nothing to see here at all, move on"),
            None,
        ]);
        let out = op.process(&batch).unwrap();
        let v = out.verdicts.unwrap();
        assert_eq!(v[0].as_ref().unwrap().reason, "contaminated");
        assert_eq!(
            v[0].as_ref().unwrap().detail.as_deref(),
            Some("quiz:q1: which river flows through the")
        );
        assert!(v[1].is_some(), "an n-gram across question and answer");
        assert!(v[2].is_none() && v[3].is_none());
        let table = out.table.unwrap();
        assert_eq!(table.num_rows(), 2);
        let col = |i: usize| {
            let a = table
                .column(i)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            (0..a.len())
                .map(|r| a.value(r).to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(col(1), ["quiz", "quiz"]);
        assert_eq!(col(2), ["q1", "q1"]);
        assert_eq!(
            col(3)[1],
            "the old town of the",
            "across question and answer"
        );
    }

    #[test]
    fn benchmarks_are_named_apart_by_their_folders() {
        let n = |u: &[&str]| benchmark_names(&u.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            n(&["evals/mmlu.jsonl.gz", "s3://b/gsm8k.parquet"]),
            ["mmlu", "gsm8k"]
        );
        assert_eq!(
            n(&[
                "hf/mmlu/test-00000-of-00001.parquet",
                "hf/gsm8k/test-00000-of-00001.parquet"
            ]),
            ["mmlu/test-00000-of-00001", "gsm8k/test-00000-of-00001"]
        );
    }

    #[test]
    fn tags_instead_of_dropping() {
        let op = op(
            serde_json::json!({"benchmarks": ["quiz.jsonl"], "fields": ["question", "answer"], "n": 5, "action": "tag"}),
            &[("quiz.jsonl", QUIZ)],
        );
        let out = op
            .process(&testing::text_batch(&[
                Some("which river flows through the old town"),
                Some("clean"),
            ]))
            .unwrap();
        assert!(out.verdicts.unwrap().iter().all(Option::is_none));
        let first = out.columns[0]
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!((first.value(0), first.is_null(1)), ("quiz", true));
    }

    #[test]
    fn a_benchmark_without_a_usable_item_is_refused_naming_it() {
        let op = testing::build(
            &DEF,
            serde_json::json!({"benchmarks": ["a.jsonl", "empty.jsonl"], "fields": ["question"]}),
        )
        .unwrap();
        let assets = op.assets();
        let err = op
            .load(&[
                (assets[0].clone(), bytes::Bytes::from_static(QUIZ)),
                (assets[1].clone(), bytes::Bytes::from_static(b"\n")),
            ])
            .unwrap_err()
            .to_string();
        assert!(err.contains("params.benchmarks[0]"), "{err}");
        assert!(err.contains("no item has 13 words"), "{err}");
        let err = op
            .load(&[(assets[0].clone(), bytes::Bytes::from_static(b"{not json\n"))])
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1"), "{err}");
    }
}
