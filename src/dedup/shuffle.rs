//! The dedup shuffle's store access (docs/DEDUP.md): the context a dedup task runs
//! in ([`ShuffleCtx`]), the commit records it reads (cached: they are create-only),
//! ranged reads of one section of every committed task's object, uploads of local
//! files (a map task's keys object, a reducer's result), and the spill directory.
//! Everything is located through commit records, never through listings of staged
//! files.
use super::error::DedupError;
use super::format::{self, parse_offsets};
use super::sort::{ExternalSort, Fixed};
use super::spill::KeySpill;
use crate::protocol::hash16;
use crate::protocol::io::{Retry, get_json};
use crate::protocol::job::LoadedJob;
use crate::protocol::records::{CommitRecord, OutputFile, PhaseKind, TaskStatus};
use crate::store::{Registry, Uri};
use bytes::Bytes;
use object_store::ObjectStoreExt;
use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use tokio::io::AsyncWriteExt;

/// Commit records read by dedup tasks, by (phase, task). Commit records are
/// create-only, so a cached copy never goes stale; a worker keeps one cache for its
/// whole life.
pub type CommitCache = std::sync::Mutex<HashMap<(String, String), Arc<CommitRecord>>>;

/// What a dedup task reads and writes through: the job, its stores and the worker's
/// caches. Borrowed from the worker for one task.
#[derive(Clone, Copy)]
pub struct ShuffleCtx<'a> {
    pub job: &'a LoadedJob,
    pub retry: &'a Retry,
    /// Stores counting into the task's request counters.
    pub reg: &'a Registry,
    /// The job's store.
    pub store: &'a Arc<dyn object_store::ObjectStore>,
    pub commits: &'a CommitCache,
    /// Task ids per phase, sorted.
    pub task_ids: &'a [Vec<String>],
}

impl ShuffleCtx<'_> {
    /// The sorted task ids of a phase.
    pub fn task_ids(&self, phase: usize) -> &[String] {
        self.task_ids.get(phase).map_or(&[], Vec::as_slice)
    }
}

/// Where map tasks and reducers spill: `MDF_SPILL_DIR`, else the system temp dir.
pub fn spill_dir() -> std::path::PathBuf {
    std::env::var_os("MDF_SPILL_DIR")
        .map(Into::into)
        .unwrap_or_else(std::env::temp_dir)
        .join("mdf-spill")
}

/// A committed task's record, read once per worker process.
pub async fn commit_of(
    sc: &ShuffleCtx<'_>,
    phase: &str,
    task: &str,
) -> Result<Arc<CommitRecord>, DedupError> {
    let key = (phase.to_string(), task.to_string());
    if let Some(r) = sc.commits.lock().expect("commit cache").get(&key) {
        return Ok(r.clone());
    }
    let rec: CommitRecord = get_json(
        sc.store.as_ref(),
        &sc.job.paths.commit(phase, task),
        sc.retry,
    )
    .await?
    .ok_or_else(|| DedupError::NotCommitted {
        phase: phase.to_string(),
        task: task.to_string(),
    })?;
    let rec = Arc::new(rec);
    sc.commits
        .lock()
        .expect("commit cache")
        .insert(key, rec.clone());
    Ok(rec)
}

async fn get_range(
    sc: &ShuffleCtx<'_>,
    uri: &str,
    range: std::ops::Range<u64>,
) -> Result<Bytes, DedupError> {
    let (store, u) = sc.reg.resolve(uri)?;
    if range.is_empty() {
        return Ok(Bytes::new());
    }
    sc.retry
        .run(|| {
            let (store, path, range) = (store.clone(), u.path.clone(), range.clone());
            async move { store.get_range(&path, range).await }
        })
        .await
        .map_err(|source| DedupError::Read {
            uri: uri.to_string(),
            source,
        })
}

/// Section `i` of a shuffle object: its offsets from the header, then its bytes.
pub async fn section(sc: &ShuffleCtx<'_>, file: &OutputFile, i: u64) -> Result<Bytes, DedupError> {
    let head = get_range(sc, &file.uri, format::offsets_range(i)).await?;
    let (a, z) = parse_offsets(&head).map_err(|e| DedupError::format(&file.uri, e))?;
    if z > file.bytes {
        return Err(DedupError::format(&file.uri, super::FormatError::PastEnd));
    }
    get_range(sc, &file.uri, a..z).await
}

/// Writes a map task's keys object into its attempt directory: from memory, or
/// merged from the runs its keys spilled, uploaded in parts when large.
pub async fn write_keys(
    reg: &Registry,
    dir: &Uri,
    keys: KeySpill,
) -> Result<OutputFile, DedupError> {
    let rows = keys.rows();
    if keys.runs() > 0 {
        tracing::info!(
            runs = keys.runs(),
            budget_bytes = keys.budget_bytes(),
            "map keys exceeded half of params.memory and were spilled to disk"
        );
    }
    let (len, reader) = tokio::task::spawn_blocking(move || keys.finish())
        .await
        .map_err(DedupError::joined)?
        .map_err(|e| DedupError::local("merging spilled keys", e))?;
    let uri = dir.child("keys.bin");
    upload_file(
        reg,
        &uri,
        Upload {
            what: "keys object",
            file: reader,
            len,
            rows,
        },
    )
    .await
}

/// The partition a reduce or propagate task owns, from its id.
pub fn partition_of_task(fp: &str, task: &str, partitions: u32) -> Option<u32> {
    (0..partitions).find(|r| hash16(&[fp, "partition", &r.to_string()]) == task)
}

/// The smallest part of a shuffle object's multipart upload.
const UPLOAD_PART: u64 = 8 << 20;
/// Parts of one upload in flight: with 8 MiB parts, at most 40 MiB buffered whatever
/// the object's size (object_store's default, 8 parts of 10 MiB, held 90 MiB while a
/// 100 MB keys or assignment object went up).
const UPLOAD_PARTS_IN_FLIGHT: usize = 4;

/// The part size for an object of `len` bytes: 8 MiB, or larger so that it takes at
/// most 9,000 parts (S3 allows 10,000: 8 MiB parts alone would stop at 78 GiB).
fn upload_part(len: u64) -> usize {
    UPLOAD_PART.max(len.div_ceil(9_000)) as usize
}

/// A local shuffle object (a file, spilled runs, bytes) of `len` bytes holding `rows`
/// entries, and what it is (for the short-write error).
pub struct Upload<R> {
    pub what: &'static str,
    pub file: R,
    pub len: u64,
    pub rows: u64,
}

/// Streams a local shuffle object to `uri`, hashing it: one PUT when small, a
/// multipart upload past the writer's buffer. Fewer bytes than `len` is an error (a
/// truncated local file). Returns the commit record's entry for it.
pub async fn upload_file(
    reg: &Registry,
    uri: &Uri,
    up: Upload<impl Read>,
) -> Result<OutputFile, DedupError> {
    let Upload {
        what,
        mut file,
        len,
        rows,
    } = up;
    let store = reg.open(uri)?;
    let mut w =
        object_store::buffered::BufWriter::with_capacity(store, uri.path.clone(), upload_part(len))
            .with_max_concurrency(UPLOAD_PARTS_IN_FLIGHT);
    let mut hasher = blake3::Hasher::new();
    let mut n = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    let write_err = |source| DedupError::Write {
        uri: uri.to_uri_string(),
        source,
    };
    loop {
        let k = file.read(&mut buf)?;
        if k == 0 {
            break;
        }
        hasher.update(&buf[..k]);
        n += k as u64;
        w.write_all(&buf[..k]).await.map_err(write_err)?;
    }
    w.shutdown().await.map_err(write_err)?;
    if n != len {
        return Err(DedupError::ShortWrite {
            what,
            written: n,
            len,
        });
    }
    Ok(OutputFile {
        uri: uri.to_uri_string(),
        rows,
        bytes: len,
        blake3: hasher.finalize().to_hex().to_string(),
    })
}

/// Reads section `i` of the shuffle object of every committed task of `phase`, in
/// task order, handing each task index, its object's URI and the bytes to `each`.
/// Returns the bytes read.
pub async fn read_sections(
    sc: &ShuffleCtx<'_>,
    phase: usize,
    i: u64,
    cancel: &AtomicBool,
    mut each: impl FnMut(usize, &str, Bytes) -> Result<(), DedupError>,
) -> Result<u64, DedupError> {
    use futures::StreamExt;
    let name = sc.job.manifest.phases[phase].name.clone();
    let ids = sc.task_ids(phase);
    // Up to 16 map tasks' commit records and sections in flight (on S3 each is a
    // round trip), handed to `each` in task order.
    let futures: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(ti, t)| fetch_section(sc, phase, &name, t, ti, i, cancel))
        .collect();
    let mut fetched = futures::stream::iter(futures).buffered(16);
    let mut bytes = 0;
    while let Some(r) = fetched.next().await {
        let Some((ti, uri, b)) = r? else { continue };
        bytes += b.len() as u64;
        each(ti, &uri, b)?;
    }
    Ok(bytes)
}

/// Section `i` of task `t` (index `ti`) of `phase`, with its object's URI; `None`
/// for a failed map task.
async fn fetch_section(
    sc: &ShuffleCtx<'_>,
    phase: usize,
    name: &str,
    t: &str,
    ti: usize,
    i: u64,
    cancel: &AtomicBool,
) -> Result<Option<(usize, String, Bytes)>, DedupError> {
    if cancel.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(DedupError::Cancelled);
    }
    let Some(file) = shuffle_file(sc, phase, name, t).await? else {
        return Ok(None);
    };
    let b = section(sc, &file, i).await?;
    Ok(Some((ti, file.uri.clone(), b)))
}

/// The shuffle object task `t` of `phase` (named `name`) committed, checked to belong
/// to this job; `None` for a failed map task (it has no records to keep).
pub async fn shuffle_file(
    sc: &ShuffleCtx<'_>,
    phase: usize,
    name: &str,
    t: &str,
) -> Result<Option<OutputFile>, DedupError> {
    let rec = commit_of(sc, name, t).await?;
    if rec.status != TaskStatus::Committed {
        if sc.job.manifest.phases[phase].kind == PhaseKind::Map {
            return Ok(None);
        }
        return Err(DedupError::upstream_failed(name, t, &rec));
    }
    let Some(file) = &rec.shuffle else {
        return Err(DedupError::Plan(format!(
            "task {name}/{t} committed no shuffle object"
        )));
    };
    sc.job
        .paths
        .check_file(
            &file.uri,
            rec.reused_from.as_deref(),
            sc.job.manifest.reused_from.as_deref(),
        )
        .map_err(DedupError::Stale)?;
    Ok(Some(file.clone()))
}

/// Section `r` of every committed task of `phase`, decoded as `T` (each entry passed
/// to `fix` with its task index) and pushed into an external sort of `memory` bytes.
/// Returns the bytes read and the sort.
pub async fn gather<T: Fixed>(
    sc: &ShuffleCtx<'_>,
    (phase, r): (usize, u32),
    memory: u64,
    cancel: &AtomicBool,
    fix: impl Fn(usize, &mut T),
) -> Result<(u64, ExternalSort<T>), DedupError> {
    let dir = spill_dir();
    let mut sorter = ExternalSort::<T>::new(memory, dir.clone());
    let input = read_sections(sc, phase, r as u64, cancel, |ti, uri, b| {
        for mut e in format::decode::<T>(&b).map_err(|e| DedupError::format(uri, e))? {
            fix(ti, &mut e);
            sorter
                .push(e)
                .map_err(|e| DedupError::local(format!("spilling to {}", dir.display()), e))?;
        }
        Ok(())
    })
    .await?;
    Ok((input, sorter))
}

/// The most bytes of an earlier job's keys object read at once, for a reduce with
/// `memory` bytes: an eighth of it, between 4 KiB and 8 MiB.
pub fn earlier_piece(memory: u64) -> u64 {
    (memory / 8).clamp(4 << 10, 8 << 20)
}

/// Section `i` of `file` in pieces of whole `entry`-byte entries, at most `piece`
/// bytes each (one ranged GET apiece), so a section of any size is read in bounded
/// memory. Returns the section's bytes.
pub async fn section_pieces(
    sc: &ShuffleCtx<'_>,
    file: &OutputFile,
    i: u64,
    entry: usize,
    piece: u64,
    each: impl FnMut(Bytes) -> Result<(), DedupError>,
) -> Result<u64, DedupError> {
    let head = get_range(sc, &file.uri, format::offsets_range(i)).await?;
    let (a, z) = parse_offsets(&head).map_err(|e| DedupError::format(&file.uri, e))?;
    if z > file.bytes {
        return Err(DedupError::format(&file.uri, super::FormatError::PastEnd));
    }
    pieces(sc, file, a..z, entry, piece, each).await
}

/// Sections `range` of `file` (contiguous in the object), read as one byte range in
/// pieces like [`section_pieces`]: one header read and the pieces, however many
/// sections. Returns the bytes.
pub async fn sections_pieces(
    sc: &ShuffleCtx<'_>,
    file: &OutputFile,
    range: std::ops::Range<u64>,
    entry: usize,
    piece: u64,
    each: impl FnMut(Bytes) -> Result<(), DedupError>,
) -> Result<u64, DedupError> {
    if range.is_empty() {
        return Ok(0);
    }
    let head = get_range(
        sc,
        &file.uri,
        format::offsets_range(range.start).start..format::offsets_range(range.end - 1).end,
    )
    .await?;
    let at = |i: usize| {
        head.get(8 * i..8 * i + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8")))
    };
    let n = (range.end - range.start) as usize;
    let (Some(a), Some(z)) = (at(0), at(n)) else {
        return Err(DedupError::format(
            &file.uri,
            super::FormatError::ShortHeader,
        ));
    };
    if z < a {
        return Err(DedupError::format(
            &file.uri,
            super::FormatError::OffsetsOrder(a, z),
        ));
    }
    if z > file.bytes {
        return Err(DedupError::format(&file.uri, super::FormatError::PastEnd));
    }
    pieces(sc, file, a..z, entry, piece, each).await
}

/// Bytes `a..z` of `file` in pieces of whole `entry`-byte entries, at most `piece`
/// bytes each (at least one entry): an error when the range is not whole entries
/// (never a partial entry dropped).
async fn pieces(
    sc: &ShuffleCtx<'_>,
    file: &OutputFile,
    std::ops::Range { start: a, end: z }: std::ops::Range<u64>,
    entry: usize,
    piece: u64,
    mut each: impl FnMut(Bytes) -> Result<(), DedupError>,
) -> Result<u64, DedupError> {
    if !(z - a).is_multiple_of(entry as u64) {
        return Err(DedupError::format(
            &file.uri,
            super::FormatError::PartialEntry {
                len: (z - a) as usize,
                size: entry,
            },
        ));
    }
    let step = (piece / entry as u64).max(1) * entry as u64;
    let mut at = a;
    while at < z {
        let end = (at + step).min(z);
        each(get_range(sc, &file.uri, at..end).await?)?;
        at = end;
    }
    Ok(z - a)
}

/// What names an earlier job as an index: where it is, its id, what it computed and
/// when it was submitted.
pub fn against_identity(old: &crate::protocol::job::LoadedJob) -> String {
    hash16(&[
        "against",
        &old.uri.to_uri_string(),
        &old.manifest.job_id,
        &old.manifest.spec_hash,
        &old.manifest.created_ms.to_string(),
    ])
}

/// Calls `each` with every entry of partition `r` (of this job's partitions) in an
/// earlier job's (`against`) keys objects: the earlier dedup stage on the same key
/// column and band layout, each committed map task's keys object (named by its commit
/// record and checked to belong to that job), the sections overlapping `r` (the two
/// jobs may have different partition counts) read in pieces of [`earlier_piece`] of
/// the reduce's memory (the earlier job's sections are sized by its own partitions,
/// which may be far fewer). Every keys-object entry starts with its 16-byte key.
/// Returns the bytes read.
pub async fn earlier_entries<T: Fixed>(
    sc: &ShuffleCtx<'_>,
    uri: &str,
    d: &crate::protocol::records::DedupPhase,
    r: u32,
    mut each: impl FnMut(T) -> Result<(), DedupError>,
) -> Result<u64, DedupError> {
    let piece = earlier_piece(d.params.memory_bytes);
    let old = crate::protocol::job::load_job(sc.reg, uri, sc.retry)
        .await
        .map_err(|e| DedupError::Against(format!("params.against: {e}")))?;
    // The job planned against another earlier job than the one there now (deleted
    // and submitted again): its decisions would mix two corpora.
    if let Some(want) = &d.against_identity
        && against_identity(&old) != *want
    {
        return Err(DedupError::Against(format!(
            "params.against: job {uri} was replaced since this job was planned; submit this job again to deduplicate against the new one"
        )));
    }
    let od = old
        .manifest
        .phases
        .iter()
        .find_map(|p| {
            p.dedup.as_ref().filter(|x| {
                x.params.key == d.params.key && x.params.kind.same_bands(&d.params.kind)
            })
        })
        .ok_or_else(|| {
            DedupError::Against(format!(
                "job {uri} has no dedup stage on {:?} with the same band keys",
                d.params.key
            ))
        })?;
    let map_name = &old.manifest.phases[od.map_phase].name;
    let (store, _) = sc.reg.resolve(uri)?;
    let ids = crate::protocol::planned_task_ids(
        store.as_ref(),
        &old.paths,
        &old.manifest.phases[od.map_phase],
        sc.retry,
    )
    .await?;
    let (q_lo, q_hi) = format::overlapping(r, d.partitions, od.partitions);
    let mut bytes = 0;
    for t in &ids {
        let rec: CommitRecord = get_json(store.as_ref(), &old.paths.commit(map_name, t), sc.retry)
            .await?
            .ok_or_else(|| {
                DedupError::Against(format!("job {uri}: task {map_name}/{t} is not committed"))
            })?;
        let Some(keys) = rec
            .shuffle
            .as_ref()
            .filter(|_| rec.status == TaskStatus::Committed)
        else {
            continue;
        };
        old.paths
            .check_file(
                &keys.uri,
                rec.reused_from.as_deref(),
                old.manifest.reused_from.as_deref(),
            )
            .map_err(DedupError::Stale)?;
        for q in q_lo..=q_hi {
            bytes += section_pieces(sc, keys, q as u64, T::SIZE, piece, |b| {
                let decoded =
                    format::entries::<T>(&b).map_err(|e| DedupError::format(&keys.uri, e))?;
                for (raw, e) in b.chunks_exact(T::SIZE).zip(decoded) {
                    let key = u128::from_le_bytes(raw[..16].try_into().expect("16"));
                    if format::partition_of(key, d.partitions) == r {
                        each(e)?;
                    }
                }
                Ok(())
            })
            .await?;
        }
    }
    // Replaced while it was read (same paths, another corpus): the entries may mix
    // both, so the task fails rather than decide with them.
    if let Some(want) = &d.against_identity {
        let again = crate::protocol::job::load_job(sc.reg, uri, sc.retry)
            .await
            .map_err(|e| DedupError::Against(format!("params.against: {e}")))?;
        if against_identity(&again) != *want {
            return Err(DedupError::Against(format!(
                "params.against: job {uri} was replaced since this job was planned; submit this job again to deduplicate against the new one"
            )));
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::RequestCounts;
    use std::sync::atomic::Ordering::Relaxed;

    /// Exact entries (40 bytes) with spread keys.
    fn entries(n: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(n as usize * 40);
        for i in 0..n {
            let key = ((i.wrapping_mul(0x9e37_79b9_7f4a_7c15) as u128) << 64) | i as u128;
            out.extend_from_slice(&key.to_le_bytes());
            out.extend_from_slice(&[i as u8; 24]);
        }
        out
    }

    /// Uploads `n` entries spilled past a 1 MiB budget; the stored object and the
    /// number of PUT requests (a multipart upload: create, parts, complete).
    async fn upload(name: &str, n: u64) -> (Vec<u8>, OutputFile, u64) {
        let counts = Arc::new(RequestCounts::default());
        let reg = Registry::with_wrapper(Default::default(), None).counting_into(counts.clone());
        let dir = Uri::parse(&format!("memory://{name}/staging/a")).unwrap();
        let spill = tempfile::tempdir().unwrap();
        let mut keys = KeySpill::new(40, 7, 1 << 20, spill.path().into());
        keys.push(&entries(n)).unwrap();
        let f = write_keys(&reg, &dir, keys).await.unwrap();
        let (store, u) = reg.resolve(&f.uri).unwrap();
        let got = store.get(&u.path).await.unwrap().bytes().await.unwrap();
        (got.to_vec(), f, counts.put.load(Relaxed))
    }

    #[tokio::test]
    async fn a_large_keys_object_goes_up_in_parts_with_the_bytes_of_one_encoding() {
        // 12 MiB of keys: past the writer's 8 MiB parts, so a multipart upload.
        let n = (12 << 20) / 40;
        let (got, f, puts) = upload("keys-large", n).await;
        assert_eq!(got, format::encode_keys(&entries(n), 40, 7));
        assert_eq!((f.rows, f.bytes), (n, got.len() as u64));
        assert_eq!(f.blake3, blake3::hash(&got).to_hex().to_string());
        assert!(puts >= 3, "{puts} PUT requests: not a multipart upload");
        // A small one stays one PUT.
        let (got, _, puts) = upload("keys-small", 100).await;
        assert_eq!(got, format::encode_keys(&entries(100), 40, 7));
        assert_eq!(puts, 1);
    }
}
