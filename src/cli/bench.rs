//! `mdf bench`: the flags of each benchmark; the benchmarks themselves are the
//! library's [`crate::bench`], whose reports print as markdown tables.
use crate::bench::{self, DedupBench, ProtocolBench};
use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum Bench {
    /// Requests per task and protocol overhead on the local store.
    Protocol {
        #[arg(long, default_value_t = 2000)]
        tasks: usize,
        #[arg(long, default_value_t = 16)]
        workers: usize,
        #[arg(long, default_value_t = 100)]
        records_per_task: usize,
        /// Scratch directory (default: a new directory under the system temp dir).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
    /// The fleet simulator (docs/SCALE.md): mdf's real submit, workers, leases, commits
    /// and finalize against a simulated S3 (latency, per-prefix rate limits with 503
    /// SlowDown, LIST pages, prices), in virtual time; task work is simulated.
    Fleet {
        #[arg(long, default_value_t = 100)]
        workers: usize,
        #[arg(long, default_value_t = 2000)]
        tasks: usize,
        /// Median seconds of one task's work.
        #[arg(long, default_value_t = 60.0)]
        work_secs: f64,
        /// Log-normal σ of the work across tasks.
        #[arg(long, default_value_t = 0.3)]
        work_sigma: f64,
        #[arg(long, default_value_t = 64 << 20)]
        output_bytes: u64,
        /// Workers start evenly over this many seconds.
        #[arg(long, default_value_t = 60.0)]
        ramp_secs: f64,
        /// Workers killed without notice at random times, each replaced.
        #[arg(long, default_value_t = 0)]
        kills: usize,
        /// Extra `job:` settings, e.g. "poll_millis: 5000, lease_ttl_secs: 120".
        #[arg(long, default_value = "")]
        job: String,
        /// A partition (rate-limited together) is a key's first N path segments.
        #[arg(long, default_value_t = 4)]
        prefix_depth: usize,
        /// Requests per second per partition: PUT/COPY/POST/DELETE, GET/HEAD/LIST.
        #[arg(long, default_value_t = 3500.0)]
        write_rate: f64,
        #[arg(long, default_value_t = 5500.0)]
        read_rate: f64,
        /// Multiplies every median request latency.
        #[arg(long, default_value_t = 1.0)]
        latency_scale: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Language identification accuracy and speed on labelled sentences
    /// (`<iso639-1>.txt.gz`, one sentence a line, e.g. ../shared/data/langid/lingua-testdata-sentences).
    Langid {
        #[arg(long)]
        data: std::path::PathBuf,
        /// Sentences per language.
        #[arg(long, default_value_t = 1000)]
        per_language: usize,
        /// Also write each text's label, answer and evidence (margin, n-grams, known
        /// share) as JSON lines, for scripts/langid-calibrate.py.
        #[arg(long)]
        dump: Option<std::path::PathBuf>,
        /// With --dump: labelled texts as JSON lines {"id", "lang", "text"} (real
        /// pages) dumped too.
        #[arg(long, requires = "dump")]
        texts: Option<std::path::PathBuf>,
    },
    /// Main-text extraction quality (snippet precision/recall/F1) and speed on a
    /// labelled set (../shared/data/extraction-dev: evaldata.json + html/*.gz).
    Extract {
        #[arg(long, required_unless_present_any = ["pages", "sources"])]
        dev: Option<std::path::PathBuf>,
        /// Shingle and snippet F1 per source and per half (tuning / held-out) on a
        /// folder of `<source>/ground-truth.json` + `<source>/html/<id>.html.gz`
        /// (../shared/data/extraction-wceb).
        #[arg(long, conflicts_with_all = ["dev", "pages"])]
        sources: Option<std::path::PathBuf>,
        /// With --sources: each page's text and declared metadata as JSON lines
        /// {source, id, half, text, author, date, site_name, canonical_url, description}.
        #[arg(long, requires = "sources")]
        dump: Option<std::path::PathBuf>,
        /// Score only the first N pages of the set (--dev).
        #[arg(long, default_value_t = usize::MAX, conflicts_with = "sources")]
        limit: usize,
        /// Speed only, on unlabelled pages: every `*.html` / `*.htm` file under this
        /// folder (e.g. Debian's python3.11-doc), fastest of three passes.
        #[arg(long, conflicts_with = "dev")]
        pages: Option<std::path::PathBuf>,
    },
    /// fastText prediction speed on one core (scripts/bench-fasttext.py runs it beside
    /// the fastText C++ library), and with --langid, a language-id model's accuracy
    /// and speed beside the built-in identifier.
    Fasttext {
        /// A supervised `.bin` / `.ftz` model.
        #[arg(long)]
        model: std::path::PathBuf,
        /// One text a line.
        #[arg(long)]
        lines: std::path::PathBuf,
        #[arg(long, default_value_t = 1)]
        k: usize,
        /// Labelled sentences (`<iso639-1>.txt.gz`, e.g. ../shared/data/langid/lingua-testdata-sentences).
        #[arg(long)]
        langid: Option<std::path::PathBuf>,
        /// Sentences per language with --langid.
        #[arg(long, default_value_t = 1000)]
        per_language: usize,
    },
    /// URL filter throughput on one core with a real block list loaded.
    UrlFilter {
        /// A UT1 archive (e.g. ../shared/data/blocklists/datatrove-0.10.1/url_filterblacklistsv0_3_0.tar.gz).
        #[arg(long)]
        blocklist: std::path::PathBuf,
        /// Word lists directory with banned_words.txt, soft_banned_words.txt, banned_subwords.txt.
        #[arg(long)]
        words: Option<std::path::PathBuf>,
        #[arg(long, default_value_t = 2_000_000)]
        urls: usize,
    },
    /// MinHash signatures + band keys on one core (datatrove's defaults: 5-grams,
    /// 14 × 8) over the `text` field of a JSONL file; compare with
    /// scripts/bench-minhash.py, which times datatrove on the same file.
    Minhash {
        #[arg(long)]
        jsonl: std::path::PathBuf,
    },
    /// Semantic dedup's kernels on one core (docs/SEMANTIC.md): the similarity sgemm
    /// in GFLOP/s, vectors assigned to centroids per second, all pairs of a cluster,
    /// and a spherical k-means, on random unit vectors.
    Semantic {
        #[arg(long, default_value_t = 512)]
        dim: usize,
        #[arg(long, default_value_t = 100_000)]
        vectors: usize,
        #[arg(long, default_value_t = 1000)]
        centroids: usize,
        #[arg(long, default_value_t = 10_000)]
        cluster: usize,
    },
    /// Image kernels on one core over a folder of images (scripts/bench-images.py
    /// --make): header probe, full decode, reduced JPEG decode, quality, hashes.
    /// MDF_BENCH_ONLY=TEXT times only the timed kernels whose label contains TEXT
    /// (e.g. "min side 64"), for profiling one of them.
    Images {
        #[arg(long)]
        dir: std::path::PathBuf,
    },
    /// The exact-dedup shuffle on one core, without the store: pass 1 (partition and
    /// encode each task's keys), pass 2 (every partition's sections merged, sorted,
    /// decided; spilling past --memory), apply (each task's decisions looked up).
    Dedup {
        #[arg(long, default_value_t = 20_000_000)]
        keys: u64,
        /// Share of records that are copies of another.
        #[arg(long, default_value_t = 0.3)]
        dup_ratio: f64,
        #[arg(long, default_value_t = 64)]
        partitions: u32,
        #[arg(long, default_value_t = 200_000)]
        keys_per_task: u64,
        /// Reduce memory budget, bytes.
        #[arg(long, default_value_t = 256 << 20)]
        memory: u64,
    },
}

pub fn run(b: Bench) -> anyhow::Result<ExitCode> {
    let report: Box<dyn std::fmt::Display> = match b {
        Bench::Protocol {
            tasks,
            workers,
            records_per_task,
            dir,
        } => {
            let dir = dir.unwrap_or_else(|| {
                std::env::temp_dir().join(format!("mdf-bench-{}", std::process::id()))
            });
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let b = ProtocolBench {
                tasks,
                workers,
                records_per_task,
                dir,
            };
            Box::new(rt.block_on(bench::protocol(&b))?)
        }
        Bench::Extract {
            pages: Some(dir), ..
        } => Box::new(bench::extract_speed(&dir)?),
        Bench::Extract {
            sources: Some(dir),
            dump,
            ..
        } => Box::new(bench::extract_sources(&dir, dump.as_deref())?),
        Bench::Extract { dev, limit, .. } => {
            let dev = dev.ok_or_else(|| anyhow::anyhow!("--dev or --pages"))?;
            Box::new(bench::extract_quality(&dev, limit)?)
        }
        Bench::Fleet {
            workers,
            tasks,
            work_secs,
            work_sigma,
            output_bytes,
            ramp_secs,
            kills,
            job,
            prefix_depth,
            write_rate,
            read_rate,
            latency_scale,
            seed,
        } => {
            let d = crate::store::sim::SimConfig::default();
            let l = latency_scale;
            Box::new(bench::fleet(&bench::FleetBench {
                workers,
                tasks,
                work_secs,
                work_sigma,
                output_bytes,
                ramp_secs,
                kills,
                job,
                store: crate::store::sim::SimConfig {
                    get_ms: d.get_ms * l,
                    head_ms: d.head_ms * l,
                    put_ms: d.put_ms * l,
                    list_ms: d.list_ms * l,
                    copy_ms: d.copy_ms * l,
                    delete_ms: d.delete_ms * l,
                    write_rate,
                    read_rate,
                    prefix_depth,
                    seed,
                    ..d
                },
            })?)
        }
        Bench::Langid {
            data,
            per_language,
            dump,
            texts,
        } => {
            if let Some(out) = dump {
                bench::langid_dump(&data, per_language, texts.as_deref(), &out)?;
            }
            Box::new(bench::langid_accuracy(&data, per_language)?)
        }
        Bench::Fasttext {
            model,
            lines,
            k,
            langid,
            per_language,
        } => Box::new(bench::fasttext(
            &model,
            &lines,
            k,
            langid.as_deref(),
            per_language,
        )?),
        Bench::Minhash { jsonl } => Box::new(bench::minhash(&jsonl)?),
        Bench::Images { dir } => Box::new(bench::images(&dir)?),
        Bench::Semantic {
            dim,
            vectors,
            centroids,
            cluster,
        } => Box::new(bench::semantic::semantic(dim, vectors, centroids, cluster)),
        Bench::Dedup {
            keys,
            dup_ratio,
            partitions,
            keys_per_task,
            memory,
        } => Box::new(bench::dedup_shuffle(&DedupBench {
            keys,
            dup_ratio,
            partitions,
            keys_per_task,
            memory,
        })?),
        Bench::UrlFilter {
            blocklist,
            words,
            urls,
        } => Box::new(bench::url_filter(&blocklist, words.as_deref(), urls)?),
    };
    print!("{report}");
    Ok(ExitCode::SUCCESS)
}
