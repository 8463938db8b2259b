//! The report's charts: inline SVG drawn from numbers (bars, throughput over time,
//! cluster sizes, distributions). Every label is written through [`esc`]; nothing
//! from the job reaches an attribute unescaped or a script.
use super::escape::esc;
use crate::coordinator::status::{JobStatus, TaskSpan};
use crate::protocol::records::Histogram;
use std::collections::BTreeMap;
use std::fmt::Write;

pub(super) const COLORS: [&str; 8] = [
    "#3b6fb6", "#e07b39", "#4a9d5b", "#c2434b", "#8a64b5", "#8c6d46", "#d16ba5", "#6b7b8c",
];

/// 1234567 → "1.23M".
pub(super) fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A chart: a titled figure around an SVG whose marks carry `class="mark"` (what the
/// page's self-check counts), or a line saying why there is nothing to draw.
pub(super) fn figure(id: &str, title: &str, caption: &str, svg: Option<String>) -> String {
    match svg {
        Some(svg) => format!(
            "<figure class=\"chart\" id=\"{}\"><figcaption><b>{}</b> {}</figcaption>{svg}</figure>\n",
            esc(id),
            esc(title),
            esc(caption)
        ),
        None => format!(
            "<figure class=\"chart empty\" id=\"{}\" data-empty=\"yes\"><figcaption><b>{}</b> {}</figcaption><p class=\"none\">nothing recorded</p></figure>\n",
            esc(id),
            esc(title),
            esc(caption)
        ),
    }
}

/// Horizontal bars, one row per item: `(label, value, color, note)`; bars scale to
/// the largest value.
pub(super) fn hbars(rows: &[(String, f64, &str, String)]) -> Option<String> {
    if rows.is_empty() {
        return None;
    }
    let max = rows.iter().map(|r| r.1).fold(0.0, f64::max).max(1e-12);
    let (label_w, bar_w, row_h) = (260.0, 520.0, 22.0);
    let h = rows.len() as f64 * row_h + 8.0;
    let mut s = format!(
        "<svg viewBox=\"0 0 {} {h}\" width=\"100%\" role=\"img\">",
        label_w + bar_w + 140.0
    );
    for (i, (label, v, color, note)) in rows.iter().enumerate() {
        let y = 4.0 + i as f64 * row_h;
        let w = (v / max * bar_w).max(if *v > 0.0 { 1.5 } else { 0.0 });
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"lbl\">{}</text>\
             <rect class=\"mark\" x=\"{label_w}\" y=\"{y}\" width=\"{w:.1}\" height=\"{}\" fill=\"{color}\"><title>{}: {}</title></rect>\
             <text x=\"{}\" y=\"{}\" class=\"val\">{}</text>",
            label_w - 6.0,
            y + row_h * 0.68,
            esc(label),
            row_h - 6.0,
            esc(label),
            short(*v),
            label_w + w + 5.0,
            y + row_h * 0.68,
            esc(note)
        );
    }
    s.push_str("</svg>");
    Some(s)
}

/// Vertical bars over `(label, count)` bins, with the first and last labels and a
/// few between on the x axis.
pub(super) fn vbars(
    bins: &[(String, u64)],
    color: &str,
    width: f64,
    height: f64,
) -> Option<String> {
    if bins.iter().all(|b| b.1 == 0) {
        return None;
    }
    let max = bins.iter().map(|b| b.1).max().unwrap_or(1).max(1) as f64;
    let (left, bottom, top) = (44.0, 30.0, 8.0);
    let plot_w = width - left - 8.0;
    let plot_h = height - bottom - top;
    let bw = (plot_w / bins.len() as f64).min(48.0);
    let mut s = format!("<svg viewBox=\"0 0 {width} {height}\" width=\"100%\" role=\"img\">");
    let _ = write!(
        s,
        "<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"axis\"/>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"tick\">{}</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"tick\">0</text>",
        top + plot_h,
        left + plot_w,
        top + plot_h,
        left - 4.0,
        top + 9.0,
        short(max),
        left - 4.0,
        top + plot_h,
    );
    let every = (bins.len() / 6).max(1);
    for (i, (label, c)) in bins.iter().enumerate() {
        let x = left + i as f64 * bw;
        let h = *c as f64 / max * plot_h;
        let h = if *c > 0 { h.max(1.0) } else { 0.0 };
        let _ = write!(
            s,
            "<rect class=\"mark\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{color}\"><title>{}: {c}</title></rect>",
            top + plot_h - h,
            (bw - 1.0).max(0.5),
            esc(label)
        );
        if i % every == 0 || i + 1 == bins.len() {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" class=\"tick\">{}</text>",
                x + bw / 2.0,
                top + plot_h + 14.0,
                esc(label)
            );
        }
    }
    s.push_str("</svg>");
    Some(s)
}

/// Records per second over the job's wall time, one line per phase: each task's
/// records spread evenly over its span.
pub(super) fn throughput(s: &JobStatus, spans: &[TaskSpan]) -> Option<String> {
    let t0 = spans.iter().map(|t| t.started_ms).min()?;
    let t1 = spans.iter().map(|t| t.finished_ms).max()?.max(t0 + 1);
    const N: usize = 60;
    let bin_ms = (t1 - t0) as f64 / N as f64;
    let mut series: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for t in spans.iter().filter(|t| t.records_in > 0) {
        let v = series.entry(t.phase).or_insert_with(|| vec![0.0; N]);
        let (a, z) = (
            (t.started_ms - t0) as f64,
            (t.finished_ms.max(t.started_ms) - t0) as f64,
        );
        let per_ms = t.records_in as f64 / (z - a).max(1.0);
        let first = ((a / bin_ms) as usize).min(N - 1);
        let last = ((z / bin_ms) as usize).min(N - 1);
        for (i, slot) in v.iter_mut().enumerate().take(last + 1).skip(first) {
            let lo = (i as f64 * bin_ms).max(a);
            let hi = ((i + 1) as f64 * bin_ms).min(z.max(a + 1.0));
            if hi > lo {
                *slot += per_ms * (hi - lo);
            }
        }
    }
    if series.is_empty() {
        return None;
    }
    // records per bin → records per second
    let rate = 1000.0 / bin_ms.max(1e-9);
    let max = series
        .values()
        .flat_map(|v| v.iter())
        .fold(0.0f64, |m, x| m.max(x * rate))
        .max(1e-9);
    let (width, height, left, bottom, top) = (820.0, 240.0, 56.0, 34.0, 10.0);
    let (pw, ph) = (width - left - 150.0, height - bottom - top);
    let mut out = format!("<svg viewBox=\"0 0 {width} {height}\" width=\"100%\" role=\"img\">");
    let _ = write!(
        out,
        "<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"axis\"/>\
         <line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" class=\"axis\"/>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"tick\">{}/s</text>\
         <text x=\"{left}\" y=\"{}\" class=\"tick\">0 s</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"tick\">{:.1} s</text>",
        top + ph,
        left + pw,
        top + ph,
        top + ph,
        left - 4.0,
        top + 9.0,
        short(max),
        top + ph + 16.0,
        left + pw,
        top + ph + 16.0,
        (t1 - t0) as f64 / 1000.0
    );
    for (k, (phase, v)) in series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let pts: Vec<String> = v
            .iter()
            .enumerate()
            .map(|(i, x)| {
                format!(
                    "{:.1},{:.1}",
                    left + (i as f64 + 0.5) / N as f64 * pw,
                    top + ph - x * rate / max * ph
                )
            })
            .collect();
        let name = s.phases.get(*phase).map(|p| p.name.as_str()).unwrap_or("?");
        let _ = write!(
            out,
            "<polyline class=\"mark\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"><title>{}</title></polyline>\
             <rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{color}\"/>\
             <text x=\"{}\" y=\"{}\" class=\"lbl\">{}</text>",
            pts.join(" "),
            esc(name),
            left + pw + 14.0,
            top + 4.0 + k as f64 * 18.0,
            left + pw + 28.0,
            top + 13.0 + k as f64 * 18.0,
            esc(name)
        );
    }
    out.push_str("</svg>");
    Some(out)
}

/// Cluster sizes of two and more, one bar per histogram bucket (exact up to 16).
pub(super) fn cluster_bars(h: &Histogram) -> Vec<(String, u64)> {
    h.buckets
        .iter()
        .filter(|(b, _)| Histogram::bounds(**b).1 > 2.0)
        .map(|(b, c)| {
            let (lo, hi) = Histogram::bounds(*b);
            let (lo, hi) = (lo.ceil() as u64, (hi.ceil() as u64).saturating_sub(1));
            let label = if hi <= lo {
                lo.to_string()
            } else {
                format!("{lo}–{hi}")
            };
            (label, *c)
        })
        .collect()
}

pub(super) fn distribution(h: &Histogram, color: &str) -> Option<String> {
    let bins: Vec<(String, u64)> = h
        .bins(30)
        .into_iter()
        .map(|(lo, _, c)| (short(lo), c))
        .collect();
    vbars(&bins, color, 400.0, 170.0)
}
