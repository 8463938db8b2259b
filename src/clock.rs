//! Injectable time and randomness. The lease protocol reads time only through [`Clock`]
//! and draws ids only through [`Entropy`], so its tests run on a mock clock with seeded
//! ids, deterministically and without sleeping. Nothing here may touch storage.
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ms(&self) -> u64;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// Tokio's clock, from `base_ms` at creation: virtual time on a runtime whose time is
/// paused (the fleet simulator, docs/SCALE.md), so leases, heartbeats and polls of
/// thousands of simulated workers expire and fire as on a real fleet, in minutes.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    start: tokio::time::Instant,
    base_ms: u64,
}

impl TokioClock {
    /// Must be created inside the runtime whose clock it reads.
    pub fn new(base_ms: u64) -> Self {
        TokioClock {
            start: tokio::time::Instant::now(),
            base_ms,
        }
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        self.base_ms + self.start.elapsed().as_millis() as u64
    }
}

/// A clock that only moves when told to.
#[derive(Debug, Default, Clone)]
pub struct MockClock(Arc<AtomicU64>);

impl MockClock {
    pub fn new(start_ms: u64) -> Self {
        Self(Arc::new(AtomicU64::new(start_ms)))
    }
    pub fn advance_ms(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
    pub fn set_ms(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for MockClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Source of random ids (attempt ids, write ids, worker ids) and retry jitter.
#[derive(Debug, Clone)]
pub struct Entropy(Arc<Mutex<StdRng>>);

impl Entropy {
    /// Seeded from the operating system.
    pub fn from_os() -> Self {
        Self(Arc::new(Mutex::new(StdRng::from_os_rng())))
    }
    /// Deterministic, for tests.
    pub fn seeded(seed: u64) -> Self {
        Self(Arc::new(Mutex::new(StdRng::seed_from_u64(seed))))
    }
    pub fn next_u64(&self) -> u64 {
        self.0.lock().expect("entropy lock").random()
    }
    /// `n` random bytes as lowercase hex (2n characters).
    pub fn hex_id(&self, bytes: usize) -> String {
        let mut rng = self.0.lock().expect("entropy lock");
        (0..bytes)
            .map(|_| format!("{:02x}", rng.random::<u8>()))
            .collect()
    }
    /// A uniformly random value in `0..n` (n > 0).
    pub fn below(&self, n: u64) -> u64 {
        self.0
            .lock()
            .expect("entropy lock")
            .random_range(0..n.max(1))
    }
}

/// The civil date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// RFC 3339 UTC with milliseconds of a Unix time in milliseconds
/// (`2026-12-05T03:04:05.678Z`).
pub fn rfc3339_millis(ms: u64) -> String {
    let secs = ms / 1000;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}
