//! Inputs whose files do not all have the same columns (found by a new user: columns
//! only later files had were dropped, a file without a column the first one had was
//! rejected whole, and binary text with invalid UTF-8 became null). Every record and
//! every column of every file reaches the output or a reject with its reason.
mod common;
use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use common::*;
use std::path::Path;

fn run_jsonl_like(dir: &Path, glob: &str, format: &str) -> (std::path::PathBuf, serde_json::Value) {
    run_with_job(dir, glob, format, "poll_millis: 50")
}

fn run_with_job(
    dir: &Path,
    glob: &str,
    format: &str,
    job: &str,
) -> (std::path::PathBuf, serde_json::Value) {
    let out = dir.join("out");
    let (_, st) = run_spec(
        dir,
        &format!(
            "name: mixed\ninput: {{uris: [\"{glob}\"], format: {format}}}\nstages: [{{op: text_length}}]\noutput: {{uri: \"{}\"}}\njob: {{{job}}}\n",
            out.display()
        ),
    );
    assert_eq!(st["succeeded"], true, "{st:#}");
    (out, st)
}

/// Rows of the output as (text, column → value rendered as a string, "null" for null).
fn rows(out: &Path) -> Vec<Row> {
    let batches = output_batches(out);
    let mut v = Vec::new();
    for b in &batches {
        for i in 0..b.num_rows() {
            let mut m = std::collections::BTreeMap::new();
            for (f, c) in b.schema().fields().iter().zip(b.columns()) {
                let s = if c.is_null(i) {
                    "null".to_string()
                } else {
                    arrow_cast::display::array_value_to_string(c, i).unwrap()
                };
                m.insert(f.name().clone(), s);
            }
            v.push((m["text"].clone(), m));
        }
    }
    v.sort();
    v
}

type Row = (String, std::collections::BTreeMap<String, String>);

/// [`rows`] by their text.
fn by_text(
    rows: &[Row],
) -> std::collections::BTreeMap<&str, &std::collections::BTreeMap<String, String>> {
    rows.iter().map(|(t, m)| (t.as_str(), m)).collect()
}

fn rejects(out: &Path) -> Vec<(String, String)> {
    let m = manifest(out);
    let mut v = Vec::new();
    for f in m["rejects"].as_array().unwrap() {
        let rj = read_parquet(&out.join("_rejects").join(f["path"].as_str().unwrap()));
        v.extend(
            strings(&rj, "reason")
                .into_iter()
                .zip(strings(&rj, "detail")),
        );
    }
    v
}

#[test]
fn jsonl_columns_come_from_every_sampled_file_and_numbers_widen_across_files() {
    let d = tempfile::tempdir().unwrap();
    let inp = d.path().join("in");
    std::fs::create_dir_all(&inp).unwrap();
    std::fs::write(
        inp.join("a.jsonl"),
        "{\"text\":\"alpha doc\",\"score\":1}\n{\"text\":\"beta doc\",\"score\":2}\n",
    )
    .unwrap();
    std::fs::write(
        inp.join("b.jsonl"),
        "{\"text\":\"gamma doc\",\"score\":1.5,\"url\":\"http://x/1\"}\n{\"text\":\"delta doc\",\"score\":3,\"url\":\"http://x/2\"}\n",
    )
    .unwrap();
    // Saved as "UTF-8 with BOM", with a bad line further down.
    std::fs::write(
        inp.join("c.jsonl"),
        "\u{feff}{\"text\":\"eps doc\",\"meta\":{\"k\":1}}\n{\"text\": oops}\n",
    )
    .unwrap();
    let (out, _) = run_jsonl_like(d.path(), &format!("{}/*.jsonl", inp.display()), "jsonl");
    let got = rows(&out);
    let texts: Vec<&str> = got.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        texts,
        ["alpha doc", "beta doc", "delta doc", "eps doc", "gamma doc"]
    );
    let by = by_text(&got);
    assert_eq!(by["gamma doc"]["score"], "1.5");
    assert_eq!(by["alpha doc"]["score"], "1.0");
    assert_eq!(by["gamma doc"]["url"], "http://x/1");
    assert_eq!(by["alpha doc"]["url"], "null");
    assert_eq!(by["eps doc"]["meta"], "{\"k\":1}");
    // The one bad line is a reject that says where it is.
    let rj = rejects(&out);
    assert_eq!(rj.len(), 1, "{rj:?}");
    assert_eq!(rj[0].0, "bad_json");
    assert!(
        rj[0].1.contains("c.jsonl, line 2)"),
        "the detail names the file and line: {}",
        rj[0].1
    );
}

#[test]
fn a_bom_at_the_start_of_the_only_file_does_not_stop_inference() {
    let d = tempfile::tempdir().unwrap();
    let inp = d.path().join("in");
    std::fs::create_dir_all(&inp).unwrap();
    std::fs::write(
        inp.join("bom.jsonl"),
        "\u{feff}{\"id\":300,\"text\":\"bom first line\"}\n",
    )
    .unwrap();
    let (out, _) = run_jsonl_like(d.path(), &format!("{}/*.jsonl", inp.display()), "jsonl");
    let got = rows(&out);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "bom first line");
    // Byte-range tasks smaller than the BOM still read every line once (found by
    // review: a range ending inside the BOM lost the first line).
    let three = "\u{feff}{\"text\":\"l1\"}\n{\"text\":\"l2\"}\n{\"text\":\"l3\"}\n";
    for tb in [1, 2, 3, 4, 5, 20] {
        let d = tempfile::tempdir().unwrap();
        let inp = d.path().join("in");
        std::fs::create_dir_all(&inp).unwrap();
        std::fs::write(inp.join("bom.jsonl"), three).unwrap();
        let (out, st) = run_with_job(
            d.path(),
            &format!("{}/*.jsonl", inp.display()),
            "jsonl",
            &format!("task_bytes: {tb}, poll_millis: 20"),
        );
        let texts: Vec<String> = rows(&out).into_iter().map(|(t, _)| t).collect();
        assert_eq!(texts, ["l1", "l2", "l3"], "task_bytes {tb}: {st:#}");
    }
    assert_eq!(got[0].1["source_id"], "300");
    assert!(rejects(&out).is_empty());
}

fn write_parquet(path: &Path, batch: RecordBatch) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(f, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

#[test]
fn parquet_files_with_different_columns_lose_no_row_and_no_column() {
    use arrow_array::{BinaryArray, Float64Array, Int64Array, StringArray};
    use std::sync::Arc;
    let d = tempfile::tempdir().unwrap();
    let inp = d.path().join("in");
    std::fs::create_dir_all(&inp).unwrap();
    write_parquet(
        &inp.join("a.parquet"),
        RecordBatch::try_from_iter([
            (
                "text",
                Arc::new(StringArray::from(vec![
                    Some("one doc"),
                    Some("two doc"),
                    None,
                ])) as arrow_array::ArrayRef,
            ),
            ("score", Arc::new(Float64Array::from(vec![0.1, 0.2, 0.3]))),
        ])
        .unwrap(),
    );
    // No `score`, and a column the first file lacks.
    write_parquet(
        &inp.join("b.parquet"),
        RecordBatch::try_from_iter([
            (
                "text",
                Arc::new(StringArray::from(vec!["large str", "x"])) as arrow_array::ArrayRef,
            ),
            ("extra", Arc::new(Int64Array::from(vec![1, 2]))),
        ])
        .unwrap(),
    );
    // Text as binary, one value not UTF-8.
    write_parquet(
        &inp.join("c.parquet"),
        RecordBatch::try_from_iter([(
            "text",
            Arc::new(BinaryArray::from(vec![
                b"valid utf8 binary".as_slice(),
                b"bad \xff byte".as_slice(),
            ])) as arrow_array::ArrayRef,
        )])
        .unwrap(),
    );
    let (out, st) = run_jsonl_like(d.path(), &format!("{}/*.parquet", inp.display()), "parquet");
    let got = rows(&out);
    let texts: Vec<&str> = got.iter().map(|(t, _)| t.as_str()).collect();
    // The null text of a.parquet is kept as a row (text_length counts it 0).
    assert_eq!(
        texts,
        [
            "large str",
            "null",
            "one doc",
            "two doc",
            "valid utf8 binary",
            "x"
        ]
    );
    let by = by_text(&got);
    assert_eq!(by["one doc"]["score"], "0.1");
    assert_eq!(by["x"]["score"], "null");
    assert_eq!(by["x"]["extra"], "2");
    assert_eq!(by["one doc"]["extra"], "null");
    let rj = rejects(&out);
    assert_eq!(rj.len(), 1, "{rj:?}");
    assert_eq!(rj[0].0, "invalid_utf8");
    assert!(rj[0].1.contains("c.parquet"), "{}", rj[0].1);
    assert_eq!(st["phases"][0]["records_in"], 7, "{st:#}");
    // Every output file has the same columns.
    for b in output_batches(&out) {
        let names: Vec<String> = b
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert!(
            names.contains(&"extra".to_string()) && names.contains(&"score".to_string()),
            "{names:?}"
        );
        let _ = b.column_by_name("text").unwrap().as_string::<i32>();
    }
}

/// Found by two reviews: int64 and float64 files made the column float64 and rounded
/// ids above 2^53 silently; keeping int64 instead rejected every fractional float; an
/// all-null column (pyarrow's `null` type) rejected every row of its file. Now the
/// column is float64, a value it cannot hold exactly is a reject (never rounded),
/// -0.0 and fractions are kept, and a `null`-typed column reads as nulls in either
/// file order.
#[test]
fn parquet_numbers_are_never_rounded_and_null_typed_columns_read_as_null() {
    use arrow_array::{Float64Array, Int64Array, NullArray, StringArray};
    use std::sync::Arc;
    for order in [["a", "b"], ["b", "a"]] {
        let d = tempfile::tempdir().unwrap();
        let inp = d.path().join("in");
        std::fs::create_dir_all(&inp).unwrap();
        write_parquet(
            &inp.join(format!("{}.parquet", order[0])),
            RecordBatch::try_from_iter([
                (
                    "text",
                    Arc::new(StringArray::from(vec!["one", "two", "six"])) as arrow_array::ArrayRef,
                ),
                (
                    "uid",
                    Arc::new(Int64Array::from(vec![
                        1234567890123456789,
                        9007199254740993,
                        7,
                    ])),
                ),
                (
                    "note",
                    Arc::new(StringArray::from(vec![Some("n1"), None, Some("n6")])),
                ),
            ])
            .unwrap(),
        );
        write_parquet(
            &inp.join(format!("{}.parquet", order[1])),
            RecordBatch::try_from_iter([
                (
                    "text",
                    Arc::new(StringArray::from(vec!["three", "four", "five", "seven"]))
                        as arrow_array::ArrayRef,
                ),
                (
                    "uid",
                    Arc::new(Float64Array::from(vec![
                        Some(1.0),
                        None,
                        Some(2.5),
                        Some(-0.0),
                    ])),
                ),
                ("note", Arc::new(NullArray::new(4))),
            ])
            .unwrap(),
        );
        let (out, _) = run_jsonl_like(d.path(), &format!("{}/*.parquet", inp.display()), "parquet");
        let got = rows(&out);
        let by = by_text(&got);
        assert_eq!(by["six"]["uid"], "7.0", "{order:?}");
        assert_eq!(by["three"]["uid"], "1.0", "{order:?}");
        assert_eq!(by["four"]["uid"], "null", "{order:?}");
        assert_eq!(by["five"]["uid"], "2.5", "{order:?}");
        assert_eq!(by["seven"]["uid"], "-0.0", "{order:?}");
        assert_eq!(by["six"]["note"], "n6", "{order:?}");
        assert_eq!(by["three"]["note"], "null", "{order:?}");
        // The two ids a float64 would round are rejects, not rounded rows.
        assert!(
            !by.contains_key("one") && !by.contains_key("two"),
            "{order:?}"
        );
        let rj = rejects(&out);
        assert_eq!(rj.len(), 2, "{order:?} {rj:?}");
        for (why, detail) in &rj {
            assert_eq!(why, "schema_mismatch");
            assert!(detail.contains("is not exactly a Float64"), "{detail}");
        }
    }
}

/// Timestamps of two units read in the finer one, never truncated.
#[test]
fn parquet_timestamps_of_two_units_keep_the_finer() {
    use arrow_array::{StringArray, TimestampMillisecondArray, TimestampNanosecondArray};
    use std::sync::Arc;
    let d = tempfile::tempdir().unwrap();
    let inp = d.path().join("in");
    std::fs::create_dir_all(&inp).unwrap();
    write_parquet(
        &inp.join("a.parquet"),
        RecordBatch::try_from_iter([
            (
                "text",
                Arc::new(StringArray::from(vec!["ms"])) as arrow_array::ArrayRef,
            ),
            ("ts", Arc::new(TimestampMillisecondArray::from(vec![1_000]))),
        ])
        .unwrap(),
    );
    write_parquet(
        &inp.join("b.parquet"),
        RecordBatch::try_from_iter([
            (
                "text",
                Arc::new(StringArray::from(vec!["ns"])) as arrow_array::ArrayRef,
            ),
            (
                "ts",
                Arc::new(TimestampNanosecondArray::from(vec![1_500_000])),
            ),
        ])
        .unwrap(),
    );
    let (out, _) = run_jsonl_like(d.path(), &format!("{}/*.parquet", inp.display()), "parquet");
    let got = rows(&out);
    let by = by_text(&got);
    assert_eq!(by["ns"]["ts"], "1970-01-01T00:00:00.001500", "{got:?}");
    assert_eq!(by["ms"]["ts"], "1970-01-01T00:00:01", "{got:?}");
    assert!(rejects(&out).is_empty());
}

/// Past 16 files the columns are inferred from the first 16: the run says so, once,
/// before any task starts.
#[test]
fn a_run_over_more_files_than_are_sampled_says_so() {
    let d = tempfile::tempdir().unwrap();
    let inp = d.path().join("in");
    std::fs::create_dir_all(&inp).unwrap();
    for i in 0..17 {
        std::fs::write(
            inp.join(format!("{i:02}.jsonl")),
            format!("{{\"text\":\"doc {i}\"}}\n"),
        )
        .unwrap();
    }
    let out = d.path().join("out");
    let (o, _) = run_spec(
        d.path(),
        &format!(
            "name: many\ninput: {{uris: [\"{}/*.jsonl\"]}}\nstages: [{{op: text_length}}]\noutput: {{uri: \"{}\"}}\n",
            inp.display(),
            out.display()
        ),
    );
    assert!(
        stderr(&o).contains("read from the first 16 of 17 files"),
        "{}",
        stderr(&o)
    );
    assert_eq!(output_ids(&out).len(), 17);
}
