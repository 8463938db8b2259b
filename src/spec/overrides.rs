//! Turns spec text into the configuration tree the validator reads: YAML parsing,
//! `--set path.to.key=value` overrides, `--input`/`--output` shortcuts and
//! `${ENV_VAR}` / `${ENV_VAR:-default}` interpolation (`$${` is a literal `${`).
//! Environment lookups are injected so tests never depend on the process environment.
use super::reader::{FieldError, SpecErrors};
use serde_json::{Map, Value};

/// Parses YAML (or JSON) text into a tree.
pub fn parse_yaml(text: &str, source: &str) -> Result<Value, SpecErrors> {
    let v: Value = serde_yaml_ng::from_str(text).map_err(|e| {
        let at = e
            .location()
            .map(|l| format!(" at line {} column {}", l.line(), l.column()))
            .unwrap_or_default();
        SpecErrors(vec![FieldError {
            path: String::new(),
            message: format!("{source}: not valid YAML{at}: {e}"),
        }])
    })?;
    if !v.is_object() {
        return Err(SpecErrors(vec![FieldError {
            path: String::new(),
            message: format!("{source}: the spec must be a YAML map"),
        }]));
    }
    Ok(v)
}

/// Applies one `path.to.key=value` override; the value is parsed as a YAML scalar or
/// flow collection, so `--set job.lease_ttl_secs=5` sets an integer. Inside a list, a
/// segment is an index or, for `stages`, a stage name.
pub fn apply_set(root: &mut Value, assignment: &str) -> Result<(), FieldError> {
    let err = |m: String| FieldError {
        path: assignment.split('=').next().unwrap_or("").to_string(),
        message: m,
    };
    let (path, raw) = assignment
        .split_once('=')
        .ok_or_else(|| err("--set needs the form path.to.key=value".into()))?;
    if path.is_empty() || path.split('.').any(str::is_empty) {
        return Err(err("--set path has an empty segment".into()));
    }
    let value: Value = serde_yaml_ng::from_str(raw).unwrap_or(Value::String(raw.to_string()));
    let segments: Vec<&str> = path.split('.').collect();
    let mut cur = root;
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match cur {
            Value::Array(items) => {
                let idx = match seg.parse::<usize>() {
                    Ok(n) => n,
                    Err(_) => items
                        .iter()
                        .position(|it| {
                            it.get("name").and_then(Value::as_str) == Some(seg)
                                || (it.get("name").is_none()
                                    && it.get("op").and_then(Value::as_str) == Some(seg))
                        })
                        .ok_or_else(|| err(format!("no list item named {seg:?}")))?,
                };
                if idx >= items.len() {
                    return Err(err(format!(
                        "index {idx} is past the end of a list of {}",
                        items.len()
                    )));
                }
                if last {
                    items[idx] = value;
                    return Ok(());
                }
                cur = &mut items[idx];
            }
            Value::Object(map) => {
                if last {
                    map.insert(seg.to_string(), value);
                    return Ok(());
                }
                cur = map
                    .entry(seg.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
                if cur.is_null() {
                    *cur = Value::Object(Map::new());
                }
            }
            _ => {
                return Err(err(format!(
                    "{seg:?} is inside a value that is not a map or list"
                )));
            }
        }
    }
    Ok(())
}

/// Replaces `${NAME}` and `${NAME:-default}` in every string; returns every missing
/// variable as an error at the field path where it appears.
pub fn interpolate(
    root: &mut Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), SpecErrors> {
    let mut errors = Vec::new();
    walk(root, "", lookup, &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SpecErrors(errors))
    }
}

fn walk(
    v: &mut Value,
    path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    errors: &mut Vec<FieldError>,
) {
    match v {
        Value::String(s) if s.contains('$') => match expand(s, lookup) {
            Ok(out) => *s = out,
            Err(m) => errors.push(FieldError {
                path: path.to_string(),
                message: m,
            }),
        },
        Value::Array(items) => {
            for (i, it) in items.iter_mut().enumerate() {
                walk(it, &format!("{path}[{i}]"), lookup, errors);
            }
        }
        Value::Object(map) => {
            for (k, it) in map.iter_mut() {
                walk(it, &super::reader::join(path, k), lookup, errors);
            }
        }
        _ => {}
    }
}

fn expand(s: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos..];
        if let Some(tail) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("${") {
            let end = tail
                .find('}')
                .ok_or_else(|| format!("unterminated ${{ in {s:?}"))?;
            let expr = &tail[..end];
            let (name, default) = match expr.split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (expr, None),
            };
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!("invalid environment variable name {name:?}"));
            }
            match lookup(name)
                .filter(|v| !v.is_empty())
                .or(default.map(str::to_string))
            {
                Some(val) => out.push_str(&val),
                None => return Err(format!("environment variable {name} is not set")),
            }
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn set_paths_by_key_index_and_stage_name() {
        let mut v = json!({"job": {}, "stages": [{"op": "a"}, {"op": "b", "name": "bee"}]});
        apply_set(&mut v, "job.lease_ttl_secs=5").unwrap();
        apply_set(&mut v, "stages.0.params.x=true").unwrap();
        apply_set(&mut v, "stages.bee.params.min=1.5").unwrap();
        apply_set(&mut v, "output.uri=s3://b/p").unwrap();
        assert_eq!(v["job"]["lease_ttl_secs"], json!(5));
        assert_eq!(v["stages"][0]["params"]["x"], json!(true));
        assert_eq!(v["stages"][1]["params"]["min"], json!(1.5));
        assert_eq!(v["output"]["uri"], json!("s3://b/p"));
        assert!(apply_set(&mut v, "stages.9.x=1").is_err());
        assert!(apply_set(&mut v, "noequals").is_err());
    }

    #[test]
    fn env_interpolation() {
        let env = |k: &str| (k == "HOME_BUCKET").then(|| "bkt".to_string());
        let mut v = json!({"a": "s3://${HOME_BUCKET}/x", "b": ["${NOPE:-d}", "$${LIT}", "$5"]});
        interpolate(&mut v, &env).unwrap();
        assert_eq!(v, json!({"a": "s3://bkt/x", "b": ["d", "${LIT}", "$5"]}));
        let mut bad = json!({"o": {"uri": "${MISSING}"}});
        let e = interpolate(&mut bad, &env).unwrap_err();
        assert_eq!(
            e.0[0].to_string(),
            "o.uri: environment variable MISSING is not set"
        );
    }
}
