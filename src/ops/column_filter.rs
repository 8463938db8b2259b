//! `column_filter`: keeps or drops records by the value of one column that an earlier
//! stage wrote, so any score (a model's, a quality signal's, a language's) can drop
//! records without a filter per model. Rules, all of which a record must pass:
//! `min`/`max` (inclusive) for a numeric column, `is` for a boolean one, `one_of` /
//! `none_of` for a string label. A record that fails is a reject whose reason names
//! the column (`reason` overrides it) and whose detail gives the value and the rule;
//! a null (or NaN) value is `missing_<column>` unless `keep_missing`.
use super::params::{Params, params};
use super::{Drop, OpDef, Operator, Output, ProcessError, SchemaError};
use crate::spec::reader::Obj;
use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::collections::{BTreeSet, HashSet};
use std::sync::{Mutex, OnceLock};

pub const DEF: OpDef = OpDef {
    name: "column_filter",
    summary: "drops records by a column's value: numeric bounds, a boolean, a label set",
    params: ColumnFilterParams::describe,
    example: r#"{"column": "int_score", "min": 3}"#,
    feature: None,
    build: Some(build),
};

params! {
    /// `column_filter`: set at least one rule; a record must pass every rule given.
    pub struct ColumnFilterParams {
        /// The column to test (written by an earlier stage or read from the input).
        column: String,
        /// The least value kept (inclusive), for a numeric column.
        min: Option<f64>,
        /// The greatest value kept (inclusive), for a numeric column.
        max: Option<f64>,
        /// The value kept, for a boolean column.
        is: Option<bool>,
        /// The labels kept, for a string column (a label not listed is dropped).
        one_of: Vec<String>,
        /// The labels dropped, for a string column.
        none_of: Vec<String>,
        /// Keep records whose value is null (or NaN) instead of rejecting them as
        /// `missing_<column>`.
        keep_missing: bool = false,
        /// The reject reason; default: the column's name.
        reason: Option<String>,
    }
}

struct ColumnFilter {
    column: String,
    min: Option<f64>,
    max: Option<f64>,
    is: Option<bool>,
    one_of: Option<HashSet<String>>,
    none_of: HashSet<String>,
    keep_missing: bool,
    reason: &'static str,
    missing: &'static str,
}

/// A reject reason made at build time, as the `&'static str` that [`Drop`] carries.
/// Interned, so building the same spec again (validation, planning, every task) does
/// not leak: the memory is bounded by the distinct reasons of the specs seen.
fn intern(s: String) -> &'static str {
    static SEEN: OnceLock<Mutex<BTreeSet<&'static str>>> = OnceLock::new();
    let mut seen = SEEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(r) = seen.get(s.as_str()) {
        return r;
    }
    let r: &'static str = Box::leak(s.into_boxed_str());
    seen.insert(r);
    r
}

/// A reason is a short token: reports group rejects by it.
fn valid_reason(r: &str) -> bool {
    !r.is_empty()
        && r.len() <= 64
        && r.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = ColumnFilterParams::read(o)?;
    let any = p.min.is_some()
        || p.max.is_some()
        || p.is.is_some()
        || !p.one_of.is_empty()
        || !p.none_of.is_empty();
    if !any {
        o.error(
            "column",
            "set a rule: min and/or max (numbers), is (a boolean), one_of or none_of (labels)",
        );
    }
    for (key, v) in [("min", p.min), ("max", p.max)] {
        if v.is_some_and(|v| !v.is_finite()) {
            o.error(key, "must be a finite number");
        }
    }
    if let (Some(lo), Some(hi)) = (p.min, p.max)
        && lo > hi
    {
        o.error("max", format!("must be at least min ({lo}), found {hi}"));
    }
    let numeric = p.min.is_some() || p.max.is_some();
    let labels = !p.one_of.is_empty() || !p.none_of.is_empty();
    if [numeric, p.is.is_some(), labels]
        .iter()
        .filter(|x| **x)
        .count()
        > 1
    {
        o.error(
            "column",
            "one column has one type: use min/max (numeric), is (boolean) or one_of/none_of (labels), not several",
        );
    }
    if let Some(l) = p.one_of.iter().find(|l| p.none_of.contains(l)) {
        o.error("none_of", format!("{l:?} is also in one_of"));
    }
    let reason = p.reason.clone().unwrap_or_else(|| p.column.clone());
    if !valid_reason(&reason) {
        let key = if p.reason.is_some() {
            "reason"
        } else {
            "column"
        };
        o.error(
            key,
            format!(
                "{reason:?} cannot be a reject reason (letters, digits, _ - . and at most 64 characters); set `reason`"
            ),
        );
    }
    Some(Box::new(ColumnFilter {
        missing: intern(format!("missing_{reason}")),
        reason: intern(reason),
        column: p.column,
        min: p.min,
        max: p.max,
        is: p.is,
        one_of: (!p.one_of.is_empty()).then(|| p.one_of.into_iter().collect()),
        none_of: p.none_of.into_iter().collect(),
        keep_missing: p.keep_missing,
    }))
}

fn is_numeric(t: &DataType) -> bool {
    t.is_integer() || t.is_floating()
}

fn is_label(t: &DataType) -> bool {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => is_label(v),
        _ => false,
    }
}

impl ColumnFilter {
    fn missing(&self) -> Option<Drop> {
        (!self.keep_missing).then_some(Drop {
            reason: self.missing,
            detail: None,
        })
    }

    fn drop(&self, detail: String) -> Option<Drop> {
        Some(Drop {
            reason: self.reason,
            detail: Some(detail),
        })
    }

    fn number(&self, v: f64) -> Option<Drop> {
        if v.is_nan() {
            return self.missing();
        }
        if let Some(m) = self.min.filter(|m| v < *m) {
            return self.drop(format!("{v} < min {m}"));
        }
        if let Some(m) = self.max.filter(|m| v > *m) {
            return self.drop(format!("{v} > max {m}"));
        }
        None
    }

    /// [`number`](Self::number) for an integer, compared exactly (an `i64` beyond
    /// 2^53 rounds as a float: 2^53 + 1 would pass `max: 9007199254740992`).
    fn integer(&self, v: i128) -> Option<Drop> {
        // v < m ⇔ v < ⌈m⌉ and v > m ⇔ v > ⌊m⌋ for an integer v (the casts saturate).
        if let Some(m) = self.min.filter(|m| v < m.ceil() as i128) {
            return self.drop(format!("{v} < min {m}"));
        }
        if let Some(m) = self.max.filter(|m| v > m.floor() as i128) {
            return self.drop(format!("{v} > max {m}"));
        }
        None
    }

    fn label(&self, v: &str) -> Option<Drop> {
        if self.one_of.as_ref().is_some_and(|s| !s.contains(v)) {
            return self.drop(format!("{v:?} not in one_of"));
        }
        if self.none_of.contains(v) {
            return self.drop(format!("{v:?} in none_of"));
        }
        None
    }
}

impl Operator for ColumnFilter {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        let f = input
            .field_with_name(&self.column)
            .map_err(|_| SchemaError::missing("column", &self.column, "", input))?;
        let t = f.data_type();
        let wrong = |param: &str, expected: &str| SchemaError::WrongType {
            param: param.into(),
            column: self.column.clone(),
            found: t.clone(),
            expected: expected.into(),
        };
        if (self.min.is_some() || self.max.is_some()) && !is_numeric(t) {
            let param = if self.min.is_some() { "min" } else { "max" };
            return Err(wrong(param, "expected a number column for min/max"));
        }
        if self.is.is_some() && t != &DataType::Boolean {
            return Err(wrong("is", "expected a boolean column for is"));
        }
        if (self.one_of.is_some() || !self.none_of.is_empty()) && !is_label(t) {
            let param = if self.one_of.is_some() {
                "one_of"
            } else {
                "none_of"
            };
            return Err(wrong(param, "expected a string column for one_of/none_of"));
        }
        Ok(vec![])
    }

    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let col = batch
            .column_by_name(&self.column)
            .ok_or_else(|| ProcessError::MissingColumn(self.column.clone()))?;
        let numeric = self.min.is_some() || self.max.is_some();
        let verdicts: Vec<Option<Drop>> = if numeric && col.data_type().is_signed_integer() {
            let v = arrow_cast::cast(col, &DataType::Int64)?;
            let v = v.as_primitive::<arrow_array::types::Int64Type>();
            (0..v.len())
                .map(|i| match v.is_null(i) {
                    true => self.missing(),
                    false => self.integer(v.value(i).into()),
                })
                .collect()
        } else if numeric && col.data_type().is_unsigned_integer() {
            let v = arrow_cast::cast(col, &DataType::UInt64)?;
            let v = v.as_primitive::<arrow_array::types::UInt64Type>();
            (0..v.len())
                .map(|i| match v.is_null(i) {
                    true => self.missing(),
                    false => self.integer(v.value(i).into()),
                })
                .collect()
        } else if numeric {
            let v = arrow_cast::cast(col, &DataType::Float64)?;
            let v = v.as_primitive::<arrow_array::types::Float64Type>();
            (0..v.len())
                .map(|i| {
                    if v.is_null(i) {
                        self.missing()
                    } else {
                        self.number(v.value(i))
                    }
                })
                .collect()
        } else if let Some(want) = self.is {
            let v = col
                .as_boolean_opt()
                .ok_or_else(|| ProcessError::WrongType {
                    column: self.column.clone(),
                    expected: "a boolean",
                })?;
            (0..v.len())
                .map(|i| match v.is_null(i) {
                    true => self.missing(),
                    false if v.value(i) == want => None,
                    false => self.drop(format!("{} is not {want}", v.value(i))),
                })
                .collect()
        } else {
            let v = arrow_cast::cast(col, &DataType::Utf8)?;
            let v = v.as_string::<i32>();
            (0..v.len())
                .map(|i| match v.is_null(i) {
                    true => self.missing(),
                    false => self.label(v.value(i)),
                })
                .collect()
        };
        Ok(Output::verdicts(verdicts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::build;
    use arrow_array::{
        ArrayRef, BooleanArray, DictionaryArray, Float32Array, Int64Array, StringArray,
        types::Int32Type,
    };
    use serde_json::json;
    use std::sync::Arc;

    fn batch(col: ArrayRef) -> RecordBatch {
        let schema = Schema::new(vec![Field::new("c", col.data_type().clone(), true)]);
        RecordBatch::try_new(Arc::new(schema), vec![col]).unwrap()
    }

    /// Each record's (reason, detail) or None, after the schema check.
    fn run(params: serde_json::Value, col: ArrayRef) -> Vec<Option<(String, Option<String>)>> {
        let op = build(&DEF, params).unwrap();
        let b = batch(col);
        op.output_fields(b.schema().as_ref()).unwrap();
        op.process(&b)
            .unwrap()
            .verdicts
            .unwrap()
            .into_iter()
            .map(|d| d.map(|d| (d.reason.to_string(), d.detail)))
            .collect()
    }

    fn reasons(v: &[Option<(String, Option<String>)>]) -> Vec<Option<&str>> {
        v.iter()
            .map(|d| d.as_ref().map(|(r, _)| r.as_str()))
            .collect()
    }

    #[test]
    fn numeric_bounds_are_inclusive_and_nan_is_missing() {
        let col: ArrayRef = Arc::new(Float32Array::from(vec![
            Some(2.9),
            Some(3.0),
            Some(4.5),
            Some(5.0),
            Some(5.1),
            None,
            Some(f32::NAN),
        ]));
        let v = run(json!({"column": "c", "min": 3, "max": 5}), col.clone());
        assert_eq!(
            reasons(&v),
            [
                Some("c"),
                None,
                None,
                None,
                Some("c"),
                Some("missing_c"),
                Some("missing_c")
            ]
        );
        assert_eq!(
            v[0].as_ref().unwrap().1.as_deref(),
            Some("2.9000000953674316 < min 3")
        );
        assert_eq!(
            v[4].as_ref().unwrap().1.as_deref(),
            Some("5.099999904632568 > max 5")
        );
        let kept = run(
            json!({"column": "c", "min": 3, "keep_missing": true, "reason": "edu_score"}),
            col,
        );
        assert_eq!(
            reasons(&kept),
            [Some("edu_score"), None, None, None, None, None, None]
        );
        // Integer columns too (FineWeb-Edu's int_score ≥ 3).
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![0, 3, 5]));
        assert_eq!(
            reasons(&run(json!({"column": "c", "min": 3}), ints)),
            [Some("c"), None, None]
        );
    }

    #[test]
    fn integers_beyond_2_pow_53_compare_exactly() {
        // As floats, 2^53 + 1 rounds to 2^53 and passed `max: 2^53`.
        let big: ArrayRef = Arc::new(Int64Array::from(vec![
            Some(1 << 53),
            Some((1 << 53) + 1),
            Some(i64::MAX),
            Some(i64::MIN),
            None,
        ]));
        let v = run(
            json!({"column": "c", "max": 9007199254740992u64}),
            big.clone(),
        );
        assert_eq!(
            reasons(&v),
            [None, Some("c"), Some("c"), None, Some("missing_c")]
        );
        assert_eq!(
            v[1].as_ref().unwrap().1.as_deref(),
            Some("9007199254740993 > max 9007199254740992")
        );
        let v = run(json!({"column": "c", "min": -2.5, "max": 1e300}), big);
        assert_eq!(
            reasons(&v),
            [None, None, None, Some("c"), Some("missing_c")]
        );
        let u: ArrayRef = Arc::new(arrow_array::UInt64Array::from(vec![u64::MAX, 3, 2]));
        assert_eq!(
            reasons(&run(json!({"column": "c", "min": 2.5, "max": 1.8e19}), u)),
            [Some("c"), None, Some("c")]
        );
    }

    #[test]
    fn booleans_and_label_sets() {
        let b: ArrayRef = Arc::new(BooleanArray::from(vec![Some(true), Some(false), None]));
        assert_eq!(
            reasons(&run(json!({"column": "c", "is": false}), b)),
            [Some("c"), None, Some("missing_c")]
        );
        let s: ArrayRef = Arc::new(StringArray::from(vec![
            Some("en"),
            Some("de"),
            Some("fr"),
            None,
        ]));
        assert_eq!(
            reasons(&run(
                json!({"column": "c", "one_of": ["en", "de"]}),
                s.clone()
            )),
            [None, None, Some("c"), Some("missing_c")]
        );
        let v = run(json!({"column": "c", "none_of": ["de"]}), s);
        assert_eq!(reasons(&v), [None, Some("c"), None, Some("missing_c")]);
        assert_eq!(
            v[1].as_ref().unwrap().1.as_deref(),
            Some("\"de\" in none_of")
        );
        let dict: ArrayRef = Arc::new(
            vec!["hq", "lq", "hq"]
                .into_iter()
                .collect::<DictionaryArray<Int32Type>>(),
        );
        assert_eq!(
            reasons(&run(json!({"column": "c", "one_of": ["hq"]}), dict)),
            [None, Some("c"), None]
        );
    }

    #[test]
    fn bad_params_are_refused_naming_the_field() {
        let err = |p| build(&DEF, p).err().unwrap();
        assert_eq!(
            err(json!({"column": "c"})),
            [
                "params.column: set a rule: min and/or max (numbers), is (a boolean), one_of or none_of (labels)"
            ]
        );
        assert_eq!(
            err(json!({"column": "c", "min": 5, "max": 1})),
            ["params.max: must be at least min (5), found 1"]
        );
        assert_eq!(
            err(json!({"column": "c", "min": 1, "is": true})),
            [
                "params.column: one column has one type: use min/max (numeric), is (boolean) or one_of/none_of (labels), not several"
            ]
        );
        assert_eq!(
            err(json!({"column": "c", "one_of": ["a"], "none_of": ["a"]})),
            ["params.none_of: \"a\" is also in one_of"]
        );
        assert_eq!(
            err(json!({"column": "a b", "min": 1})),
            [
                "params.column: \"a b\" cannot be a reject reason (letters, digits, _ - . and at most 64 characters); set `reason`"
            ]
        );
        assert_eq!(
            err(json!({"column": "c", "min": 1, "mni": 2})),
            [
                "params.mni: unknown field, expected one of: column, is, keep_missing, max, min, none_of, one_of, reason"
            ]
        );
    }

    #[test]
    fn the_rule_must_fit_the_column_type() {
        let s = batch(Arc::new(StringArray::from(vec!["x"])));
        let op = build(&DEF, json!({"column": "c", "min": 1})).unwrap();
        let e = op
            .output_fields(s.schema().as_ref())
            .unwrap_err()
            .to_string();
        assert!(e.contains("min") && e.contains("number"), "{e}");
        let op = build(&DEF, json!({"column": "c", "is": true})).unwrap();
        let e = op
            .output_fields(s.schema().as_ref())
            .unwrap_err()
            .to_string();
        assert!(e.contains("is") && e.contains("boolean"), "{e}");
        let f = batch(Arc::new(Float32Array::from(vec![1.0])));
        let op = build(&DEF, json!({"column": "c", "one_of": ["x"]})).unwrap();
        let e = op
            .output_fields(f.schema().as_ref())
            .unwrap_err()
            .to_string();
        assert!(e.contains("one_of") && e.contains("string"), "{e}");
        let op = build(&DEF, json!({"column": "score", "min": 1})).unwrap();
        let e = op
            .output_fields(f.schema().as_ref())
            .unwrap_err()
            .to_string();
        assert!(e.contains("score"), "{e}");
    }

    #[test]
    fn reasons_are_interned() {
        let a = intern("some_reason".to_string());
        let b = intern("some_reason".to_string());
        assert!(std::ptr::eq(a, b));
    }
}
