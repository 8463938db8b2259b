//! Planning in bounded memory (docs/SCALE.md, "Planning"): an external sort of
//! `(key, value)` byte records. Records are buffered up to a byte budget, spilled to
//! temporary files as sorted runs, and merged into one sorted file that can be read
//! again and again (planning reads its input list twice and its tasks twice). Local
//! computation only: it never reads or writes the store.
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, BufReader, BufWriter, Read, Write};

/// What one buffered record costs besides its bytes (two `Vec`s and their heap blocks).
const RECORD_OVERHEAD: usize = 80;
/// Sorted runs kept at most: beyond, they are merged into one (each open run holds a
/// file descriptor, and a merge reads them all at once).
const MAX_RUNS: usize = 64;
/// A record's key or value above this is a torn or corrupt spill file, not a record.
const MAX_PART: usize = 1 << 30;

/// A key and its value.
pub type Record = (Vec<u8>, Vec<u8>);
/// Records read back in order.
pub type Records<'a> = Box<dyn Iterator<Item = io::Result<Record>> + Send + 'a>;

/// Sorts records by key in at most `budget` bytes of memory (plus a read buffer per
/// spilled run while merging).
pub struct SortSpill {
    budget: usize,
    buf: Vec<Record>,
    buf_bytes: usize,
    runs: Vec<tempfile::NamedTempFile>,
}

impl SortSpill {
    pub fn new(budget: usize) -> Self {
        Self {
            budget: budget.max(1),
            buf: Vec::new(),
            buf_bytes: 0,
            runs: Vec::new(),
        }
    }

    pub fn push(&mut self, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.buf_bytes += key.len() + value.len() + RECORD_OVERHEAD;
        self.buf.push((key.to_vec(), value.to_vec()));
        if self.buf_bytes >= self.budget {
            self.spill()?;
        }
        Ok(())
    }

    /// Sorted runs written so far.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    fn spill(&mut self) -> io::Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        self.buf_bytes = 0;
        // Stable: records of one key keep the order they were pushed in.
        buf.sort_by(|a, b| a.0.cmp(&b.0));
        let f = spill_file()?;
        let mut w = BufWriter::with_capacity(1 << 20, f.reopen()?);
        for (k, v) in &buf {
            write_record(&mut w, k, v)?;
        }
        w.flush()?;
        drop(w);
        self.runs.push(f);
        if self.runs.len() >= MAX_RUNS {
            let (merged, _) = merge(&self.runs, false)?;
            self.runs = vec![merged];
        }
        Ok(())
    }

    /// The records in key order; with `dedup_keys`, only the first pushed of each key.
    pub fn finish(mut self, dedup_keys: bool) -> io::Result<Sorted> {
        if self.runs.is_empty() {
            let mut buf = std::mem::take(&mut self.buf);
            buf.sort_by(|a, b| a.0.cmp(&b.0));
            if dedup_keys {
                buf.dedup_by(|b, a| a.0 == b.0);
            }
            return Ok(Sorted {
                len: buf.len() as u64,
                mem: buf,
                file: None,
            });
        }
        if !self.buf.is_empty() {
            self.spill()?;
        }
        let (out, len) = merge(&self.runs, dedup_keys)?;
        Ok(Sorted {
            len,
            mem: Vec::new(),
            file: Some(out),
        })
    }
}

/// A k-way merge of sorted runs into one file, and its record count; ties go to the
/// earlier run, which holds the earlier pushes.
fn merge(
    runs: &[tempfile::NamedTempFile],
    dedup_keys: bool,
) -> io::Result<(tempfile::NamedTempFile, u64)> {
    let mut readers = runs
        .iter()
        .map(|f| Ok(BufReader::with_capacity(1 << 16, f.reopen()?)))
        .collect::<io::Result<Vec<_>>>()?;
    let mut heap = BinaryHeap::new();
    for (i, r) in readers.iter_mut().enumerate() {
        if let Some((k, v)) = read_record(r)? {
            heap.push(Reverse((k, i, v)));
        }
    }
    let out = spill_file()?;
    let mut w = BufWriter::with_capacity(1 << 20, out.reopen()?);
    let mut last: Option<Vec<u8>> = None;
    let mut len = 0u64;
    while let Some(Reverse((k, i, v))) = heap.pop() {
        if let Some((nk, nv)) = read_record(&mut readers[i])? {
            heap.push(Reverse((nk, i, nv)));
        }
        if dedup_keys && last.as_deref() == Some(&k[..]) {
            continue;
        }
        write_record(&mut w, &k, &v)?;
        len += 1;
        last = Some(k);
    }
    w.flush()?;
    Ok((out, len))
}

/// Sorted records, in memory or in one local file.
pub struct Sorted {
    len: u64,
    mem: Vec<Record>,
    file: Option<tempfile::NamedTempFile>,
}

impl Sorted {
    pub fn len(&self) -> u64 {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Whether the records live on disk.
    pub fn spilled(&self) -> bool {
        self.file.is_some()
    }
    /// Every record in key order, from the start (each call reads anew).
    pub fn iter(&self) -> io::Result<Records<'_>> {
        match &self.file {
            None => Ok(Box::new(self.mem.iter().cloned().map(Ok))),
            Some(f) => {
                let mut r = BufReader::with_capacity(1 << 16, f.reopen()?);
                Ok(Box::new(std::iter::from_fn(move || {
                    read_record(&mut r).transpose()
                })))
            }
        }
    }
}

/// A new file in `MDF_SPILL_DIR` (as the dedup's spills), removed when dropped.
fn spill_file() -> io::Result<tempfile::NamedTempFile> {
    let dir = crate::dedup::shuffle::spill_dir();
    std::fs::create_dir_all(&dir)?;
    tempfile::NamedTempFile::new_in(dir)
}

fn write_record(w: &mut impl Write, k: &[u8], v: &[u8]) -> io::Result<()> {
    w.write_all(&(k.len() as u32).to_le_bytes())?;
    w.write_all(&(v.len() as u32).to_le_bytes())?;
    w.write_all(k)?;
    w.write_all(v)
}

fn read_record(r: &mut impl Read) -> io::Result<Option<Record>> {
    let mut len = [0u8; 8];
    // A clean end is at a record boundary; anything else is a torn file.
    match r.read(&mut len[..1])? {
        0 => return Ok(None),
        _ => r.read_exact(&mut len[1..])?,
    }
    let kl = u32::from_le_bytes(len[..4].try_into().expect("4 bytes")) as usize;
    let vl = u32::from_le_bytes(len[4..].try_into().expect("4 bytes")) as usize;
    if kl > MAX_PART || vl > MAX_PART {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a corrupt record length in planning's spill file",
        ));
    }
    let mut k = vec![0u8; kl];
    r.read_exact(&mut k)?;
    let mut v = vec![0u8; vl];
    r.read_exact(&mut v)?;
    Ok(Some((k, v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(s: &Sorted) -> Vec<Record> {
        s.iter().unwrap().map(|r| r.unwrap()).collect()
    }

    /// Spilled or not, the same records in the same order: sorted by key, the first
    /// push of a key kept when deduplicating, and readable twice.
    #[test]
    fn spilled_and_in_memory_sorts_agree() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let recs: Vec<Record> = (0..5000)
            .map(|i| {
                let k = format!("{:04}", rng.random_range(0..3000)).into_bytes();
                (k, format!("v{i}").into_bytes())
            })
            .collect();
        for dedup in [false, true] {
            let mut want = recs.clone();
            want.sort_by(|a, b| a.0.cmp(&b.0));
            if dedup {
                want.dedup_by(|b, a| a.0 == b.0);
            }
            for budget in [usize::MAX, 20_000, 4096] {
                let mut s = SortSpill::new(budget);
                for (k, v) in &recs {
                    s.push(k, v).unwrap();
                }
                let spilled_runs = s.runs();
                let sorted = s.finish(dedup).unwrap();
                assert_eq!(sorted.spilled(), budget != usize::MAX);
                assert_eq!(budget == usize::MAX, spilled_runs == 0);
                assert_eq!(sorted.len(), want.len() as u64);
                assert_eq!(collect(&sorted), want, "budget {budget} dedup {dedup}");
                assert_eq!(collect(&sorted), want, "a second read");
            }
        }
    }

    /// A corrupt length is an error, not an allocation of gigabytes; a torn record
    /// is an error, a clean end is the end.
    #[test]
    fn torn_and_corrupt_records_are_errors() {
        assert!(read_record(&mut &[0xffu8; 8][..]).is_err());
        let mut ok = Vec::new();
        write_record(&mut ok, b"k", b"v").unwrap();
        assert_eq!(
            read_record(&mut &ok[..]).unwrap(),
            Some((b"k".to_vec(), b"v".to_vec()))
        );
        assert!(read_record(&mut &ok[..ok.len() - 1]).is_err());
        assert_eq!(read_record(&mut &[][..]).unwrap(), None);
    }

    #[test]
    fn empty_input() {
        let s = SortSpill::new(1).finish(true).unwrap();
        assert!(s.is_empty());
        assert_eq!(collect(&s), vec![]);
    }
}
