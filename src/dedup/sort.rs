//! Sorting fixed-size records in bounded memory (docs/DEDUP.md): the [`Fixed`] record
//! trait every shuffle entry implements, an external sort that spills sorted runs to
//! local disk and merges them, and the radix-style in-memory sorts the entry types
//! use. Pure local computation: it never reads or writes the store.
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::path::PathBuf;

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

/// Sorts in place by `digit` (< `n`), unstably: American flag sort, one counting
/// pass and one pass of cycles. Returns the buckets' starts (`n + 1` of them).
pub fn flag_sort<T: Copy>(buf: &mut [T], n: usize, digit: impl Fn(&T) -> usize) -> Vec<usize> {
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
pub fn range_sort<T: Copy>(
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

    /// Runs spilled to disk so far.
    pub fn spilled_runs(&self) -> usize {
        self.runs.len()
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
