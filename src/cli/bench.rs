//! `mdf bench protocol`: measures the job protocol on the local store — object-store
//! requests per task, and the wall-time overhead of leases, heartbeats, commits and
//! publishing against running the very same task pipelines in one process without
//! them. Prints a table; numbers go to docs/PERFORMANCE.md.
use crate::clock::{Entropy, SystemClock};
use crate::coordinator::{load_job, status, submit};
use crate::protocol::io::Retry;
use crate::spec::{Overrides, Spec};
use crate::store::{Registry, RequestCounts, Uri};
use crate::worker::pipeline::{self, PipelineSpec};
use crate::worker::{self, WorkerOptions};
use clap::Subcommand;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

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
    /// Language identification accuracy and speed on labelled sentences
    /// (`<iso639-1>.txt.gz`, one sentence a line, e.g. ../shared/data/langid/lingua-testdata-sentences).
    Langid {
        #[arg(long)]
        data: std::path::PathBuf,
        /// Sentences per language.
        #[arg(long, default_value_t = 1000)]
        per_language: usize,
    },
    /// Main-text extraction quality (snippet precision/recall/F1) and speed on a
    /// labelled set (../shared/data/extraction-dev: evaldata.json + html/*.gz).
    Extract {
        #[arg(long, required_unless_present = "pages")]
        dev: Option<std::path::PathBuf>,
        /// Score only the first N pages of the set.
        #[arg(long, default_value_t = usize::MAX)]
        limit: usize,
        /// Speed only, on unlabelled pages: every `*.html` / `*.htm` file under this
        /// folder (e.g. Debian's python3.11-doc), fastest of three passes.
        #[arg(long, conflicts_with = "dev")]
        pages: Option<std::path::PathBuf>,
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
    match b {
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
            rt.block_on(protocol(&dir, tasks, workers, records_per_task))?;
            Ok(ExitCode::SUCCESS)
        }
        Bench::Extract {
            pages: Some(dir), ..
        } => {
            let (n, bytes, secs) = extract_speed(&dir)?;
            println!(
                "mdf bench extract: {n} pages, {:.1} MB of HTML, one core, fastest of 3",
                bytes as f64 / 1e6
            );
            println!();
            println!("| measure | value |");
            println!("|---|---|");
            println!("| pages/s (extraction only) | {:.0} |", n as f64 / secs);
            println!("| MB/s of HTML | {:.1} |", bytes as f64 / 1e6 / secs);
            Ok(ExitCode::SUCCESS)
        }
        Bench::Extract { dev, limit, .. } => {
            let dev = dev.ok_or_else(|| anyhow::anyhow!("--dev or --pages"))?;
            let r = extract_quality(&dev, limit)?;
            println!(
                "mdf bench extract: {} pages, {:.1} MB of HTML, one core",
                r.pages,
                r.bytes as f64 / 1e6
            );
            println!();
            println!("| measure | value |");
            println!("|---|---|");
            println!("| precision | {:.3} |", r.precision);
            println!("| recall | {:.3} |", r.recall);
            println!("| **F1** | **{:.3}** |", r.f1);
            println!(
                "| pages/s (extraction only) | {:.0} |",
                r.pages as f64 / r.secs
            );
            println!("| MB/s of HTML | {:.1} |", r.bytes as f64 / 1e6 / r.secs);
            Ok(ExitCode::SUCCESS)
        }
        Bench::Langid { data, per_language } => {
            let r = langid_accuracy(&data, per_language)?;
            println!(
                "mdf bench langid: {} languages known to the detector, {} sentences",
                r.per_language.len(),
                r.total
            );
            println!();
            println!("| language | accuracy |");
            println!("|---|---|");
            for (l, a) in &r.per_language {
                println!("| {l} | {a:.3} |");
            }
            println!("| **all (macro average)** | **{:.3}** |", r.macro_accuracy);
            println!("| sentences/s, one core | {:.0} |", r.per_sec);
            if !r.unsupported.is_empty() {
                println!(
                    "\nnot supported by the detector (not scored): {}",
                    r.unsupported.join(", ")
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Bench::Minhash { jsonl } => {
            minhash(&jsonl)?;
            Ok(ExitCode::SUCCESS)
        }
        Bench::Images { dir } => {
            images(&dir)?;
            Ok(ExitCode::SUCCESS)
        }
        Bench::Dedup {
            keys,
            dup_ratio,
            partitions,
            keys_per_task,
            memory,
        } => {
            dedup_shuffle(keys, dup_ratio, partitions, keys_per_task, memory)?;
            Ok(ExitCode::SUCCESS)
        }
        Bench::UrlFilter {
            blocklist,
            words,
            urls,
        } => {
            url_filter(&blocklist, words.as_deref(), urls)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn url_filter(
    blocklist: &std::path::Path,
    words: Option<&std::path::Path>,
    n: usize,
) -> anyhow::Result<()> {
    use crate::kernels::url::{ListKind, UrlBlocklist, list_lines};
    let bytes = std::fs::read(blocklist)?;
    let t0 = Instant::now();
    let mut b = UrlBlocklist::new(2);
    let mut sample = Vec::new();
    let mut i = 0usize;
    list_lines(&bytes, ListKind::Domains, &[], |d| {
        b.add_domain(d);
        if i.is_multiple_of(997) {
            sample.push(d.to_string());
        }
        i += 1;
    })
    .map_err(anyhow::Error::msg)?;
    list_lines(&bytes, ListKind::Urls, &[], |u| b.add_url(u)).map_err(anyhow::Error::msg)?;
    if let Some(w) = words {
        let read = |f: &str| std::fs::read(w.join(f));
        list_lines(&read("banned_words.txt")?, ListKind::Domains, &[], |l| {
            b.add_banned_word(l)
        })
        .map_err(anyhow::Error::msg)?;
        list_lines(
            &read("soft_banned_words.txt")?,
            ListKind::Domains,
            &[],
            |l| b.add_soft_word(l),
        )
        .map_err(anyhow::Error::msg)?;
        let text = String::from_utf8_lossy(&read("banned_subwords.txt")?).into_owned();
        b.set_subwords(text.lines()).map_err(anyhow::Error::msg)?;
    }
    b.seal();
    let t_load = t0.elapsed();
    // 90% ordinary URLs, 10% on listed domains (with a subdomain, so the walk runs).
    let urls: Vec<String> = (0..n)
        .map(|k| {
            if k % 10 == 0 {
                format!("https://www.{}/page/{k}.html", sample[k % sample.len()])
            } else {
                format!(
                    "https://blog{}.example{}.com/2024/05/article-about-topic-{k}?ref=home",
                    k % 977,
                    k % 31
                )
            }
        })
        .collect();
    let refs: Vec<Option<&str>> = urls.iter().map(|u| Some(u.as_str())).collect();
    let t1 = Instant::now();
    let mut blocked = 0usize;
    for chunk in refs.chunks(4096) {
        blocked += b.check_serial(chunk).iter().filter(|v| v.is_some()).count();
    }
    let secs = t1.elapsed().as_secs_f64();
    println!(
        "mdf bench url-filter: {} domains loaded, one core",
        b.domain_count()
    );
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| list load (decompress + hash) | {:.2} s |",
        t_load.as_secs_f64()
    );
    println!("| URLs checked | {n} ({blocked} blocked) |");
    println!(
        "| word lists | {} |",
        if words.is_some() {
            "banned, soft, subwords"
        } else {
            "none"
        }
    );
    println!(
        "| throughput, one core | {:.2} M URLs/s |",
        n as f64 / secs / 1e6
    );
    Ok(())
}

async fn protocol(
    dir: &std::path::Path,
    tasks: usize,
    workers: usize,
    per_task: usize,
) -> anyhow::Result<()> {
    let input = dir.join("in");
    std::fs::create_dir_all(&input)?;
    for t in 0..tasks {
        let mut s = String::new();
        for r in 0..per_task {
            s += &format!(
                "{{\"text\": \"document {r} of file {t} with a few words in it\", \"n\": {r}}}\n"
            );
        }
        std::fs::write(input.join(format!("{t:06}.jsonl")), s)?;
    }
    let text = format!(
        "name: bench\ninput: {{uris: [\"{}/*.jsonl\"]}}\nstages: [{{op: text_length}}]\noutput: {{uri: \"{}\"}}\njob: {{max_files_per_task: 1, poll_millis: 200}}\n",
        input.display(),
        dir.join("out").display()
    );
    let spec = Spec::from_text(
        &text,
        "bench",
        &Overrides::default(),
        &|_| None,
        &crate::ops::Catalog,
    )?;
    let reg = Registry::new(spec.s3.clone());
    let entropy = Entropy::from_os();
    let retry = Retry::new(entropy.clone());

    // (a) The full protocol: submit, N workers leasing and committing.
    let t0 = Instant::now();
    let opts = submit::SubmitOptions {
        job_root: dir.join("jobs").display().to_string(),
        job_id: None,
        reuse: None,
    };
    let sub = submit::submit(&spec, &reg, &opts, &SystemClock, &entropy).await?;
    let t_submit = t0.elapsed();
    let mut hs = Vec::new();
    for i in 0..workers {
        let reg = reg.clone();
        let o = WorkerOptions {
            job_uri: sub.job_uri.clone(),
            max_tasks: None,
            worker_id: Some(format!("bench-{i}")),
            gpu: false,
            cpu_work: false,
            clock: Arc::new(SystemClock),
            entropy: Entropy::from_os(),
            shutdown: Default::default(),
            give_up_after: None,
        };
        hs.push(tokio::spawn(async move { worker::run(&reg, o).await }));
    }
    for h in hs {
        h.await??;
    }
    let t_protocol = t0.elapsed();
    let st = status::status(&reg, &sub.job_uri, &SystemClock, &retry).await?;
    anyhow::ensure!(st.succeeded, "the benchmark job did not succeed");

    // (b) The same task pipelines, same concurrency, no leases/commits/publishing.
    let job = load_job(&reg, &sub.job_uri, &retry).await?;
    let stages = worker::bind_stages(&job, &crate::ops::build_stages(&job.spec)?)
        .map_err(anyhow::Error::msg)?;
    let plan = crate::coordinator::plan::plan(&spec, &reg).await?;
    let counts = Arc::new(RequestCounts::default());
    let direct_reg = reg.counting_into(counts.clone());
    let direct_out = Uri::parse(&dir.join("direct").display().to_string())?;
    let t1 = Instant::now();
    let phase = job.manifest.phases[0].clone();
    let sem = Arc::new(tokio::sync::Semaphore::new(workers));
    let mut hs = Vec::new();
    for t in plan.tasks[0].iter().cloned() {
        let permit = sem.clone().acquire_owned().await?;
        let p = PipelineSpec {
            registry: direct_reg.clone(),
            handle: tokio::runtime::Handle::current(),
            inputs: t.inputs.clone(),
            input_schema: Arc::new(phase.input_schema.clone()),
            assign_ids: true,
            download: spec.input.download.clone(),
            stages: stages[0].clone(),
            output_schema: Arc::new(phase.output_schema.clone()),
            out_dir: direct_out.child(&t.task_id),
            props: crate::io::write::parquet::properties(&spec.output),
            target_file_bytes: spec.output.target_file_bytes,
            writer: &crate::io::write::parquet::Parquet,
            batch_rows: spec.job.batch_rows,
            batch_bytes: spec.job.batch_bytes,
            channel_batches: spec.job.channel_batches,
            max_record_bytes: spec.input.max_record_bytes as usize,
            keep_rejected_records: true,
            cancel: Default::default(),
            keys: None,
        };
        hs.push(tokio::task::spawn_blocking(move || {
            let r = pipeline::run(p);
            drop(permit);
            r
        }));
    }
    for h in hs {
        h.await??;
    }
    let t_direct = t1.elapsed();
    let direct = counts.snapshot();

    let n = st.tasks_total as f64;
    let p0 = &st.phases[0];
    let fin = &st.phases[1];
    println!(
        "mdf bench protocol: {tasks} tasks × {per_task} records, {workers} workers, local store"
    );
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!("| tasks (incl. finalize) | {} |", st.tasks_total);
    println!("| requests, all | {} |", st.requests_total);
    println!(
        "| requests per task, amortised | {:.2} |",
        st.requests_total as f64 / n
    );
    println!(
        "| in p00 tasks (get/put/list/head/copy/delete) | {}/{}/{}/{}/{}/{} = {:.2} per task |",
        p0.requests.get,
        p0.requests.put,
        p0.requests.list,
        p0.requests.head,
        p0.requests.copy,
        p0.requests.delete,
        p0.requests.total() as f64 / p0.tasks.total.max(1) as f64
    );
    println!("| in the finalize task | {} |", fin.requests.total());
    let w = &st.worker_requests;
    println!(
        "| by workers outside tasks (claims, listings, publishing) get/put/list/head/copy/delete | {}/{}/{}/{}/{}/{} = {:.2} per task |",
        w.get,
        w.put,
        w.list,
        w.head,
        w.copy,
        w.delete,
        w.total() as f64 / n
    );
    println!(
        "| direct pipelines, requests per task (data only) | {:.2} |",
        direct.total() as f64 / tasks as f64
    );
    println!(
        "| submit (plan + {} manifests) | {:.2} s |",
        sub.tasks,
        t_submit.as_secs_f64()
    );
    println!(
        "| full protocol, wall | {:.2} s |",
        t_protocol.as_secs_f64()
    );
    println!(
        "| same pipelines without protocol, wall | {:.2} s |",
        t_direct.as_secs_f64()
    );
    println!(
        "| protocol overhead | {:.2} s ({:.1} ms per task, {:.0}%) |",
        (t_protocol.as_secs_f64() - t_direct.as_secs_f64()),
        (t_protocol.as_secs_f64() - t_direct.as_secs_f64()) * 1000.0 / tasks as f64,
        100.0 * (t_protocol.as_secs_f64() / t_direct.as_secs_f64() - 1.0)
    );
    std::fs::remove_dir_all(dir).ok();
    Ok(())
}

/// Result of a language-id accuracy run.
pub struct LangidReport {
    pub per_language: Vec<(String, f64)>,
    pub macro_accuracy: f64,
    pub total: usize,
    pub per_sec: f64,
    pub unsupported: Vec<String>,
}

/// Accuracy of `kernels::lang::identify` on `<code>.txt.gz` files of labelled sentences.
pub fn langid_accuracy(dir: &std::path::Path, per_language: usize) -> anyhow::Result<LangidReport> {
    use std::io::{BufRead, BufReader};
    let known = crate::kernels::lang::known_codes();
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    files.sort();
    let (mut per, mut unsupported, mut total, mut secs) = (Vec::new(), Vec::new(), 0usize, 0f64);
    for f in files {
        let name = f
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let Some(code) = name.strip_suffix(".txt.gz") else {
            continue;
        };
        if !known.contains(&code) {
            unsupported.push(code.to_string());
            continue;
        }
        let r = BufReader::new(flate2::read::GzDecoder::new(std::fs::File::open(&f)?));
        let lines: Vec<String> = r.lines().take(per_language).collect::<Result<_, _>>()?;
        let t = Instant::now();
        let right = lines
            .iter()
            .filter(|l| crate::kernels::lang::identify(l).map(|x| x.0) == Some(code))
            .count();
        secs += t.elapsed().as_secs_f64();
        total += lines.len();
        per.push((code.to_string(), right as f64 / lines.len().max(1) as f64));
    }
    let macro_accuracy = per.iter().map(|x| x.1).sum::<f64>() / per.len().max(1) as f64;
    Ok(LangidReport {
        per_language: per,
        macro_accuracy,
        total,
        per_sec: total as f64 / secs.max(1e-9),
        unsupported,
    })
}

/// Result of an extraction quality run.
pub struct ExtractReport {
    pub pages: usize,
    pub bytes: usize,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub secs: f64,
}

/// Snippet precision/recall/F1 of `kernels::html::extract` on a trafilatura-style
/// evaluation set: a "with" snippet found is a true positive, missing a false negative;
/// a "without" snippet found is a false positive.
pub fn extract_quality(dev: &std::path::Path, limit: usize) -> anyhow::Result<ExtractReport> {
    use std::io::Read;
    let eval: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dev.join("evaldata.json"))?)?;
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    // MDF_BENCH_MISSES=1: each missed snippet and each boilerplate one kept, for tuning.
    let show = std::env::var_os("MDF_BENCH_MISSES").is_some();
    // MDF_BENCH_DUMP=<dir>: each page's extracted text as <dir>/<file>.txt.
    let dump = std::env::var_os("MDF_BENCH_DUMP").map(std::path::PathBuf::from);
    let (mut tp, mut fp, mut fn_, mut pages, mut bytes, mut secs) =
        (0usize, 0usize, 0usize, 0usize, 0usize, 0f64);
    for (url, e) in eval
        .as_object()
        .ok_or_else(|| anyhow::anyhow!("evaldata.json is not a map"))?
        .iter()
        .take(limit)
    {
        let Some(file) = e["file"].as_str() else {
            continue;
        };
        let path = dev.join("html").join(format!("{file}.gz"));
        let Ok(f) = std::fs::File::open(&path) else {
            continue;
        };
        let mut raw = Vec::new();
        flate2::read::MultiGzDecoder::new(f).read_to_end(&mut raw)?;
        let html = crate::kernels::http::decode_text(&raw, None, Some(url)).text;
        let t = Instant::now();
        let text = crate::kernels::html::extract(&html, std::time::Duration::from_secs(10))
            .map(|x| x.text)
            .unwrap_or_default();
        secs += t.elapsed().as_secs_f64();
        if let Some(d) = &dump {
            std::fs::create_dir_all(d)?;
            std::fs::write(d.join(format!("{file}.txt")), &text)?;
        }
        let text = norm(&text);
        pages += 1;
        bytes += html.len();
        for s in e["with"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str())
        {
            if text.contains(&norm(s)) {
                tp += 1
            } else {
                fn_ += 1;
                if show {
                    eprintln!("MISS {file}: {s}");
                }
            }
        }
        for s in e["without"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str())
        {
            if text.contains(&norm(s)) {
                fp += 1;
                if show {
                    eprintln!("KEPT {file}: {s}");
                }
            }
        }
    }
    let precision = tp as f64 / (tp + fp).max(1) as f64;
    let recall = tp as f64 / (tp + fn_).max(1) as f64;
    Ok(ExtractReport {
        pages,
        bytes,
        precision,
        recall,
        f1: 2.0 * precision * recall / (precision + recall).max(1e-9),
        secs: secs.max(1e-9),
    })
}

/// Extraction speed on every HTML file under `dir`: (pages, bytes, seconds of the
/// fastest of three passes). MDF_BENCH_DUMP=<dir> writes each page's text as
/// `<n>.txt` (files in path order) to compare two builds.
fn extract_speed(dir: &std::path::Path) -> anyhow::Result<(usize, usize, f64)> {
    fn walk(d: &std::path::Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
        for e in std::fs::read_dir(d)? {
            let p = e?.path();
            if p.is_dir() {
                walk(&p, out)?;
            } else if p.extension().is_some_and(|x| x == "html" || x == "htm") {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut paths = Vec::new();
    walk(dir, &mut paths)?;
    paths.sort();
    let docs: Vec<String> = paths
        .iter()
        .map(|p| {
            let raw = std::fs::read(p)?;
            Ok(crate::kernels::http::decode_text(&raw, None, None)
                .text
                .into_owned())
        })
        .collect::<std::io::Result<_>>()?;
    let bytes = docs.iter().map(String::len).sum();
    let budget = std::time::Duration::from_secs(10);
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        for d in &docs {
            std::hint::black_box(crate::kernels::html::extract(d, budget).ok());
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    if let Some(out) = std::env::var_os("MDF_BENCH_DUMP").map(std::path::PathBuf::from) {
        std::fs::create_dir_all(&out)?;
        for (i, d) in docs.iter().enumerate() {
            let x = crate::kernels::html::extract(d, budget).unwrap_or_default();
            let title = x.title.unwrap_or_default();
            std::fs::write(
                out.join(format!("{i}.txt")),
                format!("{title}\n\n{}", x.text),
            )?;
        }
    }
    Ok((docs.len(), bytes, best.max(1e-9)))
}

/// Peak resident memory of this process (VmHWM), in MB.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn dedup_shuffle(
    n: u64,
    dup_ratio: f64,
    partitions: u32,
    per_task: u64,
    memory: u64,
) -> anyhow::Result<()> {
    use crate::dedup::{self as shuffle, Decision, ExternalSort, KeyEntry, Sourced};
    let mut next = crate::kernels::xorshift(0x2545_F491_4F6C_DD1Du64);
    let distinct = ((n as f64) * (1.0 - dup_ratio)).max(1.0) as u64;
    let tasks = n.div_ceil(per_task);
    let dir = crate::dedup::spill_dir();
    // Pass 1: each task's entries partitioned, sorted and encoded.
    let mut objects = Vec::new();
    let t = Instant::now();
    let mut id = 0u128;
    for _ in 0..tasks {
        let m = per_task.min(n - id as u64);
        // Raw entries, as the pipeline appends them.
        let mut raw = Vec::with_capacity(m as usize * <KeyEntry as shuffle::Fixed>::SIZE);
        for _ in 0..m {
            id += 1;
            // Keys drawn from `distinct` values: copies land in any task.
            let k = next() % distinct;
            let e = KeyEntry {
                key: u128::from(k).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835),
                id,
                rank: 0.0,
            };
            shuffle::Fixed::put(&e, &mut raw);
        }
        objects.push(shuffle::encode_keys(
            &raw,
            <KeyEntry as shuffle::Fixed>::SIZE,
            partitions,
        ));
    }
    let pass1 = t.elapsed().as_secs_f64();
    let key_bytes: usize = objects.iter().map(Vec::len).sum();
    // Pass 2: one reduce per partition.
    let t = Instant::now();
    let (mut dups, mut spilled) = (0u64, 0u64);
    let mut decision_objects = Vec::new();
    for r in 0..partitions as u64 {
        let mut sorter = ExternalSort::<Sourced>::new(memory / 2, dir.clone());
        for (ti, o) in objects.iter().enumerate() {
            let sec = shuffle::section_of(o, r).map_err(anyhow::Error::msg)?;
            for e in shuffle::entries::<KeyEntry>(sec).map_err(anyhow::Error::msg)? {
                sorter.push(Sourced { e, task: ti as u32 })?;
            }
        }
        // The reduce task's own code path, from the sorted entries on.
        let (mut f, _, st) =
            shuffle::finish_reduce(sorter, memory, dir.clone(), false, tasks as u32)?;
        dups += st.duplicates;
        spilled += st.spilled_bytes;
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut b)?;
        decision_objects.push(b);
    }
    let pass2 = t.elapsed().as_secs_f64();
    // Apply: each task's decisions from every reducer.
    let t = Instant::now();
    let mut looked_up = 0usize;
    for ti in 0..tasks {
        let mut map = crate::kernels::FastMap::default();
        for o in &decision_objects {
            let sec = shuffle::section_of(o, ti).map_err(anyhow::Error::msg)?;
            for d in shuffle::decode::<Decision>(sec).map_err(anyhow::Error::msg)? {
                map.insert(d.id, d.rep);
            }
        }
        looked_up += map.len();
    }
    let apply = t.elapsed().as_secs_f64();
    let total = pass1 + pass2 + apply;
    println!(
        "mdf bench dedup: {n} keys ({distinct} distinct drawn), {tasks} tasks, {partitions} partitions, one core"
    );
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| keys objects | {:.1} MB ({} bytes/key) |",
        key_bytes as f64 / 1e6,
        <KeyEntry as shuffle::Fixed>::SIZE
    );
    println!(
        "| pass 1 (partition + sort + encode) | {pass1:.2} s, {:.1} M keys/s |",
        n as f64 / pass1 / 1e6
    );
    println!(
        "| pass 2 (merge + sort + decide + encode) | {pass2:.2} s, {:.1} M keys/s |",
        n as f64 / pass2 / 1e6
    );
    println!("| apply (decision lookups built) | {apply:.2} s, {looked_up} decisions |");
    println!(
        "| **both passes, one core** | **{:.1} M keys/s** |",
        n as f64 / total / 1e6
    );
    println!("| duplicates found | {dups} |");
    println!(
        "| spilled to disk | {:.1} MB (reduce memory {} MB) |",
        spilled as f64 / 1e6,
        memory >> 20
    );
    println!("| peak RSS | {:.0} MB |", peak_rss_mb());
    Ok(())
}

fn images(dir: &std::path::Path) -> anyhow::Result<()> {
    use crate::kernels::{image, image_quality, imagehash};
    let mut files: Vec<Vec<u8>> = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    names.sort();
    for p in names {
        files.push(std::fs::read(p)?);
    }
    let n = files.len() as f64;
    let lim = image::Limits::default();
    // The fastest of three passes: this is a shared machine.
    let only = std::env::var("MDF_BENCH_ONLY").ok();
    let time = |label: &str, f: &dyn Fn(&[u8]) -> u64| {
        if only.as_deref().is_some_and(|o| !label.contains(o)) {
            return;
        }
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            let mut acc = 0u64;
            for b in &files {
                acc = acc.wrapping_add(f(b));
            }
            best = best.min(t.elapsed().as_secs_f64());
            std::hint::black_box(acc);
        }
        println!("| {label} | {:.0} µs | {:.0} |", best / n * 1e6, n / best);
    };
    println!(
        "mdf bench images: {} files, {:.0} KiB average, one core",
        files.len(),
        files.iter().map(Vec::len).sum::<usize>() as f64 / n / 1024.0
    );
    println!();
    println!("| kernel | per image | images/s |");
    println!("|---|---|---|");
    time("header probe", &|b| {
        image::probe(b, &lim).map_or(0, |h| h.width as u64)
    });
    time("decode, full size", &|b| {
        image::decode(b, &lim, None).map_or(0, |d| d.rgb.width() as u64)
    });
    time("decode, min side 128 (JPEG DCT scaling)", &|b| {
        image::decode(b, &lim, Some(128)).map_or(0, |d| d.rgb.width() as u64)
    });
    time("decode, min side 64", &|b| {
        image::decode(b, &lim, Some(64)).map_or(0, |d| d.rgb.width() as u64)
    });
    time(
        "decode, min side 32 (1/8: DC only for a ~500 px image)",
        &|b| image::decode(b, &lim, Some(32)).map_or(0, |d| d.rgb.width() as u64),
    );
    let small: Vec<_> = files
        .iter()
        .filter_map(|b| image::decode(b, &lim, Some(128)).ok())
        .collect();
    let t = Instant::now();
    for d in &small {
        let l = imagehash::luma(&d.rgb);
        std::hint::black_box(image_quality::quality(&d.rgb, &l, 8 / d.scale));
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "| quality, at min side 128 | {:.0} µs | {:.0} |",
        s / n * 1e6,
        n / s
    );
    let tiny: Vec<_> = files
        .iter()
        .filter_map(|b| image::decode(b, &lim, Some(64)).ok())
        .collect();
    let t = Instant::now();
    for d in &tiny {
        std::hint::black_box(imagehash::hashes(&d.rgb));
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "| phash + dhash + ahash, at min side 64 | {:.0} µs | {:.0} |",
        s / n * 1e6,
        n / s
    );
    // clip_embed's CPU side per image: decode at the smallest DCT scale keeping the
    // shorter side ≥ 224, then open_clip's bicubic resize, centre crop and mean/std.
    use crate::kernels::vision::{CLIP_MEAN, CLIP_STD, clip_tensor};
    time(
        "CLIP preprocessing: decode (min side 224) + resize + crop + normalise, 224²",
        &|b| {
            image::decode(b, &lim, Some(224)).map_or(0, |d| {
                let mut t = Vec::with_capacity(3 * 224 * 224);
                let (w, h) = d.rgb.dimensions();
                clip_tensor(
                    d.rgb.as_raw(),
                    w as usize,
                    h as usize,
                    224,
                    &CLIP_MEAN,
                    &CLIP_STD,
                    &mut t,
                );
                t.len() as u64
            })
        },
    );
    Ok(())
}

fn minhash(jsonl: &std::path::Path) -> anyhow::Result<()> {
    let texts: Vec<String> = std::fs::read_to_string(jsonl)?
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["text"].as_str().map(str::to_string))
        .collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    let m = crate::kernels::minhash::MinHasher::default_params();
    let t = Instant::now();
    let mut keys = 0usize;
    for x in &texts {
        let sig = m.signature(x);
        keys += m.band_keys(&sig).len();
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "mdf bench minhash: {} docs, {:.1} MB of text, 5-grams, 14 bands x 8 rows, one core",
        texts.len(),
        bytes as f64 / 1e6
    );
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!("| docs/s | {:.0} |", texts.len() as f64 / secs);
    println!("| MB/s of text | {:.1} |", bytes as f64 / secs / 1e6);
    println!("| band keys | {keys} |");
    Ok(())
}
