//! One conformance suite over the reader and writer registries (`io::read::READERS`,
//! `io::write::WRITERS`): a format added to either runs it without a line here
//! beyond its sample files. Every reader turns a garbage file into rejects or a typed
//! error (never a panic, never records, unless the format does not validate content
//! at read time) and reads an empty input as nothing; every writer round-trips a
//! small batch through stage → publish → commit.
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use mdf::io::read::{self, ColumnsError, Item, ReadCtx, ReadError, Reader, SliceStats};
use mdf::io::write::{self, CommitCtx, WriteCtx, WriteError};
use mdf::protocol::records::InputSlice;
use mdf::records::Reject;
use mdf::spec::{Format, OutputFormat};
use mdf::store::{Registry, Uri};
use std::path::Path;
use std::sync::Arc;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn registry() -> Registry {
    Registry::with_wrapper(Default::default(), None)
}

fn file_uri(p: &Path) -> String {
    format!("file://{}", p.canonicalize().unwrap().display())
}

fn format_of(r: &dyn Reader) -> Format {
    *Format::ALL
        .iter()
        .find(|f| f.name() == r.name())
        .expect("a registered reader names a spec format")
}

/// A file name each format's reader accepts.
fn file_name(r: &dyn Reader, stem: &str) -> String {
    let ext = match r.name() {
        "jsonl" => "jsonl",
        "parquet" | "laion" => "parquet",
        "warc" => "warc.gz",
        "wet" => "wet.gz",
        "image_folder" => "jpg",
        "webdataset" => "tar",
        other => panic!("add a sample file name for the new reader {other:?} here"),
    };
    format!("{stem}.{ext}")
}

/// Whether the format checks its content at read time (image files are bytes until
/// an image operator decodes them).
fn validates_content(r: &dyn Reader) -> bool {
    r.name() != "image_folder"
}

/// A valid input of the format without records (`None`: the format's empty input is
/// no file at all).
fn empty_file(r: &dyn Reader) -> Option<Vec<u8>> {
    let parquet = |cols: &[&str]| {
        let schema = Arc::new(Schema::new(
            cols.iter()
                .map(|c| Field::new(*c, DataType::Utf8, true))
                .collect::<Vec<_>>(),
        ));
        let mut buf = Vec::new();
        let w = parquet::arrow::ArrowWriter::try_new(&mut buf, schema, None).unwrap();
        w.close().unwrap();
        buf
    };
    match r.name() {
        "jsonl" => Some(vec![]),
        // An empty gzip stream: a .gz file of 0 bytes is a cut upload (a reject).
        "warc" | "wet" => {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(b"").unwrap();
            Some(e.finish().unwrap())
        }
        "parquet" => Some(parquet(&["text"])),
        "laion" => Some(parquet(&["url", "caption"])),
        "webdataset" => Some(tar::Builder::new(Vec::new()).into_inner().unwrap()),
        "image_folder" => None,
        other => panic!("add an empty input for the new reader {other:?} here"),
    }
}

struct Read {
    result: Result<SliceStats, ReadError>,
    rows: usize,
    rejects: Vec<Reject>,
}

fn read_files(rt: &tokio::runtime::Runtime, r: &'static dyn Reader, files: &[&Path]) -> Read {
    let reg = registry();
    let uris: Vec<String> = files.iter().map(|p| file_uri(p)).collect();
    let refs: Vec<&str> = uris.iter().map(String::as_str).collect();
    // Columns as planning gets them; a format that needs a declaration gets one.
    let cols = if refs.is_empty() {
        rt.block_on(r.columns(&reg, &["file:///nothing"], Some(&text_column())))
    } else {
        rt.block_on(r.columns(&reg, &refs, None))
    };
    let cols = match cols {
        Ok(c) => c,
        Err(ColumnsError::Spec { field, message }) => {
            assert!(
                field.starts_with("input."),
                "{}: {field}: {message}",
                r.name()
            );
            rt.block_on(r.columns(&reg, &refs, Some(&text_column())))
                .unwrap_or_else(|_| text_column())
        }
        Err(e) => panic!("{}: columns: {e}", r.name()),
    };
    let schema = mdf::records::with_id_column(&cols);
    let format = format_of(r);
    let slices: Vec<InputSlice> = files
        .iter()
        .zip(&uris)
        .map(|(p, uri)| {
            let size = std::fs::metadata(p).unwrap().len();
            InputSlice {
                uri: uri.clone(),
                size,
                etag: None,
                format,
                start: 0,
                end: size.max(1),
            }
        })
        .collect();
    let ctx = ReadCtx {
        registry: reg,
        handle: rt.handle().clone(),
        batch_rows: 16,
        batch_bytes: 1 << 20,
        max_record_bytes: 1 << 20,
        cancel: Default::default(),
        assign_ids: true,
        download: Default::default(),
        cut: Default::default(),
        broken: Default::default(),
    };
    rt.block_on(async {
        tokio::task::spawn_blocking(move || {
            let (mut rows, mut rejects) = (0, vec![]);
            let result = r.read_task(&ctx, &slices, &schema, &mut |item| {
                match item {
                    Item::Batch(b) => {
                        assert_eq!(b.schema(), schema, "batches have the planned schema");
                        rows += b.num_rows();
                    }
                    Item::Rejects(v) => rejects.extend(v),
                }
                true
            });
            Read {
                result,
                rows,
                rejects,
            }
        })
        .await
        .unwrap()
    })
}

fn text_column() -> Vec<(String, DataType)> {
    vec![("text".to_string(), DataType::Utf8)]
}

#[test]
fn every_spec_format_has_one_reader_and_every_reader_a_format() {
    for f in Format::ALL {
        let r = read::find(f.name()).unwrap_or_else(|| panic!("no reader for {f:?}"));
        assert_eq!(format_of(r), f);
        assert_eq!(Format::parse(f.name()), Some(f), "the name parses back");
    }
    let mut names: Vec<&str> = read::READERS.iter().map(|r| r.name()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), read::READERS.len(), "reader names are unique");
    assert_eq!(names.len(), Format::ALL.len());
}

#[test]
fn every_reader_rejects_a_garbage_file() {
    let rt = rt();
    let d = tempfile::tempdir().unwrap();
    let mut garbage =
        b"\x00\xff\xfenot a file of any format\n{\"half\": \x1f\x8b\x08\x00junk".to_vec();
    garbage.extend((0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8));
    for &r in read::READERS {
        let p = d
            .path()
            .join(file_name(r, &format!("garbage-{}", r.name())));
        std::fs::write(&p, &garbage).unwrap();
        let got = read_files(&rt, r, &[&p]);
        match &got.result {
            Ok(stats) => {
                assert_eq!(stats.rejected as usize, got.rejects.len(), "{}", r.name());
                if validates_content(r) {
                    assert_eq!(got.rows, 0, "{}: garbage read as records", r.name());
                    assert!(
                        !got.rejects.is_empty(),
                        "{}: garbage not rejected",
                        r.name()
                    );
                } else {
                    assert_eq!(got.rows, 1, "{}: one record per file", r.name());
                }
                for rj in &got.rejects {
                    assert_eq!(rj.operator, "reader", "{}: {rj:?}", r.name());
                    assert!(!rj.reason.is_empty() && rj.detail.is_some(), "{rj:?}");
                }
            }
            // A local garbage file reads the same on every attempt: it is rejects, or
            // an error that fails the task at once, never one that is retried.
            Err(e) => assert!(
                e.is_fatal() && !e.is_retryable(),
                "{}: garbage must be rejects or a fatal error, not {e}",
                r.name()
            ),
        }
    }
}

#[test]
fn every_reader_reads_an_empty_input_as_nothing() {
    let rt = rt();
    let d = tempfile::tempdir().unwrap();
    for &r in read::READERS {
        let got = match empty_file(r) {
            Some(bytes) => {
                let p = d.path().join(file_name(r, &format!("empty-{}", r.name())));
                std::fs::write(&p, bytes).unwrap();
                read_files(&rt, r, &[&p])
            }
            None => read_files(&rt, r, &[]),
        };
        let stats = got
            .result
            .unwrap_or_else(|e| panic!("{}: empty input: {e}", r.name()));
        assert_eq!(
            (stats.records, stats.rejected, got.rows, got.rejects.len()),
            (0, 0, 0, 0),
            "{}: {:?}",
            r.name(),
            got.rejects
        );
        // No slices at all: nothing either.
        assert_eq!(read_files(&rt, r, &[]).rows, 0, "{}", r.name());
    }
}

#[test]
fn a_changed_input_is_fatal_and_a_storage_failure_retryable() {
    let changed = read::get_error(
        "s3://b/x",
        object_store::Error::Precondition {
            path: "x".into(),
            source: "etag".into(),
        },
    );
    assert!(changed.is_fatal() && !changed.is_retryable());
    assert!(changed.to_string().starts_with("input_changed: s3://b/x"));
    let storage = read::get_error(
        "s3://b/x",
        object_store::Error::Generic {
            store: "S3",
            source: "503 SlowDown".into(),
        },
    );
    assert!(storage.is_retryable() && !storage.is_fatal());
    assert!(!ReadError::Cancelled.is_retryable() && !ReadError::Cancelled.is_fatal());
}

fn token_sample() -> RecordBatch {
    use arrow_array::builder::{ListBuilder, UInt32Builder};
    let mut b = ListBuilder::new(UInt32Builder::new());
    for ids in [&[7u32, 8][..], &[], &[9, 10, 11]] {
        b.values().append_slice(ids);
        b.append(true);
    }
    let col: arrow_array::ArrayRef = std::sync::Arc::new(b.finish());
    RecordBatch::try_from_iter([("token_ids", col)]).unwrap()
}

fn sample() -> RecordBatch {
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("text", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec!["a", "b", "c"])),
        Arc::new(StringArray::from(vec![Some("x"), None, Some("zé")])),
        Arc::new(Int64Array::from(vec![Some(1), Some(2), None])),
    ];
    RecordBatch::try_new(schema, cols).unwrap()
}

/// Records with image bytes (a JPEG's and a PNG's signature, one null) and captions.
fn image_sample() -> RecordBatch {
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("image", DataType::Binary, true),
        Field::new("caption", DataType::Utf8, true),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec!["a", "b", "c"])),
        Arc::new(arrow_array::BinaryArray::from(vec![
            Some(&b"\xff\xd8\xffjpeg"[..]),
            None,
            Some(&b"\x89PNG\r\n\x1a\n"[..]),
        ])),
        Arc::new(StringArray::from(vec![
            Some("a cat"),
            Some("no image"),
            None,
        ])),
    ];
    RecordBatch::try_new(schema, cols).unwrap()
}

/// The published output's rows, by the format's own reader.
/// The rows of an Iceberg table, scanned by iceberg-rust (its snapshot count checked:
/// a retried commit adds none).
#[cfg(feature = "iceberg")]
fn read_iceberg(spec: &mdf::spec::IcebergSpec) -> Vec<RecordBatch> {
    use futures::TryStreamExt;
    rt().block_on(async {
        let cat = mdf::io::write::iceberg::catalog(spec, &registry())
            .await
            .unwrap();
        let id = iceberg::TableIdent::from_strs(["default", "t"]).unwrap();
        let t = cat.load_table(&id).await.unwrap();
        assert_eq!(t.metadata().snapshots().count(), 1, "one snapshot");
        t.scan()
            .build()
            .unwrap()
            .to_arrow()
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    })
}

#[cfg(not(feature = "iceberg"))]
fn read_iceberg(_: &mdf::spec::IcebergSpec) -> Vec<RecordBatch> {
    unreachable!("no iceberg writer in this build")
}

fn read_back(format: &str, out: &Path) -> Vec<RecordBatch> {
    match format {
        "parquet" => {
            let mut files: Vec<_> = std::fs::read_dir(out)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
                .collect();
            files.sort();
            files
                .into_iter()
                .flat_map(|p| {
                    let f = std::fs::File::open(p).unwrap();
                    parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(f, 1024)
                        .unwrap()
                        .map(Result::unwrap)
                        .collect::<Vec<_>>()
                })
                .collect()
        }
        #[cfg(feature = "lance")]
        "lance" => {
            use futures::TryStreamExt;
            rt().block_on(async {
                let ds = lance::dataset::Dataset::open(out.to_str().unwrap())
                    .await
                    .unwrap();
                ds.scan()
                    .try_into_stream()
                    .await
                    .unwrap()
                    .try_collect()
                    .await
                    .unwrap()
            })
        }
        "webdataset" => {
            // Tar members grouped by key in order: `{key}.json` (the id), the image
            // (any extension but json and txt), `{key}.txt` (the caption).
            let mut files: Vec<_> = std::fs::read_dir(out)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "tar"))
                .collect();
            files.sort();
            let mut keys: Vec<String> = Vec::new();
            let mut by_key: std::collections::HashMap<String, (Option<Vec<u8>>, Option<String>)> =
                Default::default();
            for p in files {
                let mut ar = tar::Archive::new(std::fs::File::open(p).unwrap());
                for e in ar.entries().unwrap() {
                    let mut e = e.unwrap();
                    let name = e.path().unwrap().to_string_lossy().to_string();
                    let (key, ext) = name.split_once('.').unwrap();
                    let mut data = Vec::new();
                    std::io::Read::read_to_end(&mut e, &mut data).unwrap();
                    if !by_key.contains_key(key) {
                        keys.push(key.to_string());
                    }
                    let slot = by_key.entry(key.to_string()).or_default();
                    match ext {
                        "json" => {
                            let v: serde_json::Value = serde_json::from_slice(&data).unwrap();
                            assert_eq!(v["id"], key, "the json names its key");
                        }
                        // A null caption is written as an empty `.txt` (every sample
                        // has the same members): read back as null here.
                        "txt" => {
                            slot.1 =
                                Some(String::from_utf8(data).unwrap()).filter(|t| !t.is_empty())
                        }
                        _ => slot.0 = Some(data),
                    }
                }
            }
            let images: Vec<Option<&[u8]>> = keys.iter().map(|k| by_key[k].0.as_deref()).collect();
            let captions: Vec<Option<&str>> = keys.iter().map(|k| by_key[k].1.as_deref()).collect();
            vec![
                RecordBatch::try_new(
                    image_sample().schema(),
                    vec![
                        Arc::new(StringArray::from(keys.clone())),
                        Arc::new(arrow_array::BinaryArray::from(images)),
                        Arc::new(StringArray::from(captions)),
                    ],
                )
                .unwrap(),
            ]
        }
        "jsonl" => {
            // Every published file, decompressed, through arrow's JSON reader with the
            // written schema.
            let mut files: Vec<_> = std::fs::read_dir(out)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.to_string_lossy().ends_with(".jsonl.zst"))
                .collect();
            files.sort();
            files
                .into_iter()
                .flat_map(|p| {
                    let raw = std::fs::read(p).unwrap();
                    let text = zstd::decode_all(&raw[..]).unwrap();
                    arrow_json::ReaderBuilder::new(sample().schema())
                        .build(std::io::Cursor::new(text))
                        .unwrap()
                        .map(Result::unwrap)
                        .collect::<Vec<_>>()
                })
                .collect()
        }
        other => panic!("add a read-back for the new writer {other:?} here"),
    }
}

#[test]
fn every_writer_round_trips_a_small_batch() {
    for &w in write::WRITERS {
        let rt = rt();
        let d = tempfile::tempdir().unwrap();
        let attempt = d.path().join("staging/t1/a1");
        let out = d.path().join("out");
        std::fs::create_dir_all(&attempt).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        // A token shard writer takes a token-id column instead of records.
        let batch = if w.name() == "webdataset" {
            image_sample()
        } else if w.writes_records() {
            sample()
        } else {
            token_sample()
        };
        let reg = registry();
        let ctx = WriteCtx {
            registry: reg.clone(),
            handle: rt.handle().clone(),
            dir: Uri::parse(&file_uri(&attempt)).unwrap(),
            schema: batch.schema(),
            props: Default::default(),
            target_bytes: 1 << 20,
            task: "t1".into(),
            tokens: (!w.writes_records()).then(|| mdf::spec::TokenShards {
                column: "token_ids".into(),
                dtype: mdf::spec::TokenDtype::Uint16,
                eod: Some(0),
                shuffle_seed: None,
            }),
            jsonl: None,
            webdataset: (w.name() == "webdataset").then(|| mdf::spec::WebDatasetSpec {
                image: "image".into(),
                caption: Some("caption".into()),
            }),
            created_ms: 0,
        };
        let ctx_again = ctx.clone();
        let staged = rt.block_on(async {
            let b = batch.clone();
            tokio::task::spawn_blocking(move || {
                let mut sink = w.open(ctx).unwrap();
                sink.write(&b.slice(0, 0)).unwrap();
                sink.write(&b.slice(0, 2)).unwrap();
                sink.write(&b.slice(2, 1)).unwrap();
                sink.finish().unwrap()
            })
            .await
            .unwrap()
        });
        assert!(!staged.is_empty(), "{}", w.name());
        // The text formats write the same bytes however the records come in batches
        // (every attempt of a task the same files).
        if matches!(w.name(), "jsonl" | "webdataset") {
            let again = d.path().join("staging/t1/a2");
            std::fs::create_dir_all(&again).unwrap();
            let ctx2 = WriteCtx {
                dir: Uri::parse(&file_uri(&again)).unwrap(),
                ..ctx_again.clone()
            };
            let b = batch.clone();
            let whole = rt.block_on(async {
                tokio::task::spawn_blocking(move || {
                    let mut sink = w.open(ctx2).unwrap();
                    sink.write(&b).unwrap();
                    sink.finish().unwrap()
                })
                .await
                .unwrap()
            });
            let sums = |v: &[mdf::protocol::records::OutputFile]| -> Vec<String> {
                v.iter().map(|f| f.blake3.clone()).collect()
            };
            assert_eq!(
                sums(&whole),
                sums(&staged),
                "{}: bytes depend on batching",
                w.name()
            );
        }
        assert_eq!(
            staged.iter().map(|f| f.rows).sum::<u64>(),
            3,
            "{}",
            w.name()
        );
        let out_uri = Uri::parse(&file_uri(&out)).unwrap();
        if !w.writes_records() {
            // Every staged file published under its own name (data and index of each
            // shard), and the bytes the staged file has.
            let names: std::collections::BTreeSet<String> = staged
                .iter()
                .enumerate()
                .map(|(n, f)| w.published_name("t1", n, &f.uri).expect("published"))
                .collect();
            assert_eq!(names.len(), staged.len(), "{}: {names:?}", w.name());
            for f in &staged {
                let from = f.uri.strip_prefix("file://").unwrap();
                assert_eq!(std::fs::metadata(from).unwrap().len(), f.bytes);
            }
            continue;
        }
        for (n, f) in staged.iter().enumerate() {
            let from = f.uri.strip_prefix("file://").unwrap();
            assert!(
                from.starts_with(attempt.to_str().unwrap()),
                "staged in the attempt"
            );
            if let Some(rel) = w.published_name("t1", n, &f.uri) {
                let to = out.join(rel);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::copy(from, to).unwrap();
            }
        }
        let retry = mdf::protocol::io::Retry::new(mdf::clock::Entropy::seeded(1));
        let published: Vec<write::Published> = staged
            .iter()
            .enumerate()
            .filter_map(|(n, f)| {
                let rel = w.published_name("t1", n, &f.uri)?;
                Some(write::Published {
                    uri: file_uri(&out.join(rel)),
                    rows: f.rows,
                    bytes: f.bytes,
                })
            })
            .collect();
        let iceberg = mdf::spec::IcebergSpec {
            catalog: mdf::spec::IcebergCatalogKind::Sql,
            uri: format!("sqlite://{}/catalog.db", d.path().display()),
            name: "mdf".into(),
            warehouse: None,
            namespace: vec!["default".into()],
            table: "t".into(),
            properties: Default::default(),
            region: None,
            catalog_id: None,
        };
        // Twice: a finalize retried after its commit landed must not add or lose rows.
        for _ in 0..2 {
            rt.block_on(w.commit(CommitCtx {
                registry: &reg,
                retry: &retry,
                output: &out_uri,
                schema: &batch.schema(),
                staged: staged.iter().collect(),
                published: published.clone(),
                job_uri: "file:///jobs/j1",
                iceberg: Some(&iceberg),
            }))
            .unwrap();
        }
        let back = if w.name() == "iceberg" {
            read_iceberg(&iceberg)
        } else {
            read_back(w.name(), &out)
        };
        assert!(!back.is_empty(), "{}: nothing read back", w.name());
        let back = arrow_select::concat::concat_batches(&back[0].schema(), &back).unwrap();
        assert_eq!(back.columns(), batch.columns(), "{}", w.name());
    }
}

#[test]
fn a_batch_of_another_schema_is_refused_for_good() {
    let rt = rt();
    let d = tempfile::tempdir().unwrap();
    let batch = sample();
    let w = write::writer(OutputFormat::Parquet).unwrap();
    let ctx = WriteCtx {
        registry: registry(),
        handle: rt.handle().clone(),
        dir: Uri::parse(&file_uri(d.path())).unwrap(),
        schema: batch.schema(),
        props: Default::default(),
        target_bytes: 1 << 20,
        task: "t1".into(),
        tokens: None,
        jsonl: None,
        webdataset: None,
        created_ms: 0,
    };
    let err = rt.block_on(async {
        tokio::task::spawn_blocking(move || {
            let mut sink = w.open(ctx).unwrap();
            let other = batch.project(&[0, 1]).unwrap();
            let e = sink.write(&other).unwrap_err();
            sink.abort();
            e
        })
        .await
        .unwrap()
    });
    assert!(matches!(err, WriteError::Invalid { .. }) && !err.is_retryable());
    assert!(err.to_string().contains("differs from the planned schema"));
    #[cfg(not(feature = "lance"))]
    assert!(matches!(
        write::writer(OutputFormat::Lance),
        Err(e @ WriteError::Unsupported { .. }) if !e.is_retryable()
    ));
}
