//! The EC2 instance metadata service, IMDSv2 only (a session token first, as launch
//! templates that require tokens demand): the instance's id and region, the tags it
//! was launched with, and the two signals a spot worker watches for — the spot
//! interruption notice (two minutes before the instance is reclaimed) and the rebalance
//! recommendation (an earlier hint that its capacity is at elevated risk).
//!
//! The endpoint is `AWS_EC2_METADATA_SERVICE_ENDPOINT` (the AWS SDKs' variable), else
//! `http://169.254.169.254`; tests point it at a local server.
use super::aws::parse_utc;
use crate::clock::Clock;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Token lifetime asked for (the maximum, six hours); renewed a minute early.
const TOKEN_TTL_SECS: u64 = 21_600;

pub struct Imds {
    base: String,
    http: reqwest::Client,
    token: tokio::sync::Mutex<Option<(String, Instant)>>,
}

impl Imds {
    pub fn from_env() -> Result<Imds, String> {
        let base = std::env::var("AWS_EC2_METADATA_SERVICE_ENDPOINT")
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "http://169.254.169.254".into());
        Imds::new(&base)
    }

    pub fn new(base: &str) -> Result<Imds, String> {
        // The metadata service answers in milliseconds or not at all (off EC2).
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        Ok(Imds {
            base: base.trim_end_matches('/').to_string(),
            http,
            token: Default::default(),
        })
    }

    async fn token(&self, renew: bool) -> Result<String, String> {
        let mut t = self.token.lock().await;
        if !renew
            && let Some((tok, at)) = t.as_ref()
            && at.elapsed() < Duration::from_secs(TOKEN_TTL_SECS - 60)
        {
            return Ok(tok.clone());
        }
        let url = format!("{}/latest/api/token", self.base);
        let r = self
            .http
            .put(&url)
            .header(
                "x-aws-ec2-metadata-token-ttl-seconds",
                TOKEN_TTL_SECS.to_string(),
            )
            .send()
            .await
            .map_err(|e| format!("instance metadata {url}: {e}"))?;
        if !r.status().is_success() {
            return Err(format!("instance metadata {url}: {}", r.status()));
        }
        let tok = r
            .text()
            .await
            .map_err(|e| format!("instance metadata {url}: {e}"))?;
        *t = Some((tok.clone(), Instant::now()));
        Ok(tok)
    }

    /// The text at `path` (`/latest/meta-data/...`); `None` when it does not exist
    /// (404: no notice, no such tag).
    pub async fn get(&self, path: &str) -> Result<Option<String>, String> {
        let url = format!("{}{path}", self.base);
        for renew in [false, true] {
            let tok = self.token(renew).await?;
            let r = self
                .http
                .get(&url)
                .header("x-aws-ec2-metadata-token", tok)
                .send()
                .await
                .map_err(|e| format!("instance metadata {url}: {e}"))?;
            match r.status().as_u16() {
                200 => {
                    return r
                        .text()
                        .await
                        .map(Some)
                        .map_err(|e| format!("instance metadata {url}: {e}"));
                }
                404 => return Ok(None),
                // An expired or revoked token: one new token, one more try.
                401 if !renew => continue,
                s => return Err(format!("instance metadata {url}: HTTP {s}")),
            }
        }
        unreachable!("the loop returns")
    }

    async fn required(&self, path: &str) -> Result<String, String> {
        self.get(path)
            .await?
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("instance metadata {}{path}: not found", self.base))
    }

    pub async fn instance_id(&self) -> Result<String, String> {
        self.required("/latest/meta-data/instance-id").await
    }

    pub async fn region(&self) -> Result<String, String> {
        self.required("/latest/meta-data/placement/region").await
    }

    /// The current interruption signal, if any: a spot notice wins over a rebalance
    /// recommendation.
    pub async fn notice(&self) -> Result<Option<Notice>, String> {
        if let Some(body) = self.get("/latest/meta-data/spot/instance-action").await? {
            return Ok(Some(Notice::parse_spot(&body)));
        }
        Ok(self
            .get("/latest/meta-data/events/recommendations/rebalance")
            .await?
            .map(|_| Notice::Rebalance))
    }
}

/// An interruption signal from the metadata service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// The spot instance is reclaimed (`action`: terminate, stop or hibernate) at
    /// `at_ms`, about two minutes after the notice; `None` when the time did not parse.
    Spot { action: String, at_ms: Option<u64> },
    /// The instance's capacity is at elevated risk: move the work elsewhere.
    Rebalance,
}

impl Notice {
    /// `{"action": "terminate", "time": "2026-12-03T16:00:00Z"}`.
    pub fn parse_spot(body: &str) -> Notice {
        #[derive(serde::Deserialize)]
        struct Action {
            action: Option<String>,
            time: Option<String>,
        }
        let a: Option<Action> = serde_json::from_str(body).ok();
        Notice::Spot {
            action: a
                .as_ref()
                .and_then(|a| a.action.clone())
                .unwrap_or_else(|| "terminate".into()),
            at_ms: a.and_then(|a| a.time).and_then(|t| parse_utc(&t)),
        }
    }
}

/// How a worker answers interruption signals.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// How often the metadata service is asked.
    pub every: Duration,
    /// A running task is handed back this long before the instance is reclaimed
    /// (time for the release and for aborting uploads), unless it finished first.
    pub margin: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            every: Duration::from_secs(2),
            // Up to `every` passes before the notice is seen, and cancelling is
            // cooperative (between batches); releasing the lease is one request.
            margin: Duration::from_secs(30),
        }
    }
}

/// The worker's stop flags the watcher sets (see [`crate::worker::WorkerOptions`]).
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub drain: Arc<AtomicBool>,
    pub drain_after_task: Arc<AtomicBool>,
    pub shutdown: Arc<AtomicBool>,
}

/// The notice window AWS gives: the instance is reclaimed two minutes after it.
const WINDOW_MS: u64 = 120_000;

/// The moment (ms) a running task must be handed back for a notice seen at `now_ms`:
/// `margin` before the reclaim time, never later than the two-minute window allows
/// (a notice time that is missing, unparsable or far off is not trusted).
pub fn deadline_ms(notice: &Notice, now_ms: u64, margin: Duration) -> Option<u64> {
    let Notice::Spot { at_ms, .. } = notice else {
        return None;
    };
    let margin = margin.as_millis() as u64;
    let latest = now_ms + WINDOW_MS.saturating_sub(margin);
    Some(
        at_ms
            .map(|t| t.saturating_sub(margin))
            .unwrap_or(latest)
            .clamp(now_ms, latest),
    )
}

/// What the watcher saw, for the worker command to act on when the worker returns.
#[derive(Debug, Default)]
pub struct Seen {
    pub notice: Mutex<Option<Notice>>,
}

impl Seen {
    pub fn get(&self) -> Option<Notice> {
        self.notice.lock().expect("notice lock").clone()
    }
}

/// Watches the metadata service until the process ends: on a spot notice, sets `drain`
/// (no new tasks) at once and `shutdown` (hand the running task back) at the
/// [`deadline_ms`]; on a rebalance recommendation, sets `drain_after_task` only. An
/// unreachable service is logged once and asked again.
pub fn watch(
    imds: Arc<Imds>,
    policy: Policy,
    clock: Arc<dyn Clock>,
    flags: Flags,
    seen: Arc<Seen>,
) -> tokio::task::JoinHandle<()> {
    let Flags {
        drain,
        drain_after_task,
        shutdown,
    } = flags;
    tokio::spawn(async move {
        let mut deadline: Option<u64> = None;
        let mut failing = false;
        loop {
            if let Some(d) = deadline {
                if clock.now_ms() >= d {
                    eprintln!("mdf: spot reclaim is near: handing the running task back");
                    shutdown.store(true, Ordering::SeqCst);
                    return;
                }
            } else {
                match imds.notice().await {
                    Ok(Some(n)) => {
                        failing = false;
                        let prev = seen.get();
                        if prev.as_ref() != Some(&n) {
                            *seen.notice.lock().expect("notice lock") = Some(n.clone());
                            match &n {
                                Notice::Spot { action, .. } => {
                                    drain.store(true, Ordering::SeqCst);
                                    let d = deadline_ms(&n, clock.now_ms(), policy.margin)
                                        .expect("a spot notice has a deadline");
                                    eprintln!(
                                        "mdf: spot interruption notice ({action}): no new tasks; a running task finishes or is handed back within {} s",
                                        d.saturating_sub(clock.now_ms()) / 1000
                                    );
                                    deadline = Some(d);
                                    continue;
                                }
                                Notice::Rebalance => {
                                    drain_after_task.store(true, Ordering::SeqCst);
                                    eprintln!(
                                        "mdf: rebalance recommendation: no new task once this worker has run one; the running task finishes"
                                    )
                                }
                            }
                        }
                    }
                    Ok(None) => failing = false,
                    Err(e) => {
                        if !failing {
                            tracing::warn!(error = %e, "cannot read spot interruption notices; asking again");
                        }
                        failing = true;
                    }
                }
            }
            let step = match deadline {
                Some(d) => Duration::from_millis(d.saturating_sub(clock.now_ms()).clamp(1, 200)),
                None => policy.every,
            };
            tokio::time::sleep(step).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spot_notices_parse() {
        assert_eq!(
            Notice::parse_spot(r#"{"action": "terminate", "time": "2026-12-01T08:30:00Z"}"#),
            Notice::Spot {
                action: "terminate".into(),
                at_ms: Some(1_796_113_800_000)
            }
        );
        assert_eq!(
            Notice::parse_spot(r#"{"action": "stop", "time": "soon"}"#),
            Notice::Spot {
                action: "stop".into(),
                at_ms: None
            }
        );
        assert_eq!(
            Notice::parse_spot("garbage"),
            Notice::Spot {
                action: "terminate".into(),
                at_ms: None
            }
        );
    }

    /// A token the service no longer accepts (401) is renewed once and the request
    /// asked again; a 404 is "nothing there"; every request carries a token.
    #[tokio::test]
    async fn an_expired_token_is_renewed_once() {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let l2 = log.clone();
        std::thread::spawn(move || {
            let mut tokens = 0;
            for conn in listener.incoming() {
                let mut conn = conn.unwrap();
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                let mut token = String::new();
                loop {
                    let mut h = String::new();
                    r.read_line(&mut h).unwrap();
                    let h = h.trim_end().to_ascii_lowercase();
                    if h.is_empty() {
                        break;
                    }
                    if let Some(t) = h.strip_prefix("x-aws-ec2-metadata-token: ") {
                        token = t.to_string();
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                l2.lock().unwrap().push(format!("{path} {token}"));
                let (code, body) = if line.starts_with("PUT") {
                    tokens += 1;
                    (200, format!("t{tokens}"))
                } else if token == "t2" && path.ends_with("/instance-id") {
                    (200, "i-0abc".to_string())
                } else if token == "t2" {
                    (404, String::new())
                } else {
                    (401, String::new())
                };
                let _ = write!(
                    conn,
                    "HTTP/1.1 {code} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        let imds = Imds::new(&format!("http://127.0.0.1:{port}")).unwrap();
        assert_eq!(imds.instance_id().await.unwrap(), "i-0abc");
        assert_eq!(imds.notice().await.unwrap(), None);
        let log = log.lock().unwrap().clone();
        assert_eq!(
            log,
            [
                "/latest/api/token ",
                "/latest/meta-data/instance-id t1",
                "/latest/api/token ",
                "/latest/meta-data/instance-id t2",
                "/latest/meta-data/spot/instance-action t2",
                "/latest/meta-data/events/recommendations/rebalance t2",
            ]
        );
    }

    #[test]
    fn the_deadline_stays_inside_the_two_minute_window() {
        let m = Duration::from_secs(20);
        let now = 1_000_000;
        let spot = |at| Notice::Spot {
            action: "terminate".into(),
            at_ms: at,
        };
        // Reclaimed in 2 minutes: hand back 20 s before.
        assert_eq!(
            deadline_ms(&spot(Some(now + 120_000)), now, m),
            Some(now + 100_000)
        );
        // A time in the past or inside the margin: at once.
        assert_eq!(deadline_ms(&spot(Some(now - 5_000)), now, m), Some(now));
        assert_eq!(deadline_ms(&spot(Some(now + 10_000)), now, m), Some(now));
        // Unparsable or implausibly far: the window from now.
        assert_eq!(deadline_ms(&spot(None), now, m), Some(now + 100_000));
        assert_eq!(
            deadline_ms(&spot(Some(now + 3_600_000)), now, m),
            Some(now + 100_000)
        );
        assert_eq!(deadline_ms(&Notice::Rebalance, now, m), None);
    }
}
