//! The `mdf` binary: a thin shell over the library's CLI module.

fn main() -> std::process::ExitCode {
    limit_malloc_arenas();
    keep_freed_batches();
    one_thread_per_sgemm();
    mdf::cli::main()
}

/// matrixmultiply, built with its `threading` feature when `lance` is on, runs every
/// sgemm on as many threads as the machine has physical cores unless
/// `MATMUL_NUM_THREADS` says otherwise: beside a worker's own task-per-core threads
/// that oversubscribes the cores. Semantic dedup's similarity blocks run on one thread
/// each (docs/SEMANTIC.md); `MATMUL_NUM_THREADS` set by the user wins.
fn one_thread_per_sgemm() {
    if std::env::var_os("MATMUL_NUM_THREADS").is_none() {
        // SAFETY: called first thing in main, before any thread exists that could
        // read the environment concurrently.
        unsafe { std::env::set_var("MATMUL_NUM_THREADS", "1") };
    }
}

/// A batch's buffers (8 MiB of pages, their text) are freed and the next batch asks
/// for as much again. glibc's default serves such sizes by mmap, and raises its
/// threshold only after a free, trimming the heap top above twice that: every batch
/// got fresh pages, zeroed by the kernel on first touch (74k page faults on a 651 MB
/// WARC, 88–180k on 10,000 images; 5–10 % of the run in a VM). Fixed thresholds keep
/// freed batches for the next: 41–53k faults, the working set. Memory above them is
/// still returned: allocations of 32 MiB or more are mapped, and a free heap top over
/// 64 MiB per arena (two arenas) is trimmed. `MALLOC_MMAP_THRESHOLD_` or
/// `MALLOC_TRIM_THRESHOLD_` set by the user wins (docs/PERFORMANCE.md).
fn keep_freed_batches() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none()
        && std::env::var_os("MALLOC_TRIM_THRESHOLD_").is_none()
    {
        // SAFETY: as in `limit_malloc_arenas`.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
        }
    }
}

/// glibc gives every new thread its own malloc arena (up to 8 per core) and keeps what
/// is freed in each: a worker that starts pipeline threads per task grew from 200 MB
/// to 670 MB of RSS over 10× the input with no live data growth. Two arenas keep the
/// peak flat (docs/PERFORMANCE.md); `MALLOC_ARENA_MAX` set by the user wins.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only adjusts allocator parameters; called before any thread.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}
