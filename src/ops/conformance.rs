//! One conformance suite that every registered operator runs (as object_store's
//! backends run theirs): built from its documented example params, it refuses
//! unknown params (and its docs list exactly the params it reads), names a missing
//! input column, takes an empty batch and a batch of all-null inputs, keeps row
//! counts (kept + rejected = input), and its rejects carry the stage's name. A new
//! operator fails here until `input_of` says which columns it reads.
use super::testing::build_as;
use super::{OpDef, REGISTRY, output_schema, run_stage};
use arrow_array::{ArrayRef, RecordBatch, StringArray, new_null_array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use std::sync::Arc;

/// The columns an operator reads with its example params (besides `id`).
fn input_of(name: &str) -> Vec<(&'static str, DataType)> {
    match name {
        "text_length" | "length_filter" | "exact_key" | "minhash" | "gopher_quality"
        | "gopher_repetition" | "c4_quality" | "fineweb_quality" | "language_filter"
        | "pii_redact" | "throttle" | "fasttext" | "tokenize" | "text_model" | "decontaminate" => {
            vec![("text", DataType::Utf8)]
        }
        "html_extract" => vec![("html", DataType::Utf8)],
        "url_filter" => vec![("url", DataType::Utf8)],
        "dedup" => vec![("exact_key_key", DataType::FixedSizeBinary(16))],
        "image_metadata" | "image_quality" | "image_hash" | "clip_embed" | "nsfw_score"
        | "image_model" | "image_resize" => vec![("image", DataType::Binary)],
        "embedding_head" => vec![(
            "embedding",
            DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, false)), 768),
        )],
        "image_quality_filter" => vec![("width", DataType::UInt32)],
        "clip_score_filter" => vec![("clip_score", DataType::Float32)],
        "column_filter" => vec![("int_score", DataType::Int64)],
        other => panic!("add operator {other} to ops::conformance::input_of"),
    }
}

/// The asset an operator loads here: a tiny fastText model for `fasttext` (its model
/// is pure Rust, so it runs here), a tokenizer.json for `tokenize`, a one-item
/// benchmark for `decontaminate`, nothing for the rest.
fn model_of(name: &str) -> bytes::Bytes {
    match name {
        "fasttext" => crate::kernels::fasttext::tests::model_bytes(3, 2, 4, 50, 2).into(),
        "tokenize" => crate::kernels::hf_tokenizer::tests::wordpiece_json().into(),
        "decontaminate" => bytes::Bytes::from_static(
            b"{\"question\": \"one two three four five six seven eight nine ten eleven twelve\", \"answer\": \"thirteen\"}\n",
        ),
        _ => bytes::Bytes::new(),
    }
}

/// Operators that read no column (nothing can be missing).
const READS_NOTHING: &[&str] = &["throttle"];

fn schema_of(cols: &[(&'static str, DataType)]) -> SchemaRef {
    let mut fields = vec![Field::new("id", DataType::Utf8, false)];
    fields.extend(cols.iter().map(|(n, t)| Field::new(*n, t.clone(), true)));
    Arc::new(Schema::new(fields))
}

/// `rows` records whose every input column is null.
fn null_batch(schema: &SchemaRef, rows: usize) -> RecordBatch {
    let mut cols: Vec<ArrayRef> = vec![Arc::new(StringArray::from(
        (0..rows).map(|i| format!("r{i}")).collect::<Vec<_>>(),
    ))];
    for f in schema.fields().iter().skip(1) {
        cols.push(new_null_array(f.data_type(), rows));
    }
    RecordBatch::try_new(schema.clone(), cols).unwrap()
}

fn example(d: &OpDef) -> serde_json::Value {
    serde_json::from_str(d.example).unwrap_or_else(|e| panic!("{}: example: {e}", d.name))
}

#[test]
fn every_operator_refuses_unknown_params_and_documents_what_it_reads() {
    for d in REGISTRY.iter().filter(|d| d.build.is_some()) {
        build_as(d, "s", example(d)).unwrap_or_else(|e| panic!("{}: {e:?}", d.name));
        let mut p = example(d);
        p["no_such_param"] = 1.into();
        let errs = build_as(d, "s", p).err().unwrap_or_default();
        let want = "params.no_such_param: unknown field, expected one of: ";
        let got = errs
            .iter()
            .find_map(|e| e.strip_prefix(want))
            .unwrap_or_else(|| panic!("{}: unknown param not refused: {errs:?}", d.name));
        if d.name != "dedup" {
            // The dedup stage reads some params only for some kinds.
            let mut names: Vec<&str> = (d.params)().iter().map(|p| p.name).collect();
            names.sort();
            assert_eq!(got, names.join(", "), "{}: docs and parser differ", d.name);
        }
    }
}

#[test]
fn every_operator_names_a_missing_input_column() {
    for d in REGISTRY.iter().filter(|d| d.build.is_some()) {
        let op = build_as(d, "s", example(d)).unwrap();
        let bare = schema_of(&[]);
        match output_schema(op.as_ref(), &bare) {
            Ok(_) => assert!(
                READS_NOTHING.contains(&d.name),
                "{}: accepted an input without its columns",
                d.name
            ),
            Err(e) => {
                let (col, _) = &input_of(d.name)[0];
                assert!(
                    e.to_string().contains(&format!("{col:?}")),
                    "{}: {e} does not name {col}",
                    d.name
                );
            }
        }
        output_schema(op.as_ref(), &schema_of(&input_of(d.name)))
            .unwrap_or_else(|e| panic!("{}: {e}", d.name));
    }
}

#[test]
fn every_operator_keeps_row_counts_on_empty_and_all_null_batches() {
    // Model operators need their model file to run: tests/onnx.rs runs them.
    for d in REGISTRY
        .iter()
        .filter(|d| d.build.is_some() && d.feature.is_none())
    {
        let stage = format!("{}_stage", d.name);
        let op = build_as(d, &stage, example(d)).unwrap();
        let assets: Vec<_> = op
            .assets()
            .into_iter()
            .map(|a| (a, model_of(d.name)))
            .collect();
        op.load(&assets)
            .unwrap_or_else(|e| panic!("{}: empty assets: {e}", d.name));
        let input = schema_of(&input_of(d.name));
        let out_schema = output_schema(op.as_ref(), &input).unwrap();
        for rows in [0, 3] {
            let batch = null_batch(&input, rows);
            let (kept, rejects) = run_stage(&stage, op.as_ref(), batch, &out_schema, true)
                .unwrap_or_else(|e| panic!("{}: {rows} null rows: {e}", d.name));
            assert_eq!(
                kept.num_rows() + rejects.len(),
                rows,
                "{}: kept + rejected must be the input",
                d.name
            );
            assert_eq!(
                kept.schema().fields(),
                out_schema.fields(),
                "{}: the kept batch has the stage's output schema",
                d.name
            );
            for r in &rejects {
                assert_eq!(r.operator, stage, "{}: reject without its stage", d.name);
                assert!(!r.reason.is_empty());
                assert!(
                    r.record.is_some(),
                    "{}: the rejected record is kept",
                    d.name
                );
            }
        }
    }
}

#[test]
fn the_registry_holds_each_name_once_and_describes_every_operator() {
    let mut names: Vec<&str> = REGISTRY.iter().map(|d| d.name).collect();
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n);
    for d in REGISTRY {
        input_of(d.name);
        assert!(!d.summary.is_empty());
        for p in (d.params)() {
            assert!(!p.doc.is_empty(), "{}.{} has no doc", d.name, p.name);
        }
    }
}
