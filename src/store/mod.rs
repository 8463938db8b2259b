//! Storage: URIs → object stores. Plain paths and `file://` use the local filesystem,
//! `memory://NAME/` a process-wide in-memory store (tests, in-process workers),
//! `s3://BUCKET/` S3 or any S3-compatible server (endpoint from the spec or the standard
//! `AWS_ENDPOINT_URL`, credentials from the standard AWS variables, unsigned requests
//! for public buckets such as `s3://commoncrawl`). Every store handed out is wrapped in
//! a [`CountingStore`], so every request is counted. Nothing here knows about jobs.
pub mod aws;
pub mod counting;
pub mod fault;
pub mod hf;
pub mod s3;
pub mod sim;

pub use counting::{CountingStore, RequestCounts, RequestSnapshot};

use futures::TryStreamExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// S3 settings (the spec's `s3:` section): endpoint, region, anonymous buckets.
#[derive(Debug, Clone, Default)]
pub struct S3Settings {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub anonymous_buckets: Vec<String>,
    pub allow_http: Option<bool>,
    pub max_concurrent_requests: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("invalid uri {uri:?}: {reason}")]
    BadUri { uri: String, reason: String },
    #[error("cannot open store for {uri}: {source}")]
    Open {
        uri: String,
        source: object_store::Error,
    },
    #[error("{0}")]
    Io(#[from] object_store::Error),
}

/// A parsed URI: which store, and which path inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uri {
    /// `file`, `memory://NAME`, `s3://BUCKET` or `https://HOST[:PORT]` (`http://`).
    pub store: String,
    pub path: Path,
}

impl Uri {
    pub fn parse(s: &str) -> Result<Uri, StoreError> {
        let bad = |reason: &str| StoreError::BadUri {
            uri: s.to_string(),
            reason: reason.to_string(),
        };
        let (store, rest) = if let Some(rest) = s.strip_prefix("s3://") {
            let (bucket, p) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(bad("missing bucket name"));
            }
            (format!("s3://{bucket}"), p.to_string())
        } else if s.starts_with("hf://") {
            let h = hf::HfUri::parse(s).map_err(|e| bad(&e))?;
            (h.store(), h.path)
        } else if let Some(rest) = s.strip_prefix("memory://") {
            let (name, p) = rest.split_once('/').unwrap_or((rest, ""));
            (format!("memory://{name}"), p.to_string())
        } else if let Some((scheme, rest)) = ["https://", "http://"].iter().find_map(|sc| {
            (s.len() >= sc.len() && s[..sc.len()].eq_ignore_ascii_case(sc))
                .then(|| (*sc, &s[sc.len()..]))
        }) {
            // A file server: the host (and port) is the store, the path its key. The
            // host in lower case and without its scheme's default port, so one server
            // is one store however it is spelled.
            let (host, p) = rest.split_once('/').unwrap_or((rest, ""));
            if host.is_empty() || host.contains(['@', '?', '#']) {
                return Err(bad("expected http(s)://HOST[:PORT]/PATH (no user info)"));
            }
            if p.contains(['?', '#']) {
                return Err(bad("query strings and fragments are not supported"));
            }
            let host = host.to_ascii_lowercase();
            let default_port = if scheme == "https://" { ":443" } else { ":80" };
            let host = host.strip_suffix(default_port).unwrap_or(&host).to_string();
            // The path as the server names it: %XX decoded here (the client encodes
            // it again), a decoded '/' refused (it would name another path).
            let mut decoded = Vec::new();
            for seg in p.split('/') {
                let d = percent_decode(seg).ok_or_else(|| bad("bad %-escape in the path"))?;
                if d.contains('/') {
                    return Err(bad("an escaped '/' (%2F) in the path is not supported"));
                }
                decoded.push(d);
            }
            (format!("{scheme}{host}"), decoded.join("/"))
        } else if s.contains("://") && !s.starts_with("file://") {
            return Err(bad(
                "unsupported scheme, expected a path, file://, s3://, https://, hf:// or memory://",
            ));
        } else {
            let local = s.strip_prefix("file://").unwrap_or(s);
            if local.is_empty() {
                return Err(bad("empty path"));
            }
            // A local path is the user's own: `..` is resolved lexically here, so no
            // `..` ever reaches an object key.
            let abs = std::path::absolute(local).map_err(|e| bad(&e.to_string()))?;
            let mut parts: Vec<String> = Vec::new();
            for c in abs.components() {
                match c {
                    std::path::Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
                    std::path::Component::ParentDir => {
                        parts.pop();
                    }
                    _ => {}
                }
            }
            ("file".to_string(), parts.join("/"))
        };
        if rest.split('/').any(|seg| seg == ".." || seg == ".") {
            return Err(bad("path segments '.' and '..' are not allowed"));
        }
        let path = Path::parse(rest.trim_end_matches('/')).map_err(|e| bad(&e.to_string()))?;
        Ok(Uri { store, path })
    }

    /// The canonical text form (`file:///abs`, `s3://b/k`, `memory://n/k`).
    pub fn to_uri_string(&self) -> String {
        let sep = if self.store == "file" { ":///" } else { "/" };
        if self.path.as_ref().is_empty() {
            format!(
                "{}{}",
                self.store,
                if self.store == "file" { ":///" } else { "" }
            )
        } else {
            format!("{}{sep}{}", self.store, self.path)
        }
    }

    pub fn child(&self, rel: &str) -> Uri {
        let mut path = self.path.clone();
        for seg in rel.split('/').filter(|s| !s.is_empty()) {
            path = path.clone().join(seg);
        }
        Uri {
            store: self.store.clone(),
            path,
        }
    }
}

/// `%XX` escapes decoded (UTF-8), `None` for a bad escape or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Whether `store` is a file server (`https://HOST`, `http://HOST`).
pub fn is_http(store: &str) -> bool {
    store.starts_with("https://") || store.starts_with("http://")
}

/// Whether `store` only serves reads (a file server, the Hugging Face Hub): inputs
/// only, never outputs, rejects or job roots.
pub fn is_read_only(store: &str) -> bool {
    is_http(store) || store.starts_with("hf://")
}

fn memory_stores() -> &'static Mutex<HashMap<String, Arc<dyn ObjectStore>>> {
    static M: OnceLock<Mutex<HashMap<String, Arc<dyn ObjectStore>>>> = OnceLock::new();
    M.get_or_init(Default::default)
}

/// Serves `store` as `memory://NAME` to every registry of this process (the fleet
/// simulator's store, see [`sim`]). Replaces an earlier store of that name.
pub fn install_memory(name: &str, store: Arc<dyn ObjectStore>) {
    memory_stores()
        .lock()
        .expect("memory stores")
        .insert(format!("memory://{name}"), store);
}

/// Opens stores by URI, caches them, and wraps them in request counters.
#[derive(Debug, Clone)]
pub struct Registry {
    inner: Arc<Shared>,
    counters: Vec<Arc<RequestCounts>>,
}

#[derive(Debug)]
struct Shared {
    s3: S3Settings,
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
    /// Wraps every opened store (fault injection in tests).
    wrap: Option<fault::Wrapper>,
}

impl Registry {
    pub fn new(s3: S3Settings) -> Self {
        Self::with_wrapper(s3, fault::Wrapper::from_env())
    }

    pub fn with_wrapper(s3: S3Settings, wrap: Option<fault::Wrapper>) -> Self {
        Registry {
            inner: Arc::new(Shared {
                s3,
                stores: Mutex::new(HashMap::new()),
                wrap,
            }),
            counters: vec![],
        }
    }

    /// A view of this registry that also counts into `c`.
    pub fn counting_into(&self, c: Arc<RequestCounts>) -> Registry {
        let mut counters = self.counters.clone();
        counters.push(c);
        Registry {
            inner: self.inner.clone(),
            counters,
        }
    }

    /// Replaces the S3 settings (job settings arrive after the registry exists).
    pub fn with_s3(&self, s3: S3Settings) -> Registry {
        Registry {
            inner: Arc::new(Shared {
                s3,
                stores: Mutex::new(HashMap::new()),
                wrap: self.inner.wrap.clone(),
            }),
            counters: self.counters.clone(),
        }
    }

    /// Whether opened stores are wrapped (fault injection): their calls may need a
    /// tokio runtime even where the plain store's do not.
    pub fn is_wrapped(&self) -> bool {
        self.inner.wrap.is_some()
    }

    /// The counting store for `uri` and the path inside it.
    pub fn open(&self, uri: &Uri) -> Result<Arc<dyn ObjectStore>, StoreError> {
        let base = {
            let mut m = self.inner.stores.lock().expect("store cache");
            match m.get(&uri.store) {
                Some(s) => s.clone(),
                None => {
                    let mut s = self.build(uri)?;
                    if let Some(w) = &self.inner.wrap {
                        s = w.wrap(s);
                    }
                    m.insert(uri.store.clone(), s.clone());
                    s
                }
            }
        };
        Ok(Arc::new(CountingStore::new(base, self.counters.clone())))
    }

    pub fn resolve(&self, uri: &str) -> Result<(Arc<dyn ObjectStore>, Uri), StoreError> {
        let u = Uri::parse(uri)?;
        Ok((self.open(&u)?, u))
    }

    fn build(&self, uri: &Uri) -> Result<Arc<dyn ObjectStore>, StoreError> {
        if uri.store == "file" {
            return Ok(Arc::new(object_store::local::LocalFileSystem::new()));
        }
        if uri.store.starts_with("memory://") {
            let mut m = memory_stores().lock().expect("memory stores");
            return Ok(m
                .entry(uri.store.clone())
                .or_insert_with(|| Arc::new(InMemory::new()))
                .clone());
        }
        if uri.store.starts_with("hf://") {
            let h = hf::HfUri::parse(&uri.store).map_err(|reason| StoreError::BadUri {
                uri: uri.to_uri_string(),
                reason,
            })?;
            return hf::HfStore::new(&h)
                .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
                .map_err(|e| StoreError::Open {
                    uri: uri.to_uri_string(),
                    source: object_store::Error::Generic {
                        store: "HuggingFaceHub",
                        source: e.into(),
                    },
                });
        }
        if uri.store.starts_with("https://") || uri.store.starts_with("http://") {
            // Any file server with range requests: GET, ranged GET and HEAD.
            let opts = object_store::ClientOptions::new()
                .with_timeout(std::time::Duration::from_secs(60))
                .with_connect_timeout(std::time::Duration::from_secs(10))
                .with_allow_http(uri.store.starts_with("http://"));
            // At most 64 requests in flight to one server, as S3's own limit.
            return object_store::http::HttpBuilder::new()
                .with_url(uri.store.clone())
                .with_client_options(opts)
                .build()
                .map(|s| {
                    Arc::new(object_store::limit::LimitStore::new(s, 64)) as Arc<dyn ObjectStore>
                })
                .map_err(|source| StoreError::Open {
                    uri: uri.to_uri_string(),
                    source,
                });
        }
        let bucket = uri.store.trim_start_matches("s3://");
        self.build_s3(bucket).map_err(|source| StoreError::Open {
            uri: uri.to_uri_string(),
            source,
        })
    }

    /// The S3 endpoint from the spec or the standard variables; `None`: AWS.
    fn s3_endpoint(&self) -> Option<String> {
        self.inner
            .s3
            .endpoint
            .clone()
            .or_else(|| std::env::var("AWS_ENDPOINT_URL_S3").ok())
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
            .filter(|e| !e.is_empty())
    }

    /// Names the store of `uri` for messages and caches: the store, and for S3 the
    /// endpoint it is reached at (`s3://b at http://127.0.0.1:9000`).
    pub fn describe(&self, uri: &Uri) -> String {
        match (uri.store.starts_with("s3://"), self.s3_endpoint()) {
            (true, Some(ep)) => format!("{} at {ep}", uri.store),
            _ => uri.store.clone(),
        }
    }

    fn build_s3(&self, bucket: &str) -> object_store::Result<Arc<dyn ObjectStore>> {
        use object_store::ClientOptions;
        use object_store::aws::AmazonS3Builder;
        let s3 = &self.inner.s3;
        let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket);
        let endpoint = self.s3_endpoint();
        let mut opts = ClientOptions::new()
            .with_timeout(std::time::Duration::from_secs(60))
            .with_connect_timeout(std::time::Duration::from_secs(10));
        if let Some(ep) = &endpoint {
            b = b.with_endpoint(ep);
            if s3.allow_http.unwrap_or(ep.starts_with("http://")) {
                opts = opts.with_allow_http(true);
            }
        }
        if let Some(r) = s3
            .region
            .clone()
            .or_else(|| std::env::var("AWS_REGION").ok())
        {
            b = b.with_region(r);
        } else if std::env::var("AWS_DEFAULT_REGION").is_err() {
            b = b.with_region("us-east-1");
        }
        if s3.anonymous_buckets.iter().any(|a| a == bucket) {
            b = b.with_skip_signature(true);
        }
        crate::store::s3::build(b, opts, s3.max_concurrent_requests)
    }
}

/// Whether a URI pattern contains glob characters.
pub fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Lists the objects a URI or glob names, sorted by location. A plain URI names one
/// object, or every object under it when it is a prefix.
pub async fn list_matching(
    reg: &Registry,
    pattern: &str,
) -> Result<Vec<(Uri, ObjectMeta)>, StoreError> {
    let mut out = Vec::new();
    for_each_matching(reg, pattern, |u, m| {
        out.push((u, m));
        Ok(())
    })
    .await?;
    out.sort_by(|a, b| a.1.location.cmp(&b.1.location));
    Ok(out)
}

/// [`list_matching`] without holding the listing: each object as its page arrives, in
/// the store's listing order (sorted on S3, not on every store). `f` may stop the
/// listing with an error.
pub async fn for_each_matching(
    reg: &Registry,
    pattern: &str,
    mut f: impl FnMut(Uri, ObjectMeta) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let bad = |reason: String| StoreError::BadUri {
        uri: pattern.to_string(),
        reason,
    };
    let http = pattern.len() > 8
        && (pattern[..8].eq_ignore_ascii_case("https://")
            || pattern[..7].eq_ignore_ascii_case("http://"));
    if http {
        // Glob characters count in the path only (a `[` may be an IPv6 host).
        let after = &pattern[pattern.find("://").expect("a scheme") + 3..];
        let path = after.split_once('/').map_or("", |x| x.1);
        if is_glob(path) {
            return Err(bad(
                "a file server has no listing to expand a glob against: name each file (https://host/path/file.jsonl.gz)".into(),
            ));
        }
    }
    if http || !is_glob(pattern) {
        let (store, uri) = reg.resolve(pattern)?;
        match store.head(&uri.path).await {
            Ok(meta) => return f(uri, meta),
            // A file server names files, not folders: nothing to list under it.
            Err(object_store::Error::NotFound { .. }) if http => {
                return Err(bad("the server has no such file (404)".into()));
            }
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        let mut list = store.list(Some(&uri.path));
        while let Some(m) = list.try_next().await? {
            if !is_hidden(&m.location) {
                let u = Uri {
                    store: uri.store.clone(),
                    path: m.location.clone(),
                };
                f(u, m)?;
            }
        }
        return Ok(());
    }
    // The literal prefix before the first segment with a glob character.
    let glob_at = pattern.find(['*', '?', '[']).expect("is a glob");
    let prefix_end = pattern[..glob_at].rfind('/').map(|i| i + 1).unwrap_or(0);
    let prefix = &pattern[..prefix_end];
    let (store, base) = if prefix.is_empty() {
        reg.resolve(".")?
    } else {
        reg.resolve(prefix)?
    };
    let full = format!("{}/{}", base.path, &pattern[prefix_end..]);
    let full = full.trim_start_matches('/').to_string();
    let glob = globset::GlobBuilder::new(&full)
        .literal_separator(true)
        .build()
        .map_err(|e| bad(e.to_string()))?
        .compile_matcher();
    let mut list = store.list(Some(&base.path));
    while let Some(m) = list.try_next().await? {
        if glob.is_match(m.location.as_ref()) && !is_hidden(&m.location) {
            let u = Uri {
                store: base.store.clone(),
                path: m.location.clone(),
            };
            f(u, m)?;
        }
    }
    Ok(())
}

/// Names starting with `_` or `.`, or local-filesystem staging files (`name#N`).
fn is_hidden(p: &Path) -> bool {
    p.filename()
        .is_some_and(|f| f.starts_with('_') || f.starts_with('.') || f.contains('#'))
}

/// Errors worth retrying: anything that is not a definite answer from the store.
pub fn is_transient(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    !matches!(
        e,
        E::NotFound { .. }
            | E::AlreadyExists { .. }
            | E::Precondition { .. }
            | E::NotModified { .. }
            | E::InvalidPath { .. }
            | E::NotSupported { .. }
            | E::NotImplemented { .. }
            | E::PermissionDenied { .. }
            | E::Unauthenticated { .. }
            | E::UnknownConfigurationKey { .. }
    )
}

/// A store asking its client to slow down: S3's 503 SlowDown, a 429 Too
/// Many Requests of other S3-compatible stores. Transient, but worth a longer backoff
/// (`protocol::io::Retry::again`).
pub fn is_slow_down(e: &object_store::Error) -> bool {
    if !is_transient(e) {
        return false;
    }
    // What the store said, not the whole message (which names the key: a job called
    // "SlowDown" must not turn every error on its keys into one).
    let m = e.to_string();
    [
        "<Code>SlowDown</Code>",
        "503 SlowDown",
        // A HEAD's 503 has no body to name its code; S3 answers 503 only to slow down
        // (SlowDown, or "Reduce your request rate").
        "status code: 503",
        "429 Too Many Requests",
        "<Code>TooManyRequests</Code>",
    ]
    .iter()
    .any(|s| m.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_refuse_escapes() {
        let u = Uri::parse("s3://bkt/a/b/").unwrap();
        assert_eq!((u.store.as_str(), u.path.as_ref()), ("s3://bkt", "a/b"));
        assert_eq!(u.to_uri_string(), "s3://bkt/a/b");
        assert_eq!(u.child("c/d.json").to_uri_string(), "s3://bkt/a/b/c/d.json");
        let f = Uri::parse("/tmp/x/y").unwrap();
        assert_eq!(f.to_uri_string(), "file:///tmp/x/y");
        assert_eq!(Uri::parse("file:///tmp/x/y").unwrap(), f);
        assert!(Uri::parse("s3://b/a/../etc").is_err());
        assert!(
            Uri::parse("/tmp/../etc/passwd").is_err()
                || Uri::parse("/tmp/../etc/passwd").unwrap().path.as_ref() == "etc/passwd"
        );
        assert!(Uri::parse("gs://b/x").is_err());
        // A file server: host and port the store, the path its key.
        let h = Uri::parse("https://data.example.org:8443/c/d.jsonl.gz").unwrap();
        assert_eq!(
            (h.store.as_str(), h.path.as_ref()),
            ("https://data.example.org:8443", "c/d.jsonl.gz")
        );
        assert_eq!(
            h.to_uri_string(),
            "https://data.example.org:8443/c/d.jsonl.gz"
        );
        assert!(Uri::parse("https://h/a/../b").is_err());
        assert!(Uri::parse("https://h/a?x=1").is_err());
        assert!(Uri::parse("https://user@h/a").is_err());
        assert!(Uri::parse("https:///a").is_err());
        // One server however spelled: scheme and host case, the default port; the
        // path %-decoded (the client encodes it once), an escaped '/' refused.
        let n = Uri::parse("HTTPS://Data.Example.org:443/dumps/a%20b.jsonl").unwrap();
        assert_eq!(
            (n.store.as_str(), n.path.as_ref()),
            ("https://data.example.org", "dumps/a b.jsonl")
        );
        assert_eq!(
            Uri::parse("http://h:80/x").unwrap().store,
            Uri::parse("http://H/x").unwrap().store
        );
        assert!(Uri::parse("https://h/a%2Fb").is_err());
        assert!(Uri::parse("https://h/a%zz").is_err());
        assert_eq!(
            Uri::parse("memory://t1/p").unwrap().to_uri_string(),
            "memory://t1/p"
        );
    }

    #[tokio::test]
    async fn glob_lists_only_matches() {
        let reg = Registry::with_wrapper(S3Settings::default(), None);
        let (s, _) = reg.resolve("memory://globtest").unwrap();
        for k in [
            "d/a.jsonl",
            "d/b.jsonl",
            "d/c.txt",
            "d/sub/e.jsonl",
            "d/_hidden.jsonl",
        ] {
            s.put(&Path::from(k), "x".into()).await.unwrap();
        }
        let got: Vec<String> = list_matching(&reg, "memory://globtest/d/*.jsonl")
            .await
            .unwrap()
            .into_iter()
            .map(|(u, _)| u.to_uri_string())
            .collect();
        assert_eq!(
            got,
            vec!["memory://globtest/d/a.jsonl", "memory://globtest/d/b.jsonl"]
        );
        let all = list_matching(&reg, "memory://globtest/d").await.unwrap();
        assert_eq!(all.len(), 4);
    }
}
