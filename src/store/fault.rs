//! A fault-injecting [`ObjectStore`] wrapper, the one place where storage failures are
//! simulated: an error before the write, the write landing but its response lost,
//! latency, 503 SlowDown, 409 Conflict, 403 AccessDenied, a create-only PUT that
//! overwrites (a store that ignores `If-None-Match`), an outage window (from the Nth
//! matching request, every matching request fails for a while: the store is down) and
//! a lagging LIST. Tests script faults through [`FaultStore`];
//! worker processes in chaos tests get them from `MDF_FAULTS`
//! (`op:kind:probability[:path-substring]`, comma separated, e.g.
//! `put:after:0.05:commits/,get:latency=200:0.1,any:slowdown:0.02,get:denied:1:in/`,
//! `any:outage=3000@200:1` for 3 s from the 200th request;
//! seed from `MDF_FAULTS_SEED`). Injected errors look like a store's errors: transient
//! ones retried, AccessDenied not. A `panic:<stage>:<substring>` rule is no store's:
//! it makes that stage's operator panic on records containing the substring.
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Which requests a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Put,
    Get,
    List,
    Delete,
    Copy,
    Any,
}

/// What happens to a matching request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Fails without doing anything.
    ErrorBefore,
    /// Does the request, then reports an error (the response was lost).
    ErrorAfter,
    /// Sleeps, then does the request.
    Latency(Duration),
    /// Fails with a 503 SlowDown, without doing anything.
    SlowDown,
    /// Fails with a 409 Conflict, without doing anything.
    Conflict,
    /// A create-only PUT overwrites like a plain PUT (a store that ignores
    /// `If-None-Match`).
    IgnoreCreate,
    /// Fails with 403 AccessDenied, as a store answers bad or insufficient
    /// credentials (moto accepts any, so this is how they are tested).
    Denied,
    /// A listing leaves out objects written less than this long ago, as the LIST of
    /// an eventually consistent S3-compatible store does (listings only).
    ListLag(Duration),
    /// From the `after`-th matching request on, every matching request fails with a
    /// 503 for `millis` ms (a regional outage), without doing anything; then none.
    Outage { after: u64, millis: u64 },
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub op: Op,
    pub fault: Fault,
    pub probability: f64,
    pub path_contains: Option<String>,
    /// How many more times the rule may fire (`None`: unlimited).
    pub remaining: Option<u64>,
}

#[derive(Debug)]
struct State {
    rules: Vec<Rule>,
    rng: StdRng,
    fired: u64,
    /// Per outage rule (by index): matching requests seen, and when its window began.
    windows: Vec<(u64, Option<Instant>)>,
}

/// Shared fault configuration; wraps stores.
#[derive(Debug, Clone)]
pub struct Wrapper(Arc<Mutex<State>>);

impl Wrapper {
    pub fn new(rules: Vec<Rule>, seed: u64) -> Self {
        Wrapper(Arc::new(Mutex::new(State {
            rules,
            rng: StdRng::seed_from_u64(seed),
            fired: 0,
            windows: Vec::new(),
        })))
    }

    /// From `MDF_FAULTS` / `MDF_FAULTS_SEED`; `None` when unset.
    pub fn from_env() -> Option<Self> {
        let spec = std::env::var("MDF_FAULTS").ok().filter(|s| !s.is_empty())?;
        if !spec
            .split(',')
            .any(|r| !r.trim().is_empty() && !is_panic_rule(r))
        {
            return None;
        }
        let seed = std::env::var("MDF_FAULTS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| StdRng::from_os_rng().random());
        match parse_rules(&spec) {
            Ok(rules) => Some(Wrapper::new(rules, seed)),
            Err(e) => {
                eprintln!("mdf: ignoring MDF_FAULTS: {e}");
                None
            }
        }
    }

    pub fn wrap(&self, inner: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
        Arc::new(FaultStore {
            inner,
            state: self.clone(),
        })
    }

    /// Adds a rule that fires once on the next matching request.
    pub fn fail_next(&self, op: Op, fault: Fault, path_contains: &str) {
        self.0.lock().expect("faults").rules.push(Rule {
            op,
            fault,
            probability: 1.0,
            path_contains: Some(path_contains.to_string()),
            remaining: Some(1),
        });
    }

    /// How many faults have fired.
    pub fn fired(&self) -> u64 {
        self.0.lock().expect("faults").fired
    }

    fn pick(&self, op: Op, path: &str) -> Option<Fault> {
        let mut st = self.0.lock().expect("faults");
        let State {
            rules,
            rng,
            fired,
            windows,
        } = &mut *st;
        windows.resize(rules.len(), (0, None));
        for (r, w) in rules.iter_mut().zip(windows.iter_mut()) {
            if (r.op != Op::Any && r.op != op)
                || r.remaining == Some(0)
                || r.path_contains
                    .as_deref()
                    .is_some_and(|p| !path.contains(p))
            {
                continue;
            }
            if let Fault::Outage { after, millis } = r.fault {
                w.0 += 1;
                if w.1.is_none() && w.0 >= after.max(1) {
                    w.1 = Some(Instant::now());
                }
                let down =
                    w.1.is_some_and(|t| t.elapsed() < Duration::from_millis(millis));
                if !down {
                    continue;
                }
            }
            if r.probability >= 1.0 || rng.random::<f64>() < r.probability {
                if let Some(n) = &mut r.remaining {
                    *n -= 1;
                }
                *fired += 1;
                return Some(r.fault);
            }
        }
        None
    }
}

/// A rule that is no store's: `panic:<stage>:<substring>` or `abort:<point>`.
fn is_panic_rule(r: &str) -> bool {
    r.trim().starts_with("panic:") || r.trim().starts_with("abort:")
}

/// The `panic:<stage>:<substring>` rules of `MDF_FAULTS` as (stage, substring): the
/// stage's operator panics on a batch with a record whose string value contains the
/// substring (see `ops::run_stage_observed`). Read once per process.
pub fn panic_rules() -> &'static [(String, String)] {
    static RULES: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    RULES.get_or_init(|| {
        std::env::var("MDF_FAULTS")
            .map(|s| parse_panic_rules(&s))
            .unwrap_or_default()
    })
}

/// The `panic:<stage>:<substring>` rules of a fault spec (the store rules are skipped).
pub fn parse_panic_rules(spec: &str) -> Vec<(String, String)> {
    spec.split(',')
        .filter(|r| is_panic_rule(r))
        .filter_map(|r| {
            let mut parts = r.trim().splitn(3, ':').skip(1);
            Some((parts.next()?.to_string(), parts.next()?.to_string()))
        })
        .collect()
}

/// An `MDF_FAULTS` rule that does not parse: the rule and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fault rule {rule:?}: {message}")]
pub struct BadRule {
    pub rule: String,
    pub message: String,
}

impl BadRule {
    fn new(rule: &str, message: String) -> BadRule {
        BadRule {
            rule: rule.to_string(),
            message,
        }
    }
}

/// Parses `op:kind:probability[:path]` rules (`panic:` rules are not the store's and
/// are skipped: [`panic_rules`]).
pub fn parse_rules(spec: &str) -> Result<Vec<Rule>, BadRule> {
    spec.split(',')
        .filter(|s| !s.trim().is_empty() && !is_panic_rule(s))
        .map(|r| {
            let parts: Vec<&str> = r.trim().splitn(4, ':').collect();
            if parts.len() < 3 {
                return Err(BadRule::new(
                    r,
                    "expected op:kind:probability[:path]".into(),
                ));
            }
            let op = match parts[0] {
                "put" => Op::Put,
                "get" => Op::Get,
                "list" => Op::List,
                "delete" => Op::Delete,
                "copy" => Op::Copy,
                "any" => Op::Any,
                o => return Err(BadRule::new(r, format!("unknown op {o:?}"))),
            };
            let fault = match parts[1] {
                "before" => Fault::ErrorBefore,
                "after" => Fault::ErrorAfter,
                "slowdown" => Fault::SlowDown,
                "conflict" => Fault::Conflict,
                "denied" => Fault::Denied,
                "ignorecreate" => Fault::IgnoreCreate,
                k if k.starts_with("latency=") => Fault::Latency(Duration::from_millis(
                    k[8..]
                        .parse()
                        .map_err(|_| BadRule::new(r, "bad latency".into()))?,
                )),
                k if k.starts_with("lag=") => Fault::ListLag(Duration::from_millis(
                    k[4..]
                        .parse()
                        .map_err(|_| BadRule::new(r, "bad lag".into()))?,
                )),
                k if k.starts_with("outage=") => {
                    let bad = || BadRule::new(r, "expected outage=MILLIS@N".into());
                    let (ms, n) = k[7..].split_once('@').ok_or_else(bad)?;
                    Fault::Outage {
                        millis: ms.parse().map_err(|_| bad())?,
                        after: n.parse().map_err(|_| bad())?,
                    }
                }
                k => return Err(BadRule::new(r, format!("unknown kind {k:?}"))),
            };
            let probability: f64 = parts[2]
                .parse()
                .map_err(|_| BadRule::new(r, "bad probability".into()))?;
            Ok(Rule {
                op,
                fault,
                probability,
                path_contains: parts.get(3).map(|s| s.to_string()),
                remaining: None,
            })
        })
        .collect()
}

fn injected(what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "fault-injection",
        source: what.to_string().into(),
    }
}

/// The wrapper store.
#[derive(Debug)]
pub struct FaultStore {
    inner: Arc<dyn ObjectStore>,
    state: Wrapper,
}

impl FaultStore {
    /// Runs `f` under the fault (if any) chosen for `op` on `path`.
    async fn guard<T, F>(&self, op: Op, path: &Path, f: F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        self.under(self.state.pick(op, path.as_ref()), path, f)
            .await
    }

    /// Runs `f` under `fault`.
    async fn under<T, F>(&self, fault: Option<Fault>, path: &Path, f: F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        match fault {
            None => f.await,
            Some(Fault::ErrorBefore) => Err(injected("injected error before the request")),
            Some(Fault::SlowDown) => Err(injected(
                "503 SlowDown: please reduce your request rate (injected)",
            )),
            Some(Fault::Conflict) => Err(injected(
                "409 Conflict: a conflicting operation is in progress (injected)",
            )),
            Some(Fault::Outage { .. }) => Err(injected(
                "503 Service Unavailable: the store is down (injected outage)",
            )),
            Some(Fault::Denied) => Err(object_store::Error::PermissionDenied {
                path: path.to_string(),
                source: "403 AccessDenied: the credentials may not access this key (injected)"
                    .into(),
            }),
            // `put_opts` has turned its create into an overwrite; any other request
            // runs as it is.
            Some(Fault::IgnoreCreate) => f.await,
            Some(Fault::Latency(d)) => {
                tokio::time::sleep(d).await;
                f.await
            }
            // Only listings lag; other requests see every object.
            Some(Fault::ListLag(_)) => f.await,
            Some(Fault::ErrorAfter) => {
                f.await?;
                Err(injected(
                    "injected error after the request landed (response lost)",
                ))
            }
        }
    }
}

impl std::fmt::Display for FaultStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Faulty({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let mut opts = opts;
        let fault = self.state.pick(Op::Put, location.as_ref());
        if fault == Some(Fault::IgnoreCreate) {
            opts.mode = object_store::PutMode::Overwrite;
        }
        self.under(
            fault,
            location,
            self.inner.put_opts(location, payload, opts),
        )
        .await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.guard(
            Op::Put,
            location,
            self.inner.put_multipart_opts(location, opts),
        )
        .await
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.guard(Op::Get, location, self.inner.get_opts(location, options))
            .await
    }
    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.guard(Op::Get, location, self.inner.get_ranges(location, ranges))
            .await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let p = prefix.cloned().unwrap_or_default();
        match self.state.pick(Op::List, p.as_ref()) {
            Some(
                Fault::ErrorBefore
                | Fault::ErrorAfter
                | Fault::SlowDown
                | Fault::Conflict
                | Fault::Denied
                | Fault::Outage { .. },
            ) => Box::pin(futures::stream::once(async {
                Err(injected("injected list failure"))
            })),
            Some(Fault::ListLag(lag)) => {
                use futures::TryStreamExt;
                let now_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64);
                let lag_ms = lag.as_millis() as i64;
                Box::pin(self.inner.list(prefix).try_filter(move |m| {
                    let fresh = now_ms - m.last_modified.timestamp_millis() < lag_ms;
                    futures::future::ready(!fresh)
                }))
            }
            _ => self.inner.list(prefix),
        }
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let p = prefix.cloned().unwrap_or_default();
        self.guard(Op::List, &p, self.inner.list_with_delimiter(prefix))
            .await
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.guard(Op::Copy, to, self.inner.copy_opts(from, to, options))
            .await
    }
    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.guard(Op::Copy, to, self.inner.rename_opts(from, to, options))
            .await
    }
}

/// Aborts the process here when `MDF_FAULTS` holds the rule `abort:<point>` (tests
/// only): a worker killed at exactly this point, between two steps of a commit.
pub fn abort_point(point: &str) {
    if let Ok(spec) = std::env::var("MDF_FAULTS")
        && spec
            .split(',')
            .any(|r| r.trim().strip_prefix("abort:") == Some(point))
    {
        eprintln!("MDF_FAULTS: aborting at {point}");
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    #[tokio::test]
    async fn after_fault_lands_the_write_and_reports_failure() {
        let w = Wrapper::new(vec![], 1);
        let s = w.wrap(Arc::new(InMemory::new()));
        w.fail_next(Op::Put, Fault::ErrorAfter, "a");
        assert!(s.put(&Path::from("a"), "x".into()).await.is_err());
        assert_eq!(
            s.get(&Path::from("a"))
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap(),
            "x"
        );
        w.fail_next(Op::Put, Fault::ErrorBefore, "b");
        assert!(s.put(&Path::from("b"), "x".into()).await.is_err());
        assert!(s.get(&Path::from("b")).await.is_err());
        assert_eq!(w.fired(), 2);
    }

    #[test]
    fn panic_rules_sit_beside_store_rules_without_spoiling_them() {
        let spec = "put:after:0.5:commits/,panic:gopher:boom:x,get:latency=20:1";
        assert_eq!(parse_rules(spec).unwrap().len(), 2);
        assert_eq!(
            parse_panic_rules(spec),
            [("gopher".to_string(), "boom:x".to_string())]
        );
    }

    #[test]
    fn parses_env_rules() {
        let r = parse_rules(
            "put:after:0.5:commits/,get:latency=20:1,any:slowdown:0.1,list:lag=1500:1:tasks/",
        )
        .unwrap();
        assert_eq!(r.len(), 4);
        assert_eq!(r[3].fault, Fault::ListLag(Duration::from_millis(1500)));
        assert_eq!(r[1].fault, Fault::Latency(Duration::from_millis(20)));
        assert!(parse_rules("put:explode:1").is_err());
        let r = parse_rules("any:outage=1500@40:1").unwrap();
        assert_eq!(
            r[0].fault,
            Fault::Outage {
                after: 40,
                millis: 1500
            }
        );
        assert!(parse_rules("any:outage=1500:1").is_err());
    }

    #[tokio::test]
    async fn an_outage_fails_every_request_from_the_nth_for_its_window() {
        let w = Wrapper::new(parse_rules("any:outage=300@3:1").unwrap(), 1);
        let s = w.wrap(Arc::new(InMemory::new()));
        let p = Path::from("k");
        assert!(s.put(&p, "x".into()).await.is_ok());
        assert!(s.get(&p).await.is_ok());
        // The third request opens the window: everything fails, lists included.
        for _ in 0..3 {
            let e = s.get(&p).await.unwrap_err();
            assert!(crate::store::is_transient(&e), "{e}");
        }
        assert!(s.put(&Path::from("j"), "y".into()).await.is_err());
        assert!(
            futures::StreamExt::next(&mut s.list(None))
                .await
                .unwrap()
                .is_err()
        );
        tokio::time::sleep(Duration::from_millis(350)).await;
        // Over: the store answers again, and the failed put did nothing.
        assert!(s.get(&p).await.is_ok());
        assert!(
            s.get(&Path::from("j"))
                .await
                .is_err_and(|e| matches!(e, object_store::Error::NotFound { .. }))
        );
        assert_eq!(w.fired(), 5);
    }

    #[tokio::test]
    async fn a_lagging_listing_leaves_out_fresh_objects_only() {
        use futures::TryStreamExt;
        // Writes dir/a through a store with `rule`, lists dir; the store for reads.
        async fn listed_after_put(rule: &str) -> (usize, Arc<dyn ObjectStore>) {
            let w = Wrapper::new(parse_rules(rule).unwrap(), 1);
            let s = w.wrap(Arc::new(InMemory::new()));
            s.put(&Path::from("dir/a"), "x".into()).await.unwrap();
            let listed: Vec<_> = s
                .list(Some(&Path::from("dir")))
                .try_collect()
                .await
                .unwrap();
            (listed.len(), s)
        }
        let (n, s) = listed_after_put("list:lag=60000:1:dir").await;
        assert_eq!(n, 0, "a fresh object is not listed yet");
        assert!(
            s.get(&Path::from("dir/a")).await.is_ok(),
            "but it can be read"
        );
        assert_eq!(listed_after_put("list:lag=0:1:dir").await.0, 1);
    }
}
