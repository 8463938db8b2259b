//! The coordinator: plans jobs (inputs → phases → tasks), writes their manifests,
//! and reports status from commit records. Stateless: everything it knows it reads
//! from the store. It never reads record data, and never starts workers (that is
//! `launch`, a layer above).
pub mod estimate;
pub mod ownership;
pub mod plan;
pub mod spill;
pub mod status;
pub mod submit;
pub mod totals;

// Job loading lives in the protocol layer (workers need it too); re-exported here.
pub use crate::protocol::job::{JobError, LoadedJob, load_job};
