//! The map side of the dedup shuffle in bounded memory: a map task's key entries are
//! buffered up to a byte budget; a full buffer is grouped by partition (stably, so
//! entries keep their arrival order) and appended as a run to one anonymous file in
//! the spill directory (one descriptor, whatever the number of runs); `finish` streams the keys object (docs/DEDUP.md) by concatenating, per
//! partition, each run's section in run order, then the buffer's. The object's bytes
//! are those [`super::format::encode_keys`] gives for all entries at once, whatever the
//! budget. It never reads the store; the caller uploads what `finish` yields.
use super::format::{HEADER, KEYS_MAGIC, encode_keys, partition_of};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

/// The most buffered bytes encoded in memory at the end (a copy of the buffer).
const IN_MEMORY_BYTES: usize = 8 << 20;

/// One spilled run: where it starts in the spill file, and how many entries of each
/// partition it holds (grouped by partition, in partition order).
#[derive(Debug)]
struct Run {
    start: u64,
    counts: Vec<u64>,
}

/// Key entries of `size` bytes (each starting with its 16-byte key), held in at most
/// `budget` bytes of buffer.
#[derive(Debug)]
pub struct KeySpill {
    size: usize,
    partitions: u32,
    cap: usize,
    buf: Vec<u8>,
    runs: Vec<Run>,
    /// The spill file (created at the first spill) and its length.
    file: Option<std::fs::File>,
    spilled: u64,
    dir: PathBuf,
    rows: u64,
    peak: usize,
}

impl KeySpill {
    /// A buffer of at most `budget` bytes (rounded down to whole entries, at least one).
    pub fn new(size: usize, partitions: u32, budget: u64, dir: PathBuf) -> Self {
        let cap = ((budget as usize) / size).max(1) * size;
        KeySpill {
            size,
            partitions,
            cap,
            buf: Vec::new(),
            runs: Vec::new(),
            file: None,
            spilled: 0,
            dir,
            rows: 0,
            peak: 0,
        }
    }

    /// Appends whole entries, spilling each time the buffer is full.
    pub fn push(&mut self, mut entries: &[u8]) -> std::io::Result<()> {
        debug_assert!(entries.len().is_multiple_of(self.size));
        self.rows += (entries.len() / self.size) as u64;
        while !entries.is_empty() {
            if self.buf.len() == self.cap {
                self.spill()?;
            }
            let k = (self.cap - self.buf.len()).min(entries.len());
            if self.buf.capacity() < self.buf.len() + k {
                // Grow by doubling, never past the budget.
                let want = (self.buf.capacity() * 2).clamp(self.buf.len() + k, self.cap);
                self.buf.reserve_exact(want - self.buf.len());
            }
            self.buf.extend_from_slice(&entries[..k]);
            entries = &entries[k..];
            self.peak = self.peak.max(self.buf.capacity());
        }
        Ok(())
    }

    /// Entries pushed so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Runs spilled to disk so far.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// The most bytes the buffer ever held allocated (never above the budget).
    pub fn peak_bytes(&self) -> usize {
        self.peak
    }

    /// The budget in bytes (whole entries).
    pub fn budget_bytes(&self) -> usize {
        self.cap
    }

    /// The partition of each buffered entry and a stable order grouping them.
    fn grouped(&self) -> (Vec<u64>, Vec<u32>) {
        let p = self.partitions as usize;
        let key = |e: &[u8]| u128::from_le_bytes(e[..16].try_into().expect("16"));
        let parts: Vec<u32> = self
            .buf
            .chunks_exact(self.size)
            .map(|e| partition_of(key(e), self.partitions))
            .collect();
        let mut counts = vec![0u64; p];
        for &q in &parts {
            counts[q as usize] += 1;
        }
        let mut next: Vec<usize> = Vec::with_capacity(p);
        let mut at = 0usize;
        for c in &counts {
            next.push(at);
            at += *c as usize;
        }
        let mut order = vec![0u32; parts.len()];
        for (i, &q) in parts.iter().enumerate() {
            order[next[q as usize]] = i as u32;
            next[q as usize] += 1;
        }
        (counts, order)
    }

    fn spill(&mut self) -> std::io::Result<()> {
        let (counts, order) = self.grouped();
        if self.file.is_none() {
            std::fs::create_dir_all(&self.dir)?;
            self.file = Some(tempfile::tempfile_in(&self.dir)?);
        }
        let f = self.file.as_mut().expect("spill file");
        let mut w = BufWriter::with_capacity(1 << 20, f);
        for &i in &order {
            let i = i as usize * self.size;
            w.write_all(&self.buf[i..i + self.size])?;
        }
        w.flush()?;
        self.runs.push(Run {
            start: self.spilled,
            counts,
        });
        self.spilled += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// The keys object: its length and a reader of its bytes. Small and unspilled, it
    /// is encoded in memory; otherwise the buffer is spilled too (no second copy of
    /// it in memory) and the object is read from the runs, a partition at a time.
    pub fn finish(mut self) -> std::io::Result<(u64, Box<dyn Read + Send>)> {
        if self.runs.is_empty() && self.buf.len() <= IN_MEMORY_BYTES {
            let bytes = encode_keys(&self.buf, self.size, self.partitions);
            return Ok((bytes.len() as u64, Box::new(std::io::Cursor::new(bytes))));
        }
        if !self.buf.is_empty() {
            self.spill()?;
        }
        self.buf = Vec::new();
        let p = self.partitions as usize;
        let start = HEADER + 8 * (p as u64 + 1);
        let mut header = Vec::with_capacity(start as usize);
        header.extend_from_slice(KEYS_MAGIC);
        header.extend_from_slice(&self.partitions.to_le_bytes());
        header.extend_from_slice(&[0; 4]);
        let mut off = start;
        for q in 0..p {
            header.extend_from_slice(&off.to_le_bytes());
            off += self.runs.iter().map(|r| r.counts[q]).sum::<u64>() * self.size as u64;
        }
        header.extend_from_slice(&off.to_le_bytes());
        Ok((
            off,
            Box::new(Merged {
                header: std::io::Cursor::new(header),
                file: self.file.take().expect("spilled"),
                at: self.runs.iter().map(|r| r.start).collect(),
                runs: self.runs,
                size: self.size as u64,
                q: 0,
                r: 0,
                left: 0,
            }),
        ))
    }
}

/// The keys object read from spilled runs: the header, then for each partition `q`
/// the section `q` of every run in order (each run is read front to back).
struct Merged {
    header: std::io::Cursor<Vec<u8>>,
    file: std::fs::File,
    runs: Vec<Run>,
    /// Where the next unread byte of each run is in the file.
    at: Vec<u64>,
    size: u64,
    /// The next section to start: partition `q` of run `r`.
    q: usize,
    r: usize,
    /// Bytes left of the section being read (of run `r - 1`, or the last run).
    left: u64,
}

impl Read for Merged {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = self.header.read(out)?;
        if n > 0 || out.is_empty() {
            return Ok(n);
        }
        let partitions = self.runs.first().map_or(0, |r| r.counts.len());
        while self.left == 0 {
            if self.q == partitions {
                return Ok(0);
            }
            self.left = self.runs[self.r].counts[self.q] * self.size;
            self.r += 1;
            if self.r == self.runs.len() {
                self.r = 0;
                self.q += 1;
            }
        }
        // The run whose section is being read: the one before `r`.
        let r = self.r.checked_sub(1).unwrap_or(self.runs.len() - 1);
        let want = (out.len() as u64).min(self.left) as usize;
        self.file.seek(SeekFrom::Start(self.at[r]))?;
        let n = self.file.read(&mut out[..want])?;
        self.at[r] += n as u64;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "a spilled keys run ended early",
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exact-dedup-sized entries (40 bytes) with spread keys and a serial number.
    fn entries(n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..n as u64 {
            let key = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) as u128) << 64 | i as u128;
            out.extend_from_slice(&key.to_le_bytes());
            out.extend_from_slice(&[i as u8; 24]);
        }
        out
    }

    fn object(s: KeySpill) -> Vec<u8> {
        let (len, mut r) = s.finish().unwrap();
        let mut v = Vec::new();
        r.read_to_end(&mut v).unwrap();
        assert_eq!(v.len() as u64, len);
        v
    }

    #[test]
    fn a_tiny_budget_spills_runs_and_writes_the_same_object_in_bounded_memory() {
        let dir = tempfile::tempdir().unwrap();
        let raw = entries(1000);
        for partitions in [1, 3, 16] {
            let expected = encode_keys(&raw, 40, partitions);
            // In batches of 7 entries, as the pipeline pushes a batch's keys at once.
            let mut small = KeySpill::new(40, partitions, 4096, dir.path().into());
            for b in raw.chunks(7 * 40) {
                small.push(b).unwrap();
            }
            assert_eq!(small.rows(), 1000);
            // 1000 entries in 4000-byte (100-entry) buffers: 9 full ones spilled
            // before the last one arrived.
            assert_eq!(small.runs(), 9);
            assert!(small.peak_bytes() <= 4096, "{}", small.peak_bytes());
            assert_eq!(object(small), expected, "{partitions} partitions");
            let mut big = KeySpill::new(40, partitions, 1 << 30, dir.path().into());
            big.push(&raw).unwrap();
            assert_eq!(big.runs(), 0);
            assert_eq!(object(big), expected);
        }
        // A budget below one entry still holds one.
        let mut one = KeySpill::new(40, 4, 10, dir.path().into());
        one.push(&raw[..400]).unwrap();
        assert_eq!(one.budget_bytes(), 40);
        assert_eq!(object(one), encode_keys(&raw[..400], 40, 4));
        // No entries: a header of empty sections, as before.
        let none = KeySpill::new(40, 4, 4096, dir.path().into());
        assert_eq!(object(none), encode_keys(&[], 40, 4));
    }

    #[test]
    fn a_large_unspilled_buffer_is_streamed_from_disk_with_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let raw = entries(IN_MEMORY_BYTES / 40 + 1000);
        let mut s = KeySpill::new(40, 5, 1 << 30, dir.path().into());
        s.push(&raw).unwrap();
        assert_eq!(s.runs(), 0);
        assert_eq!(object(s), encode_keys(&raw, 40, 5));
    }
}
