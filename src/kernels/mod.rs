//! Pure compute kernels: batch functions over plain slices, no I/O, no async, no
//! knowledge of storage or scheduling. Large batches run in parallel on rayon; the
//! worker calls them from its pipeline threads, never from the async runtime.
pub mod html;
pub mod lang;
pub mod quality;
pub mod text;
pub mod url;
