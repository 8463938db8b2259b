//! The image downloader of `format: laion` inputs: bounded concurrency, connect and
//! total timeouts, retries with backoff on transient failures, a redirect limit, a
//! maximum body size (streamed, never buffered past it), a content-type check, and
//! refusal of private, loopback, link-local and every other address the IANA
//! special-purpose registries do not call globally reachable (NAT64, 6to4 and Teredo
//! addresses judged by the IPv4 address inside) unless the spec allows them (SSRF): names resolve through a resolver that drops such
//! addresses, so a redirect or a rebinding DNS answer cannot reach them either, and
//! IP-literal URLs (first and redirected) are checked before any connection.
//! Every URL gets an outcome; a failure is a reject with its reason, never an error.
//! As img2dataset does: an image whose `X-Robots-Tag` opts out of AI use (`noai`,
//! `noimageai`, `noindex`, `noimageindex`, `none` by default, for every agent or for
//! `user_agent_token`) is a reject `opt_out`; `User-Agent` and `From` are the spec's;
//! and at most `per_host` requests go to one host at once across the whole process.
use futures::StreamExt;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// `input.download` in the spec (defined with the spec, which is below the worker).
pub use crate::spec::DownloadSpec;

pub mod special;

/// Whether an address is reachable on the public internet: the IANA special-purpose
/// registries (`special.rs`), IPv6 blocks that carry an IPv4 address judged by it.
pub use special::{is_public, not_public_block};

/// The resolver every connection goes through: public addresses only.
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| is_public(a.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(
                    format!("blocked_address: {host} resolves to no public address").into(),
                );
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The block that makes an IP-literal URL's host not public (names go through
/// the resolver instead).
fn literal_block(url: &reqwest::Url) -> Option<&'static str> {
    url.host_str()
        .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
        .and_then(|h| h.parse::<IpAddr>().ok())
        .and_then(not_public_block)
}

/// Whether the `X-Robots-Tag` header values opt out for an agent named `token`:
/// comma-separated directives, each for every agent, or for one agent when it
/// follows `AGENT:` (which scopes the directives after it, as in
/// `googlebot: noindex, otherbot: noai`). Directives with a value of their own
/// (`unavailable_after: DATE`, `max-image-preview: none`) are not agent names.
pub fn opted_out<'a>(
    values: impl IntoIterator<Item = &'a str>,
    token: &str,
    directives: &[String],
) -> Option<String> {
    const VALUED: [&str; 4] = [
        "unavailable_after",
        "max-snippet",
        "max-image-preview",
        "max-video-preview",
    ];
    if directives.is_empty() {
        return None;
    }
    for v in values {
        let mut scope: Option<String> = None;
        for item in v.split(',') {
            let mut item = item.trim().to_ascii_lowercase();
            if let Some((head, rest)) = item.split_once(':') {
                let head = head.trim();
                let is_agent = !head.is_empty()
                    && !VALUED.contains(&head)
                    && head
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
                if is_agent {
                    scope = Some(head.to_string());
                    item = rest.trim().to_string();
                } else {
                    continue;
                }
            }
            let ours = scope.as_deref().is_none_or(|s| s == token);
            if ours && directives.contains(&item) {
                return Some(match &scope {
                    Some(s) => format!("X-Robots-Tag: {s}: {item}"),
                    None => format!("X-Robots-Tag: {item}"),
                });
            }
        }
    }
    None
}

/// Indices of `hosts` taken host by host in turn (each host's in their order, hosts
/// in order of first appearance): `a a a b b c` → `a b c a b a`.
pub fn interleaved(hosts: &[String]) -> Vec<usize> {
    let mut queues: Vec<(&str, std::collections::VecDeque<usize>)> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for (i, h) in hosts.iter().enumerate() {
        let q = *at.entry(h.as_str()).or_insert_with(|| {
            queues.push((h.as_str(), Default::default()));
            queues.len() - 1
        });
        queues[q].1.push_back(i);
    }
    let mut out = Vec::with_capacity(hosts.len());
    while out.len() < hosts.len() {
        for (_, q) in queues.iter_mut() {
            if let Some(i) = q.pop_front() {
                out.push(i);
            }
        }
    }
    out
}

type HostTable = Mutex<HashMap<(usize, String), Arc<tokio::sync::Semaphore>>>;

/// The process-wide count of requests in flight per host: a semaphore per (limit,
/// host), removed when its last user is done, so millions of hosts leave nothing.
fn hosts() -> &'static HostTable {
    static HOSTS: OnceLock<HostTable> = OnceLock::new();
    HOSTS.get_or_init(Default::default)
}

/// One user of a host's semaphore (waiting or holding a permit).
struct HostUser {
    key: (usize, String),
    sem: Arc<tokio::sync::Semaphore>,
}

impl HostUser {
    fn new(limit: usize, host: &str) -> HostUser {
        let key = (limit, host.to_string());
        let sem = hosts()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.clone())
            .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(limit)))
            .clone();
        HostUser { key, sem }
    }
}

impl Drop for HostUser {
    fn drop(&mut self) {
        let mut m = hosts().lock().unwrap_or_else(|e| e.into_inner());
        // The table's reference and this one: nobody else waits or holds.
        if Arc::strong_count(&self.sem) == 2 {
            m.remove(&self.key);
        }
    }
}

#[cfg(test)]
fn host_tracked(limit: usize, host: &str) -> bool {
    hosts()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains_key(&(limit, host.to_string()))
}

/// What one URL gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Ok {
        body: Vec<u8>,
        content_type: Option<String>,
        status: u16,
    },
    /// `reason` is the reject reason (`http_404`, `timeout`, `too_large`, ...).
    Failed { reason: String, detail: String },
}

/// The downloader could not be set up (its settings or the TLS backend): no URL can
/// be fetched, on any attempt.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DownloadError(String);

impl DownloadError {
    /// Setting up again will not help.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

pub struct Downloader {
    client: reqwest::Client,
    spec: DownloadSpec,
}

impl Downloader {
    pub fn new(spec: &DownloadSpec) -> Result<Downloader, DownloadError> {
        let allow = spec.allow_private;
        let max = spec.max_redirects;
        let policy = reqwest::redirect::Policy::custom(move |a| {
            if a.previous().len() >= max {
                a.error(format!("more than {max} redirects"))
            } else if !allow && literal_block(a.url()).is_some() {
                a.error("blocked_address: redirect to a non-public address")
            } else {
                a.follow()
            }
        });
        let mut b = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(spec.connect_timeout_ms))
            .timeout(Duration::from_millis(spec.timeout_ms))
            .redirect(policy)
            .user_agent(spec.user_agent.clone())
            .no_proxy();
        if let Some(from) = &spec.from {
            let v = reqwest::header::HeaderValue::from_str(from)
                .map_err(|e| DownloadError(format!("download.from: {e}")))?;
            b = b.default_headers(reqwest::header::HeaderMap::from_iter([(
                reqwest::header::FROM,
                v,
            )]));
        }
        if !allow {
            b = b.dns_resolver(PublicOnly);
        }
        Ok(Downloader {
            client: b.build().map_err(|e| DownloadError(e.to_string()))?,
            spec: spec.clone(),
        })
    }

    /// Fetches every URL (None: no URL) with `concurrency` in flight; the outcomes in
    /// the URLs' order. URLs are started host by host in turn ([`interleaved`]), so a
    /// host at its `per_host` limit (or slow) holds few of the slots while the other
    /// hosts' URLs go on.
    pub async fn fetch_all(&self, urls: Vec<Option<String>>) -> Vec<Outcome> {
        let hosts: Vec<String> = urls
            .iter()
            .map(|u| {
                u.as_deref()
                    .and_then(|u| reqwest::Url::parse(u).ok())
                    .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
                    .unwrap_or_default()
            })
            .collect();
        let order = interleaved(&hosts);
        let mut out: Vec<Option<Outcome>> = vec![None; urls.len()];
        let mut done = futures::stream::iter(order.into_iter().map(|i| {
            let u = urls[i].clone();
            async move {
                let o = match u {
                    None => Outcome::Failed {
                        reason: "missing_url".into(),
                        detail: "no url".into(),
                    },
                    Some(u) => self.fetch(&u).await,
                };
                (i, o)
            }
        }))
        .buffer_unordered(self.spec.concurrency.max(1));
        while let Some((i, o)) = done.next().await {
            out[i] = Some(o);
        }
        out.into_iter()
            .map(|o| o.expect("every URL fetched"))
            .collect()
    }

    /// One URL, retried with exponential backoff on timeouts, connection errors,
    /// 429 and 5xx.
    pub async fn fetch(&self, url: &str) -> Outcome {
        let parsed = match reqwest::Url::parse(url) {
            Ok(u) if u.scheme() == "http" || u.scheme() == "https" => u,
            Ok(u) => {
                return Outcome::Failed {
                    reason: "bad_url".into(),
                    detail: format!("scheme {:?} is not fetched", u.scheme()),
                };
            }
            Err(e) => {
                return Outcome::Failed {
                    reason: "bad_url".into(),
                    detail: e.to_string(),
                };
            }
        };
        if !self.spec.allow_private
            && let Some(block) = literal_block(&parsed)
        {
            return Outcome::Failed {
                reason: "blocked_address".into(),
                detail: format!("{url}: not a public address ({block})"),
            };
        }
        let host = parsed.host_str().unwrap_or_default().to_ascii_lowercase();
        let user = HostUser::new(self.spec.per_host.max(1), &host);
        let mut attempt = 0;
        loop {
            let (out, transient) = {
                let _permit = user.sem.acquire().await;
                self.once(parsed.clone()).await
            };
            if !transient || attempt >= self.spec.retries {
                return out;
            }
            attempt += 1;
            tokio::time::sleep(Duration::from_millis(100 << attempt.min(6))).await;
        }
    }

    async fn once(&self, url: reqwest::Url) -> (Outcome, bool) {
        let fail = |reason: &str, detail: String, transient: bool| {
            (
                Outcome::Failed {
                    reason: reason.into(),
                    detail,
                },
                transient,
            )
        };
        let resp = match self.client.get(url.clone()).send().await {
            Ok(r) => r,
            Err(e) => {
                let chain = error_chain(&e);
                if chain.contains("blocked_address") {
                    return fail("blocked_address", chain, false);
                }
                if e.is_timeout() {
                    return fail("timeout", chain, true);
                }
                if e.is_redirect() {
                    return fail("too_many_redirects", chain, false);
                }
                return fail("connect_error", chain, e.is_connect());
            }
        };
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            let transient = status == 429 || status >= 500;
            return fail(
                &format!("http_{status}"),
                format!("{url}: HTTP {status}"),
                transient,
            );
        }
        // Values with non-ASCII bytes read lossily (a `noai` among them still counts);
        // a directive for this crawler may name the token or the User-Agent's product.
        let values: Vec<String> = resp
            .headers()
            .get_all("x-robots-tag")
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        let product = self
            .spec
            .user_agent
            .split(['/', ' '])
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if let Some(d) = [self.spec.user_agent_token.as_str(), product.as_str()]
            .into_iter()
            .filter(|t| !t.is_empty())
            .find_map(|t| opted_out(values.iter().map(String::as_str), t, &self.spec.opt_out))
        {
            return fail("opt_out", format!("{url}: {d}"), false);
        }
        let ct = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|s| s.to_ascii_lowercase());
        if let Some(c) = &ct
            && !self
                .spec
                .content_types
                .iter()
                .any(|p| c.starts_with(p.as_str()))
        {
            return fail("wrong_content_type", format!("{url}: {c}"), false);
        }
        if resp
            .content_length()
            .is_some_and(|n| n > self.spec.max_bytes)
        {
            return fail(
                "too_large",
                format!(
                    "{url}: {} bytes > max_bytes {}",
                    resp.content_length().unwrap_or(0),
                    self.spec.max_bytes
                ),
                false,
            );
        }
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(c) => {
                    if body.len() as u64 + c.len() as u64 > self.spec.max_bytes {
                        return fail(
                            "too_large",
                            format!("{url}: body passes max_bytes {}", self.spec.max_bytes),
                            false,
                        );
                    }
                    body.extend_from_slice(&c);
                }
                Err(e) => {
                    let t = e.is_timeout();
                    return fail(
                        if t { "timeout" } else { "read_error" },
                        error_chain(&e),
                        true,
                    );
                }
            }
        }
        (
            Outcome::Ok {
                body,
                content_type: ct,
                status,
            },
            false,
        )
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// Shared across a worker's tasks.
pub type Shared = Arc<Downloader>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "2001:db8::1",
        ] {
            assert!(!is_public(a.parse().unwrap()), "{a}");
        }
        for a in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(a.parse().unwrap()), "{a}");
        }
    }

    /// A host's semaphore lives while a request waits or runs, and not after.
    #[tokio::test]
    async fn the_host_table_forgets_finished_hosts() {
        let a = HostUser::new(3, "table-test.example");
        let b = HostUser::new(3, "table-test.example");
        assert!(Arc::ptr_eq(&a.sem, &b.sem));
        let p = a.sem.acquire().await.unwrap();
        drop(b);
        assert!(host_tracked(3, "table-test.example"));
        drop(p);
        drop(a);
        assert!(!host_tracked(3, "table-test.example"));
        let spec = DownloadSpec {
            allow_private: true,
            retries: 0,
            per_host: 7,
            ..Default::default()
        };
        let d = Downloader::new(&spec).unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let o = d.fetch(&format!("http://127.0.0.1:{port}/x.jpg")).await;
        assert!(matches!(o, Outcome::Failed { .. }), "{o:?}");
        assert!(!host_tracked(7, "127.0.0.1"));
    }

    #[test]
    fn urls_start_host_by_host() {
        let h: Vec<String> = ["a", "a", "a", "b", "b", "c"].map(String::from).to_vec();
        assert_eq!(interleaved(&h), [0, 3, 5, 1, 4, 2]);
        assert!(interleaved(&[]).is_empty());
    }

    #[test]
    fn x_robots_tag_opt_outs_as_img2dataset_reads_them() {
        let d = DownloadSpec::default().opt_out;
        let o = |vals: &[&str]| opted_out(vals.iter().copied(), "mdf", &d);
        assert_eq!(o(&["noai"]).as_deref(), Some("X-Robots-Tag: noai"));
        assert!(o(&["NoImageAI"]).is_some(), "case-insensitive");
        assert!(o(&["nofollow, noindex"]).is_some());
        assert!(o(&["none"]).is_some());
        assert!(o(&["all"]).is_none());
        assert!(o(&["nofollow"]).is_none());
        assert!(o(&["googlebot: noindex"]).is_none(), "another agent's");
        assert!(o(&["mdf: noai"]).is_some(), "ours");
        assert!(o(&["MDF : noai"]).is_some());
        assert!(
            o(&["googlebot: noindex, mdf: noimageai"]).is_some(),
            "a second agent's scope in one value"
        );
        assert!(
            o(&["googlebot: nofollow, noai"]).is_none(),
            "scoped to googlebot"
        );
        assert!(
            o(&["googlebot: nofollow", "noai"]).is_some(),
            "a second header line"
        );
        assert!(
            o(&["unavailable_after: 25 Jun 2010 15:00:00 PST"]).is_none(),
            "a valued directive is not an agent"
        );
        assert!(o(&["max-image-preview: none"]).is_none());
        assert!(opted_out(["noai"], "mdf", &[]).is_none(), "switched off");
        let only = vec!["noai".to_string()];
        assert!(
            opted_out(["noindex"], "mdf", &only).is_none(),
            "configured set"
        );
    }

    /// What the redirect policy and the first request check before connecting.
    #[test]
    fn ip_literal_urls_are_checked() {
        let b = |u: &str| literal_block(&reqwest::Url::parse(u).unwrap()).is_some();
        assert!(b("http://169.254.169.254/latest/meta-data/"));
        assert!(b("http://[::1]:8080/x"));
        assert!(b("https://10.0.0.7/a.jpg"));
        assert!(b("http://[64:ff9b::a9fe:a9fe]/latest/meta-data/"), "NAT64");
        assert!(b("http://[2002:a9fe:a9fe::1]/"), "6to4");
        assert!(b("http://192.0.0.170/"));
        assert!(b("http://[::ffff:7f00:1]/"));
        assert!(!b("https://93.184.216.34/a.jpg"));
        assert!(
            !b("https://example.org/a.jpg"),
            "names go through the resolver"
        );
    }

    #[tokio::test]
    async fn names_resolving_to_private_addresses_are_blocked() {
        let d = Downloader::new(&DownloadSpec::default()).unwrap();
        match d.fetch("http://localhost:9/x.jpg").await {
            Outcome::Failed { reason, .. } => assert_eq!(reason, "blocked_address"),
            o => panic!("{o:?}"),
        }
        match d.fetch("http://169.254.169.254/latest/meta-data/").await {
            Outcome::Failed { reason, .. } => assert_eq!(reason, "blocked_address"),
            o => panic!("{o:?}"),
        }
    }
}
