//! The map side of a dedup (docs/DEDUP.md, pass 1): the key entries of a batch's
//! records, read from the key column (16-byte keys, MinHash signatures or perceptual
//! hashes) and the `keep` column, as raw fixed-size entries for [`super::KeySpill`].
//! Records without a key have no entries.
use super::error::KeyError;
use super::exact::KeyEntry;
use super::format::parse_id;
use super::near::append_entries;
use super::params::{DedupKind, DedupParams, Keep};
use super::sort::Fixed;
use super::substring::WindowEntry;
use arrow_array::{
    Array, ArrayRef, FixedSizeBinaryArray, FixedSizeListArray, Float32Array, RecordBatch,
    StringArray,
};
use arrow_schema::DataType;

/// The bytes of one map-side key entry of a dedup stage whose map phase outputs
/// `schema` (a semantic entry holds the key column's vector).
pub fn entry_size(p: &DedupParams, schema: &arrow_schema::Schema) -> usize {
    if let DedupKind::Semantic { .. } = p.kind
        && let Some(d) = schema
            .field_with_name(&p.key)
            .ok()
            .and_then(|f| crate::kernels::semantic::dim_of(f.data_type()))
    {
        return crate::kernels::semantic::entry_bytes(d);
    }
    p.kind.entry_bytes() as usize
}

/// Appends the key entries of a batch (raw, [`entry_size`] bytes each): exact keys
/// as [`KeyEntry`], near-duplicate values as one entry per band
/// ([`super::near::NearEntry`]). Records without a key have no entries.
pub fn append_keys(
    batch: &RecordBatch,
    p: &DedupParams,
    out: &mut Vec<u8>,
) -> Result<(), KeyError> {
    let ids = batch
        .column_by_name(crate::records::ID)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or(KeyError::NoIdColumn)?;
    if let DedupKind::Substring {
        min_tokens,
        tokens,
        offsets,
        ..
    } = &p.kind
    {
        let k = *min_tokens as usize;
        return match tokens.as_ref().zip(offsets.as_ref()) {
            Some((t, o)) => append_id_windows(batch, ids, [&p.key, t, o], k, out),
            None => append_windows(batch, ids, &p.key, out, |chunk| {
                crate::kernels::substring::batch_window_hashes(chunk, k)
            }),
        };
    }
    if let DedupKind::Paragraph {
        unit, normalize, ..
    } = p.kind
    {
        return append_windows(batch, ids, &p.key, out, |chunk| {
            crate::kernels::paragraph::batch_unit_hashes(chunk, unit, normalize)
        });
    }
    let ranks: Option<Vec<f64>> = match &p.keep {
        Keep::LowestId => None,
        Keep::Highest(c) => {
            let col = batch
                .column_by_name(c)
                .ok_or_else(|| KeyError::NoRankColumn(c.clone()))?;
            let f = arrow_cast::cast(col, &DataType::Float64)?;
            let f = f
                .as_any()
                .downcast_ref::<arrow_array::Float64Array>()
                .expect("cast to f64");
            Some(
                (0..f.len())
                    .map(|i| {
                        if f.is_null(i) || f.value(i).is_nan() {
                            f64::NEG_INFINITY
                        } else {
                            f.value(i)
                        }
                    })
                    .collect(),
            )
        }
        Keep::NearestCentroid => None,
    };
    if let DedupKind::Semantic { seed, .. } = p.kind {
        return append_vectors(batch, ids, &p.key, seed, ranks.as_deref(), out);
    }
    let col = batch
        .column_by_name(&p.key)
        .ok_or_else(|| KeyError::NoKeyColumn(p.key.clone()))?;
    let values = KeyValues::of(col, &p.kind)?;
    out.reserve(batch.num_rows() * p.kind.entry_bytes() as usize);
    let mut buf = Vec::new();
    for i in 0..batch.num_rows() {
        if !values.get(i, &mut buf)? {
            continue;
        }
        let id = parse_id(ids.value(i)).ok_or_else(|| KeyError::BadId(ids.value(i).to_string()))?;
        let rank = ranks.as_ref().map_or(0.0, |r| r[i]);
        match &p.kind {
            DedupKind::Exact => KeyEntry {
                key: u128::from_le_bytes(buf[..16].try_into().expect("16 bytes")),
                id,
                rank,
            }
            .put(out),
            kind => append_entries(kind, &buf, id, rank, out),
        }
    }
    Ok(())
}

/// Exact substrings and paragraphs: one [`WindowEntry`] per window (of `k` words, or
/// one unit) of each record's text, as `hashes` gives them for a chunk of texts
/// (none for a null text).
fn append_windows(
    batch: &RecordBatch,
    ids: &StringArray,
    column: &str,
    out: &mut Vec<u8>,
    hashes: impl Fn(&[Option<&str>]) -> Vec<Vec<(u32, u128)>>,
) -> Result<(), KeyError> {
    let texts = text_column(batch, column)?;
    // A few records at a time: the windows of a whole batch (32 bytes each, beside
    // their 36-byte entries) would be a dozen times the batch's text.
    for (c, chunk) in texts.chunks(32).enumerate() {
        put_windows(ids, c * 32, &hashes(chunk), out)?;
    }
    Ok(())
}

/// A text column's values.
fn text_column<'a>(batch: &'a RecordBatch, column: &str) -> Result<Vec<Option<&'a str>>, KeyError> {
    let col = batch
        .column_by_name(column)
        .ok_or_else(|| KeyError::NoKeyColumn(column.to_string()))?;
    let texts = col
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(|| KeyError::KeyType(col.data_type().clone()))?;
    Ok(texts.iter().collect())
}

/// Appends the window (or unit) entries of the records from row `first` on.
fn put_windows(
    ids: &StringArray,
    first: usize,
    windows: &[Vec<(u32, u128)>],
    out: &mut Vec<u8>,
) -> Result<(), KeyError> {
    for (j, ws) in windows.iter().enumerate() {
        if ws.is_empty() {
            continue;
        }
        let i = first + j;
        let id = parse_id(ids.value(i)).ok_or_else(|| KeyError::BadId(ids.value(i).to_string()))?;
        for &(pos, hash) in ws {
            WindowEntry { hash, id, pos }.put(out);
        }
    }
    Ok(())
}

/// Exact substrings over a tokenizer's tokens: one [`WindowEntry`] per window of `k`
/// ids of each record's token ids column (`[text, ids, offsets]` columns). A record
/// whose offsets do not fit its text or its ids has no windows: the apply cannot cut
/// it, so it must not hold the first occurrence of anything.
fn append_id_windows(
    batch: &RecordBatch,
    ids: &StringArray,
    [text, tokens, offsets]: [&str; 3],
    k: usize,
    out: &mut Vec<u8>,
) -> Result<(), KeyError> {
    use rayon::prelude::*;
    let lists = |column: &str| -> Result<(&arrow_array::ListArray, &[u32]), KeyError> {
        let col = batch
            .column_by_name(column)
            .ok_or_else(|| KeyError::NoKeyColumn(column.to_string()))?;
        let l = col
            .as_any()
            .downcast_ref::<arrow_array::ListArray>()
            .ok_or_else(|| KeyError::KeyType(col.data_type().clone()))?;
        let v = l
            .values()
            .as_any()
            .downcast_ref::<arrow_array::UInt32Array>()
            .ok_or_else(|| KeyError::KeyType(col.data_type().clone()))?;
        Ok((l, v.values()))
    };
    fn row<'a>((l, v): (&arrow_array::ListArray, &'a [u32]), i: usize) -> Option<&'a [u32]> {
        let o = l.value_offsets();
        (!l.is_null(i)).then(|| &v[o[i] as usize..o[i + 1] as usize])
    }
    let (tok, off) = (lists(tokens)?, lists(offsets)?);
    let col = batch
        .column_by_name(text)
        .ok_or_else(|| KeyError::NoKeyColumn(text.to_string()))?;
    let texts = col
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(|| KeyError::KeyType(col.data_type().clone()))?;
    let windows: Vec<Vec<(u32, u128)>> = (0..batch.num_rows())
        .into_par_iter()
        .with_min_len(8)
        .map(|i| {
            let (Some(t), Some(o)) = (row(tok, i), row(off, i)) else {
                return vec![];
            };
            let fits = texts.is_valid(i)
                && crate::kernels::substring::offset_tokens(texts.value(i), o)
                    .is_some_and(|x| x.len() == t.len());
            if !fits {
                return vec![];
            }
            crate::kernels::substring::id_window_hashes(t, k)
        })
        .collect();
    put_windows(ids, 0, &windows, out)
}

/// The key column of a batch, read as bytes per row: the 16-byte key, the
/// signature, or the perceptual hash as 8 little-endian bytes.
enum KeyValues<'a> {
    Fixed(&'a FixedSizeBinaryArray),
    U64(&'a arrow_array::UInt64Array),
    I64(&'a arrow_array::Int64Array),
    Hex(&'a StringArray),
}

impl<'a> KeyValues<'a> {
    fn of(col: &'a ArrayRef, kind: &DedupKind) -> Result<Self, KeyError> {
        let any = col.as_any();
        let v = match kind {
            DedupKind::Exact | DedupKind::Minhash { .. } => {
                any.downcast_ref().map(KeyValues::Fixed)
            }
            DedupKind::Phash { .. } => any
                .downcast_ref()
                .map(KeyValues::U64)
                .or_else(|| any.downcast_ref().map(KeyValues::I64))
                .or_else(|| any.downcast_ref().map(KeyValues::Hex)),
            DedupKind::Substring { .. }
            | DedupKind::Paragraph { .. }
            | DedupKind::Semantic { .. } => None,
        };
        v.ok_or_else(|| KeyError::KeyType(col.data_type().clone()))
    }

    /// Fills `buf` with row `i`'s value; false for a null (no key).
    fn get(&self, i: usize, buf: &mut Vec<u8>) -> Result<bool, KeyError> {
        buf.clear();
        match self {
            KeyValues::Fixed(a) if a.is_valid(i) => buf.extend_from_slice(a.value(i)),
            KeyValues::U64(a) if a.is_valid(i) => buf.extend_from_slice(&a.value(i).to_le_bytes()),
            KeyValues::I64(a) if a.is_valid(i) => buf.extend_from_slice(&a.value(i).to_le_bytes()),
            KeyValues::Hex(a) if a.is_valid(i) => {
                let s = a.value(i);
                let h = u64::from_str_radix(s, 16)
                    .ok()
                    .filter(|_| s.len() == 16)
                    .ok_or_else(|| KeyError::BadHash(s.to_string()))?;
                buf.extend_from_slice(&h.to_le_bytes());
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The sample key of a record: a 128-bit hash of its id and the seed. The sample is
/// the vectors lowest by (key, id); keys objects are sectioned by its high bits.
pub fn sample_key(id: u128, seed: u64) -> u128 {
    xxhash_rust::xxh3::xxh3_128_with_seed(&id.to_le_bytes(), seed)
}

/// The map side: one entry per record whose `column` holds a usable vector (not null,
/// not zero, finite): sample key, id, rank (`ranks`, else 0) and the unit vector.
/// A record without one has no entry and is never a duplicate.
pub fn append_vectors(
    batch: &RecordBatch,
    ids: &StringArray,
    column: &str,
    seed: u64,
    ranks: Option<&[f64]>,
    out: &mut Vec<u8>,
) -> Result<(), KeyError> {
    let col = batch
        .column_by_name(column)
        .ok_or_else(|| KeyError::NoKeyColumn(column.to_string()))?;
    let wrong = || KeyError::KeyType(col.data_type().clone());
    let d = crate::kernels::semantic::dim_of(col.data_type()).ok_or_else(wrong)?;
    let list = col
        .as_any()
        .downcast_ref::<FixedSizeListArray>()
        .ok_or_else(wrong)?;
    let values = list
        .values()
        .as_any()
        .downcast_ref::<Float32Array>()
        .ok_or_else(wrong)?;
    let mut v = vec![0f32; d];
    for i in 0..batch.num_rows() {
        if list.is_null(i) {
            continue;
        }
        let at = list.value_offset(i) as usize;
        let raw = &values.values()[at..at + d];
        // A null element makes the vector unusable, like a NaN.
        if values.null_count() > 0 && (at..at + d).any(|j| values.is_null(j)) {
            continue;
        }
        v.copy_from_slice(raw);
        if !crate::kernels::semantic::normalize(&mut v) {
            continue;
        }
        let id = parse_id(ids.value(i)).ok_or_else(|| KeyError::BadId(ids.value(i).to_string()))?;
        out.extend_from_slice(&sample_key(id, seed).to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
        // + 0.0: −0.0 ranks as 0.0 (the order compares bits of equal values).
        out.extend_from_slice(&(ranks.map_or(0.0, |r| r[i]) + 0.0).to_le_bytes());
        for x in &v {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedup::format::{
        KEYS_MAGIC, check_header, decode, encode_keys, partition_of, section_of,
    };

    #[test]
    fn keys_object_sections_hold_their_partition() {
        let entries: Vec<KeyEntry> = (0..500u128)
            .map(|i| KeyEntry {
                key: i.wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835),
                id: i,
                rank: 0.0,
            })
            .collect();
        let p = 5;
        let mut raw = Vec::new();
        for e in &entries {
            e.put(&mut raw);
        }
        let obj = encode_keys(&raw, KeyEntry::SIZE, p);
        check_header(&obj, KEYS_MAGIC, p as u64).unwrap();
        let mut seen = 0;
        for r in 0..p as u64 {
            let part: Vec<KeyEntry> = decode(section_of(&obj, r).unwrap()).unwrap();
            assert!(part.iter().all(|x| partition_of(x.key, p) == r as u32));
            seen += part.len();
        }
        assert_eq!(seen, entries.len());
    }
}
