//! Planning: list the inputs, bind the spec's stages to the input schema (every
//! schema error at once, by field path), derive phase fingerprints and split the
//! inputs into tasks with deterministic ids. Reads only listings and file headers
//! (a JSONL sample, a Parquet footer), never record data, and writes nothing.
use super::spill::{Records, SortSpill, Sorted};
use crate::dedup::plan as dedup_plan;
use crate::io::read::{self, ColumnsError};
use crate::ops;
use crate::protocol::records::{
    InputSlice, PhaseKind, PhasePlan, TaskDigest, TaskManifest, VERSION, phase_name,
};
use crate::protocol::{follower_id, shard_digits_for};
use crate::records::with_id_column;
use crate::spec::reader::{FieldError, SpecErrors};
use crate::spec::{Format, Spec};
use crate::store::{self, Registry};
use arrow_schema::{DataType, Schema, SchemaRef};
use serde_json::json;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Spec(#[from] SpecErrors),
    #[error("{0}")]
    Storage(String),
}

fn spec_err(path: impl Into<String>, message: impl Into<String>) -> PlanError {
    PlanError::Spec(SpecErrors(vec![FieldError {
        path: path.into(),
        message: message.into(),
    }]))
}

/// A listed input file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    pub uri: String,
    pub size: u64,
    pub etag: Option<String>,
}

/// Bytes of sorting buffer each of planning's sorts may hold (the input list, the
/// first phase's tasks): beyond it, records spill to local disk, so planning's
/// memory does not grow with the file count (docs/SCALE.md, "Planning").
pub const PLAN_MEMORY: usize = 64 << 20;

/// The listed input files: sorted by URI, each once (a crawl's file list: in its own
/// order); in memory, or spilled to local disk when the list outgrew [`PLAN_MEMORY`].
pub struct InputFiles {
    sorted: Sorted,
    bytes: u64,
}

impl InputFiles {
    fn new(sorted: Sorted) -> Result<Self, PlanError> {
        let mut bytes = 0;
        for f in iter_files(&sorted)? {
            bytes += f?.size;
        }
        Ok(Self { sorted, bytes })
    }
    pub fn len(&self) -> usize {
        self.sorted.len() as usize
    }
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }
    /// Their total size.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    /// Every file, in the list's order.
    pub fn iter(
        &self,
    ) -> Result<impl Iterator<Item = Result<InputFile, PlanError>> + '_, PlanError> {
        iter_files(&self.sorted)
    }
    /// The first `n` files.
    pub fn first(&self, n: usize) -> Result<Vec<InputFile>, PlanError> {
        self.iter()?.take(n).collect()
    }
}

impl std::fmt::Debug for InputFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "InputFiles({} files, {} bytes)", self.len(), self.bytes)
    }
}

fn spill_err(e: std::io::Error) -> PlanError {
    PlanError::Storage(format!(
        "planning's local sort (the temporary directory): {e}"
    ))
}

/// A file as a sort record under `key` (its URI, or its place in a crawl's file
/// list): the value holds its size, URI and etag.
fn push_file(spill: &mut SortSpill, key: &[u8], f: &InputFile) -> std::io::Result<()> {
    let mut v = Vec::with_capacity(13 + f.uri.len());
    v.extend_from_slice(&f.size.to_le_bytes());
    v.extend_from_slice(&(f.uri.len() as u32).to_le_bytes());
    v.extend_from_slice(f.uri.as_bytes());
    if let Some(e) = &f.etag {
        v.push(1);
        v.extend_from_slice(e.as_bytes());
    }
    spill.push(key, &v)
}

fn iter_files(
    sorted: &Sorted,
) -> Result<impl Iterator<Item = Result<InputFile, PlanError>> + '_, PlanError> {
    Ok(sorted.iter().map_err(spill_err)?.map(|r| {
        let (_, v) = r.map_err(spill_err)?;
        let bad = || PlanError::Storage("planning's local sort: a torn record".into());
        let size = u64::from_le_bytes(v.get(..8).ok_or_else(bad)?.try_into().expect("8"));
        let n = u32::from_le_bytes(v.get(8..12).ok_or_else(bad)?.try_into().expect("4"));
        let end = 12 + n as usize;
        Ok(InputFile {
            uri: String::from_utf8(v.get(12..end).ok_or_else(bad)?.to_vec()).map_err(|_| bad())?,
            size,
            etag: match v.get(end) {
                Some(1) => Some(String::from_utf8(v[end + 1..].to_vec()).map_err(|_| bad())?),
                _ => None,
            },
        })
    }))
}

/// The tasks of one planned phase.
pub enum PhaseTasks {
    /// Every manifest, in memory: an unsharded phase (at most `job.shard_tasks` tasks,
    /// or any number when sharding is off).
    Listed(Vec<TaskManifest>),
    /// A sharded first phase: its manifests sorted by task id, spilled to local disk
    /// beyond [`PLAN_MEMORY`] (key: the id; value: the manifest's JSON).
    Spilled(Sorted),
    /// A sharded later phase: one task per task of phase `upstream`, its id the
    /// follower id of that task's (derived shard by shard, never held whole).
    Follows { upstream: usize },
}

/// A planned job, before anything is written.
pub struct Plan {
    pub phases: Vec<PhasePlan>,
    /// Task manifests per phase (without `job_id`, filled in by submit).
    pub tasks: Vec<PhaseTasks>,
    pub files: InputFiles,
    /// The operators' asset files as planned.
    pub assets: Assets,
    /// The input had a column named `id` (carried as `source_id`).
    pub input_had_id: bool,
    /// The input's columns were inferred from the first 16 of this many files (more
    /// than 16, no declared schema): a column only later files have is not read.
    pub columns_sampled_of: Option<usize>,
    /// Each dedup stage with `against`: its index and the earlier job's identity
    /// ([`dedup_plan::against_identity`]).
    pub against: Vec<(usize, String)>,
}

impl Plan {
    pub fn input_bytes(&self) -> u64 {
        self.files.bytes()
    }
    /// What a user should know about how the job reads its input, one line each:
    /// an input column named `id` is carried as `source_id` (`id` is mdf's record id).
    pub fn notes(&self) -> Vec<String> {
        let carried = self.phases.first().and_then(|p| {
            p.input_schema.fields().iter().skip(1).find(|f| {
                self.input_had_id && crate::records::input_column(f) == crate::records::ID
            })
        });
        let mut v: Vec<String> = carried
            .map(|f| {
                format!(
                    "the input's column {:?} is kept as {:?}: {:?} is mdf's record id (from the input file and offset, stable across runs)",
                    crate::records::ID,
                    f.name(),
                    crate::records::ID
                )
            })
            .into_iter()
            .collect();
        if let Some(n) = self.columns_sampled_of {
            v.push(format!(
                "the input's columns were read from the first 16 of {n} files: a column only later files have is not kept (workers log it); declare input.schema to be sure"
            ));
        }
        v
    }
    /// The task ids of phase `pi`, sorted (all of them in memory: for `--reuse`).
    pub fn task_ids(&self, pi: usize) -> Result<Vec<String>, PlanError> {
        if let PhaseTasks::Listed(l) = &self.tasks[pi] {
            let mut v: Vec<String> = l.iter().map(|t| t.task_id.clone()).collect();
            v.sort_unstable();
            return Ok(v);
        }
        let mut v = Vec::new();
        for shard in self.shards()? {
            let (_, phases) = shard?;
            v.extend(
                phases
                    .into_iter()
                    .filter(|(q, _)| *q == pi)
                    .flat_map(|(_, ts)| ts.into_iter().map(|t| t.task_id)),
            );
        }
        Ok(v)
    }
    /// Every task of the first phase, in memory's order or by id.
    pub fn first_tasks(
        &self,
    ) -> Result<Box<dyn Iterator<Item = Result<TaskManifest, PlanError>> + '_>, PlanError> {
        Ok(match self.tasks.first() {
            Some(PhaseTasks::Listed(l)) => Box::new(l.iter().cloned().map(Ok)),
            Some(PhaseTasks::Spilled(sorted)) => {
                Box::new(sorted.iter().map_err(spill_err)?.map(|r| {
                    let (_, json) = r.map_err(spill_err)?;
                    serde_json::from_slice(&json).map_err(|e| spill_err(std::io::Error::other(e)))
                }))
            }
            _ => Box::new(std::iter::empty()),
        })
    }
    /// The sharded phases shard by shard (see [`Shards`]).
    pub fn shards(&self) -> Result<Shards<'_>, PlanError> {
        Shards::new(&self.phases, &self.tasks)
    }
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("phases", &self.phases)
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

/// Every shard of a sharded plan in prefix order: for each `k`-digit prefix (every
/// one, an empty shard too), the manifests of each sharded phase whose ids start with
/// it, sorted by id. Reads the first phase's sorted tasks once, and derives each
/// follower phase's shard from its upstream's: memory is one shard's manifests.
pub struct Shards<'a> {
    phases: &'a [PhasePlan],
    tasks: &'a [PhaseTasks],
    k: usize,
    prefixes: Box<dyn Iterator<Item = String> + Send>,
    records: std::iter::Peekable<Records<'a>>,
}

impl<'a> Shards<'a> {
    fn new(phases: &'a [PhasePlan], tasks: &'a [PhaseTasks]) -> Result<Self, PlanError> {
        let (k, records): (usize, Records<'a>) = match tasks.first() {
            Some(PhaseTasks::Spilled(sorted)) => (
                phases[0].shard_digits as usize,
                sorted.iter().map_err(spill_err)?,
            ),
            _ => (0, Box::new(std::iter::empty())),
        };
        Ok(Self {
            phases,
            tasks,
            k,
            // No shard at all when nothing is sharded.
            prefixes: if k == 0 {
                Box::new(std::iter::empty())
            } else {
                Box::new(crate::protocol::shard_prefixes(k))
            },
            records: records.peekable(),
        })
    }
}

impl Iterator for Shards<'_> {
    /// A shard's prefix, and (phase index, its manifests there) per sharded phase.
    type Item = Result<(String, Vec<(usize, Vec<TaskManifest>)>), PlanError>;
    fn next(&mut self) -> Option<Self::Item> {
        let prefix = self.prefixes.next()?;
        let mut first = Vec::new();
        loop {
            match self.records.peek() {
                Some(Ok((id, _))) if id.starts_with(prefix.as_bytes()) => {}
                Some(Ok(_)) | None => break,
                Some(Err(_)) => {
                    let e = self.records.next().expect("peeked").expect_err("an error");
                    return Some(Err(spill_err(e)));
                }
            }
            let (_, json) = self.records.next().expect("peeked").expect("ok");
            match serde_json::from_slice::<TaskManifest>(&json) {
                Ok(t) => first.push(t),
                Err(e) => return Some(Err(spill_err(std::io::Error::other(e)))),
            }
        }
        let mut out: Vec<(usize, Vec<TaskManifest>)> = vec![(0, first)];
        for (q, tasks) in self.tasks.iter().enumerate().skip(1) {
            let PhaseTasks::Follows { upstream } = tasks else {
                continue;
            };
            let up = out
                .iter()
                .find(|(p, _)| p == upstream)
                .map(|(_, ts)| ts.as_slice())
                .unwrap_or_default();
            let phase = &self.phases[q];
            let mut list: Vec<TaskManifest> =
                up.iter().map(|u| follower(phase, &u.task_id)).collect();
            list.sort_by(|a, b| a.task_id.cmp(&b.task_id));
            out.push((q, list));
        }
        debug_assert!(self.k > 0);
        Some(Ok((prefix, out)))
    }
}

/// The task of `phase` that follows upstream task `up`.
fn follower(phase: &PhasePlan, up: &str) -> TaskManifest {
    TaskManifest {
        version: VERSION,
        job_id: String::new(),
        phase: phase.name.clone(),
        task_id: follower_id(&phase.fingerprint, up, phase.shard_digits as usize),
        inputs: vec![],
        upstream: vec![up.to_string()],
    }
}

/// The files of a CommonCrawl crawl, from its `<kind>.paths.gz`, with their sizes.
async fn commoncrawl_files(
    cc: &crate::spec::CommonCrawl,
    reg: &Registry,
    spill: &mut SortSpill,
) -> Result<(), PlanError> {
    use futures::{StreamExt, TryStreamExt};
    use object_store::ObjectStoreExt;
    use std::io::Read;
    let kind = if cc.kind == Format::Wet {
        "wet"
    } else {
        "warc"
    };
    let list = format!("{}/crawl-data/{}/{kind}.paths.gz", cc.base, cc.crawl);
    let (store, u) = reg
        .resolve(&list)
        .map_err(|e| spec_err("input.commoncrawl.base", e.to_string()))?;
    let gz = match store.get(&u.path).await {
        Ok(r) => r
            .bytes()
            .await
            .map_err(|e| PlanError::Storage(format!("{list}: {e}")))?,
        Err(object_store::Error::NotFound { .. }) => {
            return Err(spec_err(
                "input.commoncrawl.crawl",
                format!("{list} does not exist; is {} a crawl id?", cc.crawl),
            ));
        }
        Err(e) => return Err(PlanError::Storage(format!("{list}: {e}"))),
    };
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(&gz[..])
        .read_to_string(&mut text)
        .map_err(|e| PlanError::Storage(format!("{list}: {e}")))?;
    let paths = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .skip(cc.offset)
        .take(cc.files.unwrap_or(usize::MAX))
        .map(|l| format!("{}/{l}", cc.base));
    futures::stream::iter(paths.map(|uri| async move {
        let (store, u) = reg
            .resolve(&uri)
            .map_err(|e| PlanError::Storage(e.to_string()))?;
        let m = store
            .head(&u.path)
            .await
            .map_err(|e| PlanError::Storage(format!("{uri}: {e}")))?;
        Ok::<_, PlanError>(InputFile {
            uri: u.to_uri_string(),
            size: m.size,
            etag: m.e_tag,
        })
    }))
    .buffered(64)
    .enumerate()
    // In the list's own order, repeats kept: keyed by place.
    .map(|(i, f)| f.map(|f| (i as u64, f)))
    .try_for_each(|(i, f)| {
        futures::future::ready(push_file(spill, &i.to_be_bytes(), &f).map_err(spill_err))
    })
    .await
}

/// Lists every input pattern; a pattern that matches nothing is a spec error. The
/// list is sorted by URI, each file once (a crawl's file list: in its own order, as
/// it lists them, repeats kept), and held in at most `memory` bytes (the rest spilled
/// to local disk).
pub async fn list_inputs(
    spec: &Spec,
    reg: &Registry,
    memory: usize,
) -> Result<InputFiles, PlanError> {
    let mut spill = SortSpill::new(memory);
    if let Some(cc) = &spec.input.commoncrawl {
        commoncrawl_files(cc, reg, &mut spill).await?;
        let files = InputFiles::new(spill.finish(false).map_err(spill_err)?)?;
        if files.is_empty() {
            return Err(spec_err(
                "input.commoncrawl",
                "the crawl's file list selects no file",
            ));
        }
        return Ok(files);
    }
    let mut errors = Vec::new();
    let reader = read::reader(spec.input.format);
    for (i, pat) in spec.input.uris.iter().enumerate() {
        // A file server on a private, loopback or link-local address (an instance's
        // metadata service, an internal host) only when the spec says so.
        if let Ok(u) = store::Uri::parse(pat)
            && store::is_http(&u.store)
            && !spec.input.download.allow_private
            && let Some(why) = private_host(&u.store)
        {
            errors.push(FieldError {
                path: format!("input.uris[{i}]"),
                message: format!(
                    "{pat}: {why}; set input.download.allow_private: true to read from it"
                ),
            });
            continue;
        }
        // A Hub dataset is read at the commit its revision names now, whatever the
        // branch does while the job runs.
        let pinned = match store::hf::pin(pat).await {
            Ok(p) => p,
            Err(message) => {
                errors.push(FieldError {
                    path: format!("input.uris[{i}]"),
                    message,
                });
                continue;
            }
        };
        let pat = &pinned;
        let mut matched = 0u64;
        let mut first_hf: Option<store::Uri> = None;
        let listed = store::for_each_matching(reg, pat, |u, m| {
            matched += 1;
            if first_hf.is_none() && u.store.starts_with("hf://") {
                first_hf = Some(u.clone());
            }
            // Only what the format reads (an image folder: its images, not its captions).
            if !reader.lists(u.path.as_ref()) {
                return Ok(());
            }
            let f = InputFile {
                uri: u.to_uri_string(),
                size: m.size,
                etag: m.e_tag,
            };
            push_file(&mut spill, f.uri.as_bytes(), &f).map_err(|e| {
                store::StoreError::Io(object_store::Error::Generic {
                    store: "plan",
                    source: Box::new(e),
                })
            })
        })
        .await;
        // A gated or private Hub dataset lists without access but reads only with it:
        // one byte of its first file says which, before any task.
        if let (Ok(()), Some(u)) = (&listed, &first_hf) {
            use object_store::ObjectStoreExt;
            let store = reg.open(u).map_err(|e| PlanError::Storage(e.to_string()))?;
            if let Err(
                e @ (object_store::Error::Unauthenticated { .. }
                | object_store::Error::PermissionDenied { .. }),
            ) = store.get_range(&u.path, 0..1).await
            {
                errors.push(FieldError {
                    path: format!("input.uris[{i}]"),
                    message: e.to_string(),
                });
                continue;
            }
        }
        match listed {
            Ok(()) if matched == 0 => errors.push(FieldError {
                path: format!("input.uris[{i}]"),
                message: format!(
                    "no input files match {pat:?}{}",
                    if !pat.contains("://") || pat.starts_with("file://") {
                        escaped_hint(pat)
                    } else {
                        ""
                    }
                ),
            }),
            Ok(()) => {}
            Err(store::StoreError::BadUri { reason, .. }) => errors.push(FieldError {
                path: format!("input.uris[{i}]"),
                message: reason,
            }),
            Err(e) => return Err(PlanError::Storage(format!("listing {pat}: {e}"))),
        }
    }
    if !errors.is_empty() {
        return Err(PlanError::Spec(SpecErrors(errors)));
    }
    InputFiles::new(spill.finish(true).map_err(spill_err)?)
}

/// Every file an operator needs must exist before any task starts. Returns each
/// asset's version (size and etag, or modification time where the store has no etag)
/// by URI: it enters the phase fingerprints, so a job whose block list or model changed
/// reuses nothing computed with the old one, and the etag pins what workers load.
pub async fn check_assets(spec: &Spec, reg: &Registry) -> Result<Assets, PlanError> {
    use object_store::ObjectStoreExt;
    let mut versions = Assets::new();
    let mut errors = Vec::new();
    for (i, assets) in ops::stage_assets(spec).into_iter().enumerate() {
        for a in assets {
            let path = format!("stages[{i}].{}", a.param);
            match reg.resolve(&a.uri) {
                Err(e) => errors.push(FieldError {
                    path,
                    message: e.to_string(),
                }),
                Ok((store, u)) => match store.head(&u.path).await {
                    Ok(m) => {
                        versions.insert(
                            a.uri.clone(),
                            AssetVersion {
                                size: m.size,
                                etag: m.e_tag.clone(),
                                modified_ms: m.last_modified.timestamp_millis(),
                            },
                        );
                    }
                    Err(object_store::Error::NotFound { .. }) => errors.push(FieldError {
                        path,
                        message: format!("{} does not exist", u.to_uri_string()),
                    }),
                    Err(e) => return Err(PlanError::Storage(format!("checking {}: {e}", a.uri))),
                },
            }
        }
    }
    if !errors.is_empty() {
        return Err(PlanError::Spec(SpecErrors(errors)));
    }
    load_at_plan(spec, reg, &versions).await?;
    Ok(versions)
}

/// Loads the assets of the operators that ask for it (`Operator::load_at_plan`:
/// benchmark files), so content that cannot work (an empty benchmark) is refused at
/// submit, naming the param, instead of failing every task.
/// Each asset is read at the version just checked (its etag, as workers read it).
async fn load_at_plan(spec: &Spec, reg: &Registry, versions: &Assets) -> Result<(), PlanError> {
    let ops = ops::build_stages(spec).map_err(PlanError::Spec)?;
    let mut errors = Vec::new();
    for (i, op) in ops.iter().enumerate().filter(|(_, op)| op.load_at_plan()) {
        let mut fetched = Vec::new();
        for a in op.assets() {
            let (store, u) = reg
                .resolve(&a.uri)
                .map_err(|e| PlanError::Storage(format!("reading {}: {e}", a.uri)))?;
            let opts = object_store::GetOptions {
                if_match: versions.get(&a.uri).and_then(|v| v.etag.clone()),
                ..Default::default()
            };
            let bytes = async { store.get_opts(&u.path, opts).await?.bytes().await }
                .await
                .map_err(|e| PlanError::Storage(format!("reading {}: {e}", a.uri)))?;
            fetched.push((a, bytes));
        }
        // Building an index from a large benchmark is CPU work: off the runtime.
        let loading = op.clone();
        let loaded = tokio::task::spawn_blocking(move || loading.load(&fetched))
            .await
            .map_err(|e| PlanError::Storage(format!("loading the assets of stage {i}: {e}")))?;
        if let Err(e) = loaded {
            let (path, message) = match e {
                ops::LoadError::Asset {
                    param,
                    uri,
                    message,
                } => (format!("stages[{i}].{param}"), format!("{uri}: {message}")),
                other => (format!("stages[{i}]"), other.to_string()),
            };
            errors.push(FieldError { path, message });
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(PlanError::Spec(SpecErrors(errors)))
    }
}

/// Token shards: the tokenizer of the `tokenize` stage that writes
/// `output.tokens.column` must fit `output.tokens.dtype` (a GPT-2 vocabulary of 50,257
/// ids fits uint16; Llama 3's 128,256 do not), and `eod` must be one of its ids.
/// Read at submit (tokenizer.json is a few MB), so a wrong dtype is refused before
/// any task reads its input rather than failing every task that meets a large id.
async fn check_token_vocabulary(spec: &Spec, reg: &Registry) -> Result<(), PlanError> {
    use object_store::ObjectStoreExt;
    let Some(t) = &spec.output.tokens else {
        return Ok(());
    };
    let Some(stage) = spec.stages.iter().rev().find(|st| {
        st.op == "tokenize"
            && st.params.get("ids").and_then(|v| v.as_bool()) == Some(true)
            && st
                .params
                .get("ids_column")
                .and_then(|v| v.as_str())
                .unwrap_or("token_ids")
                == t.column
    }) else {
        // Ids from elsewhere (an input column): checked as they are written.
        return Ok(());
    };
    let Some(uri) = stage.params.get("tokenizer").and_then(|v| v.as_str()) else {
        return Ok(());
    };
    let (store, u) = reg
        .resolve(uri)
        .map_err(|e| PlanError::Storage(format!("reading {uri}: {e}")))?;
    let bytes = async { store.get(&u.path).await?.bytes().await }
        .await
        .map_err(|e| PlanError::Storage(format!("reading {uri}: {e}")))?;
    let tok = crate::kernels::hf_tokenizer::Tokenizer::from_bytes(&bytes)
        .map_err(|e| spec_err(format!("stages.{}.params.tokenizer", stage.name), e.0))?;
    let vocab = tok.vocab_size() as u64;
    if vocab > u64::from(t.dtype.max_id()) + 1 {
        return Err(spec_err(
            "output.tokens.dtype",
            format!(
                "{} holds ids up to {}, but the tokenizer of stage {} has {vocab} ids; use {}",
                t.dtype.name(),
                t.dtype.max_id(),
                stage.name,
                if spec.output.format == crate::spec::OutputFormat::Megatron {
                    "int32"
                } else {
                    "uint32"
                }
            ),
        ));
    }
    if let Some(eod) = t.eod
        && u64::from(eod) >= vocab
    {
        return Err(spec_err(
            "output.tokens.eod",
            format!(
                "{eod} is not an id of the tokenizer of stage {} ({vocab} ids)",
                stage.name
            ),
        ));
    }
    Ok(())
}

/// The version of an operator's asset file when the job was planned.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AssetVersion {
    pub size: u64,
    pub etag: Option<String>,
    pub modified_ms: i64,
}

/// A hint for a local path written with %-escapes (`a%20b`): local paths and
/// `file://` URIs are taken literally, as they are stored in job manifests.
fn escaped_hint(pat: &str) -> &'static str {
    let b = pat.as_bytes();
    let escaped = b
        .windows(3)
        .any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit());
    if escaped {
        " (local paths and file:// URIs are not %-decoded: write the name as it is, spaces and all)"
    } else {
        ""
    }
}

/// Asset versions by URI.
pub type Assets = std::collections::BTreeMap<String, AssetVersion>;

impl From<crate::dedup::plan::AgainstError> for PlanError {
    fn from(e: crate::dedup::plan::AgainstError) -> Self {
        match e {
            crate::dedup::plan::AgainstError::Spec(s) => PlanError::Spec(s),
            crate::dedup::plan::AgainstError::Storage(s) => PlanError::Storage(s),
        }
    }
}

/// The phase-0 input columns, as the input format's reader says: its own, declared,
/// or read from the first files (a JSONL sample, a Parquet footer).
pub async fn input_columns(
    spec: &Spec,
    reg: &Registry,
    files: &[InputFile],
) -> Result<Vec<(String, DataType)>, PlanError> {
    let uris: Vec<&str> = files.iter().map(|f| f.uri.as_str()).collect();
    read::reader(spec.input.format)
        .columns(reg, &uris, spec.input.schema.as_deref())
        .await
        .map_err(|e| match e {
            ColumnsError::Spec { field, message } => spec_err(field, message),
            ColumnsError::Storage(m) => PlanError::Storage(m),
        })
}

/// Binds stages to schemas phase by phase; returns (input, output) schema per phase.
///
/// A column of `output.drop_columns` leaves the data at the end of the first phase
/// after which no stage needs it (the page HTML after the map phase of a text job,
/// the image bytes before a near-dedup's candidates are staged): the later phases
/// neither write nor read it. "Needs" is what the operators' own schema checks say:
/// the column is dropped where binding the rest of the job without it still succeeds
/// and yields the same output.
pub fn bind(spec: &Spec, input: SchemaRef) -> Result<Vec<(SchemaRef, SchemaRef)>, SpecErrors> {
    let mut drops: Vec<(usize, String)> = Vec::new();
    let mut best = bind_dropping(spec, input.clone(), &drops)?;
    let n = best.len();
    // A column a later stage totals by (`tokenize`'s tokens per language) is read
    // when present and skipped when absent, so binding without it succeeds: it stays
    // until that stage all the same.
    let operators = ops::build_stages(spec)?;
    let phases = spec.phases();
    let totalled_later = |pi: usize, c: &String| {
        phases[pi + 1..]
            .iter()
            .flatten()
            .any(|&i| operators[i].totals().iter().any(|t| t.by.contains(c)))
    };
    for c in &spec.output.drop_columns {
        if c == crate::records::ID {
            continue;
        }
        for pi in 0..n.saturating_sub(1) {
            if best[pi].1.index_of(c).is_err() || totalled_later(pi, c) {
                continue;
            }
            drops.push((pi, c.clone()));
            match bind_dropping(spec, input.clone(), &drops) {
                Ok(b) if b[n - 1].1 == best[n - 1].1 => {
                    best = b;
                    break;
                }
                _ => {
                    drops.pop();
                }
            }
        }
    }
    Ok(best)
}

/// [`bind`] with `drops` (phase, column): the column leaves that phase's output.
fn bind_dropping(
    spec: &Spec,
    input: SchemaRef,
    drops: &[(usize, String)],
) -> Result<Vec<(SchemaRef, SchemaRef)>, SpecErrors> {
    let operators = ops::build_stages(spec)?;
    let mut errors = Vec::new();
    let mut out = Vec::new();
    let mut schema = input;
    let phases = spec.phases();
    let mut dropped_early: Vec<String> = Vec::new();
    // The stage that last wrote each column (absent: the input's).
    let mut last_writer: std::collections::HashMap<String, usize> = Default::default();
    for (pi, idxs) in phases.iter().enumerate() {
        if pi > 0
            && let Some((i, d)) = ops::dedup_ending(spec, &phases[pi - 1])
            && d.cluster_column
        {
            let col = crate::dedup::CLUSTER_COLUMN;
            if schema.index_of(col).is_ok() {
                errors.push(FieldError {
                    path: format!("stages[{i}].params.cluster_column"),
                    message: format!("the input already has a column {col:?}"),
                });
            } else {
                let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
                fields.push(Arc::new(arrow_schema::Field::new(
                    col,
                    arrow_schema::DataType::Utf8,
                    true,
                )));
                schema = Arc::new(Schema::new(fields));
            }
        }
        if pi > 0
            && let Some((i, d)) = ops::dedup_ending(spec, &phases[pi - 1])
            && d.kind.cuts_text()
        {
            let (tokens, offsets) = match &d.kind {
                crate::dedup::DedupKind::Substring {
                    tokens, offsets, ..
                } => (tokens, offsets),
                _ => (&None, &None),
            };
            // The apply reads the text (and the token columns) of the map phase's
            // records: a column dropped before it would fail every apply task.
            let need = [
                Some(("key", &d.key)),
                tokens.as_ref().map(|t| ("tokens", t)),
                offsets.as_ref().map(|o| ("offsets", o)),
            ];
            for (param, col) in need.into_iter().flatten() {
                if schema.index_of(col).is_err() {
                    errors.push(FieldError {
                        path: format!("stages[{i}].params.{param}"),
                        message: format!("column {col:?} does not reach the apply phase"),
                    });
                }
            }
            // Token offsets point into the text as the stage that made them saw it: it
            // must have tokenized this text column, and nothing may rewrite the text
            // after it.
            if let Some(t) = tokens.as_ref().and_then(|t| last_writer.get(t)) {
                let st = &spec.stages[*t];
                let field = st
                    .params
                    .get("field")
                    .and_then(|v| v.as_str())
                    .unwrap_or("text");
                let message = if st.op != "tokenize" || field != d.key {
                    Some(format!(
                        "column {:?} is made by stage {:?}, not by a tokenize stage of {:?}",
                        tokens.as_deref().unwrap_or_default(),
                        st.name,
                        d.key
                    ))
                } else if offsets.as_ref().and_then(|o| last_writer.get(o)) != Some(t) {
                    Some(format!(
                        "the offsets column {:?} is not made by stage {:?}, which made the tokens (tokenize with offsets: true)",
                        offsets.as_deref().unwrap_or_default(),
                        st.name
                    ))
                } else {
                    last_writer.get(&d.key).filter(|&&w| w > *t).map(|&w| {
                        format!(
                            "stage {:?} rewrites {:?} after stage {:?} tokenized it: the token offsets no longer fit",
                            spec.stages[w].name, d.key, st.name
                        )
                    })
                };
                if let Some(message) = message {
                    errors.push(FieldError {
                        path: format!("stages[{i}].params.tokens"),
                        message,
                    });
                }
            }
            let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
            for f in crate::dedup::apply::substring_fields(&spec.stages[i].name) {
                if schema.index_of(f.name()).is_ok() {
                    errors.push(FieldError {
                        path: format!("stages[{i}].params.kind"),
                        message: format!("the input already has a column {:?}", f.name()),
                    });
                }
                fields.push(Arc::new(f));
            }
            schema = Arc::new(Schema::new(fields));
        }
        let phase_in = schema.clone();
        for &i in idxs {
            for f in operators[i].output_fields(&schema).unwrap_or_default() {
                last_writer.insert(f.name().clone(), i);
            }
            match ops::output_schema(operators[i].as_ref(), &schema) {
                Ok(s) => schema = s,
                Err(m) => {
                    let m = m.to_string();
                    let (sub, msg) = match m.split_once(": ") {
                        Some((p, rest)) if p.starts_with("params") => {
                            (format!(".{p}"), rest.to_string())
                        }
                        _ => (String::new(), m),
                    };
                    errors.push(FieldError {
                        path: format!("stages[{i}]{sub}"),
                        message: msg,
                    });
                }
            }
        }
        let mut phase_out = schema.clone();
        let here: Vec<&String> = drops
            .iter()
            .filter(|(p, _)| *p == pi)
            .map(|(_, c)| c)
            .collect();
        if !here.is_empty() {
            let keep: Vec<_> = phase_out
                .fields()
                .iter()
                .filter(|f| !here.contains(&f.name()))
                .cloned()
                .collect();
            dropped_early.extend(here.into_iter().cloned());
            phase_out = Arc::new(Schema::new(keep));
            schema = phase_out.clone();
        }
        if pi + 1 == phases.len() {
            let mut fields: Vec<_> = phase_out.fields().iter().cloned().collect();
            for (j, c) in spec.output.drop_columns.iter().enumerate() {
                if c == crate::records::ID {
                    errors.push(FieldError {
                        path: format!("output.drop_columns[{j}]"),
                        message: "the id column cannot be dropped".into(),
                    });
                } else if let Some(pos) = fields.iter().position(|f| f.name() == c) {
                    fields.remove(pos);
                } else if dropped_early.contains(c) {
                    // dropped before the dedup
                } else {
                    errors.push(FieldError {
                        path: format!("output.drop_columns[{j}]"),
                        message: format!("no column {c:?} in the output"),
                    });
                }
            }
            phase_out = Arc::new(Schema::new(fields));
            if let Some(t) = &spec.output.tokens {
                let ids = |d: &arrow_schema::DataType| {
                    matches!(d, arrow_schema::DataType::List(item)
                        if item.data_type() == &arrow_schema::DataType::UInt32)
                };
                match phase_out.field_with_name(&t.column) {
                    Ok(f) if ids(f.data_type()) => {}
                    Ok(f) => errors.push(FieldError {
                        path: "output.tokens.column".into(),
                        message: format!(
                            "column {:?} is {}, token shards need a list of uint32 token ids (tokenize with ids: true)",
                            t.column,
                            f.data_type()
                        ),
                    }),
                    Err(_) => errors.push(FieldError {
                        path: "output.tokens.column".into(),
                        message: format!(
                            "no column {:?} in the output; add a tokenize stage with ids: true (its ids_column)",
                            t.column
                        ),
                    }),
                }
            }
            // WebDataset's image column: bytes; its caption column: a string.
            if let Some(w) = &spec.output.webdataset {
                use arrow_schema::DataType;
                match phase_out.field_with_name(&w.image) {
                    Ok(f) if matches!(f.data_type(), DataType::Binary | DataType::LargeBinary) => {}
                    Ok(f) => errors.push(FieldError {
                        path: "output.webdataset.image".into(),
                        message: format!(
                            "column {:?} is {}, not image bytes",
                            w.image,
                            f.data_type()
                        ),
                    }),
                    Err(_) => errors.push(FieldError {
                        path: "output.webdataset.image".into(),
                        message: format!(
                            "no column {:?} in the output (is it in output.drop_columns?)",
                            w.image
                        ),
                    }),
                }
                if let Some(c) = &w.caption
                    && !phase_out
                        .field_with_name(c)
                        .is_ok_and(|f| f.data_type() == &DataType::Utf8)
                {
                    errors.push(FieldError {
                        path: "output.webdataset.caption".into(),
                        message: format!("no string column {c:?} in the output"),
                    });
                }
            }
            // Dolma's text and created columns must be in the output.
            if let Some(j) = &spec.output.jsonl
                && j.layout == crate::spec::JsonlLayout::Dolma
            {
                for (param, col) in [("text", Some(&j.text)), ("created", j.created.as_ref())] {
                    if let Some(c) = col
                        && phase_out.field_with_name(c).is_err()
                    {
                        errors.push(FieldError {
                            path: format!("output.jsonl.{param}"),
                            message: format!("no column {c:?} in the output"),
                        });
                    }
                }
                if let Ok(f) = phase_out.field_with_name(&j.text)
                    && (f.data_type() != &arrow_schema::DataType::Utf8
                        || j.text == crate::records::ID)
                {
                    errors.push(FieldError {
                        path: "output.jsonl.text".into(),
                        message: format!(
                            "column {:?} is not a text column (a string other than id)",
                            j.text
                        ),
                    });
                }
            }
        }
        out.push((phase_in, phase_out));
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(SpecErrors(errors))
    }
}

pub use crate::protocol::hash16;

/// The version of the JSONL and Parquet readers' rules, in their phase-0 fingerprint.
pub const READER_RULES: &str = "2";

/// Phase fingerprints: what the phase computes, chained through earlier phases. Every
/// input that changes a phase's output is in it: the mdf version, the input format,
/// schema and download settings, each stage's operator and parameters, the version of
/// each asset file a stage loads, the identity of a model built into the binary that a
/// stage uses (the language identifier's tables), and the output settings of the last
/// phase.
///
/// A phase that ends in a dedup writes its keys cut into the dedup's partitions, so
/// the resolved partition count (`partitions` maps phase index to it) is part of that
/// phase's fingerprint: a map task is never reused into a shuffle cut another way.
pub fn fingerprints(
    spec: &Spec,
    input_schema: &Schema,
    assets: &Assets,
    partitions: &std::collections::BTreeMap<usize, u32>,
) -> Vec<String> {
    let phases = spec.phases();
    let (stage_assets, builtin): (Vec<_>, Vec<_>) = ops::stage_identities(spec).into_iter().unzip();
    let mut prev = serde_json::to_string(&json!({
        "format": spec.input.format,
        "schema": input_schema,
        "max_record_bytes": spec.input.max_record_bytes,
        "download": spec.input.download,
        "mdf": env!("CARGO_PKG_VERSION"),
    }))
    .expect("json");
    // Jobs without a limit keep the fingerprints they always had.
    if let Some(n) = spec.input.limit {
        prev = hash16(&[&prev, "limit", &n.to_string()]);
    }
    // The JSONL and Parquet readers' rules changed (session 35: a BOM line kept,
    // values a cast cannot hold rejected, not nulled or rounded): `--reuse` of a
    // job read by the old rules recomputes its first phase.
    use crate::spec::Format;
    if matches!(
        spec.input.format,
        Format::Jsonl | Format::Parquet | Format::Laion
    ) {
        prev = hash16(&[&prev, "reader", READER_RULES]);
    }
    let mut out = Vec::new();
    for (pi, idxs) in phases.iter().enumerate() {
        let stages: Vec<_> = idxs
            .iter()
            .map(|&i| {
                let mut st = json!({"name": spec.stages[i].name, "op": spec.stages[i].op, "params": spec.stages[i].params});
                // Stages without a built-in model keep the fingerprints they always had.
                if let Some(m) = &builtin[i] {
                    st["builtin_model"] = json!(m);
                }
                st
            })
            .collect();
        let used: Vec<_> = idxs
            .iter()
            .flat_map(|&i| stage_assets[i].clone())
            .map(|a| json!({"uri": a.uri, "version": assets.get(&a.uri)}))
            .collect();
        let mut what =
            json!({"stages": stages, "protocol": VERSION, "batch_rows": spec.job.batch_rows});
        if !used.is_empty() {
            what["assets"] = json!(used);
        }
        if let Some(n) = partitions.get(&pi) {
            what["dedup_partitions"] = json!(n);
        }
        if pi + 1 == phases.len() {
            let o = &spec.output;
            what["output"] = json!({
                "uri": o.uri, "compression": o.compression, "zstd_level": o.zstd_level,
                "target_file_bytes": o.target_file_bytes, "row_group_rows": o.row_group_rows,
                "drop_columns": o.drop_columns, "rejects": spec.rejects.uri,
                "include_record": spec.rejects.include_record,
            });
            // Parquet jobs keep the fingerprints they always had.
            if o.format != crate::spec::OutputFormat::Parquet {
                what["output"]["format"] = json!(o.format.name());
            }
            if let Some(t) = &o.tokens {
                what["output"]["tokens"] = json!(t);
            }
            if let Some(j) = &o.jsonl {
                what["output"]["jsonl"] = json!(j);
                // Dolma's default source is the job's name: part of what is written.
                if j.layout == crate::spec::JsonlLayout::Dolma && j.source.is_none() {
                    what["output"]["jsonl"]["source"] = json!(spec.name);
                }
            }
            if let Some(w) = &o.webdataset {
                what["output"]["webdataset"] = json!(w);
            }
        } else {
            what["include_record"] = json!(spec.rejects.include_record);
        }
        let fp = hash16(&[&prev, &crate::spec::canonical_json(&what)]);
        out.push(fp.clone());
        prev = fp;
    }
    out
}

/// Packs small files and cuts large splittable ones into byte ranges.
pub fn split(
    files: &[InputFile],
    format: Format,
    task_bytes: u64,
    max_files: usize,
) -> Vec<Vec<InputSlice>> {
    let mut s = Splitter::new(format, task_bytes, max_files);
    let mut groups = Vec::new();
    for f in files {
        s.push(f, &mut |g| groups.push(g));
    }
    s.finish(&mut |g| groups.push(g));
    groups
}

/// [`split`] a file at a time: each group goes to `out` once it is complete.
pub struct Splitter {
    format: Format,
    task_bytes: u64,
    max_files: usize,
    reader: &'static dyn read::Reader,
    cur: Vec<InputSlice>,
    cur_bytes: u64,
}

impl Splitter {
    pub fn new(format: Format, task_bytes: u64, max_files: usize) -> Self {
        Self {
            format,
            task_bytes,
            max_files,
            reader: read::reader(format),
            cur: Vec::new(),
            cur_bytes: 0,
        }
    }

    fn slice(&self, f: &InputFile, start: u64, end: u64) -> InputSlice {
        InputSlice {
            uri: f.uri.clone(),
            size: f.size,
            etag: f.etag.clone(),
            format: self.format,
            start,
            end,
        }
    }

    pub fn push(&mut self, f: &InputFile, out: &mut dyn FnMut(Vec<InputSlice>)) {
        if f.size > self.task_bytes && self.reader.splittable(&f.uri) {
            if !self.cur.is_empty() {
                out(std::mem::take(&mut self.cur));
                self.cur_bytes = 0;
            }
            let mut start = 0;
            while start < f.size {
                let end = (start + self.task_bytes).min(f.size);
                out(vec![self.slice(f, start, end)]);
                start = end;
            }
            return;
        }
        if !self.cur.is_empty()
            && (self.cur_bytes + f.size > self.task_bytes || self.cur.len() >= self.max_files)
        {
            out(std::mem::take(&mut self.cur));
            self.cur_bytes = 0;
        }
        self.cur_bytes += f.size;
        let s = self.slice(f, 0, f.size.max(1));
        self.cur.push(s);
    }

    pub fn finish(mut self, out: &mut dyn FnMut(Vec<InputSlice>)) {
        if !self.cur.is_empty() {
            out(std::mem::take(&mut self.cur));
        }
    }
}

/// Why a file server's host (`https://HOST[:PORT]`) is not a public address: an IP
/// literal in a private, loopback, link-local or other special range, or `localhost`.
/// Names resolved by DNS are not checked here.
fn private_host(store: &str) -> Option<String> {
    let authority = store.split_once("://")?.1;
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split_once(']')?.0
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    if host == "localhost" || host.ends_with(".localhost") {
        return Some("localhost is not a public host".into());
    }
    let ip: std::net::IpAddr = host.parse().ok()?;
    crate::io::download::special::not_public_block(ip)
        .map(|b| format!("{ip} is in {b}, not a public address"))
}

/// Plans a job: inputs, schemas, phases and tasks.
pub async fn plan(spec: &Spec, reg: &Registry) -> Result<Plan, PlanError> {
    plan_in(spec, reg, PLAN_MEMORY).await
}

/// [`plan`], its sorts holding at most `memory` bytes each.
pub async fn plan_in(spec: &Spec, reg: &Registry, memory: usize) -> Result<Plan, PlanError> {
    // Every operator's params, before any store is read (a spec from job.json was not
    // checked against the operators when it was parsed).
    ops::build_stages(spec).map_err(PlanError::Spec)?;
    let files = list_inputs(spec, reg, memory).await?;
    let assets = check_assets(spec, reg).await?;
    // Readers infer columns from the first files (at most 16).
    let cols = input_columns(spec, reg, &files.first(16)?).await?;
    let columns_sampled_of = (spec.input.schema.is_none()
        && matches!(
            spec.input.format,
            crate::spec::Format::Jsonl | crate::spec::Format::Parquet
        )
        && files.len() > 16)
        .then(|| files.len());
    let input_schema = with_id_column(&cols);
    let bound = bind(spec, input_schema.clone())?;
    let against = dedup_plan::check_against(spec, reg, &bound).await?;
    check_token_vocabulary(spec, reg).await?;
    let phases_idx = spec.phases();
    let partitions = phases_idx
        .iter()
        .enumerate()
        .filter_map(|(pi, idxs)| {
            let d = ops::dedup_ending(spec, idxs)?.1;
            Some((pi, dedup_plan::dedup_partitions(&d, files.bytes())))
        })
        .collect();
    let fps = fingerprints(spec, &input_schema, &assets, &partitions);
    let mut tasks: Vec<PhaseTasks> = Vec::new();
    let mut phases: Vec<PhasePlan> = Vec::new();
    let n_pipeline = phases_idx.len();
    for (pi, idxs) in phases_idx.iter().enumerate() {
        let fp = &fps[pi];
        let gpu = idxs.iter().any(|&i| spec.stages[i].resources.gpu > 0);
        // After a dedup stage: its reduce phase, then this phase as its apply phase.
        let dedup = (pi > 0)
            .then(|| ops::dedup_ending(spec, &phases_idx[pi - 1]))
            .flatten()
            .map(|(i, d)| {
                let partitions = dedup_plan::dedup_partitions(&d, files.bytes());
                let mut dd =
                    dedup_plan::dedup_phase(&spec.stages[i].name, &d, partitions, phases.len() - 1);
                dd.against_identity = against
                    .iter()
                    .find(|(s, _)| *s == i)
                    .map(|(_, e)| e.clone());
                dd
            });
        if let Some(dd) = &dedup {
            let map_out = bound[pi - 1].1.as_ref();
            let map_digest = phases[dd.map_phase]
                .task_digest
                .clone()
                .expect("planned phases have a digest");
            let first = phases.len();
            for (phase, list) in
                dedup_plan::shuffle_phases(dd, &fps[pi - 1], &map_digest, map_out, first)
            {
                phases.push(phase);
                tasks.push(PhaseTasks::Listed(list));
            }
        }
        let name = phase_name(phases.len());
        // An apply phase's decisions come from its reduce: its fingerprint (and so its
        // task ids and every id downstream) names the shuffle, not just the spec.
        let fp = &match &dedup {
            Some(_) => dedup_plan::apply_fingerprint(fp, &phases[phases.len() - 1].fingerprint),
            None => fp.clone(),
        };
        let mut phase = PhasePlan {
            name: name.clone(),
            fingerprint: fp.clone(),
            stages: idxs.clone(),
            input_schema: bound[pi].0.as_ref().clone(),
            output_schema: bound[pi].1.as_ref().clone(),
            last: pi + 1 == n_pipeline,
            gpu,
            tasks: 0,
            kind: if dedup.is_some() {
                PhaseKind::Apply
            } else {
                PhaseKind::Map
            },
            dedup: dedup.clone(),
            task_digest: None,
            shard_digits: 0,
        };
        // Sharded (docs/PROTOCOL.md §1): a first phase by its size, a follower by its
        // upstream's shards; never with `max_unconsumed_tasks`, which counts over a
        // whole phase.
        let list = if pi == 0 {
            let (list, n) = first_phase(spec, &files, fp, &name, memory)?;
            phase.tasks = n;
            phase.shard_digits = match spec.job.max_unconsumed_tasks {
                Some(_) => 0,
                None => shard_digits_for(n, spec.job.shard_tasks),
            };
            phase.task_digest = Some(match &list {
                PhaseTasks::Listed(l) => digest_of(l),
                PhaseTasks::Spilled(sorted) => {
                    // Streamed into the digest in id order, never collected.
                    let mut h = TaskDigest::default();
                    for r in sorted.iter().map_err(spill_err)? {
                        h.add(r.map_err(spill_err)?.0);
                    }
                    h.finish()
                }
                PhaseTasks::Follows { .. } => unreachable!("a first phase follows nothing"),
            });
            list
        } else {
            // A map phase follows its previous phase task for task; an apply phase
            // follows the map phase before its reduce phase.
            let up = match &dedup {
                Some(dd) => dd.map_phase,
                None => phases.len() - 1,
            };
            phase.tasks = phases[up].tasks;
            phase.shard_digits = phases[up].shard_digits;
            match &tasks[up] {
                PhaseTasks::Listed(l) => {
                    let list: Vec<TaskManifest> =
                        l.iter().map(|u| follower(&phase, &u.task_id)).collect();
                    phase.task_digest = Some(digest_of(&list));
                    PhaseTasks::Listed(list)
                }
                PhaseTasks::Spilled(_) | PhaseTasks::Follows { .. } => {
                    PhaseTasks::Follows { upstream: up }
                }
            }
        };
        phases.push(phase);
        tasks.push(list);
        if phases[phases.len() - 1].task_digest.is_none() {
            // A sharded follower: its ids come shard by shard, each shard's sorted and
            // the shards in prefix order, so in order overall.
            let q = phases.len() - 1;
            let mut h = TaskDigest::default();
            for shard in Shards::new(&phases, &tasks)? {
                for (p, ts) in shard?.1 {
                    if p == q {
                        ts.iter().for_each(|t| h.add(&t.task_id));
                    }
                }
            }
            phases[q].task_digest = Some(h.finish());
        }
    }
    Ok(Plan {
        phases,
        tasks,
        files,
        assets,
        input_had_id: cols.iter().any(|(name, _)| name == crate::records::ID),
        columns_sampled_of,
        against,
    })
}

/// The first phase's tasks: the inputs packed and cut into slices, each group one
/// task. Kept in memory while at most `job.shard_tasks` (or when sharding is off),
/// else sorted by id in a spill. Returns them and their count.
fn first_phase(
    spec: &Spec,
    files: &InputFiles,
    fp: &str,
    name: &str,
    memory: usize,
) -> Result<(PhaseTasks, u64), PlanError> {
    let keep_all = spec.job.max_unconsumed_tasks.is_some();
    let mut listed: Option<Vec<TaskManifest>> = Some(Vec::new());
    let mut spill = (!keep_all).then(|| SortSpill::new(memory));
    let mut n = 0u64;
    let mut err: Option<std::io::Error> = None;
    let mut add = |g: Vec<InputSlice>| {
        let t = TaskManifest {
            version: VERSION,
            job_id: String::new(),
            phase: name.to_string(),
            task_id: hash16(&[fp, &serde_json::to_string(&g).expect("json")]),
            inputs: g,
            upstream: vec![],
        };
        n += 1;
        if let Some(s) = &mut spill
            && err.is_none()
            && let Err(e) = s.push(t.task_id.as_bytes(), &serde_json::to_vec(&t).expect("json"))
        {
            err = Some(e);
        }
        if let Some(l) = &mut listed {
            l.push(t);
            if !keep_all && l.len() as u64 > spec.job.shard_tasks.max(1) {
                listed = None;
            }
        }
    };
    if spec.input.limit.is_some() {
        // One task over the first files, whole, in listing order: its reader stops
        // after `limit` records, so the job reads the input's first records only.
        let mut group = Vec::new();
        for f in files.iter()? {
            if group.len() == spec.job.max_files_per_task {
                break;
            }
            let f = f?;
            group.push(InputSlice {
                uri: f.uri.clone(),
                size: f.size,
                etag: f.etag.clone(),
                format: spec.input.format,
                start: 0,
                end: f.size.max(1),
            });
        }
        if !group.is_empty() {
            add(group);
        }
    } else {
        let mut splitter = Splitter::new(
            spec.input.format,
            spec.job.task_bytes,
            spec.job.max_files_per_task,
        );
        for f in files.iter()? {
            splitter.push(&f?, &mut add);
        }
        splitter.finish(&mut add);
    }
    if let Some(e) = err {
        return Err(spill_err(e));
    }
    Ok(match (listed, spill) {
        (Some(l), _) => (PhaseTasks::Listed(l), n),
        (None, Some(s)) => (PhaseTasks::Spilled(s.finish(false).map_err(spill_err)?), n),
        (None, None) => unreachable!("kept whole when sharding is off"),
    })
}

/// The [`PhasePlan::task_digest`] of a phase's tasks.
fn digest_of(tasks: &[TaskManifest]) -> String {
    let mut ids: Vec<&str> = tasks.iter().map(|t| t.task_id.as_str()).collect();
    ids.sort_unstable();
    crate::protocol::records::task_digest(&ids)
}

/// The id of a job's finalize task.
pub fn finalize_task_id(job_id: &str, last_fp: &str) -> String {
    hash16(&["finalize", job_id, last_fp])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crawl's file list is planned in its own order, repeats kept (as it always
    /// was: the plan's hash, and so the job id, follows that order), spilled or not;
    /// globbed inputs are sorted by URI, each once.
    #[tokio::test]
    async fn a_crawl_list_keeps_its_order_and_patterns_are_sorted_once() {
        use object_store::ObjectStoreExt;
        use std::io::Write;
        let store = Arc::new(object_store::memory::InMemory::new());
        crate::store::install_memory("plan-cc-order", store.clone());
        let names = [
            "s/2/warc/c.warc.gz",
            "s/1/warc/a.warc.gz",
            "s/3/warc/b.warc.gz",
            "s/1/warc/a.warc.gz",
        ];
        for n in names {
            let p = format!("crawl-data/CC-MAIN-2099-01/segments/{n}");
            store
                .put(&object_store::path::Path::from(p), "x".into())
                .await
                .unwrap();
        }
        let list: String = names
            .iter()
            .map(|n| format!("crawl-data/CC-MAIN-2099-01/segments/{n}\n"))
            .collect();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(list.as_bytes()).unwrap();
        store
            .put(
                &object_store::path::Path::from("crawl-data/CC-MAIN-2099-01/warc.paths.gz"),
                gz.finish().unwrap().into(),
            )
            .await
            .unwrap();
        let spec = |input: &str| {
            Spec::from_text(
                &format!(
                    "input: {input}\nstages: []\noutput: {{uri: \"memory://plan-cc-order/out\"}}\n"
                ),
                "t",
                &crate::spec::Overrides::default(),
                &|_| None,
                &crate::ops::Catalog,
            )
            .unwrap()
        };
        let cc = spec("{commoncrawl: {crawl: CC-MAIN-2099-01, base: \"memory://plan-cc-order\"}}");
        let reg = Registry::new(cc.s3.clone());
        for memory in [usize::MAX, 64] {
            let files = list_inputs(&cc, &reg, memory).await.unwrap();
            let got: Vec<String> = files.iter().unwrap().map(|f| f.unwrap().uri).collect();
            let want: Vec<String> = names
                .iter()
                .map(|n| format!("memory://plan-cc-order/crawl-data/CC-MAIN-2099-01/segments/{n}"))
                .collect();
            assert_eq!(got, want, "memory {memory}");
            assert_eq!(files.bytes(), 4);
        }
        let globs = spec(
            "{uris: [\"memory://plan-cc-order/crawl-data/CC-MAIN-2099-01/segments/s/*/warc/*.gz\", \"memory://plan-cc-order/crawl-data/CC-MAIN-2099-01/segments/s/1/warc/a.warc.gz\"], format: warc}",
        );
        for memory in [usize::MAX, 64] {
            let files = list_inputs(&globs, &reg, memory).await.unwrap();
            let got: Vec<String> = files.iter().unwrap().map(|f| f.unwrap().uri).collect();
            let mut want: Vec<String> = names[..3]
                .iter()
                .map(|n| format!("memory://plan-cc-order/crawl-data/CC-MAIN-2099-01/segments/{n}"))
                .collect();
            want.sort();
            assert_eq!(got, want, "memory {memory}");
        }
    }

    fn f(uri: &str, size: u64) -> InputFile {
        InputFile {
            uri: uri.into(),
            size,
            etag: None,
        }
    }

    #[test]
    fn split_packs_small_and_cuts_large_plain_files() {
        let files = [
            f("a.jsonl", 10),
            f("b.jsonl", 10),
            f("c.jsonl", 25),
            f("d.jsonl.gz", 100),
            f("e.jsonl", 5),
        ];
        let g = split(&files, Format::Jsonl, 20, 1000);
        let shape: Vec<Vec<(String, u64, u64)>> = g
            .iter()
            .map(|t| t.iter().map(|s| (s.uri.clone(), s.start, s.end)).collect())
            .collect();
        assert_eq!(
            shape,
            vec![
                vec![("a.jsonl".into(), 0, 10), ("b.jsonl".into(), 0, 10)],
                vec![("c.jsonl".into(), 0, 20)],
                vec![("c.jsonl".into(), 20, 25)],
                vec![("d.jsonl.gz".into(), 0, 100)],
                vec![("e.jsonl".into(), 0, 5)],
            ]
        );
        let g = split(&files[..2], Format::Jsonl, 1000, 1);
        assert_eq!(g.len(), 2, "max_files_per_task caps packing");
    }

    fn bound(yaml: &str) -> Vec<(SchemaRef, SchemaRef)> {
        let spec = Spec::from_value(serde_json::from_str(yaml).unwrap()).unwrap();
        let cols: Vec<(String, arrow_schema::DataType)> = ["url", "html"]
            .iter()
            .map(|c| (c.to_string(), arrow_schema::DataType::Utf8))
            .collect();
        bind(&spec, crate::records::with_id_column(&cols)).unwrap()
    }

    fn names(s: &SchemaRef) -> Vec<&str> {
        s.fields().iter().map(|f| f.name().as_str()).collect()
    }

    #[test]
    fn fingerprints_hold_download_settings_and_asset_versions() {
        let spec = |ua: &str| {
            Spec::from_value(serde_json::json!({
                "version": 1,
                "input": {"uris": ["x.jsonl"], "download": {"user_agent": ua}},
                "stages": [{"op": "url_filter", "params": {"domains": ["lists/d.txt"]}}],
                "output": {"uri": "out"}
            }))
            .unwrap()
        };
        let schema = Schema::empty();
        let uri = ops::stage_assets(&spec("a"))[0][0].uri.clone();
        let v = |etag: &str| {
            Assets::from([(
                uri.clone(),
                AssetVersion {
                    size: 10,
                    etag: Some(etag.into()),
                    modified_ms: 1,
                },
            )])
        };
        let none = Default::default();
        let fp = |ua: &str, etag: &str, parts: &std::collections::BTreeMap<usize, u32>| {
            fingerprints(&spec(ua), &schema, &v(etag), parts)
        };
        let base = fp("a", "e1", &none);
        assert_eq!(base, fp("a", "e1", &none));
        assert_ne!(base, fp("b", "e1", &none), "download");
        assert_ne!(base, fp("a", "e2", &none), "asset");
        let parts = std::collections::BTreeMap::from([(0, 7)]);
        assert_ne!(
            base,
            fp("a", "e1", &parts),
            "partitions of a dedup's map phase"
        );
    }

    #[test]
    fn fingerprints_hold_the_built_in_language_model() {
        let spec = |stage: serde_json::Value| {
            Spec::from_value(serde_json::json!({
                "version": 1, "input": {"uris": ["x.jsonl"]},
                "stages": [stage], "output": {"uri": "out"}
            }))
            .unwrap()
        };
        let builtin = spec(serde_json::json!({"op": "language_filter"}));
        let fasttext =
            spec(serde_json::json!({"op": "language_filter", "params": {"model": "lid.176.ftz"}}));
        let other = spec(serde_json::json!({"op": "text_length"}));
        assert_eq!(
            ops::stage_builtin_models(&builtin),
            [Some(crate::kernels::lang::model_id())]
        );
        assert_eq!(ops::stage_builtin_models(&fasttext), [None]);
        assert_eq!(ops::stage_builtin_models(&other), [None]);
        // The identity enters the stage's part of the fingerprint, and only there:
        // the same spec hashed without it (an earlier build's plan) differs.
        let schema = Schema::empty();
        let none = Default::default();
        let fp = fingerprints(&builtin, &schema, &Default::default(), &none);
        let id = crate::kernels::lang::model_id();
        assert!(id.starts_with("langid-") && id.len() == 7 + 16, "{id}");
        let prev = serde_json::to_string(&serde_json::json!({
            "format": builtin.input.format, "schema": schema,
            "max_record_bytes": builtin.input.max_record_bytes,
            "download": builtin.input.download, "mdf": env!("CARGO_PKG_VERSION"),
        }))
        .unwrap();
        // A JSONL input: the readers' rules version follows.
        let prev = hash16(&[&prev, "reader", READER_RULES]);
        let what = |with: bool| {
            let mut st = serde_json::json!({"name": builtin.stages[0].name, "op": builtin.stages[0].op,
                "params": builtin.stages[0].params});
            if with {
                st["builtin_model"] = serde_json::json!(id);
            }
            let mut w = serde_json::json!({"stages": [st], "protocol": VERSION,
                "batch_rows": builtin.job.batch_rows});
            let o = &builtin.output;
            w["output"] = serde_json::json!({
                "uri": o.uri, "compression": o.compression, "zstd_level": o.zstd_level,
                "target_file_bytes": o.target_file_bytes, "row_group_rows": o.row_group_rows,
                "drop_columns": o.drop_columns, "rejects": builtin.rejects.uri,
                "include_record": builtin.rejects.include_record,
            });
            hash16(&[&prev, &crate::spec::canonical_json(&w)])
        };
        assert_eq!(fp, [what(true)]);
        assert_ne!(fp, [what(false)]);
    }

    #[test]
    fn dropped_columns_leave_after_the_last_phase_that_needs_them() {
        let stages = r#"[{"op": "html_extract"}, {"op": "exact_key", "name": "content"}, {"op": "dedup", "params": {"key": "content_key"}},
            {"op": "text_length"}, {"op": "minhash"},
            {"op": "dedup", "name": "near", "params": {"key": "minhash", "kind": "minhash"}}]"#;
        let b = bound(&format!(
            r#"{{"version": 1, "input": {{"uris": ["x.warc.gz"]}}, "stages": {stages},
                "output": {{"uri": "out", "drop_columns": ["html", "minhash"]}}}}"#
        ));
        assert_eq!(b.len(), 3);
        // The map phase no longer writes the page HTML: nothing after it reads it.
        assert!(names(&b[0].0).contains(&"html"));
        assert!(!names(&b[0].1).contains(&"html"), "{:?}", names(&b[0].1));
        assert!(!names(&b[1].0).contains(&"html"));
        // The signatures are needed by the near dedup that ends phase 1, not after.
        assert!(names(&b[1].1).contains(&"text_chars"));
        assert!(!names(&b[1].1).contains(&"minhash"), "{:?}", names(&b[1].1));
        assert!(!names(&b[2].1).contains(&"minhash"));
        assert!(!names(&b[2].1).contains(&"html"));

        // A later phase reads the column: it stays until then.
        let stages = r#"[{"op": "html_extract"}, {"op": "exact_key", "name": "content"}, {"op": "dedup", "params": {"key": "content_key"}},
            {"op": "text_length", "params": {"field": "html"}}]"#;
        let b = bound(&format!(
            r#"{{"version": 1, "input": {{"uris": ["x.warc.gz"]}}, "stages": {stages},
                "output": {{"uri": "out", "drop_columns": ["html"]}}}}"#
        ));
        assert!(names(&b[0].1).contains(&"html"), "{:?}", names(&b[0].1));
        assert!(!names(b.last().map(|x| &x.1).unwrap()).contains(&"html"));

        // A later stage totals by the column (tokens per language): it stays until then,
        // although that stage would bind without it.
        let stages = r#"[{"op": "language_filter", "params": {"field": "html"}}, {"op": "exact_key", "name": "content", "params": {"field": "html"}},
            {"op": "dedup", "params": {"key": "content_key"}},
            {"op": "tokenize", "params": {"tokenizer": "tokenizer.json", "field": "html"}}]"#;
        let b = bound(&format!(
            r#"{{"version": 1, "input": {{"uris": ["x.jsonl"]}}, "stages": {stages},
                "output": {{"uri": "out", "drop_columns": ["language"]}}}}"#
        ));
        assert!(names(&b[0].1).contains(&"language"), "{:?}", names(&b[0].1));
        assert!(names(&b[1].0).contains(&"language"));
        assert!(!names(b.last().map(|x| &x.1).unwrap()).contains(&"language"));
    }
}
