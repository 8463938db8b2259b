//! Turns spec text into the configuration tree the validator reads: YAML parsing,
//! `--set path.to.key=value` overrides, `--input`/`--output` shortcuts and
//! `${ENV_VAR}` / `${ENV_VAR:-default}` interpolation (`$${` is a literal `${`).
//! Environment lookups are injected so tests never depend on the process environment.
//! Interpolation never reads a secret: the resolved spec is stored in `job.json` and
//! its values reach workers, logs and remote hosts (`download.user_agent`), so a
//! reference to a credential or token variable ([`secret_pattern`]) is a spec error.
//! Credentials reach the object store through the standard AWS variables and
//! credential chain when a command runs, never through the spec.
use super::reader::{FieldError, SpecErrors};
use serde_json::{Map, Value};

/// Parses YAML (or JSON) text into a tree.
pub fn parse_yaml(text: &str, source: &str) -> Result<Value, SpecErrors> {
    let v: Value = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text)
        .map(json_of)
        .map_err(|e| {
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

/// A YAML tree as JSON. JSON has no NaN or infinity: YAML's `.nan` and `.inf` become
/// the strings `NaN`, `inf` and `-inf`, which a number param refuses naming them
/// (deserialising straight into JSON made them null, and the error said "null").
/// A tagged value is its value; a key that is not a string is written as YAML shows it.
fn json_of(v: serde_yaml_ng::Value) -> Value {
    use serde_yaml_ng::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                serde_json::Number::from_f64(f)
                    .map(Value::Number)
                    .unwrap_or_else(|| {
                        Value::String(
                            if f.is_nan() {
                                "NaN"
                            } else if f > 0.0 {
                                "inf"
                            } else {
                                "-inf"
                            }
                            .to_string(),
                        )
                    })
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(json_of).collect()),
        Y::Mapping(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| {
                    let k = match k {
                        Y::String(s) => s,
                        other => serde_yaml_ng::to_string(&other)
                            .unwrap_or_default()
                            .trim_end()
                            .to_string(),
                    };
                    (k, json_of(v))
                })
                .collect(),
        ),
        Y::Tagged(t) => json_of(t.value),
    }
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
    let value: Value = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(raw)
        .map(json_of)
        .unwrap_or(Value::String(raw.to_string()));
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

/// The environment variable with more secret names (comma- or space-separated,
/// `*` matches any run of characters), added to [`SECRET_PATTERNS`].
pub const SECRET_VARS_ENV: &str = "MDF_SECRET_VARS";

/// Variable names that hold credentials or tokens and are never interpolated
/// (matched without regard to case; `*` matches any run of characters).
pub const SECRET_PATTERNS: [&str; 9] = [
    "*SECRET*",
    "*TOKEN*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "*APIKEY*",
    "*_KEY",
    "AWS_*",
    "HF_TOKEN",
];

/// The pattern (built in, or from `extra`: the value of [`SECRET_VARS_ENV`]) that
/// marks the variable `name` secret, if one does.
pub fn secret_pattern(name: &str, extra: Option<&str>) -> Option<String> {
    let upper = name.to_ascii_uppercase();
    let extra = extra
        .unwrap_or("")
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty());
    SECRET_PATTERNS
        .iter()
        .copied()
        .chain(extra)
        .find(|p| glob_match(&p.to_ascii_uppercase(), &upper))
        .map(str::to_string)
}

/// `*`-only glob matching over ASCII names.
fn glob_match(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for p in middle {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Replaces `${NAME}` and `${NAME:-default}` in every string; returns every missing
/// variable, and every reference to a secret variable ([`secret_pattern`], whether
/// set or not), as an error at the field path where it appears.
pub fn interpolate(
    root: &mut Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), SpecErrors> {
    let mut errors = Vec::new();
    let extra = lookup(SECRET_VARS_ENV);
    let lookup = |name: &str| -> Result<Option<String>, String> {
        match secret_pattern(name, extra.as_deref()) {
            Some(p) => Err(format!(
                "${{{name}}} names a secret (matches {p}): credentials and tokens are never interpolated into a spec, which is stored in job.json; S3 credentials come from the AWS environment or credential chain at run time"
            )),
            None => Ok(lookup(name)),
        }
    };
    walk(root, "", &lookup, &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SpecErrors(errors))
    }
}

/// An environment lookup that refuses some names.
type Lookup<'a> = dyn Fn(&str) -> Result<Option<String>, String> + 'a;

fn walk(v: &mut Value, path: &str, lookup: &Lookup, errors: &mut Vec<FieldError>) {
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

fn expand(s: &str, lookup: &Lookup) -> Result<String, String> {
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
            match lookup(name)?
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

    #[test]
    fn secret_names_match_the_built_in_and_user_patterns() {
        for name in [
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "AWS_SESSION_TOKEN",
            "AWS_REGION",
            "HF_TOKEN",
            "HUGGING_FACE_HUB_TOKEN",
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "MYSQL_PASSWD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "OPENAI_API_KEY",
            "STRIPE_APIKEY",
            "SSH_PRIVATE_KEY",
            "client_secret",
            "my_token",
        ] {
            assert!(secret_pattern(name, None).is_some(), "{name}");
        }
        for name in [
            "HOME_BUCKET",
            "MDF_ORT_PROVIDER",
            "MDF_CLIP_IMAGE_MODEL",
            "KEYBOARD",
            "MONKEY",
            "OUT",
            "A_KEYS",
        ] {
            assert_eq!(secret_pattern(name, None), None, "{name}");
        }
        let extra = Some("INTERNAL_*, ,CORP_*_AUTH SIGNING");
        assert_eq!(
            secret_pattern("internal_mirror", extra).as_deref(),
            Some("INTERNAL_*")
        );
        assert_eq!(
            secret_pattern("CORP_X_AUTH", extra).as_deref(),
            Some("CORP_*_AUTH")
        );
        assert_eq!(secret_pattern("SIGNING", extra).as_deref(), Some("SIGNING"));
        assert_eq!(secret_pattern("SIGNING_2", extra), None);
        assert_eq!(secret_pattern("CORP_X_AUTHZ", extra), None);
        assert_eq!(secret_pattern("HOME_BUCKET", extra), None);
    }

    #[test]
    fn secrets_are_never_interpolated_set_or_not() {
        let env = |k: &str| match k {
            "AWS_SECRET_ACCESS_KEY" => Some("wJalrXUtnFEMI".to_string()),
            "CORP_MIRROR" => Some("mirror.corp".to_string()),
            "MDF_SECRET_VARS" => Some("CORP_*".to_string()),
            "BUCKET" => Some("bkt".to_string()),
            _ => None,
        };
        let mut v = json!({
            "input": {"download": {"user_agent": "x ${AWS_SECRET_ACCESS_KEY}"}},
            "output": {"uri": "s3://${BUCKET}/${HF_TOKEN:-anon}"},
            "s3": {"endpoint": "https://${CORP_MIRROR}"},
            "name": "$${AWS_SECRET_ACCESS_KEY}"
        });
        let e = interpolate(&mut v, &env).unwrap_err();
        let e: Vec<String> = e.0.iter().map(|e| e.to_string()).collect();
        let why = "credentials and tokens are never interpolated into a spec, which is stored in job.json; S3 credentials come from the AWS environment or credential chain at run time";
        assert_eq!(
            e,
            vec![
                format!(
                    "input.download.user_agent: ${{AWS_SECRET_ACCESS_KEY}} names a secret (matches *SECRET*): {why}"
                ),
                format!("output.uri: ${{HF_TOKEN}} names a secret (matches *TOKEN*): {why}"),
                format!("s3.endpoint: ${{CORP_MIRROR}} names a secret (matches CORP_*): {why}"),
            ]
        );
        assert!(e.iter().all(|m| !m.contains("wJalrXUtnFEMI")));
        // `$${` stays a literal, whatever name follows it.
        let mut lit = json!({"name": "$${AWS_SECRET_ACCESS_KEY}"});
        interpolate(&mut lit, &env).unwrap();
        assert_eq!(lit, json!({"name": "${AWS_SECRET_ACCESS_KEY}"}));
    }
}
