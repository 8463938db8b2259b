//! Semantic dedup's tasks (docs/SEMANTIC.md): the map side's vector entries, then the
//! three shuffle steps after the map phase: the centroids (one task: a spherical
//! k-means on the global bottom-`sample` vectors by a hash of id), the assignment
//! (task `j` assigns the vectors of its slice of map tasks to their nearest centroid
//! and sections them by reduce partition, a contiguous range of clusters each) and the
//! reduce (every pair of a cluster at cosine similarity ≥ 1 − eps joined, one member
//! kept per component; a cluster too large for `memory` is split by sub-clustering).
//! The reduce writes an exact decisions object, so the exact apply rejects the
//! duplicates. The arithmetic is [`crate::kernels::semantic`]'s.
//!
//! Vectors live in local files between reading and comparing, never all in memory: a
//! reduce holds its members' 40-byte sort entries and at most `memory / 2` of vectors.
use super::error::DedupError;
use super::exact::{Decision, ReduceStats, encode_decisions};
use super::format::{ASSIGN_MAGIC, CENTROIDS_MAGIC, Sections};
use super::shuffle::{
    ShuffleCtx, Upload, earlier_piece, partition_of_task, read_sections, section_pieces,
    sections_pieces, shuffle_file, spill_dir, upload_file,
};
use super::sort::{ExternalSort, Fixed};
use crate::kernels::semantic as k;
use crate::protocol::records::{
    CLUSTER_SIZE, DedupPhase, DedupPhaseKeep, DedupPhaseKind, OutputFile, TaskStats,
};
use crate::store::Uri;
use std::cmp::Ordering;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// A map entry's layout is [`super::keys::append_vectors`]'s.
/// Records per k-means cluster when `clusters` is `auto`.
pub const RECORDS_PER_CLUSTER: u64 = 5000;

/// A map entry's fields: sample key, id, rank, vector.
fn map_entry(e: &[u8]) -> (u128, u128, f64, &[u8]) {
    (
        u128::from_le_bytes(e[0..16].try_into().expect("16")),
        u128::from_le_bytes(e[16..32].try_into().expect("16")),
        f64::from_le_bytes(e[32..40].try_into().expect("8")),
        &e[40..],
    )
}

fn floats(b: &[u8], out: &mut Vec<f32>) {
    out.extend(
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4"))),
    );
}

/// The semantic params of a dedup phase, its vectors' dimension (from the map
/// phase's output schema) and the partition (or, for the centroids step, 0) `task`
/// stands for.
struct Step<'a> {
    d: &'a DedupPhase,
    dim: usize,
    eps: f64,
    clusters: Option<u32>,
    sample: u32,
    iterations: u32,
    r: u32,
}

fn step<'a>(sc: &'a ShuffleCtx<'_>, phase: usize, task: &str) -> Result<Step<'a>, DedupError> {
    let plan = &sc.job.manifest.phases[phase];
    let d = plan
        .dedup
        .as_ref()
        .ok_or_else(|| DedupError::Plan("semantic step without a dedup plan".into()))?;
    let DedupPhaseKind::Semantic {
        eps,
        clusters,
        sample,
        iterations,
        ..
    } = d.params.kind
    else {
        return Err(DedupError::Plan("not a semantic dedup".into()));
    };
    let dim = sc.job.manifest.phases[d.map_phase]
        .output_schema
        .field_with_name(&d.params.key)
        .ok()
        .and_then(|f| k::dim_of(f.data_type()))
        .ok_or_else(|| {
            DedupError::Plan(format!("{:?} is not an embedding column", d.params.key))
        })?;
    let tasks = if d.step == 0 { 1 } else { d.partitions };
    let r = partition_of_task(&plan.fingerprint, task, tasks).ok_or_else(|| {
        DedupError::Plan(format!("task {task} is not a partition of {}", plan.name))
    })?;
    Ok(Step {
        d,
        dim,
        eps,
        clusters,
        sample,
        iterations,
        r,
    })
}

/// One task of a semantic dedup's step `d.step` (0 centroids, 1 assign, 2 reduce):
/// its object, written into `out_dir`, and its stats.
pub async fn semantic_step(
    sc: &ShuffleCtx<'_>,
    phase: usize,
    task: &str,
    out_dir: &Uri,
    cancel: &Arc<AtomicBool>,
) -> Result<(OutputFile, TaskStats), DedupError> {
    let s = step(sc, phase, task)?;
    match s.d.step {
        0 => centroids(sc, &s, out_dir, cancel).await,
        1 => assign(sc, &s, out_dir, cancel).await,
        2 => reduce(sc, &s, out_dir, cancel).await,
        n => Err(DedupError::Plan(format!("semantic dedup has no step {n}"))),
    }
}

/// A sample vector's place: ordered by (key, id), the heap's largest first out; its
/// vector is row `slot` of the sample's one slab.
struct Sampled {
    key: u128,
    id: u128,
    slot: u32,
}
impl PartialEq for Sampled {
    fn eq(&self, o: &Self) -> bool {
        (self.key, self.id) == (o.key, o.id)
    }
}
impl Eq for Sampled {}
impl PartialOrd for Sampled {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Sampled {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.key, self.id).cmp(&(o.key, o.id))
    }
}

/// The committed map tasks' keys objects, by map task index (`None`: a failed task).
async fn map_files(
    sc: &ShuffleCtx<'_>,
    d: &DedupPhase,
    range: std::ops::Range<usize>,
) -> Result<Vec<(usize, Option<OutputFile>)>, DedupError> {
    let name = sc.job.manifest.phases[d.map_phase].name.clone();
    let ids = sc.task_ids(d.map_phase);
    let mut out = Vec::new();
    for ti in range {
        out.push((ti, shuffle_file(sc, d.map_phase, &name, &ids[ti]).await?));
    }
    Ok(out)
}

fn check_cancel(cancel: &AtomicBool) -> Result<(), DedupError> {
    if cancel.load(std::sync::atomic::Ordering::Relaxed) {
        Err(DedupError::Cancelled)
    } else {
        Ok(())
    }
}

/// Step 0: the global bottom-`sample` vectors by (key, id), read section by section
/// of every keys object (sections are contiguous key ranges, so once a section leaves
/// `sample` entries in the heap no later one can enter), then the k-means. The
/// centroids object holds `k × d` f32.
async fn centroids(
    sc: &ShuffleCtx<'_>,
    s: &Step<'_>,
    out_dir: &Uri,
    cancel: &Arc<AtomicBool>,
) -> Result<(OutputFile, TaskStats), DedupError> {
    let entry = k::entry_bytes(s.dim);
    let piece = earlier_piece(s.d.params.memory_bytes);
    let files = map_files(sc, s.d, 0..sc.task_ids(s.d.map_phase).len()).await?;
    let records: u64 = files
        .iter()
        .filter_map(|(_, f)| f.as_ref())
        .map(|f| f.rows)
        .sum();
    let want = s.sample as usize;
    let mut heap = std::collections::BinaryHeap::<Sampled>::with_capacity(want.min(1 << 20));
    // The vectors, one row per slot: an evicted entry's row takes the next one, so the
    // sample is held once (`sample × 4d` bytes), never as one allocation per vector.
    let mut slab: Vec<f32> = Vec::new();
    let mut row = Vec::with_capacity(s.dim);
    let mut input_bytes = 0;
    for section in 0..s.d.partitions as u64 {
        for (_, file) in &files {
            let Some(file) = file else { continue };
            check_cancel(cancel)?;
            input_bytes += section_pieces(sc, file, section, entry, piece, |b| {
                for e in b.chunks_exact(entry) {
                    let (key, id, _, v) = map_entry(e);
                    if heap.len() == want
                        && heap
                            .peek()
                            .is_some_and(|top| (key, id) >= (top.key, top.id))
                    {
                        continue;
                    }
                    row.clear();
                    floats(v, &mut row);
                    let slot = if heap.len() == want {
                        heap.pop().expect("full").slot
                    } else {
                        slab.extend_from_slice(&row);
                        heap.len() as u32
                    };
                    let at = slot as usize * s.dim;
                    slab[at..at + s.dim].copy_from_slice(&row);
                    heap.push(Sampled { key, id, slot });
                }
                Ok(())
            })
            .await?;
        }
        if heap.len() == want {
            break;
        }
    }
    let order: Vec<u32> = heap.into_sorted_vec().iter().map(|x| x.slot).collect();
    let n = order.len();
    let k_want = match s.clusters {
        Some(c) => c as usize,
        None => auto_clusters(records, n, s.dim, s.d.params.memory_bytes),
    };
    let (dim, iterations, eps) = (s.dim, s.iterations as usize, s.eps);
    let stop = cancel.clone();
    let (cents, ran) = tokio::task::spawn_blocking(move || {
        // The slab's rows in (key, id) order, permuted in place.
        let rows = permute_rows(slab, &order, dim);
        // Initial centroids at least 4·eps apart (in cosine distance), as the design says.
        let spread = (1.0 - 4.0 * eps).max(-1.0) as f32;
        k::spherical_kmeans(&rows, dim, k_want, iterations, spread, &stop)
    })
    .await
    .map_err(DedupError::joined)?;
    check_cancel(cancel)?;
    let kk = cents.len() / s.dim;
    tracing::info!(
        sample = n,
        records,
        clusters = kk,
        iterations = ran,
        "semantic dedup: k-means centroids"
    );
    let mut obj = Vec::with_capacity(32 + cents.len() * 4);
    obj.extend_from_slice(CENTROIDS_MAGIC);
    obj.extend_from_slice(&1u32.to_le_bytes());
    obj.extend_from_slice(&0u32.to_le_bytes());
    let start = 32u64;
    obj.extend_from_slice(&start.to_le_bytes());
    obj.extend_from_slice(&(start + cents.len() as u64 * 4).to_le_bytes());
    for x in &cents {
        obj.extend_from_slice(&x.to_le_bytes());
    }
    let uri = out_dir.child("centroids.bin");
    let len = obj.len() as u64;
    let file = upload_file(
        sc.reg,
        &uri,
        Upload {
            what: "centroids object",
            file: std::io::Cursor::new(obj),
            len,
            rows: kk as u64,
        },
    )
    .await?;
    Ok((
        file,
        TaskStats {
            records_in: n as u64,
            records_out: kk as u64,
            input_bytes,
            output_bytes: len,
            ..Default::default()
        },
    ))
}

/// `rows` reordered so that row `i` is the old row `order[i]` (`order` a
/// permutation), in place: each cycle of the permutation walked once with one row of
/// scratch.
fn permute_rows(mut rows: Vec<f32>, order: &[u32], d: usize) -> Vec<f32> {
    let mut done = vec![false; order.len()];
    let mut tmp = vec![0f32; d];
    for start in 0..order.len() {
        if done[start] {
            continue;
        }
        // Row `start` will hold old row order[start]; walk the cycle.
        tmp.copy_from_slice(&rows[start * d..(start + 1) * d]);
        let mut i = start;
        loop {
            done[i] = true;
            let src = order[i] as usize;
            if src == start {
                rows[i * d..(i + 1) * d].copy_from_slice(&tmp);
                break;
            }
            rows.copy_within(src * d..(src + 1) * d, i * d);
            i = src;
        }
    }
    rows
}

/// `clusters: auto`: one per [`RECORDS_PER_CLUSTER`] records, at most a tenth of the
/// sample (so each centroid trains on ten vectors or more) and at most what half of
/// `memory` holds ([`k::centroid_bytes`]); at least 1.
pub fn auto_clusters(records: u64, sample: usize, d: usize, memory: u64) -> usize {
    let by_memory = (1..=65_536usize)
        .rev()
        .find(|&c| k::centroid_bytes(c, d) <= memory / 2)
        .unwrap_or(1);
    let want = records.div_ceil(RECORDS_PER_CLUSTER) as usize;
    let k = want.min(sample / 10).min(by_memory).clamp(1, 65_536);
    if k < want.min(65_536) {
        // Larger clusters: the pairs step costs n² per cluster.
        tracing::warn!(
            records,
            clusters = k,
            wanted = want,
            "semantic dedup: clusters: auto is capped by the sample (a tenth of it) or by memory; raise params.sample or params.memory, or set params.clusters"
        );
    }
    k
}

/// The centroids the step-0 task committed (`k × d`).
async fn read_centroids(
    sc: &ShuffleCtx<'_>,
    s: &Step<'_>,
    cancel: &AtomicBool,
) -> Result<Vec<f32>, DedupError> {
    let mut out = Vec::new();
    let mut bad = None;
    read_sections(sc, s.d.map_phase + 1, 0, cancel, |_, uri, b| {
        if !b.len().is_multiple_of(4 * s.dim) {
            bad = Some(uri.to_string());
        }
        floats(&b, &mut out);
        Ok(())
    })
    .await?;
    if let Some(uri) = bad {
        return Err(DedupError::format(
            &uri,
            super::FormatError::PartialEntry {
                len: out.len() * 4,
                size: 4 * s.dim,
            },
        ));
    }
    Ok(out)
}

/// The reduce partition of a cluster: contiguous cluster ranges.
fn partition_of_cluster(c: u32, clusters: usize, partitions: u32) -> u32 {
    ((c as u64 * partitions as u64) / clusters.max(1) as u64) as u32
}

/// Bytes of an assigned entry: cluster (4), map task (4), similarity to the centroid
/// (f64), id (16), rank (8), vector.
fn assigned_bytes(d: usize) -> usize {
    40 + 4 * d
}

/// Step 1, task `j`: the vectors of map tasks `[j·M/P, (j+1)·M/P)`, each assigned to
/// its nearest centroid (decided in f64 near ties), written through a local file and
/// sectioned by reduce partition.
async fn assign(
    sc: &ShuffleCtx<'_>,
    s: &Step<'_>,
    out_dir: &Uri,
    cancel: &Arc<AtomicBool>,
) -> Result<(OutputFile, TaskStats), DedupError> {
    let cents = read_centroids(sc, s, cancel).await?;
    let kk = cents.len() / s.dim;
    let m = sc.task_ids(s.d.map_phase).len();
    let p = s.d.partitions as usize;
    let j = s.r as usize;
    let files = map_files(sc, s.d, j * m / p..(j + 1) * m / p).await?;
    let vectors: u64 = files
        .iter()
        .filter_map(|(_, f)| f.as_ref())
        .map(|f| f.rows)
        .sum();
    if vectors > u32::MAX as u64 {
        return Err(DedupError::Plan(format!(
            "assign task {j} would hold {vectors} vectors, more than 2^32: raise params.partitions"
        )));
    }
    let entry = k::entry_bytes(s.dim);
    let out_entry = assigned_bytes(s.dim);
    let piece = earlier_piece(s.d.params.memory_bytes);
    let dir = spill_dir();
    std::fs::create_dir_all(&dir).map_err(|e| DedupError::local("spill dir", e))?;
    let local = |e| DedupError::local(format!("writing vectors to {}", dir.display()), e);
    let mut tmp = BufWriter::new(tempfile::tempfile_in(&dir).map_err(local)?);
    let mut parts: Vec<u32> = Vec::new();
    let mut input_bytes = 0;
    let mut rows = Vec::new();
    for (ti, file) in &files {
        let Some(file) = file else { continue };
        if kk == 0 {
            break; // no vector anywhere had a direction: nothing to assign
        }
        check_cancel(cancel)?;
        // Every section of the object, one contiguous byte range.
        input_bytes += sections_pieces(sc, file, 0..s.d.partitions as u64, entry, piece, |b| {
            check_cancel(cancel)?;
            rows.clear();
            for e in b.chunks_exact(entry) {
                floats(&e[40..], &mut rows);
            }
            let near = k::nearest_checked(&rows, &cents, s.dim);
            for (e, &(c, sim)) in b.chunks_exact(entry).zip(&near) {
                let (_, id, rank, v) = map_entry(e);
                parts.push(partition_of_cluster(c, kk, s.d.partitions));
                let mut w = || -> std::io::Result<()> {
                    tmp.write_all(&c.to_le_bytes())?;
                    tmp.write_all(&(*ti as u32).to_le_bytes())?;
                    tmp.write_all(&sim.to_le_bytes())?;
                    tmp.write_all(&id.to_le_bytes())?;
                    tmp.write_all(&rank.to_le_bytes())?;
                    tmp.write_all(v)
                };
                w().map_err(local)?;
            }
            Ok(())
        })
        .await?;
    }
    let tmp = tmp.into_inner().map_err(|e| local(e.into_error()))?;
    let n = parts.len();
    let (file, len) = tokio::task::spawn_blocking(move || -> std::io::Result<_> {
        // Entries by partition (stable: each keeps its read order), read back in that
        // order from the local file.
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by_key(|&i| parts[i as usize]);
        let mut out = Sections::new(p, &dir)?;
        let mut buf = vec![0u8; out_entry];
        for i in order {
            tmp.read_exact_at(&mut buf, i as u64 * out_entry as u64)?;
            out.push_raw(parts[i as usize] as usize, &buf)?;
        }
        out.finish(ASSIGN_MAGIC)
    })
    .await
    .map_err(DedupError::joined)?
    .map_err(|e| DedupError::local("assignment object", e))?;
    let uri = out_dir.child("assigned.bin");
    let file = upload_file(
        sc.reg,
        &uri,
        Upload {
            what: "assignment object",
            file,
            len,
            rows: n as u64,
        },
    )
    .await?;
    Ok((
        file,
        TaskStats {
            records_in: n as u64,
            records_out: n as u64,
            input_bytes,
            output_bytes: len,
            ..Default::default()
        },
    ))
}

/// A member of a cluster, as a reduce sorts them: its vector stays in the local
/// vectors file at `pos`. Ordered by cluster, then the `keep` order (score high
/// first, then id low), so a component's first member is its representative.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Member {
    pub cluster: u32,
    pub task: u32,
    /// Similarity to the centroid (`nearest_centroid`), the `keep.highest` value, or
    /// 0 (`lowest_id`).
    pub score: f64,
    pub id: u128,
    pub pos: u64,
}

impl Fixed for Member {
    const SIZE: usize = 40;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.cluster.to_le_bytes());
        out.extend_from_slice(&self.task.to_le_bytes());
        out.extend_from_slice(&self.score.to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.pos.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        Member {
            cluster: u32::from_le_bytes(b[0..4].try_into().expect("4")),
            task: u32::from_le_bytes(b[4..8].try_into().expect("4")),
            score: f64::from_le_bytes(b[8..16].try_into().expect("8")),
            id: u128::from_le_bytes(b[16..32].try_into().expect("16")),
            pos: u64::from_le_bytes(b[32..40].try_into().expect("8")),
        }
    }
    fn order(&self, o: &Self) -> Ordering {
        self.cluster
            .cmp(&o.cluster)
            .then_with(|| o.score.total_cmp(&self.score))
            .then_with(|| self.id.cmp(&o.id))
    }
}

/// What a reduce decides with: the threshold, the vectors' file and how many vectors
/// it compares at once.
pub struct Deciding<'a> {
    pub vectors: &'a std::fs::File,
    pub dim: usize,
    pub threshold: f64,
    /// The most vectors loaded at once (`memory / 2` of them).
    pub cap: usize,
    pub iterations: usize,
    pub representatives: bool,
    /// Set when the attempt is to stop (a lost lease, a drain): the rest is skipped.
    pub cancel: &'a AtomicBool,
}

/// Sub-clustering depth after which a group still too large is cut into chunks.
const MAX_DEPTH: u32 = 6;

impl Deciding<'_> {
    fn load(&self, members: &[Member], out: &mut Vec<f32>) -> std::io::Result<()> {
        out.clear();
        let mut buf = vec![0u8; 4 * self.dim];
        for m in members {
            self.vectors.read_exact_at(&mut buf, m.pos)?;
            floats(&buf, out);
        }
        Ok(())
    }

    /// The decisions of one group of members (in keep order): compared whole when it
    /// fits in `cap` vectors, else split by a k-means of a bottom-hash sample of it
    /// into about twice as many sub-groups as it is larger than `cap` (pairs across
    /// them are missed, like pairs across clusters), recursively. Counts components
    /// and their sizes into `stats` (`distinct`, `cluster_sizes`). Nothing more once
    /// `cancel` is set (the attempt is abandoned).
    pub fn decide(
        &self,
        members: &[Member],
        depth: u32,
        out: &mut dyn FnMut(Decision) -> std::io::Result<()>,
        stats: &mut ReduceStats,
    ) -> std::io::Result<()> {
        if self.cancel.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        if members.len() < 2 {
            for _ in members {
                stats.distinct += 1;
                stats.cluster_sizes.record(1.0);
            }
            return Ok(());
        }
        if members.len() <= self.cap {
            let mut v = Vec::with_capacity(members.len() * self.dim);
            self.load(members, &mut v)?;
            let Some(comp) = k::components_at_least(&v, self.dim, self.threshold, self.cancel)
            else {
                return Err(std::io::ErrorKind::Interrupted.into());
            };
            drop(v);
            let mut size = vec![0u64; members.len()];
            for &c in &comp {
                size[c as usize] += 1;
            }
            for (i, &c) in comp.iter().enumerate() {
                let rep = &members[c as usize];
                if c as usize == i {
                    stats.distinct += 1;
                    stats.cluster_sizes.record(size[i] as f64);
                    if self.representatives && size[i] > 1 {
                        out(Decision {
                            task: rep.task,
                            representative: true,
                            id: rep.id,
                            rep: rep.id,
                        })?;
                    }
                } else {
                    out(Decision {
                        task: members[i].task,
                        representative: false,
                        id: members[i].id,
                        rep: rep.id,
                    })?;
                }
            }
            return Ok(());
        }
        let groups = if depth < MAX_DEPTH {
            self.split(members)?
        } else {
            vec![]
        };
        if groups.len() < 2 {
            // No split found (or too deep): chunks of `cap` in keep order.
            tracing::warn!(
                members = members.len(),
                cap = self.cap,
                "semantic dedup: a cluster sub-clustering cannot split is compared in chunks"
            );
            for c in members.chunks(self.cap) {
                self.decide(c, MAX_DEPTH, out, stats)?;
            }
            return Ok(());
        }
        for g in groups {
            self.decide(&g, depth + 1, out, stats)?;
        }
        Ok(())
    }

    /// Splits a group too large to compare whole: k-means on its `cap / 2` members
    /// lowest by a hash of id, every member then assigned to its nearest sub-centroid
    /// (read back `cap / 2` vectors at a time). Each sub-group keeps the keep order.
    fn split(&self, members: &[Member]) -> std::io::Result<Vec<Vec<Member>>> {
        let want = (self.cap / 2).max(2);
        tracing::info!(
            members = members.len(),
            cap = self.cap,
            "semantic dedup: a cluster larger than memory is split by sub-clustering"
        );
        let mut by_hash: Vec<(u64, usize)> = members
            .iter()
            .enumerate()
            .map(|(i, m)| (xxhash_rust::xxh3::xxh3_64(&m.id.to_le_bytes()), i))
            .collect();
        if by_hash.len() > want {
            by_hash.select_nth_unstable(want);
            by_hash.truncate(want);
        }
        by_hash.sort_unstable();
        let sample: Vec<Member> = by_hash.iter().map(|&(_, i)| members[i]).collect();
        let mut v = Vec::new();
        self.load(&sample, &mut v)?;
        let kk = (members.len().div_ceil(self.cap) * 2).min(sample.len());
        let (cents, _) = k::spherical_kmeans(&v, self.dim, kk, self.iterations, 1.0, self.cancel);
        let kk = cents.len() / self.dim;
        let mut groups: Vec<Vec<Member>> = vec![Vec::new(); kk];
        for chunk in members.chunks(want) {
            self.load(chunk, &mut v)?;
            let near = k::nearest_until(&v, &cents, self.dim, self.cancel)
                .ok_or(std::io::ErrorKind::Interrupted)?;
            for (m, (c, _)) in chunk.iter().zip(near) {
                groups[c as usize].push(*m);
            }
        }
        groups.retain(|g| !g.is_empty());
        Ok(groups)
    }
}

/// Step 2, partition `r`: section `r` of every assignment object, members sorted by
/// cluster and keep order (vectors into a local file), each cluster decided; an exact
/// decisions object by map task.
async fn reduce(
    sc: &ShuffleCtx<'_>,
    s: &Step<'_>,
    out_dir: &Uri,
    cancel: &Arc<AtomicBool>,
) -> Result<(OutputFile, TaskStats), DedupError> {
    let dir = spill_dir();
    std::fs::create_dir_all(&dir).map_err(|e| DedupError::local("spill dir", e))?;
    let local = |e| DedupError::local(format!("spilling to {}", dir.display()), e);
    let memory = s.d.params.memory_bytes;
    let mut sorter = ExternalSort::<Member>::new(memory / 4, dir.clone());
    let mut vectors = BufWriter::new(tempfile::tempfile_in(&dir).map_err(local)?);
    let entry = assigned_bytes(s.dim);
    let keep = s.d.params.keep.clone();
    let mut pos = 0u64;
    let assign_phase = s.d.map_phase + 2;
    let name = sc.job.manifest.phases[assign_phase].name.clone();
    let piece = earlier_piece(memory);
    let mut input_bytes = 0;
    for t in sc.task_ids(assign_phase).iter() {
        check_cancel(cancel)?;
        let Some(file) = shuffle_file(sc, assign_phase, &name, t).await? else {
            continue;
        };
        input_bytes += section_pieces(sc, &file, s.r as u64, entry, piece, |b| {
            for e in b.chunks_exact(entry) {
                let cluster = u32::from_le_bytes(e[0..4].try_into().expect("4"));
                let task = u32::from_le_bytes(e[4..8].try_into().expect("4"));
                let sim = f64::from_le_bytes(e[8..16].try_into().expect("8"));
                let id = u128::from_le_bytes(e[16..32].try_into().expect("16"));
                let rank = f64::from_le_bytes(e[32..40].try_into().expect("8"));
                let score = match keep {
                    DedupPhaseKeep::NearestCentroid => sim,
                    DedupPhaseKeep::Highest(_) => rank,
                    DedupPhaseKeep::LowestId => 0.0,
                };
                vectors.write_all(&e[40..]).map_err(local)?;
                sorter
                    .push(Member {
                        cluster,
                        task,
                        score,
                        id,
                        pos,
                    })
                    .map_err(local)?;
                pos += (entry - 40) as u64;
            }
            Ok(())
        })
        .await?;
    }
    let vectors = vectors.into_inner().map_err(|e| local(e.into_error()))?;
    let (dim, threshold, iterations) = (s.dim, 1.0 - s.eps, s.iterations as usize);
    let cap = ((memory / 2) / (4 * dim as u64)).max(2) as usize;
    let representatives = s.d.params.cluster_column;
    let map_tasks = sc.task_ids(s.d.map_phase).len() as u32;
    let stop = cancel.clone();
    let (file, len, stats) = tokio::task::spawn_blocking(move || -> std::io::Result<_> {
        let spilled = sorter.spilled_bytes;
        let deciding = Deciding {
            vectors: &vectors,
            dim,
            threshold,
            cap,
            iterations,
            representatives,
            cancel: &stop,
        };
        let mut decisions = ExternalSort::<Decision>::new(memory / 4, dir.clone());
        let mut stats = ReduceStats::default();
        let mut group: Vec<Member> = Vec::new();
        let mut flush = |group: &mut Vec<Member>, stats: &mut ReduceStats| {
            let r = deciding.decide(&group[..], 0, &mut |x| decisions.push(x), stats);
            stats.keys += group.len() as u64;
            group.clear();
            r
        };
        for m in sorter.finish()? {
            let m = m?;
            if group.last().is_some_and(|g| g.cluster != m.cluster) {
                flush(&mut group, &mut stats)?;
            }
            group.push(m);
        }
        flush(&mut group, &mut stats)?;
        stats.duplicates = stats.keys - stats.distinct;
        stats.spilled_bytes = spilled + decisions.spilled_bytes;
        let (file, len) = encode_decisions(decisions.finish()?, map_tasks, &dir)?;
        Ok((file, len, stats))
    })
    .await
    .map_err(DedupError::joined)?
    .map_err(|e| match check_cancel(cancel) {
        Err(c) => c,
        Ok(()) => DedupError::local("semantic reduce", e),
    })?;
    check_cancel(cancel)?;
    let uri = out_dir.child("decisions.bin");
    let file = upload_file(
        sc.reg,
        &uri,
        Upload {
            what: "decisions object",
            file,
            len,
            rows: stats.duplicates,
        },
    )
    .await?;
    Ok((
        file,
        TaskStats {
            records_in: stats.keys,
            records_out: stats.distinct,
            input_bytes,
            output_bytes: len,
            histograms: [(CLUSTER_SIZE.to_string(), stats.cluster_sizes)].into(),
            ..Default::default()
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_rows_puts_row_order_i_at_i() {
        let d = 3;
        let rows: Vec<f32> = (0..7 * d).map(|x| x as f32).collect();
        let order = [4u32, 0, 6, 5, 1, 2, 3];
        let got = permute_rows(rows.clone(), &order, d);
        for (i, &o) in order.iter().enumerate() {
            assert_eq!(
                &got[i * d..(i + 1) * d],
                &rows[o as usize * d..(o as usize + 1) * d]
            );
        }
        assert_eq!(permute_rows(rows.clone(), &[0, 1, 2, 3, 4, 5, 6], d), rows);
    }

    #[test]
    fn auto_clusters_follow_records_within_sample_and_memory() {
        assert_eq!(auto_clusters(1_000_000, 100_000, 512, 1 << 30), 200);
        assert_eq!(auto_clusters(10, 100_000, 512, 1 << 30), 1);
        // A tenth of the sample at most.
        assert_eq!(auto_clusters(1_000_000_000, 100_000, 512, 1 << 30), 10_000);
        // What half of memory holds: 64 MiB / (512 × 16 + 4,096) bytes a centroid.
        let k = auto_clusters(1_000_000_000, 1_000_000, 512, 64 << 20);
        assert!(k::centroid_bytes(k, 512) <= 32 << 20 && k::centroid_bytes(k + 1, 512) > 32 << 20);
    }
}
