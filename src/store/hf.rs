//! Hugging Face Hub datasets as a read-only object store:
//! `hf://datasets/OWNER/NAME[@REVISION]/PATH`. Listing through the tree API (paged
//! by its `Link` header), reads as ranged GETs of the resolve URL (the redirect to
//! the CDN followed, where the token is not sent), `HF_TOKEN` from the environment,
//! 429s waited out per `Retry-After`. [`pin`] turns a revision into its commit sha,
//! so a job reads one snapshot (docs/ARCHITECTURE.md, "Hugging Face Hub inputs").
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    Attributes, CopyOptions, Extensions, GetOptions, GetResult, GetResultPayload, ListResult,
    MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, Result,
};
use std::sync::Arc;
use std::time::Duration;

const STORE: &str = "HuggingFaceHub";
/// Requests in flight to the Hub from one store (one process's reads of one dataset).
const IN_FLIGHT: usize = 16;
/// 429s waited out before the request fails (each wait at most [`MAX_WAIT`]).
const MAX_429: u32 = 10;
const MAX_WAIT: Duration = Duration::from_secs(60);
/// Retries of 5xx answers and connection errors, with doubling backoff from 250 ms.
const MAX_RETRIES: u32 = 5;

/// `OWNER/NAME`, the revision (decoded) and the rest of a `hf://datasets/…` URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HfUri {
    pub repo: String,
    pub revision: String,
    pub path: String,
}

impl HfUri {
    /// Parses `hf://datasets/OWNER/NAME[@REV]/REST`; `None` when it is not one.
    pub fn parse(s: &str) -> std::result::Result<HfUri, String> {
        let rest = s
            .strip_prefix("hf://")
            .ok_or_else(|| "not an hf:// URI".to_string())?;
        let rest = rest.strip_prefix("datasets/").ok_or_else(|| {
            "expected hf://datasets/OWNER/NAME[@REVISION]/PATH (only datasets are read)".to_string()
        })?;
        let mut it = rest.splitn(3, '/');
        let owner = it.next().unwrap_or_default();
        let name_rev = it.next().unwrap_or_default();
        let path = it.next().unwrap_or_default();
        let (name, rev) = match name_rev.split_once('@') {
            Some((n, r)) => (n, r),
            None => (name_rev, "main"),
        };
        let ok = |x: &str| {
            !x.is_empty()
                && x.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                && x != "."
                && x != ".."
        };
        if !ok(owner) || !ok(name) {
            return Err(
                "expected hf://datasets/OWNER/NAME[@REVISION]/PATH with OWNER and NAME of letters, digits, '-', '_' and '.'".into(),
            );
        }
        let revision = rev.replace("%2F", "/").replace("%2f", "/");
        if revision.is_empty()
            || revision.contains(['%', '?', '#', ' '])
            || revision.split('/').any(|s| s.is_empty() || s == "..")
        {
            return Err(format!("bad revision {rev:?}"));
        }
        Ok(HfUri {
            repo: format!("{owner}/{name}"),
            revision,
            path: path.to_string(),
        })
    }

    /// The store key: `hf://datasets/OWNER/NAME@REV` (a '/' in REV as `%2F`).
    pub fn store(&self) -> String {
        format!(
            "hf://datasets/{}@{}",
            self.repo,
            self.revision.replace('/', "%2F")
        )
    }

    /// Whether the revision is a commit sha (the bytes under it never change).
    pub fn pinned(&self) -> bool {
        is_sha(&self.revision)
    }
}

fn is_sha(r: &str) -> bool {
    r.len() == 40 && r.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The Hub's address (`HF_ENDPOINT`, as huggingface_hub reads it).
pub fn endpoint() -> String {
    std::env::var("HF_ENDPOINT")
        .ok()
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| "https://huggingface.co".into())
        .trim_end_matches('/')
        .to_string()
}

/// The token from the environment (never persisted).
fn token() -> Option<String> {
    ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|t| !t.trim().is_empty()))
        .map(|t| t.trim().to_string())
}

/// `pattern` (an `hf://` URI or glob) with its revision replaced by the commit sha it
/// names now; other patterns unchanged. A missing repository, revision or access is
/// an error saying which.
pub async fn pin(pattern: &str) -> std::result::Result<String, String> {
    if !pattern.starts_with("hf://") {
        return Ok(pattern.to_string());
    }
    let u = HfUri::parse(pattern)?;
    let store = HfStore::new(&u)?;
    let sha = store.commit().await?;
    let pinned = HfUri {
        revision: sha,
        ..u.clone()
    };
    Ok(if u.path.is_empty() {
        pinned.store()
    } else {
        format!("{}/{}", pinned.store(), u.path)
    })
}

#[derive(Clone)]
pub struct HfStore {
    client: reqwest::Client,
    endpoint: String,
    uri: HfUri,
    token: Option<String>,
    limit: Arc<tokio::sync::Semaphore>,
}

/// The token never prints.
impl std::fmt::Debug for HfStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfStore")
            .field("endpoint", &self.endpoint)
            .field("uri", &self.uri)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl std::fmt::Display for HfStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HfStore({})", self.uri.store())
    }
}

/// One entry of the tree API.
#[derive(Debug, serde::Deserialize)]
struct TreeEntry {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    oid: Option<String>,
    #[serde(default)]
    size: u64,
    path: String,
    #[serde(default)]
    lfs: Option<Lfs>,
}

#[derive(Debug, serde::Deserialize)]
struct Lfs {
    oid: String,
    #[serde(default)]
    size: Option<u64>,
}

impl TreeEntry {
    fn meta(self) -> Option<ObjectMeta> {
        if self.kind != "file" {
            return None;
        }
        let size = self.lfs.as_ref().and_then(|l| l.size).unwrap_or(self.size);
        Some(ObjectMeta {
            location: Path::parse(&self.path).ok()?,
            last_modified: chrono_epoch(),
            size,
            e_tag: self.lfs.map(|l| l.oid).or(self.oid),
            version: None,
        })
    }
}

/// The tree API gives no time without `expand` (a request per file): the epoch.
fn chrono_epoch() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::<chrono::Utc>::UNIX_EPOCH
}

fn generic(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> object_store::Error {
    object_store::Error::Generic {
        store: STORE,
        source: e.into(),
    }
}

/// What the Hub said in an error body (`{"error": "..."}`), or the body's start.
async fn body_message(r: reqwest::Response) -> String {
    let t = r.text().await.unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(&t)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or_else(|| t.chars().take(200).collect())
}

/// `Retry-After` as seconds or an HTTP date, capped.
fn retry_after(r: &reqwest::Response) -> Duration {
    retry_after_value(
        r.headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or(""),
    )
}

fn retry_after_value(v: &str) -> Duration {
    let d = if let Ok(s) = v.trim().parse::<f64>() {
        // NaN, inf or 1e20 would panic: clamped first.
        Duration::from_secs_f64(if s.is_finite() {
            s.clamp(0.0, MAX_WAIT.as_secs_f64())
        } else {
            1.0
        })
    } else if let Ok(t) = chrono::DateTime::parse_from_rfc2822(v.trim()) {
        (t.with_timezone(&chrono::Utc) - chrono::Utc::now())
            .to_std()
            .unwrap_or_default()
    } else {
        Duration::from_secs(1)
    };
    d.min(MAX_WAIT)
}

impl HfStore {
    pub fn new(uri: &HfUri) -> std::result::Result<HfStore, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(60))
            .user_agent(concat!("mdf/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        Ok(HfStore {
            client,
            endpoint: endpoint(),
            uri: HfUri {
                path: String::new(),
                ..uri.clone()
            },
            token: token(),
            limit: Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT)),
        })
    }

    /// `ENDPOINT/a/b/...` with each segment escaped (a revision with '/' is one).
    fn url(&self, segs: &[&str], path: &str) -> reqwest::Url {
        let mut u = reqwest::Url::parse(&self.endpoint).expect("endpoint is a URL");
        {
            let mut p = u.path_segments_mut().expect("a base URL");
            p.pop_if_empty();
            p.extend(segs.iter().copied());
            p.extend(path.split('/').filter(|s| !s.is_empty()));
        }
        u
    }

    fn api(&self, what: &str, path: &str) -> reqwest::Url {
        let (owner, name) = self.uri.repo.split_once('/').expect("owner/name");
        self.url(
            &["api", "datasets", owner, name, what, &self.uri.revision],
            path,
        )
    }

    fn resolve_url(&self, path: &str) -> reqwest::Url {
        let (owner, name) = self.uri.repo.split_once('/').expect("owner/name");
        self.url(
            &["datasets", owner, name, "resolve", &self.uri.revision],
            path,
        )
    }

    /// Sends a request (built afresh for each try) with the token, waiting out 429s
    /// and retrying 5xx and connection errors; any other answer is returned.
    async fn send(
        &self,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<(reqwest::Response, tokio::sync::OwnedSemaphorePermit)> {
        let (mut waits, mut retries) = (0u32, 0u32);
        loop {
            let permit = self.limit.clone().acquire_owned().await.map_err(generic)?;
            let mut req = build();
            if let Some(t) = &self.token {
                req = req.bearer_auth(t);
            }
            match req.send().await {
                Ok(r) if r.status().as_u16() == 429 && waits < MAX_429 => {
                    let d = retry_after(&r);
                    drop(permit);
                    waits += 1;
                    tracing::warn!(
                        "{}: 429 Too Many Requests, waiting {:.1} s (Retry-After)",
                        self.uri.repo,
                        d.as_secs_f64()
                    );
                    tokio::time::sleep(d).await;
                }
                Ok(r) if r.status().is_server_error() && retries < MAX_RETRIES => {
                    drop(permit);
                    retries += 1;
                    tokio::time::sleep(Duration::from_millis(250 << retries)).await;
                }
                Ok(r) => return Ok((r, permit)),
                Err(e) if retries < MAX_RETRIES && (e.is_connect() || e.is_timeout()) => {
                    drop(permit);
                    retries += 1;
                    tokio::time::sleep(Duration::from_millis(250 << retries)).await;
                }
                Err(e) => return Err(generic(e)),
            }
        }
    }

    /// The error of a non-success answer about `path`.
    async fn failed(&self, path: &str, r: reqwest::Response) -> object_store::Error {
        let status = r.status().as_u16();
        let msg = body_message(r).await;
        let where_ = format!(
            "hf://datasets/{}@{}/{path}",
            self.uri.repo, self.uri.revision
        );
        match status {
            404 => object_store::Error::NotFound {
                path: path.to_string(),
                source: format!("{where_}: 404 {msg}").into(),
            },
            401 | 403 => {
                let hint = if self.token.is_some() {
                    "the token in HF_TOKEN has no access to it (a gated dataset's terms must be accepted on the Hub)"
                } else {
                    "a gated or private dataset: set HF_TOKEN to a token with access"
                };
                let source = format!("{where_}: {status} {msg}; {hint}").into();
                if status == 401 {
                    object_store::Error::Unauthenticated {
                        path: path.to_string(),
                        source,
                    }
                } else {
                    object_store::Error::PermissionDenied {
                        path: path.to_string(),
                        source,
                    }
                }
            }
            429 => generic(format!("{where_}: 429 Too Many Requests {msg}")),
            _ => generic(format!("{where_}: HTTP {status} {msg}")),
        }
    }

    /// The commit sha the revision names now.
    pub async fn commit(&self) -> std::result::Result<String, String> {
        let url = self.api("revision", "");
        let (r, _permit) = self
            .send(|| self.client.get(url.clone()))
            .await
            .map_err(|e| format!("hf://datasets/{}: {e}", self.uri.repo))?;
        let status = r.status().as_u16();
        if !r.status().is_success() {
            let msg = body_message(r).await;
            return Err(match status {
                404 => format!(
                    "hf://datasets/{}@{}: no such dataset or revision ({msg})",
                    self.uri.repo, self.uri.revision
                ),
                401 | 403 if self.token.is_none() => format!(
                    "hf://datasets/{}: {status} {msg}; a private or gated dataset needs HF_TOKEN",
                    self.uri.repo
                ),
                _ => format!("hf://datasets/{}: HTTP {status} {msg}", self.uri.repo),
            });
        }
        let body = r
            .bytes()
            .await
            .map_err(|e| format!("hf://datasets/{}: revision answer: {e}", self.uri.repo))?;
        let v: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| format!("hf://datasets/{}: revision answer: {e}", self.uri.repo))?;
        match v["sha"].as_str() {
            Some(s) if is_sha(s) => Ok(s.to_ascii_lowercase()),
            _ => Err(format!(
                "hf://datasets/{}@{}: the Hub gave no commit sha",
                self.uri.repo, self.uri.revision
            )),
        }
    }

    /// Every page of the tree under `dir` (recursive or one level). A missing folder
    /// lists nothing.
    fn tree(&self, dir: String, recursive: bool) -> BoxStream<'static, Result<ObjectMeta>> {
        let me = self.clone();
        let mut first = self.api("tree", &dir);
        if recursive {
            first.query_pairs_mut().append_pair("recursive", "true");
        }
        futures::stream::try_unfold(Some(first), move |next| {
            let me = me.clone();
            let dir = dir.clone();
            async move {
                let Some(url) = next else { return Ok(None) };
                let (r, _permit) = me.send(|| me.client.get(url.clone())).await?;
                if r.status().as_u16() == 404 {
                    return Ok(Some((vec![], None)));
                }
                if !r.status().is_success() {
                    return Err(me.failed(&dir, r).await);
                }
                // The next page only on the Hub itself: the token goes with it.
                let next = next_link(&r, &url).filter(|n| n.origin() == url.origin());
                let body = r.bytes().await.map_err(generic)?;
                let entries: Vec<TreeEntry> = serde_json::from_slice(&body).map_err(generic)?;
                let metas: Vec<Result<ObjectMeta>> = entries
                    .into_iter()
                    .filter_map(TreeEntry::meta)
                    .map(Ok)
                    .collect();
                Ok(Some((metas, next)))
            }
        })
        .map_ok(futures::stream::iter)
        .try_flatten()
        .boxed()
    }

    async fn head_meta(&self, location: &Path) -> Result<ObjectMeta> {
        let p = location.as_ref();
        let parent = p.rsplit_once('/').map_or("", |x| x.0).to_string();
        let mut s = self.tree(parent, false);
        while let Some(m) = s.try_next().await? {
            if m.location.as_ref() == p {
                return Ok(m);
            }
        }
        Err(object_store::Error::NotFound {
            path: p.to_string(),
            source: format!(
                "hf://datasets/{}@{}/{p}: no such file",
                self.uri.repo, self.uri.revision
            )
            .into(),
        })
    }
}

/// The `rel="next"` URL of a `Link` header, resolved against `base`.
fn next_link(r: &reqwest::Response, base: &reqwest::Url) -> Option<reqwest::Url> {
    for v in r.headers().get_all(reqwest::header::LINK) {
        let v = v.to_str().ok()?;
        for part in v.split(',') {
            let (url, params) = part.split_once(';').unwrap_or((part, ""));
            if params
                .split(';')
                .any(|p| p.trim().replace(' ', "") == "rel=\"next\"" || p.trim() == "rel=next")
            {
                let url = url.trim().trim_start_matches('<').trim_end_matches('>');
                return base.join(url).ok();
            }
        }
    }
    None
}

/// The byte range a 206's `Content-Range: bytes A-B/TOTAL` names, and the total.
fn content_range(r: &reqwest::Response) -> Option<(std::ops::Range<u64>, u64)> {
    let v = r
        .headers()
        .get(reqwest::header::CONTENT_RANGE)?
        .to_str()
        .ok()?;
    let v = v.strip_prefix("bytes ")?;
    let (range, total) = v.split_once('/')?;
    let (a, b) = range.split_once('-')?;
    let (a, b): (u64, u64) = (a.parse().ok()?, b.parse().ok()?);
    let total: u64 = total.parse().ok()?;
    (a <= b && b < total).then(|| (a..b + 1, total))
}

fn read_only() -> object_store::Error {
    object_store::Error::NotSupported {
        source: "the Hugging Face Hub (hf://) is for inputs only".into(),
    }
}

#[async_trait]
impl ObjectStore for HfStore {
    async fn put_opts(&self, _: &Path, _: PutPayload, _: PutOptions) -> Result<PutResult> {
        Err(read_only())
    }

    async fn put_multipart_opts(
        &self,
        _: &Path,
        _: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        Err(read_only())
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let path = location.as_ref().to_string();
        // Under a branch the file may have changed since it was planned.
        if let Some(want) = options.if_match.as_deref()
            && !self.uri.pinned()
        {
            let now = self.head_meta(location).await?;
            if now.e_tag.as_deref() != Some(want) {
                return Err(object_store::Error::Precondition {
                    path,
                    source: "the file changed on its branch since the job was planned".into(),
                });
            }
        }
        if options.head {
            let meta = self.head_meta(location).await?;
            return Ok(GetResult {
                payload: GetResultPayload::Stream(futures::stream::empty().boxed()),
                range: 0..0,
                meta,
                attributes: Attributes::new(),
                extensions: Extensions::new(),
            });
        }
        let url = self.resolve_url(&path);
        let range = options.range.clone();
        let (r, permit) = self
            .send(|| {
                let mut b = self.client.get(url.clone());
                if let Some(g) = &range {
                    b = b.header(reqwest::header::RANGE, g.to_string());
                }
                b
            })
            .await?;
        let status = r.status().as_u16();
        if status == 416 {
            return Err(generic(format!("{path}: range not satisfiable")));
        }
        if !r.status().is_success() {
            return Err(self.failed(&path, r).await);
        }
        let e_tag = r
            .headers()
            .get("x-linked-etag")
            .or_else(|| r.headers().get(reqwest::header::ETAG))
            .and_then(|v| v.to_str().ok())
            .map(|s| s.trim_matches('"').to_string());
        // Under a branch, the bytes must still be the planned version.
        if let (Some(want), Some(got)) = (options.if_match.as_deref(), e_tag.as_deref())
            && !self.uri.pinned()
            && want != got
        {
            return Err(object_store::Error::Precondition {
                path,
                source: "the file changed on its branch since the job was planned".into(),
            });
        }
        let (range, size, skip) = match (status, content_range(&r)) {
            (206, Some((got, total))) => {
                // The bytes asked for, or an error: never other bytes under their name.
                let want = match &range {
                    Some(g) => g.as_range(total).ok(),
                    None => Some(0..total),
                };
                if want.as_ref() != Some(&got) {
                    return Err(generic(format!(
                        "{path}: asked for {range:?}, the server sent bytes {}-{} of {total}",
                        got.start,
                        got.end.saturating_sub(1)
                    )));
                }
                (got, total, 0)
            }
            (206, None) => {
                return Err(generic(format!(
                    "{path}: a 206 without a valid Content-Range"
                )));
            }
            _ => {
                // A whole body (no range asked, or a server that ignored it).
                let len = r
                    .content_length()
                    .ok_or_else(|| generic(format!("{path}: no Content-Length")))?;
                let want = match &range {
                    Some(g) => g
                        .as_range(len)
                        .map_err(|e| generic(format!("{path}: {e}")))?,
                    None => 0..len,
                };
                let skip = want.start;
                (want, len, skip)
            }
        };
        let take = range.end - range.start;
        let body = r.bytes_stream().map_err(generic);
        let stream = clip(body.boxed(), skip, take)
            .map(move |b| {
                let _held = &permit;
                b
            })
            .boxed();
        Ok(GetResult {
            payload: GetResultPayload::Stream(stream),
            meta: ObjectMeta {
                location: location.clone(),
                last_modified: chrono_epoch(),
                size,
                e_tag: options.if_match.clone().or(e_tag),
                version: None,
            },
            range,
            attributes: Attributes::new(),
            extensions: Extensions::new(),
        })
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        locations.map(|_| Err(read_only())).boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let dir = prefix.map(|p| p.as_ref().to_string()).unwrap_or_default();
        self.tree(dir, true)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let dir = prefix.map(|p| p.as_ref().to_string()).unwrap_or_default();
        let objects: Vec<ObjectMeta> = self.tree(dir, false).try_collect().await?;
        Ok(ListResult {
            common_prefixes: vec![],
            objects,
            extensions: Extensions::new(),
        })
    }

    async fn copy_opts(&self, _: &Path, _: &Path, _: CopyOptions) -> Result<()> {
        Err(read_only())
    }
}

/// `skip` bytes dropped from the front of a body, then at most `take` passed on.
fn clip(
    s: BoxStream<'static, Result<Bytes>>,
    skip: u64,
    take: u64,
) -> BoxStream<'static, Result<Bytes>> {
    if skip == 0 {
        return s
            .scan(take, |left, b| {
                // Done: the rest of a whole body is not read.
                if *left == 0 {
                    return futures::future::ready(None);
                }
                let out = b.map(|mut b| {
                    if (b.len() as u64) > *left {
                        b.truncate(*left as usize);
                    }
                    *left -= b.len() as u64;
                    b
                });
                futures::future::ready(Some(out))
            })
            .boxed();
    }
    s.scan((skip, take), |(skip, left), b| {
        if *left == 0 {
            return futures::future::ready(None);
        }
        let out = b.map(|mut b| {
            let drop = (*skip).min(b.len() as u64) as usize;
            *skip -= drop as u64;
            let mut b = b.split_off(drop);
            if (b.len() as u64) > *left {
                b.truncate(*left as usize);
            }
            *left -= b.len() as u64;
            b
        });
        futures::future::ready(Some(out))
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse_with_revisions() {
        let u = HfUri::parse("hf://datasets/HuggingFaceFW/fineweb/data/CC-MAIN-2024-10/*.parquet")
            .unwrap();
        assert_eq!(u.repo, "HuggingFaceFW/fineweb");
        assert_eq!(u.revision, "main");
        assert_eq!(u.path, "data/CC-MAIN-2024-10/*.parquet");
        assert_eq!(u.store(), "hf://datasets/HuggingFaceFW/fineweb@main");
        let u = HfUri::parse("hf://datasets/o/n@refs%2Fconvert%2Fparquet/default/train/0.parquet")
            .unwrap();
        assert_eq!(u.revision, "refs/convert/parquet");
        assert_eq!(u.store(), "hf://datasets/o/n@refs%2Fconvert%2Fparquet");
        let sha = "0123456789abcdef0123456789abcdef01234567";
        assert!(
            HfUri::parse(&format!("hf://datasets/o/n@{sha}/x"))
                .unwrap()
                .pinned()
        );
        for bad in [
            "hf://models/o/n/x",
            "hf://datasets/o",
            "hf://datasets//n/x",
            "hf://datasets/o/n@/x",
            "hf://datasets/o/n@a%2F..%2Fb/x",
            "hf://datasets/o/../x",
        ] {
            assert!(HfUri::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn retry_after_never_panics_and_is_capped() {
        for (v, want) in [
            ("2", 2.0),
            ("1e20", 60.0),
            ("inf", 1.0),
            ("NaN", 1.0),
            ("-5", 0.0),
        ] {
            assert_eq!(retry_after_value(v).as_secs_f64(), want, "{v}");
        }
    }

    #[tokio::test]
    async fn clip_skips_and_takes_across_chunks() {
        let chunks: Vec<Result<Bytes>> = ["abc", "defg", "hij"]
            .iter()
            .map(|s| Ok(Bytes::from(*s)))
            .collect();
        let s = clip(futures::stream::iter(chunks).boxed(), 2, 6);
        let got: Vec<Bytes> = s.try_collect().await.unwrap();
        assert_eq!(got.concat(), b"cdefgh");
    }
}
