#!/usr/bin/env bash
# image_model end to end on one GPU (issue 25): JPEG bytes → decode + CLIP
# preprocessing on the CPU → a ViT-B/32-sized CLIP image tower (real shapes, random
# weights: scripts/vit-onnx.py) on CUDA in fp16 → L2-normalised 512-wide embeddings →
# Lance. Measures images/s end to end (the `mdf run` wall clock, model load included),
# the model alone on the same batches (onnxruntime-Python, the GPU's ceiling), GPU
# utilisation (nvidia-smi sampled every 200 ms) and the CPU it took (user + sys of
# the mdf process: CPU-seconds per image, the model's included on a CPU provider, and
# the cores that rate needs at the measured and at the goal's 5,000 images/s). Goal: ≥ 5,000 images/s on one H200, in < 8 min.
#
#   scripts/gpu-bench.sh                            # a GPU machine: 50,000 images, cuda, fp16, lance
#   N=64 PROVIDER=cpu FORMAT=parquet scripts/gpu-bench.sh   # the try on a CPU machine
#
# Settings (environment): N images (default 50000 with a GPU, 64 without), PROVIDER
# (cuda | cpu; default cuda when nvidia-smi works), PRECISION (fp16 | fp32; default
# fp16 on cuda, fp32 on cpu), FORMAT (lance | parquet; default lance), BATCH (images
# per inference call, 256), WORKERS (mdf workers in the one process, default 4: tasks
# decode in parallel while the single session runs), TASK_FILES (images per input
# folder = per task, 2,000), LAYERS (12; fewer for a quick CPU try), WORK (scratch dir,
# /tmp/mdf-gpu-bench), MDF (the binary; default target/release/mdf, built with
# `cargo build --release --features onnx,lance` when missing: that build is NOT part
# of the 8 minutes, build it first), ORT_DYLIB_PATH (default: the libonnxruntime.so
# of the installed onnxruntime / onnxruntime-gpu wheel; cuda needs onnxruntime-gpu).
# Python needs numpy, Pillow, onnx and onnxruntime(-gpu); nothing is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

if [[ -z "${PROVIDER:-}" ]]; then
  if nvidia-smi >/dev/null 2>&1; then PROVIDER=cuda; else PROVIDER=cpu; fi
fi
if [[ "$PROVIDER" == cuda ]]; then
  N="${N:-50000}"; PRECISION="${PRECISION:-fp16}"
else
  N="${N:-64}"; PRECISION="${PRECISION:-fp32}"; BATCH="${BATCH:-32}"
fi
FORMAT="${FORMAT:-lance}"
BATCH="${BATCH:-256}"
WORKERS="${WORKERS:-4}"
TASK_FILES="${TASK_FILES:-2000}"
LAYERS="${LAYERS:-12}"
WORK="${WORK:-/tmp/mdf-gpu-bench}"
MDF="${MDF:-$ROOT/target/release/mdf}"
if [[ ! -x "$MDF" ]]; then
  features=onnx; [[ "$FORMAT" == lance ]] && features=onnx,lance
  echo "building $MDF (--features $features; not timed)" >&2
  cargo build --release --features "$features"
fi
if [[ -z "${ORT_DYLIB_PATH:-}" ]]; then
  ORT_DYLIB_PATH=$(python3 -c "import onnxruntime, glob, os; print(sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), 'capi', 'libonnxruntime.so*')))[0])")
fi
export ORT_DYLIB_PATH
echo "provider $PROVIDER, $PRECISION, $N images, batch $BATCH, $WORKERS workers, output $FORMAT, onnxruntime $ORT_DYLIB_PATH"

START=$(date +%s)
mkdir -p "$WORK"
# 1. The model: ViT-B/32's visual tower, generated (cached between runs).
MODEL="$WORK/vit-b32-$PRECISION-l$LAYERS.onnx"
if [[ ! -f "$MODEL" ]]; then
  flag=""; [[ "$PRECISION" == fp16 ]] && flag=--fp16
  python3 scripts/vit-onnx.py "$MODEL" $flag --layers "$LAYERS"
fi

# 2. N distinct JPEGs of LAION size (400–600 px, ~30 KiB) in folders of TASK_FILES:
# 500 made from the real photos (scripts/bench-images.py --make), each copied with a
# unique JPEG comment (COM) segment after SOI, so every file decodes to the same pixels
# as its base but no two files share bytes (mdf's decode cache is content-addressed).
IMAGES="$WORK/images-$N"
if [[ ! -d "$IMAGES" ]]; then
  python3 scripts/bench-images.py --make "$WORK/base" 500 >/dev/null
  python3 - "$WORK/base" "$IMAGES" "$N" "$TASK_FILES" <<'PY'
import os, struct, sys
base, out, n, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
srcs = [open(os.path.join(base, f), "rb").read() for f in sorted(os.listdir(base))]
for i in range(n):
    d = os.path.join(out, f"part{i // per:04d}")
    if i % per == 0:
        os.makedirs(d, exist_ok=True)
    b = srcs[i % len(srcs)]
    com = b"mdf-bench %012d" % i
    with open(os.path.join(d, f"img{i:07d}.jpg"), "wb") as f:
        f.write(b[:2] + b"\xff\xfe" + struct.pack(">H", len(com) + 2) + com + b[2:])
PY
fi
KIB=$(du -sk "$IMAGES" | cut -f1)
echo "inputs ready after $(( $(date +%s) - START )) s: $N JPEGs, $(( KIB / 1024 )) MiB"

# 3. The model alone (onnxruntime-Python, the same provider and batch; random input
# already in host memory): the ceiling the pipeline is measured against.
python3 - "$MODEL" "$PROVIDER" "$PRECISION" "$BATCH" <<'PY' | tee "$WORK/model-only.txt"
import sys, time
import numpy as np
import onnxruntime as ort
model, provider, precision, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
providers = ["CUDAExecutionProvider"] if provider == "cuda" else ["CPUExecutionProvider"]
s = ort.InferenceSession(model, providers=providers)
x = np.random.default_rng(0).random((batch, 3, 224, 224)).astype(
    np.float16 if precision == "fp16" else np.float32)
s.run(None, {"pixel_values": x})  # warm-up (cuDNN autotuning, allocations)
n, t = 0, time.perf_counter()
while time.perf_counter() - t < (20 if provider == "cuda" else 5):
    s.run(None, {"pixel_values": x})
    n += batch
dt = time.perf_counter() - t
print(f"model alone ({provider}, {precision}, batch {batch}): {n / dt:.0f} images/s")
PY

# 4. The mdf job, timed, with nvidia-smi sampling the GPU.
OUT="$WORK/out-$FORMAT"
rm -rf "$OUT" "$WORK/jobs"
cat >"$WORK/spec.yaml" <<EOF
name: gpu-bench
input: {uris: ["$IMAGES/"], format: image_folder}
stages:
  - op: image_model
    params: {model: "$MODEL", preset: clip, dim: 512, normalize: true, provider: $PROVIDER, precision: $PRECISION, batch_size: $BATCH}
output: {uri: "$OUT", format: $FORMAT, drop_columns: [image]}
EOF
SMI=""
if [[ "$PROVIDER" == cuda ]]; then
  nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 200 >"$WORK/gpu.csv" &
  SMI=$!
fi
python3 - "$MDF" "$WORK/spec.yaml" "$WORKERS" "$WORK/jobs" "$N" <<'PY' | tee "$WORK/result.txt"
import os, resource, subprocess, sys, time
mdf, spec, workers, jobs, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
t = time.perf_counter()
p = subprocess.run([mdf, "run", spec, "--workers", workers, "--job-root", jobs],
                   capture_output=True, text=True)
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
if p.returncode != 0:
    sys.stdout.write(p.stdout + p.stderr)
    sys.exit(f"mdf run failed ({p.returncode})")
cpu = ru.ru_utime + ru.ru_stime
print(p.stdout.strip().splitlines()[0])
print(f"end to end: {n} images in {wall:.1f} s = {n / wall:.0f} images/s")
print(f"CPU: {cpu:.1f} CPU-s (user {ru.ru_utime:.1f}, sys {ru.ru_stime:.1f}) = "
      f"{cpu / wall:.1f} cores busy, {cpu / n * 1e3:.2f} CPU-ms per image; "
      f"{cpu / n * 5000:.1f} cores at 5,000 images/s")
PY
if [[ -n "$SMI" ]]; then
  kill "$SMI" 2>/dev/null || true
  python3 - "$WORK/gpu.csv" <<'PY' | tee -a "$WORK/result.txt"
import sys
rows = [[float(v) for v in l.split(",")] for l in open(sys.argv[1]) if l.strip()]
util = [r[0] for r in rows]
busy = [u for u in util if u > 0]
print(f"GPU utilisation: mean {sum(util) / len(util):.0f} % over {len(util)} samples, "
      f"mean {sum(busy) / max(len(busy), 1):.0f} % while busy, "
      f"memory up to {max(r[1] for r in rows):.0f} MiB")
PY
fi
# The output holds one embedding per image.
python3 - "$OUT" "$FORMAT" "$N" <<'PY'
import json, os, sys
out, fmt, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
m = json.load(open(os.path.join(out, "_manifest.json")))
rows = sum(f.get("rows", 0) for f in m.get("files", []))
print(f"output: {fmt} at {out}, manifest rows {rows}" + ("" if rows in (0, n) else f" (expected {n})"))
PY
echo "total script time $(( $(date +%s) - START )) s"
