#!/usr/bin/env bash
# Runs the cargo-fuzz targets (fuzz/): each for SECONDS (default 600), seeded from
# ../shared/data (copied into target/fuzz-corpus, never into the repository).
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-600}"; shift || true
TARGETS=("$@"); [[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(warc_reader html_extract image_decode)
DATA=../shared/data
CORPUS=target/fuzz-corpus
mkdir -p "$CORPUS/warc_reader" "$CORPUS/html_extract" "$CORPUS/image_decode"
# Seeds: every WARC/ARC/WET file (small ones whole), and real HTML pages.
find "$DATA/warc" -type f -size -300k \( -name '*.warc*' -o -name '*.arc*' -o -name '*.bad' \) \
  -exec cp -n {} "$CORPUS/warc_reader/" \;
i=0
for f in "$DATA"/extraction-dev/html/*.gz; do
  gzip -dc "$f" > "$CORPUS/html_extract/page-$i.html"; i=$((i+1)); [[ $i -ge 200 ]] && break
done
# Seeds: Pillow's test images (bad ones included) and the bundled generated images.
find "$DATA/images/pillow-tests" -type f -size -300k -exec cp -n {} "$CORPUS/image_decode/" \; 2>/dev/null || true
cp -n examples/data/images/* "$CORPUS/image_decode/" 2>/dev/null || true
for t in "${TARGETS[@]}"; do
  echo "== $t for ${SECS}s"
  cargo +nightly fuzz run "$t" "$CORPUS/$t" -- -max_total_time="$SECS" -max_len=1048576 -timeout=20 -rss_limit_mb=4096
done
