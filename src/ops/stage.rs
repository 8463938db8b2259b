//! Running one stage: the schema after it ([`output_schema`]), the columns whose
//! distributions it records, and [`run_stage`], which applies its operator to a batch:
//! added or replaced columns, then the verdicts, with rejected records kept as they
//! arrived and every reject stamped with the stage's name.
use super::{OpError, Operator, Output, ProcessError, SchemaError};
use crate::records::Reject;
use arrow_array::{Array, BooleanArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use std::sync::Arc;

/// The schema after a stage, or what does not fit.
pub fn output_schema(op: &dyn Operator, input: &SchemaRef) -> Result<SchemaRef, SchemaError> {
    let replaces = op.replaces();
    let added = op.output_fields(input)?;
    let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
    for f in added {
        match input.index_of(f.name()) {
            Ok(i) if replaces && input.field(i).data_type() == f.data_type() => fields[i] = f,
            Ok(_) => return Err(SchemaError::Exists(f.name().clone())),
            Err(_) => fields.push(f),
        }
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// Applies one stage to a batch: the kept rows (with added columns, in `out_schema`)
/// and the rejects.
pub fn run_stage(
    stage: &str,
    op: &dyn Operator,
    batch: RecordBatch,
    out_schema: &SchemaRef,
    keep_records: bool,
) -> Result<(RecordBatch, Vec<Reject>), OpError> {
    run_stage_observed(stage, op, batch, out_schema, keep_records, &mut |_, _| {})
}

/// The columns whose distributions a stage records (see [`run_stage_observed`]):
/// every float column it writes (scores) and the integer ones its operator names
/// (lengths, sizes; not hashes).
pub fn histogram_columns(op: &dyn Operator, input: &Schema) -> Vec<String> {
    let named = op.histograms();
    op.output_fields(input)
        .unwrap_or_default()
        .iter()
        .filter(|f| {
            matches!(f.data_type(), DataType::Float32 | DataType::Float64)
                || named.contains(f.name())
        })
        .map(|f| f.name().clone())
        .collect()
}

/// [`run_stage`], handing `observe` the batch with the stage's columns added and no
/// row dropped yet (an operator's scores for the records it rejects too), and the
/// rows the operator gave its side table, if any.
pub fn run_stage_observed(
    stage: &str,
    op: &dyn Operator,
    batch: RecordBatch,
    out_schema: &SchemaRef,
    keep_records: bool,
    observe: &mut dyn FnMut(&RecordBatch, Option<RecordBatch>),
) -> Result<(RecordBatch, Vec<Reject>), OpError> {
    let err = |e: &dyn std::fmt::Display| OpError::new(stage, e);
    inject_panic(stage, &batch);
    let Output {
        columns,
        verdicts,
        table,
    } = op
        .process(&batch)
        .map_err(|e| OpError::process(stage, &e))?;
    if let Some(v) = &verdicts
        && v.len() != batch.num_rows()
    {
        return Err(err(&"returned the wrong number of verdicts"));
    }
    // Rejected records are kept as they arrived, before any rewrite.
    let original = batch.clone();
    let batch = if columns.is_empty() {
        batch
    } else {
        let mut cols = batch.columns().to_vec();
        let in_schema = batch.schema();
        // Output fields in order: replaced ones keep their position, new ones follow.
        let fields = op.output_fields(&in_schema).map_err(|e| err(&e))?;
        if fields.len() != columns.len() {
            return Err(err(&"returned the wrong number of columns"));
        }
        for (field, a) in fields.iter().zip(columns) {
            match in_schema.index_of(field.name()) {
                Ok(i) if op.replaces() => cols[i] = a,
                _ => cols.push(a),
            }
        }
        RecordBatch::try_new(out_schema.clone(), cols)
            .map_err(|e| err(&format!("produced a bad batch: {e}")))?
    };
    if let Some(t) = &table {
        match op.table() {
            Some(schema) if t.schema() == schema => {}
            _ => return Err(err(&"returned side table rows of another schema")),
        }
    }
    observe(&batch, table);
    let Some(verdicts) = verdicts.filter(|v| v.iter().any(Option::is_some)) else {
        return Ok((batch, vec![]));
    };
    let keep = BooleanArray::from(verdicts.iter().map(Option::is_none).collect::<Vec<_>>());
    // The rejected rows are copied only when their records are kept.
    let records = if keep_records {
        let dropped_mask =
            BooleanArray::from(verdicts.iter().map(Option::is_some).collect::<Vec<_>>());
        let dropped = arrow_select::filter::filter_record_batch(&original, &dropped_mask)
            .map_err(|e| err(&e))?;
        crate::records::rows_as_json(&dropped)
    } else {
        vec![]
    };
    let ids = id_column(&original).map_err(|e| err(&e))?;
    let mut records = records.into_iter();
    let rejects = verdicts
        .into_iter()
        .enumerate()
        .filter_map(|(row, d)| {
            d.map(|d| Reject {
                id: ids.value(row).to_string(),
                reason: d.reason.to_string(),
                operator: stage.to_string(),
                detail: d.detail,
                record: records.next(),
            })
        })
        .collect();
    let kept = arrow_select::filter::filter_record_batch(&batch, &keep).map_err(|e| err(&e))?;
    Ok((kept, rejects))
}

/// Panics as `MDF_FAULTS` rule `panic:<stage>:<substring>` says (tests only): when a
/// string value of a record of the batch contains the substring. The panic is a real
/// one, inside the stage, so the worker's handling of operator panics is tested whole.
fn inject_panic(stage: &str, batch: &RecordBatch) {
    for sub in crate::store::fault::panic_rules()
        .iter()
        .filter(|(s, _)| s == stage)
        .map(|(_, sub)| sub)
    {
        let hit = batch.columns().iter().any(|c| {
            c.as_any()
                .downcast_ref::<StringArray>()
                .is_some_and(|a| a.iter().flatten().any(|v| v.contains(sub.as_str())))
        });
        if hit {
            panic!("injected panic in stage {stage}: a record contains {sub:?}");
        }
    }
}

fn id_column(batch: &RecordBatch) -> Result<&StringArray, ProcessError> {
    batch
        .column_by_name(crate::records::ID)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or(ProcessError::WrongType {
            column: crate::records::ID.to_string(),
            expected: "a string id column",
        })
}
