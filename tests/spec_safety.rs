//! What a spec may not carry: secrets from the environment (the resolved spec is
//! stored in job.json and sent to workers, logs and remote hosts) and stage names
//! outside `[A-Za-z0-9_-]` (they reach job ids, `--set` paths and the HTML report).
mod common;
use common::*;
use mdf::spec::{Overrides, Spec};

/// A `format: laion` spec whose download user agent is `agent`.
fn laion_spec(dir: &std::path::Path, agent: &str) -> std::path::PathBuf {
    write_lines(
        &dir.join("in/urls.jsonl"),
        &[r#"{"url": "https://example.org/a.jpg", "caption": "a"}"#.to_string()],
    );
    write_spec(
        dir,
        &format!(
            "name: secrets\ninput:\n  uris: [\"{0}/in/*.jsonl\"]\n  format: laion\n  download: {{user_agent: \"{agent}\"}}\noutput: {{uri: \"{0}/out\"}}\n",
            dir.display()
        ),
    )
}

#[test]
fn a_secret_in_the_environment_never_reaches_the_spec() {
    let d = tempfile::tempdir().unwrap();
    let jobs = d.path().join("jobs");
    let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    let spec = laion_spec(d.path(), "mdf ${AWS_SECRET_ACCESS_KEY}");
    let o = mdf()
        .args(["run", spec.to_str().unwrap(), "--job-root"])
        .arg(&jobs)
        .env("AWS_SECRET_ACCESS_KEY", secret)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(
            "input.download.user_agent: ${AWS_SECRET_ACCESS_KEY} names a secret (matches *SECRET*)"
        ),
        "{err}"
    );
    assert!(!err.contains(secret) && !stdout(&o).contains(secret));
    assert!(!jobs.exists(), "nothing was written");

    // A user's own secret names, by MDF_SECRET_VARS; other variables still work.
    let spec = laion_spec(d.path(), "${CORP_MIRROR_PASS} ${UA_SUFFIX}");
    let o = mdf()
        .args(["validate", spec.to_str().unwrap()])
        .env("MDF_SECRET_VARS", "CORP_*")
        .env("CORP_MIRROR_PASS", "hunter2")
        .env("UA_SUFFIX", "x")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        out.contains("${CORP_MIRROR_PASS} names a secret (matches CORP_*)"),
        "{out}"
    );
    assert!(!out.contains("hunter2"));
    let spec = laion_spec(d.path(), "mdf-${UA_SUFFIX}");
    let o = mdf()
        .args(["validate", spec.to_str().unwrap()])
        .env("MDF_SECRET_VARS", "CORP_*")
        .env("UA_SUFFIX", "x")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
}

fn errors(text: &str) -> Vec<String> {
    match Spec::from_text(
        text,
        "spec.yaml",
        &Overrides::default(),
        &|_| None,
        &mdf::ops::Catalog,
    ) {
        Ok(_) => vec![],
        Err(e) => e.0.iter().map(|e| e.to_string()).collect(),
    }
}

#[test]
fn stage_names_are_plain_in_new_specs_and_stored_jobs_still_load() {
    let spec = |name: &str| {
        format!(
            "input: {{uris: [a.jsonl]}}\noutput: {{uri: o}}\nstages: [{{op: text_length}}, {{op: length_filter, name: {}}}]\n",
            serde_json::to_string(name).unwrap()
        )
    };
    for ok in ["lf", "Length-Filter_2", &"x".repeat(64)] {
        assert_eq!(errors(&spec(ok)), Vec::<String>::new(), "{ok}");
    }
    for bad in [
        "x\"><img src=x onerror=alert(1)>",
        "a b",
        "a.b",
        "",
        "é",
        &"x".repeat(65),
    ] {
        assert_eq!(
            errors(&spec(bad)),
            vec![format!(
                "stages[1].name: {bad:?} must be 1-64 characters of [A-Za-z0-9_-]"
            )],
            "{bad}"
        );
    }
    // A job.json written before the rule is validated by the rules it was written
    // under: a worker of this version still loads it.
    let stored: serde_json::Value =
        serde_yaml_ng::from_str(&spec("x\"><img src=x onerror=alert(1)>")).unwrap();
    let s = Spec::from_value(stored).expect("a stored job loads");
    assert_eq!(s.stages[1].name, "x\"><img src=x onerror=alert(1)>");
    let ops = mdf::ops::build_stages(&s).expect("its stages build");
    assert_eq!(ops.len(), 2);
}
