//! The S3 client as the protocol needs it: status codes as S3 sends them, and one
//! retry loop for create-only writes. object_store retries a failed PUT itself (5xx,
//! a response cut off after the request went out) and maps 409 to `AlreadyExists`;
//! for a conditional create both turn a write that landed, or one that S3 asked to
//! repeat, into "another writer was first": a lost lease, a task error. So creates go
//! through a second client with no retries of its own, and a 409 on any PUT
//! (`ConditionalRequestConflict`, `OperationAborted`) comes back as a transient error;
//! `protocol::io::create_bytes` retries it and reads back its `write_id` after any
//! attempt that may have landed. Every other request keeps object_store's retries.
//! This module must never decide what a create means; it only reports what S3 said.
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{
    ClientOptions, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    Result, RetryConfig,
};
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

/// Builds the store for one bucket from `builder` (bucket, endpoint, region and
/// credentials already set): object_store's retries for everything but create-only
/// PUTs, which get none (see the module docs), under one concurrency limit.
pub fn build(
    builder: AmazonS3Builder,
    opts: ClientOptions,
    max_concurrent_requests: usize,
) -> Result<Arc<dyn ObjectStore>> {
    let retry = RetryConfig {
        max_retries: 8,
        retry_timeout: Duration::from_secs(180),
        ..Default::default()
    };
    let create = RetryConfig {
        max_retries: 0,
        ..retry.clone()
    };
    let store = S3Creates {
        main: Arc::new(
            builder
                .clone()
                .with_client_options(opts.clone())
                .with_retry(retry)
                .build()?,
        ),
        create: Arc::new(
            builder
                .with_client_options(opts)
                .with_retry(create)
                .build()?,
        ),
    };
    Ok(Arc::new(object_store::limit::LimitStore::new(
        store,
        max_concurrent_requests.max(1),
    )))
}

/// Routes create-only PUTs to a client without retries and reports S3's 409 on any
/// PUT as a transient error (on a plain PUT it is `OperationAborted`, never "already
/// exists").
#[derive(Debug)]
struct S3Creates {
    main: Arc<dyn ObjectStore>,
    create: Arc<dyn ObjectStore>,
}

/// A PUT answered 409: S3 asks to repeat it (`ConditionalRequestConflict`: another
/// conditional write to the key was in flight; `OperationAborted`). object_store
/// reports 412 and 304 as `AlreadyExists` wrapping its own `Precondition` /
/// `NotModified`, and a bare 409 as `AlreadyExists` wrapping the HTTP error.
fn is_conflict(e: &object_store::Error) -> bool {
    match e {
        object_store::Error::AlreadyExists { source, .. } => {
            source.downcast_ref::<object_store::Error>().is_none()
        }
        _ => false,
    }
}

impl std::fmt::Display for S3Creates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.main)
    }
}

#[async_trait]
impl ObjectStore for S3Creates {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let r = if opts.mode == PutMode::Create {
            self.create.put_opts(location, payload, opts).await
        } else {
            self.main.put_opts(location, payload, opts).await
        };
        match r {
            Err(e) if is_conflict(&e) => Err(object_store::Error::Generic {
                store: "S3",
                source: format!("409 Conflict on PUT, to be retried: {e}").into(),
            }),
            r => r,
        }
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.main.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.main.get_opts(location, options).await
    }
    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.main.get_ranges(location, ranges).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.main.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.main.list(prefix)
    }
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.main.list_with_offset(prefix, offset)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.main.list_with_delimiter(prefix).await
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.main.copy_opts(from, to, options).await
    }
    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.main.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bare_409_is_a_conflict() {
        let http: Box<dyn std::error::Error + Send + Sync> =
            "Server returned non-2xx status code: 409 Conflict".into();
        let conflict = object_store::Error::AlreadyExists {
            path: "a".into(),
            source: http,
        };
        assert!(is_conflict(&conflict));
        let precondition = object_store::Error::AlreadyExists {
            path: "a".into(),
            source: Box::new(object_store::Error::Precondition {
                path: "a".into(),
                source: "412".into(),
            }),
        };
        assert!(!is_conflict(&precondition));
    }
}
