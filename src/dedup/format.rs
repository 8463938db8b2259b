//! The sectioned object layout every dedup shuffle object shares (docs/DEDUP.md): a
//! magic, a section count and an offsets table, then the sections' fixed-size entries
//! (keys objects: one section per key partition; decisions objects: one per map task;
//! near-duplicate step objects: edges by partition, then decisions by map task).
//! Also the key-space partitioning and the record id encoding the objects use.
//! Encoding and decoding only: no store access, no sorting.
use super::error::FormatError;
use super::sort::Fixed;
use std::io::{BufWriter, Seek, Write};

pub const KEYS_MAGIC: &[u8; 8] = b"MDFKEYS1";
pub const DECISIONS_MAGIC: &[u8; 8] = b"MDFDECS1";
/// Near-duplicate step objects: edges by partition (then decisions by map task).
pub const EDGES_MAGIC: &[u8; 8] = b"MDFNEAR1";
/// Exact-substring marks objects: the windows to cut, by map task.
pub const MARKS_MAGIC: &[u8; 8] = b"MDFMARK1";
/// Semantic dedup's centroids object: one section of `k × d` f32.
pub const CENTROIDS_MAGIC: &[u8; 8] = b"MDFCENT1";
/// Semantic dedup's assignment objects: vectors by reduce partition.
pub const ASSIGN_MAGIC: &[u8; 8] = b"MDFASGN1";
/// Bytes before the offsets table in both objects: magic, count, reserved.
pub const HEADER: u64 = 16;

/// The byte range of the header holding the offsets of section `i`
/// (partition `i` of a keys object, map task `i` of a decisions object).
pub fn offsets_range(i: u64) -> std::ops::Range<u64> {
    HEADER + 8 * i..HEADER + 8 * (i + 2)
}

/// Parses the two offsets read from `offsets_range`.
pub fn parse_offsets(b: &[u8]) -> Result<(u64, u64), FormatError> {
    if b.len() != 16 {
        return Err(FormatError::OffsetsLength(b.len()));
    }
    let a = u64::from_le_bytes(b[..8].try_into().expect("8"));
    let z = u64::from_le_bytes(b[8..].try_into().expect("8"));
    if z < a {
        return Err(FormatError::OffsetsOrder(a, z));
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

/// Bit 127 of a graph node or representative id: a record of an earlier job's corpus
/// (`against`). Record ids are 112 bits (28 hex digits), so the bit never collides
/// with a record of this job, even one read from the same file as the earlier one.
pub const EARLIER_NODE: u128 = 1 << 127;

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

/// Checks an object's magic and section count.
pub fn check_header(b: &[u8], magic: &[u8; 8], sections: u64) -> Result<(), FormatError> {
    if b.len() < HEADER as usize || &b[..8] != magic {
        return Err(FormatError::Magic);
    }
    let n = u32::from_le_bytes(b[8..12].try_into().expect("4")) as u64;
    if n != sections {
        return Err(FormatError::Sections {
            found: n,
            expected: sections,
        });
    }
    Ok(())
}

/// Parses a byte range of fixed-size entries.
pub fn decode<T: Fixed>(b: &[u8]) -> Result<Vec<T>, FormatError> {
    Ok(entries(b)?.collect())
}

/// The entries of a section, decoded as they are iterated (no buffer: a reducer
/// pushes them straight into its sort).
pub fn entries<T: Fixed>(b: &[u8]) -> Result<impl ExactSizeIterator<Item = T> + '_, FormatError> {
    if !b.len().is_multiple_of(T::SIZE) {
        return Err(FormatError::PartialEntry {
            len: b.len(),
            size: T::SIZE,
        });
    }
    Ok(b.chunks_exact(T::SIZE).map(T::get))
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

    /// Pushes one raw entry (a layout sized at run time, such as a vector's).
    pub fn push_raw(&mut self, section: usize, entry: &[u8]) -> std::io::Result<()> {
        if section >= self.sizes.len() || section < self.cur {
            return Err(std::io::Error::other(format!(
                "section {section} of {} after section {}",
                self.sizes.len(),
                self.cur
            )));
        }
        self.cur = section;
        self.sizes[section] += entry.len() as u64;
        self.body.write_all(entry)
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

/// Section `i` of a shuffle object held in memory.
pub fn section_of(obj: &[u8], i: u64) -> Result<&[u8], FormatError> {
    let r = offsets_range(i);
    let head = obj
        .get(r.start as usize..r.end as usize)
        .ok_or(FormatError::ShortHeader)?;
    let (a, z) = parse_offsets(head)?;
    obj.get(a as usize..z as usize).ok_or(FormatError::PastEnd)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
