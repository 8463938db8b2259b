//! `mdf ops`: the operators a spec can use; `mdf ops NAME` every param of one;
//! `mdf ops --markdown` the whole reference (docs/OPERATORS.md). A NAME may also be a
//! preset (a well-known model as ready stages, [`crate::ops::presets`]).
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
                let presets: Vec<&str> = crate::ops::presets::PRESETS
                    .iter()
                    .map(|p| p.name)
                    .collect();
                eprintln!(
                    "mdf: unknown operator {name:?}, expected one of: {} (or a preset: {})",
                    names.join(", "),
                    presets.join(", ")
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
    println!("\npresets (`mdf ops NAME` prints one as stages):");
    for p in crate::ops::presets::PRESETS {
        println!("{:<20} {}", p.name, p.summary);
    }
    Ok(ExitCode::SUCCESS)
}
