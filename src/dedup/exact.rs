//! The exact reduce (docs/DEDUP.md, pass 2): the entries a map task writes
//! ([`KeyEntry`]), the same with the map task a reducer read them from ([`Sourced`]),
//! the decisions a reducer writes ([`Decision`]), and the pure computation between
//! them: group sorted keys, pick each cluster's representative by a total order,
//! write the decisions object. No store access: [`super::reduce`] does the I/O.
use super::format::{DECISIONS_MAGIC, EARLIER_NODE, Sections};
use super::sort::{BufferPool, ExternalSort, Fixed, flag_sort, range_sort};
use std::cmp::Ordering;
use std::path::PathBuf;

/// One key of one record, as a map task writes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeyEntry {
    pub key: u128,
    pub id: u128,
    /// The `keep.highest` value (higher is kept); 0 for `lowest_id`.
    pub rank: f64,
}

impl Fixed for KeyEntry {
    const SIZE: usize = 40;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.key.to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.rank.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        KeyEntry {
            key: u128::from_le_bytes(b[0..16].try_into().expect("16")),
            id: u128::from_le_bytes(b[16..32].try_into().expect("16")),
            rank: f64::from_le_bytes(b[32..40].try_into().expect("8")),
        }
    }
    /// Key, then the representative first: highest rank, then lowest id.
    fn order(&self, o: &Self) -> Ordering {
        self.key
            .cmp(&o.key)
            .then_with(|| o.rank.total_cmp(&self.rank))
            .then_with(|| self.id.cmp(&o.id))
    }
}

/// A key entry with the map task it came from (known to the reducer by where it
/// read it); [`EARLIER`] for a key of the job deduplicated against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sourced {
    pub e: KeyEntry,
    pub task: u32,
}

/// The `task` of entries from an earlier job's key index (`against`): they rank
/// before every entry of this job, and get no decisions (their records are not ours).
pub const EARLIER: u32 = u32::MAX;

impl Fixed for Sourced {
    const SIZE: usize = 44;
    fn put(&self, out: &mut Vec<u8>) {
        self.e.put(out);
        out.extend_from_slice(&self.task.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        Sourced {
            e: KeyEntry::get(&b[..40]),
            task: u32::from_le_bytes(b[40..44].try_into().expect("4")),
        }
    }
    fn pool() -> Option<&'static BufferPool<Self>> {
        static POOL: BufferPool<Sourced> = BufferPool::new();
        Some(&POOL)
    }
    /// Keys are hashes, spread evenly over the partition's key range: see
    /// [`range_sort`].
    fn sort(buf: &mut [Self]) {
        range_sort(
            buf,
            &[&|x: &Self| (x.e.key >> 64) as u64, &|x: &Self| {
                x.e.key as u64
            }],
            &Self::order,
        );
    }
    fn order(&self, o: &Self) -> Ordering {
        self.e
            .key
            .cmp(&o.e.key)
            .then_with(|| (o.task == EARLIER).cmp(&(self.task == EARLIER)))
            .then_with(|| self.e.order(&o.e))
            .then_with(|| self.task.cmp(&o.task))
    }
}

/// What a reducer decided about one record of a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub task: u32,
    /// Whether the record is its cluster's representative (kept).
    pub representative: bool,
    pub id: u128,
    pub rep: u128,
}

impl Fixed for Decision {
    const SIZE: usize = 40;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.task.to_le_bytes());
        out.extend_from_slice(&u32::from(self.representative).to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.rep.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        Decision {
            task: u32::from_le_bytes(b[0..4].try_into().expect("4")),
            representative: u32::from_le_bytes(b[4..8].try_into().expect("4")) == 1,
            id: u128::from_le_bytes(b[8..24].try_into().expect("16")),
            rep: u128::from_le_bytes(b[24..40].try_into().expect("16")),
        }
    }
    fn order(&self, o: &Self) -> Ordering {
        self.task.cmp(&o.task).then_with(|| self.id.cmp(&o.id))
    }
    fn pool() -> Option<&'static BufferPool<Self>> {
        static POOL: BufferPool<Decision> = BufferPool::new();
        Some(&POOL)
    }
    /// By task (a counting pass: tasks are few), then each task's ids by
    /// [`range_sort`].
    fn sort(buf: &mut [Self]) {
        let tasks = buf.iter().map(|d| d.task as usize + 1).max().unwrap_or(0);
        if buf.len() < 256 || tasks > buf.len() {
            buf.sort_unstable_by(Self::order);
            return;
        }
        let starts = flag_sort(buf, tasks, |d| d.task as usize);
        for w in starts.windows(2) {
            range_sort(
                &mut buf[w[0]..w[1]],
                &[&|d: &Self| (d.id >> 64) as u64, &|d: &Self| d.id as u64],
                &Self::order,
            );
        }
    }
}

/// What a reduce produced.
#[derive(Debug, Default)]
pub struct ReduceStats {
    pub keys: u64,
    pub distinct: u64,
    pub duplicates: u64,
    pub spilled_bytes: u64,
    /// Records of this job per distinct key (1 for a key without duplicates).
    pub cluster_sizes: crate::protocol::records::Histogram,
}

/// Groups sorted key entries into clusters and decides each: the first entry of a
/// group (highest rank, then lowest id) is the representative. Decisions are
/// produced only for groups of two or more (for the representative too when
/// `representatives`, which `dup_cluster` needs), sorted by (task, id).
pub fn decide(
    sorted: impl Iterator<Item = std::io::Result<Sourced>>,
    memory_bytes: u64,
    dir: PathBuf,
    representatives: bool,
) -> std::io::Result<(ExternalSort<Decision>, ReduceStats)> {
    let mut out = ExternalSort::<Decision>::new(memory_bytes / 2, dir);
    let mut stats = ReduceStats::default();
    let mut rep: Option<Sourced> = None;
    let mut rep_emitted = false;
    // Records of this job in the current group (an earlier job's keys are not counted).
    let mut size = 0u64;
    for x in sorted {
        let x = x?;
        stats.keys += 1;
        if rep.as_ref().is_some_and(|r| r.e.key != x.e.key) && size > 0 {
            stats.cluster_sizes.record(size as f64);
            size = 0;
        }
        if x.task != EARLIER {
            size += 1;
        }
        match rep {
            Some(r) if r.e.key == x.e.key => {
                if representatives && !rep_emitted && r.task != EARLIER {
                    out.push(Decision {
                        task: r.task,
                        representative: true,
                        id: r.e.id,
                        rep: r.e.id,
                    })?;
                    rep_emitted = true;
                }
                if x.task != EARLIER && (x.e.id != r.e.id || x.task != r.task) {
                    stats.duplicates += 1;
                    // An earlier corpus's record is marked: a record of this job read
                    // from the same file has its id, and is still its duplicate.
                    let earlier = if r.task == EARLIER { EARLIER_NODE } else { 0 };
                    out.push(Decision {
                        task: x.task,
                        representative: false,
                        id: x.e.id,
                        rep: r.e.id | earlier,
                    })?;
                }
            }
            _ => {
                stats.distinct += 1;
                rep = Some(x);
                rep_emitted = false;
            }
        }
    }
    if size > 0 {
        stats.cluster_sizes.record(size as f64);
    }
    Ok((out, stats))
}

/// Writes sorted decisions as a decisions object (header with per-map-task offsets),
/// through a local file so memory stays bounded: returns the file and its length.
pub fn encode_decisions(
    sorted: impl Iterator<Item = std::io::Result<Decision>>,
    map_tasks: u32,
    dir: &std::path::Path,
) -> std::io::Result<(std::fs::File, u64)> {
    let mut out = Sections::new(map_tasks as usize, dir)?;
    out.push_all(sorted, |d| d.task as usize)?;
    out.finish(DECISIONS_MAGIC)
}

/// The rest of a reduce once every entry is in `sorter`: merge, decide, and write the
/// decisions object to a local file. Returns it, its length and the counts (spilled
/// bytes of both sorts included).
pub fn finish_reduce(
    sorter: ExternalSort<Sourced>,
    memory_bytes: u64,
    dir: PathBuf,
    representatives: bool,
    map_tasks: u32,
) -> std::io::Result<(std::fs::File, u64, ReduceStats)> {
    let spilled_keys = sorter.spilled_bytes;
    let merged = sorter.finish()?;
    let (decisions, mut stats) = decide(merged, memory_bytes, dir.clone(), representatives)?;
    stats.spilled_bytes = spilled_keys + decisions.spilled_bytes;
    let (file, len) = encode_decisions(decisions.finish()?, map_tasks, &dir)?;
    Ok((file, len, stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedup::format::{check_header, decode, section_of};
    use std::io::Read;

    fn e(key: u128, id: u128, rank: f64, task: u32) -> Sourced {
        Sourced {
            e: KeyEntry { key, id, rank },
            task,
        }
    }

    #[test]
    fn sourced_sort_equals_a_comparison_sort() {
        let mut next = crate::kernels::xorshift(0x2545_F491_4F6C_DD1Du64);
        for (n, spread) in [
            (10, 64),
            (300, 64),
            (5_000, 64),
            (70_000, 40),
            (20_000, 3),
            (3_000, 0),
        ] {
            // Keys in a narrow range (one partition), with repeats and equal high bits.
            let base = next() as u128;
            let mut v: Vec<Sourced> = (0..n)
                .map(|i| {
                    let h = if spread == 0 {
                        7
                    } else {
                        next() >> (64 - spread)
                    };
                    let key = ((h as u128) << 64) | (base ^ (next() % 3) as u128);
                    let task = if i % 97 == 0 {
                        EARLIER
                    } else {
                        (next() % 5) as u32
                    };
                    e(key, (next() % 1000) as u128, (next() % 4) as f64, task)
                })
                .collect();
            let mut want = v.clone();
            want.sort_by(Sourced::order);
            Sourced::sort(&mut v);
            assert!(v == want, "n={n} spread={spread}");
        }
    }

    #[test]
    fn decision_sort_equals_a_comparison_sort() {
        let mut next = crate::kernels::xorshift(0x9E37_79B9_7F4A_7C15u64);
        for (n, tasks) in [(100, 3), (10_000, 7), (50_000, 300), (2_000, 5_000)] {
            let mut v: Vec<Decision> = (0..n)
                .map(|_| Decision {
                    task: (next() % tasks) as u32,
                    representative: false,
                    // Ids as records have them: a file key, then an offset.
                    id: (((next() % 3) as u128) << 64) | (next() % 100_000) as u128,
                    rep: next() as u128,
                })
                .collect();
            let mut want = v.clone();
            want.sort_by(Decision::order);
            Decision::sort(&mut v);
            let key = |d: &Decision| (d.task, d.id);
            assert!(
                v.iter().map(key).eq(want.iter().map(key)),
                "n={n} tasks={tasks}"
            );
        }
    }

    /// Spilling (a tiny budget) and not spilling give the same decisions, and the
    /// representative is the highest rank, then the lowest id.
    #[test]
    fn decisions_do_not_depend_on_spilling() {
        let dir = tempfile::tempdir().unwrap();
        let mut input = Vec::new();
        for k in 0..300u128 {
            for copy in 0..(k % 4) {
                input.push(e(k, k * 10 + copy, (copy % 2) as f64, (copy % 3) as u32));
            }
        }
        let run = |memory: u64| {
            let mut s = ExternalSort::<Sourced>::new(memory, dir.path().to_path_buf());
            for x in input.iter().rev() {
                s.push(*x).unwrap();
            }
            let spilled = s.spilled_runs();
            let (d, st) =
                decide(s.finish().unwrap(), memory, dir.path().to_path_buf(), true).unwrap();
            let out: Vec<Decision> = d.finish().unwrap().map(Result::unwrap).collect();
            (out, st, spilled)
        };
        let (a, sa, spill_a) = run(1 << 30);
        let (b, sb, spill_b) = run(4096);
        assert_eq!(spill_a, 0);
        assert!(spill_b > 3, "the small budget spilled {spill_b} runs");
        assert_eq!(a, b);
        assert_eq!(sa.duplicates, sb.duplicates);
        // Cluster sizes: 75 keys each with 1, 2 and 3 copies (k % 4 == 0 has none).
        assert_eq!(sa.cluster_sizes, sb.cluster_sizes);
        let sizes: Vec<(i32, u64)> = sa.cluster_sizes.buckets.clone().into_iter().collect();
        let b = crate::protocol::records::Histogram::bucket;
        assert_eq!(sizes, vec![(b(1.0), 75), (b(2.0), 75), (b(3.0), 75)]);
        // keys with 2 or 3 copies: one representative each, the rest duplicates
        let reps: Vec<&Decision> = a.iter().filter(|d| d.representative).collect();
        assert_eq!(reps.len(), 150);
        assert_eq!(a.len() - reps.len(), sa.duplicates as usize);
        for r in reps {
            // copy 1 has rank 1.0: it wins over copy 0 (rank 0) and copy 2 (rank 0).
            assert_eq!(r.id % 10, 1, "{r:?}");
        }
        assert!(a.windows(2).all(|w| w[0].order(&w[1]) != Ordering::Greater));
    }

    #[test]
    fn decisions_object_is_indexed_by_map_task() {
        let dir = tempfile::tempdir().unwrap();
        let ds = vec![
            Decision {
                task: 0,
                representative: true,
                id: 1,
                rep: 1,
            },
            Decision {
                task: 2,
                representative: false,
                id: 5,
                rep: 1,
            },
            Decision {
                task: 2,
                representative: false,
                id: 6,
                rep: 1,
            },
        ];
        let (mut f, len) = encode_decisions(ds.clone().into_iter().map(Ok), 3, dir.path()).unwrap();
        let mut b = Vec::new();
        f.read_to_end(&mut b).unwrap();
        assert_eq!(b.len() as u64, len);
        check_header(&b, DECISIONS_MAGIC, 3).unwrap();
        let section = |t: u64| decode::<Decision>(section_of(&b, t).unwrap()).unwrap();
        assert_eq!(section(0), ds[..1]);
        assert!(section(1).is_empty());
        assert_eq!(section(2), ds[1..]);
    }
}
