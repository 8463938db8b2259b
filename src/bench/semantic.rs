//! Semantic dedup's kernels on one core (docs/SEMANTIC.md): the blocked similarity
//! `sgemm` (GFLOP/s against the core's peak), assigning vectors to centroids, all
//! pairs of a cluster above a threshold, and a spherical k-means, on random unit
//! vectors with planted near duplicates.
use crate::kernels::semantic::{
    BLOCK, components_at_least, dots, nearest, normalize, spherical_kmeans,
};
use std::time::Instant;

/// What `mdf bench semantic` measured.
pub struct SemanticReport {
    pub dim: usize,
    pub gemm_gflops: f64,
    pub assign: (usize, usize, f64),
    pub pairs: (usize, usize, f64),
    pub kmeans: (usize, usize, usize, f64),
}

fn unit_vectors(n: usize, d: usize, seed: u64) -> Vec<f32> {
    let mut rnd = crate::kernels::xorshift(seed);
    let mut v: Vec<f32> = (0..n * d)
        .map(|_| (rnd() >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
        .collect();
    for r in v.chunks_mut(d) {
        normalize(r);
    }
    v
}

/// Times the kernels at dimension `dim`: `vectors` assigned to `centroids`, a
/// cluster of `cluster` vectors compared pairwise, k-means on `vectors` rows.
pub fn semantic(dim: usize, vectors: usize, centroids: usize, cluster: usize) -> SemanticReport {
    let d = dim;
    // One BLOCK × BLOCK × d product, repeated.
    let a = unit_vectors(BLOCK, d, 1);
    let mut out = vec![0f32; BLOCK * BLOCK];
    let reps = 8;
    let t = Instant::now();
    for _ in 0..reps {
        dots(&a, &a, d, &mut out);
    }
    let gemm = 2.0 * (BLOCK * BLOCK * d * reps) as f64 / t.elapsed().as_secs_f64() / 1e9;
    let v = unit_vectors(vectors, d, 2);
    let c = unit_vectors(centroids, d, 3);
    let t = Instant::now();
    let near = nearest(&v, &c, d);
    let assign = t.elapsed().as_secs_f64();
    assert_eq!(near.len(), vectors);
    // A cluster with a tenth of its rows near copies of others.
    let mut cl = unit_vectors(cluster, d, 4);
    for i in (0..cluster).step_by(10) {
        let src = (i * 7 + 1) % cluster;
        let mut x: Vec<f32> = cl[src * d..(src + 1) * d].to_vec();
        x[i % d] += 0.02;
        normalize(&mut x);
        cl[i * d..(i + 1) * d].copy_from_slice(&x);
    }
    let never = std::sync::atomic::AtomicBool::new(false);
    let t = Instant::now();
    let comp = components_at_least(&cl, d, 0.95, &never).expect("not cancelled");
    let pair_secs = t.elapsed().as_secs_f64();
    // Rows joined to another: each component but its first row.
    let joined = comp
        .iter()
        .enumerate()
        .filter(|&(i, &c)| c as usize != i)
        .count();
    let t = Instant::now();
    let (_, ran) = spherical_kmeans(&v, d, centroids, 10, 0.9, &never);
    let km = t.elapsed().as_secs_f64();
    SemanticReport {
        dim,
        gemm_gflops: gemm,
        assign: (vectors, centroids, assign),
        pairs: (cluster, joined, pair_secs),
        kmeans: (vectors, centroids, ran, km),
    }
}

impl std::fmt::Display for SemanticReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "mdf bench semantic: {}-d float32 unit vectors, one core (matrixmultiply sgemm)",
            self.dim
        )?;
        writeln!(f)?;
        writeln!(f, "| measure | value |")?;
        writeln!(f, "|---|---|")?;
        writeln!(
            f,
            "| similarity sgemm, {BLOCK} × {BLOCK} × {} | {:.1} GFLOP/s |",
            self.dim, self.gemm_gflops
        )?;
        let (n, k, s) = self.assign;
        writeln!(
            f,
            "| assign to {k} centroids | {:.0} vectors/s ({:.1} GFLOP/s) |",
            n as f64 / s,
            2.0 * (n * k * self.dim) as f64 / s / 1e9
        )?;
        let (n, p, s) = self.pairs;
        writeln!(
            f,
            "| all pairs of a {n}-vector cluster | {:.2} s, {:.0} vectors/s, {:.1} GFLOP/s, {p} rows joined at ≥ 0.95 (streamed components) |",
            s,
            n as f64 / s,
            (n * n * self.dim) as f64 / s / 1e9
        )?;
        let (n, k, ran, s) = self.kmeans;
        writeln!(
            f,
            "| spherical k-means, {n} vectors, k = {k} | {:.2} s for {ran} iterations |",
            s
        )
    }
}
