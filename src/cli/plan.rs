//! `mdf validate` (a checklist) and `mdf plan` (a dry run: inputs, task split,
//! phases, requests and memory); neither writes anything.
use super::{SpecArgs, runtime};
use crate::coordinator::plan::PlanError;
use crate::spec::Spec;
use crate::store::Registry;
use std::process::ExitCode;

pub fn validate(a: &SpecArgs, offline: bool) -> anyhow::Result<ExitCode> {
    println!("checking {}", a.spec.display());
    let spec = match Spec::load(&a.spec, &a.overrides()) {
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
                Ok(ExitCode::SUCCESS)
            }
            Err(PlanError::Spec(errs)) => {
                println!("  ✗ {} error(s)", errs.0.len());
                for e in &errs.0 {
                    println!("      {e}");
                }
                Ok(ExitCode::from(2))
            }
            Err(e) => {
                println!("  ✗ {e}");
                Ok(ExitCode::from(1))
            }
        }
    })
}

/// One line about a planned phase: its kind, tasks and stages.
fn phase_line(spec: &Spec, ph: &crate::protocol::records::PhasePlan) -> String {
    use crate::protocol::records::PhaseKind;
    let stages: Vec<&str> = ph
        .stages
        .iter()
        .map(|&i| spec.stages[i].name.as_str())
        .collect();
    let what = match ph.kind {
        PhaseKind::Map if stages.is_empty() => "copy".to_string(),
        PhaseKind::Map => stages.join(" → "),
        PhaseKind::Reduce => match ph.dedup.as_ref().map(|d| &d.params.kind) {
            Some(k) if !k.is_exact() => format!(
                "near-dup candidates ({}), one task per band-key range (after every p{:02} task)",
                near_kind(k),
                ph.dedup.as_ref().map_or(0, |d| d.map_phase)
            ),
            _ => format!(
                "dedup reduce, one task per key range (after every p{:02} task)",
                ph.dedup.as_ref().map_or(0, |d| d.map_phase)
            ),
        },
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

fn near_kind(k: &crate::ops::dedup::DedupKind) -> String {
    use crate::ops::dedup::DedupKind;
    match k {
        DedupKind::Exact => "exact".into(),
        DedupKind::Minhash {
            bands,
            rows,
            threshold,
        } => format!("minhash {bands}×{rows}, Jaccard ≥ {threshold}"),
        DedupKind::Phash { radius } => format!("phash, Hamming ≤ {radius}"),
    }
}

pub fn plan_dry_run(a: &SpecArgs) -> anyhow::Result<ExitCode> {
    use crate::protocol::records::PhaseKind;
    let spec = match Spec::load(&a.spec, &a.overrides()) {
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
        for f in p.files.iter().take(5) {
            println!("  {} ({} bytes)", f.uri, f.size);
        }
        if p.files.len() > 5 {
            println!("  ... and {} more", p.files.len() - 5);
        }
        let sizes: Vec<u64> = {
            let mut v: Vec<u64> = p.tasks[0]
                .iter()
                .map(|t| t.inputs.iter().map(|s| s.end - s.start).sum())
                .collect();
            v.sort_unstable();
            v
        };
        if let (Some(lo), Some(hi)) = (sizes.first(), sizes.last()) {
            println!(
                "task split: {} tasks of {:.1}–{:.1} MB (median {:.1} MB; job.task_bytes {} MB)",
                sizes.len(),
                *lo as f64 / 1e6,
                *hi as f64 / 1e6,
                sizes[sizes.len() / 2] as f64 / 1e6,
                spec.job.task_bytes >> 20
            );
        }
        println!();
        // Requests: a map task ~8 (docs/PERFORMANCE.md: 7.8 amortised, with listing),
        // a reduce task 2 ranged GETs per map task, an apply task 2 per reduce task;
        // the finalize task one GET per commit.
        let mut requests = 0u64;
        let mut tasks_total = 0u64;
        println!("{:<9} {:>7} {:>10}  what", "phase", "tasks", "requests");
        for (i, ph) in p.phases.iter().enumerate() {
            let per = match ph.kind {
                PhaseKind::Map => 8,
                PhaseKind::Reduce | PhaseKind::Propagate => 8 + 2 * p.phases[i - 1].tasks,
                PhaseKind::Apply => 8 + 2 * p.phases[i - 1].tasks,
            };
            requests += per * ph.tasks;
            tasks_total += ph.tasks;
            println!(
                "{:<9} {:>7} {:>10}  {}",
                ph.name,
                ph.tasks,
                per * ph.tasks,
                phase_line(&spec, ph)
            );
        }
        requests += tasks_total + 10;
        println!(
            "{:<9} {:>7} {:>10}  one GET per commit record, publish, manifest",
            "finalize",
            1,
            tasks_total + 10
        );
        println!();
        println!(
            "requests: about {requests} (at most {:.2} $ at S3's published prices, all counted as PUTs at 0.005 $/1k)",
            requests as f64 * 0.005 / 1000.0
        );
        // Memory per worker: the pipeline's bounded channels (reader → stages →
        // writer), a row group being written, the dedup reduce buffer, and assets.
        let j = &spec.job;
        let pipeline = (2 * j.channel_batches + 3) as u64 * j.batch_bytes as u64;
        let row_group = spec.output.row_group_rows as u64 * 2048;
        let dedup = p
            .phases
            .iter()
            .filter_map(|ph| ph.dedup.as_ref())
            .map(|d| d.params.memory_bytes)
            .max()
            .unwrap_or(0);
        let mut assets = 0u64;
        for st in &spec.stages {
            for asset in st.operator.assets() {
                if let Ok((store, u)) = reg.resolve(&asset.uri)
                    && let Ok(m) = object_store::ObjectStoreExt::head(store.as_ref(), &u.path).await
                {
                    assets += m.size;
                }
            }
        }
        // Image stages share one process-wide decode cache.
        let images = spec
            .stages
            .iter()
            .any(|s| matches!(s.op.as_str(), "image_quality" | "image_hash"));
        let cache = if images {
            crate::ops::image_decode_cache_bytes() as u64
        } else {
            0
        };
        let total = pipeline + row_group + dedup + assets * 4 + cache;
        println!(
            "memory per worker: at most about {:.0} MB = pipeline buffers {:.0} MB + row group {:.0} MB{}{} + operator assets ~{:.0} MB (4× their {:.1} MB on disk) + 64 MB",
            (total + (64 << 20)) as f64 / 1e6,
            pipeline as f64 / 1e6,
            row_group as f64 / 1e6,
            if dedup > 0 {
                format!(" + dedup reduce buffer {:.0} MB", dedup as f64 / 1e6)
            } else {
                String::new()
            },
            if cache > 0 {
                format!(" + image decode cache {:.0} MB", cache as f64 / 1e6)
            } else {
                String::new()
            },
            (assets * 4) as f64 / 1e6,
            assets as f64 / 1e6
        );
        Ok(ExitCode::SUCCESS)
    })
}
