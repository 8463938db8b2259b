//! The pipeline spec: YAML in, a validated [`Spec`] out. Parse → overrides and
//! interpolation → validate (every error at once, each naming its field path, unknown
//! keys refused). Stages keep their operator's name and raw params: operators are
//! built by `ops` (which the spec must not import), whose registry checks each
//! stage's params during validation through [`OperatorCheck`], so every error is
//! still reported at once. Nothing here lists inputs or touches storage;
//! schema-dependent checks happen when the coordinator binds the spec to its inputs.
pub mod overrides;
pub mod reader;

use arrow_schema::DataType;
use reader::{FieldError, Obj, Sink, SpecErrors};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Input record formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Jsonl,
    Parquet,
    Warc,
    Wet,
    /// Image files (a folder or a glob), one record per file.
    ImageFolder,
    /// WebDataset tar shards: one record per sample key.
    Webdataset,
    /// Parquet or JSONL of image URLs (`url`, `caption`, ...): each image downloaded.
    Laion,
}

/// Extensions of image files in folders and tar shards.
pub const IMAGE_EXTENSIONS: [&str; 8] = ["jpg", "jpeg", "png", "gif", "webp", "bmp", "tif", "tiff"];

/// Whether a file name has an image extension.
pub fn is_image_name(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l.rsplit_once('.')
        .is_some_and(|(_, ext)| IMAGE_EXTENSIONS.contains(&ext))
}

impl Format {
    /// Every format, each read by the reader registered under its [`name`](Format::name).
    pub const ALL: [Format; 7] = [
        Format::Jsonl,
        Format::Parquet,
        Format::Warc,
        Format::Wet,
        Format::ImageFolder,
        Format::Webdataset,
        Format::Laion,
    ];

    /// The format's name in specs and in the reader registry (`io::read::READERS`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Jsonl => "jsonl",
            Format::Parquet => "parquet",
            Format::Warc => "warc",
            Format::Wet => "wet",
            Format::ImageFolder => "image_folder",
            Format::Webdataset => "webdataset",
            Format::Laion => "laion",
        }
    }

    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "jsonl" | "json" | "ndjson" => Some(Format::Jsonl),
            "parquet" => Some(Format::Parquet),
            "warc" => Some(Format::Warc),
            "wet" => Some(Format::Wet),
            "image_folder" | "images" => Some(Format::ImageFolder),
            "webdataset" | "wds" => Some(Format::Webdataset),
            "laion" => Some(Format::Laion),
            _ => None,
        }
    }
    /// Infers the format from a file name or glob (`.jsonl[.gz|.zst]`, `.parquet`).
    pub fn infer(uri: &str) -> Option<Format> {
        let name = uri.rsplit('/').next().unwrap_or(uri).to_ascii_lowercase();
        let base = name
            .strip_suffix(".gz")
            .or_else(|| name.strip_suffix(".zst"))
            .or_else(|| name.strip_suffix(".zstd"))
            .unwrap_or(&name);
        if base.ends_with(".tar") {
            return Some(Format::Webdataset);
        }
        if is_image_name(base) {
            return Some(Format::ImageFolder);
        }
        if base.ends_with(".jsonl") || base.ends_with(".ndjson") || base.ends_with(".json") {
            Some(Format::Jsonl)
        } else if base.ends_with(".parquet") || base.ends_with(".pq") {
            Some(Format::Parquet)
        } else if base.ends_with(".wet") {
            Some(Format::Wet)
        } else if base.ends_with(".warc") || base.ends_with(".arc") {
            // ARC files are read by the WARC reader (it recognises their header lines).
            Some(Format::Warc)
        } else {
            None
        }
    }
}

#[derive(Debug, Clone)]
pub struct InputSpec {
    pub uris: Vec<String>,
    pub format: Format,
    /// Declared JSONL schema (column → type); inferred from a sample when absent.
    pub schema: Option<Vec<(String, DataType)>>,
    /// A JSONL line longer than this is rejected (`record_too_large`) without buffering it.
    pub max_record_bytes: u64,
    /// A CommonCrawl crawl, expanded through its `<kind>.paths.gz` at planning.
    pub commoncrawl: Option<CommonCrawl>,
    /// `format: laion`: how images are fetched.
    pub download: DownloadSpec,
    /// `input.limit`: only the first N records (in file listing order, then within
    /// each file), read by one task over the first `job.max_files_per_task` files.
    pub limit: Option<u64>,
}

/// `input.commoncrawl`: the files of one crawl.
#[derive(Debug, Clone, PartialEq)]
pub struct CommonCrawl {
    /// e.g. `CC-MAIN-2024-51`.
    pub crawl: String,
    /// How many files, from the start of the crawl's list (all when absent).
    pub files: Option<usize>,
    /// Skip this many files first (to cut a crawl into several jobs).
    pub offset: usize,
    /// `warc` or `wet`.
    pub kind: Format,
    /// Where the crawl lives (default `s3://commoncrawl`).
    pub base: String,
}

#[derive(Debug, Clone)]
pub struct Resources {
    pub cpu: f64,
    pub gpu: u32,
    pub memory_bytes: u64,
}

#[derive(Debug, Clone)]
pub struct StageSpec {
    pub name: String,
    /// The operator's name (`ops::build_stages` builds it from `params`).
    pub op: String,
    /// The raw params, as given (read at `stages[i].params`).
    pub params: Value,
    pub resources: Resources,
    /// The stage's output is materialised and the next stage starts a new phase.
    pub end_phase: bool,
}

impl StageSpec {
    /// Whether this is a dedup stage, which ends its phase (docs/DEDUP.md).
    pub fn is_dedup(&self) -> bool {
        self.op == DEDUP_OP
    }
}

/// The operator name of the structural dedup stage.
pub const DEDUP_OP: &str = "dedup";

/// The operator registry as validation sees it (implemented by `ops::Catalog`).
pub trait OperatorCheck {
    /// Checks the params of operator `op` of stage `stage`, each error into the
    /// reader's sink at its path, unknown keys included; `Err` when this build has
    /// no operator of that name (reported at `stages[i].op`).
    fn check(&self, stage: &str, op: &str, params: &Obj) -> Result<(), UnknownOperator>;
}

/// An operator name the registry does not know; the message says what it knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnknownOperator(pub String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    Zstd,
    Snappy,
    None,
}

/// What the last phase writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// Parquet part files and `_manifest.json`.
    Parquet,
    /// A Lance dataset (built with `--features lance`), committed in one transaction.
    Lance,
    /// Megatron-LM indexed dataset shards (`.bin` + `.idx`) of a token-id column.
    Megatron,
    /// Plain token shards: raw little-endian ids (`.tokens`) and document offsets
    /// (`.offsets`).
    Tokens,
    /// JSON Lines (`.jsonl.zst`, `.jsonl.gz`, `.jsonl`), plain records or Dolma's layout.
    Jsonl,
    /// WebDataset tar shards of images: `{key}.jpg`, `{key}.txt`, `{key}.json`.
    WebDataset,
    /// An Apache Iceberg table (built with `--features iceberg`): Parquet data files,
    /// one snapshot appended at the end of the job.
    Iceberg,
}

impl OutputFormat {
    /// The format's name in specs and in the writer registry (`io::write::WRITERS`).
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Parquet => "parquet",
            OutputFormat::Lance => "lance",
            OutputFormat::Megatron => "megatron",
            OutputFormat::Tokens => "tokens",
            OutputFormat::Jsonl => "jsonl",
            OutputFormat::WebDataset => "webdataset",
            OutputFormat::Iceberg => "iceberg",
        }
    }
}

#[derive(Debug, Clone)]
pub struct OutputSpec {
    pub uri: String,
    pub format: OutputFormat,
    pub compression: Compression,
    pub zstd_level: i32,
    pub target_file_bytes: u64,
    pub row_group_rows: usize,
    pub drop_columns: Vec<String>,
    pub overwrite: bool,
    /// `output.tokens`: the token shard settings (formats `megatron` and `tokens`).
    pub tokens: Option<TokenShards>,
    /// `output.jsonl`: the JSON Lines settings (format `jsonl`).
    pub jsonl: Option<JsonlSpec>,
    /// `output.webdataset`: the WebDataset settings (format `webdataset`).
    pub webdataset: Option<WebDatasetSpec>,
    /// `output.iceberg`: the table and its catalog (format `iceberg`).
    pub iceberg: Option<IcebergSpec>,
}

/// The catalog an Iceberg table is committed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IcebergCatalogKind {
    /// A SQL catalog (pyiceberg's `SqlCatalog` layout) over a SQLite file.
    Sql,
    /// An Iceberg REST catalog.
    Rest,
    /// The AWS Glue Data Catalog (a Glue database per namespace).
    Glue,
}

/// `output.iceberg`: which table of which catalog the job appends to. The table's
/// location (for a new table) is `output.uri`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IcebergSpec {
    pub catalog: IcebergCatalogKind,
    /// `sqlite:///ABS/PATH.db` (SQL), the REST endpoint, or Glue's endpoint when not
    /// the region's own (empty: `AWS_ENDPOINT_URL_GLUE`, `AWS_ENDPOINT_URL`, else the
    /// public one).
    pub uri: String,
    /// The catalog's name (the SQL catalog's `catalog_name` column; pyiceberg's
    /// `SqlCatalog(name, ...)`).
    pub name: String,
    pub warehouse: Option<String>,
    /// The namespace, one element per level.
    pub namespace: Vec<String>,
    pub table: String,
    /// Further catalog properties (a REST catalog's `token`, `credential`, ...).
    pub properties: std::collections::BTreeMap<String, String>,
    /// Glue: the region (default `AWS_REGION`) and the Data Catalog's id (default the
    /// caller's account).
    pub region: Option<String>,
    pub catalog_id: Option<String>,
}

/// `output.webdataset`: which columns become the image and caption members.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WebDatasetSpec {
    /// The image bytes column (`{key}.jpg` etc.), default `image`.
    pub image: String,
    /// The caption column (`{key}.txt`); default: `caption`, else `text`, when the
    /// output has it as a string.
    pub caption: Option<String>,
}

impl Default for WebDatasetSpec {
    fn default() -> Self {
        WebDatasetSpec {
            image: "image".into(),
            caption: None,
        }
    }
}

/// `output.jsonl`: how JSON Lines output is compressed and laid out.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct JsonlSpec {
    pub compression: JsonlCompression,
    pub layout: JsonlLayout,
    /// Dolma: the text column (default `text`).
    pub text: String,
    /// Dolma: the `source` field (default: the job's name).
    pub source: Option<String>,
    /// Dolma: the column `created` comes from (default: the first of `created`,
    /// `warc_date`, `date` the output has).
    pub created: Option<String>,
    /// `output.zstd_level` (already in the fingerprint as such).
    #[serde(skip)]
    pub zstd_level: i32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JsonlCompression {
    #[default]
    Zstd,
    Gzip,
    None,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JsonlLayout {
    /// Every output column by name.
    #[default]
    Records,
    /// Dolma's documents: id, text, source, added, created, metadata.
    Dolma,
}

/// The element type of written token ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenDtype {
    Uint16,
    Int32,
    Uint32,
}

impl TokenDtype {
    pub fn name(self) -> &'static str {
        match self {
            TokenDtype::Uint16 => "uint16",
            TokenDtype::Int32 => "int32",
            TokenDtype::Uint32 => "uint32",
        }
    }
    pub fn size(self) -> usize {
        match self {
            TokenDtype::Uint16 => 2,
            TokenDtype::Int32 | TokenDtype::Uint32 => 4,
        }
    }
    /// The largest id the type holds.
    pub fn max_id(self) -> u32 {
        match self {
            TokenDtype::Uint16 => u16::MAX as u32,
            TokenDtype::Int32 => i32::MAX as u32,
            TokenDtype::Uint32 => u32::MAX,
        }
    }
}

/// `output.tokens`: what a token shard writer writes.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TokenShards {
    /// The List<UInt32> column of token ids (`tokenize` with `ids: true`).
    pub column: String,
    pub dtype: TokenDtype,
    /// Appended to every document (Megatron's `--append-eod`).
    pub eod: Option<u32>,
    /// Documents of each shard in a random order drawn from this seed (and the task
    /// and shard), instead of input order.
    pub shuffle_seed: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct RejectsSpec {
    pub uri: String,
    /// Keep the rejected record itself (as JSON) beside its reason.
    pub include_record: bool,
}

#[derive(Debug, Clone)]
pub struct JobSettings {
    pub task_bytes: u64,
    pub max_files_per_task: usize,
    pub lease_ttl_secs: u64,
    pub heartbeat_secs: u64,
    pub max_attempts: u32,
    pub max_lost_leases: u32,
    pub lease_caps: BTreeMap<String, u32>,
    pub max_unconsumed_tasks: Option<u64>,
    /// At most this many tasks in a shard of a phase (docs/PROTOCOL.md §1): a phase
    /// with more is sharded by task id prefix.
    pub shard_tasks: u64,
    pub batch_rows: usize,
    pub batch_bytes: usize,
    pub channel_batches: usize,
    pub poll_millis: u64,
    /// Tries per storage request in a worker before its error surfaces (the worker
    /// then backs off as in an outage), and the first backoff between them.
    pub retry_attempts: u32,
    pub retry_base_millis: u64,
    /// Backup attempts of stragglers (`job.speculation`); `None`: never.
    pub speculation: Option<Speculation>,
}

/// `job.speculation`: when an idle worker runs a backup attempt of a task another
/// live attempt holds (docs/PROTOCOL.md §4, "Backup attempts").
#[derive(Debug, Clone, PartialEq)]
pub struct Speculation {
    /// Backups start only once this share of the phase's tasks is terminal.
    pub quantile: f64,
    /// A task qualifies once its attempt has run `factor` × the median duration of
    /// the phase's committed tasks...
    pub factor: f64,
    /// ...and at least this long.
    pub min_secs: f64,
    /// At most `max(1, ceil(max_share × tasks))` backups per phase.
    pub max_share: f64,
}

impl Speculation {
    /// Backups allowed in a phase of `tasks` tasks.
    pub fn budget(&self, tasks: usize) -> u32 {
        ((self.max_share * tasks as f64).ceil() as u32).max(1)
    }
    /// Terminal tasks a phase of `tasks` needs before its stragglers are judged.
    pub fn min_terminal(&self, tasks: usize) -> usize {
        ((self.quantile * tasks as f64).floor() as usize).max(1)
    }
    /// The running time after which a task gets a backup, given the median duration
    /// of the phase's committed tasks.
    pub fn threshold_ms(&self, median_ms: u64) -> u64 {
        (self.factor * median_ms as f64).max(self.min_secs * 1000.0) as u64
    }
}

/// Column types a spec can declare (`input.schema`).
pub fn parse_type(s: &str) -> Option<DataType> {
    match s {
        "string" | "str" | "utf8" | "json" => Some(DataType::Utf8),
        "int" | "int64" | "integer" => Some(DataType::Int64),
        "float" | "float64" | "double" => Some(DataType::Float64),
        "bool" | "boolean" => Some(DataType::Boolean),
        _ => None,
    }
}

/// The store's S3 settings, as the spec's `s3:` section sets them.
pub use crate::store::S3Settings;

/// `input.download` in the spec.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DownloadSpec {
    pub concurrency: usize,
    pub connect_timeout_ms: u64,
    pub timeout_ms: u64,
    pub retries: u32,
    pub max_redirects: usize,
    pub max_bytes: u64,
    /// Accepted `Content-Type` prefixes (a missing header is accepted: the decoder
    /// decides).
    pub content_types: Vec<String>,
    /// Allow every address that is not public (`special.rs`: private, loopback,
    /// link-local, NAT64 of those, ...), for tests and internal mirrors.
    pub allow_private: bool,
    pub user_agent: String,
    /// The `From` header (an operator's contact address), sent when set.
    #[serde(default)]
    pub from: Option<String>,
    /// Requests in flight to one host (the URL's host, before redirects), across
    /// every task of the worker process.
    #[serde(default = "default_per_host")]
    pub per_host: usize,
    /// `X-Robots-Tag` directives that opt an image out (empty: honour none).
    #[serde(default = "default_opt_out")]
    pub opt_out: Vec<String>,
    /// The token a `X-Robots-Tag: TOKEN: directive` names this downloader by; a
    /// directive for another token is not ours.
    #[serde(default = "default_ua_token")]
    pub user_agent_token: String,
}

fn default_per_host() -> usize {
    16
}

/// img2dataset's defaults plus `none` (which implies `noindex`).
fn default_opt_out() -> Vec<String> {
    ["noai", "noimageai", "noindex", "noimageindex", "none"]
        .map(String::from)
        .to_vec()
}

fn default_ua_token() -> String {
    "mdf".into()
}

impl Default for DownloadSpec {
    fn default() -> Self {
        DownloadSpec {
            concurrency: 64,
            connect_timeout_ms: 5_000,
            timeout_ms: 20_000,
            retries: 2,
            max_redirects: 5,
            max_bytes: 16 << 20,
            content_types: vec!["image/".into(), "application/octet-stream".into()],
            allow_private: false,
            user_agent: "mdf-downloader/0.1 (+https://github.com/mdf)".into(),
            from: None,
            per_host: default_per_host(),
            opt_out: default_opt_out(),
            user_agent_token: default_ua_token(),
        }
    }
}

/// A validated, built pipeline spec.
#[derive(Debug, Clone)]
pub struct Spec {
    pub name: String,
    pub input: InputSpec,
    pub stages: Vec<StageSpec>,
    pub output: OutputSpec,
    pub rejects: RejectsSpec,
    pub job: JobSettings,
    pub s3: S3Settings,
    /// The resolved configuration tree this spec was built from (stored in job.json).
    pub resolved: Value,
    /// Read back from a stored job.json ([`Spec::from_value`]): its operators are
    /// built without the checks added since it was accepted.
    pub stored: bool,
}

/// Command-line adjustments applied before validation.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub input: Vec<String>,
    pub output: Option<String>,
    pub set: Vec<String>,
}

impl Spec {
    /// Loads a spec file, applies overrides and environment interpolation, validates
    /// (each stage's params through `ops`).
    pub fn load(
        path: &std::path::Path,
        ov: &Overrides,
        ops: &dyn OperatorCheck,
    ) -> Result<Spec, SpecErrors> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            SpecErrors(vec![FieldError {
                path: String::new(),
                message: format!("cannot read spec {}: {e}", path.display()),
            }])
        })?;
        let env = |k: &str| std::env::var(k).ok();
        Spec::from_text(&text, &path.display().to_string(), ov, &env, ops)
    }

    pub fn from_text(
        text: &str,
        source: &str,
        ov: &Overrides,
        env: &dyn Fn(&str) -> Option<String>,
        ops: &dyn OperatorCheck,
    ) -> Result<Spec, SpecErrors> {
        let mut v = overrides::parse_yaml(text, source)?;
        let mut errs = Vec::new();
        if !ov.input.is_empty() {
            v["input"]["uris"] = Value::from(ov.input.clone());
            if let Some(m) = v["input"].as_object_mut() {
                m.remove("uri");
                m.remove("commoncrawl");
            }
        }
        if let Some(o) = &ov.output {
            v["output"]["uri"] = Value::from(o.clone());
        }
        for s in &ov.set {
            if let Err(e) = overrides::apply_set(&mut v, s) {
                errs.push(e);
            }
        }
        if let Err(e) = overrides::interpolate(&mut v, env) {
            errs.extend(e.0);
        }
        if !errs.is_empty() {
            return Err(SpecErrors(errs));
        }
        Spec::validate(v, Rules::New, Some(ops))
    }

    /// Validates a resolved tree (as stored in job.json) and builds the spec. Rules
    /// added after a job could have been stored (stage names) apply to new specs
    /// only ([`Spec::from_text`]), so every stored job still loads. Operators and
    /// their params were checked when the job was submitted; `ops::build_stages`
    /// builds them again where they run.
    pub fn from_value(v: Value) -> Result<Spec, SpecErrors> {
        Spec::validate(v, Rules::Stored, None)
    }

    fn validate(
        v: Value,
        rules: Rules,
        ops: Option<&dyn OperatorCheck>,
    ) -> Result<Spec, SpecErrors> {
        let sink = Sink::default();
        let spec = build(&v, &sink, rules, ops);
        if !sink.is_empty() {
            return Err(sink.into_errors());
        }
        let mut spec = spec.expect("a spec is built whenever no error was recorded");
        spec.resolved = v;
        Ok(spec)
    }

    /// blake3 of the canonical JSON of the resolved tree (keys sorted).
    pub fn hash(&self) -> String {
        blake3::hash(canonical_json(&self.resolved).as_bytes()).to_hex()[..32].to_string()
    }

    /// Stage indices grouped into phases (a phase ends at `end_phase` or at the end).
    /// The most CPUs any stage asks for (at least 1).
    pub fn max_stage_cpu(&self) -> f64 {
        self.stages
            .iter()
            .map(|s| s.resources.cpu)
            .fold(1.0, f64::max)
    }

    /// Stage indices grouped into pipeline phases: a phase ends at `end_phase`, at a
    /// `dedup` stage, or at the end. A dedup stage is the last stage of its phase; the
    /// stages after it (possibly none) form the phase its apply tasks run. The job's
    /// phases are these plus one reduce phase per dedup stage (docs/DEDUP.md).
    pub fn phases(&self) -> Vec<Vec<usize>> {
        phase_groups(&self.stages)
    }

    /// The dedup stage that ends a pipeline phase, if one does (`ops::dedup_ending`
    /// gives its params).
    pub fn dedup_ending(&self, phase: &[usize]) -> Option<usize> {
        let &i = phase.last()?;
        self.stages[i].is_dedup().then_some(i)
    }
}

fn phase_groups(stages: &[StageSpec]) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for (i, s) in stages.iter().enumerate() {
        out.last_mut().expect("non-empty").push(i);
        if s.is_dedup() || (s.end_phase && i + 1 < stages.len()) {
            out.push(vec![]);
        }
    }
    out
}

/// The number of phases of the job (pipeline phases plus a reduce phase per dedup).
fn job_phase_count(stages: &[StageSpec]) -> usize {
    phase_groups(stages).len() + stages.iter().filter(|s| s.is_dedup()).count()
}

/// JSON text with every map's keys sorted, so equal trees hash equally whatever the
/// key order in the YAML.
pub fn canonical_json(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v).to_string()
}

/// Which rules a tree is held to: a new spec to all of them, a stored `job.json` to
/// those of the version that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rules {
    New,
    Stored,
}

/// Whether `name` is 1-64 characters of `[A-Za-z0-9_-]` (job and stage names: they
/// become parts of job ids, `--set` paths and the HTML report).
fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn build(v: &Value, sink: &Sink, rules: Rules, ops: Option<&dyn OperatorCheck>) -> Option<Spec> {
    let root = Obj::new(Some(v), "", sink).stored(rules == Rules::Stored);
    if let Some(ver) = root.opt_u64("version")
        && ver != 1
    {
        sink.error(
            "version",
            format!("unsupported spec version {ver}, this mdf reads 1"),
        );
    }
    let name = root.opt_str("name").unwrap_or_else(|| "job".to_string());
    if !is_plain_name(&name) {
        sink.error("name", "must be 1-64 characters of [A-Za-z0-9_-]");
    }
    let input = build_input(&root.obj("input"), sink);
    let stages = build_stages(&root, sink, rules, ops);
    let output = build_output(&root.obj("output"), sink);
    let rejects = {
        let r = root.obj("rejects");
        let uri = r.opt_str("uri").unwrap_or_else(|| {
            output
                .as_ref()
                .map(|o| format!("{}/_rejects", o.uri.trim_end_matches('/')))
                .unwrap_or_default()
        });
        let include_record = r.opt_bool("include_record").unwrap_or(true);
        if crate::store::Uri::parse(&uri).is_ok_and(|u| crate::store::is_read_only(&u.store)) {
            r.error(
                "uri",
                "a file server or the Hugging Face Hub (https://, hf://) is for inputs only",
            );
        }
        r.finish();
        RejectsSpec {
            uri,
            include_record,
        }
    };
    let job = build_job(&root.obj("job"), stages.as_deref().unwrap_or(&[]), sink);
    // A worker holds at most two channels of batches plus one batch in each pipeline
    // thread: a stage's memory budget must cover that.
    let in_flight = (2 * job.channel_batches as u64 + 2) * job.batch_bytes as u64;
    for (i, st) in stages.as_deref().unwrap_or(&[]).iter().enumerate() {
        if st.resources.memory_bytes < in_flight {
            sink.error(
                &format!("stages[{i}].resources.memory"),
                format!(
                    "{} bytes is below the pipeline's in-flight batches ((2 × job.channel_batches + 2) × job.batch_bytes = {in_flight} bytes); raise it or lower job.batch_bytes",
                    st.resources.memory_bytes
                ),
            );
        }
    }
    let s3 = build_s3(&root.obj("storage"));
    root.finish();
    Some(Spec {
        name,
        input: input?,
        stages: stages?,
        output: output?,
        rejects,
        job,
        s3,
        resolved: Value::Null,
        stored: rules == Rules::Stored,
    })
}

fn build_commoncrawl(o: &Obj, sink: &Sink) -> Option<CommonCrawl> {
    if !o.has("commoncrawl") {
        return None;
    }
    let c = o.obj("commoncrawl");
    let crawl = c.req_str("crawl").unwrap_or_default();
    let ok = crawl.strip_prefix("CC-MAIN-").is_some_and(|r| {
        let b = r.as_bytes();
        b.len() == 7
            && b[4] == b'-'
            && r.chars()
                .filter(|&ch| ch != '-')
                .all(|ch| ch.is_ascii_digit())
    });
    if !crawl.is_empty() && !ok {
        sink.error(
            &c.field_path("crawl"),
            format!("expected a crawl id such as CC-MAIN-2024-51, found {crawl:?}"),
        );
    }
    let kind = match c.opt_str("kind").as_deref() {
        None | Some("warc") => Format::Warc,
        Some("wet") => Format::Wet,
        Some(k) => {
            sink.error(
                &c.field_path("kind"),
                format!("expected warc or wet, found {k:?}"),
            );
            Format::Warc
        }
    };
    let out = CommonCrawl {
        crawl,
        files: c.opt_u64("files").map(|n| n as usize),
        offset: c.opt_u64("offset").unwrap_or(0) as usize,
        kind,
        base: c
            .opt_str("base")
            .unwrap_or_else(|| "s3://commoncrawl".into())
            .trim_end_matches('/')
            .to_string(),
    };
    c.finish();
    Some(out)
}

fn build_input(o: &Obj, sink: &Sink) -> Option<InputSpec> {
    let mut uris = o.opt_str_list("uris").unwrap_or_default();
    if let Some(u) = o.opt_str("uri") {
        uris.push(u);
    }
    let commoncrawl = build_commoncrawl(o, sink);
    if let Some(cc) = &commoncrawl {
        if !uris.is_empty() {
            sink.error(
                &o.field_path("commoncrawl"),
                "give either input.uris or input.commoncrawl, not both",
            );
        }
        // The listed files carry the format in their names.
        uris.push(format!(
            "{}/crawl-data/{}/x.{}.gz",
            cc.base,
            cc.crawl,
            if cc.kind == Format::Wet {
                "warc.wet"
            } else {
                "warc"
            }
        ));
    }
    if uris.is_empty() {
        sink.error(
            &o.field_path("uris"),
            "missing input: give input.uris in the spec or --input on the command line",
        );
    }
    let format = match o.opt_str("format") {
        Some(f) => Format::parse(&f).or_else(|| {
            sink.error(
                &o.field_path("format"),
                format!(
                    "unknown format {f:?}, expected one of: jsonl, parquet, warc, wet, image_folder, webdataset, laion"
                ),
            );
            None
        }),
        None if uris.is_empty() => None,
        None => {
            let inferred = Format::infer(&uris[0]);
            if inferred.is_none() {
                sink.error(
                    &o.field_path("format"),
                    format!(
                        "cannot infer the format from {:?}; set input.format (jsonl, parquet, warc, wet, image_folder, webdataset)",
                        uris[0]
                    ),
                );
            }
            inferred
        }
    };
    let schema = o.raw("schema").map(|s| {
        let so = Obj::new(Some(s), &o.field_path("schema"), sink);
        let mut cols = Vec::new();
        for k in so.keys() {
            if let Some(t) = so.opt_str(&k) {
                match parse_type(&t) {
                    Some(dt) => cols.push((k.clone(), dt)),
                    None => sink.error(
                        &so.field_path(&k),
                        format!(
                            "unknown type {t:?}, expected one of: string, int64, float64, bool, json"
                        ),
                    ),
                }
            }
        }
        so.finish();
        cols
    });
    let max_record_bytes = o.opt_bytes_nonzero("max_record_bytes").unwrap_or(16 << 20);
    let limit = o
        .has("limit")
        .then(|| o.u64_in("limit", 1, 1, u64::MAX / 2));
    let download = {
        let d = o.obj("download");
        let def = DownloadSpec::default();
        let out = DownloadSpec {
            concurrency: d.u64_in("concurrency", def.concurrency as u64, 1, 4096) as usize,
            connect_timeout_ms: (d
                .opt_f64("connect_timeout_secs")
                .map_or(def.connect_timeout_ms as f64, |s| s * 1000.0))
                as u64,
            timeout_ms: (d
                .opt_f64("timeout_secs")
                .map_or(def.timeout_ms as f64, |s| s * 1000.0)) as u64,
            retries: d.u64_in("retries", def.retries as u64, 0, 20) as u32,
            max_redirects: d.u64_in("max_redirects", def.max_redirects as u64, 0, 50) as usize,
            max_bytes: d.opt_bytes("max_bytes").unwrap_or(def.max_bytes),
            content_types: d.opt_str_list("content_types").unwrap_or(def.content_types),
            allow_private: d.opt_bool("allow_private").unwrap_or(false),
            user_agent: d.opt_str("user_agent").unwrap_or(def.user_agent),
            from: d.opt_str("from"),
            per_host: d.u64_in("per_host", def.per_host as u64, 1, 4096) as usize,
            opt_out: match d.raw_or_null("opt_out") {
                Some(serde_json::Value::Bool(false) | serde_json::Value::Null) => vec![],
                Some(serde_json::Value::Bool(true)) | None => def.opt_out,
                Some(_) => d
                    .opt_str_list("opt_out")
                    .unwrap_or_default()
                    .into_iter()
                    .map(|s| s.trim().to_ascii_lowercase())
                    .collect(),
            },
            user_agent_token: d
                .opt_str("user_agent_token")
                .map(|s| s.trim().to_ascii_lowercase())
                .unwrap_or(def.user_agent_token),
        };
        for (k, v) in [
            ("user_agent", &out.user_agent),
            ("user_agent_token", &out.user_agent_token),
        ] {
            if v.is_empty() || v.chars().any(|c| c.is_control()) {
                sink.error(
                    &d.field_path(k),
                    "must be non-empty, without control characters",
                );
            }
        }
        if let Some(f) = &out.from
            && (f.is_empty() || f.chars().any(|c| c.is_control()))
        {
            sink.error(
                &d.field_path("from"),
                "must be non-empty, without control characters",
            );
        }
        for (k, v) in [
            ("connect_timeout_secs", out.connect_timeout_ms),
            ("timeout_secs", out.timeout_ms),
        ] {
            if v == 0 {
                sink.error(&d.field_path(k), "must be positive");
            }
        }
        d.finish();
        out
    };
    o.finish();
    if commoncrawl.is_some() {
        uris.clear();
    }
    Some(InputSpec {
        uris,
        commoncrawl,
        format: format?,
        schema,
        max_record_bytes,
        download,
        limit,
    })
}

fn build_stages(
    root: &Obj,
    sink: &Sink,
    rules: Rules,
    ops: Option<&dyn OperatorCheck>,
) -> Option<Vec<StageSpec>> {
    let Some(list) = root.opt_list("stages") else {
        return Some(vec![]);
    };
    let mut out = Vec::new();
    let mut names = BTreeSet::new();
    let mut ok = true;
    for (i, item) in list.iter().enumerate() {
        let path = format!("stages[{i}]");
        let so = Obj::new(Some(item), &path, sink).stored(rules == Rules::Stored);
        let Some(op) = so.req_str("op") else {
            ok = false;
            so.finish();
            continue;
        };
        let given = so.opt_str("name");
        let name = given.clone().unwrap_or_else(|| op.clone());
        // A name not given is the operator's, checked against the registry.
        if rules == Rules::New && given.is_some() && !is_plain_name(&name) {
            sink.error(
                &so.field_path("name"),
                format!("{name:?} must be 1-64 characters of [A-Za-z0-9_-]"),
            );
        } else if rules == Rules::New && name.bytes().all(|b| b.is_ascii_digit()) {
            sink.error(
                &so.field_path("name"),
                format!(
                    "{name:?} is a number, and `--set stages.{name}.…` means the stage at index {name}: give the stage a name with a letter"
                ),
            );
        } else if !names.insert(name.clone()) {
            sink.error(
                &so.field_path("name"),
                format!("duplicate stage name {name:?}; give each stage a unique name"),
            );
        }
        let params = so.raw("params").cloned().unwrap_or(Value::Null);
        let before = sink.len();
        // An unknown operator's params cannot be checked (it has no list of fields).
        if let Some(ops) = ops {
            let pobj = Obj::new(Some(&params), &so.field_path("params"), sink)
                .stored(rules == Rules::Stored);
            if let Err(e) = ops.check(&name, &op, &pobj) {
                sink.error(&so.field_path("op"), e.0);
            }
        }
        let r = so.obj("resources");
        let resources = Resources {
            cpu: r.opt_f64("cpu").unwrap_or(1.0),
            gpu: r.u64_in("gpu", 0, 0, 64) as u32,
            memory_bytes: r.opt_bytes("memory").unwrap_or(512 << 20),
        };
        r.finish();
        let end_phase = so.opt_bool("end_phase").unwrap_or(false);
        so.finish();
        if sink.len() == before {
            out.push(StageSpec {
                name,
                op,
                params,
                resources,
                end_phase,
            });
        } else {
            ok = false;
        }
    }
    ok.then_some(out)
}

fn build_output(o: &Obj, sink: &Sink) -> Option<OutputSpec> {
    let uri = o.opt_str("uri");
    if uri.as_deref().is_some_and(|u| {
        crate::store::Uri::parse(u).is_ok_and(|u| crate::store::is_read_only(&u.store))
    }) {
        // Outputs are committed through create-only writes a file server does not take.
        o.error(
            "uri",
            "a file server or the Hugging Face Hub (https://, hf://) is for inputs only",
        );
    }
    if uri.is_none() {
        sink.error(
            &o.field_path("uri"),
            "missing output: give output.uri in the spec or --output on the command line",
        );
    }
    let format = match o.opt_str("format").as_deref() {
        None | Some("parquet") => OutputFormat::Parquet,
        Some("megatron") => OutputFormat::Megatron,
        Some("tokens") => OutputFormat::Tokens,
        Some("jsonl") => OutputFormat::Jsonl,
        Some("webdataset") => OutputFormat::WebDataset,
        Some("iceberg") if cfg!(feature = "iceberg") => OutputFormat::Iceberg,
        Some("iceberg") => {
            sink.error(
                &o.field_path("format"),
                "iceberg output needs mdf built with `--features iceberg` (this build has no iceberg support)",
            );
            OutputFormat::Parquet
        }
        Some("lance") if cfg!(feature = "lance") => OutputFormat::Lance,
        Some("lance") => {
            sink.error(
                &o.field_path("format"),
                "lance output needs mdf built with `--features lance` (this build has no lance support)",
            );
            OutputFormat::Parquet
        }
        Some(f) => {
            sink.error(
                &o.field_path("format"),
                format!(
                    "unknown output format {f:?}, expected: parquet, lance, iceberg, megatron, tokens, jsonl, webdataset"
                ),
            );
            OutputFormat::Parquet
        }
    };
    let compression = match o.opt_str("compression").as_deref() {
        None | Some("zstd") => Compression::Zstd,
        Some("snappy") => Compression::Snappy,
        Some("none") => Compression::None,
        Some(c) => {
            sink.error(
                &o.field_path("compression"),
                format!("unknown compression {c:?}, expected one of: zstd, snappy, none"),
            );
            Compression::Zstd
        }
    };
    let zstd_level = o.u64_in("zstd_level", 3, 1, 22) as i32;
    let target_file_bytes = o.opt_bytes("target_file_bytes").unwrap_or(256 << 20);
    if target_file_bytes < 1 << 20 {
        sink.error(&o.field_path("target_file_bytes"), "must be at least 1MiB");
    }
    let row_group_rows = o.u64_in("row_group_rows", 65_536, 1, 10_000_000) as usize;
    let drop_columns = o.opt_str_list("drop_columns").unwrap_or_default();
    let overwrite = o.opt_bool("overwrite").unwrap_or(false);
    let tokens = build_tokens(o, format, sink);
    let jsonl = build_jsonl(o, format).map(|j| JsonlSpec { zstd_level, ..j });
    // Parquet's settings mean nothing to the other formats: refused, not ignored.
    if !matches!(
        format,
        OutputFormat::Parquet | OutputFormat::Lance | OutputFormat::Iceberg
    ) {
        for k in ["compression", "row_group_rows"] {
            if o.has(k) {
                o.error(
                    k,
                    format!(
                        "Parquet's setting, not {}'s (see output.{})",
                        format.name(),
                        format.name()
                    ),
                );
            }
        }
    }
    let webdataset = if format == OutputFormat::WebDataset {
        let w = o.obj("webdataset");
        let spec = WebDatasetSpec {
            image: w.opt_str("image").unwrap_or_else(|| "image".into()),
            caption: w.opt_str("caption"),
        };
        w.finish();
        Some(spec)
    } else {
        if o.has("webdataset") {
            o.error("webdataset", "only with output.format webdataset");
        }
        None
    };
    let iceberg = build_iceberg(o, format, uri.as_deref(), sink);
    if tokens.is_some() && target_file_bytes > 4 << 30 {
        // A shard is put as one object (S3: at most 5 GiB) and held in memory.
        sink.error(
            &o.field_path("target_file_bytes"),
            "must be at most 4GiB for token shards",
        );
    }
    o.finish();
    Some(OutputSpec {
        uri: uri?.trim_end_matches('/').to_string(),
        format,
        compression,
        zstd_level,
        target_file_bytes,
        row_group_rows,
        drop_columns,
        overwrite,
        tokens,
        jsonl,
        webdataset,
        iceberg,
    })
}

/// `us-east-1`, `cn-north-1`, `us-gov-west-1`: letters, dash-separated, then a number.
fn is_aws_region(r: &str) -> bool {
    let parts: Vec<&str> = r.split('-').collect();
    parts.len() >= 3
        && parts[..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts[parts.len() - 1].len() <= 2
        && parts[parts.len() - 1].bytes().all(|b| b.is_ascii_digit())
        && !parts[parts.len() - 1].is_empty()
}

/// `output.iceberg`, for the Iceberg format only.
fn build_iceberg(
    o: &Obj,
    format: OutputFormat,
    uri: Option<&str>,
    sink: &Sink,
) -> Option<IcebergSpec> {
    if format != OutputFormat::Iceberg {
        if o.has("iceberg") {
            o.error("iceberg", "only with output.format iceberg");
        }
        return None;
    }
    let i = o.obj("iceberg");
    let c = i.obj("catalog");
    let kind = match c.opt_str("type").as_deref() {
        None | Some("sql") => IcebergCatalogKind::Sql,
        Some("rest") => IcebergCatalogKind::Rest,
        Some("glue") => IcebergCatalogKind::Glue,
        Some(t) => {
            c.error(
                "type",
                format!("unknown catalog type {t:?}, expected sql, rest or glue"),
            );
            IcebergCatalogKind::Sql
        }
    };
    // The embedded default: a SQLite file beside a local output.
    let local = uri
        .and_then(|u| crate::store::Uri::parse(u).ok())
        .filter(|u| u.store == "file");
    let curi = match (c.opt_str("uri"), kind) {
        (Some(u), IcebergCatalogKind::Sql) => {
            let path = u
                .strip_prefix("sqlite:///")
                .map(|p| format!("/{p}"))
                .or_else(|| (!u.contains("://")).then(|| u.clone()));
            match path.map(std::path::absolute) {
                Some(Ok(p)) => Some(format!("sqlite://{}", p.display())),
                _ => {
                    c.error(
                        "uri",
                        "expected a SQLite file: sqlite:///ABS/PATH.db or a path",
                    );
                    None
                }
            }
        }
        (Some(u), IcebergCatalogKind::Rest) => {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                c.error("uri", "expected the REST catalog's http(s):// address");
            }
            Some(u)
        }
        (None, IcebergCatalogKind::Sql) => match &local {
            Some(l) => {
                let parent = l.path.as_ref().rsplit_once('/').map_or("", |x| x.0);
                Some(format!("sqlite:///{parent}/catalog.db"))
            }
            None => {
                c.error(
                    "uri",
                    "required unless the output is local (the default is a catalog.db beside it)",
                );
                None
            }
        },
        (None, IcebergCatalogKind::Rest) => {
            c.error("uri", "required: the REST catalog's address");
            None
        }
        (Some(u), IcebergCatalogKind::Glue) => {
            // Requests carry the workers' AWS credentials: plain http to this machine
            // only (a test server, a local proxy).
            let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
                .iter()
                .any(|p| {
                    u.strip_prefix(p)
                        .is_some_and(|r| r.is_empty() || r.starts_with([':', '/']))
                });
            if !(u.starts_with("https://") || loopback) {
                c.error(
                    "uri",
                    "expected Glue's https:// endpoint (http:// to this machine only; leave it out for the region's own)",
                );
            }
            Some(u)
        }
        (None, IcebergCatalogKind::Glue) => Some(String::new()),
    };
    let (mut region, mut catalog_id) = (None, None);
    if kind == IcebergCatalogKind::Glue {
        // Submit checks the table and a worker anywhere commits to it: one region for
        // both, from the spec, not from each process's environment.
        region = c.opt_str("region");
        match region.as_deref() {
            None => c.error(
                "region",
                "required for a Glue catalog (submit and every worker use the same one), e.g. us-east-1",
            ),
            Some(r) if !is_aws_region(r) => c.error(
                "region",
                format!("{r:?} is not an AWS region name (e.g. us-east-1)"),
            ),
            Some(_) => {}
        }
        catalog_id = c.opt_str("catalog_id");
        if let Some(id) = catalog_id.as_deref()
            && !(id.len() == 12 && id.bytes().all(|b| b.is_ascii_digit()))
        {
            c.error(
                "catalog_id",
                "expected the 12-digit AWS account id of the Data Catalog (leave it out for the caller's account)",
            );
        }
        for k in ["name", "warehouse", "properties"] {
            if c.has(k) {
                c.error(
                    k,
                    "not used by a Glue catalog (the table's location is output.uri)",
                );
            }
        }
        // Engines that read the table through Glue (Athena, EMR, Spark) read its
        // files from S3, not from one machine's disk.
        if uri.is_some_and(|u| !u.starts_with("s3://")) {
            c.error(
                "type",
                "a Glue table's location is read by other engines: output.uri must be s3://",
            );
        }
    } else {
        for k in ["region", "catalog_id"] {
            if c.has(k) {
                c.error(k, "only with catalog type glue");
            }
        }
    }
    // A SQLite file is one machine's (or one shared filesystem's): with an output on
    // S3, finalize may run anywhere and would commit to a file of its own.
    if kind == IcebergCatalogKind::Sql && uri.is_some() && local.is_none() {
        c.error(
            "type",
            "a SQLite catalog needs a local output (workers sharing its filesystem); with an object-store output use a REST catalog",
        );
    }
    if o.opt_bool("overwrite") == Some(true) {
        o.error(
            "overwrite",
            "an Iceberg table is appended to, never overwritten: give each job an output.uri of its own (the table keeps its location)",
        );
    }
    let name = c.opt_str("name").unwrap_or_else(|| "mdf".into());
    let warehouse = c.opt_str("warehouse");
    let mut properties = std::collections::BTreeMap::new();
    if let Some(p) = c.raw("properties") {
        let po = Obj::new(Some(p), &c.field_path("properties"), sink);
        for k in po.keys() {
            // The spec is stored with the job: credentials come from the environment.
            if ["token", "credential", "password", "secret"]
                .iter()
                .any(|s| k.to_ascii_lowercase().contains(s))
            {
                po.error(
                    &k,
                    "a secret: set MDF_ICEBERG_TOKEN or MDF_ICEBERG_CREDENTIAL in the workers' environment instead (the spec is stored with the job)",
                );
                continue;
            }
            if let Some(v) = po.opt_str(&k) {
                properties.insert(k, v);
            }
        }
        po.finish();
    }
    c.finish();
    let ident = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
    };
    let namespace: Vec<String> = i
        .opt_str("namespace")
        .unwrap_or_else(|| "default".into())
        .split('.')
        .map(str::to_string)
        .collect();
    if !namespace.iter().all(|n| ident(n)) {
        i.error(
            "namespace",
            "expected names of letters, digits, '_' and '-', dot-separated",
        );
    }
    let table = i.opt_str("table").unwrap_or_default();
    if !ident(&table) {
        i.error(
            "table",
            "required: the table's name (letters, digits, '_' and '-')",
        );
    }
    // Glue keeps names in lower case (a mixed-case name would be found under another
    // spelling) and has one level of databases; Athena reads `[a-z0-9_]` names.
    if kind == IcebergCatalogKind::Glue {
        let glue = |s: &str| {
            s.chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_')
        };
        if namespace.len() != 1 || !glue(&namespace[0]) {
            i.error(
                "namespace",
                "a Glue database: one name of lower-case letters, digits and '_'",
            );
        }
        if !glue(&table) {
            i.error(
                "table",
                "a Glue table's name is lower-case letters, digits and '_'",
            );
        }
    }
    i.finish();
    Some(IcebergSpec {
        catalog: kind,
        uri: curi?,
        name,
        warehouse,
        namespace,
        table,
        properties,
        region,
        catalog_id,
    })
}

/// `output.jsonl`, for the JSON Lines format only. Its `text` and `created` columns
/// are checked against the output schema when the job is planned.
fn build_jsonl(o: &Obj, format: OutputFormat) -> Option<JsonlSpec> {
    if format != OutputFormat::Jsonl {
        if o.has("jsonl") {
            o.error("jsonl", "only with output.format jsonl");
        }
        return None;
    }
    let j = o.obj("jsonl");
    let compression = match j.opt_str("compression").as_deref() {
        None | Some("zstd") => JsonlCompression::Zstd,
        Some("gzip") => JsonlCompression::Gzip,
        Some("none") => JsonlCompression::None,
        Some(c) => {
            j.error(
                "compression",
                format!("unknown compression {c:?}, expected one of: zstd, gzip, none"),
            );
            JsonlCompression::Zstd
        }
    };
    let layout = match j.opt_str("layout").as_deref() {
        None | Some("records") => JsonlLayout::Records,
        Some("dolma") => JsonlLayout::Dolma,
        Some(l) => {
            j.error(
                "layout",
                format!("unknown layout {l:?}, expected records or dolma"),
            );
            JsonlLayout::Records
        }
    };
    let spec = JsonlSpec {
        compression,
        layout,
        text: j.opt_str("text").unwrap_or_else(|| "text".into()),
        source: j.opt_str("source"),
        created: j.opt_str("created"),
        zstd_level: 3,
    };
    j.finish();
    Some(spec)
}

/// `output.tokens`, for the token shard formats only.
fn build_tokens(o: &Obj, format: OutputFormat, sink: &Sink) -> Option<TokenShards> {
    let shards = matches!(format, OutputFormat::Megatron | OutputFormat::Tokens);
    if !shards {
        if o.has("tokens") {
            sink.error(
                &o.field_path("tokens"),
                "only with output.format megatron or tokens",
            );
        }
        return None;
    }
    let t = o.obj("tokens");
    let column = t
        .opt_str("column")
        .unwrap_or_else(|| "token_ids".to_string());
    // Megatron's readers know uint16 and int32 for token ids (its optimal_dtype);
    // a plain shard holds any 16- or 32-bit unsigned id.
    let (allowed, default): (&[TokenDtype], TokenDtype) = if format == OutputFormat::Megatron {
        (&[TokenDtype::Uint16, TokenDtype::Int32], TokenDtype::Int32)
    } else {
        (
            &[TokenDtype::Uint16, TokenDtype::Uint32],
            TokenDtype::Uint32,
        )
    };
    let dtype = match t.opt_str("dtype") {
        None => default,
        Some(d) => match allowed.iter().find(|a| a.name() == d) {
            Some(a) => *a,
            None => {
                let names: Vec<&str> = allowed.iter().map(|a| a.name()).collect();
                t.error(
                    "dtype",
                    format!(
                        "{d:?} is not a {} token type, expected one of: {}",
                        format.name(),
                        names.join(", ")
                    ),
                );
                default
            }
        },
    };
    let eod = t.opt_u64("eod").and_then(|e| match u32::try_from(e) {
        Ok(e) if e <= dtype.max_id() => Some(e),
        _ => {
            t.error("eod", format!("{e} does not fit {}", dtype.name()));
            None
        }
    });
    let shuffle_seed = t.opt_u64("shuffle_seed");
    t.finish();
    Some(TokenShards {
        column,
        dtype,
        eod,
        shuffle_seed,
    })
}

fn build_job(o: &Obj, stages: &[StageSpec], sink: &Sink) -> JobSettings {
    let task_bytes = o
        .opt_bytes_nonzero("task_bytes")
        .unwrap_or(128 << 20)
        .max(1);
    let max_files_per_task = o.u64_in("max_files_per_task", 1000, 1, 1_000_000) as usize;
    let lease_ttl_secs = o.u64_in("lease_ttl_secs", 60, 1, 86_400);
    let heartbeat_secs = o.u64_in("heartbeat_secs", (lease_ttl_secs / 3).max(1), 1, 86_400);
    if heartbeat_secs * 2 > lease_ttl_secs && lease_ttl_secs > 1 {
        sink.error(
            &o.field_path("heartbeat_secs"),
            format!(
                "must be at most half of job.lease_ttl_secs ({lease_ttl_secs}), found {heartbeat_secs}"
            ),
        );
    }
    let max_attempts = o.u64_in("max_attempts", 3, 1, 1000) as u32;
    let max_lost_leases = o.u64_in("max_lost_leases", 20, 1, 100_000) as u32;
    let mut lease_caps = BTreeMap::new();
    let caps = o.obj("lease_caps");
    let phase_count = job_phase_count(stages);
    for k in caps.keys() {
        let valid = k == "finalize"
            || (k.len() == 3
                && k.starts_with('p')
                && k[1..].parse::<usize>().is_ok_and(|n| n < phase_count));
        let n = caps.u64_in(&k, 1, 1, 100_000) as u32;
        if valid {
            lease_caps.insert(k, n);
        } else {
            sink.error(
                &caps.field_path(&k),
                format!(
                    "unknown phase, this spec has phases p00..p{:02}",
                    phase_count - 1
                ),
            );
        }
    }
    caps.finish();
    let max_unconsumed_tasks = o.opt_u64("max_unconsumed_tasks");
    let shard_tasks = o.u64_in("shard_tasks", 1000, 1, 1_000_000);
    let batch_rows = o.u64_in("batch_rows", 8192, 1, 1 << 22) as usize;
    // 8 MiB: a batch's buffers (the page column, grown by doubling) then stay under
    // glibc's mmap threshold (at most 32 MiB), so freed batches are reused from the
    // heap; at 32 MiB every batch was fresh mmapped memory, and its page faults were
    // a tenth of the text pipeline's CPU (docs/PERFORMANCE.md).
    let batch_bytes = o.opt_bytes_nonzero("batch_bytes").unwrap_or(8 << 20).max(1) as usize;
    let channel_batches = o.u64_in("channel_batches", 4, 1, 1024) as usize;
    let poll_millis = o.u64_in("poll_millis", 500, 10, 600_000);
    let retry_attempts = o.u64_in("retry_attempts", 8, 1, 100) as u32;
    let retry_base_millis = o.u64_in("retry_base_millis", 25, 1, 60_000);
    let speculation = build_speculation(o);
    o.finish();
    JobSettings {
        task_bytes,
        max_files_per_task,
        lease_ttl_secs,
        heartbeat_secs,
        max_attempts,
        max_lost_leases,
        lease_caps,
        max_unconsumed_tasks,
        shard_tasks,
        batch_rows,
        batch_bytes,
        channel_batches,
        poll_millis,
        retry_attempts,
        retry_base_millis,
        speculation,
    }
}

/// `job.speculation`: absent or `false` → off; `true` or a map → on (the map's fields
/// override the defaults).
fn build_speculation(o: &Obj) -> Option<Speculation> {
    match o.raw("speculation") {
        None | Some(serde_json::Value::Bool(false)) => return None,
        Some(serde_json::Value::Bool(true)) => {
            return Some(Speculation {
                quantile: 0.9,
                factor: 3.0,
                min_secs: 60.0,
                max_share: 0.1,
            });
        }
        _ => {}
    }
    let s = o.obj("speculation");
    let num = |key: &str, default: f64, ok: fn(f64) -> bool, what: &str| {
        let v = s.opt_f64(key).unwrap_or(default);
        if !ok(v) {
            s.error(key, format!("must be {what}, found {v}"));
        }
        v
    };
    let out = Speculation {
        quantile: num("quantile", 0.9, |v| v > 0.0 && v <= 1.0, "in (0, 1]"),
        factor: num(
            "factor",
            3.0,
            |v| (1.0..=1000.0).contains(&v),
            "between 1 and 1000",
        ),
        min_secs: num(
            "min_secs",
            60.0,
            |v| (1.0..=86_400.0).contains(&v),
            "between 1 and 86400",
        ),
        max_share: num("max_share", 0.1, |v| v > 0.0 && v <= 1.0, "in (0, 1]"),
    };
    s.finish();
    Some(out)
}

fn build_s3(o: &Obj) -> S3Settings {
    let s = o.obj("s3");
    let out = S3Settings {
        endpoint: s.opt_str("endpoint"),
        region: s.opt_str("region"),
        anonymous_buckets: s
            .opt_str_list("anonymous_buckets")
            .unwrap_or_else(|| vec!["commoncrawl".to_string()]),
        allow_http: s.opt_bool("allow_http"),
        max_concurrent_requests: s.u64_in("max_concurrent_requests", 64, 1, 4096) as usize,
    };
    s.finish();
    o.finish();
    out
}
