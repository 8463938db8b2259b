//! The `mdf` binary: a thin shell over the library's CLI module.

fn main() -> std::process::ExitCode {
    limit_malloc_arenas();
    mdf::cli::main()
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
