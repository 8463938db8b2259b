//! Exact-substring dedup's shuffle (docs/DEDUP.md, "Exact substrings"): the window
//! entries a map task writes ([`WindowEntry`]: one per window of `min_tokens` tokens
//! of every record), the same with the map task a reducer read them from
//! ([`WindowSourced`]), the marks a reducer writes ([`Mark`]: a window to cut), and the
//! pure computation between them: group equal window hashes, keep the first
//! occurrence (lowest record id, then position) or none, mark the rest. No store
//! access: the reduce and apply tasks do the I/O.
use super::exact::ReduceStats;
use super::format::{MARKS_MAGIC, Sections};
use super::sort::{BufferPool, ExternalSort, Fixed, flag_sort, range_sort};
use std::cmp::Ordering;
use std::path::PathBuf;

/// One window of one record, as a map task writes it into its keys object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowEntry {
    /// The window's 128-bit hash ([`crate::kernels::substring::window_hashes`]).
    pub hash: u128,
    pub id: u128,
    /// The position of the window's first token in the record's text.
    pub pos: u32,
}

impl Fixed for WindowEntry {
    const SIZE: usize = 36;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.hash.to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.pos.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        WindowEntry {
            hash: u128::from_le_bytes(b[0..16].try_into().expect("16")),
            id: u128::from_le_bytes(b[16..32].try_into().expect("16")),
            pos: u32::from_le_bytes(b[32..36].try_into().expect("4")),
        }
    }
    /// Hash, then the first occurrence first: lowest id, then lowest position.
    fn order(&self, o: &Self) -> Ordering {
        (self.hash, self.id, self.pos).cmp(&(o.hash, o.id, o.pos))
    }
}

/// A window entry with the index of the map task it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSourced {
    pub e: WindowEntry,
    pub task: u32,
}

impl Fixed for WindowSourced {
    const SIZE: usize = 40;
    fn put(&self, out: &mut Vec<u8>) {
        self.e.put(out);
        out.extend_from_slice(&self.task.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        WindowSourced {
            e: WindowEntry::get(&b[..36]),
            task: u32::from_le_bytes(b[36..40].try_into().expect("4")),
        }
    }
    fn pool() -> Option<&'static BufferPool<Self>> {
        static POOL: BufferPool<WindowSourced> = BufferPool::new();
        Some(&POOL)
    }
    /// Hashes are spread evenly over the partition's range: see [`range_sort`].
    fn sort(buf: &mut [Self]) {
        range_sort(
            buf,
            &[&|x: &Self| (x.e.hash >> 64) as u64, &|x: &Self| {
                x.e.hash as u64
            }],
            &Self::order,
        );
    }
    fn order(&self, o: &Self) -> Ordering {
        self.e.order(&o.e).then_with(|| self.task.cmp(&o.task))
    }
}

/// A window of record `id` (of map task `task`), tokens `pos..pos + min_tokens`: to
/// cut, or (`kept`) the first occurrence of a repeated window, which no cut may touch
/// (`keep: first`), so overlapping cut windows never eat into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub task: u32,
    pub pos: u32,
    pub kept: bool,
    pub id: u128,
}

/// The bit of a mark's position field that flags a kept window (positions are below
/// 2³¹: texts and token lists are under 2 GiB entries).
const KEPT: u32 = 1 << 31;

impl Fixed for Mark {
    const SIZE: usize = 24;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.task.to_le_bytes());
        let flag = if self.kept { KEPT } else { 0 };
        out.extend_from_slice(&(self.pos | flag).to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        let p = u32::from_le_bytes(b[4..8].try_into().expect("4"));
        Mark {
            task: u32::from_le_bytes(b[0..4].try_into().expect("4")),
            pos: p & !KEPT,
            kept: p & KEPT != 0,
            id: u128::from_le_bytes(b[8..24].try_into().expect("16")),
        }
    }
    fn order(&self, o: &Self) -> Ordering {
        (self.task, self.id, self.pos).cmp(&(o.task, o.id, o.pos))
    }
    fn pool() -> Option<&'static BufferPool<Self>> {
        static POOL: BufferPool<Mark> = BufferPool::new();
        Some(&POOL)
    }
    /// By task (a counting pass), then each task's (id, pos) by [`range_sort`].
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

/// What a marks object holds: marked windows of one record coalesced, tokens
/// `start..end`, to cut or (`kept`) to keep. A reducer sees every `P`-th window of a
/// repeated span on average (windows go to reducers by hash), so windows of one span
/// lie less than `min_tokens` apart when `P < min_tokens` and become one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub task: u32,
    pub start: u32,
    pub end: u32,
    pub kept: bool,
    pub id: u128,
}

impl Fixed for Run {
    const SIZE: usize = 28;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.task.to_le_bytes());
        let flag = if self.kept { KEPT } else { 0 };
        out.extend_from_slice(&(self.start | flag).to_le_bytes());
        out.extend_from_slice(&self.end.to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        let s = u32::from_le_bytes(b[4..8].try_into().expect("4"));
        Run {
            task: u32::from_le_bytes(b[0..4].try_into().expect("4")),
            start: s & !KEPT,
            end: u32::from_le_bytes(b[8..12].try_into().expect("4")),
            kept: s & KEPT != 0,
            id: u128::from_le_bytes(b[12..28].try_into().expect("16")),
        }
    }
    fn order(&self, o: &Self) -> Ordering {
        (self.task, self.id, self.start).cmp(&(o.task, o.id, o.start))
    }
}

/// Coalesces marks sorted by (task, id, pos) into runs of `k`-token windows: a window
/// starting inside or right after the record's current run of the same kind extends
/// it (the union of the windows, exactly). Runs come out in (task, id) order.
pub fn coalesce(
    marks: impl Iterator<Item = std::io::Result<Mark>>,
    k: u32,
    mut emit: impl FnMut(Run) -> std::io::Result<()>,
) -> std::io::Result<()> {
    // The open runs of the current record: to cut, and kept.
    let mut open: [Option<Run>; 2] = [None, None];
    for m in marks {
        let m = m?;
        let end = m.pos.saturating_add(k);
        let slot = usize::from(m.kept);
        if open
            .iter()
            .flatten()
            .any(|r| (r.task, r.id) != (m.task, m.id))
        {
            for r in open.iter_mut().filter_map(Option::take) {
                emit(r)?;
            }
        }
        match &mut open[slot] {
            Some(r) if m.pos <= r.end => r.end = r.end.max(end),
            cur => {
                if let Some(r) = cur.take() {
                    emit(r)?;
                }
                *cur = Some(Run {
                    task: m.task,
                    start: m.pos,
                    end,
                    kept: m.kept,
                    id: m.id,
                });
            }
        }
    }
    for r in open.into_iter().flatten() {
        emit(r)?;
    }
    Ok(())
}

/// What a reduce marks: windows of `k` units (substring tokens, or single paragraphs)
/// whose hash occurs at least `min_count` times, at every occurrence but the first
/// (`keep_first`, the first then marked `kept`) or at all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marking {
    pub keep_first: bool,
    pub k: u32,
    pub min_count: u32,
}

/// Groups sorted window entries by hash and marks every group of at least
/// `how.min_count` occurrences: each occurrence but the first (`keep_first`, the
/// first then marked `kept`) or all of them. A group is held until it is that large
/// (at most `min_count - 1` entries). Counts: `keys` windows, `distinct` hashes,
/// `duplicates` windows to cut; `cluster_sizes`, occurrences per hash.
pub fn mark(
    sorted: impl Iterator<Item = std::io::Result<WindowSourced>>,
    how: Marking,
    memory_bytes: u64,
    dir: PathBuf,
) -> std::io::Result<(ExternalSort<Mark>, ReduceStats)> {
    let mut out = ExternalSort::<Mark>::new(memory_bytes / 2, dir);
    let mut stats = ReduceStats::default();
    let min = u64::from(how.min_count.max(2));
    let mark_of = |x: &WindowSourced, kept: bool| Mark {
        task: x.task,
        pos: x.e.pos,
        kept,
        id: x.e.id,
    };
    // The current group's hash and size, and its entries while it is below `min`.
    let mut hash: Option<u128> = None;
    let mut size = 0u64;
    let mut held: Vec<WindowSourced> = Vec::new();
    for x in sorted {
        let x = x?;
        stats.keys += 1;
        if hash != Some(x.e.hash) {
            if size > 0 {
                stats.cluster_sizes.record(size as f64);
            }
            stats.distinct += 1;
            hash = Some(x.e.hash);
            size = 0;
            held.clear();
        }
        size += 1;
        if size < min {
            held.push(x);
            continue;
        }
        if size == min {
            for (i, h) in held.drain(..).enumerate() {
                let kept = i == 0 && how.keep_first;
                out.push(mark_of(&h, kept))?;
                stats.duplicates += u64::from(!kept);
            }
        }
        out.push(mark_of(&x, false))?;
        stats.duplicates += 1;
    }
    if size > 0 {
        stats.cluster_sizes.record(size as f64);
    }
    Ok((out, stats))
}

/// The rest of a substring (or paragraph) reduce once every entry is in `sorter`:
/// merge, mark, and write the marks object (one section per map task: the marked
/// windows coalesced into runs per record) to a local file. Returns it, its length
/// and the counts.
pub fn finish_reduce(
    sorter: ExternalSort<WindowSourced>,
    how: Marking,
    memory_bytes: u64,
    dir: PathBuf,
    map_tasks: u32,
) -> std::io::Result<(std::fs::File, u64, ReduceStats)> {
    let spilled = sorter.spilled_bytes;
    let merged = sorter.finish()?;
    let (marks, mut stats) = mark(merged, how, memory_bytes, dir.clone())?;
    stats.spilled_bytes = spilled + marks.spilled_bytes;
    let mut out = Sections::new(map_tasks as usize, &dir)?;
    coalesce(marks.finish()?, how.k, |r| out.push(r.task as usize, &r))?;
    let (file, len) = out.finish(MARKS_MAGIC)?;
    Ok((file, len, stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedup::format::{check_header, decode, section_of};
    use std::collections::{BTreeMap, BTreeSet};
    use std::io::Read;

    fn how(keep_first: bool, k: u32) -> Marking {
        Marking {
            keep_first,
            k,
            min_count: 2,
        }
    }

    fn w(hash: u128, id: u128, pos: u32, task: u32) -> WindowSourced {
        WindowSourced {
            e: WindowEntry { hash, id, pos },
            task,
        }
    }

    /// Paragraph dedup's marking: a group is marked only once it has `min_count`
    /// occurrences, and then wholly (the first kept, or not).
    #[test]
    fn groups_below_min_count_are_not_marked() {
        let mut input = vec![];
        // Hash 1: twice; hash 2: three times; hash 3: five times; hash 4: once.
        for (h, n) in [(1u128, 2u32), (2, 3), (3, 5), (4, 1)] {
            for j in 0..n {
                input.push(w(h << 100, 10 + u128::from(j), j, j % 2));
            }
        }
        for (keep_first, min_count) in [(true, 3), (false, 3), (true, 2), (false, 6)] {
            let dir = std::env::temp_dir();
            let how = Marking {
                keep_first,
                k: 1,
                min_count,
            };
            let (m, stats) = mark(input.iter().copied().map(Ok), how, 1 << 30, dir).unwrap();
            let m = m.finish_in_memory().ok().unwrap();
            let mut want = vec![];
            for (h, n) in [(1u128, 2u32), (2, 3), (3, 5), (4, 1)] {
                if n < min_count {
                    continue;
                }
                for j in 0..n {
                    want.push(Mark {
                        task: j % 2,
                        pos: j,
                        kept: keep_first && j == 0,
                        id: 10 + u128::from(j),
                    });
                    let _ = h;
                }
            }
            want.sort_by(Mark::order);
            let mut got = m.clone();
            got.sort_by(Mark::order);
            assert_eq!(got, want, "keep_first {keep_first}, min_count {min_count}");
            assert_eq!(stats.keys, 11);
            assert_eq!(stats.distinct, 4);
            let cut = want.iter().filter(|m| !m.kept).count() as u64;
            assert_eq!(stats.duplicates, cut);
        }
    }

    #[test]
    fn sorts_equal_a_comparison_sort() {
        let mut next = crate::kernels::xorshift(0x2545_F491_4F6C_DD1Du64);
        for (n, spread) in [(10, 64), (5_000, 64), (70_000, 30), (3_000, 0)] {
            let mut v: Vec<WindowSourced> = (0..n)
                .map(|_| {
                    let h = if spread == 0 {
                        7
                    } else {
                        next() >> (64 - spread)
                    };
                    w(
                        ((h as u128) << 64) | (next() % 3) as u128,
                        (next() % 50) as u128,
                        (next() % 100) as u32,
                        (next() % 4) as u32,
                    )
                })
                .collect();
            let mut want = v.clone();
            want.sort_by(WindowSourced::order);
            WindowSourced::sort(&mut v);
            assert!(v == want, "n={n} spread={spread}");
            let mut m: Vec<Mark> = v
                .iter()
                .map(|x| Mark {
                    task: x.task,
                    pos: x.e.pos,
                    kept: x.e.pos % 3 == 0,
                    id: x.e.id << 64 | x.e.hash,
                })
                .collect();
            let mut want = m.clone();
            want.sort_by(Mark::order);
            Mark::sort(&mut m);
            assert!(m == want, "marks n={n}");
        }
    }

    /// Every occurrence of a repeated window but the lowest (id, pos) is marked (all
    /// of them without `keep_first`); single windows never are; spilling changes
    /// nothing; each map task's section holds its marks sorted by (id, pos).
    #[test]
    fn marks_every_repeat_and_do_not_depend_on_spilling() {
        let dir = tempfile::tempdir().unwrap();
        let mut input = Vec::new();
        for h in 0..400u128 {
            for copy in 0..(h % 4) as u32 {
                // The same window in records of several tasks, twice in one record.
                let id = 1000 - h + (copy as u128 % 2);
                input.push(w(h << 100, id, copy * 7, copy % 3));
            }
        }
        // A span of 20 windows in two records: one run each.
        for p in 0..20u32 {
            let h = (500 + p as u128) << 100;
            input.push(w(h, 5000, p, 0));
            input.push(w(h, 5001, 3 + p, 1));
        }
        for keep_first in [true, false] {
            let k = 8;
            let run = |memory: u64| {
                let mut s = ExternalSort::<WindowSourced>::new(memory, dir.path().to_path_buf());
                for x in input.iter().rev() {
                    s.push(*x).unwrap();
                }
                let (mut f, len, stats) =
                    finish_reduce(s, how(keep_first, k), memory, dir.path().to_path_buf(), 3)
                        .unwrap();
                let mut b = Vec::new();
                f.read_to_end(&mut b).unwrap();
                assert_eq!(b.len() as u64, len);
                (b, stats)
            };
            let (a, sa) = run(1 << 30);
            let (b, sb) = run(4096);
            assert_eq!(a, b, "spilling changed the marks object");
            assert!(sb.spilled_bytes > 0 && sa.spilled_bytes == 0);
            check_header(&a, MARKS_MAGIC, 3).unwrap();
            // Brute force: per hash, the occurrences sorted by (id, pos); the tokens each
            // (task, id, kept) covers.
            type Cover = BTreeMap<(u32, u128, bool), BTreeSet<u32>>;
            let mut want = Cover::new();
            let (mut cut, mut marks) = (0, 0);
            for h in (0..400u128).chain(500..520) {
                let mut occ: Vec<&WindowSourced> =
                    input.iter().filter(|x| x.e.hash == h << 100).collect();
                occ.sort_by_key(|x| (x.e.id, x.e.pos));
                if occ.len() < 2 {
                    continue;
                }
                for (j, x) in occ.iter().enumerate() {
                    let kept = keep_first && j == 0;
                    cut += usize::from(!kept);
                    marks += 1;
                    want.entry((x.task, x.e.id, kept))
                        .or_default()
                        .extend(x.e.pos..x.e.pos + k);
                }
            }
            let mut got = Cover::new();
            let mut runs = 0;
            for t in 0..3 {
                let s: Vec<Run> = decode(section_of(&a, t).unwrap()).unwrap();
                assert!(s.iter().all(|m| m.task == t as u32));
                for r in &s {
                    let c = got.entry((r.task, r.id, r.kept)).or_default();
                    assert!((r.start..r.end).all(|p| c.insert(p)), "runs overlap: {r:?}");
                }
                runs += s.len();
            }
            assert_eq!(got, want, "keep_first={keep_first}");
            assert!(
                runs < marks,
                "{runs} runs for {marks} windows: nothing coalesced"
            );
            assert_eq!(sa.duplicates, cut as u64);
            assert_eq!(sa.keys, input.len() as u64);
            assert_eq!(sa.distinct, 320);
        }
    }

    /// Window hashes are 128 bits because colliding windows are cut as if repeated.
    /// Forced here with hashes cut to 24 bits: distinct windows collide in about
    /// D²/2²⁵ pairs (the birthday bound docs/DEDUP.md extrapolates to 128 bits:
    /// 1.5 × 10⁻¹⁷ colliding pairs at 10¹¹ windows), and every collision marks windows
    /// that occur once, which the full hashes never do.
    #[test]
    fn forced_collisions_follow_the_birthday_bound_and_cut_unique_windows() {
        use crate::kernels::substring::{window_hashes, window_hashes_with};
        use std::collections::HashMap;
        let mut next = crate::kernels::xorshift(0x5DEE_CE66_D1CE_4E5Bu64);
        let docs: Vec<String> = (0..4000)
            .map(|_| {
                (0..30)
                    .map(|_| format!("w{}", next() % 5000))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        let (k, bits) = (5, 24);
        let short = |w: &[u8]| xxhash_rust::xxh3::xxh3_128(w) >> (128 - bits);
        let entries = |hash: &dyn Fn(&str) -> Vec<(u32, u128)>| -> Vec<WindowSourced> {
            let mut v: Vec<WindowSourced> = docs
                .iter()
                .enumerate()
                .flat_map(|(d, t)| {
                    hash(t)
                        .into_iter()
                        .map(move |(pos, hash)| w(hash, d as u128, pos, 0))
                })
                .collect();
            v.sort_by(WindowSourced::order);
            v
        };
        let full = entries(&|t| window_hashes(t, k));
        let cut = entries(&|t| window_hashes_with(t, k, short));
        // Distinct windows by full hash, and the colliding pairs among them.
        let at = |v: &[WindowSourced]| -> HashMap<(u128, u32), u128> {
            v.iter().map(|x| ((x.e.id, x.e.pos), x.e.hash)).collect()
        };
        let (fa, ca) = (at(&full), at(&cut));
        let mut groups: HashMap<u128, std::collections::HashSet<u128>> = HashMap::new();
        for (place, h) in &ca {
            groups.entry(*h).or_default().insert(fa[place]);
        }
        let d = fa.values().collect::<std::collections::HashSet<_>>().len() as f64;
        let pairs: f64 = groups
            .values()
            .map(|g| (g.len() * (g.len() - 1) / 2) as f64)
            .sum();
        let expected = d * (d - 1.0) / 2.0 / 2f64.powi(bits);
        assert!(
            (pairs - expected).abs() < 0.3 * expected,
            "{pairs} colliding pairs of {d} distinct windows, expected {expected:.0}"
        );
        let marks = |v: &[WindowSourced]| -> Vec<Mark> {
            let dir = std::env::temp_dir();
            let (m, _) = mark(v.iter().copied().map(Ok), how(true, 8), 1 << 30, dir).unwrap();
            m.finish_in_memory().ok().unwrap()
        };
        let (mf, mc) = (marks(&full), marks(&cut));
        let unique: Vec<&Mark> = mc.iter().filter(|m| !mf.contains(m)).collect();
        assert!(
            unique.len() as f64 >= expected * 0.5,
            "{} wrong marks",
            unique.len()
        );
        // Each wrong mark is a window whose short hash a different window shares.
        for m in &unique {
            assert!(groups[&ca[&(m.id, m.pos)]].len() >= 2);
        }
        assert!(
            mf.iter().all(|m| mc.contains(m)),
            "collisions only add marks"
        );
    }
}
