//! The job report (`mdf report JOB -o report.html`): one self-contained HTML file (inline CSS and SVG,
//! no external scripts, fonts or images) built from committed tasks only, like
//! `mdf status`: the funnel of records through the operators, rejects by reason,
//! throughput over time, duplicate-cluster sizes, the score and length distributions
//! the operators recorded, token totals per language and source, and samples of kept
//! and rejected records.
//!
//! Everything from a job is untrusted: names, errors and crawled records. Every such
//! string is written through [`esc`] (HTML text and double-quoted attributes alike),
//! a link only through [`safe_href`] (http and https, nothing else), and no job data
//! is ever placed inside `<script>` or `<style>`: both are constants of this file.
mod charts;
mod escape;
pub mod output;

use crate::coordinator::status::JobStatus;
use crate::protocol::records::{CLUSTER_SIZE, Histogram, NEAR_GROUP_SIZE};
use crate::store::Registry;
use charts::{COLORS, cluster_bars, distribution, figure, hbars, short, throughput, vbars};
use escape::{esc, safe_href};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Sampled records for the report.
#[derive(Debug, Default)]
pub struct Samples {
    pub kept: Vec<Map<String, Value>>,
    /// A few per reject reason.
    pub rejected: Vec<Map<String, Value>>,
    /// Why samples are missing (no finished output yet, ...).
    pub note: Option<String>,
}

/// Reads up to `n` kept records and up to `n` rejects per reason (scanning at most
/// `scan` rejects) of a finished output.
pub async fn samples(reg: &Registry, output: &str, n: usize, scan: usize) -> Samples {
    let mut s = Samples::default();
    let m = match output::manifest(reg, output).await {
        Ok(m) => m,
        Err(e) => {
            s.note = Some(format!("no samples: {e:#}"));
            return s;
        }
    };
    let kept = output::walk(reg, output, &m, false, &mut |r| {
        s.kept.push(r);
        s.kept.len() < n
    })
    .await;
    if let Err(e) = kept {
        // No kept samples (a Lance dataset, token shards): the rejects are still
        // Parquet and still sampled.
        s.note = Some(format!("no samples: {e:#}"));
        s.kept.clear();
    }
    let mut per_reason: BTreeMap<String, usize> = BTreeMap::new();
    let mut seen = 0;
    let rejected = output::walk(reg, output, &m, true, &mut |r| {
        seen += 1;
        let reason = r
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let c = per_reason.entry(reason).or_default();
        if *c < n {
            *c += 1;
            s.rejected.push(r);
        }
        seen < scan
    })
    .await;
    if let Err(e) = rejected {
        s.note = Some(format!("no reject samples: {e:#}"));
    }
    s
}

fn sample_table(rows: &[Map<String, Value>], rejects: bool) -> String {
    if rows.is_empty() {
        return "<p class=\"none\">none</p>".into();
    }
    let mut s = String::from("<div class=\"samples\">");
    for r in rows {
        let mut v = Value::Object(r.clone());
        output::shorten(&mut v, 400);
        let head = if rejects {
            format!(
                "<b>{}</b> <span class=\"tag\">{}</span> {}",
                esc(r.get("id").and_then(Value::as_str).unwrap_or("")),
                esc(r.get("reason").and_then(Value::as_str).unwrap_or("")),
                esc(r.get("operator").and_then(Value::as_str).unwrap_or(""))
            )
        } else {
            let hint = ["url", "path", "title"]
                .iter()
                .find_map(|k| r.get(*k).and_then(Value::as_str))
                .unwrap_or("");
            let hint = match r.get("url").and_then(Value::as_str).and_then(safe_href) {
                Some(href) => format!(
                    "<a href=\"{}\" rel=\"nofollow noopener noreferrer\">{}</a>",
                    esc(&href),
                    esc(hint)
                ),
                None => esc(hint),
            };
            format!(
                "<b>{}</b> {hint}",
                esc(r.get("id").and_then(Value::as_str).unwrap_or(""))
            )
        };
        let _ = write!(
            s,
            "<details><summary>{head}</summary><pre>{}</pre></details>",
            esc(&serde_json::to_string_pretty(&v).unwrap_or_default())
        );
    }
    s.push_str("</div>");
    s
}

const STYLE: &str = "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}\
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}\
.kv{display:grid;grid-template-columns:repeat(4,1fr);gap:8px;margin:12px 0}.kv div{background:#f4f6f9;padding:8px;border-radius:6px}\
.kv b{display:block;font-size:18px}figure{margin:10px 0;padding:8px;border:1px solid #e4e4e4;border-radius:6px}\
figcaption{margin-bottom:6px;color:#555}.grid{display:grid;grid-template-columns:1fr 1fr;gap:10px}\
.lbl{font-size:12px;fill:#333}.val{font-size:11px;fill:#555}.tick{font-size:10px;fill:#666}.axis{stroke:#999;stroke-width:1}\
.none{color:#888;font-style:italic}pre{white-space:pre-wrap;font-size:12px;background:#fafafa;padding:6px;margin:4px 0}\
details{border-bottom:1px solid #eee;padding:3px 0}.tag{background:#fde2e2;color:#a12;border-radius:4px;padding:0 5px;font-size:12px}\
#check{padding:6px 10px;border-radius:6px;margin:8px 0}#check.ok{background:#e6f4ea}#check.bad{background:#fde2e2}";

/// After load, checks that each chart's SVG was laid out with visible marks and
/// writes the result into the page (`body[data-charts]`, and a banner), so a broken
/// chart is visible to a reader and to the headless-browser test.
const SELF_CHECK: &str = "window.addEventListener('load',function(){\
var figs=document.querySelectorAll('figure.chart:not(.empty)'),ok=0;\
figs.forEach(function(f){var svg=f.querySelector('svg'),good=false;\
if(svg){var b=svg.getBoundingClientRect(),marks=svg.querySelectorAll('.mark'),drawn=0;\
marks.forEach(function(m){var r=m.getBBox();if(r.width>0||r.height>0)drawn++;});\
good=b.width>0&&b.height>0&&drawn>0;}\
f.setAttribute('data-rendered',good?'yes':'no');if(good)ok++;});\
document.body.setAttribute('data-charts',ok+'/'+figs.length);\
var c=document.getElementById('check');c.className=ok==figs.length?'ok':'bad';\
c.textContent=ok+' of '+figs.length+' charts rendered';});";

/// The whole report page.
pub fn render(s: &JobStatus, samples: &Samples) -> String {
    let mut h = String::new();
    let state = if s.succeeded {
        "complete"
    } else if s.complete {
        "complete with failures"
    } else {
        "running (committed tasks so far)"
    };
    let first = s.phases.first();
    let read = first.map(|p| p.records_in).unwrap_or(0);
    let last_out = s
        .phases
        .iter()
        .rev()
        .find(|p| p.name != crate::protocol::records::FINALIZE && p.stats.records_out > 0)
        .map(|p| p.records_out)
        .unwrap_or(0);
    let rejected: u64 = s
        .phases
        .iter()
        .filter(|p| p.name != crate::protocol::records::FINALIZE)
        .map(|p| p.rejected)
        .sum();
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>mdf report {id}</title>\
         <style>{STYLE}</style></head><body>\
         <h1>mdf report: {id}</h1><div>{state} · output <code>{out}</code></div>\
         <div id=\"check\">charts not checked (scripts off)</div>\
         <div class=\"kv\"><div>records read<b>{}</b></div><div>records rejected<b>{}</b></div>\
         <div>tasks committed<b>{} / {}</b></div><div>worker time<b>{:.1} s</b></div>\
         <div>object-store requests<b>{}</b></div><div>request cost<b>${:.4}</b></div>\
         <div>failed tasks<b>{}</b></div><div>last phase out<b>{}</b></div></div>",
        short(read as f64),
        short(rejected as f64),
        s.tasks_committed,
        s.tasks_total,
        s.task_seconds,
        s.requests_total,
        s.cost_usd,
        s.failed_tasks.len(),
        short(last_out as f64),
        id = esc(&s.job_id),
        out = esc(&s.output),
    );

    // The funnel: records read, then each operator's records out, in pipeline order.
    let mut funnel = Vec::new();
    if read > 0 {
        funnel.push(("read".to_string(), read as f64, COLORS[0], String::new()));
    }
    for (i, p) in s.phases.iter().enumerate() {
        for st in &p.stats.stages {
            // A dedup stage is an identity in its map phase; it acts in a later phase.
            let later = s.phases[i + 1..]
                .iter()
                .any(|q| q.stats.stages.iter().any(|x| x.stage == st.stage));
            if later {
                continue;
            }
            let pass = if st.records_in > 0 {
                100.0 * st.records_out as f64 / st.records_in as f64
            } else {
                100.0
            };
            funnel.push((
                format!("{} ({})", st.stage, p.name),
                st.records_out as f64,
                COLORS[0],
                format!(
                    "{} of {} ({pass:.1}%)",
                    short(st.records_out as f64),
                    short(st.records_in as f64)
                ),
            ));
        }
    }
    h += "<h2>Records through the operators</h2>";
    h += &figure(
        "funnel",
        "Funnel",
        "records kept after each operator (committed tasks)",
        hbars(&funnel),
    );

    // Rejects by reason, over every phase (readers' rejects included).
    let mut reasons: BTreeMap<&str, u64> = BTreeMap::new();
    for p in s
        .phases
        .iter()
        .filter(|p| p.name != crate::protocol::records::FINALIZE)
    {
        for (k, v) in &p.stats.rejects_by_reason {
            *reasons.entry(k).or_default() += v;
        }
    }
    let mut rows: Vec<(String, f64, &str, String)> = reasons
        .iter()
        .map(|(k, v)| {
            let share = 100.0 * *v as f64 / read.max(1) as f64;
            (
                k.to_string(),
                *v as f64,
                COLORS[3],
                format!("{v} ({share:.1}% of read)"),
            )
        })
        .collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    h += &figure(
        "rejects",
        "Rejects by reason",
        "every rejected record is in the output's _rejects with its reason",
        hbars(&rows),
    );

    h += "<h2>Throughput</h2>";
    h += &figure(
        "throughput",
        "Records per second over time",
        "records read by each phase's tasks, spread over each task's run",
        throughput(s, &s.spans),
    );

    // Dedup: cluster sizes per reduce phase.
    h += "<h2>Duplicates</h2>";
    let mut any_dedup = false;
    for p in &s.phases {
        if let Some(hist) = p.stats.histograms.get(CLUSTER_SIZE) {
            any_dedup = true;
            let singles = hist
                .buckets
                .get(&Histogram::bucket(1.0))
                .copied()
                .unwrap_or(0);
            let clusters = hist.count - singles;
            h += &figure(
                &format!("dup-{}", p.name),
                &format!("Duplicate clusters: {}", p.name),
                &format!(
                    "records per distinct key (exact); {clusters} clusters of 2 or more, largest {}, {singles} without duplicates",
                    hist.max
                ),
                vbars(&cluster_bars(hist), COLORS[1], 820.0, 200.0),
            );
        }
        // The candidates reduce sees band buckets, not clusters: a near-duplicate pair
        // is a group in each band it collides in (up to `bands`), and a cluster is
        // only whole once the label steps converge. So this is not a cluster count;
        // the apply phase's rejects are the records removed.
        if let Some(hist) = p.stats.histograms.get(NEAR_GROUP_SIZE) {
            any_dedup = true;
            h += &figure(
                &format!("dup-{}", p.name),
                &format!("Near-duplicate candidate groups: {}", p.name),
                &format!(
                    "records per verified band-bucket group (a pair counts once in each band it shares, so these are not clusters); {} groups, largest {}; the records removed are the near-dedup apply phase's rejects",
                    hist.count, hist.max
                ),
                vbars(&cluster_bars(hist), COLORS[1], 820.0, 200.0),
            );
        }
    }
    if !any_dedup {
        h += "<p class=\"none\">this job has no dedup stage</p>";
    }

    // Distributions the operators recorded (scores, lengths, sizes).
    h += "<h2>Scores and lengths</h2><div class=\"grid\">";
    let mut k = 0;
    for p in &s.phases {
        for st in &p.stats.stages {
            for (col, hist) in &st.histograms {
                let cap = format!(
                    "{} records, p10 {} · median {} · p90 {} (over every record the operator saw)",
                    hist.count,
                    short(hist.quantile(0.1).unwrap_or(0.0)),
                    short(hist.quantile(0.5).unwrap_or(0.0)),
                    short(hist.quantile(0.9).unwrap_or(0.0)),
                );
                h += &figure(
                    &format!("hist-{}-{}", st.stage, col),
                    &format!("{} · {}", st.stage, col),
                    &cap,
                    distribution(hist, COLORS[(2 + k) % COLORS.len()]),
                );
                k += 1;
            }
        }
    }
    if k == 0 {
        h += "<p class=\"none\">no operator of this job records a score</p>";
    }
    h += "</div>";

    h += &tokens_section(s);

    h += "<h2>Sample records</h2>";
    if let Some(n) = &samples.note {
        let _ = write!(h, "<p class=\"none\">{}</p>", esc(n));
    }
    h += "<h3>Kept</h3>";
    h += &sample_table(&samples.kept, false);
    h += "<h3>Rejected (a few per reason)</h3>";
    h += &sample_table(&samples.rejected, true);
    if !s.failed_tasks.is_empty() {
        h += "<h2>Failed tasks</h2><ul>";
        for f in &s.failed_tasks {
            let _ = write!(
                h,
                "<li><b>{}/{}</b>: {}</li>",
                esc(&f.phase),
                esc(&f.task),
                esc(&f.error)
            );
        }
        h += "</ul>";
    }
    let _ = writeln!(h, "<script>{SELF_CHECK}</script></body></html>");
    h
}

/// Token totals (and any other column a stage totals): per language and per source,
/// the 20 largest of each, from the stages' stats.
fn tokens_section(s: &JobStatus) -> String {
    use crate::coordinator::totals::{thousands, views};
    let views = views(s);
    if views.is_empty() {
        return String::new();
    }
    let mut h = String::from("<h2>Tokens</h2><div class=\"grid\">");
    for (i, v) in views.iter().enumerate() {
        for (g, vals) in &v.groups {
            let rows: Vec<(String, f64, &str, String)> = vals
                .iter()
                .take(20)
                .map(|(k, n)| {
                    let share = 100.0 * *n as f64 / v.sum.max(1) as f64;
                    (
                        k.clone(),
                        *n as f64,
                        COLORS[(i + 4) % COLORS.len()],
                        format!("{} ({share:.1}%)", thousands(*n)),
                    )
                })
                .collect();
            let more = if vals.len() > 20 {
                format!("; the 20 largest of {}", vals.len())
            } else {
                String::new()
            };
            h += &figure(
                &format!("total-{}-{}-{g}", v.stage, v.column),
                &format!("{} · {} by {g}", v.stage, v.column),
                &format!(
                    "{} in all over {} records (every record the stage saw){more}",
                    thousands(v.sum),
                    thousands(v.records)
                ),
                hbars(&rows),
            );
        }
    }
    h + "</div>"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_from_records() {
        let mut r = Map::new();
        r.insert(
            "id".into(),
            Value::String("<script>alert(1)</script>".into()),
        );
        r.insert("reason".into(), Value::String("a&b".into()));
        let t = sample_table(&[r], true);
        assert!(!t.contains("<script>"), "{t}");
        assert!(t.contains("&lt;script&gt;") && t.contains("a&amp;b"));
    }

    #[test]
    fn chart_ids_are_escaped_attributes() {
        let f = figure("hist-x\"><img src=x onerror=alert(1)>-n", "t", "c", None);
        assert!(!f.contains("<img") && !f.contains("x\">"), "{f}");
        assert!(f.contains("id=\"hist-x&quot;&gt;&lt;img src=x onerror=alert(1)&gt;-n\""));
        let f = figure("a'b", "t", "c", Some("<svg></svg>".into()));
        assert!(f.contains("id=\"a&#39;b\""), "{f}");
    }

    #[test]
    fn sample_urls_are_links_only_when_http() {
        let mut r = Map::new();
        r.insert("id".into(), Value::String("1".into()));
        r.insert("url".into(), Value::String("javascript:alert(1)".into()));
        let t = sample_table(&[r.clone()], false);
        assert!(!t.contains("href"), "{t}");
        r.insert(
            "url".into(),
            Value::String("https://a.example/\"><b>".into()),
        );
        let t = sample_table(&[r], false);
        assert!(
            t.contains("<a href=\"https://a.example/%22%3E%3Cb%3E\""),
            "{t}"
        );
    }

    #[test]
    fn cluster_bars_start_at_two_and_label_ranges() {
        let mut h = Histogram::default();
        for v in [1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 40.0] {
            h.record(v);
        }
        let bars = cluster_bars(&h);
        assert_eq!(bars[0], ("2".to_string(), 3));
        assert_eq!(bars[1], ("3".to_string(), 1));
        assert_eq!(bars[2], ("40–43".to_string(), 1), "{bars:?}");
    }

    /// The near-dedup candidates histogram counts band-bucket groups (a pair once per
    /// band it shares): the report must not call them clusters (found by a new user:
    /// 4 real clusters read as "47 clusters of 2 or more, 0 without duplicates").
    #[test]
    fn near_candidate_groups_are_not_called_clusters() {
        use crate::coordinator::status::fixture;
        let mut p = fixture::phase("p03", 2, 10);
        let mut h = Histogram::default();
        for _ in 0..14 {
            h.record(2.0);
        }
        p.stats.histograms.insert(NEAR_GROUP_SIZE.into(), h);
        let html = render(&fixture::job(vec![p]), &Samples::default());
        assert!(
            html.contains("Near-duplicate candidate groups: p03"),
            "{html}"
        );
        assert!(html.contains("not clusters"));
        assert!(!html.contains("Duplicate clusters: p03"));
        assert!(!html.contains("without duplicates"));
    }

    #[test]
    fn empty_data_draws_no_chart() {
        assert!(hbars(&[]).is_none());
        assert!(vbars(&[("a".into(), 0)], "#000", 100.0, 100.0).is_none());
        assert!(figure("x", "t", "c", None).contains("data-empty"));
    }
}
