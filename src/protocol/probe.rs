//! The store must refuse a second create of a key (`PUT` with `If-None-Match: *`):
//! leases and the exactly-once commit rest on it (docs/PROTOCOL.md §4). Some
//! S3-compatible servers (older MinIO and Ceph releases) ignore the header and
//! overwrite, which would let two commits of one task both "win". Submit and every
//! worker probe the job's store before writing anything else: create one object
//! twice and require the second create to be refused. Once per process and store.
//! Local and in-memory stores are object_store's own, atomic by construction, and
//! are not probed. The probe never reads or writes anything but its own object.
use super::io::{Created, ProtoError, Retry, create_json};
use crate::clock::Entropy;
use crate::store::Uri;
use object_store::{ObjectStore, ObjectStoreExt};
use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// Stores (as [`Registry::describe`] names them) that passed the probe.
fn passed() -> &'static Mutex<HashSet<String>> {
    static P: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    P.get_or_init(Default::default)
}

/// Checks, once per process and store, that `store` (the store of the job at `job`,
/// named `name` as [`crate::store::Registry::describe`] names it) refuses a second
/// create; the error names the store and the requirement.
pub async fn require_create_only(
    store: &dyn ObjectStore,
    job: &Uri,
    name: &str,
    entropy: &Entropy,
    retry: &Retry,
) -> Result<(), ProtoError> {
    if !job.store.starts_with("s3://") || passed().lock().expect("probe cache").contains(name) {
        return Ok(());
    }
    let path = job.child(&format!("probe/{}.json", entropy.hex_id(8))).path;
    probe(store, &path, name, entropy, retry).await?;
    passed()
        .lock()
        .expect("probe cache")
        .insert(name.to_string());
    Ok(())
}

/// Creates `path` twice; the second create must be refused. The object is removed
/// afterwards (best effort: a leftover probe object is harmless).
pub async fn probe(
    store: &dyn ObjectStore,
    path: &object_store::path::Path,
    name: &str,
    entropy: &Entropy,
    retry: &Retry,
) -> Result<(), ProtoError> {
    let create = |id: String| async move {
        let rec = serde_json::json!({ "probe": true, "write_id": id });
        create_json(store, path, &rec, &id, retry).await
    };
    let first = create(entropy.hex_id(8)).await?;
    let second = create(entropy.hex_id(8)).await?;
    let _ = store.delete(path).await;
    match (first, second) {
        (Created::Mine, Created::Theirs(_)) => Ok(()),
        _ => Err(ProtoError::NoConditionalCreate {
            store: name.to_string(),
            path: path.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fault::{Fault, Op, Wrapper};
    use object_store::memory::InMemory;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_store_that_overwrites_on_create_is_refused() {
        let entropy = Entropy::seeded(7);
        let retry = Retry::new(entropy.clone());
        let faults = Wrapper::new(vec![], 1);
        let store = faults.wrap(Arc::new(InMemory::new()));
        let p = object_store::path::Path::from("job/probe/a.json");
        probe(store.as_ref(), &p, "memory://t", &entropy, &retry)
            .await
            .unwrap();
        faults.fail_next(Op::Put, Fault::IgnoreCreate, "probe/");
        faults.fail_next(Op::Put, Fault::IgnoreCreate, "probe/");
        let e = probe(store.as_ref(), &p, "s3://b at http://x", &entropy, &retry)
            .await
            .unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("s3://b at http://x"), "{msg}");
        assert!(msg.contains("If-None-Match: *"), "{msg}");
        assert_eq!(faults.fired(), 2);
    }
}
