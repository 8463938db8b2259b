//! The apply phase of a dedup (docs/DEDUP.md): the decisions about one map task's
//! records, read from every reduce task (exact) or from the last label step that ran
//! (near duplicates, which must have converged), and the filter that turns them into
//! `duplicate` rejects and, with `cluster_column`, the `dup_cluster` column. The
//! worker's apply executor runs the filter as the first stage of the apply phase.
use super::error::DedupError;
use super::exact::Decision;
use super::format::{self, EARLIER_NODE, format_id, parse_id};
use super::params::CLUSTER_COLUMN;
use super::propagate::{is_record_step, step_outcome};
use super::shuffle::{ShuffleCtx, read_sections};
use super::substring::Run;
use crate::kernels::FastMap;
use crate::kernels::substring;
use crate::ops::{Drop, Operator, Output, ProcessError, SchemaError, Total};
use crate::protocol::records::{DedupPhase, DedupPhaseKind};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The apply filter of map task `map_task`'s records: their decisions (exact, near
/// duplicates) or the spans to cut (substrings), read from the store.
pub async fn filter_for(
    sc: &ShuffleCtx<'_>,
    d: &DedupPhase,
    map_task: &str,
) -> Result<Arc<dyn Operator>, DedupError> {
    let cutting = match &d.params.kind {
        DedupPhaseKind::Substring {
            min_chars,
            tokens,
            offsets,
            ..
        } => Some((
            *min_chars,
            match tokens.clone().zip(offsets.clone()) {
                Some((t, o)) => Units::Tokens(t, o),
                None => Units::Words,
            },
        )),
        &DedupPhaseKind::Paragraph {
            min_chars, unit, ..
        } => Some((min_chars, Units::Text(unit.into()))),
        _ => None,
    };
    if let Some((min_chars, units)) = cutting {
        let t = map_index(sc, d, map_task)?;
        return Ok(Arc::new(SubstringApply {
            ranges: ranges_for(sc, d.map_phase + 1, t as u64).await?,
            stage: d.stage.clone(),
            field: d.params.key.clone(),
            min_chars,
            units,
        }));
    }
    Ok(Arc::new(Apply {
        decisions: decisions_for(sc, d, map_task).await?,
        cluster_column: d.params.cluster_column,
    }))
}

/// The index of a map task among its phase's sorted task ids (its section).
fn map_index(sc: &ShuffleCtx<'_>, d: &DedupPhase, map_task: &str) -> Result<usize, DedupError> {
    sc.task_ids(d.map_phase)
        .iter()
        .position(|x| x == map_task)
        .ok_or_else(|| DedupError::Plan(format!("map task {map_task} is not in the job")))
}

/// The token ranges to cut from one map task's records, by id: section `section` of
/// every marks object of `phase` (runs of marked windows), the runs to cut merged,
/// less the kept first occurrences (`keep: first`), so a record keeps every window
/// whose first occurrence it holds. Each record's ranges are merged again whenever
/// they have doubled since the last merge, so memory follows the cut spans (plus one
/// reducer's runs), not every run read.
async fn ranges_for(
    sc: &ShuffleCtx<'_>,
    phase: usize,
    section: u64,
) -> Result<FastMap<u128, Vec<(u32, u32)>>, DedupError> {
    #[derive(Default)]
    struct Acc {
        cut: Vec<(u32, u32)>,
        kept: Vec<(u32, u32)>,
        merged: usize,
    }
    let mut acc: FastMap<u128, Acc> = FastMap::default();
    let never = AtomicBool::new(false);
    read_sections(sc, phase, section, &never, |_, uri, b| {
        for m in format::decode::<Run>(&b).map_err(|e| DedupError::format(uri, e))? {
            let a = acc.entry(m.id).or_default();
            let v = if m.kept { &mut a.kept } else { &mut a.cut };
            v.push((m.start, m.end.max(m.start)));
            let n = a.cut.len() + a.kept.len();
            if n > 2 * a.merged + 64 {
                a.cut = substring::merge(std::mem::take(&mut a.cut));
                a.kept = substring::merge(std::mem::take(&mut a.kept));
                a.merged = a.cut.len() + a.kept.len();
            }
        }
        Ok(())
    })
    .await?;
    Ok(acc
        .into_iter()
        .filter_map(|(id, a)| {
            let cut = substring::subtract(&substring::merge(a.cut), &substring::merge(a.kept));
            (!cut.is_empty()).then_some((id, cut))
        })
        .collect())
}

/// The decisions about one map task's records from every reduce task: id →
/// representative (the representative maps to itself).
pub async fn decisions_for(
    sc: &ShuffleCtx<'_>,
    d: &DedupPhase,
    map_task: &str,
) -> Result<FastMap<u128, u128>, DedupError> {
    let reduce_phase = d.map_phase + 1;
    let t = map_index(sc, d, map_task)?;
    if d.params.kind.is_near() {
        return near_decisions_for(sc, d, t).await;
    }
    if d.params.kind.is_semantic() {
        // Centroids, assign, then the reduce that decides.
        return decisions_in(sc, d.map_phase + 3, t as u64).await;
    }
    decisions_in(sc, reduce_phase, t as u64).await
}

/// Section `section` of the decisions objects of every task of `phase` (one map
/// task's decisions): id → representative.
async fn decisions_in(
    sc: &ShuffleCtx<'_>,
    phase: usize,
    section: u64,
) -> Result<FastMap<u128, u128>, DedupError> {
    let mut out = FastMap::default();
    let never = AtomicBool::new(false);
    read_sections(sc, phase, section, &never, |_, uri, b| {
        for dec in format::decode::<Decision>(&b).map_err(|e| DedupError::format(uri, e))? {
            out.insert(dec.id, dec.rep);
        }
        Ok(())
    })
    .await?;
    Ok(out)
}

/// The near-duplicate decisions about one map task's records: from the last record
/// step that ran, which must have changed no label (else the components are not
/// final and the job fails rather than keep near duplicates it missed).
async fn near_decisions_for(
    sc: &ShuffleCtx<'_>,
    d: &DedupPhase,
    t: usize,
) -> Result<FastMap<u128, u128>, DedupError> {
    let phases = &sc.job.manifest.phases;
    let mut q = None;
    for p in (d.map_phase + 1..phases.len()).filter(|&p| is_record_step(&phases[p])) {
        if phases[p].dedup.as_ref().map(|x| &x.stage) != Some(&d.stage) {
            continue;
        }
        let (skipped, changed) = step_outcome(sc, p).await?;
        if skipped {
            break;
        }
        q = Some((p, changed));
    }
    let (q, changed) =
        q.ok_or_else(|| DedupError::Plan("no near-duplicate record step ran".into()))?;
    if changed > 0 {
        return Err(DedupError::NotConverged {
            max_rounds: d.params.max_rounds,
            changed,
            stage: d.stage.clone(),
        });
    }
    decisions_in(sc, q, d.partitions as u64 + t as u64).await
}

/// The apply filter of one map task: its records' decisions (id → representative).
pub struct Apply {
    pub decisions: crate::kernels::FastMap<u128, u128>,
    pub cluster_column: bool,
}

impl Operator for Apply {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        if input.field_with_name(crate::records::ID).is_err() {
            return Err(SchemaError::Other("no id column".into()));
        }
        Ok(if self.cluster_column {
            vec![Field::new(CLUSTER_COLUMN, DataType::Utf8, true)]
        } else {
            vec![]
        })
    }
    /// Never record by record: quarantining a representative would drop its whole
    /// cluster (its duplicates are rejected in favour of it).
    fn splittable(&self) -> bool {
        false
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let ids = batch
            .column_by_name(crate::records::ID)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .ok_or_else(|| ProcessError::MissingColumn(crate::records::ID.into()))?;
        let mut verdicts = Vec::with_capacity(ids.len());
        let mut cluster = Vec::with_capacity(ids.len());
        for i in 0..ids.len() {
            let rep =
                parse_id(ids.value(i)).and_then(|id| self.decisions.get(&id).map(|&rep| (id, rep)));
            match rep {
                // A representative of an earlier corpus (`against`) is marked: never
                // this record, even with the same id.
                Some((id, rep)) if id != rep => {
                    let rep = format_id(rep & !EARLIER_NODE);
                    verdicts.push(Some(Drop {
                        reason: "duplicate",
                        detail: Some(rep.clone()),
                    }));
                    cluster.push(Some(rep));
                }
                Some((_, rep)) => {
                    verdicts.push(None);
                    cluster.push(Some(format_id(rep)));
                }
                None => {
                    verdicts.push(None);
                    cluster.push(None);
                }
            }
        }
        let added: Vec<ArrayRef> = if self.cluster_column {
            vec![Arc::new(StringArray::from(cluster))]
        } else {
            vec![]
        };
        Ok(Output::annotated(added, verdicts))
    }
}

/// The columns a substring dedup stage adds: `<stage>_removed_bytes` (UInt64), the
/// bytes it cut from each record's text, and `<stage>_removed_spans` (UInt32), the
/// spans (named by the stage, so two substring stages, or a second pass over an
/// earlier output, do not clash).
pub fn removed_columns(stage: &str) -> [String; 2] {
    [
        format!("{stage}_removed_bytes"),
        format!("{stage}_removed_spans"),
    ]
}
/// The reject reason of a record a substring dedup left too short.
pub const SUBSTRING_DUPLICATE: &str = "substring_duplicate";
/// The reject reason of a record a paragraph dedup left too short.
pub const PARAGRAPH_DUPLICATE: &str = "paragraph_duplicate";

/// The columns a substring dedup's apply adds after the text (docs/DEDUP.md).
pub fn substring_fields(stage: &str) -> Vec<Field> {
    let [b, s] = removed_columns(stage);
    vec![
        Field::new(b, DataType::UInt64, false),
        Field::new(s, DataType::UInt32, false),
    ]
}

/// The apply stage of an exact-substring dedup: cuts each record's marked token
/// ranges out of its text (the column `field`, rewritten), counts what it cut
/// ([`removed_columns`]), reports every cut span (its side table:
/// record id, byte range in the text as it reached the stage) and rejects a record
/// left with fewer than `min_chars` non-whitespace characters.
pub struct SubstringApply {
    /// Merged token ranges to cut, by record id.
    pub ranges: FastMap<u128, Vec<(u32, u32)>>,
    /// The dedup stage's name (its columns are named after it).
    pub stage: String,
    pub field: String,
    pub min_chars: u32,
    /// What the marked positions count.
    pub units: Units,
}

/// What a cutting dedup's positions count: the units of its windows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Units {
    /// Whitespace words of the text (substring).
    Words,
    /// A tokenizer's tokens: the token ids and byte offsets columns (substring with
    /// `tokens` and `offsets`).
    Tokens(String, String),
    /// Lines or paragraphs of the text (paragraph).
    Text(crate::kernels::paragraph::Unit),
}

/// The reject reason of a record whose token offsets do not fit its text or its
/// token ids (a substring dedup over a tokenizer's tokens cannot cut it).
pub const BAD_TOKEN_OFFSETS: &str = "bad_token_offsets";

/// A list column's rows as slices of u32 (`tokenize`'s ids and offsets).
fn u32_lists<'a>(
    batch: &'a RecordBatch,
    column: &str,
) -> Result<(&'a arrow_array::ListArray, &'a [u32]), ProcessError> {
    let wrong = || ProcessError::WrongType {
        column: column.to_string(),
        expected: "a list of uint32",
    };
    let l = batch
        .column_by_name(column)
        .ok_or_else(|| ProcessError::MissingColumn(column.to_string()))?
        .as_any()
        .downcast_ref::<arrow_array::ListArray>()
        .ok_or_else(wrong)?;
    let v = l
        .values()
        .as_any()
        .downcast_ref::<arrow_array::UInt32Array>()
        .ok_or_else(wrong)?;
    Ok((l, v.values()))
}

fn row<'a>(l: &arrow_array::ListArray, v: &'a [u32], i: usize) -> &'a [u32] {
    let o = l.value_offsets();
    if l.is_null(i) {
        &[]
    } else {
        &v[o[i] as usize..o[i + 1] as usize]
    }
}

impl SubstringApply {
    fn table_schema() -> arrow_schema::SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new(crate::records::ID, DataType::Utf8, false),
            Field::new("start", DataType::UInt64, false),
            Field::new("end", DataType::UInt64, false),
        ]))
    }
}

impl Operator for SubstringApply {
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        if input.field_with_name(crate::records::ID).is_err() {
            return Err(SchemaError::Other("no id column".into()));
        }
        crate::ops::require_text_param(input, "params.key", &self.field)?;
        let text = input
            .field_with_name(&self.field)
            .map_err(|e| SchemaError::Other(e.to_string()))?;
        let mut f = vec![text.clone()];
        f.extend(substring_fields(&self.stage));
        Ok(f)
    }
    fn replaces(&self) -> bool {
        true
    }
    /// Never record by record: quarantining the record that holds a span's kept first
    /// occurrence would lose the span from the corpus.
    fn splittable(&self) -> bool {
        false
    }
    fn histograms(&self) -> Vec<String> {
        removed_columns(&self.stage).into()
    }
    fn totals(&self) -> Vec<Total> {
        removed_columns(&self.stage)
            .map(|column| Total {
                column,
                by: vec![],
                by_source: true,
            })
            .into()
    }
    fn table(&self) -> Option<arrow_schema::SchemaRef> {
        Some(Self::table_schema())
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        let ids = batch
            .column_by_name(crate::records::ID)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .ok_or_else(|| ProcessError::MissingColumn(crate::records::ID.into()))?;
        let texts = batch
            .column_by_name(&self.field)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .ok_or_else(|| ProcessError::MissingColumn(self.field.clone()))?;
        let n = batch.num_rows();
        // Most batches of a corpus lose nothing: their text column goes on as it is.
        let cuts_any = (0..n).any(|i| {
            texts.is_valid(i)
                && parse_id(ids.value(i)).is_some_and(|id| self.ranges.contains_key(&id))
        });
        if !cuts_any {
            let table = RecordBatch::new_empty(Self::table_schema());
            return Ok(Output::annotated(
                vec![
                    batch
                        .column_by_name(&self.field)
                        .expect("read above")
                        .clone(),
                    Arc::new(UInt64Array::from(vec![0u64; n])),
                    Arc::new(UInt32Array::from(vec![0u32; n])),
                ],
                vec![None; n],
            )
            .with_table(table));
        }
        let (mut text, mut bytes, mut spans) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let mut verdicts = Vec::with_capacity(n);
        let (mut t_id, mut t_start, mut t_end) = (Vec::new(), Vec::new(), Vec::new());
        let token_cols = match &self.units {
            Units::Tokens(t, o) => Some((u32_lists(batch, t)?, u32_lists(batch, o)?)),
            _ => None,
        };
        for i in 0..n {
            let ranges = (!texts.is_null(i))
                .then(|| parse_id(ids.value(i)))
                .flatten()
                .and_then(|id| self.ranges.get(&id));
            let Some(ranges) = ranges else {
                text.push(texts.is_valid(i).then(|| texts.value(i).to_string()));
                bytes.push(0u64);
                spans.push(0u32);
                verdicts.push(None);
                continue;
            };
            let t = texts.value(i);
            let toks = match (&token_cols, &self.units) {
                (Some(((il, iv), (ol, ov))), _) => {
                    let (tid, off) = (row(il, iv, i), row(ol, ov, i));
                    substring::offset_tokens(t, off).filter(|x| x.len() == tid.len())
                }
                (None, Units::Text(u)) => Some(crate::kernels::paragraph::units(t, *u)),
                (None, _) => Some(substring::tokens(t)),
            };
            let Some(toks) = toks else {
                text.push(Some(t.to_string()));
                bytes.push(0u64);
                spans.push(0u32);
                verdicts.push(Some(Drop {
                    reason: BAD_TOKEN_OFFSETS,
                    detail: Some("the token offsets do not fit the text or its token ids".into()),
                }));
                continue;
            };
            let cut =
                Some((t, substring::byte_spans(&toks, ranges))).filter(|(_, s)| !s.is_empty());
            let Some((t, s)) = cut else {
                text.push(texts.is_valid(i).then(|| texts.value(i).to_string()));
                bytes.push(0u64);
                spans.push(0u32);
                verdicts.push(None);
                continue;
            };
            let kept = substring::cut(t, &s);
            let removed: u64 = s.iter().map(|&(a, z)| u64::from(z - a)).sum();
            for &(a, z) in &s {
                t_id.push(ids.value(i));
                t_start.push(u64::from(a));
                t_end.push(u64::from(z));
            }
            let left = kept.chars().filter(|c| !c.is_whitespace()).count();
            verdicts.push((left < self.min_chars as usize).then(|| match self.units {
                Units::Text(u) => Drop {
                    reason: PARAGRAPH_DUPLICATE,
                    detail: Some(format!(
                        "{removed} of {} bytes in {} {} repeat elsewhere ({} spans); {left} characters left",
                        t.len(),
                        ranges.iter().map(|&(a, z)| z.min(toks.len() as u32).saturating_sub(a)).sum::<u32>(),
                        u.plural(),
                        s.len()
                    )),
                },
                _ => Drop {
                    reason: SUBSTRING_DUPLICATE,
                    detail: Some(format!(
                        "{removed} of {} bytes in {} spans repeat elsewhere; {left} characters left",
                        t.len(),
                        s.len()
                    )),
                },
            }));
            text.push(Some(kept));
            bytes.push(removed);
            spans.push(s.len() as u32);
        }
        let table = RecordBatch::try_new(
            Self::table_schema(),
            vec![
                Arc::new(StringArray::from(t_id)),
                Arc::new(UInt64Array::from(t_start)),
                Arc::new(UInt64Array::from(t_end)),
            ],
        )?;
        Ok(Output::annotated(
            vec![
                Arc::new(StringArray::from(text)),
                Arc::new(UInt64Array::from(bytes)),
                Arc::new(UInt32Array::from(spans)),
            ],
            verdicts,
        )
        .with_table(table))
    }
}
