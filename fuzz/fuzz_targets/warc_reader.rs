//! The WARC/WET/ARC reader on arbitrary bytes, plain and as per-record gzip, from an
//! in-memory store and from a byte range: never panics, never errors on content (a
//! broken file becomes rejects), and its parsing helpers hold up on their own.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mdf::protocol::records::InputSlice;
use mdf::spec::Format;
use mdf::store::Registry;
use mdf::io::read::{Item, ReadCtx, warc};
use object_store::ObjectStoreExt;
use std::sync::LazyLock;

static RT: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
});

fn read(reg: &Registry, uri: &str, size: u64, start: u64, format: Format) {
    let ctx = ReadCtx {
        registry: reg.clone(),
        handle: RT.handle().clone(),
        batch_rows: 3,
        batch_bytes: 1 << 16,
        max_record_bytes: 1 << 16,
        cancel: Default::default(),
        assign_ids: true,
        download: Default::default(),
    };
    let slice = InputSlice {
        uri: uri.to_string(),
        size,
        etag: None,
        format,
        start: start.min(size),
        end: size,
    };
    let cols = if format == Format::Wet {
        warc::wet_columns()
    } else {
        warc::columns()
    };
    let schema = mdf::records::with_id_column(&cols);
    let r = warc::read(&ctx, &slice, &schema, &mut |item| {
        if let Item::Batch(b) = item {
            assert!(b.num_rows() <= 3 + 1);
        }
        true
    });
    assert!(r.is_ok(), "content never fails a read: {r:?}");
}

fuzz_target!(|data: &[u8]| {
    let reg = Registry::with_wrapper(Default::default(), None);
    let (store, u) = reg.resolve("memory://fuzz/in.warc").unwrap();
    RT.block_on(store.put(&u.path, bytes::Bytes::copy_from_slice(data).into()))
        .unwrap();
    let n = data.len() as u64;
    read(&reg, "memory://fuzz/in.warc", n, 0, Format::Warc);
    read(&reg, "memory://fuzz/in.warc", n, 0, Format::Wet);
    // As a .warc.gz: members, and a byte range starting mid-file.
    let (store, u) = reg.resolve("memory://fuzz/in.warc.gz").unwrap();
    RT.block_on(store.put(&u.path, bytes::Bytes::copy_from_slice(data).into()))
        .unwrap();
    read(&reg, "memory://fuzz/in.warc.gz", n, 0, Format::Warc);
    read(&reg, "memory://fuzz/in.warc.gz", n, n / 3, Format::Warc);
    // The helpers on their own.
    let _ = mdf::kernels::http::parse_http(data);
    let _ = mdf::kernels::http::dechunk(data);
    let _ = mdf::kernels::http::meta_charset(data);
    let _ = warc::record::read_header(&mut std::io::Cursor::new(data));
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = warc::record::arc_header(s);
    }
});
