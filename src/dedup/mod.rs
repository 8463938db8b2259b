//! Deduplication (docs/DEDUP.md): everything a `dedup` stage needs, from its params to
//! the survivors. A dedup is a two-pass shuffle through the object store: map tasks
//! write a keys object ([`keys`], [`spill`]), reduce tasks decide each key range
//! ([`reduce`] over [`exact`]; near duplicates: candidates and label steps,
//! [`propagate`] over [`near`] and [`rounds`]; exact substrings: [`reduce`] over
//! [`substring`]), apply tasks reject the duplicates
//! ([`apply`]). [`plan`] adds the phases to a job; [`format`] and [`sort`] are the
//! shared object layout and bounded-memory sort.
//!
//! Layer 5: it may import ops, protocol, store, spec, records, kernels and clock, never
//! the worker or the coordinator. Tasks get their job, stores and caches through
//! [`ShuffleCtx`]; the worker's phase executors call [`reduce::reduce`],
//! [`propagate::near_step`], [`apply::filter_for`] and [`shuffle::write_keys`].
//!
//! Inside, files only point down this list (no import loop): `error`, `sort`,
//! `format`, `params`, `exact`, `near`, `rounds`, `substring`, `keys`, `spill`, `shuffle`, `reduce`,
//! `semantic`, `propagate`, `apply`, `plan`. Semantic dedup ([`semantic`]) has its own
//! steps: centroids, assign and reduce over embeddings.
pub mod apply;
pub mod error;
pub mod exact;
pub mod format;
pub mod keys;
pub mod near;
pub mod params;
pub mod plan;
pub mod propagate;
pub mod reduce;
pub mod rounds;
pub mod semantic;
pub mod shuffle;
pub mod sort;
pub mod spill;
pub mod substring;

pub use error::{DedupError, FormatError, KeyError, ParamsError};
pub use exact::{Decision, KeyEntry, Sourced, finish_reduce};
pub use format::{decode, encode_keys, entries, section_of};
pub use params::{CLUSTER_COLUMN, DedupKind, DedupParams, Keep, MAX_PERMUTATIONS};
pub use shuffle::{CommitCache, ShuffleCtx, spill_dir};
pub use sort::{ExternalSort, Fixed};
pub use spill::KeySpill;
