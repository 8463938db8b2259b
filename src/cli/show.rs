//! Commands that show a job or its output: `mdf status`, `mdf report` (the HTML file
//! of [`crate::report`]) and `mdf inspect` (records through [`crate::report::output`]).
use super::runtime;
use crate::clock::{Entropy, SystemClock};
use crate::coordinator::status::{self, render};
use crate::launch::fleet;
use crate::protocol::io::Retry;
use crate::report::{self, output};
use crate::store::Registry;
use anyhow::Context;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

/// Writes to standard output; a reader that closed the pipe (`| head`) ends the
/// command quietly (`Ok(false)`: stop writing) instead of a panic in `println!`.
fn emit(text: &str) -> anyhow::Result<bool> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e.into()),
    }
}

pub fn status(job: &str, json: bool, watch: Option<u64>) -> anyhow::Result<ExitCode> {
    let rt = runtime()?;
    rt.block_on(async {
        let reg = Registry::new(Default::default());
        let retry = Retry::new(Entropy::from_os());
        loop {
            let s = status::status(&reg, job, &SystemClock, &retry).await?;
            // The Auto Scaling groups the job was submitted to, as they are now.
            let fleets = fleet::fleet_states(&s.submissions).await;
            let mut text = String::new();
            if watch.is_some() && std::io::stdout().is_terminal() {
                text += "\x1b[2J\x1b[H"; // clear the screen
            }
            if json {
                let mut v = serde_json::to_value(&s)?;
                if !fleets.is_empty() {
                    v["fleets"] = serde_json::to_value(&fleets)?;
                }
                text += &serde_json::to_string_pretty(&v)?;
                text += "\n";
            } else {
                text += &render(&s);
                text += &fleet::render_fleets(&fleets, &s.job);
            }
            if !emit(&text)? {
                break;
            }
            match watch {
                Some(secs) if !s.complete => {
                    tokio::time::sleep(std::time::Duration::from_secs(secs.max(1))).await
                }
                _ => break,
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

pub fn report(job: &str, output: &Path, samples: usize) -> anyhow::Result<ExitCode> {
    let rt = runtime()?;
    rt.block_on(async {
        let reg = Registry::new(Default::default());
        let retry = Retry::new(Entropy::from_os());
        let s = status::status(&reg, job, &SystemClock, &retry).await?;
        let smp = report::samples(&reg, &s.output, samples, 100_000).await;
        let html = report::render(&s, &smp);
        std::fs::write(output, html).with_context(|| format!("writing {}", output.display()))?;
        println!(
            "wrote {} ({})",
            output.display(),
            if s.complete {
                "job complete"
            } else {
                "job not complete: committed tasks so far"
            }
        );
        Ok(ExitCode::SUCCESS)
    })
}

pub fn inspect(
    uri: &str,
    rejects: bool,
    limit: usize,
    conds: &[output::Cond],
    width: usize,
) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let reg = Registry::new(Default::default());
        let output::Sample {
            manifest: m,
            records: shown,
        } = output::sample(&reg, uri, rejects, limit, conds, width).await?;
        let files = if rejects { &m.rejects } else { &m.files };
        let kind = if rejects { "rejects" } else { "records" };
        let header = format!(
            "{} {kind} {} (of {} {kind} in {} files{})\n",
            shown.len(),
            if conds.is_empty() {
                "sampled".to_string()
            } else {
                // --limit caps them: the first matches, not how many match.
                format!("shown, the first that match (at most {limit})")
            },
            if rejects { m.rejected } else { m.rows },
            files.len(),
            if m.failed_tasks.is_empty() {
                String::new()
            } else {
                format!("; {} failed tasks", m.failed_tasks.len())
            }
        );
        if !emit(&header)? {
            return Ok(ExitCode::SUCCESS);
        }
        for v in &shown {
            if !emit(&(serde_json::to_string_pretty(v)? + "\n"))? {
                return Ok(ExitCode::SUCCESS);
            }
        }
        if shown.is_empty() {
            emit("(none)\n")?;
        }
        Ok(ExitCode::SUCCESS)
    })
}
