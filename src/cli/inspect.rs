//! `mdf inspect URI`: sample records of a finished output (or its rejects), read
//! through its `_manifest.json` only, filtered and pretty-printed.
use crate::protocol::io::{Retry, get_json};
use crate::protocol::records::OutputManifest;
use crate::store::{Registry, Uri};
use object_store::ObjectStoreExt;
use std::process::ExitCode;

/// A `--where` condition: `col=value` (equal) or `col~text` (contains), on the
/// column's JSON text.
#[derive(Debug, Clone)]
pub struct Cond {
    col: String,
    value: String,
    contains: bool,
}

pub fn parse_cond(s: &str) -> Result<Cond, String> {
    let (col, value, contains) = match (s.split_once('='), s.split_once('~')) {
        (Some((c, v)), None) => (c, v, false),
        (None, Some((c, v))) => (c, v, true),
        (Some((c1, v1)), Some((c2, v2))) => {
            if c1.len() < c2.len() {
                (c1, v1, false)
            } else {
                (c2, v2, true)
            }
        }
        (None, None) => return Err(format!("expected col=value or col~text, found {s:?}")),
    };
    if col.is_empty() {
        return Err(format!("no column in {s:?}"));
    }
    Ok(Cond {
        col: col.to_string(),
        value: value.to_string(),
        contains,
    })
}

fn holds(rec: &serde_json::Map<String, serde_json::Value>, c: &Cond) -> bool {
    let Some(v) = rec.get(&c.col) else {
        return false;
    };
    let text = match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if c.contains {
        text.contains(&c.value)
    } else {
        text == c.value
    }
}

/// Long strings shortened for the terminal.
pub fn shorten(v: &mut serde_json::Value, width: usize) {
    match v {
        serde_json::Value::String(s) if s.chars().count() > width => {
            let cut: String = s.chars().take(width).collect();
            *s = format!("{cut}… ({} chars)", s.chars().count());
        }
        serde_json::Value::Object(m) => m.values_mut().for_each(|x| shorten(x, width)),
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| shorten(x, width)),
        _ => {}
    }
}

/// The manifest of a finished output.
pub async fn manifest(reg: &Registry, uri: &str) -> anyhow::Result<OutputManifest> {
    let base = Uri::parse(uri)?;
    let store = reg.open(&base)?;
    let retry = Retry::new(crate::clock::Entropy::from_os());
    get_json(store.as_ref(), &base.child("_manifest.json").path, &retry)
        .await?
        .ok_or_else(|| anyhow::anyhow!("{uri} has no _manifest.json (not a finished output)"))
}

/// Reads the records of a finished output (or its rejects) through its manifest, file
/// by file, handing each to `visit` until it returns `false`. Returns the manifest.
pub async fn visit(
    reg: &Registry,
    uri: &str,
    rejects: bool,
    visit: &mut dyn FnMut(serde_json::Map<String, serde_json::Value>) -> bool,
) -> anyhow::Result<OutputManifest> {
    let m = manifest(reg, uri).await?;
    walk(reg, uri, &m, rejects, visit).await?;
    Ok(m)
}

/// [`visit`] over an output whose manifest `m` is already read.
pub async fn walk(
    reg: &Registry,
    uri: &str,
    m: &OutputManifest,
    rejects: bool,
    visit: &mut dyn FnMut(serde_json::Map<String, serde_json::Value>) -> bool,
) -> anyhow::Result<()> {
    let (dir, files) = if rejects {
        (Uri::parse(&m.rejects_uri)?, &m.rejects)
    } else {
        (Uri::parse(uri)?, &m.files)
    };
    if files.iter().any(|f| f.path.ends_with(".lance")) {
        anyhow::bail!(
            "{uri} is a Lance dataset: read it with pylance (lance.dataset({uri:?}).to_table()) or lancedb; `mdf inspect --rejects` shows its rejects"
        );
    }
    for f in files {
        let u = dir.child(&f.path);
        let st = reg.open(&u)?;
        let bytes = st.get(&u.path).await?.bytes().await?;
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)?
            .build()?;
        for batch in reader {
            for line in crate::records::rows_as_json(&batch?) {
                let Ok(serde_json::Value::Object(rec)) = serde_json::from_str(&line) else {
                    continue;
                };
                if !visit(rec) {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

pub fn run(
    uri: &str,
    rejects: bool,
    limit: usize,
    conds: &[Cond],
    width: usize,
) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let reg = Registry::new(Default::default());
        let mut shown = Vec::new();
        let m = visit(&reg, uri, rejects, &mut |rec| {
            if conds.iter().all(|c| holds(&rec, c)) {
                let mut v = serde_json::Value::Object(rec);
                shorten(&mut v, width);
                shown.push(v);
            }
            shown.len() < limit
        })
        .await?;
        let files = if rejects { &m.rejects } else { &m.files };
        println!(
            "{} {} of {} records in {} files{}",
            if rejects { "rejects" } else { "records" },
            if conds.is_empty() {
                "sampled"
            } else {
                "matching"
            },
            if rejects { m.rejected } else { m.rows },
            files.len(),
            if m.failed_tasks.is_empty() {
                String::new()
            } else {
                format!(" ({} failed tasks)", m.failed_tasks.len())
            }
        );
        for v in &shown {
            println!("{}", serde_json::to_string_pretty(v)?);
        }
        if shown.is_empty() {
            println!("(none)");
        }
        Ok(ExitCode::SUCCESS)
    })
}
