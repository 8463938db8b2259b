//! `mdf bench dedup`: the exact-dedup shuffle on one core, without the store, through
//! the reduce task's own code path from the sorted entries on.
use super::BenchError;
use std::time::Instant;

/// The benchmark's shape.
#[derive(Debug, Clone)]
pub struct DedupBench {
    pub keys: u64,
    /// Share of records that are copies of another.
    pub dup_ratio: f64,
    pub partitions: u32,
    pub keys_per_task: u64,
    /// Reduce memory budget, bytes.
    pub memory: u64,
}

/// What `mdf bench dedup` measured (seconds per pass).
pub struct DedupReport {
    pub bench: DedupBench,
    pub distinct: u64,
    pub tasks: u64,
    pub key_bytes: usize,
    pub pass1: f64,
    pub pass2: f64,
    pub apply: f64,
    pub looked_up: usize,
    pub duplicates: u64,
    pub spilled_bytes: u64,
    pub peak_rss_mb: f64,
}

/// Pass 1 (partition and encode each task's keys), pass 2 (every partition's sections
/// merged, sorted, decided; spilling past the memory budget) and apply (each task's
/// decisions looked up), on one core, without the store.
pub fn dedup_shuffle(b: &DedupBench) -> Result<DedupReport, BenchError> {
    let (n, dup_ratio, partitions, per_task, memory) =
        (b.keys, b.dup_ratio, b.partitions, b.keys_per_task, b.memory);
    use crate::dedup::{self as shuffle, Decision, ExternalSort, KeyEntry, Sourced};
    let mut next = crate::kernels::xorshift(0x2545_F491_4F6C_DD1Du64);
    let distinct = ((n as f64) * (1.0 - dup_ratio)).max(1.0) as u64;
    let tasks = n.div_ceil(per_task);
    let dir = crate::dedup::spill_dir();
    // Pass 1: each task's entries partitioned, sorted and encoded.
    let mut objects = Vec::new();
    let t = Instant::now();
    let mut id = 0u128;
    for _ in 0..tasks {
        let m = per_task.min(n - id as u64);
        // Raw entries, as the pipeline appends them.
        let mut raw = Vec::with_capacity(m as usize * <KeyEntry as shuffle::Fixed>::SIZE);
        for _ in 0..m {
            id += 1;
            // Keys drawn from `distinct` values: copies land in any task.
            let k = next() % distinct;
            let e = KeyEntry {
                key: u128::from(k).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835),
                id,
                rank: 0.0,
            };
            shuffle::Fixed::put(&e, &mut raw);
        }
        objects.push(shuffle::encode_keys(
            &raw,
            <KeyEntry as shuffle::Fixed>::SIZE,
            partitions,
        ));
    }
    let pass1 = t.elapsed().as_secs_f64();
    let key_bytes: usize = objects.iter().map(Vec::len).sum();
    // Pass 2: one reduce per partition.
    let t = Instant::now();
    let (mut dups, mut spilled) = (0u64, 0u64);
    let mut decision_objects = Vec::new();
    for r in 0..partitions as u64 {
        let mut sorter = ExternalSort::<Sourced>::new(memory / 2, dir.clone());
        for (ti, o) in objects.iter().enumerate() {
            let sec = shuffle::section_of(o, r).map_err(BenchError::step("a shuffle section"))?;
            for e in
                shuffle::entries::<KeyEntry>(sec).map_err(BenchError::step("a shuffle section"))?
            {
                sorter
                    .push(Sourced { e, task: ti as u32 })
                    .map_err(BenchError::io(&dir))?;
            }
        }
        // The reduce task's own code path, from the sorted entries on.
        let (mut f, _, st) =
            shuffle::finish_reduce(sorter, memory, dir.clone(), false, tasks as u32)
                .map_err(BenchError::io(&dir))?;
        dups += st.duplicates;
        spilled += st.spilled_bytes;
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut b).map_err(BenchError::io(&dir))?;
        decision_objects.push(b);
    }
    let pass2 = t.elapsed().as_secs_f64();
    // Apply: each task's decisions from every reducer.
    let t = Instant::now();
    let mut looked_up = 0usize;
    for ti in 0..tasks {
        let mut map = crate::kernels::FastMap::default();
        for o in &decision_objects {
            let sec = shuffle::section_of(o, ti).map_err(BenchError::step("a shuffle section"))?;
            for d in
                shuffle::decode::<Decision>(sec).map_err(BenchError::step("a shuffle section"))?
            {
                map.insert(d.id, d.rep);
            }
        }
        looked_up += map.len();
    }
    let apply = t.elapsed().as_secs_f64();
    Ok(DedupReport {
        bench: b.clone(),
        distinct,
        tasks,
        key_bytes,
        pass1,
        pass2,
        apply,
        looked_up,
        duplicates: dups,
        spilled_bytes: spilled,
        peak_rss_mb: super::peak_rss_mb(),
    })
}

impl std::fmt::Display for DedupReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (n, distinct, tasks, partitions, memory) = (
            self.bench.keys,
            self.distinct,
            self.tasks,
            self.bench.partitions,
            self.bench.memory,
        );
        let (pass1, pass2, apply) = (self.pass1, self.pass2, self.apply);
        let (looked_up, dups) = (self.looked_up, self.duplicates);
        let total = pass1 + pass2 + apply;
        writeln!(
            f,
            "mdf bench dedup: {n} keys ({distinct} distinct drawn), {tasks} tasks, {partitions} partitions, one core"
        )?;
        writeln!(f)?;
        writeln!(f, "| measure | value |")?;
        writeln!(f, "|---|---|")?;
        writeln!(
            f,
            "| keys objects | {:.1} MB ({} bytes/key) |",
            self.key_bytes as f64 / 1e6,
            <crate::dedup::KeyEntry as crate::dedup::Fixed>::SIZE
        )?;
        writeln!(
            f,
            "| pass 1 (partition + sort + encode) | {pass1:.2} s, {:.1} M keys/s |",
            n as f64 / pass1 / 1e6
        )?;
        writeln!(
            f,
            "| pass 2 (merge + sort + decide + encode) | {pass2:.2} s, {:.1} M keys/s |",
            n as f64 / pass2 / 1e6
        )?;
        writeln!(
            f,
            "| apply (decision lookups built) | {apply:.2} s, {looked_up} decisions |"
        )?;
        writeln!(
            f,
            "| **both passes, one core** | **{:.1} M keys/s** |",
            n as f64 / total / 1e6
        )?;
        writeln!(f, "| duplicates found | {dups} |")?;
        writeln!(
            f,
            "| spilled to disk | {:.1} MB (reduce memory {} MB) |",
            self.spilled_bytes as f64 / 1e6,
            memory >> 20
        )?;
        writeln!(f, "| peak RSS | {:.0} MB |", self.peak_rss_mb)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_shuffle_finds_its_copies_and_prints_a_table() {
        let b = DedupBench {
            keys: 4_000,
            dup_ratio: 0.5,
            partitions: 4,
            keys_per_task: 1_000,
            memory: 1 << 20,
        };
        let r = dedup_shuffle(&b).unwrap();
        assert_eq!(r.tasks, 4);
        // 4,000 keys drawn from 2,000 values: at least 2,000 are copies.
        assert!(r.duplicates >= 2_000, "{}", r.duplicates);
        assert_eq!(r.looked_up as u64, r.duplicates, "one decision per copy");
        let table = r.to_string();
        assert!(
            table.starts_with(
                "mdf bench dedup: 4000 keys (2000 distinct drawn), 4 tasks, 4 partitions"
            ),
            "{table}"
        );
        assert!(table.contains("| duplicates found | "), "{table}");
    }
}
