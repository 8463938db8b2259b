//! mdf: web-scale pretraining data curation with an embedded scheduler on object storage.
//!
//! Layers (data flows one way: store → reader → operators → writer → store):
//! - [`coordinator`] plans jobs and reports status; it never touches record data.
//! - [`worker`] leases tasks, runs the in-worker pipeline, commits outputs.
//! - [`io`] reads input formats and writes output formats (the reader and writer traits).
//! - [`ops`] adapts pure [`kernels`] to Arrow batches behind the operator traits.
//! - [`protocol`] is the persisted job format and the lease protocol (docs/PROTOCOL.md).
//! - [`store`] resolves URIs to object stores and counts every request.
//! - [`launch`] starts a written job's workers (here, AWS Batch, Kubernetes).
//! - [`bench`] and [`report`] measure mdf and report on a job; [`cli`] is the `mdf`
//!   command over all of them.
pub mod bench;
pub mod cli;
pub mod clock;
pub mod coordinator;
pub mod dedup;
pub mod io;
pub mod kernels;
pub mod launch;
pub mod ops;
pub mod panic;
pub mod protocol;
pub mod records;
pub mod report;
pub mod spec;
pub mod store;
pub mod worker;
