//! `mdf run`: submit a job here and run in-process workers until it is done, with a
//! progress line; prints the job's status at the end.
use super::{QUIET, on_signals, submit_error};
use crate::clock::{Entropy, SystemClock};
use crate::coordinator::status::{self, render};
use crate::coordinator::submit::{self, SubmitOptions};
use crate::launch::local::in_process;
use crate::protocol::io::Retry;
use crate::spec::Spec;
use crate::store::Registry;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Default: as many workers as the cores allow at the stages' `resources.cpu`.
pub fn default_workers(spec: &Spec) -> usize {
    crate::worker::slots::default_slots(spec.max_stage_cpu()).0
}

pub async fn run_local(
    spec: Spec,
    workers: usize,
    job_root: String,
    job_id: Option<String>,
    reuse: Option<String>,
) -> anyhow::Result<ExitCode> {
    let reg = Registry::new(spec.s3.clone());
    let entropy = Entropy::from_os();
    let opts = SubmitOptions {
        job_root,
        job_id,
        reuse,
        plan_memory: crate::coordinator::plan::PLAN_MEMORY,
    };
    let t0 = std::time::Instant::now();
    let s = match submit::submit(&spec, &reg, &opts, &SystemClock, &entropy).await {
        Ok(s) => s,
        Err(e) => return submit_error(e),
    };
    if !QUIET.load(Ordering::Relaxed) {
        eprintln!(
            "{} job {}: {} tasks over {} input files, {} workers",
            if s.created { "submitted" } else { "resuming" },
            s.job_id,
            s.tasks,
            s.input_files,
            workers
        );
        for n in &s.notes {
            eprintln!("note: {n}");
        }
    }
    let shutdown = Arc::new(AtomicBool::new(false));
    on_signals(shutdown.clone());
    let handles = in_process(&reg, &s.job_uri, workers, shutdown.clone());
    // Progress: a line refreshed in place on a terminal, a plain line every 10 s
    // otherwise (cloud logs); one LIST per phase each time.
    let progress = {
        let (reg, uri) = (reg.clone(), s.job_uri.clone());
        let tty = std::io::stderr().is_terminal();
        let quiet = QUIET.load(Ordering::Relaxed);
        tokio::spawn(async move {
            if quiet {
                return;
            }
            let retry = Retry::new(Entropy::from_os());
            let every = std::time::Duration::from_secs(if tty { 1 } else { 10 });
            loop {
                tokio::time::sleep(every).await;
                if let Ok(p) = status::progress(&reg, &uri, &retry).await {
                    let line = status::progress_line(&p, t0.elapsed());
                    if tty {
                        eprint!("\r\x1b[2K{line}");
                    } else {
                        eprintln!("{line}");
                    }
                }
            }
        })
    };
    for h in handles {
        match h.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => eprintln!("mdf: worker error: {e}"),
            Err(e) => eprintln!("mdf: worker panicked: {e}"),
        }
    }
    progress.abort();
    let shutdown_requested = shutdown.load(Ordering::SeqCst);
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    }
    let retry = Retry::new(entropy);
    // Every task accounted for by key: a lagging LIST must not turn a finished job
    // into a failed run.
    let st = status::status_by_key(&reg, &s.job_uri, &SystemClock, &retry).await?;
    print!("{}", render(&st));
    println!("elapsed: {:.2}s", t0.elapsed().as_secs_f64());
    println!("job: {}", s.job_uri);
    if st.succeeded && !output_intact(&spec, &reg, &st.output, &s.job_id).await {
        return Ok(ExitCode::from(1));
    }
    // Stopped by a signal before the job finished: the run was interrupted, no task
    // failed (a rerun resumes it).
    if shutdown_requested && !st.complete {
        eprintln!("mdf: interrupted; run the same command again to resume");
        return Ok(ExitCode::from(130));
    }
    Ok(if st.succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Whether the finished job's output still holds every file its manifest names. A
/// rerun of a complete job recomputes nothing, so one whose output was deleted since
/// (or replaced by another job's, with overwrite) would otherwise print the old counts
/// and succeed over nothing. Missing rejects files are a warning. Formats whose files
/// change after the job (Lance compaction) or that keep no file list (Iceberg) are
/// not checked.
async fn output_intact(spec: &Spec, reg: &Registry, output: &str, job_id: &str) -> bool {
    use crate::spec::OutputFormat;
    let rerun = "Rerunning a finished job recomputes nothing; to write the output again, run with another --job-root, or change the spec";
    // The prefix's owner marker: another job took it with overwrite (finished or
    // not). Compared by job id: one job root can be spelled two ways (a symlink).
    if let Ok(Some(owner)) = crate::report::output::owner(reg, output).await
        && owner.job_id != job_id
    {
        eprintln!(
            "mdf: the job is complete, but its output {output} now holds the output of job {} (written over it with output.overwrite). {rerun}",
            owner.job_id
        );
        return false;
    }
    if matches!(
        spec.output.format,
        OutputFormat::Iceberg | OutputFormat::Lance
    ) {
        return true;
    }
    match crate::report::output::missing_files(reg, output).await {
        Ok(m) if m.job_id != job_id => {
            eprintln!(
                "mdf: the job is complete, but its output {output} now holds the output of job {} (written over it with output.overwrite). {rerun}",
                m.job_id
            );
            false
        }
        Ok(m) => {
            if let Some(r) = m.rejects.first() {
                eprintln!(
                    "mdf: warning: {} rejects files of the output are gone (such as {r}); the data is whole",
                    m.rejects.len()
                );
            }
            match m.data.first() {
                None => true,
                Some(f) => {
                    eprintln!(
                        "mdf: the job is complete, but {} of the files its output manifest names are gone or changed (such as {f}): they were deleted or replaced after the job wrote them. {rerun}",
                        m.data.len()
                    );
                    false
                }
            }
        }
        Err(crate::report::output::OutputError::NoManifest { uri }) => {
            eprintln!(
                "mdf: the job is complete, but its output {uri} has no _manifest.json: it was deleted after the job wrote it. {rerun}"
            );
            false
        }
        Err(e) => {
            eprintln!("mdf: the job is complete, but its output cannot be checked: {e}");
            false
        }
    }
}
