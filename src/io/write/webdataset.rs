//! WebDataset shards (`output.format: webdataset`): the layout img2dataset writes and
//! training loaders (webdataset, torchdata, MosaicML streaming's converters) read.
//! Each record is a group of tar members sharing its key (the record id): the image
//! (`{key}.jpg|png|webp|gif|bmp|tiff`, the extension from the bytes' own signature,
//! `.bin` when none is known), `{key}.txt` (the caption, when the record has one) and
//! `{key}.json` (every other output column, nulls written). A shard closes past
//! `output.target_file_bytes`; staged as `shard-NNNNN.tar`, published as
//! `shard-<task>-NNNNN.tar` (deterministic: the task id and the shard's index).
//! Members carry fixed metadata (mode 0644, uid/gid 0, mtime 0), so every attempt,
//! and every job of the same plan, writes the same bytes. A record with a null
//! caption gets an empty `.txt` (as img2dataset writes it), so every sample has the
//! same members; a record with a null image has none (filter such records out before,
//! e.g. with `image_metadata`, which rejects what does not decode).
use super::WriteError;
use super::parquet::{Staging, check_schema, storage};
use crate::protocol::records::OutputFile;
use crate::spec::WebDatasetSpec;
use crate::store::{Registry, Uri};
use arrow_array::{Array, BinaryArray, LargeBinaryArray, RecordBatch, StringArray};
use arrow_schema::SchemaRef;

type Bridge = std::io::BufWriter<Staging>;

struct Open {
    tar: tar::Builder<Bridge>,
    uri: Uri,
    rows: u64,
}

/// The file extension of an image's bytes, from their signature.
pub fn image_extension(b: &[u8]) -> &'static str {
    match b {
        [0xFF, 0xD8, 0xFF, ..] => "jpg",
        [0x89, b'P', b'N', b'G', ..] => "png",
        [
            b'R',
            b'I',
            b'F',
            b'F',
            _,
            _,
            _,
            _,
            b'W',
            b'E',
            b'B',
            b'P',
            ..,
        ] => "webp",
        [b'G', b'I', b'F', b'8', ..] => "gif",
        [b'B', b'M', ..] => "bmp",
        [b'I', b'I', 0x2A, 0x00, ..] | [b'M', b'M', 0x00, 0x2A, ..] => "tiff",
        [
            _,
            _,
            _,
            _,
            b'f',
            b't',
            b'y',
            b'p',
            b'a',
            b'v',
            b'i',
            b'f',
            ..,
        ] => "avif",
        [
            _,
            _,
            _,
            _,
            b'f',
            b't',
            b'y',
            b'p',
            b'h',
            b'e',
            b'i',
            b'c',
            ..,
        ] => "heic",
        [0xFF, 0x0A, ..] | [0, 0, 0, 0x0C, b'J', b'X', b'L', b' ', ..] => "jxl",
        _ => "bin",
    }
}

/// Writes WebDataset tar shards.
pub struct WebDatasetWriter {
    registry: Registry,
    handle: tokio::runtime::Handle,
    dir: Uri,
    schema: SchemaRef,
    target_bytes: u64,
    spec: WebDatasetSpec,
    current: Option<Open>,
    files: Vec<OutputFile>,
}

impl WebDatasetWriter {
    fn err(&self, uri: &Uri, e: impl std::fmt::Display) -> WriteError {
        storage(uri, e)
    }

    fn invalid(&self, message: String) -> WriteError {
        WriteError::Invalid {
            uri: self.dir.to_uri_string(),
            message,
        }
    }

    fn open(&mut self) -> Result<(), WriteError> {
        let uri = self
            .dir
            .child(&format!("shard-{:05}.tar", self.files.len()));
        let bridge = std::io::BufWriter::with_capacity(
            1 << 20,
            Staging::open(&self.registry, &self.handle, &uri)?,
        );
        let tar = tar::Builder::new(bridge);
        self.current = Some(Open { tar, uri, rows: 0 });
        Ok(())
    }

    /// The `.json` member of each row: every column but the image and the caption.
    fn metadata(&self, batch: &RecordBatch) -> Result<Vec<Vec<u8>>, WriteError> {
        let keep: Vec<usize> = (0..batch.num_columns())
            .filter(|&i| {
                let name = batch.schema_ref().field(i).name().clone();
                name != self.spec.image && Some(&name) != self.spec.caption.as_ref()
            })
            .collect();
        let meta = batch
            .project(&keep)
            .map_err(|e| self.invalid(e.to_string()))?;
        let mut buf = Vec::new();
        let mut w = arrow_json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, arrow_json::writer::LineDelimited>(&mut buf);
        w.write(&meta)
            .and_then(|_| w.finish())
            .map_err(|e| self.invalid(format!("encoding metadata as JSON: {e}")))?;
        drop(w);
        Ok(buf
            .split(|&b| b == b'\n')
            .take(batch.num_rows())
            .map(<[u8]>::to_vec)
            .collect())
    }

    fn append(&mut self, name: &str, data: &[u8]) -> Result<(), WriteError> {
        let mut h = tar::Header::new_ustar();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        h.set_entry_type(tar::EntryType::Regular);
        let cur = self.current.as_mut().expect("opened");
        let res = cur.tar.append_data(&mut h, name, data);
        let uri = cur.uri.clone();
        res.map_err(|e| self.err(&uri, e))
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), WriteError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        check_schema(&self.dir, &self.schema, batch)?;
        let ids = batch
            .column_by_name(crate::records::ID)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .ok_or_else(|| self.invalid("no string id column".into()))?;
        let image = batch
            .column_by_name(&self.spec.image)
            .ok_or_else(|| self.invalid(format!("no column {:?}", self.spec.image)))?;
        let bytes_of = |i: usize| -> Option<&[u8]> {
            if image.is_null(i) {
                return None;
            }
            if let Some(b) = image.as_any().downcast_ref::<BinaryArray>() {
                return Some(b.value(i));
            }
            image
                .as_any()
                .downcast_ref::<LargeBinaryArray>()
                .map(|b| b.value(i))
        };
        let caption = match &self.spec.caption {
            Some(c) => Some(
                batch
                    .column_by_name(c)
                    .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                    .ok_or_else(|| self.invalid(format!("no string column {c:?}")))?
                    .clone(),
            ),
            None => None,
        };
        let meta = self.metadata(batch)?;
        for (i, json) in meta.iter().enumerate().take(batch.num_rows()) {
            if self.current.is_none() {
                self.open()?;
            }
            let key = ids.value(i).to_string();
            if let Some(b) = bytes_of(i) {
                let ext = image_extension(b);
                self.append(&format!("{key}.{ext}"), b)?;
            }
            if let Some(c) = &caption {
                let text = if c.is_null(i) { "" } else { c.value(i) };
                self.append(&format!("{key}.txt"), text.as_bytes())?;
            }
            self.append(&format!("{key}.json"), json)?;
            let cur = self.current.as_mut().expect("opened");
            cur.rows += 1;
            let written =
                cur.tar.get_ref().get_ref().bytes + cur.tar.get_ref().buffer().len() as u64;
            if written >= self.target_bytes {
                self.close_current()?;
            }
        }
        Ok(())
    }

    fn close_current(&mut self) -> Result<(), WriteError> {
        let Some(cur) = self.current.take() else {
            return Ok(());
        };
        let uri = cur.uri.clone();
        let buffered = cur.tar.into_inner().map_err(|e| self.err(&uri, e))?;
        let sink = buffered
            .into_inner()
            .map_err(|e| self.err(&uri, e.into_error()))?;
        self.files.push(sink.close(&uri, cur.rows)?);
        Ok(())
    }
}

impl super::Sink for WebDatasetWriter {
    fn write(&mut self, batch: &RecordBatch) -> Result<(), WriteError> {
        WebDatasetWriter::write(self, batch)
    }
    fn finish(mut self: Box<Self>) -> Result<Vec<OutputFile>, WriteError> {
        self.close_current()?;
        Ok(std::mem::take(&mut self.files))
    }
    fn abort(mut self: Box<Self>) {
        if let Some(cur) = self.current.take()
            && let Ok(b) = cur.tar.into_inner()
        {
            b.into_parts().0.abort(&self.handle);
        }
    }
}

/// `output.format: webdataset`.
pub struct WebDataset;

impl super::Writer for WebDataset {
    fn name(&self) -> &'static str {
        "webdataset"
    }
    fn open(&self, ctx: super::WriteCtx) -> Result<Box<dyn super::Sink>, WriteError> {
        let spec = ctx.webdataset.clone().unwrap_or_default();
        Ok(Box::new(WebDatasetWriter {
            registry: ctx.registry,
            handle: ctx.handle,
            dir: ctx.dir,
            schema: ctx.schema,
            target_bytes: ctx.target_bytes,
            spec,
            current: None,
            files: vec![],
        }))
    }
    fn published_name(&self, task: &str, n: usize, _staged: &str) -> Option<String> {
        Some(format!("shard-{task}-{n:05}.tar"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_extensions_come_from_the_signature() {
        assert_eq!(image_extension(&[0xFF, 0xD8, 0xFF, 0xE0]), "jpg");
        assert_eq!(image_extension(b"\x89PNG\r\n\x1a\n"), "png");
        assert_eq!(image_extension(b"RIFF\0\0\0\0WEBPVP8 "), "webp");
        assert_eq!(image_extension(b"GIF89a"), "gif");
        assert_eq!(image_extension(b"II*\0"), "tiff");
        assert_eq!(image_extension(b"<svg"), "bin");
        assert_eq!(image_extension(b""), "bin");
    }
}
