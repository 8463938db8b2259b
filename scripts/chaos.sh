#!/usr/bin/env bash
# Longer chaos runs than the CI test (tests/chaos.rs): more workers, more SIGKILLs,
# more zombies (every MDF_CHAOS_PAUSE_EVERY-th victim is paused with SIGSTOP past the
# lease TTL and resumed instead of killed; 0: none), more input, against a moto S3
# server this script starts on 127.0.0.1 (or the endpoint in MDF_TEST_S3_ENDPOINT;
# set MDF_CHAOS_LOCAL=1 for the local store).
#   scripts/chaos.sh                       # 200 kills, 12 workers, 48 files, 1 in 4 paused
#   MDF_CHAOS_KILLS=1000 MDF_CHAOS_WORKERS=16 MDF_CHAOS_FILES=96 scripts/chaos.sh
# On S3 the workers go through a fault-injecting HTTP proxy (tests/common/fault_proxy.rs):
# MDF_CHAOS_HTTP_FAULTS is the rate per fault kind and request (default here 0.005).
set -euo pipefail
cd "$(dirname "$0")/.."
export MDF_CHAOS_KILLS="${MDF_CHAOS_KILLS:-200}"
export MDF_CHAOS_WORKERS="${MDF_CHAOS_WORKERS:-12}"
export MDF_CHAOS_FILES="${MDF_CHAOS_FILES:-48}"
export MDF_CHAOS_HTTP_FAULTS="${MDF_CHAOS_HTTP_FAULTS:-0.005}"
export MDF_CHAOS_PAUSE_EVERY="${MDF_CHAOS_PAUSE_EVERY:-4}"
if [[ -z "${MDF_CHAOS_LOCAL:-}" && -z "${MDF_TEST_S3_ENDPOINT:-}" ]]; then
  python3 -c 'import moto.server' 2>/dev/null || python3 -m pip install --quiet 'moto[server]'
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
  python3 -m moto.server -H 127.0.0.1 -p "$PORT" >/tmp/mdf-chaos-moto.log 2>&1 &
  MOTO=$!
  trap 'kill $MOTO 2>/dev/null || true' EXIT
  python3 - "$PORT" <<'PY'
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}"
for _ in range(100):
    try:
        urllib.request.urlopen(urllib.request.Request(url + "/mdf-test", method="PUT"))
        break
    except Exception:
        time.sleep(0.1)
PY
  export MDF_TEST_S3_ENDPOINT="http://127.0.0.1:$PORT" MDF_TEST_S3_BUCKET=mdf-test
fi
[[ -n "${MDF_CHAOS_LOCAL:-}" ]] && unset MDF_TEST_S3_ENDPOINT
cargo test --release --test chaos -- --nocapture
