//! The lease-protocol conformance suite (docs/PROTOCOL.md §4). Every test runs against
//! every backend: in-memory, the local filesystem, and — when `MDF_TEST_S3_ENDPOINT`
//! names an S3-compatible server (`.ci/run` starts one) — real S3. All on a mock clock.
mod common;
use mdf::clock::{Entropy, MockClock};
use mdf::protocol::io::Retry;
use mdf::protocol::lease::{Claim, CommitOutcome, Held, LeaseCtx, LeaseError};
use mdf::protocol::records::{CommitRecord, TaskStatus, VERSION};
use mdf::store::fault::{Fault, Op, Wrapper};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use std::sync::Arc;
use std::time::Duration;

const TTL: u64 = 10_000;

struct Backend {
    name: &'static str,
    store: Arc<dyn ObjectStore>,
    faults: Wrapper,
    root: Path,
    _dir: Option<tempfile::TempDir>,
}

fn backends() -> Vec<Backend> {
    let mut v = Vec::new();
    let faults = Wrapper::new(vec![], 1);
    v.push(Backend {
        name: "memory",
        store: faults.wrap(Arc::new(object_store::memory::InMemory::new())),
        faults,
        root: Path::from("job"),
        _dir: None,
    });
    let dir = tempfile::tempdir().unwrap();
    let faults = Wrapper::new(vec![], 2);
    v.push(Backend {
        name: "local",
        store: faults.wrap(Arc::new(
            object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap(),
        )),
        faults,
        root: Path::from("job"),
        _dir: Some(dir),
    });
    if let Some((_, _, s3)) = common::test_s3() {
        let faults = Wrapper::new(vec![], 3);
        let unique = format!("conformance/{}", Entropy::from_os().hex_id(8));
        v.push(Backend {
            name: "s3",
            store: faults.wrap(Arc::new(s3)),
            faults,
            root: Path::from(unique),
            _dir: None,
        });
    }
    v
}

fn sub(root: &Path, rel: &str) -> Path {
    Path::from(format!("{root}/{rel}"))
}

fn retry() -> Retry {
    let mut r = Retry::new(Entropy::seeded(9));
    r.base = Duration::from_millis(1);
    r
}

fn ctx<'a>(
    b: &'a Backend,
    clock: &'a MockClock,
    entropy: &'a Entropy,
    worker: &'a str,
    retry: &'a Retry,
) -> LeaseCtx<'a> {
    LeaseCtx {
        store: b.store.as_ref(),
        clock,
        entropy,
        worker,
        ttl_ms: TTL,
        retry,
        observed: Box::leak(Box::default()),
    }
}

fn acquired(c: Claim) -> Held {
    match c {
        Claim::Acquired(h) => h,
        Claim::Busy { .. } => panic!("expected to acquire the lease"),
    }
}

fn commit_record(h: &Held, e: &Entropy) -> CommitRecord {
    CommitRecord {
        version: VERSION,
        job_id: "j".into(),
        phase: "p00".into(),
        task_id: "t".into(),
        status: TaskStatus::Committed,
        attempt: h.attempt.clone(),
        worker: "w".into(),
        epoch: h.epoch,
        write_id: e.hex_id(8),
        error: None,
        outputs: vec![],
        rejects: vec![],
        stats: Default::default(),
        requests: Default::default(),
        started_ms: 0,
        finished_ms: 0,
        reused_from: None,
        shuffle: None,
        changed: None,
        speculative: false,
        tables: vec![],
    }
}

#[tokio::test]
async fn racing_claims_exactly_one_wins() {
    for b in backends() {
        for fresh in [true, false] {
            let clock = MockClock::new(1_000_000);
            let dir = b.root.clone().join(format!("race-{fresh}"));
            let r = retry();
            let entropies: Vec<Entropy> = (0..12).map(Entropy::seeded).collect();
            let names: Vec<String> = (0..12).map(|i| format!("w{i}")).collect();
            let claims = futures::future::join_all((0..12).map(|i| {
                let c = ctx(&b, &clock, &entropies[i], &names[i], &r);
                let dir = dir.clone();
                async move { c.claim(&dir, fresh).await.unwrap() }
            }))
            .await;
            let winners = claims
                .iter()
                .filter(|c| matches!(c, Claim::Acquired(_)))
                .count();
            assert_eq!(
                winners, 1,
                "{}: fresh={fresh}: exactly one claim wins",
                b.name
            );
        }
    }
}

#[tokio::test]
async fn expiry_and_takeover_with_next_epoch() {
    for b in backends() {
        let clock = MockClock::new(1_000_000);
        let (ea, eb, r) = (Entropy::seeded(1), Entropy::seeded(2), retry());
        let a = ctx(&b, &clock, &ea, "a", &r);
        let bb = ctx(&b, &clock, &eb, "b", &r);
        let dir = b.root.clone().join("expiry");
        let ha = acquired(a.claim(&dir, true).await.unwrap());
        assert_eq!(
            (ha.seq, ha.epoch, ha.expires_at_ms),
            (0, 0, 1_000_000 + TTL)
        );
        assert_eq!(
            bb.claim(&dir, true).await.unwrap(),
            Claim::Busy {
                until_ms: 1_000_000 + TTL
            },
            "{}: a live lease is busy",
            b.name
        );
        // The claimant reads the lease: expiry counts from this first observation.
        assert_eq!(
            bb.claim(&dir, false).await.unwrap(),
            Claim::Busy {
                until_ms: 1_000_000 + TTL
            },
            "{}: busy for one TTL of observation",
            b.name
        );
        clock.advance_ms(TTL - 1);
        assert!(
            matches!(bb.claim(&dir, false).await.unwrap(), Claim::Busy { .. }),
            "{}: not yet expired",
            b.name
        );
        clock.advance_ms(1);
        let hb = acquired(bb.claim(&dir, false).await.unwrap());
        assert_eq!(
            (hb.seq, hb.epoch, hb.lost),
            (1, 1, 1),
            "{}: takeover is epoch+1, counted as lost",
            b.name
        );
        assert_ne!(hb.attempt, ha.attempt);
    }
}

#[tokio::test]
async fn renewal_extends_the_lease() {
    for b in backends() {
        let clock = MockClock::new(5_000);
        let (ea, eb, r) = (Entropy::seeded(3), Entropy::seeded(4), retry());
        let a = ctx(&b, &clock, &ea, "a", &r);
        let bb = ctx(&b, &clock, &eb, "b", &r);
        let dir = b.root.clone().join("renew");
        let mut ha = acquired(a.claim(&dir, true).await.unwrap());
        clock.advance_ms(TTL / 2);
        a.renew(&mut ha).await.unwrap();
        assert_eq!(ha.seq, 1);
        clock.advance_ms(TTL / 2 + 1);
        assert!(
            matches!(bb.claim(&dir, false).await.unwrap(), Claim::Busy { .. }),
            "{}: renewed lease holds",
            b.name
        );
    }
}

#[tokio::test]
async fn fenced_worker_cannot_renew_or_commit() {
    for b in backends() {
        let clock = MockClock::new(0);
        let (ea, eb, r) = (Entropy::seeded(5), Entropy::seeded(6), retry());
        let a = ctx(&b, &clock, &ea, "a", &r);
        let bb = ctx(&b, &clock, &eb, "b", &r);
        let dir = b.root.clone().join("fence");
        let commit = sub(&b.root, "commits/fence.json");
        let mut ha = acquired(a.claim(&dir, true).await.unwrap());
        assert!(matches!(
            bb.claim(&dir, false).await.unwrap(),
            Claim::Busy { .. }
        ));
        clock.advance_ms(TTL + 1);
        let mut hb = acquired(bb.claim(&dir, false).await.unwrap());
        // The zombie's heartbeat finds the takeover.
        assert!(
            matches!(
                a.renew(&mut ha.clone()).await,
                Err(LeaseError::Fenced { .. })
            ),
            "{}",
            b.name
        );
        // Its commit renews first (its lease is stale) and is fenced: nothing written.
        let rec_a = commit_record(&ha, &ea);
        assert!(
            matches!(
                a.commit(&mut ha, &commit, &rec_a).await,
                Err(LeaseError::Fenced { .. })
            ),
            "{}",
            b.name
        );
        assert!(
            b.store.head(&commit).await.is_err(),
            "{}: a fenced attempt wrote no commit",
            b.name
        );
        let rec_b = commit_record(&hb, &eb);
        assert!(matches!(
            bb.commit(&mut hb, &commit, &rec_b).await.unwrap(),
            CommitOutcome::Committed
        ));
    }
}

#[tokio::test]
async fn zombie_with_a_slow_clock_loses_the_commit_race() {
    for b in backends() {
        let (clock_a, clock_b) = (MockClock::new(0), MockClock::new(0));
        let (ea, eb, r) = (Entropy::seeded(7), Entropy::seeded(8), retry());
        let a = ctx(&b, &clock_a, &ea, "a", &r);
        let bb = ctx(&b, &clock_b, &eb, "b", &r);
        let dir = b.root.clone().join("zombie");
        let commit = sub(&b.root, "commits/zombie.json");
        let mut ha = acquired(a.claim(&dir, true).await.unwrap());
        assert!(matches!(
            bb.claim(&dir, false).await.unwrap(),
            Claim::Busy { .. }
        ));
        clock_b.advance_ms(TTL + 1); // a's clock is stuck: it believes its lease is fresh
        let mut hb = acquired(bb.claim(&dir, false).await.unwrap());
        let rec_b = commit_record(&hb, &eb);
        assert!(matches!(
            bb.commit(&mut hb, &commit, &rec_b).await.unwrap(),
            CommitOutcome::Committed
        ));
        let rec_a = commit_record(&ha, &ea);
        match a.commit(&mut ha, &commit, &rec_a).await.unwrap() {
            CommitOutcome::AlreadyCommitted(winner) => {
                assert_eq!(winner.attempt, hb.attempt, "{}", b.name)
            }
            CommitOutcome::Committed => panic!("{}: two commits for one task", b.name),
        }
    }
}

#[tokio::test]
async fn retried_create_recognises_its_own_earlier_write() {
    for b in backends() {
        let clock = MockClock::new(0);
        let (ea, r) = (Entropy::seeded(10), retry());
        let a = ctx(&b, &clock, &ea, "a", &r);
        let dir = b.root.clone().join("retry");
        b.faults
            .fail_next(Op::Put, Fault::ErrorAfter, "retry/0000000000");
        let mut h = acquired(a.claim(&dir, true).await.unwrap());
        b.faults
            .fail_next(Op::Put, Fault::ErrorAfter, "retry/0000000001");
        a.renew(&mut h).await.unwrap();
        let commit = sub(&b.root, "commits/retry.json");
        b.faults
            .fail_next(Op::Put, Fault::ErrorAfter, "commits/retry");
        let rec = commit_record(&h, &ea);
        assert!(
            matches!(
                a.commit(&mut h, &commit, &rec).await.unwrap(),
                CommitOutcome::Committed
            ),
            "{}",
            b.name
        );
        assert_eq!(b.faults.fired(), 3, "{}: the faults fired", b.name);
    }
}

#[tokio::test]
async fn transient_errors_before_the_write_are_retried() {
    for b in backends() {
        let clock = MockClock::new(0);
        let (ea, r) = (Entropy::seeded(11), retry());
        let a = ctx(&b, &clock, &ea, "a", &r);
        let dir = b.root.clone().join("transient");
        b.faults
            .fail_next(Op::Put, Fault::ErrorBefore, "transient/");
        b.faults.fail_next(Op::Put, Fault::SlowDown, "transient/");
        b.faults.fail_next(Op::Put, Fault::Conflict, "transient/");
        acquired(a.claim(&dir, true).await.unwrap());
    }
}

#[tokio::test]
async fn double_commit_is_a_no_op() {
    for b in backends() {
        let clock = MockClock::new(0);
        let (ea, eb, r) = (Entropy::seeded(12), Entropy::seeded(13), retry());
        let a = ctx(&b, &clock, &ea, "a", &r);
        let dir = b.root.clone().join("double");
        let commit = sub(&b.root, "commits/double.json");
        let mut h = acquired(a.claim(&dir, true).await.unwrap());
        let rec = commit_record(&h, &ea);
        assert!(matches!(
            a.commit(&mut h, &commit, &rec).await.unwrap(),
            CommitOutcome::Committed
        ));
        let before = b.store.get(&commit).await.unwrap().bytes().await.unwrap();
        // The same write again (a retry) is still ours; a different record loses.
        assert!(matches!(
            a.commit(&mut h, &commit, &rec).await.unwrap(),
            CommitOutcome::Committed
        ));
        let other = commit_record(&h, &eb);
        assert!(matches!(
            a.commit(&mut h, &commit, &other).await.unwrap(),
            CommitOutcome::AlreadyCommitted(_)
        ));
        let after = b.store.get(&commit).await.unwrap().bytes().await.unwrap();
        assert_eq!(before, after, "{}: a commit is never overwritten", b.name);
    }
}

#[tokio::test]
async fn release_hands_over_at_once_and_carries_failures() {
    for b in backends() {
        let clock = MockClock::new(0);
        let (ea, eb, r) = (Entropy::seeded(14), Entropy::seeded(15), retry());
        let a = ctx(&b, &clock, &ea, "a", &r);
        let bb = ctx(&b, &clock, &eb, "b", &r);
        let dir = b.root.clone().join("release");
        let h = acquired(a.claim(&dir, true).await.unwrap());
        a.release(&h, Some(("boom".into(), 1))).await.unwrap();
        // A worker that never saw the lease tries seq 0 and backs off without reading.
        assert_eq!(
            bb.claim(&dir, true).await.unwrap(),
            Claim::Busy { until_ms: TTL }
        );
        let hb = acquired(bb.claim(&dir, false).await.unwrap());
        assert_eq!(
            (hb.seq, hb.epoch, hb.failures, hb.lost),
            (2, 1, 1, 0),
            "{}",
            b.name
        );
        assert_eq!(hb.last_error.as_deref(), Some("boom"));
        // A released-then-reclaimed lease is not counted as lost; a late release by
        // the old holder is fenced.
        assert!(
            matches!(a.release(&h, None).await, Err(LeaseError::Fenced { .. })),
            "{}",
            b.name
        );
    }
}

#[tokio::test]
async fn a_renewal_that_landed_after_all_retries_failed_is_still_ours() {
    for b in backends() {
        let clock = MockClock::new(0);
        let (ea, r) = (Entropy::seeded(16), retry());
        let mut once = retry();
        once.attempts = 1;
        let a = ctx(&b, &clock, &ea, "a", &r);
        let a_once = ctx(&b, &clock, &ea, "a", &once);
        let dir = b.root.clone().join("landed");
        let mut h = acquired(a.claim(&dir, true).await.unwrap());
        // The renewal lands but reports an error, and there is no retry left.
        b.faults
            .fail_next(Op::Put, Fault::ErrorAfter, "landed/0000000001");
        assert!(a_once.renew(&mut h.clone()).await.is_err());
        // The next heartbeat finds seq 1 written by its own attempt and carries on.
        a.renew(&mut h).await.unwrap();
        assert_eq!(h.seq, 2, "{}", b.name);
    }
}

/// Issue 22, item 8: expiry never compares one machine's clock with a time another
/// wrote. A claimant whose clock runs minutes ahead of the holder's used to take a
/// live lease over at once (and a zombie-free holder lost it, counted as lost, until
/// the task failed); one whose clock runs minutes behind waited minutes past a dead
/// holder's expiry. Now a lease is expired when the claimant has itself seen it
/// unchanged for the TTL.
#[tokio::test]
async fn clock_skew_neither_steals_a_live_lease_nor_delays_a_dead_one() {
    const SKEW: u64 = 5 * 60 * 1000;
    for b in backends() {
        let r = retry();
        // b's clock is five minutes ahead of a's.
        let (clock_a, clock_b) = (MockClock::new(10 * SKEW), MockClock::new(11 * SKEW));
        let (ea, eb) = (Entropy::seeded(20), Entropy::seeded(21));
        let a = ctx(&b, &clock_a, &ea, "a", &r);
        let bb = ctx(&b, &clock_b, &eb, "b", &r);
        let dir = b.root.clone().join("skew-ahead");
        let mut ha = acquired(a.claim(&dir, true).await.unwrap());
        for _ in 0..6 {
            assert!(
                matches!(bb.claim(&dir, false).await.unwrap(), Claim::Busy { .. }),
                "{}: a live lease is never taken over, whatever b's clock says",
                b.name
            );
            // Both clocks advance at the same rate; a heartbeats every TTL/2.
            clock_a.advance_ms(TTL / 2);
            clock_b.advance_ms(TTL / 2);
            a.renew(&mut ha).await.unwrap();
        }
        // a dies: b takes over one TTL after it last saw a change.
        assert!(matches!(
            bb.claim(&dir, false).await.unwrap(),
            Claim::Busy { .. }
        ));
        clock_b.advance_ms(TTL);
        let hb = acquired(bb.claim(&dir, false).await.unwrap());
        assert_eq!(hb.lost, 1, "{}", b.name);

        // b's clock is five minutes behind a's: a dead lease is still taken over after
        // one TTL of b's observation, not five minutes later.
        let (clock_a, clock_b) = (MockClock::new(11 * SKEW), MockClock::new(10 * SKEW));
        let a = ctx(&b, &clock_a, &ea, "a", &r);
        let bb = ctx(&b, &clock_b, &eb, "b", &r);
        let dir = b.root.clone().join("skew-behind");
        acquired(a.claim(&dir, true).await.unwrap());
        assert!(matches!(
            bb.claim(&dir, false).await.unwrap(),
            Claim::Busy { .. }
        ));
        clock_b.advance_ms(TTL);
        acquired(bb.claim(&dir, false).await.unwrap());
    }
}

/// A backup attempt (its own lease directory) commits first; its fence makes the
/// original's next renewal fail, and the original's commit loses the create. Every
/// record of an attempt carries its claim time (`since_ms`) on the holder's clock.
#[tokio::test]
async fn a_backup_commits_first_and_fences_the_original() {
    for b in backends() {
        let clock = MockClock::new(7_000);
        let (ea, eb, r) = (Entropy::seeded(21), Entropy::seeded(22), retry());
        let a = ctx(&b, &clock, &ea, "a", &r);
        let bb = ctx(&b, &clock, &eb, "b", &r);
        let dir = b.root.clone().join("leases/straggler");
        let backup_dir = b.root.clone().join("backups/straggler");
        let commit = sub(&b.root, "commits/straggler.json");
        let mut ha = acquired(a.claim(&dir, true).await.unwrap());
        assert_eq!(ha.since_ms, 7_000);
        clock.advance_ms(TTL / 2);
        a.renew(&mut ha).await.unwrap();
        let top = bb.latest(&dir).await.unwrap().unwrap();
        assert_eq!(
            (top.since_ms, top.written_ms),
            (Some(7_000), 7_000 + TTL / 2),
            "{}",
            b.name
        );
        // One backup per task: a second claim of the backup lease loses.
        let mut hb = acquired(bb.claim(&backup_dir, true).await.unwrap());
        assert!(matches!(
            a.claim(&backup_dir, true).await.unwrap(),
            Claim::Busy { .. }
        ));
        let rec_b = commit_record(&hb, &eb);
        assert!(matches!(
            bb.commit(&mut hb, &commit, &rec_b).await.unwrap(),
            CommitOutcome::Committed
        ));
        assert!(
            bb.fence(&dir, &hb.attempt, "committed by backup attempt x")
                .await
                .unwrap()
        );
        let top = bb.latest(&dir).await.unwrap().unwrap();
        assert_eq!(
            top.last_error.as_deref(),
            Some("committed by backup attempt x")
        );
        // Fencing an already released lease is a no-op that reports success.
        assert!(bb.fence(&dir, &hb.attempt, "again").await.unwrap());
        assert_eq!(
            bb.latest(&dir).await.unwrap().unwrap().seq,
            top.seq,
            "{}",
            b.name
        );
        assert!(
            matches!(
                a.renew(&mut ha.clone()).await,
                Err(LeaseError::Fenced { .. })
            ),
            "{}",
            b.name
        );
        // An original that reaches its commit anyway finds the backup's.
        let rec_a = commit_record(&ha, &ea);
        match a.commit(&mut ha, &commit, &rec_a).await {
            Ok(CommitOutcome::AlreadyCommitted(c)) => assert_eq!(c.attempt, hb.attempt),
            Err(LeaseError::Fenced { .. }) => {}
            other => panic!("{}: the original committed too: {other:?}", b.name),
        }
    }
}
