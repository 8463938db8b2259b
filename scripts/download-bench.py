#!/usr/bin/env python3
"""The downloader's throughput against a local image server with added latency.

    download-bench.py MDF [N] [HOSTS] [LATENCY_MS_MIN] [LATENCY_MS_MAX]

Serves the bundled JPEGs (examples/data/images) from HOSTS loopback addresses
(127.0.0.2, 127.0.0.3, ...: separate hosts for the per-host limit), each response held
back a random LATENCY_MS_MIN..MAX before its headers (seeded), then runs `mdf run` on N
URLs spread over the hosts, twice: downloads only (no stages, Parquet), and as
img2dataset does (resize to 256 centre crop, JPEG 95, WebDataset shards). Prints a
table: wall seconds, mdf's CPU seconds (user + system, from /usr/bin/time), downloads
per second, downloads per mdf CPU-second and MB/s downloaded.
"""
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGES = os.path.join(ROOT, "examples/data/images")


def load_images():
    out = {}
    for f in sorted(os.listdir(IMAGES)):
        if f.endswith(".jpg") and "truncated" not in f:
            with open(os.path.join(IMAGES, f), "rb") as fh:
                out[f] = fh.read()
    return out


def serve(hosts, port, lat, images, ready):
    rng = random.Random(7)

    async def handle(reader, writer):
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                path = line.split()[1].decode()
                await asyncio.sleep(rng.uniform(*lat) / 1000.0)
                body = images.get(path.rsplit("/", 1)[-1])
                if body is None:
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                else:
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n"
                        % len(body)
                    )
                    writer.write(body)
                await writer.drain()
        except (ConnectionError, IndexError):
            pass
        finally:
            writer.close()

    async def main():
        servers = [
            await asyncio.start_server(handle, h, port, backlog=4096) for h in hosts
        ]
        ready.set()
        await asyncio.gather(*(s.serve_forever() for s in servers))

    asyncio.run(main())


def run(mdf, spec, cwd):
    t = subprocess.run(
        ["/usr/bin/time", "-f", "%e %U %S %M", mdf, "run", spec, "-q", "--job-root", "jobs"],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    if t.returncode != 0:
        sys.exit(t.stderr)
    wall, user, sys_, rss = t.stderr.strip().splitlines()[-1].split()
    return float(wall), float(user) + float(sys_), int(rss)


def main():
    mdf = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    nhosts = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    lat = (
        float(sys.argv[4]) if len(sys.argv) > 4 else 50,
        float(sys.argv[5]) if len(sys.argv) > 5 else 250,
    )
    images = load_images()
    names = sorted(images)
    hosts = [f"127.0.0.{2 + i}" for i in range(nhosts)]
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    ready = threading.Event()
    threading.Thread(target=serve, args=(hosts, port, lat, images, ready), daemon=True).start()
    ready.wait()
    d = tempfile.mkdtemp()
    total_bytes = 0
    with open(os.path.join(d, "urls.jsonl"), "w") as f:
        for i in range(n):
            name = names[i % len(names)]
            total_bytes += len(images[name])
            url = f"http://{hosts[i % nhosts]}:{port}/{i}/{name}"
            f.write(json.dumps({"url": url, "caption": f"image {i}"}) + "\n")
    download = (
        "download: {allow_private: true, concurrency: 256, per_host: 16, timeout_secs: 30}"
    )
    specs = {
        "download only (Parquet)": f"""version: 1
name: dl
input: {{uris: [urls.jsonl], format: laion, {download}}}
output: {{uri: out-dl, overwrite: true}}
""",
        "img2dataset (resize 256 centre crop, JPEG 95, WebDataset)": f"""version: 1
name: i2d
input: {{uris: [urls.jsonl], format: laion, {download}}}
stages:
  - op: image_resize
    params: {{image_size: 256, resize_mode: center_crop, encode_format: jpg, encode_quality: 95}}
output: {{uri: out-i2d, format: webdataset, overwrite: true}}
""",
    }
    print(
        f"{n} URLs over {nhosts} hosts, {lat[0]:.0f}-{lat[1]:.0f} ms added latency, "
        f"{total_bytes / n / 1024:.1f} KiB per image, {os.cpu_count()} cores"
    )
    print("| job | wall s | mdf CPU-s | downloads/s | downloads per CPU-s | MB/s | max RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for name, text in specs.items():
        p = os.path.join(d, name.split()[0] + ".yaml")
        with open(p, "w") as f:
            f.write(text)
        shutil.rmtree(os.path.join(d, "jobs"), ignore_errors=True)
        wall, cpu, rss = run(mdf, p, d)
        print(
            f"| {name} | {wall:.2f} | {cpu:.2f} | {n / wall:,.0f} | {n / cpu:,.0f} | "
            f"{total_bytes / wall / 1e6:.1f} | {rss / 1024:.0f} |"
        )
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
