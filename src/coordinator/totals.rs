//! The sums stages keep of integer columns they write (token counts, `tokenize`), per
//! group (language, source), gathered over a job's committed tasks for `mdf status`
//! and the report: groups ordered by their sum, and per-source file keys resolved to
//! the input URIs the reading tasks recorded. Reads only the status; no I/O.
use super::status::JobStatus;
use crate::protocol::records::BY_SOURCE;
use std::collections::BTreeMap;

/// One stage's total of one column.
#[derive(Debug, Clone, PartialEq)]
pub struct TotalView {
    pub phase: String,
    pub stage: String,
    pub column: String,
    pub sum: u64,
    pub records: u64,
    /// Per group (`language`, `source`, ...): (value, sum), largest first (ties by
    /// value); source values are input URIs where known, else the file key.
    pub groups: Vec<(String, Vec<(String, u64)>)>,
}

/// Every total of the job's stages, in phase and stage order.
pub fn views(s: &JobStatus) -> Vec<TotalView> {
    let mut sources: BTreeMap<&str, &str> = BTreeMap::new();
    for p in &s.phases {
        for (k, u) in &p.stats.sources {
            sources.entry(k.as_str()).or_insert(u.as_str());
        }
    }
    let mut out = Vec::new();
    for p in &s.phases {
        for st in &p.stats.stages {
            for (col, t) in &st.totals {
                let groups =
                    t.by.iter()
                        .map(|(g, vals)| {
                            let mut v: Vec<(String, u64)> = vals
                                .iter()
                                .map(|(k, n)| {
                                    let name = match sources.get(k.as_str()) {
                                        Some(u) if g == BY_SOURCE => u.to_string(),
                                        _ => k.clone(),
                                    };
                                    (name, *n)
                                })
                                .collect();
                            v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                            (g.clone(), v)
                        })
                        .collect();
                out.push(TotalView {
                    phase: p.name.clone(),
                    stage: st.stage.clone(),
                    column: col.clone(),
                    sum: t.sum,
                    records: t.records,
                    groups,
                });
            }
        }
    }
    out
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let d = n.to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The terminal lines of every total, each group's `top` largest values.
pub fn render(s: &JobStatus, top: usize) -> String {
    let mut out = String::new();
    for v in views(s) {
        out += &format!(
            "\n{} (stage {}, {}): {} over {} records ({:.1} per record)\n",
            v.column,
            v.stage,
            v.phase,
            thousands(v.sum),
            thousands(v.records),
            v.sum as f64 / v.records.max(1) as f64
        );
        for (g, vals) in &v.groups {
            let shown: Vec<String> = vals
                .iter()
                .take(top)
                .map(|(k, n)| {
                    format!(
                        "{k} {} ({:.1}%)",
                        thousands(*n),
                        100.0 * *n as f64 / v.sum.max(1) as f64
                    )
                })
                .collect();
            let more = if vals.len() > top {
                format!(", … {} more", vals.len() - top)
            } else {
                String::new()
            };
            out += &format!("  by {g}: {}{more}\n", shown.join(", "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::records::{ColumnTotal, StageStats, TaskStats};

    fn status_of(stats: TaskStats) -> JobStatus {
        use crate::coordinator::status::{PhaseStatus, Prices, TaskCounts};
        JobStatus {
            version: 2,
            job: "mem://j".into(),
            job_id: "j".into(),
            output: "mem://o".into(),
            complete: true,
            succeeded: true,
            phases: vec![PhaseStatus {
                name: "p00".into(),
                tasks: TaskCounts {
                    total: 3,
                    pending: 0,
                    leased: 0,
                    committed: 3,
                    failed: 0,
                    by_backup: 0,
                },
                records_in: 3,
                records_out: 3,
                rejected: 0,
                stats,
                requests: Default::default(),
                task_seconds: 0.0,
                cost_usd: 0.0,
            }],
            failed_tasks: vec![],
            worker_requests: Default::default(),
            requests_total: 0,
            tasks_committed: 3,
            tasks_total: 3,
            cost_usd: 0.0,
            prices: Prices {
                put_per_1k: 0.0,
                get_per_1k: 0.0,
            },
            task_seconds: 0.0,
            spans: vec![],
            submissions: vec![],
        }
    }

    #[test]
    fn totals_merge_across_tasks_and_name_sources() {
        let task = |lang: &str, n: u64, key: &str| {
            let mut t = ColumnTotal {
                sum: n,
                records: 1,
                ..Default::default()
            };
            t.by.insert("language".into(), [(lang.to_string(), n)].into());
            t.by.insert(BY_SOURCE.into(), [(key.to_string(), n)].into());
            TaskStats {
                stages: vec![StageStats {
                    stage: "tok".into(),
                    totals: [("token_count".to_string(), t)].into(),
                    ..Default::default()
                }],
                sources: [(key.to_string(), format!("s3://b/{key}.jsonl"))].into(),
                ..Default::default()
            }
        };
        let mut all = TaskStats::default();
        for t in [
            task("en", 1500, "k1"),
            task("de", 700, "k2"),
            task("en", 2, "k2"),
        ] {
            all.add(&t);
        }
        let json = serde_json::to_value(&all).unwrap();
        let back: TaskStats = serde_json::from_value(json).unwrap();
        assert_eq!(back, all);
        let st = status_of(all);
        let v = views(&st);
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].sum, v[0].records), (2202, 3));
        assert_eq!(
            v[0].groups,
            [
                (
                    "language".to_string(),
                    vec![("en".to_string(), 1502), ("de".to_string(), 700)]
                ),
                (
                    "source".to_string(),
                    vec![
                        ("s3://b/k1.jsonl".to_string(), 1500),
                        ("s3://b/k2.jsonl".to_string(), 702)
                    ]
                ),
            ]
        );
        let r = render(&st, 1);
        assert!(
            r.contains("token_count (stage tok, p00): 2,202 over 3 records (734.0 per record)"),
            "{r}"
        );
        assert!(r.contains("by language: en 1,502 (68.2%), … 1 more"), "{r}");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
    }

    #[test]
    fn stats_written_before_totals_still_load() {
        let old = serde_json::json!({
            "records_in": 3, "records_out": 3, "rejected": 0, "rejects_by_reason": {},
            "input_bytes": 10, "output_bytes": 10,
            "stages": [{"stage": "len", "records_in": 3, "records_out": 3, "rejected": 0,
                        "nanos": 5}]
        });
        let t: TaskStats = serde_json::from_value(old).unwrap();
        assert!(t.sources.is_empty() && t.stages[0].totals.is_empty());
        // And a record without totals is written as before (no new keys).
        let s = serde_json::to_string(&t).unwrap();
        assert!(!s.contains("totals") && !s.contains("sources"), "{s}");
    }
}
