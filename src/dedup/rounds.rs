//! Near-duplicate components (docs/DEDUP.md): the label-propagation steps over the
//! verified record–bucket graph that the candidates reduce ([`super::near`]) writes,
//! and the in-memory union-find a record step uses when its edges fit. Pure: sorted
//! streams in, sorted sinks out; [`super::propagate`] does the I/O.
use super::exact::Decision;
use super::near::{ByBucket, ByRecord, Label, StepStats};
use super::sort::ExternalSort;
use std::cmp::Ordering;

/// Bytes per edge that [`component_labels`] needs beside the edges themselves, at
/// most: its record index (4), bucket map entry (32 with its control byte, doubled
/// while growing), parents and best labels (4 each, for up to two nodes).
pub const COMPONENT_BYTES_PER_EDGE: u64 = 96;

/// The most edges [`component_labels`] takes (it numbers edge labels in `u32`).
pub const COMPONENT_MAX_EDGES: usize = (u32::MAX / 2) as usize;

/// For a record step whose edges are all in memory (sorted by record): per record,
/// in order, the best label of its connected component in the step's own graph
/// (its records, their buckets, the edges between them), by union-find. Every such
/// label belongs to a record of the same verified cluster and is at least as good
/// as what one step of propagation gives (the best of the record's own and its
/// buckets' labels), so the steps reach the same fixed point: in one record step
/// when there is one partition, and in fewer rounds otherwise (a component's
/// labels cross partitions only through buckets, once a round).
pub fn component_labels(edges: &[ByRecord]) -> Vec<Label> {
    let mut record_of = Vec::with_capacity(edges.len());
    let mut records = 0u32;
    for (i, e) in edges.iter().enumerate() {
        if i > 0 && edges[i - 1].0.record != e.0.record {
            records += 1;
        }
        record_of.push(records);
    }
    let records = if edges.is_empty() { 0 } else { records + 1 };
    let mut buckets: crate::kernels::FastMap<u128, u32> = Default::default();
    let mut parent: Vec<u32> = (0..records).collect();
    use crate::kernels::{uf_find as find, uf_union};
    for (e, &r) in edges.iter().zip(&record_of) {
        let next = parent.len() as u32;
        let b = *buckets.entry(e.0.bucket).or_insert(next);
        if b == next {
            parent.push(b);
        }
        uf_union(&mut parent, r, b);
    }
    // Per node, the edge label that is best so far (2·edge, +1 for its bucket's).
    let label = |i: u32| {
        let e = &edges[i as usize / 2].0;
        if i.is_multiple_of(2) { e.rl } else { e.bl }
    };
    let mut best = vec![u32::MAX; parent.len()];
    for (i, &r) in record_of.iter().enumerate() {
        let root = find(&mut parent, r) as usize;
        for side in [2 * i as u32, 2 * i as u32 + 1] {
            if best[root] == u32::MAX || label(side).order(&label(best[root])) == Ordering::Less {
                best[root] = side;
            }
        }
    }
    (0..records)
        .map(|r| {
            let root = find(&mut parent, r) as usize;
            label(best[root])
        })
        .collect()
}

/// [`record_step`] over `sorted` (the step's input, all of it pushed): with
/// [`component_labels`] when its edges stayed in memory and the union-find fits
/// beside them in `budget` bytes, else one step of propagation.
pub fn record_step_of(
    sorted: ExternalSort<ByRecord>,
    budget: u64,
    edges: &mut ExternalSort<ByBucket>,
    decisions: &mut ExternalSort<Decision>,
) -> std::io::Result<StepStats> {
    let v = match sorted.finish_in_memory() {
        Ok(v) => v,
        Err(spilled) => return record_step(spilled.finish()?, None, edges, decisions),
    };
    let need = v.len() as u64 * (std::mem::size_of::<ByRecord>() as u64 + COMPONENT_BYTES_PER_EDGE);
    let labels = (v.len() < COMPONENT_MAX_EDGES && need <= budget).then(|| component_labels(&v));
    record_step(v.into_iter().map(Ok), labels.as_deref(), edges, decisions)
}

/// A record step: each record's label becomes the best of its own and its buckets'
/// (its first edge carries the best bucket label), or, given `components` (from
/// [`component_labels`], one per record in order), its component's. Writes the
/// relabelled edges for the bucket step and one decision per record (the
/// representative decides for itself), so the apply phase can read them once the
/// labels stop changing.
pub fn record_step(
    sorted: impl Iterator<Item = std::io::Result<ByRecord>>,
    components: Option<&[Label]>,
    edges: &mut ExternalSort<ByBucket>,
    decisions: &mut ExternalSort<Decision>,
) -> std::io::Result<StepStats> {
    let mut st = StepStats::default();
    let mut cur: Option<(u128, Label)> = None;
    for x in sorted {
        let ByRecord(mut e) = x?;
        st.entries += 1;
        let label = match cur {
            Some((r, l)) if r == e.record => l,
            _ => {
                let l = match components {
                    Some(c) => c[st.groups as usize],
                    None => e.rl.min(e.bl),
                };
                if l != e.rl {
                    st.changed += 1;
                }
                st.groups += 1;
                // An earlier corpus's record (`against`) is in no map task of this
                // job: it labels, but gets no decision.
                if e.task != super::exact::EARLIER {
                    decisions.push(Decision {
                        task: e.task,
                        representative: l.id == e.record,
                        id: e.record,
                        rep: l.id,
                    })?;
                }
                cur = Some((e.record, l));
                l
            }
        };
        e.rl = label;
        st.edges += 1;
        edges.push(ByBucket(e))?;
    }
    Ok(st)
}

/// A bucket step: each bucket's label becomes the best label of its members (its
/// first edge carries it).
pub fn bucket_step(
    sorted: impl Iterator<Item = std::io::Result<ByBucket>>,
    edges: &mut ExternalSort<ByRecord>,
) -> std::io::Result<StepStats> {
    let mut st = StepStats::default();
    let mut cur: Option<(u128, Label)> = None;
    for x in sorted {
        let ByBucket(mut e) = x?;
        st.entries += 1;
        let label = match cur {
            Some((b, l)) if b == e.bucket => l,
            _ => {
                st.groups += 1;
                cur = Some((e.bucket, e.rl));
                e.rl
            }
        };
        e.bl = label;
        st.edges += 1;
        edges.push(ByRecord(e))?;
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedup::near::{NearEntry, append_entries, candidates};
    use crate::dedup::params::DedupKind;
    use crate::dedup::sort::Fixed;
    use crate::kernels::hamming;
    use std::collections::BTreeMap;

    /// Union-find over verified pairs: the reference the steps must reproduce.
    fn components(n: usize, edges: &[(usize, usize)]) -> Vec<usize> {
        let mut parent: Vec<usize> = (0..n).collect();
        fn find(p: &mut [usize], x: usize) -> usize {
            let mut r = x;
            while p[r] != r {
                r = p[r];
            }
            let mut y = x;
            while p[y] != r {
                let next = p[y];
                p[y] = r;
                y = next;
            }
            r
        }
        for &(a, b) in edges {
            let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
            if ra != rb {
                parent[ra.max(rb)] = ra.min(rb);
            }
        }
        (0..n).map(|x| find(&mut parent, x)).collect()
    }

    /// Runs candidates and alternating steps to a fixed point in memory (or, with a
    /// tiny budget, through spills); returns id → representative and the rounds.
    /// `union_find`: record steps whose edges stayed in memory take component
    /// labels, as the worker does.
    fn cluster(
        entries: Vec<NearEntry<8>>,
        kind: &DedupKind,
        memory: u64,
    ) -> (BTreeMap<u128, u128>, u32) {
        cluster_with(entries, kind, memory, false)
    }

    fn cluster_with(
        entries: Vec<NearEntry<8>>,
        kind: &DedupKind,
        memory: u64,
        union_find: bool,
    ) -> (BTreeMap<u128, u128>, u32) {
        let dir = tempfile::tempdir().unwrap();
        let d = || dir.path().to_path_buf();
        let mut s = ExternalSort::<NearEntry<8>>::new(memory, d());
        for e in entries {
            s.push(e).unwrap();
        }
        let mut by_rec = ExternalSort::<ByRecord>::new(memory, d());
        candidates(s.finish().unwrap(), kind, &mut by_rec).unwrap();
        let mut rounds = 0;
        loop {
            rounds += 1;
            let mut by_b = ExternalSort::<ByBucket>::new(memory, d());
            let mut dec = ExternalSort::<Decision>::new(memory, d());
            let budget = if union_find { u64::MAX } else { 0 };
            let st = record_step_of(by_rec, budget, &mut by_b, &mut dec).unwrap();
            if st.changed == 0 || rounds > 50 {
                let out = dec
                    .finish()
                    .unwrap()
                    .map(|x| x.unwrap())
                    .map(|x| (x.id, x.rep))
                    .collect();
                return (out, rounds);
            }
            by_rec = ExternalSort::<ByRecord>::new(memory, d());
            bucket_step(by_b.finish().unwrap(), &mut by_rec).unwrap();
        }
    }

    fn phash_entries(hashes: &[u64], radius: u32) -> Vec<NearEntry<8>> {
        let kind = DedupKind::Phash { radius };
        let mut raw = Vec::new();
        for (i, h) in hashes.iter().enumerate() {
            append_entries(&kind, &h.to_le_bytes(), i as u128 * 7 + 3, 0.0, &mut raw);
        }
        raw.chunks_exact(NearEntry::<8>::SIZE)
            .map(|b| {
                let mut e = NearEntry::<8>::get(b);
                e.task = (e.id % 3) as u32;
                e
            })
            .collect()
    }

    /// `against`: earlier nodes (bit 127, task EARLIER, rank +∞) label every cluster
    /// they reach and get no decision; new records reached by one name the lowest
    /// earlier id of their component (components without earlier-earlier edges), the
    /// rest the lowest new id; by propagation, by union-find, and spilled.
    #[test]
    fn earlier_nodes_label_their_clusters_and_get_no_decisions() {
        use crate::dedup::exact::EARLIER;
        use crate::dedup::format::EARLIER_NODE;
        let radius = 3;
        let mut rnd = crate::kernels::xorshift(0x0bad_cafe_1234_0001u64);
        // (hash, earlier?)
        let mut pts: Vec<(u64, bool)> = Vec::new();
        for c in 0..60u64 {
            let mut h = rnd();
            for link in 0..(1 + c % 5) {
                // chains whose links alternate between the corpora in some clusters
                pts.push((h, c % 3 == 0 && link % 2 == 1));
                for b in 0..2 {
                    h ^= 1 << ((link * 2 + b + c) % 64);
                }
            }
        }
        for _ in 0..100 {
            pts.push((rnd(), false));
        }
        let hashes: Vec<u64> = pts.iter().map(|p| p.0).collect();
        let mut entries = phash_entries(&hashes, radius);
        for e in &mut entries {
            let i = ((e.id - 3) / 7) as usize;
            if pts[i].1 {
                e.id |= EARLIER_NODE;
                e.rank = f64::INFINITY;
                e.task = EARLIER;
            }
        }
        let id_of = |i: usize| (i as u128 * 7 + 3) | if pts[i].1 { EARLIER_NODE } else { 0 };
        // Reference: union-find without earlier–earlier pairs; per component its
        // lowest earlier id, else its lowest id.
        let n = pts.len();
        let mut pairs = Vec::new();
        for i in 0..n {
            for j in i + 1..n {
                if !(pts[i].1 && pts[j].1) && hamming::distance(hashes[i], hashes[j]) <= radius {
                    pairs.push((i, j));
                }
            }
        }
        let comp = components(n, &pairs);
        let mut best: BTreeMap<usize, (bool, u128)> = BTreeMap::new();
        for i in 0..n {
            let c = (!pts[i].1, id_of(i));
            let b = best.entry(comp[i]).or_insert(c);
            if c < *b {
                *b = c;
            }
        }
        let want: BTreeMap<u128, u128> = (0..n)
            .filter(|&i| !pts[i].1 && pairs.iter().any(|&(a, b)| a == i || b == i))
            .map(|i| (id_of(i), best[&comp[i]].1))
            .collect();
        assert!(want.values().any(|r| r & EARLIER_NODE != 0));
        let kind = DedupKind::Phash { radius };
        for (memory, uf) in [(1 << 20, false), (1 << 20, true), (2048, false)] {
            let (got, _) = cluster_with(entries.clone(), &kind, memory, uf);
            assert!(
                got.keys().all(|id| id & EARLIER_NODE == 0),
                "a decision for an earlier node"
            );
            assert_eq!(got, want, "memory {memory}, union-find {uf}");
        }
    }

    /// Random hashes with planted chains (each link within the radius, the ends far
    /// apart): the steps find exactly the union-find components of all pairs within
    /// the radius, spilled or not.
    #[test]
    fn phash_components_equal_brute_force() {
        let radius = 4;
        let mut rnd = crate::kernels::xorshift(0x1234_5678_9abc_def0u64);
        let mut hashes = Vec::new();
        for _ in 0..300 {
            hashes.push(rnd());
        }
        // chains: flip 3 fresh bits per link
        for c in 0..40 {
            let mut h = rnd();
            for link in 0..(1 + c % 6) {
                hashes.push(h);
                for b in 0..3 {
                    h ^= 1 << ((link * 3 + b + c) % 64);
                }
            }
        }
        let n = hashes.len();
        let mut pairs = Vec::new();
        for i in 0..n {
            for j in i + 1..n {
                if hamming::distance(hashes[i], hashes[j]) <= radius {
                    pairs.push((i, j));
                }
            }
        }
        let comp = components(n, &pairs);
        let id = |i: usize| i as u128 * 7 + 3;
        let mut want = BTreeMap::new();
        for (i, c) in comp.iter().enumerate() {
            if pairs.iter().any(|&(a, b)| a == i || b == i) {
                want.insert(id(i), id(*c));
            }
        }
        let kind = DedupKind::Phash { radius };
        let (got, rounds) = cluster(phash_entries(&hashes, radius), &kind, 1 << 30);
        assert_eq!(got, want, "components after {rounds} rounds");
        assert!(rounds >= 4, "chains take propagation rounds: {rounds}");
        let (spilled, _) = cluster(phash_entries(&hashes, radius), &kind, 4096);
        assert_eq!(spilled, want);
        // Component labels in memory: the same clusters, the first record step
        // reaching the fixed point (the second changes nothing).
        let entries = phash_entries(&hashes, radius);
        let (at_once, rounds) = cluster_with(entries, &kind, 1 << 30, true);
        assert_eq!(at_once, want);
        assert_eq!(rounds, 2);
        assert!(want.values().filter(|&&r| r != 0).count() > 40);
    }

    #[test]
    fn representative_is_the_highest_rank() {
        let kind = DedupKind::Phash { radius: 2 };
        let mut raw = Vec::new();
        for (id, rank) in [(10u128, 0.5), (11, 0.9), (12, 0.1)] {
            append_entries(&kind, &0xFFu64.to_le_bytes(), id, rank, &mut raw);
        }
        let entries = raw
            .chunks_exact(NearEntry::<8>::SIZE)
            .map(NearEntry::<8>::get)
            .collect();
        let (got, _) = cluster(entries, &kind, 1 << 20);
        assert_eq!(got.values().collect::<Vec<_>>(), vec![&11, &11, &11]);
    }
}
