#!/usr/bin/env python3
"""Groups a perf recording of a whole `mdf run` into the components of docs/PERFORMANCE.md's
profile tables (self time, % of all samples):

    perf record -g -F 1999 -o run.data mdf run examples/commoncrawl.yaml ...
    scripts/profile-table.py run.data [--other]   # --other: the ungrouped symbols too
"""
import collections
import re
import subprocess
import sys

out=subprocess.run(['perf','report','-i',sys.argv[1],'--no-children','--sort','dso,sym','--stdio','-g','none','--percent-limit','0'],capture_output=True,text=True).stdout
cats=[('inflate (libdeflate, zlib)',r'deflate_decompress|inflate|crc32'),
('JPEG decode',r'kernels::jpeg'),
('image resample/hash/quality',r'kernels::(resample|imagehash|image_quality|image::)'),
('HTML extraction',r'kernels::html'),
('charset detection/decoding',r'chardetng|encoding_rs|simdutf8|from_utf8'),
('WARC/HTTP parsing',r'io::read::warc|kernels::http|kernels::warc'),
('language ID',r'kernels::lang'),
('quality filters',r'kernels::quality|c4_quality|fineweb|gopher'),
('MinHash/dedup',r'minhash|dedup::|xxh3|xxhash|blake3'),
('PII/URL',r'pii|kernels::url|aho_corasick|regex'),
('Parquet+zstd encode',r'ZSTD_|zstd|parquet::|HIST_|FSE_|HUF_'),
('JSON (rejects, manifests)',r'serde_json|arrow_json'),
('arrow (filter/concat/builders)',r'arrow_'),
('malloc/free',r'malloc|_int_free|cfree|unlink_chunk|free@|realloc|memalign|tcache'),
('memcpy/memset',r'memmove|memcpy|memset|memcmp'),
('kernel: scheduling/futex',r'\[k\].*(futex|schedule|task_switch|spin_unlock|try_to_wake|wake_up|sched_yield|pick_next|enqueue|dequeue|update_curr|irqentry|__switch|_raw_spin)'),
('kernel: page faults',r'\[k\].*(page_fault|clear_page|handle_mm|do_anonymous|rwsem|folio|lru|charge|mas_|vma|alloc_pages|zap_|pte|mmap)'),
('kernel: file I/O and fs',r'\[k\].*(ext4|copy_to_iter|copy_from|filemap|d_lookup|inode|path|vfs|dentry|recently_deleted|find_get_block|iowrite|blk|jbd2|bio|link_path|getdents|fsnotify|generic_perform)'),
]
tot=collections.Counter(); other=collections.Counter()
for l in out.split('\n'):
    m=re.match(r'\s+([\d.]+)%\s+(\S+)\s+(\[.\])\s+(.*)',l)
    if not m: continue
    p=float(m.group(1)); sym=m.group(3)+' '+m.group(4); dso=m.group(2)
    for name,rx in cats:
        if re.search(rx,sym):
            tot[name]+=p; break
    else:
        if dso.startswith('[kernel'): tot['kernel: other']+=p; other[sym]+=p
        else: tot['other']+=p; other[sym]+=p
for name,_ in cats+[('kernel: other',''),('other','')]:
    if tot[name]>=0.05: print(f"| {name} | {tot[name]:.1f} % |")
if "--other" in sys.argv[2:]:
    for k,v in other.most_common(15): print(v,k)
