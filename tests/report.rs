//! `mdf report`: the HTML report of a real job is self-contained, its numbers are the
//! committed tasks' (the same as `mdf status --json`), and headless Chromium renders
//! every chart (the page's own check, read back from the DOM) and takes a screenshot.
mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const SPEC: &str = r#"
version: 1
name: report
input:
  uris: ["ROOT/examples/data/commoncrawl/sample.warc.gz"]
stages:
  - op: html_extract
  - op: text_length
  - op: language_filter
    params: {languages: [en, de], min_score: 0.5}
  - op: gopher_quality
  - op: exact_key
    name: content
  - op: dedup
    params: {key: content_key, partitions: 2}
output:
  uri: OUT
  drop_columns: [html]
job:
  task_bytes: 8KiB
"#;

fn run_job(dir: &Path) -> (String, PathBuf) {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = dir.join("out");
    let spec = write_spec(
        dir,
        &SPEC
            .replace("ROOT", root)
            .replace("OUT", out.to_str().unwrap()),
    );
    let o = run_ok(mdf().args([
        "run",
        spec.to_str().unwrap(),
        "--workers",
        "2",
        "--job-root",
        dir.join("jobs").to_str().unwrap(),
    ]));
    (job_uri(&o), out)
}

/// The stage's stats object in a status JSON.
fn stage<'a>(s: &'a serde_json::Value, phase: &str, stage: &str) -> &'a serde_json::Value {
    s["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == phase)
        .and_then(|p| {
            p["stats"]["stages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["stage"] == stage)
        })
        .unwrap_or_else(|| panic!("no stage {stage} in {phase}"))
}

fn chromium() -> Option<String> {
    if let Ok(p) = std::env::var("MDF_CHROMIUM") {
        return Some(p);
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(String::from)
}

#[test]
fn report_is_self_contained_exact_and_renders_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let (job, out) = run_job(dir.path());
    let status = status_json(&job);

    // Stats plumbing: every record that reached a scoring operator is in its
    // histogram, merged across tasks.
    let lang = stage(&status, "p00", "language_filter");
    assert_eq!(
        lang["histograms"]["language_score"]["count"], lang["records_in"],
        "{lang}"
    );
    let len = stage(&status, "p00", "text_length");
    assert_eq!(len["histograms"]["text_words"]["count"], len["records_in"]);
    assert!(len["histograms"]["text_chars"]["max"].as_f64().unwrap() > 100.0);
    // The exact reduce: records per distinct key, summing to the keys it read.
    let reduce = status["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "p01")
        .unwrap();
    let sizes = &reduce["stats"]["histograms"]["cluster_size"];
    assert_eq!(
        sizes["count"], reduce["records_out"],
        "one entry per distinct key"
    );
    assert_eq!(
        sizes["sum"].as_f64().unwrap() as u64,
        reduce["records_in"].as_u64().unwrap()
    );
    assert!(
        sizes["max"].as_f64().unwrap() >= 2.0,
        "the sample has a duplicate"
    );

    let html_path = dir.path().join("report.html");
    run_ok(mdf().args([
        "report",
        &job,
        "-o",
        html_path.to_str().unwrap(),
        "--samples",
        "3",
    ]));
    let html = std::fs::read_to_string(&html_path).unwrap();
    // Self-contained: nothing fetched from anywhere.
    for bad in ["<link", "src=", "@import", "url(", "@font-face"] {
        assert!(!html.contains(bad), "the report references {bad:?}");
    }
    for id in [
        "id=\"funnel\"",
        "id=\"rejects\"",
        "id=\"throughput\"",
        "id=\"dup-p01\"",
        "id=\"hist-language_filter-language_score\"",
        "id=\"hist-text_length-text_words\"",
    ] {
        assert!(html.contains(id), "no chart {id}");
    }
    // The funnel carries the committed numbers.
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    let gopher = stage(&status, "p00", "gopher_quality");
    assert!(
        html.contains(&format!(
            "{} of {}",
            n(&gopher["records_out"]),
            n(&gopher["records_in"])
        )),
        "funnel row of gopher_quality"
    );
    // Samples: kept records and one per reject reason.
    let kept = common::output_ids(&out);
    assert!(kept.iter().take(3).all(|id| html.contains(id.as_str())));
    for reason in ["language", "duplicate"] {
        assert!(
            html.contains(&format!("class=\"tag\">{reason}<")),
            "sample of {reason}"
        );
    }
    assert!(
        html.contains("class=\"tag\">gopher_"),
        "sample of a gopher_quality reason"
    );
    assert!(
        !html.contains("data-empty"),
        "every chart of this job has data"
    );
    let charts = html.matches("<figure class=\"chart\"").count();
    assert_eq!(charts, 7);

    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("MDF_REQUIRE_CHROMIUM").is_none(),
            "MDF_REQUIRE_CHROMIUM is set but no chromium was found"
        );
        eprintln!("skipping the browser half: no chromium (apt-get install chromium)");
        return;
    };
    let url = format!("file://{}", html_path.display());
    let flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
    ];
    let dom = Command::new(&browser)
        .args(flags)
        .args(["--virtual-time-budget=5000", "--dump-dom", &url])
        .output()
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains(&format!("data-charts=\"{charts}/{charts}\"")),
        "not every chart rendered: {}",
        dom.lines()
            .find(|l| l.contains("data-charts"))
            .unwrap_or("no check ran")
    );
    assert_eq!(dom.matches("data-rendered=\"yes\"").count(), charts);
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report.png");
    let _ = std::fs::remove_file(&shot);
    let o = Command::new(&browser)
        .args(flags)
        .args([
            "--window-size=1200,2600",
            &format!("--screenshot={}", shot.display()),
            &url,
        ])
        .output()
        .expect("chromium runs");
    let png = std::fs::read(&shot).unwrap_or_else(|e| {
        panic!(
            "no screenshot at {} ({e}): {}",
            shot.display(),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        png.len() > 20_000,
        "a blank page would be tiny: {} bytes",
        png.len()
    );
    eprintln!("report screenshot: {}", shot.display());
}

/// Headless Chromium's DOM of a page after its scripts ran.
fn dump_dom(browser: &str, page: &Path) -> String {
    let o = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every link element's start tag in `html` (text has its `<` escaped, so each `<a `
/// is an element).
fn links(html: &str) -> Vec<&str> {
    html.split("<a ")
        .skip(1)
        .map(|rest| &rest[..rest.find('>').unwrap_or(rest.len())])
        .collect()
}

/// Hostile stage names (a new spec refuses them, so they are written into the job's
/// records directly, as a job stored before that rule could hold them) and hostile
/// crawled content (`<script>`, attribute breakers, `javascript:` URLs, `</script>`
/// inside the JSON of a record): the report shows them as text, links only http(s),
/// and in Chromium none of them runs. Each payload would set the title to a marker
/// it builds at run time ('PW'+'NED'), so the marker is in the DOM only if one ran.
#[test]
fn hostile_names_and_content_run_no_script_in_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = "document.title='PW'+'NED'";
    let stage_a = format!("x\"><img src=x onerror={run}>");
    let stage_b = format!("y'><svg onload={run}>");
    let texts = [
        format!("<script>{run}</script> one two three"),
        format!("\"'><img src=x onerror={run}> one two three"),
        format!("</script><script>{run}</script> one two three"),
        format!("<a href=\"javascript:{run}\">click</a> one two"),
        format!("<script>{run}</script>"),
    ];
    let urls = [
        format!("javascript:{run}"),
        format!("JaVaScRiPt:{run}"),
        "https://example.org/ok?q=\"'<x>".to_string(),
        format!("\tjava\nscript:{run}"),
        format!("data:text/html,<script>{run}</script>"),
    ];
    let lines: Vec<String> = texts
        .iter()
        .zip(&urls)
        .map(|(t, u)| serde_json::json!({"url": u, "text": t}).to_string())
        .collect();
    write_lines(&d.join("in/hostile.jsonl"), &lines);
    let spec = write_spec(
        d,
        &format!(
            "name: hostile\ninput: {{uris: [\"{0}/in/*.jsonl\"]}}\nstages:\n  - {{op: text_length, name: stagea}}\n  - {{op: length_filter, name: stageb, params: {{min_words: 2}}}}\noutput: {{uri: \"{0}/out\"}}\n",
            d.display()
        ),
    );
    let jobs = d.join("jobs");
    let o = run_ok(
        mdf()
            .args(["run", spec.to_str().unwrap(), "--job-root"])
            .arg(&jobs),
    );
    let job = job_uri(&o);
    // The stage names, as a job stored before the rule may carry them.
    let json_inner = |s: &str| {
        let q = serde_json::to_string(s).unwrap();
        q[1..q.len() - 1].to_string()
    };
    let mut renamed = 0;
    for f in files_under(&jobs).iter().filter(|f| f.ends_with(".json")) {
        let p = jobs.join(f);
        let text = std::fs::read_to_string(&p).unwrap();
        let new = text
            .replace("\"stagea\"", &format!("\"{}\"", json_inner(&stage_a)))
            .replace("\"stageb\"", &format!("\"{}\"", json_inner(&stage_b)));
        if new != text {
            renamed += 1;
            std::fs::write(&p, new).unwrap();
        }
    }
    assert!(
        renamed >= 2,
        "job.json and the commit records name the stages"
    );
    let status = status_json(&job);
    stage(&status, "p00", &stage_a);

    let page = d.join("report.html");
    run_ok(mdf().args([
        "report",
        &job,
        "-o",
        page.to_str().unwrap(),
        "--samples",
        "10",
    ]));
    let html = std::fs::read_to_string(&page).unwrap();
    for raw in [&stage_a, &stage_b].into_iter().chain(&texts) {
        assert!(
            !html.contains(raw.as_str()),
            "unescaped in the report: {raw}"
        );
    }
    assert!(
        html.contains("&lt;img src=x onerror="),
        "the names are shown"
    );
    assert_eq!(html.matches("<script").count(), 1, "only the page's own");
    assert!(!html.contains("<img") && !html.contains("<svg onload"));
    let only_link =
        "href=\"https://example.org/ok?q=%22%27%3Cx%3E\" rel=\"nofollow noopener noreferrer\"";
    assert_eq!(
        links(&html),
        vec![only_link],
        "only the http(s) URL is a link"
    );

    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("MDF_REQUIRE_CHROMIUM").is_none(),
            "MDF_REQUIRE_CHROMIUM is set but no chromium was found"
        );
        eprintln!("skipping the browser half: no chromium (apt-get install chromium)");
        return;
    };
    let dom = dump_dom(&browser, &page);
    // The page's own script ran (scripts were on), and no payload did.
    assert!(dom.contains("data-charts=\""), "the self-check ran: {dom}");
    assert!(!dom.contains("PWNED"), "a payload ran: {dom}");
    assert!(
        dom.contains("<title>mdf report hostile-"),
        "the title is the report's"
    );
    assert_eq!(links(&dom), vec![only_link]);
}
