//! `mdf validate` (a checklist) and `mdf plan` (a dry run: inputs, task split,
//! phases, requests and memory); neither writes anything.
use super::{SpecArgs, runtime};
use crate::coordinator::estimate;
use crate::coordinator::plan::PlanError;
use crate::spec::Spec;
use crate::store::Registry;
use std::process::ExitCode;

pub fn validate(a: &SpecArgs, offline: bool, job_root: &str) -> anyhow::Result<ExitCode> {
    println!("checking {}", a.spec.display());
    let spec = match Spec::load(&a.spec, &a.overrides(), &crate::ops::Catalog) {
        Ok(s) => s,
        Err(errs) => {
            println!("  ✗ spec: {} error(s)", errs.0.len());
            for e in &errs.0 {
                println!("      {e}");
            }
            return Ok(ExitCode::from(2));
        }
    };
    println!("  ✓ spec parses; every field is known and well-typed");
    println!(
        "  ✓ input: {} pattern(s), format {:?}",
        spec.input.uris.len(),
        spec.input.format
    );
    let names: Vec<&str> = spec.stages.iter().map(|s| s.name.as_str()).collect();
    println!(
        "  ✓ stages: {}",
        if names.is_empty() {
            "(none: copy)".into()
        } else {
            names.join(" → ")
        }
    );
    println!(
        "  ✓ output: {} ({:?})",
        spec.output.uri, spec.output.compression
    );
    if offline {
        return Ok(ExitCode::SUCCESS);
    }
    let rt = runtime()?;
    rt.block_on(async {
        let reg = Registry::new(spec.s3.clone());
        match crate::coordinator::plan::plan(&spec, &reg).await {
            Ok(p) => {
                println!(
                    "  ✓ inputs: {} files, {} bytes",
                    p.files.len(),
                    p.input_bytes()
                );
                let cols: Vec<String> = p.phases[0]
                    .input_schema
                    .fields()
                    .iter()
                    .map(|f| format!("{}: {}", f.name(), f.data_type()))
                    .collect();
                println!("  ✓ input columns: {}", cols.join(", "));
                for ph in &p.phases {
                    println!(
                        "  ✓ {}: {} tasks: {}",
                        ph.name,
                        ph.tasks,
                        phase_line(&spec, ph)
                    );
                }
                let cols: Vec<&str> = p
                    .phases
                    .last()
                    .map(|l| {
                        l.output_schema
                            .fields()
                            .iter()
                            .map(|f| f.name().as_str())
                            .collect()
                    })
                    .unwrap_or_default();
                println!("  ✓ output columns: {}", cols.join(", "));
                // Where the job would write: as submit checks it, before anything runs.
                match crate::coordinator::submit::check_prefixes(&spec, &reg, &p, job_root).await {
                    Ok(None) => {
                        println!("  ✓ output prefix: the job's own (nothing else would be swept)");
                        Ok(ExitCode::SUCCESS)
                    }
                    Ok(Some(job)) => {
                        println!("  ✓ job {job} exists with this spec: a run resumes it");
                        Ok(ExitCode::SUCCESS)
                    }
                    Err(crate::coordinator::submit::SubmitError::Plan(e)) => Ok(failed(e)),
                    Err(e) => Ok(failed(PlanError::Storage(e.to_string()))),
                }
            }
            Err(e) => Ok(failed(e)),
        }
    })
}

/// The checklist's last line for a refused spec (exit 2) or a store that failed
/// (exit 1).
fn failed(e: PlanError) -> ExitCode {
    match e {
        PlanError::Spec(errs) => {
            println!("  ✗ {} error(s)", errs.0.len());
            for e in &errs.0 {
                println!("      {e}");
            }
            ExitCode::from(2)
        }
        e => {
            println!("  ✗ {e}");
            ExitCode::from(1)
        }
    }
}

/// One line about a planned phase: its kind, tasks and stages.
fn phase_line(spec: &Spec, ph: &crate::protocol::records::PhasePlan) -> String {
    use crate::protocol::records::{DedupPhaseKind as DedupKind, PhaseKind};
    let stages: Vec<&str> = ph
        .stages
        .iter()
        .map(|&i| spec.stages[i].name.as_str())
        .collect();
    let what = match ph.kind {
        PhaseKind::Map if stages.is_empty() => "copy".to_string(),
        PhaseKind::Map => stages.join(" → "),
        PhaseKind::Reduce => match ph.dedup.as_ref().map(|d| &d.params.kind) {
            Some(DedupKind::Substring {
                min_tokens,
                keep_first,
                ..
            }) => format!(
                "substring reduce: windows of {min_tokens} words seen twice marked ({}), one task per hash range (after every p{:02} task)",
                if *keep_first {
                    "the first occurrence kept"
                } else {
                    "every occurrence cut"
                },
                ph.dedup.as_ref().map_or(0, |d| d.map_phase)
            ),
            Some(DedupKind::Paragraph {
                unit,
                min_count,
                keep_first,
                ..
            }) => format!(
                "paragraph reduce: {} seen {min_count} times or more marked ({}), one task per hash range (after every p{:02} task)",
                crate::dedup::params::Unit::from(*unit).plural(),
                if *keep_first {
                    "the first occurrence kept"
                } else {
                    "every occurrence cut"
                },
                ph.dedup.as_ref().map_or(0, |d| d.map_phase)
            ),
            Some(DedupKind::Semantic { sample, .. }) => format!(
                "semantic centroids: spherical k-means on the {sample} vectors lowest by id hash, one task (after every p{:02} task)",
                ph.dedup.as_ref().map_or(0, |d| d.map_phase)
            ),
            Some(k) if k.is_near() => format!(
                "near-dup candidates ({}), one task per band-key range (after every p{:02} task)",
                near_kind(k),
                ph.dedup.as_ref().map_or(0, |d| d.map_phase)
            ),
            _ => format!(
                "dedup reduce, one task per key range (after every p{:02} task)",
                ph.dedup.as_ref().map_or(0, |d| d.map_phase)
            ),
        },
        PhaseKind::Propagate
            if ph
                .dedup
                .as_ref()
                .is_some_and(|d| d.params.kind.is_semantic()) =>
        {
            match ph.dedup.as_ref().map_or(0, |d| d.step) {
                1 => "semantic assign: each vector to its nearest centroid, by cluster range"
                    .to_string(),
                _ => "semantic reduce: pairs within each cluster, one record kept per component"
                    .to_string(),
            }
        }
        PhaseKind::Propagate => {
            let s = ph.dedup.as_ref().map_or(0, |d| d.step);
            format!(
                "near-dup components, round {}: labels by {} (skipped once labels stop changing)",
                s.div_ceil(2),
                if s % 2 == 1 { "record" } else { "bucket" }
            )
        }
        PhaseKind::Apply if stages.is_empty() => "dedup apply".to_string(),
        PhaseKind::Apply => format!("dedup apply → {}", stages.join(" → ")),
    };
    format!("{what}{}", if ph.gpu { " (GPU)" } else { "" })
}

fn near_kind(k: &crate::protocol::records::DedupPhaseKind) -> String {
    use crate::protocol::records::DedupPhaseKind as DedupKind;
    match k {
        DedupKind::Exact => "exact".into(),
        DedupKind::Minhash {
            bands,
            rows,
            threshold,
        } => format!("minhash {bands}×{rows}, Jaccard ≥ {threshold}"),
        DedupKind::Phash { radius } => format!("phash, Hamming ≤ {radius}"),
        DedupKind::Substring { min_tokens, .. } => format!("substrings of {min_tokens} words"),
        DedupKind::Paragraph { min_count, .. } => format!("paragraphs seen {min_count} times"),
        DedupKind::Semantic { eps, .. } => format!("embeddings, cosine ≥ {}", 1.0 - eps),
    }
}

pub fn plan_dry_run(a: &SpecArgs) -> anyhow::Result<ExitCode> {
    let spec = match Spec::load(&a.spec, &a.overrides(), &crate::ops::Catalog) {
        Ok(s) => s,
        Err(errs) => {
            eprintln!("mdf: {errs}");
            return Ok(ExitCode::from(2));
        }
    };
    let rt = runtime()?;
    rt.block_on(async {
        let reg = Registry::new(spec.s3.clone());
        let p = match crate::coordinator::plan::plan(&spec, &reg).await {
            Ok(p) => p,
            Err(PlanError::Spec(errs)) => {
                eprintln!("mdf: {errs}");
                return Ok(ExitCode::from(2));
            }
            Err(e) => {
                eprintln!("mdf: {e}");
                return Ok(ExitCode::from(1));
            }
        };
        let bytes = p.input_bytes();
        println!("plan for {} (nothing written)", a.spec.display());
        println!();
        println!(
            "inputs: {} files, {:.1} MB, format {:?}",
            p.files.len(),
            bytes as f64 / 1e6,
            spec.input.format
        );
        for f in p.files.first(5).unwrap_or_default() {
            println!("  {} ({} bytes)", f.uri, f.size);
        }
        if p.files.len() > 5 {
            println!("  ... and {} more", p.files.len() - 5);
        }
        let sizes = estimate::task_sizes(&p);
        if let (Some(lo), Some(hi)) = (sizes.first(), sizes.last()) {
            let h = crate::coordinator::status::human_bytes;
            println!(
                "task split: {} tasks of {}–{} (median {}; job.task_bytes {})",
                sizes.len(),
                h(*lo),
                h(*hi),
                h(sizes[sizes.len() / 2]),
                h(spec.job.task_bytes)
            );
        }
        println!();
        let r = estimate::requests(&p);
        println!("{:<9} {:>7} {:>10}  what", "phase", "tasks", "requests");
        for (ph, requests) in p.phases.iter().zip(&r.phases) {
            println!(
                "{:<9} {:>7} {:>10}  {}",
                ph.name,
                ph.tasks,
                requests,
                phase_line(&spec, ph)
            );
        }
        println!(
            "{:<9} {:>7} {:>10}  one GET per commit record, publish, manifest",
            "finalize", 1, r.finalize
        );
        println!();
        println!(
            "requests: about {} (at most {:.2} $ at S3's published prices, all counted as PUTs at 0.005 $/1k)",
            r.total,
            r.price_bound()
        );
        let m = estimate::memory(&spec, &p, &reg).await;
        println!(
            "memory per worker: at most about {:.0} MB = pipeline buffers {:.0} MB + row group {:.0} MB{}{} + operator assets ~{:.0} MB (4× their {:.1} MB on disk) + 64 MB",
            m.total() as f64 / 1e6,
            m.pipeline as f64 / 1e6,
            m.row_group as f64 / 1e6,
            if m.dedup > 0 {
                format!(" + dedup reduce buffer {:.0} MB", m.dedup as f64 / 1e6)
            } else {
                String::new()
            },
            if m.image_cache > 0 {
                format!(" + image decode cache {:.0} MB", m.image_cache as f64 / 1e6)
            } else {
                String::new()
            },
            m.assets() as f64 / 1e6,
            m.assets_on_disk as f64 / 1e6
        );
        Ok(ExitCode::SUCCESS)
    })
}
