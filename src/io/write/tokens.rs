//! Token shard writers, what training frameworks read instead of records:
//!
//! * `output.format: megatron`: Megatron-LM's indexed dataset, one `.bin` (the token
//!   ids of every document, back to back, little-endian `uint16` or `int32`) and one
//!   `.idx` per shard: `MMIDIDX\0\0`, version 1 (u64), the dtype code (u8: 8 uint16,
//!   4 int32), the sequence count n (u64), the document count + 1 (u64), then n
//!   int32 sequence lengths, n int64 byte offsets into the `.bin`, and the int64
//!   document indices (document d is sequences `[idx[d], idx[d+1])`: one sequence per
//!   non-empty document, none for an empty one, as Megatron's builder records it), as
//!   `megatron.core.datasets.indexed_dataset` writes and reads them (checked against
//!   files its IndexedDatasetBuilder wrote, tests/fixtures/megatron/).
//! * `output.format: tokens`: `.tokens` (the ids, little-endian `uint16` or `uint32`,
//!   no header) and `.offsets` (n + 1 little-endian u64 token offsets: document d is
//!   `tokens[offsets[d]..offsets[d+1]]`), readable with `numpy.fromfile`.
//!
//! Every record is one document: its ids from the `output.tokens.column` list, then
//! the `eod` id when set; a null list is an empty document (so documents and records
//! stay one to one). A shard is closed once its ids reach `output.target_file_bytes`;
//! with `shuffle_seed` its documents are written in a random order drawn from the
//! seed, the task id and the shard number (the same on every attempt and every
//! build: a SplitMix64 Fisher-Yates of our own, not a library RNG whose stream may
//! change between versions). A shard is held in memory until it is written (ids as
//! u32, 4 bytes per token, and the encoded copy: about 3× `target_file_bytes` for
//! uint16), then put as two whole objects into the attempt's staging directory
//! (hence `target_file_bytes` ≤ 4 GiB for these formats); publishing names them
//! `shard-<task>-<n>.<ext>`. A shard whose documents are all empty is not written
//! (Megatron cannot map an empty `.bin`). An id too large for `dtype`, or a null
//! inside an id list, fails the task (a deterministic error naming the setting).
use super::{Sink, WriteCtx, WriteError, Writer};
use crate::protocol::records::OutputFile;
use crate::spec::{TokenDtype, TokenShards};
use crate::store::{Registry, Uri};
use arrow_array::cast::AsArray;
use arrow_array::types::UInt32Type;
use arrow_array::{Array, RecordBatch};

/// The Megatron-LM index header (`_INDEX_HEADER`).
pub const MEGATRON_HEADER: &[u8; 9] = b"MMIDIDX\x00\x00";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Megatron,
    Plain,
}

impl Layout {
    /// (data, index) file extensions.
    fn exts(self) -> (&'static str, &'static str) {
        match self {
            Layout::Megatron => ("bin", "idx"),
            Layout::Plain => ("tokens", "offsets"),
        }
    }
}

/// `output.format: megatron`.
pub static MEGATRON: Shards = Shards(Layout::Megatron);
/// `output.format: tokens`.
pub static TOKENS: Shards = Shards(Layout::Plain);

/// The token shard writer of one layout.
pub struct Shards(Layout);

fn open(layout: Layout, ctx: WriteCtx) -> Result<Box<dyn Sink>, WriteError> {
    let settings = ctx.tokens.clone().ok_or_else(|| WriteError::Invalid {
        uri: ctx.dir.to_uri_string(),
        message: "token shard output without output.tokens settings".into(),
    })?;
    Ok(Box::new(ShardWriter {
        layout,
        registry: ctx.registry,
        handle: ctx.handle,
        dir: ctx.dir,
        settings,
        task: ctx.task,
        target_bytes: ctx.target_bytes.max(1),
        tokens: Vec::new(),
        lens: Vec::new(),
        files: Vec::new(),
        shard: 0,
    }))
}

impl Writer for Shards {
    fn name(&self) -> &'static str {
        match self.0 {
            Layout::Megatron => "megatron",
            Layout::Plain => "tokens",
        }
    }
    fn open(&self, ctx: WriteCtx) -> Result<Box<dyn Sink>, WriteError> {
        open(self.0, ctx)
    }
    /// Publishes `shard-00003.bin` of task `t` as `shard-t-00003.bin`.
    fn published_name(&self, task: &str, _n: usize, staged: &str) -> Option<String> {
        let name = staged.rsplit('/').next()?;
        let rest = name.strip_prefix("shard-")?;
        Some(format!("shard-{task}-{rest}"))
    }
    fn writes_records(&self) -> bool {
        false
    }
}

struct ShardWriter {
    layout: Layout,
    registry: Registry,
    handle: tokio::runtime::Handle,
    dir: Uri,
    settings: TokenShards,
    task: String,
    target_bytes: u64,
    /// The open shard's ids, document after document, and each document's length.
    tokens: Vec<u32>,
    lens: Vec<u64>,
    files: Vec<OutputFile>,
    shard: usize,
}

impl ShardWriter {
    fn invalid(&self, message: String) -> WriteError {
        WriteError::Invalid {
            uri: self.dir.to_uri_string(),
            message,
        }
    }

    /// Appends every record of `batch` as a document, closing the shard after the
    /// document that takes it to the target size.
    fn append(&mut self, batch: &RecordBatch) -> Result<(), WriteError> {
        let col = &self.settings.column.clone();
        let Some(c) = batch.column_by_name(col) else {
            return Err(self.invalid(format!("no column {col:?} (output.tokens.column)")));
        };
        let Some(list) = c.as_list_opt::<i32>() else {
            return Err(self.invalid(format!(
                "column {col:?} is {}, not a list of uint32 token ids",
                c.data_type()
            )));
        };
        let Some(values) = list.values().as_primitive_opt::<UInt32Type>() else {
            return Err(self.invalid(format!(
                "column {col:?} is {}, not a list of uint32 token ids",
                c.data_type()
            )));
        };
        if values.null_count() > 0 {
            return Err(self.invalid(format!(
                "column {col:?} has null token ids inside its lists"
            )));
        }
        let values = values.values();
        let offsets = list.value_offsets();
        let max = self.settings.dtype.max_id();
        for i in 0..list.len() {
            let ids: &[u32] = if list.is_null(i) {
                &[]
            } else {
                &values[offsets[i] as usize..offsets[i + 1] as usize]
            };
            if let Some(&big) = ids.iter().find(|&&id| id > max) {
                return Err(self.invalid(format!(
                    "token id {big} in column {col:?} does not fit output.tokens.dtype {} (the tokenizer's vocabulary is larger: use {})",
                    self.settings.dtype.name(),
                    if self.layout == Layout::Megatron { "int32" } else { "uint32" }
                )));
            }
            self.tokens.extend_from_slice(ids);
            if let Some(eod) = self.settings.eod {
                self.tokens.push(eod);
            }
            self.lens
                .push(ids.len() as u64 + u64::from(self.settings.eod.is_some()));
            if (self.tokens.len() * self.settings.dtype.size()) as u64 >= self.target_bytes {
                self.close_shard()?;
            }
        }
        Ok(())
    }

    /// The open shard's document order: input order, or the seeded permutation.
    fn order(&self) -> Vec<usize> {
        match self.settings.shuffle_seed {
            None => (0..self.lens.len()).collect(),
            Some(seed) => {
                let h = crate::protocol::hash16(&[
                    &seed.to_string(),
                    &self.task,
                    &self.shard.to_string(),
                ]);
                permutation(self.lens.len(), u64::from_str_radix(&h, 16).unwrap_or(seed))
            }
        }
    }

    /// Writes the open shard (data and index file) into the staging directory.
    fn close_shard(&mut self) -> Result<(), WriteError> {
        if self.lens.is_empty() {
            return Ok(());
        }
        let dtype = self.settings.dtype;
        let size = dtype.size();
        let mut starts = Vec::with_capacity(self.lens.len());
        let mut at = 0u64;
        for &l in &self.lens {
            starts.push(at);
            at += l;
        }
        if self.tokens.is_empty() {
            // Only empty documents: nothing a reader could map.
            self.lens.clear();
            return Ok(());
        }
        let order = self.order();
        let mut data = Vec::with_capacity(self.tokens.len() * size);
        for &d in &order {
            let ids = &self.tokens[starts[d] as usize..(starts[d] + self.lens[d]) as usize];
            match dtype {
                TokenDtype::Uint16 => {
                    for &id in ids {
                        data.extend_from_slice(&(id as u16).to_le_bytes());
                    }
                }
                TokenDtype::Int32 | TokenDtype::Uint32 => {
                    for &id in ids {
                        data.extend_from_slice(&id.to_le_bytes());
                    }
                }
            }
        }
        let n = order.len();
        let index = match self.layout {
            Layout::Megatron => {
                let mut idx = Vec::with_capacity(34 + n * 20 + 8);
                idx.extend_from_slice(MEGATRON_HEADER);
                idx.extend_from_slice(&1u64.to_le_bytes());
                idx.push(match dtype {
                    TokenDtype::Uint16 => 8,
                    _ => 4,
                });
                // One sequence per non-empty document (Megatron's builder records
                // an empty document as a document of no sequences).
                let seqs: Vec<usize> = order
                    .iter()
                    .copied()
                    .filter(|&d| self.lens[d] > 0)
                    .collect();
                idx.extend_from_slice(&(seqs.len() as u64).to_le_bytes());
                idx.extend_from_slice(&(n as u64 + 1).to_le_bytes());
                for &d in &seqs {
                    let l = i32::try_from(self.lens[d]).map_err(|_| {
                        self.invalid(format!(
                            "a document of {} tokens is longer than Megatron's int32 sequence length",
                            self.lens[d]
                        ))
                    })?;
                    idx.extend_from_slice(&l.to_le_bytes());
                }
                let mut ptr = 0i64;
                for &d in &seqs {
                    idx.extend_from_slice(&ptr.to_le_bytes());
                    ptr += (self.lens[d] * size as u64) as i64;
                }
                let mut k = 0i64;
                idx.extend_from_slice(&k.to_le_bytes());
                for &d in &order {
                    k += i64::from(self.lens[d] > 0);
                    idx.extend_from_slice(&k.to_le_bytes());
                }
                idx
            }
            Layout::Plain => {
                let mut off = Vec::with_capacity((n + 1) * 8);
                let mut at = 0u64;
                off.extend_from_slice(&at.to_le_bytes());
                for &d in &order {
                    at += self.lens[d];
                    off.extend_from_slice(&at.to_le_bytes());
                }
                off
            }
        };
        let (data_ext, index_ext) = self.layout.exts();
        let stem = format!("shard-{:05}", self.shard);
        self.put(&format!("{stem}.{data_ext}"), data, n as u64)?;
        self.put(&format!("{stem}.{index_ext}"), index, 0)?;
        self.shard += 1;
        self.tokens.clear();
        self.lens.clear();
        Ok(())
    }

    /// Puts one staged file; `rows` are the documents a data file holds (0 for an
    /// index, so the manifest's row total counts each document once).
    fn put(&mut self, name: &str, bytes: Vec<u8>, rows: u64) -> Result<(), WriteError> {
        let uri = self.dir.child(name);
        let storage = |e: &dyn std::fmt::Display| WriteError::Storage {
            uri: uri.to_uri_string(),
            message: e.to_string(),
        };
        let store = self.registry.open(&uri).map_err(|e| storage(&e))?;
        let blake3 = blake3::hash(&bytes).to_hex().to_string();
        let len = bytes.len() as u64;
        self.handle
            .block_on(async {
                use object_store::ObjectStoreExt;
                store.put(&uri.path, bytes.into()).await
            })
            .map_err(|e| storage(&e))?;
        self.files.push(OutputFile {
            uri: uri.to_uri_string(),
            rows,
            bytes: len,
            blake3,
        });
        Ok(())
    }
}

/// A permutation of `0..n` from `seed`: Fisher-Yates over SplitMix64, fixed here so
/// that a seed means the same order in every build.
pub fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        // Lemire's multiply-shift onto 0..=i.
        let j = ((u128::from(next()) * (i as u128 + 1)) >> 64) as usize;
        order.swap(i, j);
    }
    order
}

impl Sink for ShardWriter {
    fn write(&mut self, batch: &RecordBatch) -> Result<(), WriteError> {
        self.append(batch)
    }
    fn finish(mut self: Box<Self>) -> Result<Vec<OutputFile>, WriteError> {
        self.close_shard()?;
        Ok(std::mem::take(&mut self.files))
    }
    fn abort(self: Box<Self>) {
        // Every staged file was put whole; nothing is in flight.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{ListBuilder, UInt32Builder};
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch(docs: &[Option<&[u32]>]) -> RecordBatch {
        let mut b = ListBuilder::new(UInt32Builder::new());
        for d in docs {
            match d {
                Some(ids) => {
                    b.values().append_slice(ids);
                    b.append(true);
                }
                None => b.append(false),
            }
        }
        let col = Arc::new(b.finish());
        let schema = Schema::new(vec![Field::new("token_ids", col.data_type().clone(), true)]);
        RecordBatch::try_new(Arc::new(schema), vec![col]).unwrap()
    }

    fn write(
        layout: Layout,
        dtype: TokenDtype,
        eod: Option<u32>,
        seed: Option<u64>,
        target: u64,
        batches: &[RecordBatch],
    ) -> Result<Vec<(String, Vec<u8>, u64)>, WriteError> {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = Uri::parse(dir.path().to_str().unwrap()).unwrap();
        let ctx = WriteCtx {
            registry: Registry::with_wrapper(Default::default(), None),
            handle: rt.handle().clone(),
            dir: root.child("attempt"),
            schema: batches[0].schema(),
            props: Default::default(),
            target_bytes: target,
            task: "t1".into(),
            tokens: Some(TokenShards {
                column: "token_ids".into(),
                dtype,
                eod,
                shuffle_seed: seed,
            }),
            jsonl: None,
            webdataset: None,
            created_ms: 0,
        };
        let files = std::thread::scope(|s| {
            s.spawn(|| {
                let mut w = open(layout, ctx)?;
                for b in batches {
                    w.write(b)?;
                }
                w.finish()
            })
            .join()
            .unwrap()
        })?;
        Ok(files
            .into_iter()
            .map(|f| {
                let p = f.uri.strip_prefix("file://").unwrap_or(&f.uri).to_string();
                let name = p.rsplit('/').next().unwrap().to_string();
                let bytes = std::fs::read(&p).unwrap();
                assert_eq!(bytes.len() as u64, f.bytes);
                assert_eq!(blake3::hash(&bytes).to_hex().to_string(), f.blake3);
                (name, bytes, f.rows)
            })
            .collect())
    }

    /// The documents of plain uint16 shards (`.tokens`, `.offsets` pairs), checking
    /// each pair's offsets span its ids and its rows count its documents.
    fn plain_docs(files: &[(String, Vec<u8>, u64)]) -> Vec<Vec<u32>> {
        let mut docs = vec![];
        for pair in files.chunks(2) {
            assert!(pair[0].0.ends_with(".tokens") && pair[1].0.ends_with(".offsets"));
            let ids: Vec<u32> = pair[0]
                .1
                .chunks(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]) as u32)
                .collect();
            let off = u64s(&pair[1].1);
            assert_eq!(off[0], 0);
            assert_eq!(*off.last().unwrap() as usize, ids.len());
            assert_eq!(pair[0].2 as usize, off.len() - 1);
            for w in off.windows(2) {
                docs.push(ids[w[0] as usize..w[1] as usize].to_vec());
            }
        }
        docs
    }

    fn u64s(b: &[u8]) -> Vec<u64> {
        b.chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    /// Byte for byte what megatron-core's own IndexedDatasetBuilder writes for the
    /// same documents (tests/fixtures/megatron/, by scripts/megatron-fixtures.py).
    #[test]
    fn megatron_shards_equal_megatrons_own_builder() {
        let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/megatron");
        type Case<'a> = (&'a str, TokenDtype, Option<u32>, Vec<Option<&'a [u32]>>);
        let cases: [Case; 2] = [
            (
                "uint16-empty",
                TokenDtype::Uint16,
                None,
                vec![Some(&[5, 6, 7]), None, Some(&[9, 10])],
            ),
            (
                "int32-eod",
                TokenDtype::Int32,
                Some(2),
                vec![Some(&[5, 6, 7]), Some(&[]), Some(&[70_000])],
            ),
        ];
        for (name, dtype, eod, docs) in cases {
            let files =
                write(Layout::Megatron, dtype, eod, None, 1 << 20, &[batch(&docs)]).unwrap();
            let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
            assert_eq!(names, ["shard-00000.bin", "shard-00000.idx"]);
            assert_eq!(
                (files[0].2, files[1].2),
                (3, 0),
                "{name}: rows are documents"
            );
            for (f, ext) in files.iter().zip(["bin", "idx"]) {
                let want = std::fs::read(format!("{fixtures}/{name}.{ext}")).unwrap();
                assert_eq!(f.1, want, "{name}.{ext} differs from Megatron's");
            }
        }
        // Only empty documents: no shard at all (Megatron cannot map an empty .bin).
        let files = write(
            Layout::Megatron,
            TokenDtype::Uint16,
            None,
            None,
            1 << 20,
            &[batch(&[None, Some(&[])])],
        )
        .unwrap();
        assert!(files.is_empty());
    }

    #[test]
    fn the_shuffle_is_a_fixed_function_of_its_seed() {
        // Pinned: a seed must mean the same order in every build of mdf.
        // (The value of a Python transcription of SplitMix64 + Fisher-Yates.)
        assert_eq!(permutation(10, 42), [8, 3, 6, 5, 4, 0, 9, 2, 1, 7]);
        let p = permutation(1000, 7);
        let mut sorted = p.clone();
        sorted.sort();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        assert_ne!(p, permutation(1000, 8));
        assert!(permutation(0, 1).is_empty() && permutation(1, 1) == [0]);
    }

    #[test]
    fn plain_shards_split_at_the_target_and_shuffle_deterministically() {
        let docs: Vec<Vec<u32>> = (0..40u32)
            .map(|i| (0..=i % 7).map(|k| i * 10 + k).collect())
            .collect();
        let refs: Vec<Option<&[u32]>> = docs.iter().map(|d| Some(d.as_slice())).collect();
        let b = batch(&refs);
        // 2 bytes per id, a shard closes once it holds 64 bytes.
        let plain = write(
            Layout::Plain,
            TokenDtype::Uint16,
            None,
            None,
            64,
            std::slice::from_ref(&b),
        )
        .unwrap();
        assert!(
            plain.len() > 2 && plain.len().is_multiple_of(2),
            "{} files",
            plain.len()
        );
        let got = plain_docs(&plain);
        assert_eq!(got, docs, "input order, split into shards");
        // Shuffled: the same documents, another order, the same on every attempt.
        let shuffled_with = |seed| {
            write(
                Layout::Plain,
                TokenDtype::Uint16,
                None,
                Some(seed),
                64,
                std::slice::from_ref(&b),
            )
            .unwrap()
        };
        let a = shuffled_with(7);
        let again = shuffled_with(7);
        assert_eq!(a, again);
        assert_ne!(a, plain);
        let other = shuffled_with(8);
        assert_ne!(a, other);
        let mut shuffled = plain_docs(&a);
        shuffled.sort();
        let mut sorted = docs.clone();
        sorted.sort();
        assert_eq!(shuffled, sorted);
    }

    #[test]
    fn ids_too_large_for_the_dtype_and_a_wrong_column_are_refused() {
        let b = batch(&[Some(&[1, 65_536])]);
        let e = write(
            Layout::Megatron,
            TokenDtype::Uint16,
            None,
            None,
            1 << 20,
            &[b],
        )
        .unwrap_err();
        assert!(!e.is_retryable());
        assert!(e.to_string().contains("token id 65536"), "{e}");
        assert!(e.to_string().contains("use int32"), "{e}");
        // A null id inside a list (pre-tokenized input) is refused, never written as 0.
        let mut lb = ListBuilder::new(UInt32Builder::new());
        lb.values().append_value(1);
        lb.values().append_null();
        lb.append(true);
        let list = lb.finish();
        let s = Schema::new(vec![Field::new(
            "token_ids",
            list.data_type().clone(),
            true,
        )]);
        let b = RecordBatch::try_new(Arc::new(s), vec![Arc::new(list)]).unwrap();
        let e = write(
            Layout::Megatron,
            TokenDtype::Int32,
            None,
            None,
            1 << 20,
            &[b],
        )
        .unwrap_err();
        assert!(e.to_string().contains("null token ids"), "{e}");
        let col = Arc::new(arrow_array::StringArray::from(vec!["x"]));
        let s = Schema::new(vec![Field::new("token_ids", DataType::Utf8, true)]);
        let b = RecordBatch::try_new(Arc::new(s), vec![col]).unwrap();
        let e = write(Layout::Plain, TokenDtype::Uint32, None, None, 1 << 20, &[b]).unwrap_err();
        assert!(e.to_string().contains("not a list of uint32"), "{e}");
        assert_eq!(
            TOKENS
                .published_name("abc", 0, "file:///x/staging/p00/abc/a1/shard-00002.idx")
                .as_deref(),
            Some("shard-abc-00002.idx")
        );
    }
}
