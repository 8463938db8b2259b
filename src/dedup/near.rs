//! Near-duplicate candidates over the dedup shuffle (docs/DEDUP.md): band-key entries
//! with a verification payload, the edges of the record–bucket graph with their
//! labels, and the candidates reduce (each band bucket verified against its leaders).
//! The label-propagation steps that follow are in [`super::rounds`]. Everything here
//! is pure: sorted streams in, sorted sinks out; [`super::propagate`] does the I/O.
use super::exact::EARLIER;
use super::format::partition_of;
use super::params::DedupKind;
use super::sort::{ExternalSort, Fixed};
use crate::kernels::{hamming, minhash};
use std::cmp::Ordering;

/// A component label: the record it is named after. Lower is better, as for
/// representatives: the highest rank, then the lowest id.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Label {
    pub rank: f64,
    pub id: u128,
}

impl Label {
    pub fn order(&self, o: &Label) -> Ordering {
        o.rank
            .total_cmp(&self.rank)
            .then_with(|| self.id.cmp(&o.id))
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.rank.to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
    }
    fn get(b: &[u8]) -> Label {
        Label {
            rank: f64::from_le_bytes(b[0..8].try_into().expect("8")),
            id: u128::from_le_bytes(b[8..24].try_into().expect("16")),
        }
    }
    pub(super) fn min(self, o: Label) -> Label {
        if o.order(&self) == Ordering::Less {
            o
        } else {
            self
        }
    }
}

/// One band key of one record with what verifies it: `P` payload bytes (the 8-bit
/// b-bit signature, or the 64-bit hash). A map task writes `task` 0; the reducer
/// sets it to the index of the map task it read the entry from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NearEntry<const P: usize> {
    pub key: u128,
    pub id: u128,
    pub rank: f64,
    pub task: u32,
    pub payload: [u8; P],
}

impl<const P: usize> Fixed for NearEntry<P> {
    const SIZE: usize = 44 + P;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.key.to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.rank.to_le_bytes());
        out.extend_from_slice(&self.task.to_le_bytes());
        out.extend_from_slice(&self.payload);
    }
    fn get(b: &[u8]) -> Self {
        NearEntry {
            key: u128::from_le_bytes(b[0..16].try_into().expect("16")),
            id: u128::from_le_bytes(b[16..32].try_into().expect("16")),
            rank: f64::from_le_bytes(b[32..40].try_into().expect("8")),
            task: u32::from_le_bytes(b[40..44].try_into().expect("4")),
            payload: b[44..44 + P].try_into().expect("payload"),
        }
    }
    /// Key, then the bucket's pivot first: highest rank, then lowest id. An earlier
    /// corpus's entries (`against`) come after every entry of this job, whatever their
    /// label: this job's records lead the bucket, as without `against`, and an
    /// earlier entry is only verified against them (so an index of any size never
    /// takes the leaders' places).
    fn order(&self, o: &Self) -> Ordering {
        self.key
            .cmp(&o.key)
            .then_with(|| (self.task == EARLIER).cmp(&(o.task == EARLIER)))
            .then_with(|| self.label().order(&o.label()))
            .then_with(|| self.task.cmp(&o.task))
    }
}

impl<const P: usize> NearEntry<P> {
    fn label(&self) -> Label {
        Label {
            rank: self.rank,
            id: self.id,
        }
    }
}

/// Appends a record's near-duplicate entries (one per band) as raw bytes of
/// `44 + kind.payload_len()` each, the layout of [`NearEntry`]. `value` is the
/// signature (little-endian u32s) or the hash (8 bytes, little-endian).
pub fn append_entries(kind: &DedupKind, value: &[u8], id: u128, rank: f64, out: &mut Vec<u8>) {
    let p = kind.payload_len();
    let mut keys = Vec::new();
    let mut payload = vec![0u8; p];
    match kind {
        DedupKind::Exact
        | DedupKind::Substring { .. }
        | DedupKind::Paragraph { .. }
        | DedupKind::Semantic { .. } => {
            unreachable!(
                "exact keys are KeyEntry, windows and units WindowEntry, vectors their own"
            )
        }
        DedupKind::Minhash { bands, rows, .. } => {
            minhash::band_keys_le(value, *bands as usize, *rows as usize, &mut keys);
            minhash::low_bytes_le(value, &mut payload);
        }
        DedupKind::Phash { radius } => {
            let h = u64::from_le_bytes(value[..8].try_into().expect("8 bytes"));
            keys = hamming::band_keys(h, *radius);
            payload.copy_from_slice(&h.to_le_bytes());
        }
    }
    for k in keys {
        out.extend_from_slice(&k.to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&rank.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&payload);
    }
}

/// Whether two payloads are near duplicates.
pub fn verified(kind: &DedupKind, a: &[u8], b: &[u8]) -> bool {
    match kind {
        DedupKind::Exact
        | DedupKind::Substring { .. }
        | DedupKind::Paragraph { .. }
        | DedupKind::Semantic { .. } => true,
        DedupKind::Minhash {
            bands,
            rows,
            threshold,
        } => minhash::bbit_jaccard(a, b, (bands * rows) as usize) >= *threshold,
        DedupKind::Phash { radius } => {
            let h = |x: &[u8]| u64::from_le_bytes(x[..8].try_into().expect("8"));
            hamming::distance(h(a), h(b)) <= *radius
        }
    }
}

/// An edge of the record–bucket graph with both ends' current labels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Edge {
    pub bucket: u128,
    pub record: u128,
    /// The map task of the record.
    pub task: u32,
    /// The record's label.
    pub rl: Label,
    /// The bucket's label.
    pub bl: Label,
}

impl Edge {
    const SIZE: usize = 84;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.bucket.to_le_bytes());
        out.extend_from_slice(&self.record.to_le_bytes());
        out.extend_from_slice(&self.task.to_le_bytes());
        self.rl.put(out);
        self.bl.put(out);
    }
    fn get(b: &[u8]) -> Self {
        Edge {
            bucket: u128::from_le_bytes(b[0..16].try_into().expect("16")),
            record: u128::from_le_bytes(b[16..32].try_into().expect("16")),
            task: u32::from_le_bytes(b[32..36].try_into().expect("4")),
            rl: Label::get(&b[36..60]),
            bl: Label::get(&b[60..84]),
        }
    }
}

/// Spreads record ids (whose high bits name their file) over the key space: a
/// bijection, so equal spreads mean equal ids.
pub fn spread(id: u128) -> u128 {
    id.wrapping_mul(0x2360_ED05_1FC6_5DA4_4385_DF64_9FCC_F645)
        .rotate_left(64)
}

/// Edges grouped by record, the best bucket label first (a record step streams).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ByRecord(pub Edge);
/// Edges grouped by bucket, the best record label first (a bucket step streams).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ByBucket(pub Edge);

impl Fixed for ByRecord {
    const SIZE: usize = Edge::SIZE;
    fn put(&self, out: &mut Vec<u8>) {
        self.0.put(out)
    }
    fn get(b: &[u8]) -> Self {
        ByRecord(Edge::get(b))
    }
    fn order(&self, o: &Self) -> Ordering {
        spread(self.0.record)
            .cmp(&spread(o.0.record))
            .then_with(|| self.0.bl.order(&o.0.bl))
            .then_with(|| self.0.bucket.cmp(&o.0.bucket))
    }
}

impl Fixed for ByBucket {
    const SIZE: usize = Edge::SIZE;
    fn put(&self, out: &mut Vec<u8>) {
        self.0.put(out)
    }
    fn get(b: &[u8]) -> Self {
        ByBucket(Edge::get(b))
    }
    fn order(&self, o: &Self) -> Ordering {
        self.0
            .bucket
            .cmp(&o.0.bucket)
            .then_with(|| self.0.rl.order(&o.0.rl))
            .then_with(|| self.0.record.cmp(&o.0.record))
    }
}

/// The partition an edge goes to for the next step.
pub fn record_partition(e: &Edge, partitions: u32) -> u32 {
    partition_of(spread(e.record), partitions)
}
pub fn bucket_partition(e: &Edge, partitions: u32) -> u32 {
    partition_of(e.bucket, partitions)
}

/// What one near-duplicate step did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StepStats {
    /// Entries (candidates) or edges (label steps) read.
    pub entries: u64,
    /// Candidates: buckets with a verified pair; record steps: records.
    pub groups: u64,
    /// Edges written.
    pub edges: u64,
    /// Candidates: members that failed verification against their bucket's pivot.
    pub rejected: u64,
    /// Record steps: records whose label improved.
    pub changed: u64,
    /// Candidates: members of buckets past [`MAX_LEADERS`] distinct payloads.
    pub overflow: u64,
    /// Candidates: records per verified group (a leader and the members it took).
    pub group_sizes: crate::protocol::records::Histogram,
}

/// The most distinct payloads (leaders) one band bucket verifies against; a member
/// beyond them is still compared with every leader but leads no one itself.
pub const MAX_LEADERS: usize = 1024;

/// The graph node of leader `i` of bucket `key`.
fn leader_node(key: u128, i: usize) -> u128 {
    key ^ (i as u128).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835)
}

/// The candidates reduce: per band bucket (a run of equal keys, best label first),
/// every member is verified against the bucket's *leaders*, the distinct payloads
/// seen so far. A member within range of leader `L` becomes an edge (L's node,
/// member); a member with a new payload becomes a leader. So every verified pair of
/// the bucket is connected (through the earlier one's leader), chains included, in
/// memory bounded by [`MAX_LEADERS`] payloads. Leaders nobody joined leave no trace.
pub fn candidates<const P: usize>(
    sorted: impl Iterator<Item = std::io::Result<NearEntry<P>>>,
    kind: &DedupKind,
    out: &mut ExternalSort<ByRecord>,
) -> std::io::Result<StepStats> {
    struct Leader<const P: usize> {
        first: NearEntry<P>,
        emitted: bool,
        /// Members joined (the leader itself not counted).
        joined: u64,
    }
    fn close<const P: usize>(leaders: &mut Vec<Leader<P>>, st: &mut StepStats) {
        for l in leaders.drain(..).filter(|l| l.emitted) {
            st.group_sizes.record((l.joined + 1) as f64);
        }
    }
    let mut st = StepStats::default();
    let mut key: Option<u128> = None;
    let mut leaders: Vec<Leader<P>> = Vec::new();
    for x in sorted {
        let x = x?;
        st.entries += 1;
        if key != Some(x.key) {
            key = Some(x.key);
            close(&mut leaders, &mut st);
        }
        let mut identical = false;
        let mut joined = false;
        // An earlier corpus's entry (`against`) comes after this job's: it joins the
        // leaders it is within range of and never leads (only paths from this job's
        // records to it matter, and every distinct payload of this job leads).
        let earlier = x.task == EARLIER;
        for (i, l) in leaders.iter_mut().enumerate() {
            if l.first.id == x.id {
                identical = true; // the same record twice (not from one map task)
                continue;
            }
            if !verified(kind, &l.first.payload, &x.payload) {
                continue;
            }
            identical |= l.first.payload == x.payload;
            joined = true;
            l.joined += 1;
            let node = leader_node(x.key, i);
            let bl = l.first.label();
            if !l.emitted {
                l.emitted = true;
                st.groups += 1;
                st.edges += 1;
                out.push(ByRecord(Edge {
                    bucket: node,
                    record: l.first.id,
                    task: l.first.task,
                    rl: bl,
                    bl,
                }))?;
            }
            st.edges += 1;
            out.push(ByRecord(Edge {
                bucket: node,
                record: x.id,
                task: x.task,
                rl: x.label(),
                bl,
            }))?;
        }
        if !joined && !earlier && !leaders.is_empty() {
            st.rejected += 1;
        }
        if !identical && !earlier {
            if leaders.len() < MAX_LEADERS {
                leaders.push(Leader {
                    first: x,
                    emitted: false,
                    joined: 0,
                });
            } else {
                st.overflow += 1;
            }
        }
    }
    close(&mut leaders, &mut st);
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedup::format::{EDGES_MAGIC, Sections, check_header, decode, section_of};
    use std::collections::BTreeSet;

    /// Group sizes: per band bucket, a leader and the members verified against it.
    #[test]
    fn candidates_count_group_sizes() {
        let kind = DedupKind::Phash { radius: 2 };
        let mut raw = Vec::new();
        for (id, h) in [(10u128, 0xFFu64), (11, 0xFF), (12, 0xFE), (13, !0xFF)] {
            append_entries(&kind, &h.to_le_bytes(), id, 0.5, &mut raw);
        }
        let dir = tempfile::tempdir().unwrap();
        let mut s = ExternalSort::<NearEntry<8>>::new(1 << 20, dir.path().to_path_buf());
        for e in raw
            .chunks_exact(NearEntry::<8>::SIZE)
            .map(NearEntry::<8>::get)
        {
            s.push(e).unwrap();
        }
        let mut out = ExternalSort::<ByRecord>::new(1 << 20, dir.path().to_path_buf());
        let st = candidates(s.finish().unwrap(), &kind, &mut out).unwrap();
        // A band bucket holding the three near hashes makes a group of 3; the band with
        // bit 0 (where 12 differs) a group of 2; the far hash (13) joins none.
        assert!(st.group_sizes.count > 0);
        assert_eq!(st.group_sizes.count, st.groups);
        assert_eq!((st.group_sizes.min, st.group_sizes.max), (2.0, 3.0));
        let b = crate::protocol::records::Histogram::bucket;
        assert_eq!(st.group_sizes.buckets.get(&b(2.0)), Some(&1));
    }

    /// `against`: an index of more distinct hashes than a bucket has leader places
    /// never takes them from this job's records (earlier entries sort after them and
    /// never lead), and an earlier hash near a new one joins it.
    #[test]
    fn earlier_entries_never_take_the_leaders_places() {
        use crate::dedup::exact::EARLIER;
        use crate::dedup::format::EARLIER_NODE;
        let kind = DedupKind::Phash { radius: 2 };
        let band0 = 0xABCD_E000_0000_0000u64; // the top bits every hash here shares
        let mut raw = Vec::new();
        for i in 0..3000u64 {
            // distinct, far from each other and from the new hashes in the low bits
            append_entries(
                &kind,
                &(band0 | (i * 0x9E37_79B9) & 0x7FF_FFFF_FFFF).to_le_bytes(),
                100 + i as u128,
                0.0,
                &mut raw,
            );
        }
        let n_earlier = raw.len() / NearEntry::<8>::SIZE;
        let new_a = band0 | 0x0F0F_0F0F_0F0F;
        let new_b = new_a ^ 1; // distance 1 from a
        append_entries(&kind, &new_a.to_le_bytes(), 1, 0.0, &mut raw);
        append_entries(&kind, &new_b.to_le_bytes(), 2, 0.0, &mut raw);
        // An earlier hash at distance 2 from a.
        append_entries(&kind, &(new_a ^ 6).to_le_bytes(), 7, 0.0, &mut raw);
        let dir = tempfile::tempdir().unwrap();
        let mut s = ExternalSort::<NearEntry<8>>::new(1 << 24, dir.path().to_path_buf());
        for (k, mut e) in raw
            .chunks_exact(NearEntry::<8>::SIZE)
            .map(NearEntry::<8>::get)
            .enumerate()
        {
            let earlier = k < n_earlier || e.id == 7;
            if earlier {
                e.id |= EARLIER_NODE;
                e.rank = f64::INFINITY;
                e.task = EARLIER;
            }
            s.push(e).unwrap();
        }
        let mut out = ExternalSort::<ByRecord>::new(1 << 24, dir.path().to_path_buf());
        let st = candidates(s.finish().unwrap(), &kind, &mut out).unwrap();
        assert_eq!(st.overflow, 0, "earlier entries took no leader place");
        let edges: Vec<Edge> = out
            .finish_in_memory()
            .ok()
            .unwrap()
            .into_iter()
            .map(|e| e.0)
            .collect();
        let nodes_of = |r: u128| -> BTreeSet<u128> {
            edges
                .iter()
                .filter(|e| e.record == r)
                .map(|e| e.bucket)
                .collect()
        };
        let (a, b, old) = (nodes_of(1), nodes_of(2), nodes_of(7 | EARLIER_NODE));
        assert!(
            a.intersection(&b).next().is_some(),
            "the two new copies are linked"
        );
        assert!(
            a.intersection(&old).next().is_some(),
            "the earlier copy joins a"
        );
        // No edge between two earlier records, and no earlier record leads.
        for e in &edges {
            if e.record & EARLIER_NODE != 0 {
                assert!(e.bl.id & EARLIER_NODE == 0, "an earlier record leads {e:?}");
            }
        }
    }

    #[test]
    fn sections_index_their_items() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sections::new(3, dir.path()).unwrap();
        let e = |r: u128| {
            ByRecord(Edge {
                bucket: 1,
                record: r,
                task: 0,
                rl: Label { rank: 0.0, id: r },
                bl: Label { rank: 0.0, id: 1 },
            })
        };
        s.push(0, &e(1)).unwrap();
        s.push(2, &e(2)).unwrap();
        s.push(2, &e(3)).unwrap();
        assert!(s.push(1, &e(4)).is_err(), "out of order");
        let (mut f, len) = s.finish(EDGES_MAGIC).unwrap();
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut b).unwrap();
        assert_eq!(b.len() as u64, len);
        check_header(&b, EDGES_MAGIC, 3).unwrap();
        let sec = |i| decode::<ByRecord>(section_of(&b, i).unwrap()).unwrap();
        assert_eq!(sec(0), vec![e(1)]);
        assert!(sec(1).is_empty());
        assert_eq!(sec(2), vec![e(2), e(3)]);
    }
}
