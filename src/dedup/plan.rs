//! Planning a dedup (docs/DEDUP.md): how many key partitions, the reduce phase (or
//! the near-duplicate candidates and label-step phases) that follow a dedup stage's
//! map phase, the fingerprints that name the shuffle, and the submit-time check of an
//! `against` job. The coordinator's planner calls these for each dedup stage; they
//! read nothing but the spec and, for `against`, the earlier job.
use super::params::DedupParams;
use crate::protocol::hash16;
use crate::protocol::records::{
    DedupPhase, DedupPhaseKind, DedupPhaseParams, PhaseKind, PhasePlan, TaskManifest, VERSION,
    phase_name,
};
use crate::spec::Spec;
use crate::spec::reader::{FieldError, SpecErrors};
use crate::store::Registry;
use arrow_schema::{Schema, SchemaRef};

/// A dedup's key partitions (= reduce tasks): `params.partitions`, or for `auto` about
/// 128 MiB of keys each, from the job's input bytes (~2 KiB of input per record, each
/// record's key entries).
pub fn dedup_partitions(d: &DedupParams, input_bytes: u64) -> u32 {
    let keys_bytes = input_bytes / 2048 * d.kind.keys_per_record() * (d.kind.entry_bytes() + 8);
    d.partitions
        .unwrap_or_else(|| keys_bytes.div_ceil(128 << 20).clamp(1, 4096) as u32)
}

/// The persisted plan of the dedup stage `stage` (index `map_phase` is the phase it
/// ends), as the phases after it carry it.
pub fn dedup_phase(
    stage: &str,
    params: &DedupParams,
    partitions: u32,
    map_phase: usize,
) -> DedupPhase {
    DedupPhase {
        stage: stage.to_string(),
        params: DedupPhaseParams::from(params),
        partitions,
        map_phase,
        step: 0,
        against_identity: None,
    }
}

/// What a dedup's shuffle reads and how it cuts it: the map phase's fingerprint, the
/// partition count (`partitions: auto` depends on the input size) and the exact set of
/// map tasks. Reduce and propagate fingerprints derive from it, so `--reuse` takes an
/// earlier job's reduce or apply commits only when that job shuffled exactly the same
/// map tasks into the same key ranges (a reduce over {a, b} decides differently from
/// one over {a}; decisions are addressed by map-task index).
pub fn shuffle_identity(map_fp: &str, partitions: u32, map_digest: &str) -> String {
    hash16(&["shuffle", map_fp, &partitions.to_string(), map_digest])
}

/// The phases between a dedup's map phase and its apply phase, numbered from `first`:
/// exact, one reduce phase; near duplicates, the candidates reduce, then
/// 2·max_rounds − 1 label steps (record, bucket, ..., record); semantic, the
/// centroids (one task), then the assign and reduce steps. One task per key
/// partition each otherwise. `map_fp`, `map_tasks` and `map_out` are the map phase's
/// fingerprint, tasks and output schema.
pub fn shuffle_phases(
    dd: &DedupPhase,
    map_fp: &str,
    map_digest: &str,
    map_out: &Schema,
    first: usize,
) -> Vec<(PhasePlan, Vec<TaskManifest>)> {
    let semantic = dd.params.kind.is_semantic();
    let steps = if semantic {
        2
    } else if !dd.params.kind.is_near() {
        0
    } else {
        2 * dd.params.max_rounds - 1
    };
    let mut shuffle = shuffle_identity(map_fp, dd.partitions, map_digest);
    if dd.params.against.is_some() {
        // Decisions against an earlier corpus mark its records (`EARLIER_NODE`) since
        // this build: a reduce of an earlier build, which kept records read from the
        // earlier job's own files, is never reused.
        shuffle = hash16(&[&shuffle, "earlier-marked"]);
    }
    if let Some(e) = &dd.against_identity {
        // The earlier job as it is now ([`check_against`]): a job replaced under the
        // same URI since is another index, so nothing decided against the old one is
        // reused.
        shuffle = hash16(&[&shuffle, "earlier", e]);
    }
    let mut out = Vec::new();
    for step in 0..=steps {
        let name = phase_name(first + step as usize);
        let rfp = if step == 0 {
            hash16(&["reduce", &shuffle])
        } else {
            hash16(&["propagate", &step.to_string(), &shuffle])
        };
        // Semantic step 0 (the centroids) is one task.
        let tasks = if semantic && step == 0 {
            1
        } else {
            dd.partitions
        };
        let list: Vec<TaskManifest> = (0..tasks)
            .map(|r| TaskManifest {
                version: VERSION,
                job_id: String::new(),
                phase: name.clone(),
                task_id: hash16(&[&rfp, "partition", &r.to_string()]),
                inputs: vec![],
                upstream: vec![],
            })
            .collect();
        let phase = PhasePlan {
            name,
            fingerprint: rfp,
            stages: vec![],
            input_schema: map_out.clone(),
            output_schema: Schema::empty(),
            last: false,
            gpu: false,
            tasks: list.len() as u64,
            kind: if step == 0 {
                PhaseKind::Reduce
            } else {
                PhaseKind::Propagate
            },
            dedup: Some(DedupPhase { step, ..dd.clone() }),
            task_digest: Some(digest_of(&list)),
            shard_digits: 0,
        };
        out.push((phase, list));
    }
    out
}

/// An apply phase's fingerprint: its decisions come from the last shuffle phase, so
/// its fingerprint (and so its task ids and every id downstream) names the shuffle,
/// not just the spec.
pub fn apply_fingerprint(spec_fp: &str, last_shuffle_fp: &str) -> String {
    hash16(&[spec_fp, "apply", last_shuffle_fp])
}

/// The [`PhasePlan::task_digest`] of a phase's tasks.
fn digest_of(tasks: &[TaskManifest]) -> String {
    let mut ids: Vec<&str> = tasks.iter().map(|t| t.task_id.as_str()).collect();
    ids.sort_unstable();
    crate::protocol::records::task_digest(&ids)
}

/// Why a spec's `against` jobs could not be accepted.
#[derive(Debug, thiserror::Error)]
pub enum AgainstError {
    /// The spec is refused, naming `params.against`.
    #[error(transparent)]
    Spec(#[from] SpecErrors),
    /// The earlier job could not be read.
    #[error("{0}")]
    Storage(String),
}

/// The stage that last writes column `col` before stage `before`, given each phase's
/// stages and input schema (the planner's for a new job, the manifest's for an earlier
/// one): each stage's output fields over the schema its phase has reached. An error
/// when a stage before it cannot say (its operator refuses the schema).
fn writer_of(
    operators: &[std::sync::Arc<dyn crate::ops::Operator>],
    phases: &[(Vec<usize>, SchemaRef)],
    col: &str,
    before: usize,
) -> Result<Option<usize>, String> {
    let mut writer = None;
    for (idxs, input) in phases {
        let mut schema = input.clone();
        for &i in idxs.iter().filter(|&&i| i < before) {
            let op = operators
                .get(i)
                .ok_or_else(|| format!("stage {i} does not build"))?;
            let fields = op
                .output_fields(&schema)
                .map_err(|e| format!("stage {i}: {e}"))?;
            if fields.iter().any(|f| f.name() == col) {
                writer = Some(i);
            }
            schema = crate::ops::output_schema(op.as_ref(), &schema)
                .map_err(|e| format!("stage {i}: {e}"))?;
        }
    }
    Ok(writer)
}

/// The operator and canonical params of the stage that wrote the key column `col` of
/// the dedup stage `at`, or `None` when the column came with the input. Only the
/// stages before `at` are built (an earlier job's later stages may be ones this build
/// cannot run, and do not matter here).
fn producer(
    spec: &Spec,
    phases: &[(Vec<usize>, SchemaRef)],
    col: &str,
    at: usize,
) -> Result<Option<(String, String)>, String> {
    let mut head = spec.clone();
    head.stages.truncate(at);
    let operators = crate::ops::build_stages(&head).map_err(|e| e.to_string())?;
    Ok(writer_of(&operators, phases, col, at)?.map(|i| {
        let st = &spec.stages[i];
        (st.op.clone(), crate::spec::canonical_json(&st.params))
    }))
}

/// A dedup stage's `against` job must exist, be complete up to its dedup reduce, have
/// a dedup of the same kind and band layout on the same key column, and have computed
/// that column with the same stage and params (else its keys mean something else).
/// `bound` is the new job's phases' (input, output) schemas, as the planner bound them.
/// Returns each such stage's index with the earlier job's identity: its URI, id, spec
/// hash and creation time (a job deleted and submitted again under the same URI has
/// another). It enters the shuffle's fingerprint and the plan hash.
pub async fn check_against(
    spec: &Spec,
    reg: &Registry,
    bound: &[(SchemaRef, SchemaRef)],
) -> Result<Vec<(usize, String)>, AgainstError> {
    let mut errors = Vec::new();
    let mut identities = Vec::new();
    let retry = crate::protocol::io::Retry::new(crate::clock::Entropy::from_os());
    let phases: Vec<(Vec<usize>, SchemaRef)> = spec
        .phases()
        .into_iter()
        .zip(bound.iter().map(|b| b.0.clone()))
        .collect();
    for i in 0..spec.stages.len() {
        let Some(d) = crate::ops::dedup_params(spec, i) else {
            continue;
        };
        let Some(uri) = &d.against else { continue };
        let path = format!("stages[{i}].params.against");
        let err = |m: String| FieldError {
            path: path.clone(),
            message: m,
        };
        let old = match crate::protocol::job::load_job(reg, uri, &retry).await {
            Ok(j) => j,
            Err(e) => {
                errors.push(err(format!("cannot load job {uri}: {e}")));
                continue;
            }
        };
        let kind = DedupPhaseParams::from(&d).kind;
        let on_key = || {
            old.manifest
                .phases
                .iter()
                .filter_map(|p| p.dedup.as_ref())
                .filter(|x| x.params.key == d.key)
        };
        // The earlier dedup stage on this key with this band layout (a job may have
        // two on one column).
        let Some((oi, od)) = on_key()
            .find(|x| x.params.kind.same_bands(&kind))
            .and_then(|x| {
                let oi = old.spec.stages.iter().position(|s| s.name == x.stage)?;
                Some((oi, x))
            })
        else {
            errors.push(err(match on_key().next() {
                Some(x) => format!(
                    "job {uri} deduplicated {:?} as {}, not as {} (the band keys differ)",
                    d.key,
                    describe(&x.params.kind),
                    describe(&kind)
                ),
                None => format!("job {uri} has no dedup stage on the key {:?}", d.key),
            }));
            continue;
        };
        // The stage that produced the key, here and there: same operator and params.
        let old_phases: Vec<(Vec<usize>, SchemaRef)> = old
            .manifest
            .phases
            .iter()
            .filter(|p| p.kind.is_map() || p.kind == PhaseKind::Apply)
            .map(|p| {
                (
                    p.stages.clone(),
                    std::sync::Arc::new(p.input_schema.clone()),
                )
            })
            .collect();
        let (here, there) = match (
            producer(spec, &phases, &d.key, i),
            producer(&old.spec, &old_phases, &d.key, oi),
        ) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) => {
                errors.push(err(format!(
                    "cannot tell which stage computes {:?}: {e}",
                    d.key
                )));
                continue;
            }
            (_, Err(e)) => {
                errors.push(err(format!(
                    "cannot tell which stage of job {uri} computed {:?}: {e}",
                    d.key
                )));
                continue;
            }
        };
        if here != there {
            errors.push(err(format!(
                "job {uri} computed {:?} with a different stage or parameters",
                d.key
            )));
            continue;
        }
        let map = &old.manifest.phases[od.map_phase];
        let (store, _) = reg
            .resolve(uri)
            .map_err(|e| AgainstError::Storage(e.to_string()))?;
        let done =
            crate::protocol::io::list_all(store.as_ref(), &old.paths.commits(&map.name), &retry)
                .await
                .map_err(|e| AgainstError::Storage(e.to_string()))?
                .len() as u64;
        if done < map.tasks {
            errors.push(err(format!(
                "job {uri} is not complete: {done} of {} tasks of {} committed",
                map.tasks, map.name
            )));
        }
        identities.push((i, against_identity(&old)));
    }
    if errors.is_empty() {
        Ok(identities)
    } else {
        Err(AgainstError::Spec(SpecErrors(errors)))
    }
}

pub use super::shuffle::against_identity;

/// A dedup kind as the refusal names it.
fn describe(k: &DedupPhaseKind) -> String {
    match k {
        DedupPhaseKind::Exact => "exact keys".into(),
        DedupPhaseKind::Minhash { bands, rows, .. } => format!("minhash {bands}×{rows}"),
        DedupPhaseKind::Phash { radius } => format!("phash radius {radius}"),
        DedupPhaseKind::Substring { .. } => "substrings".into(),
        DedupPhaseKind::Paragraph { .. } => "paragraphs".into(),
        DedupPhaseKind::Semantic { .. } => "embeddings".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digest of these map task ids, as planning computes it.
    fn digest(ids: &[&str]) -> String {
        let mut v = ids.to_vec();
        v.sort_unstable();
        crate::protocol::records::task_digest(&v)
    }

    #[test]
    fn the_shuffle_identity_names_the_map_tasks_and_the_partitions() {
        let ab = shuffle_identity("fp", 4, &digest(&["a", "b"]));
        assert_eq!(
            ab,
            shuffle_identity("fp", 4, &digest(&["b", "a"])),
            "order-free"
        );
        assert_ne!(
            ab,
            shuffle_identity("fp", 4, &digest(&["a"])),
            "fewer map tasks"
        );
        assert_ne!(ab, shuffle_identity("fp", 4, &digest(&["a", "b", "c"])));
        assert_ne!(
            ab,
            shuffle_identity("fp", 5, &digest(&["a", "b"])),
            "key ranges"
        );
        assert_ne!(ab, shuffle_identity("fq", 4, &digest(&["a", "b"])));
        // The identity jobs planned before it took a digest: the set's hash of the
        // sorted ids, one a line (a changed value would rename every reduce task).
        let mut h = blake3::Hasher::new();
        h.update(b"a\nb\n");
        let set = h.finalize().to_hex();
        assert_eq!(ab, hash16(&["shuffle", "fp", "4", set.as_str()]));
    }

    /// Exact: one reduce phase; near: the candidates reduce and 2·R − 1 label steps,
    /// numbered on from `first`, every task id derived from the shuffle.
    #[test]
    fn shuffle_phases_follow_the_kind() {
        let params = |kind| DedupParams {
            key: "k".into(),
            keep: super::super::Keep::LowestId,
            partitions: Some(3),
            memory_bytes: 1 << 20,
            cluster_column: false,
            against: None,
            kind,
            max_rounds: 4,
        };
        let maps = digest(&["a", "b"]);
        let exact = dedup_phase("dd", &params(super::super::DedupKind::Exact), 3, 1);
        let got = shuffle_phases(&exact, "fp", &maps, &Schema::empty(), 2);
        assert_eq!(got.len(), 1);
        let (p, tasks) = &got[0];
        assert_eq!(
            (p.name.as_str(), p.kind, p.tasks),
            ("p02", PhaseKind::Reduce, 3)
        );
        let shuffle = shuffle_identity("fp", 3, &maps);
        assert_eq!(p.fingerprint, hash16(&["reduce", &shuffle]));
        assert_eq!(
            tasks[1].task_id,
            hash16(&[&p.fingerprint, "partition", "1"])
        );
        let near = dedup_phase(
            "dd",
            &params(super::super::DedupKind::Phash { radius: 2 }),
            3,
            1,
        );
        let got = shuffle_phases(&near, "fp", &maps, &Schema::empty(), 2);
        let kinds: Vec<(PhaseKind, u32)> = got
            .iter()
            .map(|(p, _)| (p.kind, p.dedup.as_ref().unwrap().step))
            .collect();
        assert_eq!(kinds.len(), 8);
        assert_eq!(kinds[0], (PhaseKind::Reduce, 0));
        assert_eq!(kinds[7], (PhaseKind::Propagate, 7));
        assert_eq!(got[7].0.name, "p09");
    }
}
