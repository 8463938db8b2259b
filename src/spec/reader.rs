//! A typed walker over a parsed configuration tree that collects *every* error, each
//! naming its field path (`stages[1].params.min_chars`), instead of stopping at the
//! first. Every object reader refuses keys it was not asked about (the
//! `deny_unknown_fields` rule). It never reads files or the environment.
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;

/// One configuration error at one field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// All errors found in one configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, thiserror::Error)]
pub struct SpecErrors(pub Vec<FieldError>);

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(
            f,
            "invalid spec ({n} error{})",
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.0 {
            write!(f, "\n  - {e}")?;
        }
        Ok(())
    }
}

/// Collects errors while readers walk the tree.
#[derive(Debug, Default)]
pub struct Sink(RefCell<Vec<FieldError>>);

impl Sink {
    pub fn error(&self, path: &str, message: impl Into<String>) {
        self.0.borrow_mut().push(FieldError {
            path: path.to_string(),
            message: message.into(),
        });
    }
    pub fn is_empty(&self) -> bool {
        self.0.borrow().is_empty()
    }
    pub fn len(&self) -> usize {
        self.0.borrow().len()
    }
    pub fn into_errors(self) -> SpecErrors {
        SpecErrors(self.0.into_inner())
    }
    pub fn take(&self) -> Vec<FieldError> {
        std::mem::take(&mut *self.0.borrow_mut())
    }
}

pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

/// Reads the keys of one map; call [`Obj::finish`] to refuse the keys nobody asked for.
pub struct Obj<'a> {
    pub path: String,
    map: Option<&'a Map<String, Value>>,
    used: RefCell<BTreeSet<String>>,
    pub sink: &'a Sink,
    /// Checks added after a job could have been stored apply (a new spec); `false`
    /// for a spec read back from a stored job.json, which must still load as it was
    /// accepted (see [`Obj::stored`]).
    pub new_rules: bool,
}

impl<'a> Obj<'a> {
    /// A reader over `value`, which must be a map (or absent/null, read as empty).
    pub fn new(value: Option<&'a Value>, path: &str, sink: &'a Sink) -> Self {
        let map = match value {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(other) => {
                sink.error(path, format!("expected a map, found {}", type_name(other)));
                None
            }
        };
        Obj {
            path: path.to_string(),
            map,
            used: RefCell::new(BTreeSet::new()),
            sink,
            new_rules: true,
        }
    }

    /// This reader for a stored spec: checks added later ([`Obj::new_rules`]) are
    /// skipped, so a job accepted before them still loads and runs.
    pub fn stored(mut self, stored: bool) -> Self {
        self.new_rules = !stored;
        self
    }

    pub fn field_path(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// Records an error about `key` (an operator's own check of its params).
    pub fn error(&self, key: &str, message: impl Into<String>) {
        self.sink.error(&self.field_path(key), message);
    }

    pub fn has(&self, key: &str) -> bool {
        self.raw(key).is_some()
    }

    /// The raw value of `key` (null counts as absent), marking the key as known.
    pub fn raw(&self, key: &str) -> Option<&'a Value> {
        self.used.borrow_mut().insert(key.to_string());
        match self.map.and_then(|m| m.get(key)) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v),
        }
    }

    /// The raw value of `key` with an explicit null kept (`Some(Null)`), marking the
    /// key as known: for params where null means something (a rule switched off).
    pub fn raw_or_null(&self, key: &str) -> Option<&'a Value> {
        self.used.borrow_mut().insert(key.to_string());
        self.map.and_then(|m| m.get(key))
    }

    fn wrong(&self, key: &str, expected: &str, v: &Value) {
        // A number says which (a negative where a count is expected, say).
        let found = match v {
            Value::Number(n) => format!("{} ({n})", type_name(v)),
            _ => type_name(v).to_string(),
        };
        self.sink.error(
            &self.field_path(key),
            format!("expected {expected}, found {found}"),
        );
    }

    fn missing(&self, key: &str) {
        self.sink
            .error(&self.field_path(key), "missing required field");
    }

    pub fn opt_str(&self, key: &str) -> Option<String> {
        match self.raw(key)? {
            Value::String(s) => Some(s.clone()),
            v => {
                self.wrong(key, "a string", v);
                None
            }
        }
    }

    pub fn req_str(&self, key: &str) -> Option<String> {
        if !self.has(key) {
            self.missing(key);
            return None;
        }
        self.opt_str(key)
    }

    pub fn opt_bool(&self, key: &str) -> Option<bool> {
        match self.raw(key)? {
            Value::Bool(b) => Some(*b),
            v => {
                self.wrong(key, "a boolean", v);
                None
            }
        }
    }

    pub fn opt_u64(&self, key: &str) -> Option<u64> {
        match self.raw(key)? {
            Value::Number(n) if n.as_u64().is_some() => n.as_u64(),
            v => {
                self.wrong(key, "a non-negative integer", v);
                None
            }
        }
    }

    pub fn opt_f64(&self, key: &str) -> Option<f64> {
        match self.raw(key)? {
            Value::Number(n) => n.as_f64(),
            v => {
                self.wrong(key, "a number", v);
                None
            }
        }
    }

    /// An integer in `[min, max]`, or `default` when absent.
    pub fn u64_in(&self, key: &str, default: u64, min: u64, max: u64) -> u64 {
        match self.opt_u64(key) {
            Some(v) if v < min || v > max => {
                self.sink.error(
                    &self.field_path(key),
                    format!("must be between {min} and {max}, found {v}"),
                );
                default
            }
            Some(v) => v,
            None => default,
        }
    }

    /// A byte size: an integer, or a string such as `64MiB`, `1.5GB`, `512k`.
    /// [`Obj::opt_bytes`] for a size that must not be 0 (a task or batch of no bytes).
    pub fn opt_bytes_nonzero(&self, key: &str) -> Option<u64> {
        let v = self.opt_bytes(key)?;
        if v == 0 && !self.new_rules {
            // A stored job from before the check runs as it was accepted (task and
            // batch sizes read 0 as 1; a record limit of 0 takes no record).
            return Some(0);
        }
        if v == 0 {
            self.sink.error(
                &self.field_path(key),
                "must be at least 1 byte (0 is not a size; leave the key out for the default)",
            );
            return None;
        }
        Some(v)
    }

    pub fn opt_bytes(&self, key: &str) -> Option<u64> {
        match self.raw(key)? {
            Value::Number(n) if n.as_u64().is_some() => n.as_u64(),
            Value::String(s) => match parse_bytes(s) {
                Some(b) => Some(b),
                None => {
                    self.sink.error(
                        &self.field_path(key),
                        format!("expected a byte size such as 64MiB, found {s:?}"),
                    );
                    None
                }
            },
            v => {
                self.wrong(key, "a byte size", v);
                None
            }
        }
    }

    /// A list of strings; a single string is accepted as a one-element list.
    pub fn opt_str_list(&self, key: &str) -> Option<Vec<String>> {
        match self.raw(key)? {
            Value::String(s) => Some(vec![s.clone()]),
            Value::Array(items) => {
                let mut out = Vec::new();
                for (i, it) in items.iter().enumerate() {
                    match it {
                        Value::String(s) => out.push(s.clone()),
                        v => self.sink.error(
                            &format!("{}[{i}]", self.field_path(key)),
                            format!("expected a string, found {}", type_name(v)),
                        ),
                    }
                }
                Some(out)
            }
            v => {
                self.wrong(key, "a list of strings", v);
                None
            }
        }
    }

    pub fn opt_list(&self, key: &str) -> Option<&'a Vec<Value>> {
        match self.raw(key)? {
            Value::Array(items) => Some(items),
            v => {
                self.wrong(key, "a list", v);
                None
            }
        }
    }

    /// A nested map reader (an absent key reads as an empty map).
    pub fn obj(&self, key: &str) -> Obj<'a> {
        Obj::new(self.raw(key), &self.field_path(key), self.sink).stored(!self.new_rules)
    }

    /// The keys of this map, in order.
    pub fn keys(&self) -> Vec<String> {
        self.map
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Refuses every key that was never read.
    pub fn finish(&self) {
        let Some(map) = self.map else { return };
        let used = self.used.borrow();
        for k in map.keys() {
            if !used.contains(k) {
                let expected: Vec<&str> = used.iter().map(String::as_str).collect();
                self.sink.error(
                    &self.field_path(k),
                    format!("unknown field, expected one of: {}", expected.join(", ")),
                );
            }
        }
    }
}

/// Parses `123`, `64KiB`, `64KB`, `1.5GiB`, `512k` (k/m/g binary when ambiguous).
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let num: f64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "kb" => 1000,
        "m" | "mib" => 1 << 20,
        "mb" => 1_000_000,
        "g" | "gib" => 1 << 30,
        "gb" => 1_000_000_000,
        "t" | "tib" => 1 << 40,
        "tb" => 1_000_000_000_000,
        _ => return None,
    };
    if num < 0.0 || !num.is_finite() {
        return None;
    }
    Some((num * mult as f64).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn collects_every_error_with_paths() {
        let v = json!({"a": "x", "b": 3, "c": {"d": true, "zz": 1}, "extra": 1});
        let sink = Sink::default();
        let o = Obj::new(Some(&v), "", &sink);
        assert_eq!(o.opt_u64("a"), None);
        assert_eq!(o.opt_str("b"), None);
        let c = o.obj("c");
        c.opt_bool("d");
        c.finish();
        o.req_str("missing");
        o.finish();
        let msgs: Vec<String> = sink.into_errors().0.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            msgs,
            vec![
                "a: expected a non-negative integer, found a string",
                "b: expected a string, found an integer (3)",
                "c.zz: unknown field, expected one of: d",
                "missing: missing required field",
                "extra: unknown field, expected one of: a, b, c, missing",
            ]
        );
    }

    #[test]
    fn byte_sizes() {
        assert_eq!(parse_bytes("64MiB"), Some(64 << 20));
        assert_eq!(parse_bytes("1.5GB"), Some(1_500_000_000));
        assert_eq!(parse_bytes("512k"), Some(512 << 10));
        assert_eq!(parse_bytes("12"), Some(12));
        assert_eq!(parse_bytes("12 parsecs"), None);
    }
}
