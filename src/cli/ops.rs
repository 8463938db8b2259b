//! `mdf ops`: the operators a spec can use; `mdf ops NAME` every param of one;
//! `mdf ops --markdown` the whole reference (docs/OPERATORS.md).
use std::process::ExitCode;

pub fn run(name: Option<String>, markdown: bool) -> anyhow::Result<ExitCode> {
    if markdown {
        print!("{}", crate::ops::reference_markdown());
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(name) = name {
        return Ok(match crate::ops::describe(&name) {
            Some(s) => {
                print!("{s}");
                ExitCode::SUCCESS
            }
            None => {
                let names: Vec<&str> = crate::ops::REGISTRY.iter().map(|d| d.name).collect();
                eprintln!(
                    "mdf: unknown operator {name:?}, expected one of: {}",
                    names.join(", ")
                );
                ExitCode::from(2)
            }
        });
    }
    for d in crate::ops::REGISTRY {
        match d.feature.filter(|_| d.build.is_none()) {
            None => println!("{:<20} {}", d.name, d.summary),
            Some(f) => println!("{:<20} {} (needs --features {f})", d.name, d.summary),
        }
    }
    Ok(ExitCode::SUCCESS)
}
