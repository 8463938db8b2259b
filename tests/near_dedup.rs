//! Near-duplicate dedup end to end (docs/DEDUP.md): MinHash over planted edits at
//! known similarities and perceptual hashes at known Hamming distances, each checked
//! against a brute-force all-pairs reference computed here (union-find over every
//! verified pair). phash must equal its reference exactly; MinHash is reported as
//! precision and recall (LSH may miss a pair, it never invents one).
mod common;
use common::*;
use mdf::kernels::minhash::{MinHasher, bbit_jaccard, low_bytes_le};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn find(p: &mut [usize], x: usize) -> usize {
    let mut r = x;
    while p[r] != r {
        r = p[r];
    }
    p[x] = r;
    r
}

/// The records removed by keeping the lowest id of each connected component of
/// `pairs` over `ids`.
fn removed_by(ids: &[String], pairs: &[(usize, usize)]) -> BTreeSet<String> {
    let mut parent: Vec<usize> = (0..ids.len()).collect();
    for &(a, b) in pairs {
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        if ra != rb {
            // the root is the lowest id of the component
            if ids[ra] < ids[rb] {
                parent[rb] = ra;
            } else {
                parent[ra] = rb;
            }
        }
    }
    (0..ids.len())
        .filter(|&i| find(&mut parent, i) != i)
        .map(|i| ids[i].clone())
        .collect()
}

/// Every record of a finished job: (id, record JSON) from the output and the rejects,
/// and the ids rejected as duplicates with the representative each names.
fn all_records(out: &Path, field: &str) -> (Vec<(String, String)>, BTreeMap<String, String>) {
    let m = manifest(out);
    let mut recs = Vec::new();
    for f in m["files"].as_array().unwrap() {
        let b = read_parquet(&out.join(f["path"].as_str().unwrap()));
        for (id, v) in strings(&b, "id").into_iter().zip(strings(&b, field)) {
            recs.push((id, v));
        }
    }
    let mut dups = BTreeMap::new();
    for r in m["rejects"].as_array().unwrap() {
        let b = read_parquet(&out.join("_rejects").join(r["path"].as_str().unwrap()));
        let (ids, reasons, details, records) = (
            strings(&b, "id"),
            strings(&b, "reason"),
            strings(&b, "detail"),
            strings(&b, "record"),
        );
        for i in 0..ids.len() {
            assert_eq!(reasons[i], "duplicate", "{}", records[i]);
            let v: serde_json::Value = serde_json::from_str(&records[i]).unwrap();
            recs.push((ids[i].clone(), v[field].as_str().unwrap().to_string()));
            dups.insert(ids[i].clone(), details[i].clone());
        }
    }
    recs.sort();
    (recs, dups)
}

fn run_job(dir: &Path, name: &str, stages: &str, workers: &str) -> std::path::PathBuf {
    let out = dir.join(format!("out-{name}"));
    let spec = write_spec(
        dir,
        &format!(
            "name: {name}\ninput: {{uris: [\"{d}/in/*.jsonl\"]}}\nstages:\n{stages}\noutput: {{uri: \"{o}\", overwrite: true}}\njob: {{task_bytes: 16KiB, poll_millis: 20}}\n",
            d = dir.display(),
            o = out.display()
        ),
    );
    let spec_path = dir.join(format!("{name}.yaml"));
    std::fs::rename(spec, &spec_path).unwrap();
    run_ok(
        mdf()
            .args([
                "run",
                spec_path.to_str().unwrap(),
                "--workers",
                workers,
                "--job-root",
            ])
            .arg(dir.join(format!("jobs-{name}"))),
    );
    out
}

/// Base documents of 120 words, each with edited copies: `k` words replaced gives a
/// word-5-gram Jaccard similarity of roughly (116 − 5k) / (116 + 5k); some copies are
/// edited from the previous copy (chains), across four files.
fn planted_texts(dir: &Path, bases: usize) {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut files = vec![Vec::new(); 4];
    for _ in 0..bases {
        let mut words: Vec<String> = (0..120).map(|_| format!("w{}", rng.below(5000))).collect();
        let copies = rng.below(5);
        let mut text = words.join(" ");
        files[rng.below(4) as usize].push(serde_json::json!({ "text": text }).to_string());
        for _ in 0..copies {
            let edits = [0, 1, 2, 3, 5, 12][rng.below(6) as usize];
            for _ in 0..edits {
                let at = rng.below(120) as usize;
                words[at] = format!("x{}", rng.below(100_000));
            }
            text = words.join(" ");
            files[rng.below(4) as usize].push(serde_json::json!({ "text": text }).to_string());
        }
    }
    for (i, f) in files.iter().enumerate() {
        write_lines(&dir.join(format!("in/{i}.jsonl")), f);
    }
}

#[test]
fn minhash_dedup_matches_an_all_pairs_reference() {
    let d = tempfile::tempdir().unwrap();
    planted_texts(d.path(), 300);
    let stages = "  - op: minhash\n  - op: dedup\n    params: {key: minhash, kind: minhash, threshold: 0.7, partitions: 3}\n";
    let out = run_job(d.path(), "mh", stages, "2");
    let (recs, dups) = all_records(&out, "text");
    let ids: Vec<String> = recs.iter().map(|r| r.0.clone()).collect();
    // References: every pair whose b-bit estimate passes (what the job verifies), and
    // every pair whose true shingle Jaccard does.
    let m = MinHasher::default_params();
    let sigs: Vec<Vec<u8>> = recs
        .iter()
        .map(|(_, t)| {
            let le: Vec<u8> = m
                .signature(t)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            let mut b = vec![0u8; m.k()];
            low_bytes_le(&le, &mut b);
            b
        })
        .collect();
    let sets: Vec<HashSet<u64>> = recs
        .iter()
        .map(|(_, t)| m.shingles(t).into_iter().collect())
        .collect();
    let (mut est_pairs, mut true_pairs) = (Vec::new(), Vec::new());
    for i in 0..recs.len() {
        for j in i + 1..recs.len() {
            if bbit_jaccard(&sigs[i], &sigs[j], m.k()) >= 0.7 {
                est_pairs.push((i, j));
            }
            let inter = sets[i].intersection(&sets[j]).count() as f64;
            if inter / (sets[i].union(&sets[j]).count() as f64) >= 0.7 {
                true_pairs.push((i, j));
            }
        }
    }
    let got: BTreeSet<String> = dups.keys().cloned().collect();
    let pr = |want: &BTreeSet<String>| {
        let hit = got.intersection(want).count() as f64;
        (
            hit / got.len().max(1) as f64,
            hit / want.len().max(1) as f64,
        )
    };
    let est = removed_by(&ids, &est_pairs);
    let truth = removed_by(&ids, &true_pairs);
    let (p_est, r_est) = pr(&est);
    let (p_true, r_true) = pr(&truth);
    eprintln!(
        "minhash dedup on {} records: {} removed; vs b-bit all pairs ({} removed) precision {p_est:.4} recall {r_est:.4}; vs true Jaccard ({} removed) precision {p_true:.4} recall {r_true:.4}",
        recs.len(),
        got.len(),
        est.len(),
        truth.len()
    );
    assert!(est.len() > 200, "planted near duplicates: {}", est.len());
    // Every pair the job joins passed the same verification the reference uses.
    assert_eq!(p_est, 1.0, "removed records the reference keeps");
    // 14 bands × 8 rows find a pair at J = 0.7 with probability 1 − (1 − 0.7⁸)¹⁴ ≈ 0.57
    // and at 0.8 with 0.92: pairs near the threshold are the ones LSH may miss.
    assert!(r_est >= 0.9, "recall {r_est}");
    assert!(p_true >= 0.95 && r_true >= 0.9, "{p_true} {r_true}");
    // Each duplicate names a kept record of its own cluster.
    let kept: BTreeSet<&String> = ids.iter().filter(|i| !got.contains(*i)).collect();
    assert!(dups.values().all(|rep| kept.contains(rep)));
}

/// 64-bit hashes: random ones, chains whose links are within the radius (the ends
/// are not), and exact copies; as 16 hex digits, the way imagehash prints them.
fn planted_hashes(dir: &Path) -> usize {
    let mut rng = Rng(0xfeed_0000_1111_2222);
    let mut files = vec![Vec::new(); 3];
    let mut n = 0;
    let mut put = |h: u64, rng: &mut Rng, files: &mut Vec<Vec<String>>| {
        files[rng.below(3) as usize]
            .push(serde_json::json!({ "phash": format!("{h:016x}") }).to_string());
        n += 1;
    };
    for _ in 0..400 {
        let h = rng.next();
        put(h, &mut rng, &mut files);
    }
    for c in 0..60u64 {
        let mut h = rng.next();
        for _ in 0..=(c % 5) {
            put(h, &mut rng, &mut files);
            let flips = 1 + rng.below(4);
            for _ in 0..flips {
                h ^= 1 << rng.below(64);
            }
        }
        if c % 7 == 0 {
            put(h, &mut rng, &mut files);
            put(h, &mut rng, &mut files);
        }
    }
    for (i, f) in files.iter().enumerate() {
        write_lines(&dir.join(format!("in/{i}.jsonl")), f);
    }
    n
}

#[test]
fn phash_dedup_equals_the_all_pairs_reference_whatever_the_layout() {
    let d = tempfile::tempdir().unwrap();
    let n = planted_hashes(d.path());
    let a = run_job(
        d.path(),
        "ph-a",
        "  - op: dedup\n    params: {key: phash, kind: phash, partitions: 2}\n",
        "1",
    );
    // More partitions and workers, and a 4 KiB budget that spills every sort.
    let b = run_job(
        d.path(),
        "ph-b",
        "  - op: dedup\n    params: {key: phash, kind: phash, radius: 4, partitions: 5, memory: 4KiB}\n",
        "3",
    );
    let (recs, dups) = all_records(&a, "phash");
    assert_eq!(recs.len(), n);
    let ids: Vec<String> = recs.iter().map(|r| r.0.clone()).collect();
    let h: Vec<u64> = recs
        .iter()
        .map(|r| u64::from_str_radix(&r.1, 16).unwrap())
        .collect();
    let mut pairs = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            if (h[i] ^ h[j]).count_ones() <= 4 {
                pairs.push((i, j));
            }
        }
    }
    let want = removed_by(&ids, &pairs);
    let got: BTreeSet<String> = dups.keys().cloned().collect();
    assert!(want.len() > 100, "planted {}", want.len());
    assert_eq!(
        got, want,
        "phash dedup equals brute force (precision = recall = 1)"
    );
    let (_, dups_b) = all_records(&b, "phash");
    assert_eq!(dups_b, dups, "same duplicates and representatives");
    let survivors = |out: &Path| {
        let mut v = output_ids(out);
        v.sort();
        v
    };
    assert_eq!(survivors(&a), survivors(&b));
}

/// A near dedup that converges in a few rounds leases only those rounds' tasks: the
/// first label step that finds the labels converged commits every later step of its
/// stage as skipped at once (`max_rounds` is an upper bound, 32 by default: 63 label
/// steps planned), with the same output as the all-pairs reference.
#[test]
fn converged_rounds_are_committed_at_once_not_leased() {
    let d = tempfile::tempdir().unwrap();
    planted_hashes(d.path());
    let out = run_job(
        d.path(),
        "ph-lazy",
        "  - op: dedup\n    params: {key: phash, kind: phash, partitions: 2}\n",
        "2",
    );
    let files = files_under(&d.path().join("jobs-ph-lazy"));
    let phase_of = |f: &str, dir: &str| -> Option<String> {
        let rest = &f[f.find(dir)? + dir.len()..];
        rest.split('/').next().map(str::to_string)
    };
    let leased: BTreeSet<String> = files
        .iter()
        .filter_map(|f| phase_of(f, "/leases/"))
        .collect();
    let committed: BTreeSet<String> = files
        .iter()
        .filter_map(|f| phase_of(f, "/commits/"))
        .collect();
    // map, candidates, 63 label steps, apply, finalize: every phase committed...
    assert_eq!(committed.len(), 67, "{committed:?}");
    // ...but only the rounds before convergence (and one skipping step) leased: about
    // 10 phases. A worker that looked before the last step's commits were all there
    // leases one step more (seen under CI load: 13); without the converged commit it
    // would be all 67.
    assert!(
        leased.len() < 20,
        "{} phases leased: {leased:?}",
        leased.len()
    );
    let converged = files
        .iter()
        .filter(|f| f.contains("/commits/"))
        .filter(|f| {
            let v: serde_json::Value = serde_json::from_slice(
                &std::fs::read(d.path().join("jobs-ph-lazy").join(f)).unwrap(),
            )
            .unwrap();
            v["attempt"] == "converged"
        })
        .count();
    assert!(converged >= 100, "{converged} steps committed as converged");
    let (recs, _) = all_records(&out, "phash");
    assert!(!recs.is_empty());
}

/// Two near-duplicate stages in one job each run their own label steps: the second
/// must not take the first one's convergence for its own. The same phash dedup twice
/// gives the single one's output (its survivors are more than the radius apart).
#[test]
fn a_second_near_dedup_stage_runs_its_own_rounds() {
    let d = tempfile::tempdir().unwrap();
    planted_hashes(d.path());
    let once = run_job(
        d.path(),
        "ph-once",
        "  - op: dedup\n    params: {key: phash, kind: phash, partitions: 2}\n",
        "2",
    );
    let twice = run_job(
        d.path(),
        "ph-twice",
        "  - op: dedup\n    name: first\n    params: {key: phash, kind: phash, partitions: 2}\n  - op: dedup\n    name: second\n    params: {key: phash, kind: phash, partitions: 3}\n",
        "2",
    );
    let survivors = |out: &Path| {
        let mut v = output_ids(out);
        v.sort();
        v
    };
    assert_eq!(survivors(&twice), survivors(&once));
    let (_, dups) = all_records(&twice, "phash");
    let (_, dups_once) = all_records(&once, "phash");
    assert_eq!(dups, dups_once, "the second stage removed nothing more");
}

#[test]
fn near_dedup_configs_are_checked_before_any_task() {
    let d = tempfile::tempdir().unwrap();
    write_lines(
        &d.path().join("in/a.jsonl"),
        &[r#"{"text": "a b c", "phash": "00ff00ff00ff00ff"}"#.to_string()],
    );
    for (stages, needle) in [
        (
            "  - op: dedup\n    params: {key: phash, kind: fuzzy}\n",
            "params.kind: expected exact, minhash, phash, substring, paragraph or semantic",
        ),
        (
            "  - op: minhash\n  - op: dedup\n    params: {key: minhash, kind: minhash, threshold: 1.5}\n",
            "params.threshold: must be in (0, 1]",
        ),
        (
            "  - op: minhash\n    params: {bands: 20, rows: 5}\n  - op: dedup\n    params: {key: minhash, kind: minhash}\n",
            "not a MinHash signature of 112 permutations",
        ),
        (
            "  - op: dedup\n    params: {key: text, kind: phash, radius: 40}\n",
            "params.radius: must be between 0 and 31",
        ),
        (
            "  - op: dedup\n    params: {key: text, kind: paragraph, against: \"file:///x\"}\n",
            "params.against: only exact and near-duplicate",
        ),
        (
            "  - op: dedup\n    params: {key: phash, kind: phash, against: \"/nonexistent/jobs/x\"}\n",
            "params.against: cannot load job",
        ),
        (
            "  - op: dedup\n    params: {key: phash, radius: 3}\n",
            "params.radius: unknown field",
        ),
    ] {
        let spec = write_spec(
            d.path(),
            &format!(
                "name: bad\ninput: {{uris: [\"{}/in/*.jsonl\"]}}\nstages:\n{stages}output: {{uri: \"{}/out\"}}\n",
                d.path().display(),
                d.path().display()
            ),
        );
        let o = mdf()
            .args(["validate", spec.to_str().unwrap()])
            .output()
            .unwrap();
        let text = stderr(&o) + &stdout(&o);
        assert!(!o.status.success(), "{stages}: accepted");
        assert!(text.contains(needle), "{stages}: {text}");
    }
}

/// A chain longer than `max_rounds` can connect fails the job with a message saying
/// what to raise, instead of keeping near duplicates it has not linked yet.
#[test]
fn clusters_that_do_not_converge_fail_the_job_naming_max_rounds() {
    let d = tempfile::tempdir().unwrap();
    // A chain of 30 hashes, 3 bits between neighbours, listed from both ends inward
    // so that labels have to travel the whole chain. With 4 KiB of memory the edges
    // do not fit beside a union-find, so each round moves labels one bucket.
    let mut h = 0u64;
    let mut chain = Vec::new();
    for i in 0..30 {
        chain.push(h);
        h ^= 0b111 << ((i * 3) % 60);
    }
    let lines: Vec<String> = chain
        .iter()
        .rev()
        .map(|h| serde_json::json!({ "phash": format!("{h:016x}") }).to_string())
        .collect();
    write_lines(&d.path().join("in/a.jsonl"), &lines);
    let out = d.path().join("out");
    // The chain's job with `params` (after its key and radius), in job root `jobs`.
    let job = |params: &str, jobs: &str| {
        let spec = write_spec(
            d.path(),
            &format!(
                "name: chain\ninput: {{uris: [\"{}/in/*.jsonl\"]}}\nstages:\n  - op: dedup\n    params: {{key: phash, kind: phash, radius: 3, {params}}}\noutput: {{uri: \"{}\", overwrite: true}}\njob: {{poll_millis: 20}}\n",
                d.path().display(),
                out.display()
            ),
        );
        let mut c = mdf();
        c.args(["run", spec.to_str().unwrap(), "--job-root"])
            .arg(d.path().join(jobs));
        c
    };
    let o = job("max_rounds: 2, memory: 4KiB", "jobs").output().unwrap();
    let text = stderr(&o) + &stdout(&o);
    assert!(!o.status.success(), "{text}");
    assert!(
        text.contains("failed to converge in max_rounds = 2")
            && text.contains("raise params.max_rounds"),
        "{text}"
    );
    // With enough rounds the same chain is one cluster: one survivor.
    run_ok(&mut job("max_rounds: 40, memory: 4KiB", "jobs2"));
    assert_eq!(output_ids(&out).len(), 1);
    // In memory (the default budget), the first record step labels each record
    // with its component's best: two rounds are enough for the whole chain.
    run_ok(&mut job("max_rounds: 2", "jobs3"));
    assert_eq!(output_ids(&out).len(), 1);
}

/// Runs `spec_text` (a spec body without `name`) as job `name` under `dir/jobs`;
/// returns (output dir, job URI).
fn run_named(dir: &Path, name: &str, body: &str, workers: &str) -> (PathBuf, String) {
    let out = dir.join(format!("out-{name}"));
    let spec = write_spec(
        dir,
        &format!(
            "name: {name}\n{body}output: {{uri: \"{}\", overwrite: true}}\njob: {{task_bytes: 16KiB, poll_millis: 20}}\n",
            out.display()
        ),
    );
    let spec_path = dir.join(format!("{name}.yaml"));
    std::fs::rename(spec, &spec_path).unwrap();
    let o = run_ok(
        mdf()
            .args([
                "run",
                spec_path.to_str().unwrap(),
                "--workers",
                workers,
                "--job-root",
            ])
            .arg(dir.join("jobs")),
    );
    (out, job_uri(&o))
}

/// An earlier corpus of hashes, and a new one: near and exact copies of old hashes,
/// chains from new hashes to old ones, fresh hashes with near copies among
/// themselves, and one file read by both jobs (its records have the same ids).
fn planted_old_and_new(dir: &Path) {
    let mut rng = Rng(0xa9a1_0000_7777_0001);
    let flip = |mut h: u64, rng: &mut Rng| {
        for _ in 0..1 + rng.below(4) {
            h ^= 1 << rng.below(64);
        }
        h
    };
    let line = |h: u64| serde_json::json!({ "phash": format!("{h:016x}") }).to_string();
    let mut old = vec![Vec::new(); 3];
    let mut old_h = Vec::new();
    for i in 0..300 {
        let mut h = rng.next();
        old[i % 3].push(line(h));
        old_h.push(h);
        if i % 10 == 0 {
            // near copies within the old corpus too
            h = flip(h, &mut rng);
            old[(i + 1) % 3].push(line(h));
            old_h.push(h);
        }
    }
    let mut new = vec![Vec::new(); 2];
    for (i, &h) in old_h.iter().enumerate() {
        match i % 6 {
            0 => new[i % 2].push(line(flip(h, &mut rng))),
            1 => new[i % 2].push(line(h)),
            2 => {
                // a chain: new → new → old
                let a = flip(h, &mut rng);
                new[i % 2].push(line(a));
                new[(i + 1) % 2].push(line(flip(a, &mut rng)));
            }
            _ => {}
        }
    }
    for i in 0..200 {
        let h = rng.next();
        new[i % 2].push(line(h));
        if i % 4 == 0 {
            new[(i + 1) % 2].push(line(flip(h, &mut rng)));
        }
    }
    for (i, f) in old.iter().enumerate() {
        write_lines(&dir.join(format!("old/{i}.jsonl")), f);
    }
    for (i, f) in new.iter().enumerate() {
        write_lines(&dir.join(format!("new/{i}.jsonl")), f);
    }
}

/// Near duplicates against an earlier job (docs/DEDUP.md, "Near duplicates against an
/// earlier corpus"): exactly the new records whose cluster in the all-pairs graph
/// (old–new and new–new pairs within the radius) holds an old record are dropped,
/// each naming the lowest old id of its cluster; the other clusters keep their lowest
/// id; the same whatever the two jobs' partition counts; records of a file both jobs
/// read (same ids) are still dropped as copies of themselves.
#[test]
fn phash_against_an_earlier_job_equals_the_all_pairs_reference() {
    let d = tempfile::tempdir().unwrap();
    planted_old_and_new(d.path());
    let (old_out, old_job) = run_named(
        d.path(),
        "old",
        &format!(
            "input: {{uris: [\"{}/old/*.jsonl\"]}}\nstages:\n  - op: dedup\n    params: {{key: phash, kind: phash, partitions: 3}}\n",
            d.path().display()
        ),
        "2",
    );
    let new_body = |partitions: u32, memory: &str| {
        format!(
            "input: {{uris: [\"{d}/new/*.jsonl\", \"{d}/old/0.jsonl\"]}}\nstages:\n  - op: dedup\n    params: {{key: phash, kind: phash, partitions: {partitions}, memory: {memory}, against: \"{old_job}\"}}\n",
            d = d.path().display()
        )
    };
    let (a, _) = run_named(d.path(), "new-a", &new_body(2, "1GiB"), "1");
    let (b, _) = run_named(d.path(), "new-b", &new_body(5, "4KiB"), "3");

    // The old job's records (kept and rejected): every one is in its index.
    let (old_recs, _) = all_records(&old_out, "phash");
    let (new_recs, dups) = all_records(&a, "phash");
    // Nodes: old records (marked), then new ones.
    let mut ids: Vec<(bool, String)> = old_recs.iter().map(|r| (true, r.0.clone())).collect();
    ids.extend(new_recs.iter().map(|r| (false, r.0.clone())));
    let h: Vec<u64> = old_recs
        .iter()
        .chain(&new_recs)
        .map(|r| u64::from_str_radix(&r.1, 16).unwrap())
        .collect();
    let n = ids.len();
    let mut parent: Vec<usize> = (0..n).collect();
    for i in 0..n {
        for j in i + 1..n {
            if ids[i].0 && ids[j].0 {
                continue; // old–old pairs are not needed (and not made)
            }
            if (h[i] ^ h[j]).count_ones() <= 4 {
                let (ri, rj) = (find(&mut parent, i), find(&mut parent, j));
                parent[ri] = rj;
            }
        }
    }
    // Per component: its lowest old id, else its lowest new id.
    let mut best: BTreeMap<usize, (bool, String)> = BTreeMap::new();
    for (i, (old, id)) in ids.iter().enumerate() {
        let r = find(&mut parent, i);
        let cand = (!old, id.clone()); // old first (false < true), then id
        best.entry(r)
            .and_modify(|b| {
                if cand < *b {
                    *b = cand.clone()
                }
            })
            .or_insert(cand);
    }
    let mut want = BTreeMap::new();
    for i in (0..n).filter(|&i| !ids[i].0) {
        let (is_new, rep) = best[&find(&mut parent, i)].clone();
        if is_new && rep == ids[i].1 {
            continue; // its cluster's survivor
        }
        want.insert(ids[i].1.clone(), rep);
    }
    let old_ids: BTreeSet<&String> = old_recs.iter().map(|r| &r.0).collect();
    let against_old = want.values().filter(|r| old_ids.contains(r)).count();
    assert!(
        against_old > 200,
        "{against_old} dropped against the old corpus"
    );
    assert!(want.len() > against_old, "no clusters of new records only");
    // Records read from the same file in both jobs: dropped, naming themselves.
    let same = dups.iter().filter(|(id, rep)| id == rep).count();
    assert!(same > 50, "{same} records of the shared file dropped");
    assert_eq!(dups, want, "duplicates and what each names");
    let (_, dups_b) = all_records(&b, "phash");
    assert_eq!(
        dups_b, dups,
        "the same with other partitions, workers and spilling"
    );
}

/// MinHash against an earlier job: edited copies of the old texts go, texts of their
/// own stay, and each dropped copy names a record of the old corpus.
#[test]
fn minhash_against_an_earlier_job_drops_the_near_copies_of_the_old_corpus() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x0dd5_eed0_0000_0042);
    let mut old = Vec::new();
    let mut copies = Vec::new();
    let mut fresh = Vec::new();
    for i in 0..150 {
        let mut words: Vec<String> = (0..120).map(|_| format!("w{}", rng.below(5000))).collect();
        old.push(serde_json::json!({ "text": words.join(" ") }).to_string());
        if i % 2 == 0 {
            for _ in 0..2 {
                let at = rng.below(120) as usize;
                words[at] = format!("x{}", rng.below(100_000));
            }
            copies.push(serde_json::json!({ "text": words.join(" "), "copy": true }).to_string());
        }
        let own: Vec<String> = (0..120).map(|_| format!("v{}", rng.below(5000))).collect();
        fresh.push(serde_json::json!({ "text": own.join(" "), "copy": false }).to_string());
    }
    write_lines(&d.path().join("old/a.jsonl"), &old);
    write_lines(&d.path().join("new/copies.jsonl"), &copies);
    write_lines(&d.path().join("new/fresh.jsonl"), &fresh);
    let stages =
        "  - op: minhash\n  - op: dedup\n    params: {key: minhash, kind: minhash, partitions: 2";
    let (old_out, old_job) = run_named(
        d.path(),
        "mh-old",
        &format!(
            "input: {{uris: [\"{}/old/*.jsonl\"]}}\nstages:\n{stages}}}\n",
            d.path().display()
        ),
        "2",
    );
    let (out, _) = run_named(
        d.path(),
        "mh-new",
        &format!(
            "input: {{uris: [\"{}/new/*.jsonl\"]}}\nstages:\n{stages}, against: \"{old_job}\"}}\n",
            d.path().display()
        ),
        "2",
    );
    let (old_recs, _) = all_records(&old_out, "text");
    let old_ids: BTreeSet<String> = old_recs.into_iter().map(|r| r.0).collect();
    let (recs, dups) = all_records(&out, "text");
    assert_eq!(recs.len(), copies.len() + fresh.len());
    let copy_ids: BTreeSet<String> = recs
        .iter()
        .filter(|r| !r.1.contains(" v") && !r.1.starts_with('v'))
        .map(|r| r.0.clone())
        .collect();
    assert_eq!(copy_ids.len(), copies.len());
    // 2 of 120 words edited: J ≈ 0.85, found by 14 × 8 bands with probability ≈ 0.97.
    let dropped = copy_ids.iter().filter(|id| dups.contains_key(*id)).count();
    assert!(
        dropped * 10 >= copies.len() * 9,
        "{dropped} of {} copies dropped",
        copies.len()
    );
    for (id, rep) in &dups {
        assert!(copy_ids.contains(id), "a fresh text {id} was dropped");
        assert!(old_ids.contains(rep), "{id} names {rep}, not an old record");
    }
}

/// What the earlier job must share with the new one, checked before any task.
#[test]
fn near_against_refuses_an_earlier_job_with_other_bands_or_producer() {
    let d = tempfile::tempdir().unwrap();
    write_lines(
        &d.path().join("in/a.jsonl"),
        &[
            r#"{"text": "one two three four five six seven", "phash": "00ff00ff00ff00ff"}"#
                .to_string(),
        ],
    );
    let input = format!("input: {{uris: [\"{}/in/*.jsonl\"]}}\n", d.path().display());
    let (_, ph) = run_named(
        d.path(),
        "ph",
        &format!(
            "{input}stages:\n  - op: dedup\n    params: {{key: phash, kind: phash, radius: 4}}\n"
        ),
        "1",
    );
    let (_, mh) = run_named(
        d.path(),
        "mh",
        &format!(
            "{input}stages:\n  - op: minhash\n  - op: dedup\n    params: {{key: minhash, kind: minhash}}\n"
        ),
        "1",
    );
    for (stages, needle) in [
        (
            format!(
                "  - op: dedup\n    params: {{key: phash, kind: phash, radius: 3, against: \"{ph}\"}}\n"
            ),
            "as phash radius 4, not as phash radius 3",
        ),
        (
            format!(
                "  - op: minhash\n    params: {{seed: 7}}\n  - op: dedup\n    params: {{key: minhash, kind: minhash, against: \"{mh}\"}}\n"
            ),
            "with a different stage or parameters",
        ),
        (
            format!(
                "  - op: minhash\n    params: {{bands: 16, rows: 8}}\n  - op: dedup\n    params: {{key: minhash, kind: minhash, bands: 16, rows: 8, against: \"{mh}\"}}\n"
            ),
            "as minhash 14×8, not as minhash 16×8",
        ),
        (
            format!("  - op: dedup\n    params: {{key: phash, kind: phash, against: \"{mh}\"}}\n"),
            "has no dedup stage on the key \"phash\"",
        ),
    ] {
        let spec = write_spec(
            d.path(),
            &format!(
                "name: bad\n{input}stages:\n{stages}output: {{uri: \"{}/out-bad\"}}\n",
                d.path().display()
            ),
        );
        let o = mdf()
            .args(["run", spec.to_str().unwrap()])
            .output()
            .unwrap();
        let text = stderr(&o) + &stdout(&o);
        assert_eq!(o.status.code(), Some(2), "{stages}: {text}");
        assert!(text.contains("params.against"), "{stages}: {text}");
        assert!(text.contains(needle), "{stages}: {text}");
        assert!(!d.path().join("out-bad").exists());
    }
}

/// The bundled example runs against the dedup example's job: over the same files,
/// every record goes (the earlier job read them: same ids, and still duplicates);
/// over edited copies, exactly the texts the earlier corpus has go, and near copies
/// too.
#[test]
fn the_against_example_runs_against_the_dedup_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let d = tempfile::tempdir().unwrap();
    let jobs = d.path().join("jobs");
    let o = run_ok(
        mdf()
            .current_dir(root)
            .args(["run", "examples/dedup.yaml", "--output"])
            .arg(d.path().join("v1"))
            .arg("--job-root")
            .arg(&jobs),
    );
    let v1 = job_uri(&o);
    let again = d.path().join("again");
    run_ok(
        mdf()
            .current_dir(root)
            .env("MDF_AGAINST", &v1)
            .args(["run", "examples/dedup-against.yaml", "--output"])
            .arg(&again)
            .arg("--job-root")
            .arg(&jobs),
    );
    let m = manifest(&again);
    let kept: u64 = m["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rows"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(kept, 0, "the same files again: nothing new");
    let (recs, dups) = duplicates(&again);
    assert!(recs.len() > 300, "{} records", recs.len());
    assert_eq!(dups.len(), recs.len(), "every valid record is a duplicate");

    // New texts, and the last word changed in each of the others.
    let mut lines = Vec::new();
    // (The example's data holds malformed lines on purpose: they are skipped here.)
    let raw = std::fs::read(root.join("examples/data/quickstart/shard-00.jsonl")).unwrap();
    for (i, l) in raw.split(|&b| b == b'\n').enumerate() {
        let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(l) else {
            continue;
        };
        if !v["text"].is_string() {
            continue;
        }
        let t = v["text"].as_str().unwrap().to_string();
        let words: Vec<&str> = t.split_whitespace().collect();
        if i % 3 == 0 || words.len() < 40 {
            let own: Vec<String> = (0..60)
                .map(|j| format!("fz{}", (i * 7919 + j * 104_729) % 99_991))
                .collect();
            v["text"] = format!("fresh page {i}: {}", own.join(" ")).into();
        } else {
            let mut w: Vec<String> = words.iter().map(|s| s.to_string()).collect();
            // The last word: one 5-gram of about 40 differs, J ≈ 0.95.
            w[words.len() - 1] = "CHANGED".into();
            v["text"] = w.join(" ").into();
        }
        lines.push(v.to_string());
    }
    write_lines(&d.path().join("new/crawl.jsonl"), &lines);
    let new_out = d.path().join("new-out");
    run_ok(
        mdf()
            .current_dir(root)
            .env("MDF_AGAINST", &v1)
            .args(["run", "examples/dedup-against.yaml", "--input"])
            .arg(d.path().join("new/*.jsonl"))
            .arg("--output")
            .arg(&new_out)
            .arg("--job-root")
            .arg(&jobs),
    );
    let (recs, dups) = duplicates(&new_out);
    let edited: BTreeSet<&String> = recs
        .iter()
        .filter(|r| !r.1.starts_with("fresh page"))
        .map(|r| &r.0)
        .collect();
    let fresh = recs.len() - edited.len();
    assert!(
        fresh > 10 && edited.len() > 30,
        "{fresh} fresh, {} edited",
        edited.len()
    );
    for id in dups.keys() {
        assert!(edited.contains(id), "a fresh page {id} was dropped");
    }
    let dropped = edited.iter().filter(|id| dups.contains_key(**id)).count();
    assert!(
        dropped * 10 >= edited.len() * 9,
        "{dropped} of {} near copies of the old corpus dropped",
        edited.len()
    );
}

/// Every record of a finished job that reached the dedup stages, (id, text) from the
/// output and the `duplicate` rejects, and each duplicate's detail (other rejects,
/// such as the example's malformed line, are left out).
fn duplicates(out: &Path) -> (Vec<(String, String)>, BTreeMap<String, String>) {
    let m = manifest(out);
    let mut recs = Vec::new();
    for f in m["files"].as_array().unwrap() {
        let b = read_parquet(&out.join(f["path"].as_str().unwrap()));
        recs.extend(strings(&b, "id").into_iter().zip(strings(&b, "text")));
    }
    let mut dups = BTreeMap::new();
    for r in m["rejects"].as_array().unwrap() {
        let b = read_parquet(&out.join("_rejects").join(r["path"].as_str().unwrap()));
        let (ids, reasons, details, records) = (
            strings(&b, "id"),
            strings(&b, "reason"),
            strings(&b, "detail"),
            strings(&b, "record"),
        );
        for i in (0..ids.len()).filter(|&i| reasons[i] == "duplicate") {
            let v: serde_json::Value = serde_json::from_str(&records[i]).unwrap();
            recs.push((ids[i].clone(), v["text"].as_str().unwrap().to_string()));
            dups.insert(ids[i].clone(), details[i].clone());
        }
    }
    (recs, dups)
}
