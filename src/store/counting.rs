//! A transparent [`ObjectStore`] wrapper that counts every request (by kind) and the
//! bytes moved, into any number of shared counters (worker totals, one task's totals).
//! Listing is counted per page of up to 1,000 results, as S3 bills it.
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result, UploadPart,
};
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Request counters, shared by reference.
#[derive(Debug, Default)]
pub struct RequestCounts {
    pub get: AtomicU64,
    pub head: AtomicU64,
    pub put: AtomicU64,
    pub list: AtomicU64,
    pub delete: AtomicU64,
    pub copy: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
}

/// A plain copy of [`RequestCounts`], as persisted in commit records and stats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestSnapshot {
    pub get: u64,
    pub head: u64,
    pub put: u64,
    pub list: u64,
    pub delete: u64,
    pub copy: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl RequestSnapshot {
    pub fn total(&self) -> u64 {
        self.get + self.head + self.put + self.list + self.delete + self.copy
    }
    pub fn add(&mut self, o: &RequestSnapshot) {
        self.get += o.get;
        self.head += o.head;
        self.put += o.put;
        self.list += o.list;
        self.delete += o.delete;
        self.copy += o.copy;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
    }
}

impl RequestCounts {
    /// Adds counts made elsewhere (an attempt whose commit record will never carry
    /// them).
    pub fn add(&self, s: &RequestSnapshot) {
        let a = |c: &AtomicU64, v: u64| c.fetch_add(v, Ordering::Relaxed);
        a(&self.get, s.get);
        a(&self.head, s.head);
        a(&self.put, s.put);
        a(&self.list, s.list);
        a(&self.delete, s.delete);
        a(&self.copy, s.copy);
        a(&self.bytes_read, s.bytes_read);
        a(&self.bytes_written, s.bytes_written);
    }
    pub fn snapshot(&self) -> RequestSnapshot {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RequestSnapshot {
            get: l(&self.get),
            head: l(&self.head),
            put: l(&self.put),
            list: l(&self.list),
            delete: l(&self.delete),
            copy: l(&self.copy),
            bytes_read: l(&self.bytes_read),
            bytes_written: l(&self.bytes_written),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Get,
    Head,
    Put,
    List,
    Delete,
    Copy,
    BytesRead,
    BytesWritten,
}

#[derive(Debug, Clone)]
struct Counters(Arc<[Arc<RequestCounts>]>);

impl Counters {
    fn add(&self, kind: Kind, n: u64) {
        for c in self.0.iter() {
            let a = match kind {
                Kind::Get => &c.get,
                Kind::Head => &c.head,
                Kind::Put => &c.put,
                Kind::List => &c.list,
                Kind::Delete => &c.delete,
                Kind::Copy => &c.copy,
                Kind::BytesRead => &c.bytes_read,
                Kind::BytesWritten => &c.bytes_written,
            };
            a.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// Counts requests made through it; otherwise identical to the inner store.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    counters: Counters,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn ObjectStore>, counters: Vec<Arc<RequestCounts>>) -> Self {
        Self {
            inner,
            counters: Counters(counters.into()),
        }
    }
}

impl std::fmt::Display for CountingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

fn count_pages(
    s: BoxStream<'static, Result<ObjectMeta>>,
    c: Counters,
) -> BoxStream<'static, Result<ObjectMeta>> {
    c.add(Kind::List, 1);
    let mut n = 0u64;
    s.inspect_ok(move |_| {
        n += 1;
        if n.is_multiple_of(1000) {
            c.add(Kind::List, 1);
        }
    })
    .boxed()
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.counters.add(Kind::Put, 1);
        self.counters
            .add(Kind::BytesWritten, payload.content_length() as u64);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.counters.add(Kind::Put, 1);
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(CountingUpload {
            inner,
            counters: self.counters.clone(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if options.head {
            self.counters.add(Kind::Head, 1);
            return self.inner.get_opts(location, options).await;
        }
        self.counters.add(Kind::Get, 1);
        let mut r = self.inner.get_opts(location, options).await?;
        let counters = self.counters.clone();
        let payload = std::mem::replace(
            &mut r.payload,
            object_store::GetResultPayload::Stream(futures::stream::empty().boxed()),
        );
        let stream = match payload {
            object_store::GetResultPayload::Stream(s) => s,
            #[allow(unreachable_patterns)]
            other => {
                r.payload = other;
                let n = r.range.end - r.range.start;
                counters.add(Kind::BytesRead, n);
                return Ok(r);
            }
        };
        r.payload = object_store::GetResultPayload::Stream(
            stream
                .inspect_ok(move |b: &Bytes| counters.add(Kind::BytesRead, b.len() as u64))
                .boxed(),
        );
        Ok(r)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.counters.add(Kind::Get, ranges.len() as u64);
        let out = self.inner.get_ranges(location, ranges).await?;
        self.counters
            .add(Kind::BytesRead, out.iter().map(|b| b.len() as u64).sum());
        Ok(out)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let c = self.counters.clone();
        self.inner.delete_stream(
            locations
                .inspect_ok(move |_| c.add(Kind::Delete, 1))
                .boxed(),
        )
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        count_pages(self.inner.list(prefix), self.counters.clone())
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        count_pages(
            self.inner.list_with_offset(prefix, offset),
            self.counters.clone(),
        )
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.counters.add(Kind::List, 1);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.counters.add(Kind::Copy, 1);
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.counters.add(Kind::Copy, 1);
        self.counters.add(Kind::Delete, 1);
        self.inner.rename_opts(from, to, options).await
    }
}

#[derive(Debug)]
struct CountingUpload {
    inner: Box<dyn MultipartUpload>,
    counters: Counters,
}

#[async_trait]
impl MultipartUpload for CountingUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.counters.add(Kind::Put, 1);
        self.counters
            .add(Kind::BytesWritten, data.content_length() as u64);
        self.inner.put_part(data)
    }
    async fn complete(&mut self) -> Result<PutResult> {
        self.counters.add(Kind::Put, 1);
        self.inner.complete().await
    }
    async fn abort(&mut self) -> Result<()> {
        self.counters.add(Kind::Delete, 1);
        self.inner.abort().await
    }
}
