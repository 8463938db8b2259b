//! Pure compute kernels: batch functions over plain slices, no I/O, no async, no
//! knowledge of storage or scheduling. Large batches run in parallel on rayon; the
//! worker calls them from its pipeline threads, never from the async runtime.
pub mod clip_tokenizer;
pub mod decont;
pub mod encoder;
pub mod fasttext;
pub mod hamming;
pub mod hf_tokenizer;
pub mod html;
pub mod http;
pub mod image;
pub mod image_quality;
pub mod image_resize;
pub mod imagehash;
pub mod jpeg;
pub mod lang;
pub mod minhash;
pub mod paragraph;
pub mod quality;
pub mod resample;
pub mod semantic;
pub mod substring;
pub mod text;
pub mod url;
pub mod vision;

/// Union-find over `u32` nodes: the root of `x`, every node on the way pointed
/// straight at it.
pub fn uf_find(parent: &mut [u32], x: u32) -> u32 {
    let mut r = x;
    while parent[r as usize] != r {
        r = parent[r as usize];
    }
    let mut y = x;
    while parent[y as usize] != r {
        let next = parent[y as usize];
        parent[y as usize] = r;
        y = next;
    }
    r
}

/// Union-find: joins the sets of `a` and `b`, the lower root becoming the root (so
/// a set's root is its lowest node).
pub fn uf_union(parent: &mut [u32], a: u32, b: u32) {
    let (ra, rb) = (uf_find(parent, a), uf_find(parent, b));
    if ra != rb {
        parent[ra.max(rb) as usize] = ra.min(rb);
    }
}

/// Hash sets and maps for kernels' short keys (words, n-grams, tags): foldhash is
/// several times faster than SipHash on them and still seeded per process.
/// Defines `$name` as `$generic` (an `#[inline(always)]` function) compiled twice:
/// for the build's baseline and with AVX2 (every x86-64 server since 2013), chosen at
/// run time. The baseline x86-64 target has SSE2 only, which lacks a 32-bit
/// multiply: the integer pixel loops (resampling, luma, Laplacian) vectorise 8 lanes
/// wide with AVX2 instead of emulating it 4 lanes wide. Same integer arithmetic, so
/// the same results. (The JPEG decoder's Huffman loop, built so, measured no faster.)
macro_rules! avx2_dispatch {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($a:ident: $t:ty),* $(,)?) -> $r:ty => $generic:ident) => {
        $(#[$m])*
        $vis fn $name($($a: $t),*) -> $r {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2")]
                unsafe fn avx2($($a: $t),*) -> $r {
                    $generic($($a),*)
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2, the only feature `avx2` is compiled with.
                    return unsafe { avx2($($a),*) };
                }
            }
            $generic($($a),*)
        }
    };
}
pub(crate) use avx2_dispatch;

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
