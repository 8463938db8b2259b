//! `mdf ops`: the operators a spec can use.
use std::process::ExitCode;

pub fn run() -> anyhow::Result<ExitCode> {
    for d in crate::ops::REGISTRY {
        println!("{:<16} {}", d.name, d.summary);
    }
    Ok(ExitCode::SUCCESS)
}
