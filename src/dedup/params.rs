//! `dedup`: the structural stage that ends a phase with a two-pass shuffle (see
//! docs/DEDUP.md). Its params, their parsing and schema check are declared with the
//! operators (`crate::ops::dedup`, so `mdf ops dedup` and docs/OPERATORS.md describe
//! them like any stage's); here they meet the protocol: their conversion to and from
//! the persisted [`DedupPhaseParams`], whose JSON layout is fixed. In its own phase
//! the stage changes nothing: the map task writes the keys object ([`super::keys`]);
//! the planner ([`super::plan`]) adds the reduce and apply phases after it.
pub use crate::ops::dedup::{
    CLUSTER_COLUMN, DedupKind, DedupParams, Keep, MAX_PERMUTATIONS, PAYLOADS, ParamsError,
};
pub use crate::ops::dedup::{Normalize, Unit};
use crate::protocol::records::{
    DedupPhaseKeep, DedupPhaseKind, DedupPhaseNormalize, DedupPhaseParams, DedupPhaseUnit,
};

impl From<Normalize> for DedupPhaseNormalize {
    fn from(n: Normalize) -> Self {
        match n {
            Normalize::None => DedupPhaseNormalize::None,
            Normalize::Ccnet => DedupPhaseNormalize::Ccnet,
            Normalize::Loose => DedupPhaseNormalize::Loose,
        }
    }
}

impl From<DedupPhaseNormalize> for Normalize {
    fn from(n: DedupPhaseNormalize) -> Self {
        match n {
            DedupPhaseNormalize::None => Normalize::None,
            DedupPhaseNormalize::Ccnet => Normalize::Ccnet,
            DedupPhaseNormalize::Loose => Normalize::Loose,
        }
    }
}

impl From<Unit> for DedupPhaseUnit {
    fn from(u: Unit) -> Self {
        match u {
            Unit::Paragraph => DedupPhaseUnit::Paragraph,
            Unit::Line => DedupPhaseUnit::Line,
        }
    }
}

impl From<DedupPhaseUnit> for Unit {
    fn from(u: DedupPhaseUnit) -> Self {
        match u {
            DedupPhaseUnit::Paragraph => Unit::Paragraph,
            DedupPhaseUnit::Line => Unit::Line,
        }
    }
}

impl From<&DedupParams> for DedupPhaseParams {
    fn from(p: &DedupParams) -> Self {
        DedupPhaseParams {
            key: p.key.clone(),
            keep: match &p.keep {
                Keep::LowestId => DedupPhaseKeep::LowestId,
                Keep::Highest(c) => DedupPhaseKeep::Highest(c.clone()),
                Keep::NearestCentroid => DedupPhaseKeep::NearestCentroid,
            },
            partitions: p.partitions,
            memory_bytes: p.memory_bytes,
            cluster_column: p.cluster_column,
            against: p.against.clone(),
            kind: match &p.kind {
                DedupKind::Exact => DedupPhaseKind::Exact,
                &DedupKind::Minhash {
                    bands,
                    rows,
                    threshold,
                } => DedupPhaseKind::Minhash {
                    bands,
                    rows,
                    threshold,
                },
                &DedupKind::Phash { radius } => DedupPhaseKind::Phash { radius },
                DedupKind::Substring {
                    min_tokens,
                    keep_first,
                    min_chars,
                    tokens,
                    offsets,
                } => DedupPhaseKind::Substring {
                    min_tokens: *min_tokens,
                    keep_first: *keep_first,
                    min_chars: *min_chars,
                    tokens: tokens.clone(),
                    offsets: offsets.clone(),
                },
                &DedupKind::Paragraph {
                    unit,
                    min_count,
                    keep_first,
                    normalize,
                    min_chars,
                } => DedupPhaseKind::Paragraph {
                    unit: unit.into(),
                    min_count,
                    keep_first,
                    normalize: normalize.into(),
                    min_chars,
                },
                &DedupKind::Semantic {
                    eps,
                    clusters,
                    sample,
                    iterations,
                    seed,
                } => DedupPhaseKind::Semantic {
                    eps,
                    clusters,
                    sample,
                    iterations,
                    seed,
                },
            },
            max_rounds: p.max_rounds,
        }
    }
}

impl From<&DedupPhaseParams> for DedupParams {
    fn from(p: &DedupPhaseParams) -> Self {
        DedupParams {
            key: p.key.clone(),
            keep: match &p.keep {
                DedupPhaseKeep::LowestId => Keep::LowestId,
                DedupPhaseKeep::Highest(c) => Keep::Highest(c.clone()),
                DedupPhaseKeep::NearestCentroid => Keep::NearestCentroid,
            },
            partitions: p.partitions,
            memory_bytes: p.memory_bytes,
            cluster_column: p.cluster_column,
            against: p.against.clone(),
            kind: DedupKind::from(&p.kind),
            max_rounds: p.max_rounds,
        }
    }
}

impl From<&DedupPhaseKind> for DedupKind {
    fn from(k: &DedupPhaseKind) -> Self {
        match k {
            DedupPhaseKind::Exact => DedupKind::Exact,
            &DedupPhaseKind::Minhash {
                bands,
                rows,
                threshold,
            } => DedupKind::Minhash {
                bands,
                rows,
                threshold,
            },
            &DedupPhaseKind::Phash { radius } => DedupKind::Phash { radius },
            DedupPhaseKind::Substring {
                min_tokens,
                keep_first,
                min_chars,
                tokens,
                offsets,
            } => DedupKind::Substring {
                min_tokens: *min_tokens,
                keep_first: *keep_first,
                min_chars: *min_chars,
                tokens: tokens.clone(),
                offsets: offsets.clone(),
            },
            &DedupPhaseKind::Paragraph {
                unit,
                min_count,
                keep_first,
                normalize,
                min_chars,
            } => DedupKind::Paragraph {
                unit: unit.into(),
                min_count,
                keep_first,
                normalize: normalize.into(),
                min_chars,
            },
            &DedupPhaseKind::Semantic {
                eps,
                clusters,
                sample,
                iterations,
                seed,
            } => DedupKind::Semantic {
                eps,
                clusters,
                sample,
                iterations,
                seed,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{DataType, Field, Schema};

    fn params(keep: Keep, kind: DedupKind, against: Option<&str>, cluster: bool) -> DedupParams {
        DedupParams {
            key: "content_key".into(),
            keep,
            partitions: None,
            memory_bytes: 1 << 30,
            cluster_column: cluster,
            against: against.map(Into::into),
            kind,
            max_rounds: 32,
        }
    }

    /// The persisted params are the JSON the operator's params had when they were the
    /// persisted type (format versions 1 and 2): byte for byte, both ways, so every
    /// job.json still reads and every fingerprint and task id stays the same.
    #[test]
    fn the_persisted_params_keep_the_layout_of_versions_1_and_2() {
        let minhash = DedupKind::Minhash {
            bands: 14,
            rows: 8,
            threshold: 0.8,
        };
        let cases = [
            (
                params(Keep::LowestId, DedupKind::Exact, None, false),
                r#"{"key":"content_key","keep":"lowest_id","partitions":null,"memory_bytes":1073741824,"cluster_column":false,"max_rounds":32}"#,
            ),
            (
                DedupParams {
                    partitions: Some(7),
                    memory_bytes: 4096,
                    ..params(
                        Keep::Highest("quality".into()),
                        DedupKind::Exact,
                        Some("s3://b/mdf/jobs/cc-1"),
                        true,
                    )
                },
                r#"{"key":"content_key","keep":{"highest":"quality"},"partitions":7,"memory_bytes":4096,"cluster_column":true,"against":"s3://b/mdf/jobs/cc-1","max_rounds":32}"#,
            ),
            (
                DedupParams {
                    max_rounds: 5,
                    ..params(Keep::LowestId, minhash, None, false)
                },
                r#"{"key":"content_key","keep":"lowest_id","partitions":null,"memory_bytes":1073741824,"cluster_column":false,"kind":{"type":"minhash","bands":14,"rows":8,"threshold":0.8},"max_rounds":5}"#,
            ),
            (
                params(
                    Keep::Highest("score".into()),
                    DedupKind::Phash { radius: 4 },
                    None,
                    true,
                ),
                r#"{"key":"content_key","keep":{"highest":"score"},"partitions":null,"memory_bytes":1073741824,"cluster_column":true,"kind":{"type":"phash","radius":4},"max_rounds":32}"#,
            ),
            (
                DedupParams {
                    key: "text".into(),
                    ..params(
                        Keep::LowestId,
                        DedupKind::Substring {
                            min_tokens: 50,
                            keep_first: false,
                            min_chars: 7,
                            tokens: None,
                            offsets: None,
                        },
                        None,
                        false,
                    )
                },
                r#"{"key":"text","keep":"lowest_id","partitions":null,"memory_bytes":1073741824,"cluster_column":false,"kind":{"type":"substring","min_tokens":50,"keep_first":false,"min_chars":7},"max_rounds":32}"#,
            ),
            (
                DedupParams {
                    key: "text".into(),
                    ..params(
                        Keep::LowestId,
                        DedupKind::Substring {
                            min_tokens: 64,
                            keep_first: true,
                            min_chars: 50,
                            tokens: Some("token_ids".into()),
                            offsets: Some("token_offsets".into()),
                        },
                        None,
                        false,
                    )
                },
                r#"{"key":"text","keep":"lowest_id","partitions":null,"memory_bytes":1073741824,"cluster_column":false,"kind":{"type":"substring","min_tokens":64,"keep_first":true,"min_chars":50,"tokens":"token_ids","offsets":"token_offsets"},"max_rounds":32}"#,
            ),
            (
                DedupParams {
                    key: "text".into(),
                    ..params(
                        Keep::LowestId,
                        DedupKind::Paragraph {
                            unit: Unit::Line,
                            min_count: 3,
                            keep_first: false,
                            normalize: Normalize::Ccnet,
                            min_chars: 50,
                        },
                        None,
                        false,
                    )
                },
                r#"{"key":"text","keep":"lowest_id","partitions":null,"memory_bytes":1073741824,"cluster_column":false,"kind":{"type":"paragraph","unit":"line","min_count":3,"keep_first":false,"normalize":"ccnet","min_chars":50},"max_rounds":32}"#,
            ),
            (
                DedupParams {
                    key: "embedding".into(),
                    ..params(
                        Keep::NearestCentroid,
                        DedupKind::Semantic {
                            eps: 0.05,
                            clusters: None,
                            sample: 100_000,
                            iterations: 20,
                            seed: 1,
                        },
                        None,
                        true,
                    )
                },
                r#"{"key":"embedding","keep":"nearest_centroid","partitions":null,"memory_bytes":1073741824,"cluster_column":true,"kind":{"type":"semantic","eps":0.05,"sample":100000,"iterations":20,"seed":1},"max_rounds":32}"#,
            ),
            (
                DedupParams {
                    key: "embedding".into(),
                    ..params(
                        Keep::Highest("q".into()),
                        DedupKind::Semantic {
                            eps: 0.1,
                            clusters: Some(64),
                            sample: 5000,
                            iterations: 3,
                            seed: 9,
                        },
                        None,
                        false,
                    )
                },
                r#"{"key":"embedding","keep":{"highest":"q"},"partitions":null,"memory_bytes":1073741824,"cluster_column":false,"kind":{"type":"semantic","eps":0.1,"clusters":64,"sample":5000,"iterations":3,"seed":9},"max_rounds":32}"#,
            ),
        ];
        for (p, want) in cases {
            let persisted = DedupPhaseParams::from(&p);
            assert_eq!(serde_json::to_string(&persisted).unwrap(), want);
            assert_eq!(
                serde_json::to_string(&p).unwrap(),
                want,
                "the runtime params"
            );
            let back: DedupPhaseParams = serde_json::from_str(want).unwrap();
            assert_eq!(back, persisted);
            assert_eq!(DedupParams::from(&back), p);
        }
        // Written before near duplicates: no kind, no max_rounds.
        let old: DedupPhaseParams = serde_json::from_str(
            r#"{"key":"k","keep":"lowest_id","partitions":2,"memory_bytes":4096,"cluster_column":false}"#,
        )
        .unwrap();
        assert_eq!(
            (old.kind.clone(), old.max_rounds),
            (DedupPhaseKind::Exact, 32)
        );
        assert_eq!(DedupParams::from(&old).kind, DedupKind::Exact);
    }

    #[test]
    fn check_names_the_param_in_its_message() {
        let schema = Schema::new(vec![Field::new("content_key", DataType::Utf8, true)]);
        let p = params(Keep::LowestId, DedupKind::Exact, None, false);
        let e = p.check(&schema).unwrap_err();
        assert!(matches!(e, ParamsError::KeyType { .. }));
        assert!(
            e.to_string()
                .starts_with("params.key: column \"content_key\" is Utf8")
        );
        let p = params(
            Keep::Highest("q".into()),
            DedupKind::Phash { radius: 2 },
            None,
            false,
        );
        let schema = Schema::new(vec![Field::new("content_key", DataType::UInt64, true)]);
        assert_eq!(
            p.check(&schema).unwrap_err().to_string(),
            "params.keep.highest: no column \"q\""
        );
    }
}
