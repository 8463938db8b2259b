//! Records of a finished output (or its rejects), read through its `_manifest.json`
//! only: `mdf inspect` samples and filters them, the report shows a few. Reads only;
//! never lists the output directory (a manifest names every file).
use crate::protocol::io::{ProtoError, Retry, get_json};
use crate::protocol::records::OutputManifest;
use crate::store::{Registry, StoreError, Uri};
use object_store::ObjectStoreExt;

/// Why an output's records could not be read. Each message is whole (it names its
/// cause), so the variants carry no separate `source`.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{uri} has no _manifest.json (not a finished output)")]
    NoManifest { uri: String },
    #[error("--where: no column {column:?}; the columns are: {columns}")]
    NoColumn { column: String, columns: String },
    #[error(
        "{uri} is a Lance dataset: read it with pylance (lance.dataset({uri:?}).to_table()) or lancedb; `mdf inspect --rejects` shows its rejects"
    )]
    Lance { uri: String },
    #[error(
        "{uri} holds token shards (output.format megatron or tokens), not records: read them with Megatron's IndexedDataset or numpy.fromfile (docs/OPERATIONS.md); `mdf inspect --rejects` shows its rejects"
    )]
    TokenShards { uri: String },
    #[error(
        "{uri} holds WebDataset tar shards: read them with the webdataset package (webdataset.WebDataset(...)) or tar; `mdf inspect --rejects` shows its rejects"
    )]
    WebDataset { uri: String },
    #[error("{path}: {message}")]
    Jsonl { path: String, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Proto(#[from] ProtoError),
    #[error("reading {path}: {error}")]
    Read {
        path: String,
        error: object_store::Error,
    },
    #[error("{path}: {error}")]
    Parquet {
        path: String,
        error: parquet::errors::ParquetError,
    },
    #[error("{path}: {error}")]
    Arrow {
        path: String,
        error: arrow_schema::ArrowError,
    },
}

/// A `--where` condition: `col=value` (equal) or `col~text` (contains), on the
/// column's JSON text.
#[derive(Debug, Clone)]
pub struct Cond {
    col: String,
    value: String,
    contains: bool,
}

/// A `--where` condition that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CondError {
    #[error("expected col=value or col~text, found {0:?}")]
    NoOperator(String),
    #[error("no column in {0:?}")]
    NoColumn(String),
}

/// Parses `col=value` or `col~text`; the first of `=` and `~` is the operator.
pub fn parse_cond(s: &str) -> Result<Cond, CondError> {
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
        (None, None) => return Err(CondError::NoOperator(s.to_string())),
    };
    if col.is_empty() {
        return Err(CondError::NoColumn(s.to_string()));
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
pub async fn manifest(reg: &Registry, uri: &str) -> Result<OutputManifest, OutputError> {
    let base = Uri::parse(uri)?;
    let store = reg.open(&base)?;
    let retry = Retry::new(crate::clock::Entropy::from_os());
    get_json(store.as_ref(), &base.child("_manifest.json").path, &retry)
        .await?
        .ok_or_else(|| OutputError::NoManifest {
            uri: uri.to_string(),
        })
}

/// What a finished output's `_manifest.json` names that the store no longer holds at
/// its size: a job is complete once, so an output deleted or cut after it finished is
/// not written again by rerunning the job, and this is how `mdf run` says so instead
/// of reporting a success over nothing.
#[derive(Debug)]
pub struct Missing {
    /// The job the manifest names (another job's, after an overwrite).
    pub job_id: String,
    /// Data files and side tables.
    pub data: Vec<String>,
    /// Rejects files (deleting reviewed rejects is ordinary: a warning, not a failure).
    pub rejects: Vec<String>,
}

/// The `_mdf_owner.json` at an output prefix: the job that owns it now.
pub async fn owner(
    reg: &Registry,
    uri: &str,
) -> Result<Option<crate::protocol::records::OwnerMarker>, OutputError> {
    let base = Uri::parse(uri)?;
    let store = reg.open(&base)?;
    let retry = Retry::new(crate::clock::Entropy::from_os());
    Ok(get_json(
        store.as_ref(),
        &base.child(crate::protocol::records::OWNER_MARKER).path,
        &retry,
    )
    .await?)
}

/// [`Missing`] for the output at `uri`: one LIST of the output and one of the rejects
/// prefix (a request per 1,000 objects); a name found as a directory (a Lance
/// dataset's) counts as present. `NoManifest` when there is no manifest.
pub async fn missing_files(reg: &Registry, uri: &str) -> Result<Missing, OutputError> {
    use futures::TryStreamExt;
    let m = manifest(reg, uri).await?;
    let list = async |base: &Uri| {
        let store = reg.open(base)?;
        store
            .list(Some(&base.path))
            .map_ok(|o| (o.location.to_string(), o.size))
            .try_collect::<std::collections::BTreeMap<String, u64>>()
            .await
            .map_err(|error| OutputError::Read {
                path: base.to_uri_string(),
                error,
            })
    };
    let gone =
        |found: &std::collections::BTreeMap<String, u64>,
         base: &Uri,
         files: &mut dyn Iterator<Item = &crate::protocol::records::ManifestFile>| {
            let mut v = Vec::new();
            for f in files {
                // The key as finalize published it: the prefix's text and the path.
                let at = Uri::parse(&format!(
                    "{}/{}",
                    base.to_uri_string().trim_end_matches('/'),
                    f.path
                ))
                .unwrap_or_else(|_| base.child(&f.path));
                let key = at.path.to_string();
                let here = match found.get(&key) {
                    Some(&size) => size == f.bytes,
                    None => {
                        let dir = format!("{key}/");
                        found
                            .range(dir.clone()..)
                            .next()
                            .is_some_and(|(k, _)| k.starts_with(&dir))
                    }
                };
                if !here {
                    v.push(at.to_uri_string());
                }
            }
            v
        };
    let base = Uri::parse(uri)?;
    let found = list(&base).await?;
    let data = gone(
        &found,
        &base,
        &mut m.files.iter().chain(m.tables.values().flatten()),
    );
    let rejects = if m.rejects.is_empty() {
        Vec::new()
    } else {
        let rbase = Uri::parse(&m.rejects_uri)?;
        let found = if rbase.store == base.store && rbase.path.prefix_match(&base.path).is_some() {
            found
        } else {
            list(&rbase).await?
        };
        gone(&found, &rbase, &mut m.rejects.iter())
    };
    Ok(Missing {
        job_id: m.job_id,
        data,
        rejects,
    })
}

/// Reads the records of a finished output (or its rejects) through its manifest, file
/// by file, handing each to `visit` until it returns `false`. Returns the manifest.
pub async fn visit(
    reg: &Registry,
    uri: &str,
    rejects: bool,
    visit: &mut dyn FnMut(serde_json::Map<String, serde_json::Value>) -> bool,
) -> Result<OutputManifest, OutputError> {
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
) -> Result<(), OutputError> {
    let (dir, files) = if rejects {
        (Uri::parse(&m.rejects_uri)?, &m.rejects)
    } else {
        (Uri::parse(uri)?, &m.files)
    };
    if files.iter().any(|f| f.path.ends_with(".lance")) {
        return Err(OutputError::Lance {
            uri: uri.to_string(),
        });
    }
    if !rejects
        && files.iter().any(|f| {
            [".bin", ".idx", ".tokens", ".offsets"]
                .iter()
                .any(|e| f.path.ends_with(e))
        })
    {
        return Err(OutputError::TokenShards {
            uri: uri.to_string(),
        });
    }
    if !rejects && files.iter().any(|f| f.path.ends_with(".tar")) {
        return Err(OutputError::WebDataset {
            uri: uri.to_string(),
        });
    }
    for f in files {
        let u = dir.child(&f.path);
        let st = reg.open(&u)?;
        let path = || u.to_uri_string();
        let read = |error| OutputError::Read {
            path: path(),
            error,
        };
        let bytes = st
            .get(&u.path)
            .await
            .map_err(read)?
            .bytes()
            .await
            .map_err(read)?;
        if [".jsonl", ".jsonl.zst", ".jsonl.gz"]
            .iter()
            .any(|e| f.path.ends_with(e))
        {
            // JSON Lines output: each line one record.
            let bad = |message: String| OutputError::Jsonl {
                path: path(),
                message,
            };
            let text = if f.path.ends_with(".zst") {
                zstd::decode_all(&bytes[..]).map_err(|e| bad(e.to_string()))?
            } else if f.path.ends_with(".gz") {
                let mut out = Vec::new();
                std::io::Read::read_to_end(
                    &mut flate2::read::MultiGzDecoder::new(&bytes[..]),
                    &mut out,
                )
                .map_err(|e| bad(e.to_string()))?;
                out
            } else {
                bytes.to_vec()
            };
            for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                let serde_json::Value::Object(m) =
                    serde_json::from_slice(line).map_err(|e| bad(e.to_string()))?
                else {
                    return Err(bad("a line is not a JSON object".into()));
                };
                if !visit(m) {
                    return Ok(());
                }
            }
            continue;
        }
        let parquet = |error| OutputError::Parquet {
            path: path(),
            error,
        };
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
            .map_err(parquet)?
            .build()
            .map_err(parquet)?;
        for batch in reader {
            let batch = batch.map_err(|error| OutputError::Arrow {
                path: path(),
                error,
            })?;
            for line in crate::records::rows_as_json(&batch) {
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

/// Records of an output shown by `mdf inspect`: up to `limit` records (or rejects)
/// meeting every condition, strings shortened to `width` characters.
pub struct Sample {
    pub manifest: OutputManifest,
    pub records: Vec<serde_json::Value>,
}

/// Reads records of the finished output at `uri` until `limit` meet `conds`.
pub async fn sample(
    reg: &Registry,
    uri: &str,
    rejects: bool,
    limit: usize,
    conds: &[Cond],
    width: usize,
) -> Result<Sample, OutputError> {
    let mut records = Vec::new();
    // The columns of the first record read: a condition on a column the output does
    // not have is an error, not a quiet "(none)".
    let mut columns: Option<Vec<String>> = None;
    let manifest = visit(reg, uri, rejects, &mut |rec| {
        if columns.is_none() {
            columns = Some(rec.keys().cloned().collect());
        }
        if records.len() >= limit {
            return false;
        }
        if conds.iter().all(|c| holds(&rec, c)) {
            let mut v = serde_json::Value::Object(rec);
            shorten(&mut v, width);
            records.push(v);
        }
        records.len() < limit
    })
    .await?;
    if let Some(cols) = &columns
        && let Some(c) = conds.iter().find(|c| !cols.contains(&c.col))
    {
        return Err(OutputError::NoColumn {
            column: c.col.clone(),
            columns: cols.join(", "),
        });
    }
    Ok(Sample { manifest, records })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn conditions_match_equal_or_contained_json_text() {
        let r = rec(json!({"reason": "duplicate", "url": "https://en.wikipedia.org/x", "n": 3}));
        let c = |s: &str| parse_cond(s).unwrap();
        assert!(holds(&r, &c("reason=duplicate")));
        assert!(!holds(&r, &c("reason=dup")));
        assert!(holds(&r, &c("url~wikipedia")));
        assert!(holds(&r, &c("n=3")), "numbers compare as their JSON text");
        assert!(!holds(&r, &c("missing=x")));
        // The first operator wins: `a=b~c` is a=("b~c").
        let e = c("url=a~b");
        assert!(!e.contains && e.col == "url" && e.value == "a~b");
        assert!(matches!(
            parse_cond("nothing"),
            Err(CondError::NoOperator(_))
        ));
        assert!(matches!(parse_cond("=x"), Err(CondError::NoColumn(_))));
    }

    #[test]
    fn long_strings_are_shortened_everywhere() {
        let mut v = json!({"text": "abcdefghij", "nested": ["0123456789"], "n": 12345678});
        shorten(&mut v, 4);
        assert_eq!(v["text"], "abcd… (10 chars)");
        assert_eq!(v["nested"][0], "0123… (10 chars)");
        assert_eq!(v["n"], 12345678);
    }

    #[tokio::test]
    async fn an_output_without_a_manifest_is_named() {
        let reg = Registry::new(Default::default());
        let e = manifest(&reg, "memory://empty/out").await.unwrap_err();
        assert!(matches!(e, OutputError::NoManifest { .. }), "{e}");
        assert!(e.to_string().contains("memory://empty/out"), "{e}");
    }
}
