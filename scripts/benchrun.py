"""One `mdf run` as the benchmark scripts time it (substring-bench.py,
paragraph-bench.py, against-bench.py import it from this folder)."""
import resource
import subprocess
import sys
import time


def run_job(mdf, spec, jobs, workers=None):
    """Runs `mdf run SPEC --job-root JOBS [--workers N]`: the job's URI, wall and CPU
    seconds, and the process's own peak RSS in MiB (from /usr/bin/time: getrusage's
    children maxima span every child so far). Exits with mdf's output on failure."""
    rss_file = spec + ".rss"
    cmd = ["/usr/bin/time", "-f", "%M", "-o", rss_file, mdf, "run", spec, "--job-root", jobs]
    if workers:
        cmd += ["--workers", workers]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    o = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if o.returncode != 0:
        sys.exit(o.stdout + o.stderr)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    job = [l[5:] for l in o.stdout.splitlines() if l.startswith("job: ")][-1]
    with open(rss_file) as fh:
        rss = int(fh.read().split()[-1]) / 1024
    return job, wall, cpu, rss
