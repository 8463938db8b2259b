//! JSON Lines output (`output.format: jsonl`): one JSON object per record, in files of
//! `output.target_file_bytes` (compressed), zstd (`.jsonl.zst`, the default), gzip
//! (`.jsonl.gz`) or none (`.jsonl`). Two layouts (`output.jsonl.layout`):
//!
//! * `records`: every output column by name (nulls written as `null`), the layout
//!   `format: jsonl` inputs read back;
//! * `dolma`: Dolma's document format (`id`, `text`, `source`, `added`, `created`,
//!   `metadata`): `text` from `output.jsonl.text`, `source` from `output.jsonl.source`
//!   (default: the job's name), `added` the job's submit time (RFC 3339, the same for
//!   every attempt), `created` from `output.jsonl.created` when the column holds a
//!   value, and every other column under `metadata`.
//!
//! Bytes stream to the store through the same hashing bridge as Parquet parts, so a
//! file's blake3 and length are known when it closes; files are staged, committed and
//! published like Parquet parts (`part-<task>-NNNNN.jsonl.zst`).
use super::WriteError;
use super::parquet::{Staging, check_schema, storage};
use crate::protocol::records::OutputFile;
use crate::spec::{JsonlCompression, JsonlLayout, JsonlSpec};
use crate::store::{Registry, Uri};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use std::io::Write;

type Bridge = Staging;

/// How many bytes a line-by-line writer gathers before handing them to the store's
/// bridge (each hand-over blocks on the runtime).
const WRITE_BUFFER: usize = 1 << 20;

/// The compressor over one staged file.
enum Encoder {
    Zstd(zstd::stream::write::Encoder<'static, Bridge>),
    Gzip(flate2::write::GzEncoder<Bridge>),
    Plain(std::io::BufWriter<Bridge>),
}

impl Encoder {
    fn inner(&self) -> &Bridge {
        match self {
            Encoder::Zstd(e) => e.get_ref(),
            Encoder::Gzip(e) => e.get_ref(),
            Encoder::Plain(b) => b.get_ref(),
        }
    }
    /// Bytes written so far, buffered ones included (compressed for zstd and gzip).
    fn written(&self) -> u64 {
        match self {
            Encoder::Plain(b) => b.get_ref().bytes + b.buffer().len() as u64,
            other => other.inner().bytes,
        }
    }
    fn finish(self) -> std::io::Result<Bridge> {
        match self {
            Encoder::Zstd(e) => e.finish(),
            Encoder::Gzip(e) => e.finish(),
            Encoder::Plain(b) => b.into_inner().map_err(|e| e.into_error()),
        }
    }
}

impl Write for Encoder {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Encoder::Zstd(e) => e.write(buf),
            Encoder::Gzip(e) => e.write(buf),
            Encoder::Plain(b) => b.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Encoder::Zstd(e) => e.flush(),
            Encoder::Gzip(e) => e.flush(),
            Encoder::Plain(b) => b.flush(),
        }
    }
}

struct Open {
    enc: Encoder,
    uri: Uri,
    rows: u64,
}

/// Writes `<dir>/part-NNNNN.jsonl[.zst|.gz]` files.
pub struct JsonlWriter {
    registry: Registry,
    handle: tokio::runtime::Handle,
    dir: Uri,
    schema: SchemaRef,
    target_bytes: u64,
    spec: JsonlSpec,
    /// `added` (Dolma): the job's submit time.
    added: String,
    /// `output.zstd_level`.
    zstd_level: i32,
    current: Option<Open>,
    files: Vec<OutputFile>,
    line: Vec<u8>,
}

/// The file name extension of a compression.
pub fn extension(c: JsonlCompression) -> &'static str {
    match c {
        JsonlCompression::Zstd => "jsonl.zst",
        JsonlCompression::Gzip => "jsonl.gz",
        JsonlCompression::None => "jsonl",
    }
}

/// RFC 3339 UTC of milliseconds since the epoch (`2026-12-05T03:04:05.678Z`).
pub fn rfc3339(ms: u64) -> String {
    crate::clock::rfc3339_millis(ms)
}

impl JsonlWriter {
    fn err(&self, uri: &Uri, e: impl std::fmt::Display) -> WriteError {
        storage(uri, e)
    }

    fn open(&mut self) -> Result<(), WriteError> {
        let uri = self.dir.child(&format!(
            "part-{:05}.{}",
            self.files.len(),
            extension(self.spec.compression)
        ));
        let bridge = Staging::open(&self.registry, &self.handle, &uri)?;
        let enc = match self.spec.compression {
            JsonlCompression::Zstd => Encoder::Zstd(
                zstd::stream::write::Encoder::new(bridge, self.zstd_level)
                    .map_err(|e| self.err(&uri, e))?,
            ),
            JsonlCompression::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                bridge,
                flate2::Compression::new(6),
            )),
            JsonlCompression::None => {
                Encoder::Plain(std::io::BufWriter::with_capacity(WRITE_BUFFER, bridge))
            }
        };
        self.current = Some(Open { enc, uri, rows: 0 });
        Ok(())
    }

    /// The batch as JSON objects, one per row, in the `records` layout.
    fn rows(&self, batch: &RecordBatch) -> Result<Vec<u8>, WriteError> {
        let mut buf = Vec::with_capacity(batch.get_array_memory_size());
        let mut w = arrow_json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, arrow_json::writer::LineDelimited>(&mut buf);
        w.write(batch).map_err(|e| WriteError::Invalid {
            uri: self.dir.to_uri_string(),
            message: format!("encoding records as JSON: {e}"),
        })?;
        w.finish().map_err(|e| WriteError::Invalid {
            uri: self.dir.to_uri_string(),
            message: format!("encoding records as JSON: {e}"),
        })?;
        drop(w);
        Ok(buf)
    }

    /// One `records`-layout line rewritten in Dolma's layout.
    fn dolma(&self, line: &[u8], out: &mut Vec<u8>) -> Result<(), WriteError> {
        let bad = |e: serde_json::Error| WriteError::Invalid {
            uri: self.dir.to_uri_string(),
            message: format!("re-reading a JSON record: {e}"),
        };
        let serde_json::Value::Object(mut rec) = serde_json::from_slice(line).map_err(bad)? else {
            return Err(WriteError::Invalid {
                uri: self.dir.to_uri_string(),
                message: "a record is not a JSON object".into(),
            });
        };
        // shift_remove: the other columns keep their order under `metadata`.
        let id = rec
            .shift_remove(crate::records::ID)
            .unwrap_or(serde_json::Value::Null);
        // A null text is an empty document (Dolma's text is a string).
        let text = match rec.shift_remove(&self.spec.text) {
            Some(t @ serde_json::Value::String(_)) => t,
            _ => serde_json::Value::String(String::new()),
        };
        let created = self
            .spec
            .created
            .as_ref()
            .and_then(|c| rec.shift_remove(c))
            .filter(|v| !v.is_null());
        let mut doc = serde_json::Map::new();
        doc.insert("id".into(), id);
        doc.insert("text".into(), text);
        doc.insert(
            "source".into(),
            serde_json::Value::String(self.spec.source.clone().unwrap_or_default()),
        );
        doc.insert(
            "added".into(),
            serde_json::Value::String(self.added.clone()),
        );
        if let Some(c) = created {
            doc.insert(
                "created".into(),
                match c {
                    serde_json::Value::String(_) => c,
                    other => serde_json::Value::String(other.to_string()),
                },
            );
        }
        doc.insert("metadata".into(), serde_json::Value::Object(rec));
        serde_json::to_writer(&mut *out, &serde_json::Value::Object(doc)).map_err(bad)?;
        out.push(b'\n');
        Ok(())
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), WriteError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        check_schema(&self.dir, &self.schema, batch)?;
        let lines = self.rows(batch)?;
        if self.current.is_none() {
            self.open()?;
        }
        let dolma = self.spec.layout == JsonlLayout::Dolma;
        for raw in lines.split_inclusive(|&b| b == b'\n') {
            let mut line = std::mem::take(&mut self.line);
            line.clear();
            if dolma {
                self.dolma(raw, &mut line)?;
            } else {
                line.extend_from_slice(raw);
            }
            let cur = self.current.as_mut().expect("opened");
            let res = cur.enc.write_all(&line);
            let uri = cur.uri.clone();
            res.map_err(|e| self.err(&uri, e))?;
            self.line = line;
            let cur = self.current.as_mut().expect("opened");
            cur.rows += 1;
            // Compressed bytes so far (the encoder holds at most its window more).
            if cur.enc.written() >= self.target_bytes {
                self.close_current()?;
                self.open()?;
            }
        }
        Ok(())
    }

    fn close_current(&mut self) -> Result<(), WriteError> {
        let Some(cur) = self.current.take() else {
            return Ok(());
        };
        let uri = cur.uri.clone();
        if cur.rows == 0 {
            // Opened for a file that got no record: abandon its upload.
            if let Ok(b) = cur.enc.finish() {
                b.abort(&self.handle);
            }
            return Ok(());
        }
        let sink = cur.enc.finish().map_err(|e| self.err(&uri, e))?;
        self.files.push(sink.close(&uri, cur.rows)?);
        Ok(())
    }
}

impl super::Sink for JsonlWriter {
    fn write(&mut self, batch: &RecordBatch) -> Result<(), WriteError> {
        JsonlWriter::write(self, batch)
    }
    fn finish(mut self: Box<Self>) -> Result<Vec<OutputFile>, WriteError> {
        self.close_current()?;
        Ok(std::mem::take(&mut self.files))
    }
    fn abort(mut self: Box<Self>) {
        if let Some(cur) = self.current.take()
            && let Ok(b) = cur.enc.finish()
        {
            b.abort(&self.handle);
        }
    }
}

/// `output.format: jsonl`.
pub struct Jsonl;

impl super::Writer for Jsonl {
    fn name(&self) -> &'static str {
        "jsonl"
    }
    fn open(&self, ctx: super::WriteCtx) -> Result<Box<dyn super::Sink>, WriteError> {
        let spec = ctx.jsonl.clone().unwrap_or_default();
        Ok(Box::new(JsonlWriter {
            registry: ctx.registry,
            handle: ctx.handle,
            dir: ctx.dir,
            schema: ctx.schema,
            target_bytes: ctx.target_bytes,
            added: rfc3339(ctx.created_ms),
            zstd_level: spec.zstd_level,
            spec,
            current: None,
            files: vec![],
            line: Vec::new(),
        }))
    }
    fn published_name(&self, task: &str, n: usize, staged: &str) -> Option<String> {
        let ext = [
            JsonlCompression::Zstd,
            JsonlCompression::Gzip,
            JsonlCompression::None,
        ]
        .into_iter()
        .map(extension)
        .find(|e| staged.ends_with(&format!(".{e}")))
        .unwrap_or("jsonl");
        Some(format!("part-{task}-{n:05}.{ext}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::write::{Sink, WriteCtx, Writer};
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    /// Past `target_bytes` a new file starts: with no compression and a 1-byte
    /// target, one record per file, every record once, in order; a file opened for
    /// no record is not listed.
    #[test]
    fn files_roll_over_at_the_target_size() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = Uri::parse(dir.path().to_str().unwrap()).unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("n", DataType::Int64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(arrow_array::StringArray::from(vec!["a", "b", "c"])),
                Arc::new(arrow_array::Int64Array::from(vec![Some(1), None, Some(3)])),
            ],
        )
        .unwrap();
        let ctx = WriteCtx {
            registry: Registry::with_wrapper(Default::default(), None),
            handle: rt.handle().clone(),
            dir: root.child("attempt"),
            schema,
            props: Default::default(),
            target_bytes: 1,
            task: "t1".into(),
            tokens: None,
            jsonl: Some(JsonlSpec {
                compression: JsonlCompression::None,
                ..Default::default()
            }),
            webdataset: None,
            created_ms: 0,
        };
        let files = std::thread::scope(|s| {
            s.spawn(|| {
                let mut w: Box<dyn Sink> = Jsonl.open(ctx)?;
                w.write(&batch)?;
                w.finish()
            })
            .join()
            .unwrap()
        })
        .unwrap();
        let got: Vec<String> = files
            .iter()
            .map(|f| {
                assert_eq!(f.rows, 1);
                std::fs::read_to_string(f.uri.strip_prefix("file://").unwrap_or(&f.uri)).unwrap()
            })
            .collect();
        assert_eq!(
            got,
            [
                "{\"id\":\"a\",\"n\":1}\n",
                "{\"id\":\"b\",\"n\":null}\n",
                "{\"id\":\"c\",\"n\":3}\n"
            ]
        );
        assert!(files[2].uri.ends_with("part-00002.jsonl"));
        assert_eq!(
            Jsonl.published_name("t9", 2, &files[2].uri).unwrap(),
            "part-t9-00002.jsonl"
        );
    }

    #[test]
    fn rfc3339_is_the_civil_utc_time() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(1_796_446_245_678), "2026-12-05T04:50:45.678Z");
        assert_eq!(rfc3339(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
    }
}
