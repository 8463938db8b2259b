//! A fault-injecting HTTP/1.1 proxy in front of an S3 server (moto): it listens on
//! 127.0.0.1, forwards each request to the server, and on chosen requests (by method,
//! path substring and count or probability) answers as real S3 does when things go
//! wrong: a 409 with S3's XML error body, 500 after the write was applied, 503
//! SlowDown, a connection reset before forwarding, the response dropped after the
//! server applied the write, or the request forwarded without `If-None-Match` (a store
//! that ignores it). A request that met a fault is not faulted again when retried
//! (`StripIfNoneMatch` excepted). Plain tokio TCP, one request per connection (every answer says
//! `Connection: close`), its own runtime on its own thread, so tests of any kind
//! (sync, async, subprocesses) can point an S3 client at [`FaultProxy::endpoint`].
#![allow(dead_code)]
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy does to a matching request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// 409 `ConditionalRequestConflict`, not forwarded.
    Conflict,
    /// 409 `OperationAborted`, not forwarded.
    OperationAborted,
    /// Forwarded (a write is applied), then answered 500 `InternalError`.
    InternalError,
    /// 503 `SlowDown`, not forwarded.
    SlowDown,
    /// The connection is reset before anything is forwarded.
    Reset,
    /// Forwarded (a write is applied), then the connection is closed unanswered.
    DropResponse,
    /// Forwarded without its `If-None-Match` header.
    StripIfNoneMatch,
}

impl Kind {
    pub const ALL_FAULTS: [Kind; 6] = [
        Kind::Conflict,
        Kind::OperationAborted,
        Kind::InternalError,
        Kind::SlowDown,
        Kind::Reset,
        Kind::DropResponse,
    ];
}

#[derive(Debug, Clone)]
struct Rule {
    /// `PUT`, `GET`, ... or `*`.
    method: String,
    path_contains: String,
    kind: Kind,
    /// How many more times it fires (`None`: unlimited).
    remaining: Option<u64>,
    probability: f64,
}

/// One fired fault: what, and on which request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    pub kind: Kind,
    pub method: String,
    pub path: String,
}

#[derive(Debug, Default)]
struct State {
    rules: Vec<Rule>,
    rng: u64,
    fired: Vec<Fired>,
    requests: u64,
    /// Every request's method and path, in order.
    seen: Vec<(String, String)>,
    /// Requests (method and path) that already met a fault: their retries pass, so
    /// faults never pile up on one request beyond what a client's retries absorb.
    faulted: std::collections::HashSet<(String, String)>,
}

impl State {
    fn random(&mut self) -> f64 {
        // xorshift64*: reproducible from the seed, no dependency.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick(&mut self, method: &str, path: &str) -> Option<Kind> {
        self.requests += 1;
        self.seen.push((method.to_string(), path.to_string()));
        let key = (method.to_string(), path.to_string());
        let faulted = self.faulted.contains(&key);
        for i in 0..self.rules.len() {
            let r = &self.rules[i];
            if (r.method != "*" && r.method != method)
                || !path.contains(&r.path_contains)
                || r.remaining == Some(0)
                || (faulted && r.kind != Kind::StripIfNoneMatch)
            {
                continue;
            }
            let p = r.probability;
            if p < 1.0 && self.random() >= p {
                continue;
            }
            let r = &mut self.rules[i];
            if let Some(n) = &mut r.remaining {
                *n -= 1;
            }
            let kind = r.kind;
            if kind != Kind::StripIfNoneMatch {
                self.faulted.insert(key);
            }
            self.fired.push(Fired {
                kind,
                method: method.to_string(),
                path: path.to_string(),
            });
            return Some(kind);
        }
        None
    }
}

/// A running proxy; it runs until the process exits.
#[derive(Clone)]
pub struct FaultProxy {
    /// `http://127.0.0.1:PORT`, to use as the S3 endpoint.
    pub endpoint: String,
    state: Arc<Mutex<State>>,
}

impl FaultProxy {
    /// Starts a proxy forwarding to `upstream` (`http://HOST:PORT`).
    pub fn start(upstream: &str, seed: u64) -> FaultProxy {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let state = Arc::new(Mutex::new(State {
            rng: seed.max(1),
            ..Default::default()
        }));
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let endpoint = format!("http://{}", std_listener.local_addr().unwrap());
        let st = state.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = TcpListener::from_std(std_listener).unwrap();
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        continue;
                    };
                    let st = st.clone();
                    let up = upstream.clone();
                    tokio::spawn(async move {
                        let _ = serve(client, &up, &st).await;
                    });
                }
            });
        });
        FaultProxy { endpoint, state }
    }

    /// `kind` on the next `times` requests with `method` (`*`: any) whose path
    /// contains `path_contains`.
    pub fn fail(&self, method: &str, path_contains: &str, kind: Kind, times: u64) {
        self.rule(method, path_contains, kind, Some(times), 1.0);
    }

    /// `kind` on each matching request with probability `p`, without end.
    pub fn random(&self, method: &str, path_contains: &str, kind: Kind, p: f64) {
        self.rule(method, path_contains, kind, None, p);
    }

    fn rule(&self, method: &str, path: &str, kind: Kind, remaining: Option<u64>, p: f64) {
        self.state.lock().unwrap().rules.push(Rule {
            method: method.to_string(),
            path_contains: path.to_string(),
            kind,
            remaining,
            probability: p,
        });
    }

    /// Removes every rule (the record of fired faults stays).
    pub fn clear(&self) {
        self.state.lock().unwrap().rules.clear();
    }

    /// Every fault fired so far, in order.
    pub fn fired(&self) -> Vec<Fired> {
        self.state.lock().unwrap().fired.clone()
    }

    /// How many faults of `kind` fired.
    pub fn fired_of(&self, kind: Kind) -> usize {
        self.fired().iter().filter(|f| f.kind == kind).count()
    }

    /// How many requests with `method` had a path containing `path_contains`.
    pub fn seen(&self, method: &str, path_contains: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .seen
            .iter()
            .filter(|(m, p)| m == method && p.contains(path_contains))
            .count()
    }

    /// Requests seen so far.
    pub fn requests(&self) -> u64 {
        self.state.lock().unwrap().requests
    }
}

/// An HTTP/1.1 message: its head (start line and headers) and raw body bytes (still
/// chunk-encoded when it was).
struct Message {
    start: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Message {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The bytes to send, with `Connection: close` and without `drop` headers.
    fn encode(&self, drop: &[&str]) -> Vec<u8> {
        let mut out = format!("{}\r\n", self.start).into_bytes();
        for (k, v) in &self.headers {
            if k.eq_ignore_ascii_case("connection")
                || drop.iter().any(|d| k.eq_ignore_ascii_case(d))
            {
                continue;
            }
            out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
        out.extend_from_slice(b"Connection: close\r\n\r\n");
        out.extend_from_slice(&self.body);
        out
    }
}

/// Reads bytes until `buf` holds `n` (false at EOF before that).
async fn fill<S: AsyncRead + Unpin>(s: &mut S, buf: &mut Vec<u8>, n: usize) -> bool {
    let mut tmp = [0u8; 16384];
    while buf.len() < n {
        match s.read(&mut tmp).await {
            Ok(0) | Err(_) => return false,
            Ok(k) => buf.extend_from_slice(&tmp[..k]),
        }
    }
    true
}

/// Reads until `buf` contains `pat` at or after `from`; its position.
async fn find<S: AsyncRead + Unpin>(
    s: &mut S,
    buf: &mut Vec<u8>,
    from: usize,
    pat: &[u8],
) -> Option<usize> {
    loop {
        if let Some(i) = buf[from.min(buf.len())..]
            .windows(pat.len())
            .position(|w| w == pat)
        {
            return Some(from + i);
        }
        let n = buf.len();
        if !fill(s, buf, n + 1).await {
            return None;
        }
    }
}

/// Reads one message; `no_body` for answers to HEAD (and 204/304). `None` at EOF.
async fn read_message<S: AsyncRead + Unpin>(s: &mut S, response_to_head: bool) -> Option<Message> {
    let mut buf = Vec::new();
    let end = find(s, &mut buf, 0, b"\r\n\r\n").await?;
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let start = lines.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut m = Message {
        start,
        headers,
        body: Vec::new(),
    };
    let mut rest = buf.split_off(end + 4);
    let status = m
        .start
        .starts_with("HTTP/")
        .then(|| m.start.split(' ').nth(1).unwrap_or("").to_string());
    let bodiless = response_to_head || matches!(status.as_deref(), Some("204" | "304"));
    if bodiless {
        return Some(m);
    }
    if m.header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        // Keep the chunked bytes as they are; find where they end.
        let mut at = 0;
        loop {
            let eol = find(s, &mut rest, at, b"\r\n").await?;
            let size_text = String::from_utf8_lossy(&rest[at..eol]).into_owned();
            let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
            if size == 0 {
                // Trailers end with an empty line.
                let mut t = eol + 2;
                loop {
                    let e = find(s, &mut rest, t, b"\r\n").await?;
                    if e == t {
                        rest.truncate(e + 2);
                        m.body = rest;
                        return Some(m);
                    }
                    t = e + 2;
                }
            }
            at = eol + 2 + size + 2;
            if !fill(s, &mut rest, at).await {
                return None;
            }
        }
    }
    match m
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        Some(n) => {
            if !fill(s, &mut rest, n).await {
                return None;
            }
            rest.truncate(n);
        }
        None if status.is_some() => {
            // A response without a length ends at EOF.
            let _ = s.read_to_end(&mut rest).await;
        }
        None => rest.clear(),
    }
    m.body = rest;
    Some(m)
}

/// An S3 error answer.
fn s3_error(status: &str, code: &str, message: &str, path: &str) -> Vec<u8> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message><Resource>{path}</Resource><RequestId>FAULTPROXY0000001</RequestId><HostId>fault-proxy</HostId></Error>"
    );
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nx-amz-request-id: FAULTPROXY0000001\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Forwards `req` to the server and returns its answer.
async fn forward(upstream: &str, req: &Message, drop: &[&str]) -> Option<Message> {
    let mut up = TcpStream::connect(upstream).await.ok()?;
    up.write_all(&req.encode(drop)).await.ok()?;
    let method = req.start.split(' ').next().unwrap_or("");
    read_message(&mut up, method == "HEAD").await
}

async fn serve(mut client: TcpStream, upstream: &str, state: &Mutex<State>) -> Option<()> {
    let req = read_message(&mut client, false).await?;
    let mut parts = req.start.split(' ');
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let kind = state.lock().unwrap().pick(&method, &path);
    let answer = match kind {
        None => forward(upstream, &req, &[]).await?.encode(&[]),
        Some(Kind::StripIfNoneMatch) => forward(upstream, &req, &["if-none-match"])
            .await?
            .encode(&[]),
        Some(Kind::Conflict) => s3_error(
            "409 Conflict",
            "ConditionalRequestConflict",
            "A conflicting conditional operation is currently in progress against this resource. Please try again.",
            &path,
        ),
        Some(Kind::OperationAborted) => s3_error(
            "409 Conflict",
            "OperationAborted",
            "A conflicting conditional operation is currently in progress against this resource. Please try again.",
            &path,
        ),
        Some(Kind::SlowDown) => s3_error(
            "503 Slow Down",
            "SlowDown",
            "Please reduce your request rate.",
            &path,
        ),
        Some(Kind::InternalError) => {
            forward(upstream, &req, &[]).await?;
            s3_error(
                "500 Internal Server Error",
                "InternalError",
                "We encountered an internal error. Please try again.",
                &path,
            )
        }
        Some(Kind::Reset) => {
            client.set_zero_linger().ok()?;
            return None;
        }
        Some(Kind::DropResponse) => {
            forward(upstream, &req, &[]).await?;
            return None;
        }
    };
    client.write_all(&answer).await.ok()?;
    client.shutdown().await.ok()
}
