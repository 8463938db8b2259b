//! The dedup shuffle's objects and its reduce (docs/DEDUP.md): the keys object a map
//! task writes, the decisions object a reduce task writes, an external sort that
//! keeps a reducer's memory under its budget by spilling sorted runs to local disk,
//! and the apply filter that turns decisions into `duplicate` rejects.
use crate::ops::dedup::{DedupKind, DedupParams, Keep};
use crate::ops::{Drop, Filter};
use arrow_array::{Array, ArrayRef, FixedSizeBinaryArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::path::PathBuf;
use std::sync::Arc;

pub const KEYS_MAGIC: &[u8; 8] = b"MDFKEYS1";
pub const DECISIONS_MAGIC: &[u8; 8] = b"MDFDECS1";
/// Bytes before the offsets table in both objects: magic, count, reserved.
pub const HEADER: u64 = 16;

/// The byte range of the header holding the offsets of section `i`
/// (partition `i` of a keys object, map task `i` of a decisions object).
pub fn offsets_range(i: u64) -> std::ops::Range<u64> {
    HEADER + 8 * i..HEADER + 8 * (i + 2)
}

/// Parses the two offsets read from `offsets_range`.
pub fn parse_offsets(b: &[u8]) -> Result<(u64, u64), String> {
    if b.len() != 16 {
        return Err(format!("offsets: expected 16 bytes, got {}", b.len()));
    }
    let a = u64::from_le_bytes(b[..8].try_into().expect("8"));
    let z = u64::from_le_bytes(b[8..].try_into().expect("8"));
    if z < a {
        return Err(format!("offsets out of order: {a} > {z}"));
    }
    Ok((a, z))
}

/// Record ids (16 hex digits of the file, 12 of the offset) as integers.
pub fn parse_id(s: &str) -> Option<u128> {
    if s.is_empty() || s.len() > 32 {
        return None;
    }
    u128::from_str_radix(s, 16).ok()
}

pub fn format_id(v: u128) -> String {
    format!("{v:028x}")
}

/// The partition of a key: contiguous key ranges, so a reducer reads one byte range.
pub fn partition_of(key: u128, partitions: u32) -> u32 {
    (((key >> 64) * partitions as u128) >> 64) as u32
}

/// The partitions of a `p_old`-partition key space that overlap partition `r` of a
/// `p_new`-partition one (both are contiguous key ranges), inclusive.
pub fn overlapping(r: u32, p_new: u32, p_old: u32) -> (u32, u32) {
    let lo = ((r as u128) << 64).div_ceil(p_new as u128);
    let hi = ((((r as u128) + 1) << 64).div_ceil(p_new as u128) - 1).min(u64::MAX as u128);
    (
        partition_of(lo << 64, p_old),
        partition_of((hi << 64) | u64::MAX as u128, p_old),
    )
}

/// A fixed-size record that can be spilled and merged.
pub trait Fixed: Copy + Send + 'static {
    const SIZE: usize;
    fn put(&self, out: &mut Vec<u8>);
    fn get(b: &[u8]) -> Self;
    /// The sort order.
    fn order(&self, other: &Self) -> Ordering;
    /// Sorts a buffer by `order` (types with a leading integer key override this).
    fn sort(buf: &mut [Self]) {
        buf.sort_unstable_by(Self::order);
    }
    /// Sort buffers kept between reduce tasks of this process (types that reducers
    /// sort in bulk): a new buffer would be faulted in page by page and zeroed by the
    /// kernel, 20% of a reduce.
    fn pool() -> Option<&'static BufferPool<Self>> {
        None
    }
}

/// Buffers of at most [`BufferPool::MAX_BYTES`], at most [`BufferPool::KEEP`] of them.
pub struct BufferPool<T>(std::sync::Mutex<Vec<Vec<T>>>);

impl<T> Default for BufferPool<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> BufferPool<T> {
    const KEEP: usize = 2;
    const MAX_BYTES: usize = 64 << 20;

    pub const fn new() -> Self {
        BufferPool(std::sync::Mutex::new(Vec::new()))
    }

    fn take(&self) -> Vec<T> {
        self.0
            .lock()
            .map(|mut v| v.pop())
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    fn give(&self, mut buf: Vec<T>) {
        if buf.capacity() * std::mem::size_of::<T>() > Self::MAX_BYTES {
            return;
        }
        buf.clear();
        if let Ok(mut v) = self.0.lock()
            && v.len() < Self::KEEP
        {
            v.push(buf);
        }
    }
}

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

/// Sorts in place by `digit` (< `n`), unstably: American flag sort, one counting
/// pass and one pass of cycles. Returns the buckets' starts (`n + 1` of them).
fn flag_sort<T: Copy>(buf: &mut [T], n: usize, digit: impl Fn(&T) -> usize) -> Vec<usize> {
    let mut next = vec![0usize; n + 1];
    for x in buf.iter() {
        next[digit(x) + 1] += 1;
    }
    for i in 0..n {
        next[i + 1] += next[i];
    }
    let starts = next.clone();
    // next[d]: the first slot of bucket d not yet holding one of its own entries.
    for d in 0..n {
        let end = starts[d + 1];
        while next[d] < end {
            let mut x = buf[next[d]];
            let mut t = digit(&x);
            while t != d {
                std::mem::swap(&mut x, &mut buf[next[t]]);
                next[t] += 1;
                t = digit(&x);
            }
            buf[next[d]] = x;
            next[d] += 1;
        }
    }
    starts
}

/// Sorts by `order` entries whose `keys` (64-bit fields that `order` compares first,
/// in that order) are spread evenly over their range, as hashed keys and row offsets
/// are: [`flag_sort`] on the top 8 bits of the first key's offset in its range (256
/// buckets: the swaps stay within 256 cache-resident fronts even when the buffer is
/// far larger than the cache), then each bucket the same way on its own range; where
/// a key is constant, the next key; buckets of a few entries by `order`. The same
/// result as a comparison sort, about twice as fast on 48-byte entries.
fn range_sort<T: Copy>(
    buf: &mut [T],
    keys: &[&dyn Fn(&T) -> u64],
    order: &impl Fn(&T, &T) -> Ordering,
) {
    let Some(key) = keys.first() else {
        buf.sort_unstable_by(order);
        return;
    };
    if buf.len() < 64 {
        buf.sort_unstable_by(order);
        return;
    }
    let (lo, top) = buf
        .iter()
        .fold((u64::MAX, 0), |(l, t), x| (l.min(key(x)), t.max(key(x))));
    if lo == top {
        return range_sort(buf, &keys[1..], order);
    }
    let span = 64 - (top - lo).leading_zeros();
    let bits = span.min(8);
    let shift = span - bits;
    let starts = flag_sort(buf, 1 << bits, |x| ((key(x) - lo) >> shift) as usize);
    for w in starts.windows(2) {
        if w[1] - w[0] > 1 {
            range_sort(&mut buf[w[0]..w[1]], keys, order);
        }
    }
}

/// Builds a keys object from raw entries of `size` bytes, each starting with its
/// 16-byte key: grouped by partition (a counting sort, one pass to count and one to
/// place; the reducer sorts inside a partition).
pub fn encode_keys(raw: &[u8], size: usize, partitions: u32) -> Vec<u8> {
    let p = partitions as usize;
    let start = HEADER as usize + 8 * (p + 1);
    let key = |e: &[u8]| u128::from_le_bytes(e[..16].try_into().expect("16"));
    let parts: Vec<u32> = raw
        .chunks_exact(size)
        .map(|e| partition_of(key(e), partitions))
        .collect();
    let mut counts = vec![0u64; p];
    for &q in &parts {
        counts[q as usize] += 1;
    }
    let mut out = vec![0u8; start + parts.len() * size];
    out[..8].copy_from_slice(KEYS_MAGIC);
    out[8..12].copy_from_slice(&partitions.to_le_bytes());
    let mut next = Vec::with_capacity(p);
    let mut off = start as u64;
    for (i, c) in counts.iter().enumerate() {
        out[16 + 8 * i..24 + 8 * i].copy_from_slice(&off.to_le_bytes());
        next.push(off as usize);
        off += c * size as u64;
    }
    out[16 + 8 * p..24 + 8 * p].copy_from_slice(&off.to_le_bytes());
    for (e, &q) in raw.chunks_exact(size).zip(&parts) {
        let at = next[q as usize];
        out[at..at + size].copy_from_slice(e);
        next[q as usize] += size;
    }
    out
}

/// The bytes of one map-side key entry of a dedup stage.
pub fn entry_size(p: &DedupParams) -> usize {
    p.kind.entry_bytes() as usize
}

/// Checks an object's magic and section count.
pub fn check_header(b: &[u8], magic: &[u8; 8], sections: u64) -> Result<(), String> {
    if b.len() < HEADER as usize || &b[..8] != magic {
        return Err("not a dedup shuffle object of this version".into());
    }
    let n = u32::from_le_bytes(b[8..12].try_into().expect("4")) as u64;
    if n != sections {
        return Err(format!("has {n} sections, expected {sections}"));
    }
    Ok(())
}

/// Parses a byte range of fixed-size entries.
pub fn decode<T: Fixed>(b: &[u8]) -> Result<Vec<T>, String> {
    Ok(entries(b)?.collect())
}

/// The entries of a section, decoded as they are iterated (no buffer: a reducer
/// pushes them straight into its sort).
pub fn entries<T: Fixed>(b: &[u8]) -> Result<impl ExactSizeIterator<Item = T> + '_, String> {
    if !b.len().is_multiple_of(T::SIZE) {
        return Err(format!(
            "{} bytes is not a whole number of {}-byte entries",
            b.len(),
            T::SIZE
        ));
    }
    Ok(b.chunks_exact(T::SIZE).map(T::get))
}

/// Sorts any number of fixed-size records in bounded memory: a full buffer is sorted
/// and written to an anonymous file in the spill directory; `finish` merges the runs.
pub struct ExternalSort<T: Fixed> {
    cap: usize,
    buf: Vec<T>,
    runs: Vec<std::fs::File>,
    dir: PathBuf,
    pub spilled_bytes: u64,
}

impl<T: Fixed> ExternalSort<T> {
    /// Buffers at most `memory_bytes` of records (at least 64).
    pub fn new(memory_bytes: u64, dir: PathBuf) -> Self {
        let cap = ((memory_bytes as usize) / std::mem::size_of::<T>().max(1)).max(64);
        ExternalSort {
            cap,
            // A pooled buffer only when it fits this sort's budget.
            buf: T::pool()
                .map(BufferPool::take)
                .filter(|b| b.capacity() <= cap)
                .unwrap_or_default(),
            runs: Vec::new(),
            dir,
            spilled_bytes: 0,
        }
    }

    pub fn push(&mut self, x: T) -> std::io::Result<()> {
        self.buf.push(x);
        if self.buf.len() >= self.cap {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> std::io::Result<()> {
        T::sort(&mut self.buf);
        std::fs::create_dir_all(&self.dir)?;
        let f = tempfile::tempfile_in(&self.dir)?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        let mut bytes = Vec::with_capacity(T::SIZE * 4096);
        for chunk in self.buf.chunks(4096) {
            bytes.clear();
            for x in chunk {
                x.put(&mut bytes);
            }
            w.write_all(&bytes)?;
        }
        self.spilled_bytes += (self.buf.len() * T::SIZE) as u64;
        let mut f = w.into_inner().map_err(|e| e.into_error())?;
        f.rewind()?;
        self.runs.push(f);
        self.buf.clear();
        Ok(())
    }

    /// All records in order, as one sorted buffer, when none were spilled (the
    /// sort is handed back otherwise). The buffer's memory stays in this sort's
    /// budget: the caller holds what the sort held.
    pub fn finish_in_memory(mut self) -> Result<Vec<T>, Self> {
        if !self.runs.is_empty() {
            return Err(self);
        }
        T::sort(&mut self.buf);
        Ok(std::mem::take(&mut self.buf))
    }

    /// All records in order.
    pub fn finish(mut self) -> std::io::Result<Box<dyn Iterator<Item = std::io::Result<T>>>> {
        if self.runs.is_empty() {
            T::sort(&mut self.buf);
            return Ok(Box::new(Sorted {
                buf: std::mem::take(&mut self.buf),
                next: 0,
            }));
        }
        if !self.buf.is_empty() {
            self.spill()?;
        }
        if let Some(p) = T::pool() {
            p.give(std::mem::take(&mut self.buf));
        }
        let mut merge = Merge {
            readers: self
                .runs
                .into_iter()
                .map(|f| BufReader::with_capacity(256 << 10, f))
                .collect(),
            heap: BinaryHeap::new(),
            failed: None,
        };
        for i in 0..merge.readers.len() {
            merge.refill(i);
        }
        Ok(Box::new(merge))
    }
}

/// A sorted in-memory buffer, handed back to its pool when dropped.
struct Sorted<T: Fixed> {
    buf: Vec<T>,
    next: usize,
}

impl<T: Fixed> Iterator for Sorted<T> {
    type Item = std::io::Result<T>;
    fn next(&mut self) -> Option<Self::Item> {
        let x = *self.buf.get(self.next)?;
        self.next += 1;
        Some(Ok(x))
    }
}

impl<T: Fixed> std::ops::Drop for Sorted<T> {
    fn drop(&mut self) {
        if let Some(p) = T::pool() {
            p.give(std::mem::take(&mut self.buf));
        }
    }
}

struct Head<T: Fixed>(T, usize);

impl<T: Fixed> PartialEq for Head<T> {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl<T: Fixed> Eq for Head<T> {}
impl<T: Fixed> PartialOrd for Head<T> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<T: Fixed> Ord for Head<T> {
    /// Reversed: BinaryHeap is a max-heap and the merge wants the least first.
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.order(&self.0).then_with(|| o.1.cmp(&self.1))
    }
}

struct Merge<T: Fixed> {
    readers: Vec<BufReader<std::fs::File>>,
    heap: BinaryHeap<Head<T>>,
    failed: Option<std::io::Error>,
}

impl<T: Fixed> Merge<T> {
    fn refill(&mut self, i: usize) {
        let mut b = vec![0u8; T::SIZE];
        match self.readers[i].read_exact(&mut b) {
            Ok(()) => self.heap.push(Head(T::get(&b), i)),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
            Err(e) => self.failed = Some(e),
        }
    }
}

impl<T: Fixed> Iterator for Merge<T> {
    type Item = std::io::Result<T>;
    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        let Head(x, i) = self.heap.pop()?;
        self.refill(i);
        Some(Ok(x))
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
                    out.push(Decision {
                        task: x.task,
                        representative: false,
                        id: x.e.id,
                        rep: r.e.id,
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

/// Writes a sectioned object through a local file (bounded memory): items arrive in
/// section order; `finish` puts the header (magic, section count, offsets) in front.
pub struct Sections {
    sizes: Vec<u64>,
    cur: usize,
    body: BufWriter<std::fs::File>,
    buf: Vec<u8>,
}

impl Sections {
    pub fn new(n: usize, dir: &std::path::Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut body = BufWriter::with_capacity(1 << 20, tempfile::tempfile_in(dir)?);
        // Room for the header, written last (no second copy of the body).
        body.write_all(&vec![0u8; (HEADER + 8 * (n as u64 + 1)) as usize])?;
        Ok(Sections {
            sizes: vec![0; n],
            cur: 0,
            body,
            buf: Vec::with_capacity(256),
        })
    }

    pub fn push<T: Fixed>(&mut self, section: usize, x: &T) -> std::io::Result<()> {
        if section >= self.sizes.len() {
            return Err(std::io::Error::other(format!(
                "section {section} of an object with {}",
                self.sizes.len()
            )));
        }
        if section < self.cur {
            return Err(std::io::Error::other(format!(
                "section {section} after section {}: out of order",
                self.cur
            )));
        }
        self.cur = section;
        self.sizes[section] += T::SIZE as u64;
        self.buf.clear();
        x.put(&mut self.buf);
        self.body.write_all(&self.buf)
    }

    /// Pushes a stream already in section order.
    pub fn push_all<T: Fixed>(
        &mut self,
        items: impl Iterator<Item = std::io::Result<T>>,
        section: impl Fn(&T) -> usize,
    ) -> std::io::Result<()> {
        for x in items {
            let x = x?;
            self.push(section(&x), &x)?;
        }
        Ok(())
    }

    /// The object as a local file, rewound, and its length.
    pub fn finish(self, magic: &[u8; 8]) -> std::io::Result<(std::fs::File, u64)> {
        let n = self.sizes.len();
        let mut out = self.body.into_inner().map_err(|e| e.into_error())?;
        let mut header = Vec::with_capacity((HEADER + 8 * (n as u64 + 1)) as usize);
        header.extend_from_slice(magic);
        header.extend_from_slice(&(n as u32).to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        let mut off = HEADER + 8 * (n as u64 + 1);
        for s in &self.sizes {
            header.extend_from_slice(&off.to_le_bytes());
            off += s;
        }
        header.extend_from_slice(&off.to_le_bytes());
        out.rewind()?;
        out.write_all(&header)?;
        out.rewind()?;
        Ok((out, off))
    }
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

/// Section `i` of a shuffle object held in memory.
pub fn section_of(obj: &[u8], i: u64) -> Result<&[u8], String> {
    let r = offsets_range(i);
    let head = obj
        .get(r.start as usize..r.end as usize)
        .ok_or("object shorter than its header")?;
    let (a, z) = parse_offsets(head)?;
    obj.get(a as usize..z as usize)
        .ok_or_else(|| "section past the end of the object".to_string())
}

/// Appends the key entries of a batch (raw, [`entry_size`] bytes each): exact keys
/// as [`KeyEntry`], near-duplicate values as one entry per band
/// ([`super::near::NearEntry`]). Records without a key have no entries.
pub fn append_keys(batch: &RecordBatch, p: &DedupParams, out: &mut Vec<u8>) -> Result<(), String> {
    let ids = batch
        .column_by_name(crate::records::ID)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or("no string id column")?;
    let ranks: Option<Vec<f64>> = match &p.keep {
        Keep::LowestId => None,
        Keep::Highest(c) => {
            let col = batch
                .column_by_name(c)
                .ok_or_else(|| format!("no column {c:?}"))?;
            let f = arrow_cast::cast(col, &DataType::Float64).map_err(|e| e.to_string())?;
            let f = f
                .as_any()
                .downcast_ref::<arrow_array::Float64Array>()
                .expect("cast to f64");
            Some(
                (0..f.len())
                    .map(|i| {
                        if f.is_null(i) || f.value(i).is_nan() {
                            f64::NEG_INFINITY
                        } else {
                            f.value(i)
                        }
                    })
                    .collect(),
            )
        }
    };
    let col = batch
        .column_by_name(&p.key)
        .ok_or_else(|| format!("no key column {:?}", p.key))?;
    let values = KeyValues::of(col, &p.kind)?;
    out.reserve(batch.num_rows() * entry_size(p));
    let mut buf = Vec::new();
    for i in 0..batch.num_rows() {
        if !values.get(i, &mut buf)? {
            continue;
        }
        let id = parse_id(ids.value(i))
            .ok_or_else(|| format!("record id {:?} is not a hex id", ids.value(i)))?;
        let rank = ranks.as_ref().map_or(0.0, |r| r[i]);
        match &p.kind {
            DedupKind::Exact => KeyEntry {
                key: u128::from_le_bytes(buf[..16].try_into().expect("16 bytes")),
                id,
                rank,
            }
            .put(out),
            kind => super::near::append_entries(kind, &buf, id, rank, out),
        }
    }
    Ok(())
}

/// The key column of a batch, read as bytes per row: the 16-byte key, the
/// signature, or the perceptual hash as 8 little-endian bytes.
enum KeyValues<'a> {
    Fixed(&'a FixedSizeBinaryArray),
    U64(&'a arrow_array::UInt64Array),
    I64(&'a arrow_array::Int64Array),
    Hex(&'a StringArray),
}

impl<'a> KeyValues<'a> {
    fn of(col: &'a ArrayRef, kind: &DedupKind) -> Result<Self, String> {
        let any = col.as_any();
        let v = match kind {
            DedupKind::Exact | DedupKind::Minhash { .. } => {
                any.downcast_ref().map(KeyValues::Fixed)
            }
            DedupKind::Phash { .. } => any
                .downcast_ref()
                .map(KeyValues::U64)
                .or_else(|| any.downcast_ref().map(KeyValues::I64))
                .or_else(|| any.downcast_ref().map(KeyValues::Hex)),
        };
        v.ok_or_else(|| {
            format!(
                "key column of type {} does not fit the dedup kind",
                col.data_type()
            )
        })
    }

    /// Fills `buf` with row `i`'s value; false for a null (no key).
    fn get(&self, i: usize, buf: &mut Vec<u8>) -> Result<bool, String> {
        buf.clear();
        match self {
            KeyValues::Fixed(a) if a.is_valid(i) => buf.extend_from_slice(a.value(i)),
            KeyValues::U64(a) if a.is_valid(i) => buf.extend_from_slice(&a.value(i).to_le_bytes()),
            KeyValues::I64(a) if a.is_valid(i) => buf.extend_from_slice(&a.value(i).to_le_bytes()),
            KeyValues::Hex(a) if a.is_valid(i) => {
                let s = a.value(i);
                let h = u64::from_str_radix(s, 16)
                    .ok()
                    .filter(|_| s.len() == 16)
                    .ok_or_else(|| format!("perceptual hash {s:?} is not 16 hex digits"))?;
                buf.extend_from_slice(&h.to_le_bytes());
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The apply filter of one map task: its records' decisions (id → representative).
pub struct Apply {
    pub decisions: crate::kernels::FastMap<u128, u128>,
    pub cluster_column: bool,
}

impl Filter for Apply {
    fn check(&self, input: &Schema) -> Result<(), String> {
        input
            .field_with_name(crate::records::ID)
            .map(|_| ())
            .map_err(|_| "no id column".into())
    }
    fn filter(&self, batch: &RecordBatch) -> Result<Vec<Option<Drop>>, String> {
        Ok(self.annotate(batch)?.1)
    }
    /// Never record by record: quarantining a representative would drop its whole
    /// cluster (its duplicates are rejected in favour of it).
    fn splittable(&self) -> bool {
        false
    }
    fn added_fields(&self, _input: &Schema) -> Vec<Field> {
        if self.cluster_column {
            vec![Field::new(
                crate::ops::dedup::CLUSTER_COLUMN,
                DataType::Utf8,
                true,
            )]
        } else {
            vec![]
        }
    }
    fn annotate(&self, batch: &RecordBatch) -> Result<(Vec<ArrayRef>, Vec<Option<Drop>>), String> {
        let ids = batch
            .column_by_name(crate::records::ID)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .ok_or("no string id column")?;
        let mut verdicts = Vec::with_capacity(ids.len());
        let mut cluster = Vec::with_capacity(ids.len());
        for i in 0..ids.len() {
            let rep =
                parse_id(ids.value(i)).and_then(|id| self.decisions.get(&id).map(|&rep| (id, rep)));
            match rep {
                Some((id, rep)) if id != rep => {
                    verdicts.push(Some(Drop {
                        reason: "duplicate",
                        detail: Some(format_id(rep)),
                    }));
                    cluster.push(Some(format_id(rep)));
                }
                Some((_, rep)) => {
                    verdicts.push(None);
                    cluster.push(Some(format_id(rep)));
                }
                None => {
                    verdicts.push(None);
                    cluster.push(None);
                }
            }
        }
        let added: Vec<ArrayRef> = if self.cluster_column {
            vec![Arc::new(StringArray::from(cluster))]
        } else {
            vec![]
        };
        Ok((added, verdicts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn partitions_are_contiguous_key_ranges() {
        let p = 7;
        let mut last = 0;
        for i in 0..1000u128 {
            let key = i * (u128::MAX / 1000);
            let part = partition_of(key, p);
            assert!(part >= last && part < p);
            last = part;
        }
        assert_eq!(partition_of(u128::MAX, p), p - 1);
        assert_eq!(partition_of(0, p), 0);
    }

    #[test]
    fn overlapping_partitions_cover_every_key() {
        let mut x = 99u128;
        for (pn, po) in [(1, 1), (4, 7), (7, 4), (16, 16), (3, 1000), (1000, 3)] {
            for _ in 0..2000 {
                x = x
                    .wrapping_mul(0x2360_ED05_1FC6_5DA4_4385_DF64_9FCC_F645)
                    .wrapping_add(1);
                let r = partition_of(x, pn);
                let (lo, hi) = overlapping(r, pn, po);
                let q = partition_of(x, po);
                assert!(
                    lo <= q && q <= hi,
                    "key in new {r}/{pn}: old {q} not in {lo}..={hi} of {po}"
                );
            }
            let (lo, hi) = overlapping(0, pn, po);
            assert_eq!(lo, 0);
            assert!(hi < po);
            assert_eq!(overlapping(pn - 1, pn, po).1, po - 1);
        }
    }

    #[test]
    fn keys_object_sections_hold_their_partition() {
        let entries: Vec<KeyEntry> = (0..500u128)
            .map(|i| KeyEntry {
                key: i.wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835),
                id: i,
                rank: 0.0,
            })
            .collect();
        let p = 5;
        let mut raw = Vec::new();
        for e in &entries {
            e.put(&mut raw);
        }
        let obj = encode_keys(&raw, KeyEntry::SIZE, p);
        check_header(&obj, KEYS_MAGIC, p as u64).unwrap();
        let mut seen = 0;
        for r in 0..p as u64 {
            let part: Vec<KeyEntry> = decode(section_of(&obj, r).unwrap()).unwrap();
            assert!(part.iter().all(|x| partition_of(x.key, p) == r as u32));
            seen += part.len();
        }
        assert_eq!(seen, entries.len());
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
            let spilled = s.runs.len();
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
