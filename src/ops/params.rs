//! Typed operator params, declared once. The [`params!`](crate::ops::params) macro
//! turns one struct declaration (each field's type, optional `[min, max]` range,
//! optional default, and doc comment) into the struct, its parser over the spec
//! reader ([`Obj`]: every error at once, each at its field path, unknown keys refused
//! by the caller's `finish`), and its description, from which `mdf ops NAME` and
//! docs/OPERATORS.md are generated. Nothing here knows about a particular operator.
use crate::spec::reader::{Obj, parse_bytes};
use std::fmt::Display;

/// One param as `mdf ops NAME` and docs/OPERATORS.md show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamDoc {
    pub name: &'static str,
    /// `string`, `integer`, `number`, `boolean`, `list of strings`, `byte size`, ...
    pub ty: &'static str,
    /// The default as it would be written in a spec; `None` when there is none.
    pub default: Option<&'static str>,
    pub required: bool,
    /// Inclusive bounds, as written in the declaration.
    pub range: Option<(&'static str, &'static str)>,
    /// The doc comment of the field, lines joined with spaces.
    pub doc: String,
}

/// A params struct: parsed from one map of the spec, described for the docs.
pub trait Params: Sized {
    /// Reads every declared field of `o` (errors go to its sink; the caller calls
    /// `finish` to refuse unknown keys). `None` when a required field is missing or
    /// a value without a default did not parse.
    fn read(o: &Obj) -> Option<Self>;
    /// Every field, in declaration order.
    fn describe() -> Vec<ParamDoc>;
}

/// A type a param may have.
pub trait ParamType: Sized {
    /// The type as the docs name it.
    const TYPE: &'static str;
    /// How an absent key without a default reads in the docs (`None`: required).
    const ABSENT: Option<&'static str> = None;
    /// Whether an explicit `null` is a value of this type (else it is absent).
    const READS_NULL: bool = false;
    /// Reads a present key, recording a type error (and returning `None`) when the
    /// value does not fit.
    fn read(o: &Obj, key: &str) -> Option<Self>;
    /// The value of an absent key without a default; `None`: the key is required.
    fn absent() -> Option<Self> {
        None
    }
}

impl ParamType for String {
    const TYPE: &'static str = "string";
    fn read(o: &Obj, key: &str) -> Option<Self> {
        o.opt_str(key)
    }
}

impl ParamType for bool {
    const TYPE: &'static str = "boolean";
    fn read(o: &Obj, key: &str) -> Option<Self> {
        o.opt_bool(key)
    }
}

impl ParamType for u64 {
    const TYPE: &'static str = "integer";
    fn read(o: &Obj, key: &str) -> Option<Self> {
        o.opt_u64(key)
    }
}

impl ParamType for usize {
    const TYPE: &'static str = "integer";
    fn read(o: &Obj, key: &str) -> Option<Self> {
        o.opt_u64(key).map(|v| v as usize)
    }
}

impl ParamType for u32 {
    const TYPE: &'static str = "integer";
    fn read(o: &Obj, key: &str) -> Option<Self> {
        let v = o.opt_u64(key)?;
        match u32::try_from(v) {
            Ok(v) => Some(v),
            Err(_) => {
                o.error(key, format!("must be at most {}, found {v}", u32::MAX));
                None
            }
        }
    }
}

impl ParamType for f64 {
    const TYPE: &'static str = "number";
    fn read(o: &Obj, key: &str) -> Option<Self> {
        o.opt_f64(key)
    }
}

impl ParamType for Vec<String> {
    const TYPE: &'static str = "list of strings";
    const ABSENT: Option<&'static str> = Some("[]");
    fn read(o: &Obj, key: &str) -> Option<Self> {
        o.opt_str_list(key)
    }
    fn absent() -> Option<Self> {
        Some(vec![])
    }
}

impl ParamType for Vec<f64> {
    const TYPE: &'static str = "list of numbers";
    fn read(o: &Obj, key: &str) -> Option<Self> {
        let items = o.opt_list(key)?;
        let mut out = Vec::new();
        for (i, it) in items.iter().enumerate() {
            match it.as_f64() {
                Some(x) => out.push(x),
                None => {
                    o.sink.error(
                        &format!("{}[{i}]", o.field_path(key)),
                        format!(
                            "expected a number, found {}",
                            crate::spec::reader::type_name(it)
                        ),
                    );
                    return None;
                }
            }
        }
        Some(out)
    }
}

impl<T: ParamType> ParamType for Option<T> {
    const TYPE: &'static str = T::TYPE;
    const ABSENT: Option<&'static str> = Some("none");
    fn read(o: &Obj, key: &str) -> Option<Self> {
        T::read(o, key).map(Some)
    }
    fn absent() -> Option<Self> {
        Some(None)
    }
}

/// A rule's threshold that a spec can switch off: `off` is `Rule(None)`, a value
/// `Rule(Some(v))`. Declared with a default, so an absent key keeps the rule on at its
/// published threshold; `off` is the only way to disable it (a threshold of 0 is a
/// threshold, not "off"). An explicit `null` is refused with that hint: an empty YAML
/// value or a template that came out empty must not switch a filter off unseen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule<T>(pub Option<T>);

impl<T> Rule<T> {
    /// Reads `key`: `off` → off, else a value of `T` (`what` it is, for errors).
    fn read_with(
        o: &Obj,
        key: &str,
        what: &str,
        value: impl Fn(&Obj, &str) -> Option<T>,
    ) -> Option<Self> {
        match o.raw_or_null(key) {
            Some(serde_json::Value::String(s)) if s == "off" => Some(Rule(None)),
            Some(serde_json::Value::Null) => {
                o.error(
                    key,
                    "null is not a threshold: write off to switch the rule off, or leave the key out for the default",
                );
                None
            }
            Some(serde_json::Value::String(s)) => {
                o.error(key, format!("expected {what} or off, found {s:?}"));
                None
            }
            _ => value(o, key).map(|v| Rule(Some(v))),
        }
    }
}

impl ParamType for Rule<usize> {
    const TYPE: &'static str = "integer or off";
    const READS_NULL: bool = true;
    fn read(o: &Obj, key: &str) -> Option<Self> {
        Rule::read_with(o, key, "a non-negative integer", <usize as ParamType>::read)
    }
}

impl ParamType for Rule<f64> {
    const TYPE: &'static str = "number or off";
    const READS_NULL: bool = true;
    fn read(o: &Obj, key: &str) -> Option<Self> {
        Rule::read_with(o, key, "a number", <f64 as ParamType>::read)
    }
}

impl<T> FromDefault<T> for Rule<T> {
    fn from_default(d: T) -> Rule<T> {
        Rule(Some(d))
    }
}

impl<T: Bounded<V = T> + PartialOrd + Display> Bounded for Rule<T> {
    type V = T;
    fn bounded(&self) -> Option<&T> {
        self.0.as_ref()
    }
}

/// A byte size: an integer, or a string such as `64MiB`, `1.5GB`, `512k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl ParamType for ByteSize {
    const TYPE: &'static str = "byte size";
    fn read(o: &Obj, key: &str) -> Option<Self> {
        o.opt_bytes(key).map(ByteSize)
    }
}

/// How a declared default turns into the field's type (`"text"` into a `String`,
/// `["a", "b"]` into a `Vec<String>`, `"64MiB"` into a [`ByteSize`]).
pub trait FromDefault<D> {
    fn from_default(d: D) -> Self;
}

impl<T> FromDefault<T> for T {
    fn from_default(d: T) -> T {
        d
    }
}

impl FromDefault<&str> for String {
    fn from_default(d: &str) -> String {
        d.to_string()
    }
}

impl<const N: usize> FromDefault<[&str; N]> for Vec<String> {
    fn from_default(d: [&str; N]) -> Vec<String> {
        d.iter().map(|s| s.to_string()).collect()
    }
}

impl<const N: usize> FromDefault<[f64; N]> for Vec<f64> {
    fn from_default(d: [f64; N]) -> Vec<f64> {
        d.to_vec()
    }
}

impl FromDefault<&str> for ByteSize {
    fn from_default(d: &str) -> ByteSize {
        ByteSize(parse_bytes(d).expect("a declared byte-size default parses"))
    }
}

/// A numeric param (or an optional one) whose value may be held to a range.
pub trait Bounded {
    type V: PartialOrd + Display;
    fn bounded(&self) -> Option<&Self::V>;
}

macro_rules! bounded {
    ($($t:ty),*) => {$(
        impl Bounded for $t {
            type V = $t;
            fn bounded(&self) -> Option<&$t> {
                Some(self)
            }
        }
    )*};
}
bounded!(u64, usize, u32, f64);

impl<T: Bounded<V = T> + PartialOrd + Display> Bounded for Option<T> {
    type V = T;
    fn bounded(&self) -> Option<&T> {
        self.as_ref()
    }
}

/// Reads one field: its value, else its default, else what an absent key of its
/// type reads as (an error when it is required).
pub fn field<T: ParamType>(o: &Obj, key: &str, default: Option<T>) -> Option<T> {
    // An explicit null is absent, except to a type that reads it (`Rule`: off).
    let is_null = matches!(o.raw_or_null(key), Some(serde_json::Value::Null));
    // A value with a default is never null: an empty YAML value or an unset shell
    // variable in `--set` must not quietly mean the default (which may be "off").
    if is_null && !T::READS_NULL && T::ABSENT.is_none() && default.is_some() && o.new_rules {
        o.error(
            key,
            format!(
                "null is not a value here ({} expected): give one, or leave the key out for the default",
                T::TYPE
            ),
        );
        return default;
    }
    let null = T::READS_NULL && is_null;
    if null || o.has(key) {
        return T::read(o, key).or(default).or_else(T::absent);
    }
    match default.or_else(T::absent) {
        Some(v) => Some(v),
        None => {
            o.error(key, "missing required field");
            None
        }
    }
}

/// [`field`], held to `[min, max]` (out of range: an error, and the default).
pub fn ranged<T: ParamType + Bounded + Clone>(
    o: &Obj,
    key: &str,
    default: Option<T>,
    min: T::V,
    max: T::V,
) -> Option<T> {
    let v = field(o, key, default.clone())?;
    // A stored job was checked when it was accepted, against the ranges of then
    // (some added since): it runs as it was accepted.
    if let Some(x) = v.bounded()
        && o.new_rules
        && (*x < min || *x > max)
    {
        let max = max.to_string();
        o.error(
            key,
            if max == "inf" {
                format!("must be at least {min}, found {x}")
            } else {
                format!("must be between {min} and {max}, found {x}")
            },
        );
        return default.or_else(T::absent);
    }
    Some(v)
}

/// The doc of one field.
pub fn doc<T: ParamType>(
    name: &'static str,
    default: Option<&'static str>,
    range: Option<(&'static str, &'static str)>,
    lines: &[&str],
) -> ParamDoc {
    ParamDoc {
        name,
        ty: T::TYPE,
        default: default.or(T::ABSENT),
        required: default.is_none() && T::ABSENT.is_none(),
        range,
        doc: lines
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// Declares a params struct: `name: Type [min, max] = default,` per field, each with
/// a doc comment. A field without a default is required unless its type reads an
/// absent key (`Option<T>`: none, `Vec<String>`: empty). `flatten { x: Group }` adds
/// fields of another params struct read from the same map.
macro_rules! params {
    (@default) => { None };
    (@default $d:expr) => { Some($crate::ops::params::FromDefault::from_default($d)) };
    (@shown) => { None };
    (@shown $d:expr) => { Some(stringify!($d)) };
    (@range) => { None };
    (@range $min:expr, $max:expr) => { Some((stringify!($min), stringify!($max))) };
    (@read $o:ident, $key:expr, $ty:ty, [$($d:expr)?], []) => {
        $crate::ops::params::field::<$ty>($o, $key, params!(@default $($d)?))
    };
    (@read $o:ident, $key:expr, $ty:ty, [$($d:expr)?], [$min:expr, $max:expr]) => {
        $crate::ops::params::ranged::<$ty>($o, $key, params!(@default $($d)?), $min, $max)
    };
    (
        $(#[doc = $sdoc:literal])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $field:ident : $ty:ty $([$min:expr, $max:expr])? $(= $default:expr)?
            ),* $(,)?
        }
        $(flatten { $($fname:ident : $fty:ty),* $(,)? })?
    ) => {
        $(#[doc = $sdoc])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( $(#[doc = $doc])* pub $field: $ty, )*
            $($( pub $fname: $fty, )*)?
        }

        impl $crate::ops::params::Params for $name {
            fn read(o: &$crate::spec::reader::Obj) -> Option<Self> {
                $( let $field = params!(@read o, stringify!($field), $ty, [$($default)?], [$($min, $max)?]); )*
                $($( let $fname = <$fty as $crate::ops::params::Params>::read(o); )*)?
                Some($name {
                    $( $field: $field?, )*
                    $($( $fname: $fname?, )*)?
                })
            }
            fn describe() -> Vec<$crate::ops::params::ParamDoc> {
                #[allow(unused_mut)]
                let mut out = vec![
                    $( $crate::ops::params::doc::<$ty>(
                        stringify!($field),
                        params!(@shown $($default)?),
                        params!(@range $($min, $max)?),
                        &[$($doc),*],
                    ), )*
                ];
                $($( out.extend(<$fty as $crate::ops::params::Params>::describe()); )*)?
                out
            }
        }
    };
}
pub(crate) use params;

/// Params of an operator that takes none.
#[derive(Debug, Clone, PartialEq)]
pub struct NoParams;

impl Params for NoParams {
    fn read(_: &Obj) -> Option<Self> {
        Some(NoParams)
    }
    fn describe() -> Vec<ParamDoc> {
        vec![]
    }
}

/// A declared range as the docs show it: `, 1 to 64`, or `, at least 0.0` when it
/// has no upper bound.
pub fn range_text(min: &str, max: &str) -> String {
    if max == "f64::INFINITY" {
        format!(", at least {min}")
    } else {
        format!(", {min} to {max}")
    }
}

/// A param's type, range and default in one phrase: `integer, 1 to 64, default 5`.
pub fn type_line(p: &ParamDoc) -> String {
    let mut s = p.ty.to_string();
    if let Some((a, b)) = p.range {
        s += &range_text(a, b);
    }
    match (p.required, p.default) {
        (true, _) => s += ", required",
        (false, Some(d)) => s += &format!(", default {d}"),
        (false, None) => {}
    }
    s
}

/// A `words` param: the word split it names, or an error on the field.
pub fn word_split(o: &Obj, value: &str) -> Option<crate::kernels::quality::WordSplit> {
    let w = crate::kernels::quality::WordSplit::parse(value);
    if w.is_none() {
        o.error(
            "words",
            format!("unknown word split {value:?}, expected whitespace, uax29 or spacy"),
        );
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::reader::Sink;
    use serde_json::json;

    params! {
        /// A test struct.
        pub struct Demo {
            /// The column.
            field: String = "text",
            /// How many.
            n: usize [1, 64] = 5,
            /// Must be given.
            rate: f64,
            /// Maybe.
            cap: Option<u64>,
            /// Lists.
            words: Vec<String>,
            size: ByteSize = "1KiB",
        }
    }

    fn read(v: serde_json::Value) -> (Option<Demo>, Vec<String>) {
        let sink = Sink::default();
        let o = Obj::new(Some(&v), "stages[3].params", &sink);
        let d = Demo::read(&o);
        o.finish();
        let errs = sink.into_errors().0.iter().map(|e| e.to_string()).collect();
        (d, errs)
    }

    #[test]
    fn parses_defaults_ranges_and_reports_every_error_with_its_path() {
        let (d, e) = read(json!({"rate": 2.5}));
        assert!(e.is_empty(), "{e:?}");
        let d = d.unwrap();
        assert_eq!(
            (d.field.as_str(), d.n, d.rate, d.cap, d.words.len(), d.size),
            ("text", 5, 2.5, None, 0, ByteSize(1024))
        );
        let (d, e) = read(json!({"n": 100, "cap": "x", "feild": 1, "words": "a"}));
        assert!(d.is_none());
        assert_eq!(
            e,
            vec![
                "stages[3].params.n: must be between 1 and 64, found 100",
                "stages[3].params.rate: missing required field",
                "stages[3].params.cap: expected a non-negative integer, found a string",
                "stages[3].params.feild: unknown field, expected one of: cap, field, n, rate, size, words",
            ]
        );
    }

    #[test]
    fn describes_every_field() {
        let d = Demo::describe();
        let lines: Vec<String> = d
            .iter()
            .map(|p| format!("{}: {}", p.name, type_line(p)))
            .collect();
        assert_eq!(
            lines,
            vec![
                "field: string, default \"text\"",
                "n: integer, 1 to 64, default 5",
                "rate: number, required",
                "cap: integer, default none",
                "words: list of strings, default []",
                "size: byte size, default \"1KiB\"",
            ]
        );
        assert_eq!(d[0].doc, "The column.");
    }
}
