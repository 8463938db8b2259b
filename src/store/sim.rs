//! An [`ObjectStore`] that behaves like S3 at fleet scale, for the fleet simulator
//! (`mdf bench fleet`, docs/SCALE.md): object_store's `InMemory` (create-only PUTs,
//! listings and copies as a store does them) behind a per-request latency drawn per
//! operation, the bytes at a per-connection bandwidth, per-prefix request-rate limits
//! answered with `503 SlowDown`, and LIST pages of 1,000 keys, each a request. It
//! sleeps on tokio's clock, so on a runtime whose time is paused a simulated fleet
//! runs in virtual time. It counts every request by kind, and the throttled ones.
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the store behaves.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Median first-byte latency per operation, milliseconds.
    pub get_ms: f64,
    pub head_ms: f64,
    pub put_ms: f64,
    pub list_ms: f64,
    pub copy_ms: f64,
    pub delete_ms: f64,
    /// σ of the log-normal latency (0.5: the p99 is about 3.2× the median).
    pub sigma: f64,
    /// Bytes per second of one connection.
    pub bandwidth: f64,
    /// Requests per second per prefix partition: writes (PUT, COPY, POST, DELETE) and
    /// reads (GET, HEAD, LIST).
    pub write_rate: f64,
    pub read_rate: f64,
    /// A partition is a key's first this many path segments.
    pub prefix_depth: usize,
    /// Keys per LIST page.
    pub page: usize,
    /// Retries of a throttled request by the S3 client itself (not of create-only PUTs).
    pub client_retries: u32,
    pub seed: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            get_ms: 20.0,
            head_ms: 20.0,
            put_ms: 30.0,
            list_ms: 40.0,
            copy_ms: 40.0,
            delete_ms: 20.0,
            sigma: 0.5,
            bandwidth: 80e6,
            write_rate: 3500.0,
            read_rate: 5500.0,
            prefix_depth: 4,
            page: 1000,
            client_retries: 8,
            seed: 1,
        }
    }
}

/// A request's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Get,
    Head,
    Put,
    List,
    Copy,
    Delete,
}

impl Op {
    pub const ALL: [Op; 6] = [Op::Get, Op::Head, Op::Put, Op::List, Op::Copy, Op::Delete];
    fn writes(self) -> bool {
        matches!(self, Op::Put | Op::Copy | Op::Delete)
    }
    pub fn name(self) -> &'static str {
        match self {
            Op::Get => "GET",
            Op::Head => "HEAD",
            Op::Put => "PUT",
            Op::List => "LIST",
            Op::Copy => "COPY",
            Op::Delete => "DELETE",
        }
    }
}

/// What the store answered, by operation.
#[derive(Debug, Clone, Default)]
pub struct SimCounts {
    /// Requests answered (throttled ones included).
    pub requests: HashMap<Op, u64>,
    /// Requests answered with a 503 SlowDown.
    pub throttled: HashMap<Op, u64>,
    /// Requests answered, by operation and by the protocol area of the key
    /// ([`area`]): where a job's requests go.
    pub by_area: HashMap<(Op, &'static str), u64>,
    /// The partition that was throttled most, and how often.
    pub hottest: Option<(String, u64)>,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl SimCounts {
    pub fn total(&self) -> u64 {
        self.requests.values().sum()
    }
    pub fn throttled_total(&self) -> u64 {
        self.throttled.values().sum()
    }
    pub fn get(&self, op: Op) -> u64 {
        self.requests.get(&op).copied().unwrap_or(0)
    }
    /// What changed since `before`.
    pub fn since(&self, before: &SimCounts) -> SimCounts {
        let diff = |a: &HashMap<Op, u64>, b: &HashMap<Op, u64>| {
            Op::ALL
                .iter()
                .map(|op| {
                    let (x, y) = (a.get(op).copied(), b.get(op).copied());
                    (*op, x.unwrap_or(0) - y.unwrap_or(0))
                })
                .collect()
        };
        SimCounts {
            requests: diff(&self.requests, &before.requests),
            throttled: diff(&self.throttled, &before.throttled),
            by_area: self
                .by_area
                .iter()
                .map(|(k, v)| (*k, v - before.by_area.get(k).copied().unwrap_or(0)))
                .filter(|(_, v)| *v > 0)
                .collect(),
            hottest: self.hottest.clone(),
            bytes_read: self.bytes_read - before.bytes_read,
            bytes_written: self.bytes_written - before.bytes_written,
        }
    }
    /// The billed requests, as the job's request counters for
    /// [`crate::coordinator::status::Prices`]: S3 bills no 5xx answer, so no 503.
    pub fn snapshot(&self) -> super::RequestSnapshot {
        let billed = |op| self.get(op) - self.throttled.get(&op).copied().unwrap_or(0);
        super::RequestSnapshot {
            get: billed(Op::Get),
            head: billed(Op::Head),
            put: billed(Op::Put),
            list: billed(Op::List),
            delete: billed(Op::Delete),
            copy: billed(Op::Copy),
            bytes_read: self.bytes_read,
            bytes_written: self.bytes_written,
        }
    }
}

/// A token bucket of one partition and class, refilled on tokio's clock.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: tokio::time::Instant,
}

#[derive(Debug)]
struct State {
    rng: StdRng,
    buckets: HashMap<(String, bool), Bucket>,
    throttled_at: HashMap<String, u64>,
    counts: SimCounts,
}

/// The store. Cheap to clone (shared state).
#[derive(Debug, Clone)]
pub struct SimStore {
    inner: Arc<InMemory>,
    /// Every key that may exist (listings confirm each with the store): S3 lists a
    /// page at a time, and `InMemory` would collect a whole listing at once, which at
    /// millions of keys is the simulator's memory, not mdf's.
    keys: Arc<Mutex<std::collections::BTreeSet<String>>>,
    cfg: Arc<SimConfig>,
    state: Arc<Mutex<State>>,
    /// The simulation runtime's thread: only requests made there take their latency.
    runtime_thread: std::thread::ThreadId,
}

impl std::fmt::Display for SimStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimulatedS3")
    }
}

/// The protocol area of a key: the first of its folders that names one
/// (`leases`, `commits`, `done`, `shards`, ... of docs/PROTOCOL.md), else `data` (inputs
/// and published outputs).
pub fn area(key: &str) -> &'static str {
    const AREAS: [&str; 14] = [
        "parts",
        "leases",
        "commits",
        "done",
        "shards",
        "tasks",
        "staging",
        "slots",
        "backups",
        "speculation",
        "workers",
        "submissions",
        "converged",
        "job.json",
    ];
    key.split('/')
        .find_map(|seg| AREAS.iter().find(|a| **a == seg).copied())
        .unwrap_or("data")
}

fn slow_down(partition: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "simulated-s3",
        source: format!("503 SlowDown: please reduce your request rate (prefix {partition})")
            .into(),
    }
}

impl SimStore {
    /// Must be created on the thread of the (current-thread) runtime it serves.
    pub fn new(cfg: SimConfig) -> Self {
        SimStore {
            runtime_thread: std::thread::current().id(),
            inner: Arc::new(InMemory::new()),
            keys: Default::default(),
            state: Arc::new(Mutex::new(State {
                rng: StdRng::seed_from_u64(cfg.seed),
                buckets: HashMap::new(),
                throttled_at: HashMap::new(),
                counts: SimCounts::default(),
            })),
            cfg: Arc::new(cfg),
        }
    }

    /// The store without latency, limits or counting: to read for free. Objects
    /// are seeded with [`SimStore::seed`] (which listings then see).
    pub fn backing(&self) -> Arc<dyn ObjectStore> {
        self.inner.clone()
    }

    /// Writes an object for free (no latency, limit or count): a job's inputs.
    pub async fn seed(&self, location: &Path, body: PutPayload) -> Result<()> {
        self.inner
            .put_opts(location, body, PutOptions::default())
            .await?;
        self.note(location);
        Ok(())
    }

    fn note(&self, key: &Path) {
        let mut keys = self.keys.lock().expect("sim keys");
        if !keys.contains(key.as_ref()) {
            keys.insert(key.to_string());
        }
    }

    fn forget(&self, key: &Path) {
        self.keys.lock().expect("sim keys").remove(key.as_ref());
    }

    /// Up to `n` keys under `start` after `after`, in order.
    fn next_keys(&self, start: &str, after: Option<&str>, n: usize) -> Vec<String> {
        use std::ops::Bound;
        let keys = self.keys.lock().expect("sim keys");
        let lower = match after {
            Some(a) => Bound::Excluded(a.to_string()),
            None => Bound::Included(start.to_string()),
        };
        keys.range((lower, Bound::Unbounded))
            .take_while(|k| k.starts_with(start))
            .take(n)
            .cloned()
            .collect()
    }

    pub fn counts(&self) -> SimCounts {
        let st = self.state.lock().expect("sim state");
        let mut c = st.counts.clone();
        c.hottest = st
            .throttled_at
            .iter()
            .max_by_key(|(k, n)| (**n, std::cmp::Reverse((*k).clone())))
            .map(|(k, n)| (k.clone(), *n));
        c
    }

    /// The partition of a key (its folder, cut at `prefix_depth` segments: an
    /// object's own name never makes a partition of its own) or of a listed prefix
    /// (cut the same way).
    pub fn partition(&self, key: &str) -> String {
        let parts: Vec<&str> = key.split('/').collect();
        parts[..parts.len().saturating_sub(1).min(self.cfg.prefix_depth)].join("/")
    }

    /// One call of `op` on `key` moving `bytes`, as mdf's S3 client makes it: a 503 is
    /// tried again by the client itself (object_store's `RetryConfig` as
    /// `store::s3` sets it: 8 retries, backoff from 100 ms doubling to 15 s, within
    /// 180 s), except for create-only PUTs, which that client never retries
    /// (`retries: false`). `Err`: the 503 the client gave up on.
    async fn call(&self, op: Op, key: &str, bytes: u64, retries: bool) -> Result<()> {
        let started = tokio::time::Instant::now();
        let mut backoff = 0.1f64;
        let mut n = 0;
        loop {
            match self.request(op, key, bytes).await {
                Err(e)
                    if retries
                        && n < self.cfg.client_retries
                        && started.elapsed() < Duration::from_secs(180) =>
                {
                    // object_store's backoff: a random wait up to the next step.
                    let wait = {
                        let mut st = self.state.lock().expect("sim state");
                        let next = (backoff * 2.0).min(15.0);
                        let w = st.rng.random_range(backoff..=next);
                        backoff = next;
                        w
                    };
                    let _ = e;
                    tokio::time::sleep(Duration::from_secs_f64(wait)).await;
                    n += 1;
                }
                r => return r,
            }
        }
    }

    /// One request of `op` on `key` moving `bytes`: counts it, takes a token of its
    /// partition, and sleeps its latency. `Err`: a 503 SlowDown (after its latency).
    async fn request(&self, op: Op, key: &str, bytes: u64) -> Result<()> {
        let part = self.partition(key);
        let now = tokio::time::Instant::now();
        let (delay, ok) = {
            let mut st = self.state.lock().expect("sim state");
            let cfg = &self.cfg;
            let rate = if op.writes() {
                cfg.write_rate
            } else {
                cfg.read_rate
            };
            let b = st
                .buckets
                .entry((part.clone(), op.writes()))
                .or_insert(Bucket {
                    tokens: rate,
                    at: now,
                });
            b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * rate).min(rate);
            b.at = now;
            let ok = b.tokens >= 1.0;
            if ok {
                b.tokens -= 1.0;
            }
            let median = match op {
                Op::Get => cfg.get_ms,
                Op::Head => cfg.head_ms,
                Op::Put => cfg.put_ms,
                Op::List => cfg.list_ms,
                Op::Copy => cfg.copy_ms,
                Op::Delete => cfg.delete_ms,
            };
            let z = normal(&mut st.rng);
            let mut ms = median * (cfg.sigma * z).exp();
            if ok && cfg.bandwidth > 0.0 {
                ms += bytes as f64 / cfg.bandwidth * 1000.0;
            }
            *st.counts.requests.entry(op).or_default() += 1;
            *st.counts.by_area.entry((op, area(key))).or_default() += 1;
            if ok {
                match op {
                    Op::Get => st.counts.bytes_read += bytes,
                    Op::Put => st.counts.bytes_written += bytes,
                    _ => {}
                }
            } else {
                *st.counts.throttled.entry(op).or_default() += 1;
                *st.throttled_at.entry(part.clone()).or_default() += 1;
            }
            (Duration::from_secs_f64(ms / 1000.0), ok)
        };
        // A blocking task (the planner sampling an input file) holds a paused clock
        // still while it runs: sleeping there would wait forever. Its requests are
        // answered without their latency.
        if std::thread::current().id() == self.runtime_thread {
            tokio::time::sleep(delay).await;
        }
        if ok { Ok(()) } else { Err(slow_down(&part)) }
    }

    /// The inner listing, one request per page as it is read.
    /// A listing of the keys under `start`, a page of `cfg.page` at a time: each page
    /// one LIST request (an empty listing is one page too), its keys confirmed with
    /// the store (a key deleted meanwhile is left out).
    fn paged(&self, start: String) -> BoxStream<'static, Result<ObjectMeta>> {
        use object_store::ObjectStoreExt;
        let (this, page) = (self.clone(), self.cfg.page.max(1));
        struct Cursor {
            after: Option<String>,
            first: bool,
            done: bool,
            buf: std::collections::VecDeque<Result<ObjectMeta>>,
        }
        let cursor = Cursor {
            after: None,
            first: true,
            done: false,
            buf: Default::default(),
        };
        futures::stream::unfold(cursor, move |mut c| {
            let (this, start) = (this.clone(), start.clone());
            async move {
                loop {
                    if let Some(m) = c.buf.pop_front() {
                        if m.is_err() {
                            c.done = true;
                            c.buf.clear();
                        }
                        return Some((m, c));
                    }
                    if c.done {
                        return None;
                    }
                    let keys = this.next_keys(&start, c.after.as_deref(), page);
                    if keys.is_empty() && !c.first {
                        return None;
                    }
                    c.first = false;
                    c.done = keys.len() < page;
                    c.after = keys.last().cloned();
                    if let Err(e) = this.call(Op::List, &start, 0, true).await {
                        c.buf.push_back(Err(e));
                        continue;
                    }
                    for k in keys {
                        let Ok(p) = Path::parse(&k) else { continue };
                        match this.inner.head(&p).await {
                            Ok(m) => c.buf.push_back(Ok(m)),
                            Err(object_store::Error::NotFound { .. }) => {}
                            Err(e) => c.buf.push_back(Err(e)),
                        }
                    }
                }
            }
        })
        .boxed()
    }
}

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut StdRng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(1e-12);
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

#[async_trait]
impl ObjectStore for SimStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let create = matches!(opts.mode, object_store::PutMode::Create);
        self.call(
            Op::Put,
            location.as_ref(),
            payload.content_length() as u64,
            !create,
        )
        .await?;
        // A small body is copied to its exact size: a serialised record's buffer has
        // up to twice its length of capacity, and a simulated fleet's store holds
        // millions of them. A large one (a task's shared output) stays shared.
        let payload = if payload.content_length() < 1 << 20 {
            let mut b = Vec::with_capacity(payload.content_length());
            for chunk in payload.iter() {
                b.extend_from_slice(chunk);
            }
            PutPayload::from(b)
        } else {
            payload
        };
        let r = self.inner.put_opts(location, payload, opts).await;
        self.note(location);
        r
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.call(Op::Put, location.as_ref(), 0, true).await?;
        // Listed once it completes (a listing confirms each key).
        self.note(location);
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if options.head {
            self.call(Op::Head, location.as_ref(), 0, true).await?;
            return self.inner.get_opts(location, options).await;
        }
        let r = self.inner.get_opts(location, options).await;
        let bytes = r.as_ref().map_or(0, |r| r.range.end - r.range.start);
        self.call(Op::Get, location.as_ref(), bytes, true).await?;
        r
    }
    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let mut out = Vec::with_capacity(ranges.len());
        for r in ranges {
            self.call(Op::Get, location.as_ref(), r.end - r.start, true)
                .await?;
            out.extend(
                self.inner
                    .get_ranges(location, std::slice::from_ref(r))
                    .await?,
            );
        }
        Ok(out)
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let this = self.clone();
        locations
            .then(move |p| {
                let this = this.clone();
                async move {
                    let p = p?;
                    this.call(Op::Delete, p.as_ref(), 0, true).await?;
                    let key = p.clone();
                    let mut one = this
                        .inner
                        .delete_stream(futures::stream::once(async move { Ok(p) }).boxed());
                    let r = one.next().await.unwrap_or_else(|| {
                        Err(object_store::Error::Generic {
                            store: "simulated-s3",
                            source: "delete answered nothing".into(),
                        })
                    });
                    if r.is_ok() {
                        this.forget(&key);
                    }
                    r
                }
            })
            .boxed()
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        // Everything under it: the root lists every key.
        self.paged(
            prefix
                .filter(|p| !p.as_ref().is_empty())
                .map(|p| format!("{p}/"))
                .unwrap_or_default(),
        )
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        use object_store::ObjectStoreExt;
        let key = prefix
            .filter(|p| !p.as_ref().is_empty())
            .map(|p| format!("{p}/"))
            .unwrap_or_default();
        // From the key index, stepping over each folder's keys at once (the inner
        // store would walk every object under the prefix: a shard's lease folders
        // hold several records a task, and that walk was most of a large
        // simulation's CPU).
        let (dirs, files) = {
            use std::ops::Bound;
            let keys = self.keys.lock().expect("sim keys");
            let (mut dirs, mut files) = (Vec::new(), Vec::new());
            let mut from = key.clone();
            while let Some(k) = keys
                .range::<str, _>((Bound::Included(from.as_str()), Bound::Unbounded))
                .next()
                .filter(|k| k.starts_with(&key))
            {
                match k[key.len()..].find('/') {
                    Some(i) => {
                        let dir = &k[..key.len() + i];
                        dirs.push(dir.to_string());
                        // '0' follows '/': past every key under `dir/`.
                        from = format!("{dir}0");
                    }
                    None => {
                        files.push(k.clone());
                        from = format!("{k}\0");
                    }
                }
            }
            (dirs, files)
        };
        let n = dirs.len() + files.len();
        for _ in 0..n.div_ceil(self.cfg.page.max(1)).max(1) {
            self.call(Op::List, &key, 0, true).await?;
        }
        let mut objects = Vec::with_capacity(files.len());
        for f in files {
            let Ok(p) = Path::parse(&f) else { continue };
            match self.inner.head(&p).await {
                Ok(m) => objects.push(m),
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(ListResult {
            objects,
            common_prefixes: dirs.iter().filter_map(|d| Path::parse(d).ok()).collect(),
            extensions: Default::default(),
        })
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.call(Op::Copy, to.as_ref(), 0, true).await?;
        let r = self.inner.copy_opts(from, to, options).await;
        self.note(to);
        r
    }
    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.call(Op::Copy, to.as_ref(), 0, true).await?;
        let r = self.inner.rename_opts(from, to, options).await;
        self.note(to);
        if r.is_ok() {
            self.forget(from);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::TryStreamExt;
    use object_store::ObjectStoreExt;

    fn quiet() -> SimConfig {
        SimConfig {
            sigma: 0.0,
            ..SimConfig::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_takes_its_latency_in_virtual_time() {
        let s = SimStore::new(quiet());
        let t0 = tokio::time::Instant::now();
        s.put(&Path::from("a/b"), "x".into()).await.unwrap();
        let took = t0.elapsed().as_secs_f64() * 1000.0;
        assert!((30.0..=31.5).contains(&took), "{took} ms");
        assert_eq!(s.counts().get(Op::Put), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn listings_are_paged_and_each_page_is_a_request() {
        let s = SimStore::new(SimConfig {
            page: 10,
            ..quiet()
        });
        for i in 0..25 {
            s.seed(&Path::from(format!("d/{i:03}")), "x".into())
                .await
                .unwrap();
        }
        // Not under "d/": never listed with it.
        s.seed(&Path::from("d0"), "x".into()).await.unwrap();
        s.seed(&Path::from("dd/1"), "x".into()).await.unwrap();
        let n = s.list(Some(&Path::from("d"))).count().await;
        assert_eq!(n, 25);
        assert_eq!(s.counts().get(Op::List), 3);
        // An empty listing is one request; reading one key of many, one page.
        let _ = s.list(Some(&Path::from("none"))).count().await;
        assert_eq!(s.counts().get(Op::List), 4);
        let _ = s.list(Some(&Path::from("d"))).next().await;
        assert_eq!(s.counts().get(Op::List), 5);
        let r = s.list_with_delimiter(Some(&Path::from("d"))).await.unwrap();
        assert_eq!(r.objects.len(), 25);
        assert_eq!(s.counts().get(Op::List), 8);
        // Listings follow writes, copies and deletes; a full last page ends it.
        s.put(&Path::from("d/100"), "x".into()).await.unwrap();
        s.copy(&Path::from("d/000"), &Path::from("d/101"))
            .await
            .unwrap();
        s.delete(&Path::from("d/001")).await.unwrap();
        s.delete(&Path::from("d/002")).await.unwrap();
        let names: Vec<String> = s
            .list(Some(&Path::from("d")))
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        assert_eq!(names.len(), 25);
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
        assert!(names.contains(&"d/101".to_string()) && !names.contains(&"d/001".to_string()));
        assert_eq!(s.counts().get(Op::List), 8 + 3);
        // The root lists every key.
        assert_eq!(s.list(None).count().await, 27);
        assert_eq!(s.list(Some(&Path::from(""))).count().await, 27);
    }

    #[tokio::test(start_paused = true)]
    async fn a_delimiter_listing_answers_what_the_inner_store_does() {
        let s = SimStore::new(quiet());
        // Folders and files side by side, names that sort around '/' ('-', '.', '0'),
        // a file named as a folder, several levels.
        let keys = [
            "a/b/1", "a/b/2", "a/b-c/1", "a/b.x", "a/b0", "a/b", "a/c/d/e", "a/c/f", "a/z", "a0/1",
            "ab", "b/1",
        ];
        for k in keys {
            s.seed(&Path::from(k), "x".into()).await.unwrap();
        }
        s.delete(&Path::from("a/c/f")).await.unwrap();
        for prefix in [
            None,
            Some(""),
            Some("a"),
            Some("a/b"),
            Some("a/c"),
            Some("none"),
        ] {
            let p = prefix.map(Path::from);
            let ours = s.list_with_delimiter(p.as_ref()).await.unwrap();
            let theirs = s.backing().list_with_delimiter(p.as_ref()).await.unwrap();
            let names = |r: &ListResult| {
                (
                    r.objects
                        .iter()
                        .map(|m| (m.location.to_string(), m.size))
                        .collect::<Vec<_>>(),
                    // S3 orders folders by key ("a/b-c/" before "a/b/"), as the
                    // index does; `InMemory` by path.
                    r.common_prefixes
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<std::collections::BTreeSet<_>>(),
                )
            };
            assert_eq!(names(&ours), names(&theirs), "{prefix:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_partition_over_its_rate_answers_slow_down_and_recovers() {
        let s = SimStore::new(SimConfig {
            write_rate: 10.0,
            client_retries: 0,
            ..quiet()
        });
        let mut ok = 0;
        let mut slow = 0;
        for i in 0..30 {
            match s.put(&Path::from(format!("a/b/c/d/{i}")), "x".into()).await {
                Ok(_) => ok += 1,
                Err(e) => {
                    assert!(e.to_string().contains("503 SlowDown"), "{e}");
                    assert!(crate::store::is_transient(&e));
                    slow += 1;
                }
            }
        }
        // 10 of burst, then 1 per 100 ms while each PUT takes 30 ms.
        assert!(slow > 0 && ok >= 10, "ok {ok} slow {slow}");
        assert_eq!(s.counts().throttled_total(), slow);
        // Another partition is not throttled; an object's name is not one.
        assert_eq!(s.partition("a/b/c/d/e/f"), "a/b/c/d");
        assert_eq!(s.partition("in/x.jsonl"), "in");
        s.put(&Path::from("a/b/c/e/1"), "x".into()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        s.put(&Path::from("a/b/c/d/again"), "x".into())
            .await
            .unwrap();
        assert_eq!(s.counts().hottest.unwrap().0, "a/b/c/d");
    }

    #[tokio::test(start_paused = true)]
    async fn the_client_retries_a_throttled_request_but_never_a_create() {
        let s = SimStore::new(SimConfig {
            write_rate: 1.0,
            ..quiet()
        });
        // The bucket's one token goes to the first PUT; the second waits it out.
        s.put(&Path::from("a/b/c/d/1"), "x".into()).await.unwrap();
        s.put(&Path::from("a/b/c/d/2"), "x".into()).await.unwrap();
        assert!(s.counts().throttled_total() >= 1);
        let create = PutOptions {
            mode: object_store::PutMode::Create,
            ..Default::default()
        };
        let e = s
            .put_opts(&Path::from("a/b/c/d/3"), "x".into(), create)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("503"), "{e}");
    }

    #[tokio::test(start_paused = true)]
    async fn create_only_puts_keep_their_semantics() {
        let s = SimStore::new(quiet());
        let p = Path::from("x/lease");
        let opts = || PutOptions {
            mode: object_store::PutMode::Create,
            ..Default::default()
        };
        s.put_opts(&p, "1".into(), opts()).await.unwrap();
        let e = s.put_opts(&p, "2".into(), opts()).await.unwrap_err();
        assert!(matches!(e, object_store::Error::AlreadyExists { .. }));
        let got = s.get(&p).await.unwrap().bytes().await.unwrap();
        assert_eq!(got, "1");
        assert_eq!(s.counts().get(Op::Get), 1);
        assert_eq!(s.counts().bytes_read, 1);
    }
}
