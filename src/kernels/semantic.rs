//! Semantic dedup's arithmetic (docs/SEMANTIC.md): unit vectors, cosine similarities
//! of blocks of them as one `sgemm` each (matrixmultiply: pure Rust, AVX2/FMA kernels
//! chosen at run time), nearest centroids, a deterministic spherical k-means, the
//! pairs of a set above a similarity threshold, and their connected components. Pure:
//! row-major `f32` slices in, numbers out; the phases that use them do the I/O.

/// Scales `v` to unit length; `false` (and `v` untouched) for a zero, infinite or NaN
/// vector, which has no direction to compare.
pub fn normalize(v: &mut [f32]) -> bool {
    let n: f64 = v
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt();
    if !(n.is_finite() && n > 0.0) {
        return false;
    }
    // Divided in f64: 1/n in f32 overflows for norms below ~3e-39.
    let scaled: Vec<f32> = v.iter().map(|&x| (f64::from(x) / n) as f32).collect();
    if scaled.iter().any(|x| !x.is_finite()) {
        return false;
    }
    v.copy_from_slice(&scaled);
    true
}

/// `out[i·n + j]` = a_i · b_j for the `m` rows of `a` and the `n` rows of `b` (each
/// `d` long, row-major): one `sgemm` (A · Bᵀ). On unit vectors, cosine similarities.
pub fn dots(a: &[f32], b: &[f32], d: usize, out: &mut [f32]) {
    let (m, n) = (a.len() / d, b.len() / d);
    assert_eq!(a.len(), m * d, "a is m × d");
    assert_eq!(b.len(), n * d, "b is n × d");
    assert_eq!(out.len(), m * n, "out is m × n");
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: the pointers cover m·d, n·d and m·n elements, as asserted above, with
    // the strides given: A row-major (d, 1), Bᵀ read from B row-major (1, d), C
    // row-major (n, 1); C is written only.
    unsafe {
        matrixmultiply::sgemm(
            m,
            d,
            n,
            1.0,
            a.as_ptr(),
            d as isize,
            1,
            b.as_ptr(),
            1,
            d as isize,
            0.0,
            out.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// Rows compared at once: a block of pairs is `BLOCK²` floats (4 MiB); a block
/// against `k` centroids `BLOCK · k` floats.
pub const BLOCK: usize = 1024;

/// For every row of `v`, its most similar centroid and the similarity (ties: the
/// lowest centroid), in blocks of [`BLOCK`] rows.
pub fn nearest(v: &[f32], centroids: &[f32], d: usize) -> Vec<(u32, f32)> {
    let k = centroids.len() / d;
    let mut out = Vec::with_capacity(v.len() / d);
    if k == 0 {
        return out;
    }
    let mut sims = Vec::new();
    for block in v.chunks(BLOCK * d) {
        let m = block.len() / d;
        sims.resize(m * k, 0.0);
        dots(block, centroids, d, &mut sims);
        for row in sims.chunks_exact(k) {
            let (mut best, mut at) = (f32::NEG_INFINITY, 0u32);
            for (j, &s) in row.iter().enumerate() {
                if s > best {
                    (best, at) = (s, j as u32);
                }
            }
            out.push((at, best));
        }
    }
    out
}

/// Spherical k-means over the rows of `sample` (unit vectors, in a fixed order:
/// the order decides the initial centroids, so the result is deterministic).
/// Initial centroids: the first `k` rows whose similarity to every centroid chosen
/// before is below `max_initial_similarity` (then, if fewer, the first rows not yet
/// chosen). Each iteration assigns every row to its nearest centroid and moves each
/// centroid to the normalised mean of its rows; a centroid left without rows takes the
/// row least similar to its own centroid (ties: the first). Stops after `iterations`,
/// or when no row changes centroid. Returns `k × d` centroids (fewer when the sample
/// has fewer rows) and the iterations run. Every decision (initial centroids,
/// assignments) is taken in f64 where the sgemm is within [`recheck`] of it, so the
/// centroids are the same on every machine. Stops early (returning what it has) once
/// `cancel` is set.
pub fn spherical_kmeans(
    sample: &[f32],
    d: usize,
    k: usize,
    iterations: usize,
    max_initial_similarity: f32,
    cancel: &std::sync::atomic::AtomicBool,
) -> (Vec<f32>, usize) {
    let s = sample.len() / d;
    let k = k.min(s);
    if k == 0 {
        return (vec![], 0);
    }
    let row = |i: usize| &sample[i * d..(i + 1) * d];
    let mut chosen: Vec<usize> = Vec::with_capacity(k);
    let mut centroids: Vec<f32> = Vec::with_capacity(k * d);
    let mut sims = vec![0f32; 1];
    for i in 0..s {
        if chosen.len() == k || cancel.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        sims.resize(chosen.len(), 0.0);
        dots(row(i), &centroids, d, &mut sims);
        let band = recheck(d);
        let below = sims.iter().enumerate().all(|(j, &x)| {
            x < max_initial_similarity - band
                || (x < max_initial_similarity + band
                    && dot64(row(i), &centroids[j * d..(j + 1) * d])
                        < f64::from(max_initial_similarity))
        });
        if below {
            chosen.push(i);
            centroids.extend_from_slice(row(i));
        }
    }
    let mut taken = vec![false; s];
    for &i in &chosen {
        taken[i] = true;
    }
    for (i, _) in taken.iter().enumerate().filter(|(_, t)| !**t) {
        if chosen.len() == k {
            break;
        }
        chosen.push(i);
        centroids.extend_from_slice(row(i));
    }
    let mut assigned: Vec<u32> = vec![u32::MAX; s];
    let mut ran = 0;
    for _ in 0..iterations {
        if cancel.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        ran += 1;
        let Some(near) = nearest_until(sample, &centroids, d, cancel) else {
            break;
        };
        let mut changed = false;
        for (a, &(c, _)) in assigned.iter_mut().zip(&near) {
            changed |= *a != c;
            *a = c;
        }
        if !changed {
            break;
        }
        let mut sums = vec![0f64; k * d];
        let mut counts = vec![0usize; k];
        for (i, &(c, _)) in near.iter().enumerate() {
            counts[c as usize] += 1;
            let acc = &mut sums[c as usize * d..(c as usize + 1) * d];
            for (a, &x) in acc.iter_mut().zip(row(i)) {
                *a += f64::from(x);
            }
        }
        // Rows taken by an empty centroid, least similar to their own first.
        let mut spare: Vec<usize> = (0..s).collect();
        spare.sort_by(|&a, &b| near[a].1.total_cmp(&near[b].1).then(a.cmp(&b)));
        let mut spare = spare.into_iter();
        for c in 0..k {
            let dst = &mut centroids[c * d..(c + 1) * d];
            let mean: Vec<f32> = sums[c * d..(c + 1) * d].iter().map(|&x| x as f32).collect();
            let mut mean = mean;
            if counts[c] > 0 && normalize(&mut mean) {
                dst.copy_from_slice(&mean);
            } else if let Some(i) = spare.next() {
                dst.copy_from_slice(row(i));
            }
        }
    }
    (centroids, ran)
}

/// How close (in f32) a similarity of two `d`-dimensional unit vectors must be to a
/// decision it feeds (the best centroid, the threshold) to be recomputed in f64: sgemm
/// kernels (AVX-512, AVX2/FMA, scalar) sum in different orders, and the error of an
/// f32 dot product of unit vectors is at most d·2⁻²⁴ (Cauchy–Schwarz bounds Σ|aᵢbᵢ| by
/// 1); twice that, plus 1e-6 for the threshold's own rounding to f32. The f64 dot of
/// the same f32 inputs, summed in one order, is the same on every machine.
pub fn recheck(d: usize) -> f32 {
    (2.0 * d as f64 * 2f64.powi(-24) + 1e-6) as f32
}

/// The dot product of two rows in f64 (the decisions' arbiter, see [`recheck`]).
pub fn dot64(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum()
}

/// For every row of `v`, its most similar centroid and that similarity in f64, the
/// same on every machine: the sgemm's best, and every centroid within [`recheck`] of
/// it (twice the bound: either may be off), recomputed in f64 (ties: the lowest
/// centroid).
pub fn nearest_checked(v: &[f32], centroids: &[f32], d: usize) -> Vec<(u32, f64)> {
    static NEVER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    nearest_until(v, centroids, d, &NEVER).expect("never cancelled")
}

/// [`nearest_checked`], giving up (`None`) at the first block after `cancel` is set.
pub fn nearest_until(
    v: &[f32],
    centroids: &[f32],
    d: usize,
    cancel: &std::sync::atomic::AtomicBool,
) -> Option<Vec<(u32, f64)>> {
    let k = centroids.len() / d;
    let mut out = Vec::with_capacity(v.len() / d);
    if k == 0 {
        return Some(out);
    }
    let c = |j: usize| &centroids[j * d..(j + 1) * d];
    let band = 2.0 * recheck(d);
    let mut sims = Vec::new();
    for (bi, block) in v.chunks(BLOCK * d).enumerate() {
        if cancel.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let m = block.len() / d;
        sims.resize(m * k, 0.0);
        dots(block, centroids, d, &mut sims);
        for (i, row) in sims.chunks_exact(k).enumerate() {
            let best = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let x = &v[(bi * BLOCK + i) * d..(bi * BLOCK + i + 1) * d];
            let mut pick = (u32::MAX, f64::NEG_INFINITY);
            for (j, &s) in row.iter().enumerate() {
                if s >= best - band {
                    let exact = dot64(x, c(j));
                    if exact > pick.1 {
                        pick = (j as u32, exact);
                    }
                }
            }
            out.push(pick);
        }
    }
    Some(out)
}

/// The connected components of the rows of `v` (unit vectors) joined by every pair at
/// similarity ≥ `threshold`, each row's component named by its lowest row; found
/// block by block ([`BLOCK`] × [`BLOCK`], one sgemm each) straight into a union-find,
/// so memory is the blocks and one label per row however many pairs there are (a
/// cluster of n copies has n²/2). A pair is decided by the sgemm when it is more than
/// [`recheck`] from the threshold, else by its f64 dot product: the same components on
/// every machine. Returns `None` once `cancel` is set.
pub fn components_at_least(
    v: &[f32],
    d: usize,
    threshold: f64,
    cancel: &std::sync::atomic::AtomicBool,
) -> Option<Vec<u32>> {
    let n = v.len() / d;
    let (t, band) = (threshold as f32, recheck(d));
    let row = |i: usize| &v[i * d..(i + 1) * d];
    let mut parent: Vec<u32> = (0..n as u32).collect();
    let mut sims = Vec::new();
    for bi in (0..n).step_by(BLOCK) {
        let a = &v[bi * d..(bi + BLOCK).min(n) * d];
        for bj in (bi..n).step_by(BLOCK) {
            if cancel.load(std::sync::atomic::Ordering::Relaxed) {
                return None;
            }
            let b = &v[bj * d..(bj + BLOCK).min(n) * d];
            let (m, w) = (a.len() / d, b.len() / d);
            sims.resize(m * w, 0.0);
            dots(a, b, d, &mut sims);
            for i in 0..m {
                let start = if bi == bj { i + 1 } else { 0 };
                for j in start..w {
                    let s = sims[i * w + j];
                    if s < t - band {
                        continue;
                    }
                    let (x, y) = (bi + i, bj + j);
                    if s >= t + band || dot64(row(x), row(y)) >= threshold {
                        super::uf_union(&mut parent, x as u32, y as u32);
                    }
                }
            }
        }
    }
    Some(
        (0..n as u32)
            .map(|x| super::uf_find(&mut parent, x))
            .collect(),
    )
}

/// The dimension of an embedding column's type: FixedSizeList<Float32> of 1 to 4096.
pub fn dim_of(t: &arrow_schema::DataType) -> Option<usize> {
    match t {
        arrow_schema::DataType::FixedSizeList(f, n)
            if f.data_type() == &arrow_schema::DataType::Float32 && (1..=4096).contains(n) =>
        {
            Some(*n as usize)
        }
        _ => None,
    }
}

/// Bytes that `k` centroids of `d` dimensions take in the tasks that hold them: the
/// centroids read (and their bytes), the k-means sums in f64, and a block of
/// similarities to all of them.
pub fn centroid_bytes(k: usize, d: usize) -> u64 {
    (k as u64) * (d as u64) * 16 + (BLOCK as u64) * (k as u64) * 4
}

/// Bytes of one semantic dedup entry of a `d`-dimensional vector: the sample key
/// (16), id (16), rank (8) and the vector.
pub fn entry_bytes(d: usize) -> usize {
    40 + 4 * d
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The connected components of `n` nodes joined by `pairs`: each node's component
    /// named by its lowest node.
    fn components(n: usize, pairs: &[(u32, u32)]) -> Vec<u32> {
        let mut parent: Vec<u32> = (0..n as u32).collect();
        for &(a, b) in pairs {
            crate::kernels::uf_union(&mut parent, a, b);
        }
        (0..n as u32)
            .map(|x| crate::kernels::uf_find(&mut parent, x))
            .collect()
    }

    static NEVER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    fn random_unit(rnd: &mut impl FnMut() -> u64, n: usize, d: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..n * d)
            .map(|_| (rnd() >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            .collect();
        for r in v.chunks_mut(d) {
            assert!(normalize(r));
        }
        v
    }

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn dots_equal_the_naive_products() {
        let mut rnd = crate::kernels::xorshift(7);
        let d = 37;
        let (a, b) = (random_unit(&mut rnd, 53, d), random_unit(&mut rnd, 29, d));
        let mut out = vec![0f32; 53 * 29];
        dots(&a, &b, d, &mut out);
        for i in 0..53 {
            for j in 0..29 {
                let want = dot(&a[i * d..(i + 1) * d], &b[j * d..(j + 1) * d]);
                assert!((out[i * 29 + j] - want).abs() < 1e-5, "{i} {j}");
            }
        }
        let mut z = vec![0f32, 0.0];
        assert!(!normalize(&mut z));
        let mut nan = vec![f32::NAN, 1.0];
        assert!(!normalize(&mut nan));
        // Subnormal: a direction all the same, found in f64.
        let mut tiny = vec![1e-45f32, 0.0, 3e-45];
        assert!(normalize(&mut tiny));
        assert!(tiny.iter().all(|x| x.is_finite()), "{tiny:?}");
    }

    #[test]
    fn components_at_least_equal_the_pairs_components() {
        let mut rnd = crate::kernels::xorshift(19);
        let d = 16;
        let n = BLOCK + 200;
        let mut v = random_unit(&mut rnd, n, d);
        for c in 0..120 {
            let (src, dst) = (c * 17 % n, (c * 613 + BLOCK - 9) % n);
            let mut copy: Vec<f32> = v[src * d..(src + 1) * d].to_vec();
            copy[c % d] += 0.04;
            normalize(&mut copy);
            v[dst * d..(dst + 1) * d].copy_from_slice(&copy);
        }
        let t = 0.97;
        // Pairs within the band: their f32 similarity is too close to the threshold
        // to trust, so the f64 dot decides (and a plain `s >= t` would decide some
        // of them the other way).
        for c in 0..60 {
            let (a, b) = (2 * c + 7, 2 * c + 8);
            let off = (c as f64 - 30.0) * 1e-8;
            let cos = t + off;
            let mut x = vec![0f32; d];
            x[c % d] = 1.0;
            let mut y = vec![0f32; d];
            y[c % d] = cos as f32;
            y[(c + 1) % d] = (1.0 - cos * cos).sqrt() as f32;
            v[a * d..(a + 1) * d].copy_from_slice(&x);
            v[b * d..(b + 1) * d].copy_from_slice(&y);
        }
        let mut pairs = Vec::new();
        for i in 0..n {
            for j in i + 1..n {
                if dot64(&v[i * d..(i + 1) * d], &v[j * d..(j + 1) * d]) >= t {
                    pairs.push((i as u32, j as u32));
                }
            }
        }
        assert!(pairs.len() >= 100, "{} pairs", pairs.len());
        let got = components_at_least(&v, d, t, &NEVER).unwrap();
        assert_eq!(got, components(n, &pairs));
        let same: Vec<f32> = v[..d].repeat(1000);
        let one = components_at_least(&same, d, 0.999, &NEVER).unwrap();
        assert!(one.iter().all(|&c| c == 0));
        let stop = std::sync::atomic::AtomicBool::new(true);
        assert!(components_at_least(&same, d, 0.999, &stop).is_none());
        // The band grows with the dimension: the f32 error bound of a unit dot.
        assert!(recheck(4096) > 4.8e-4 && recheck(16) < 3e-6);
    }

    #[test]
    fn nearest_is_the_most_similar_centroid() {
        let mut rnd = crate::kernels::xorshift(3);
        let d = 24;
        let (v, c) = (random_unit(&mut rnd, 2500, d), random_unit(&mut rnd, 17, d));
        for (i, &(at, s)) in nearest(&v, &c, d).iter().enumerate() {
            let r = &v[i * d..(i + 1) * d];
            let best = (0..17)
                .map(|j| dot(r, &c[j * d..(j + 1) * d]))
                .fold(f32::NEG_INFINITY, f32::max);
            assert!((s - best).abs() < 1e-5);
            assert!((dot(r, &c[at as usize * d..(at as usize + 1) * d]) - best).abs() < 1e-5);
        }
    }

    /// Well-separated clusters are found, the same every run, and k-means only ever
    /// improves the objective over its initial centroids.
    #[test]
    fn kmeans_finds_separated_clusters_deterministically() {
        let mut rnd = crate::kernels::xorshift(5);
        let d = 32;
        let centres = random_unit(&mut rnd, 6, d);
        let mut sample = Vec::new();
        let mut truth = Vec::new();
        for i in 0..600 {
            let c = (i * 7) % 6;
            let mut x: Vec<f32> = centres[c * d..(c + 1) * d].to_vec();
            for v in x.iter_mut() {
                *v += ((rnd() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1;
            }
            normalize(&mut x);
            sample.extend(x);
            truth.push(c);
        }
        let stop = std::sync::atomic::AtomicBool::new(true);
        assert_eq!(
            spherical_kmeans(&sample, d, 6, 30, 0.5, &stop).1,
            0,
            "cancelled"
        );
        let (c1, ran) = spherical_kmeans(&sample, d, 6, 30, 0.5, &NEVER);
        let (c2, _) = spherical_kmeans(&sample, d, 6, 30, 0.5, &NEVER);
        assert_eq!(c1, c2, "deterministic");
        assert!(ran < 30, "converged in {ran}");
        let near = nearest(&sample, &c1, d);
        // Every true cluster maps to one found cluster, and back.
        for i in 0..600 {
            for j in 0..600 {
                assert_eq!(truth[i] == truth[j], near[i].0 == near[j].0, "{i} {j}");
            }
        }
        let objective = |c: &[f32]| {
            nearest(&sample, c, d)
                .iter()
                .map(|x| x.1 as f64)
                .sum::<f64>()
        };
        let (init, _) = spherical_kmeans(&sample, d, 6, 0, 0.5, &NEVER);
        assert!(objective(&c1) >= objective(&init) - 1e-3);
        // Identical rows: a centroid is left empty and reseeded, and nothing
        // becomes NaN.
        let mut same = Vec::new();
        for _ in 0..5 {
            same.extend_from_slice(&centres[..d]);
        }
        same.extend_from_slice(&centres[d..3 * d]);
        let (cs, _) = spherical_kmeans(&same, d, 4, 10, 0.5, &NEVER);
        assert_eq!(cs.len(), 4 * d);
        assert!(cs.iter().all(|x| x.is_finite()));
        assert_eq!(cs, spherical_kmeans(&same, d, 4, 10, 0.5, &NEVER).0);
        // More centroids than rows: one per row.
        let (few, _) = spherical_kmeans(&sample[..3 * d], d, 10, 5, 0.5, &NEVER);
        assert_eq!(few.len(), 3 * d);
    }
}
