//! Records as Arrow batches: column types a spec can declare, stable record ids,
//! JSONL rows → Arrow with per-record rejection, and the rejects schema. Pure code:
//! no I/O, no async.
use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use serde_json::{Map, Value};
use std::sync::Arc;

/// Name of the record id column every batch carries first.
pub const ID: &str = "id";
/// An input column that was already named `id` is carried under this name.
pub const SOURCE_ID: &str = "source_id";

/// Column types a spec can declare (`input.schema`); defined with the spec.
pub use crate::spec::parse_type;

/// 16 hex digits identifying an input file by its URI.
pub fn file_key(uri: &str) -> String {
    blake3::hash(uri.as_bytes()).to_hex()[..16].to_string()
}

/// A record id: the file key then the offset (byte offset or row number) in 12 hex
/// digits, so ids sort by file and then by position.
pub fn record_id(file_key: &str, offset: u64) -> String {
    format!("{file_key}{offset:012x}")
}

/// Field metadata naming the input column a phase-0 field reads, on every field whose
/// name could be taken for another (`source_id`, `source_id_N`): jobs planned before it
/// read a field named `source_id` from the input's `id`, which lost an input's own
/// `source_id` column (read from a missing `id`: all null).
pub const INPUT_COLUMN: &str = "mdf.input_column";

/// The schema of phase-0 batches: `id` first, then the input columns. An input `id`
/// column is carried as `source_id` (or, when the input has a `source_id` of its own,
/// as the first free `source_id_N`), and those fields name their input column in
/// [`INPUT_COLUMN`] metadata.
pub fn with_id_column(cols: &[(String, DataType)]) -> SchemaRef {
    let taken = |n: &str| cols.iter().any(|(c, _)| c == n);
    let carried = if taken(SOURCE_ID) {
        (1..)
            .map(|i| format!("{SOURCE_ID}_{i}"))
            .find(|n| !taken(n))
            .expect("a free name")
    } else {
        SOURCE_ID.to_string()
    };
    let mut fields = vec![Field::new(ID, DataType::Utf8, false)];
    for (name, dt) in cols {
        let (field_name, from) = if name == ID {
            (carried.as_str(), Some(ID))
        } else if name == SOURCE_ID || name.starts_with("source_id_") {
            (name.as_str(), Some(name.as_str()))
        } else {
            (name.as_str(), None)
        };
        let mut f = Field::new(field_name, dt.clone(), true);
        if let Some(from) = from {
            f = f.with_metadata([(INPUT_COLUMN.to_string(), from.to_string())].into());
        }
        fields.push(f);
    }
    Arc::new(Schema::new(fields))
}

/// The input column a phase-0 field reads: its [`INPUT_COLUMN`] metadata; without
/// it (jobs planned before it), `id` for a field named `source_id`; else its name.
pub fn input_column(f: &Field) -> &str {
    match f.metadata().get(INPUT_COLUMN) {
        Some(c) => c,
        None if f.name() == SOURCE_ID => ID,
        None => f.name(),
    }
}

/// A JSON number as an int64 column holds it: an integer in range, or a float that is
/// a whole number in range (`2.0`).
fn whole(n: &serde_json::Number) -> Option<i64> {
    if let Some(i) = n.as_i64() {
        return Some(i);
    }
    let f = n.as_f64()?;
    (f.fract() == 0.0 && f >= -(2f64.powi(63)) && f < 2f64.powi(63)).then_some(f as i64)
}

/// A JSON number as a float64 column holds it: a float, or an integer a float64
/// represents exactly.
fn exact_f64(n: &serde_json::Number) -> Option<f64> {
    if let Some(i) = n.as_i64() {
        let f = i as f64;
        return (f as i64 == i && f < 2f64.powi(63)).then_some(f);
    }
    if let Some(u) = n.as_u64() {
        let f = u as f64;
        return (f < 2f64.powi(64) && f as u64 == u).then_some(f);
    }
    n.as_f64()
}

/// Infers column types from sample JSON objects: the union of keys in first-seen
/// order; int and float mixed → float64 (int64 where an integer is beyond 2^53, which
/// a float64 would round); anything else mixed, nested or null → string.
pub fn infer_schema<'a>(
    rows: impl IntoIterator<Item = &'a Map<String, Value>>,
) -> Vec<(String, DataType)> {
    let mut cols: Vec<(String, Option<DataType>)> = Vec::new();
    // Columns with an integer a float64 cannot hold exactly (beyond 2^53: ids,
    // nanosecond times): int and float mixed stays int64 there.
    let mut big: std::collections::BTreeSet<String> = Default::default();
    for row in rows {
        for (k, v) in row {
            if let Value::Number(n) = v
                && (n.as_i64().is_some_and(|i| i.unsigned_abs() > 1 << 53)
                    || n.as_u64().is_some_and(|u| u > 1 << 53))
            {
                big.insert(k.clone());
            }
            let t = match v {
                Value::Null => None,
                Value::Bool(_) => Some(DataType::Boolean),
                Value::Number(n) if n.is_i64() => Some(DataType::Int64),
                // Beyond int64 (a 64-bit hash): kept as its digits, exactly.
                Value::Number(n) if n.is_u64() => Some(DataType::Utf8),
                Value::Number(_) => Some(DataType::Float64),
                _ => Some(DataType::Utf8),
            };
            match cols.iter_mut().find(|(n, _)| n == k) {
                None => cols.push((k.clone(), t)),
                Some((_, cur)) => {
                    *cur = match (cur.take(), t) {
                        (None, t) | (t, None) => t,
                        (Some(a), Some(b)) if a == b => Some(a),
                        (Some(DataType::Int64), Some(DataType::Float64))
                        | (Some(DataType::Float64), Some(DataType::Int64)) => {
                            Some(DataType::Float64)
                        }
                        _ => Some(DataType::Utf8),
                    }
                }
            }
        }
    }
    cols.into_iter()
        .map(|(k, t)| {
            let t = match t {
                Some(DataType::Float64) if big.contains(&k) => DataType::Int64,
                t => t.unwrap_or(DataType::Utf8),
            };
            (k, t)
        })
        .collect()
}

enum ColBuilder {
    Str(StringBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
    Bool(BooleanBuilder),
}

/// Builds batches of a fixed schema from JSON objects; a row whose value does not fit
/// its column's type is refused with a reason naming the column, and nothing of it is
/// appended.
pub struct JsonBatchBuilder {
    schema: SchemaRef,
    /// (JSON key, builder) for every column after `id`.
    cols: Vec<(String, ColBuilder)>,
    ids: StringBuilder,
    rows: usize,
}

impl JsonBatchBuilder {
    pub fn new(schema: SchemaRef) -> Self {
        let cols = schema
            .fields()
            .iter()
            .skip(1)
            .map(|f| {
                let key = input_column(f).to_string();
                let b = match f.data_type() {
                    DataType::Int64 => ColBuilder::Int(Int64Builder::new()),
                    DataType::Float64 => ColBuilder::Float(Float64Builder::new()),
                    DataType::Boolean => ColBuilder::Bool(BooleanBuilder::new()),
                    _ => ColBuilder::Str(StringBuilder::new()),
                };
                (key, b)
            })
            .collect();
        Self {
            schema,
            cols,
            ids: StringBuilder::new(),
            rows: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Appends one row or explains why it does not fit the schema.
    pub fn push(&mut self, id: &str, row: &Map<String, Value>) -> Result<(), String> {
        for (key, b) in &self.cols {
            let v = row.get(key).unwrap_or(&Value::Null);
            let fits = match (b, v) {
                (_, Value::Null) => true,
                (ColBuilder::Str(_), _) => true,
                (ColBuilder::Int(_), Value::Number(n)) => whole(n).is_some(),
                // An integer a float64 would round (beyond 2^53) is refused, not
                // rounded.
                (ColBuilder::Float(_), Value::Number(n)) => exact_f64(n).is_some(),
                (ColBuilder::Bool(_), Value::Bool(_)) => true,
                _ => false,
            };
            if !fits {
                if let (ColBuilder::Float(_), Value::Number(n)) = (b, v) {
                    return Err(format!(
                        "column {key:?} is float64, and {n} is not exactly a float64 (it would be rounded)"
                    ));
                }
                return Err(format!(
                    "column {key:?} expects {}, found {}",
                    match b {
                        ColBuilder::Int(_) => "an int64",
                        ColBuilder::Float(_) => "a float64",
                        ColBuilder::Bool(_) => "a boolean",
                        ColBuilder::Str(_) => "a string",
                    },
                    crate::spec::reader::type_name(v)
                ));
            }
        }
        for (key, b) in &mut self.cols {
            let v = row.get(key.as_str()).unwrap_or(&Value::Null);
            match (b, v) {
                (ColBuilder::Str(b), Value::Null) => b.append_null(),
                (ColBuilder::Str(b), Value::String(s)) => b.append_value(s),
                (ColBuilder::Str(b), other) => b.append_value(other.to_string()),
                (ColBuilder::Int(b), Value::Number(n)) => b.append_value(whole(n).unwrap_or(0)),
                (ColBuilder::Int(b), _) => b.append_null(),
                (ColBuilder::Float(b), Value::Number(n)) => {
                    b.append_value(exact_f64(n).unwrap_or(0.0))
                }
                (ColBuilder::Float(b), _) => b.append_null(),
                (ColBuilder::Bool(b), Value::Bool(x)) => b.append_value(*x),
                (ColBuilder::Bool(b), _) => b.append_null(),
            }
        }
        self.ids.append_value(id);
        self.rows += 1;
        Ok(())
    }

    /// Takes the rows appended so far as one batch.
    pub fn finish(&mut self) -> RecordBatch {
        let mut arrays: Vec<ArrayRef> = vec![Arc::new(self.ids.finish())];
        for (_, b) in &mut self.cols {
            arrays.push(match b {
                ColBuilder::Str(b) => Arc::new(b.finish()),
                ColBuilder::Int(b) => Arc::new(b.finish()),
                ColBuilder::Float(b) => Arc::new(b.finish()),
                ColBuilder::Bool(b) => Arc::new(b.finish()),
            });
        }
        self.rows = 0;
        RecordBatch::try_new(self.schema.clone(), arrays).expect("builders follow the schema")
    }
}

/// Schema of the rejects output.
pub fn rejects_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(ID, DataType::Utf8, false),
        Field::new("reason", DataType::Utf8, false),
        Field::new("operator", DataType::Utf8, false),
        Field::new("detail", DataType::Utf8, true),
        Field::new("record", DataType::Utf8, true),
    ]))
}

/// One rejected record.
#[derive(Debug, Clone, PartialEq)]
pub struct Reject {
    pub id: String,
    pub reason: String,
    pub operator: String,
    pub detail: Option<String>,
    pub record: Option<String>,
}

/// Rejects as a batch of [`rejects_schema`].
pub fn rejects_batch(rows: &[Reject]) -> RecordBatch {
    let mut cols: [StringBuilder; 5] = Default::default();
    for r in rows {
        cols[0].append_value(&r.id);
        cols[1].append_value(&r.reason);
        cols[2].append_value(&r.operator);
        cols[3].append_option(r.detail.as_deref());
        cols[4].append_option(r.record.as_deref());
    }
    let arrays: Vec<ArrayRef> = cols
        .iter_mut()
        .map(|b| Arc::new(b.finish()) as ArrayRef)
        .collect();
    RecordBatch::try_new(rejects_schema(), arrays).expect("rejects schema")
}

/// Each row of `batch` as a JSON object string (for keeping rejected records).
/// Binary columns (encoded images) are left out: a reject keeps the record's fields
/// and its source (`path`, `url`), not megabytes of hex.
pub fn rows_as_json(batch: &RecordBatch) -> Vec<String> {
    let keep: Vec<usize> = (0..batch.num_columns())
        .filter(|&i| {
            !matches!(
                batch.schema().field(i).data_type(),
                DataType::Binary | DataType::LargeBinary | DataType::BinaryView
            )
        })
        .collect();
    let projected;
    let batch = if keep.len() < batch.num_columns() {
        projected = batch.project(&keep).unwrap_or_else(|_| batch.clone());
        &projected
    } else {
        batch
    };
    // Rejected web pages are whole records (HTML and all): encoded in slices over the
    // kernel threads, in order, when there are enough bytes to share.
    let n = batch.num_rows();
    if n > 1 && batch.get_array_memory_size() >= 256 << 10 {
        use rayon::prelude::*;
        let step = n.div_ceil(4 * rayon::current_num_threads()).max(1);
        let starts: Vec<usize> = (0..n).step_by(step).collect();
        let parts: Vec<Vec<String>> = starts
            .par_iter()
            .map(|&s| encode_rows(&batch.slice(s, step.min(n - s))))
            .collect();
        return parts.concat();
    }
    encode_rows(batch)
}

/// Each row of `batch` as a JSON object.
fn encode_rows(batch: &RecordBatch) -> Vec<String> {
    // What arrow-json's line-delimited writer writes, a row at a time into its own
    // string (writing the batch as one buffer and splitting it again grew the buffer,
    // made a lossy UTF-8 pass and copied every line).
    let n = batch.num_rows();
    let array = arrow_array::StructArray::from(batch.clone());
    let field = Arc::new(Field::new_struct(
        "",
        batch.schema().fields().clone(),
        false,
    ));
    let options = arrow_json::writer::EncoderOptions::default();
    let Ok(mut encoder) = arrow_json::writer::make_encoder(&field, &array, &options) else {
        return vec![String::new(); n];
    };
    let mut buf = Vec::new();
    (0..n)
        .map(|i| {
            buf.clear();
            encoder.encode(i, &mut buf);
            match std::str::from_utf8(&buf) {
                Ok(s) => s.to_owned(),
                Err(_) => String::from_utf8_lossy(&buf).into_owned(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, Int64Array, StringArray};
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    /// Rows as JSON are the lines arrow-json's line-delimited writer writes: escapes,
    /// nulls left out, numbers, lists, timestamps; binary columns dropped.
    #[test]
    fn rows_as_json_are_the_line_delimited_writers_lines() {
        use arrow_array::builder::{ListBuilder, TimestampMillisecondBuilder};
        use arrow_array::{BinaryArray, BooleanArray, Float32Array};
        let mut list = ListBuilder::new(Int64Builder::new());
        let mut ts = TimestampMillisecondBuilder::new();
        for i in 0..4i64 {
            list.values().append_value(i);
            list.values().append_value(-i);
            list.append(i != 2);
            ts.append_option((i != 1).then_some(1_700_000_000_000 + i));
        }
        let text = [
            Some("plain"),
            Some("quote \" back\\ nl\n cr\r tab\t \u{1} é 𝄞 </script>"),
            None,
            Some(""),
        ];
        let batch = RecordBatch::try_from_iter(vec![
            (
                "text",
                Arc::new(StringArray::from(text.to_vec())) as ArrayRef,
            ),
            (
                "n",
                Arc::new(Int64Array::from(vec![
                    Some(1),
                    None,
                    Some(-7),
                    Some(i64::MAX),
                ])),
            ),
            (
                "score",
                Arc::new(Float32Array::from(vec![
                    Some(0.65),
                    Some(1e-7),
                    None,
                    Some(3.0),
                ])),
            ),
            (
                "ok",
                Arc::new(BooleanArray::from(vec![
                    Some(true),
                    None,
                    Some(false),
                    Some(true),
                ])),
            ),
            ("grams", Arc::new(list.finish())),
            ("at", Arc::new(ts.finish())),
            ("image", Arc::new(BinaryArray::from(vec![&b"\xff"[..]; 4]))),
        ])
        .unwrap();
        let got = rows_as_json(&batch);
        let mut buf = Vec::new();
        let mut w = arrow_json::LineDelimitedWriter::new(&mut buf);
        w.write(&batch.project(&[0, 1, 2, 3, 4, 5]).unwrap())
            .unwrap();
        w.finish().unwrap();
        let want: Vec<String> = String::from_utf8(buf)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(got, want);
        assert!(
            got[1].contains("\\n") && !got[1].contains("image"),
            "{}",
            got[1]
        );
        assert!(!got[2].contains("text"), "{}", got[2]);
    }

    #[test]
    fn inference_widens_and_keeps_first_seen_order() {
        let rows = [
            obj(json!({"text": "a", "n": 1, "x": null})),
            obj(json!({"n": 2.5, "text": "b", "x": {"k": 1}})),
        ];
        let s = infer_schema(rows.iter());
        assert_eq!(
            s,
            vec![
                ("text".into(), DataType::Utf8),
                ("n".into(), DataType::Float64),
                ("x".into(), DataType::Utf8)
            ]
        );
        // An integer a float64 would round keeps the column int64.
        let rows = [
            obj(json!({"uid": 1234567890123456789i64})),
            obj(json!({"uid": 1.0})),
        ];
        assert_eq!(
            infer_schema(rows.iter()),
            vec![("uid".into(), DataType::Int64)]
        );
    }

    /// Numbers are never rounded into a column (found by review): an int64 column
    /// takes a whole float, a float64 column refuses an integer it would round, and
    /// an integer beyond int64 infers as its digits.
    #[test]
    fn numbers_are_kept_exactly_or_refused() {
        let schema = with_id_column(&[
            ("i".into(), DataType::Int64),
            ("f".into(), DataType::Float64),
        ]);
        let mut b = JsonBatchBuilder::new(schema);
        b.push("a", &obj(json!({"i": 2.0, "f": 3}))).unwrap();
        assert!(b.push("b", &obj(json!({"i": 2.5}))).is_err());
        let e = b
            .push("c", &obj(json!({"f": 9007199254740993u64})))
            .unwrap_err();
        assert!(e.contains("would be rounded"), "{e}");
        b.push("d", &obj(json!({"f": 9007199254740992u64})))
            .unwrap();
        assert_eq!(b.len(), 2);
        let rows = [
            obj(json!({"h": 18446744073709551615u64})),
            obj(json!({"h": 5})),
        ];
        assert_eq!(
            infer_schema(rows.iter()),
            vec![("h".into(), DataType::Utf8)]
        );
    }

    #[test]
    fn builder_refuses_mismatched_rows_without_partial_append() {
        let schema =
            with_id_column(&[("id".into(), DataType::Utf8), ("n".into(), DataType::Int64)]);
        assert_eq!(schema.field(1).name(), SOURCE_ID);
        assert_eq!(input_column(schema.field(1)), ID);
        // An input with its own source_id: the id goes to the first free name.
        let both = with_id_column(&[
            ("source_id".into(), DataType::Utf8),
            ("source_id_1".into(), DataType::Utf8),
            ("id".into(), DataType::Utf8),
        ]);
        let names: Vec<(&str, &str)> = both
            .fields()
            .iter()
            .skip(1)
            .map(|f| (f.name().as_str(), input_column(f)))
            .collect();
        assert_eq!(
            names,
            [
                ("source_id", "source_id"),
                ("source_id_1", "source_id_1"),
                ("source_id_2", "id")
            ]
        );
        // A schema planned before the metadata: source_id reads id, as it did.
        let legacy = Field::new(SOURCE_ID, DataType::Utf8, true);
        assert_eq!(input_column(&legacy), ID);
        let mut b = JsonBatchBuilder::new(schema);
        b.push("a", &obj(json!({"id": "orig", "n": 3}))).unwrap();
        let e = b.push("b", &obj(json!({"n": "three"}))).unwrap_err();
        assert_eq!(e, "column \"n\" expects an int64, found a string");
        b.push("c", &obj(json!({"n": null}))).unwrap();
        let batch = b.finish();
        assert_eq!(batch.num_rows(), 2);
        let src = batch
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(src.value(0), "orig");
        let n = batch
            .column(2)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert!(n.is_null(1));
    }

    #[test]
    fn ids_sort_by_file_then_offset() {
        let k = file_key("file:///a.jsonl");
        assert_eq!(k.len(), 16);
        assert!(record_id(&k, 9) < record_id(&k, 10));
        assert_eq!(record_id(&k, 255).len(), 28);
    }
}
