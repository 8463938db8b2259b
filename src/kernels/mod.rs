//! Pure compute kernels: batch functions over plain slices, no I/O, no async, no
//! knowledge of storage or scheduling. Large batches run in parallel on rayon; the
//! worker calls them from its pipeline threads, never from the async runtime.
pub mod clip_tokenizer;
pub mod hamming;
pub mod html;
pub mod image;
pub mod image_quality;
pub mod imagehash;
pub mod jpeg;
pub mod lang;
pub mod minhash;
pub mod quality;
pub mod resample;
pub mod text;
pub mod url;
pub mod vision;

/// Hash sets and maps for kernels' short keys (words, n-grams, tags): foldhash is
/// several times faster than SipHash on them and still seeded per process.
pub type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A small deterministic generator (xorshift64) for benchmarks' and tests' synthetic
/// data: the same seed, the same sequence. Not for anything that needs randomness.
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed.max(1);
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}
