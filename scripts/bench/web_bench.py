#!/usr/bin/env python3
"""The browser app's numbers in BENCHMARKS.md, with a plain-numpy peer doing the page's work.

1. Builds the SoS-paper-scale synthetic table of sos_bench.py (150,822 x 1280 float32; --models
   fewer than 7 for a quick try) and writes it as a bundle with `culturelens bundle` (once, kept in
   --workdir).
2. Runs `node tests/web/bench.mjs BUNDLE cpu webgpu` (headless Debian Chromium, the built app in
   web/dist or $WEB_DIST): time to first heatmap (download + SHA-256 + parse + upload + SoS +
   render), recompute latency after unchecking / re-checking a language, PCA time, scatter frames.
3. Times the same steps in numpy on the same bundle files: read both files, SHA-256 them
   (hashlib), decode, SoS with pooled references (sos_bench.sos_numpy) = the first heatmap's
   computation; SoS again without one language and with it back (the recompute); the page's PCA
   (L2-normalise, covariance of the evenly strided sample of <= 4096 rows, two leading
   eigenvectors, projection of every row). The scatter's drawing has no numpy peer. The numpy side
   runs alone in a fresh Python (peak_rss.py), so that its peak RSS is its own.

Peak RSS: the page's is the Chromium renderer's VmHWM (bench.mjs reads /proc/PID/status of the
browser's processes just before closing it, so it covers the first heatmap, the recomputes and the
scatter); the browser and GPU processes are printed beside it, not counted. numpy's is its child
Python's whole run (interpreter, numpy, the files read, the work).

Prints one line per backend and for numpy, the peak RSS lines, and a Markdown table for BENCHMARKS.md.

Usage:  python3 scripts/bench/web_bench.py [--bin target/release/culturelens] [--backends cpu,webgpu]
        [--languages 3] [--models 7] [--workdir DIR] [--dtype f32|f16]
Requires: numpy, node with tests/web's node_modules (npm ci), Debian chromium, a built web/dist.

Requirements: scripts/requirements/light.txt
"""
import argparse
import csv
import datetime
import hashlib
import io
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peak_rss  # noqa: E402
import sos_bench  # noqa: E402  (the paper-scale table and the numpy SoS)

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SAMPLE_ROWS = 4096  # culturelens_view::pca::SAMPLE_ROWS


def build_bundle(args, workdir):
    bundle = os.path.join(workdir, "bundle" if args.dtype == "f32" else f"bundle-{args.dtype}")
    manifest = os.path.join(bundle, "manifest.json")
    # A bundle kept from before the manifest listed per-piece SHA-256s is written again: the page
    # would hash it whole after the download instead of piece by piece during it.
    if not os.path.exists(manifest) or not table_in_pieces(manifest):
        emb, meta = sos_bench.make_table(workdir, args.dim)
        subprocess.run([args.bin, "bundle", "--embeddings", emb, "--meta", meta, "--out", bundle,
                        "--title", "SoS-paper-scale synthetic table", "--synthetic", "--dtype", args.dtype],
                       check=True)
    return bundle


def table_in_pieces(manifest_path):
    """Whether the bundle's manifest lists its embeddings file piece by piece."""
    with open(manifest_path) as f:
        manifest = json.load(f)
    return any("pieces" in e for e in manifest["files"] if e["path"] == manifest["embeddings"])


def embeddings_of(manifest, data):
    """A bundle's embeddings file as the rows x dim float32 the page scores (f16 widened)."""
    dtype = {"f32": "<f4", "f16": "<f2"}[manifest.get("dtype", "f32")]
    x = np.frombuffer(data, dtype=dtype).reshape(manifest["rows"], manifest["dim"])
    return x if x.dtype == np.float32 else x.astype(np.float32)


def f16_difference(workdir, bundle):
    """What storing the bundle in f16 does to SoS: the largest |joint SoS| difference between the
    f16 bundle's values and the f32 table it was made from, both scored by numpy."""
    with open(os.path.join(bundle, "manifest.json")) as f:
        manifest = json.load(f)
    with open(os.path.join(bundle, manifest["embeddings"]), "rb") as f:
        half = embeddings_of(manifest, f.read())
    full, model, language, culture = sos_bench.load_table(*sos_bench.make_table(workdir, manifest["dim"]))
    a = sos_bench.sos_numpy(full, model, language, culture)
    b = sos_bench.sos_numpy(half, model, language, culture)
    diffs = np.array([abs(a[k] - b[k]) for k in a])
    scale = max(abs(v) for v in a.values())
    return float(diffs.max()), float(np.median(diffs)), scale


def browser(bundle, backends, languages):
    env = dict(os.environ, BENCH_LANGUAGES=str(languages))
    proc = subprocess.run(["node", os.path.join(REPO, "tests/web/bench.mjs"), bundle, *backends],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"bench.mjs failed:\n{proc.stdout}\n{proc.stderr}")
    runs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if len(runs) != len(backends):
        raise SystemExit(f"bench.mjs printed {len(runs)} results for {len(backends)} backends:\n{proc.stdout}")
    for r in runs:
        if "error" in r:
            raise SystemExit(f"the page failed on {r['backend']}: {r['error']}")
    return runs


def pca2(x):
    """The page's PCA (web/src/pca.rs): returns the N x 2 projection."""
    e = x / np.linalg.norm(x, axis=1, keepdims=True)
    stride = max(1, -(-len(e) // SAMPLE_ROWS))
    sample = e[::stride]
    mean = sample.mean(axis=0)
    centred = sample - mean
    w, v = np.linalg.eigh(centred.T @ centred)
    return (e - mean) @ v[:, [-1, -2]]


def numpy_peer(bundle, languages):
    with open(os.path.join(bundle, "manifest.json")) as f:
        manifest = json.load(f)
    t0 = time.perf_counter()
    files = {}
    for name in (manifest["embeddings"], manifest["metadata"]):
        with open(os.path.join(bundle, name), "rb") as f:
            files[name] = f.read()
    t_read = time.perf_counter()
    for name, data in files.items():
        want = next(e["sha256"] for e in manifest["files"] if e["path"] == name)
        assert hashlib.sha256(data).hexdigest() == want, name
    t_verify = time.perf_counter()
    x = embeddings_of(manifest, files[manifest["embeddings"]])
    rows = list(csv.reader(io.StringIO(files[manifest["metadata"]].decode())))
    header, rows = rows[0], rows[1:]
    col = {h: np.array([r[i] for r in rows]) for i, h in enumerate(header) if h in ("model", "language", "culture")}
    t_decode = time.perf_counter()
    sos_bench.sos_numpy(x, col["model"], col["language"], col["culture"])
    t_sos = time.perf_counter()
    recompute = []
    for lang in sorted(set(col["language"]))[:languages]:
        for keep in (col["language"] != lang, np.ones(len(x), dtype=bool)):
            t = time.perf_counter()
            sos_bench.sos_numpy(x[keep], col["model"][keep], col["language"][keep], col["culture"][keep])
            recompute.append(1000 * (time.perf_counter() - t))
    t = time.perf_counter()
    pca2(x)
    pca_ms = 1000 * (time.perf_counter() - t)
    return {"backend": f"numpy {np.__version__}", "firstHeatmapMs": 1000 * (t_sos - t0),
            "readMs": 1000 * (t_read - t0), "verifyMs": 1000 * (t_verify - t_read),
            "decodeMs": 1000 * (t_decode - t_verify), "sosMs": 1000 * (t_sos - t_decode),
            "recomputeMs": recompute, "scatter": {"pcaMs": pca_ms}}


def span(values, unit_ms=True):
    if not values:
        return "not run"
    lo, hi = min(values), max(values)
    fmt = (lambda v: f"{v:.0f} ms") if hi < 1000 else (lambda v: f"{v / 1000:.2f} s")
    return fmt(lo) if lo == hi else f"{fmt(lo)}–{fmt(hi)}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/culturelens")
    ap.add_argument("--backends", default="cpu,webgpu")
    ap.add_argument("--languages", type=int, default=3, help="languages unchecked/re-checked (0: no recompute)")
    ap.add_argument("--models", type=int, default=sos_bench.MODELS)
    ap.add_argument("--dim", type=int, default=1280)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--dtype", choices=("f32", "f16"), default="f32",
                    help="the bundle's embeddings file (`culturelens bundle --dtype`); f16 also prints the "
                         "SoS difference it causes")
    args = ap.parse_args()
    sos_bench.MODELS = args.models
    workdir = args.workdir or f"/tmp/culturelens-web-bench-{args.models}m-{args.dim}"
    os.makedirs(workdir, exist_ok=True)
    bundle = build_bundle(args, workdir)
    with open(os.path.join(bundle, "manifest.json")) as f:
        manifest = json.load(f)
    runs = browser(bundle, args.backends.split(","), args.languages)
    peer, proc = peak_rss.call(__file__, "numpy_peer", bundle, args.languages)
    runs.append(dict(peer, rendererPeakKib=proc.peak_kib))
    for r in runs:
        print(json.dumps(r))
    for r in runs[:-1]:
        others = ", ".join(f"{p['type']} {peak_rss.mb(p['kib']):.0f} MB" for p in r["treePeaksKib"] if p["type"] != "renderer")
        print(f"{r['backend']}: {peak_rss.line(r['rendererPeakKib'], 'numpy', proc.peak_kib)} "
              f"(the page's renderer / numpy's process; not counted: {others})")
    if args.dtype == "f16":
        worst, median, scale = f16_difference(workdir, bundle)
        print(f"f16 bundle: joint SoS differs from the f32 table's by at most {worst:.2e} "
              f"(median {median:.2e}; largest |joint SoS| {scale:.3f})")
    size = f"{manifest['rows']:,} × {manifest['dim']} {manifest.get('dtype', 'f32')}"
    print(f"\n| date | bundle | backend (adapter) | first heatmap | of which read / SHA-256 / decode / upload / SoS "
          f"| its intervals, after it | recompute | PCA | scatter frame | peak RSS |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        who = r["backend"] + (f" ({r['adapter']})" if "adapter" in r else "")
        frames = span(r["scatter"].get("drawMs", [])) if "drawMs" in r["scatter"] else "no peer"
        if "loadMs" in r:  # the page: reading = loading less hashing and decoding
            read = r["loadMs"] - r["verifyMs"] - r["decodeMs"]
            sha = f"{r['verifyMs'] / 1000:.2f} s ({r['digest']})"
            upload = f"{r['uploadMs'] / 1000:.2f} s ({r['parts']} part{'s' if r['parts'] != 1 else ''})"
        else:
            read, sha, upload = r["readMs"], f"{r['verifyMs'] / 1000:.2f} s (hashlib)", "–"
        print(f"| {datetime.date.today()} | {size} | {who} | {r['firstHeatmapMs'] / 1000:.2f} s | "
              f"{read / 1000:.2f} s / {sha} / {r['decodeMs'] / 1000:.2f} s / {upload} / {r['sosMs'] / 1000:.2f} s | "
              f"{span([r['ciMs']]) if 'ciMs' in r else 'no peer'} | "
              f"{span(r['recomputeMs'])} | {span([r['scatter']['pcaMs']])} | {frames} | "
              f"{peak_rss.mb(r['rendererPeakKib']):.0f} MB |")


if __name__ == "__main__":
    main()
