// Browser benchmark: time to first heatmap (with its parts: reading the files, SHA-256 and which
// implementation ran it, decoding, the upload to the device and in how many parts, the first SoS)
// and recompute latency after a filter change (one language unchecked), for a served bundle, on
// the CPU fallback and on WebGPU (whatever adapter the browser offers; SwiftShader on a machine
// without GPU); then the PCA scatter: PCA time, and the time to draw all points (first frame and
// after a colour change). A backend with `+wasm-sha256` (e.g. `cpu+wasm-sha256`) hides
// SubtleCrypto from the page, as on a plain-http page from another host, so the app hashes in
// wasm. Last, before the browser closes, the peak RSS (VmHWM of /proc/PID/status, KiB; Linux) of
// the browser's processes started by this node process: `rendererPeakKib` the largest renderer's
// (the page: its wasm memory, JS heap and the bundle's bytes), `treePeaksKib` each process's by
// its type (their sum bounds the tree's peak from above: the peaks need not coincide). Usage:
//   [BENCH_LANGUAGES=3] node bench.mjs BUNDLE_DIR [cpu|webgpu[+wasm-sha256] ...]   (needs web/dist built)
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { serve } from "./server.mjs";

// Peak RSS (KiB) of each process descending from this one, by Chromium's `--type=` (or "browser").
function treePeaks() {
  const procs = fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d)).flatMap((pid) => {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const hwm = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
      const type = /--type=([\w-]+)/.exec(fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " "));
      return hwm ? [{ pid: Number(pid), ppid, kib: Number(hwm[1]), type: type ? type[1] : "browser" }] : [];
    } catch {
      return []; // exited meanwhile
    }
  });
  const mine = new Set([process.pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of procs) if (mine.has(p.ppid) && !mine.has(p.pid)) { mine.add(p.pid); grew = true; }
  }
  return procs.filter((p) => p.pid !== process.pid && mine.has(p.pid)).map(({ type, kib }) => ({ type, kib }));
}

const here = path.dirname(fileURLToPath(import.meta.url));
const [bundleDir, ...backends] = process.argv.slice(2);
const server = await serve({ "/bundle/": bundleDir, "/": process.env.WEB_DIST || path.join(here, "../../web/dist") });
const origin = `http://127.0.0.1:${server.address().port}`;
const base = ["--headless", "--no-sandbox", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];
for (const run of backends.length ? backends : ["cpu", "webgpu"]) {
  const [backend, variant] = run.split("+");
  const args = backend === "webgpu" ? [...base, "--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader"] : base;
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args });
  const page = await browser.newPage();
  page.setDefaultTimeout(1800000);
  if (variant === "wasm-sha256") {
    await page.addInitScript(() => Object.defineProperty(Crypto.prototype, "subtle", { get: () => undefined }));
  }
  const t0 = Date.now();
  await page.goto(`${origin}/index.html?bundle=/bundle/&backend=${backend}`);
  await page.waitForSelector("body[data-state=ready], body[data-state=error]");
  const attr = (n) => page.getAttribute("body", n);
  if ((await attr("data-state")) === "error") {
    console.log(JSON.stringify({ backend, error: await page.textContent("#error") }));
    await browser.close();
    continue;
  }
  const first = { wallMs: Date.now() - t0, firstHeatmapMs: Number(await attr("data-first-heatmap-ms")), loadMs: Number(await attr("data-load-ms")),
    verifyMs: Number(await attr("data-verify-ms")), decodeMs: Number(await attr("data-decode-ms")), digest: await attr("data-digest"),
    uploadMs: Number(await attr("data-upload-ms")), sosMs: Number(await attr("data-recompute-ms")),
    parts: Number(await attr("data-table-parts")) };
  // The first heatmap's intervals, computed after it is drawn.
  await page.waitForSelector("body[data-ci=ready]");
  first.ciMs = Number(await attr("data-ci-ms"));
  const languages = await page.$$eval("#filters input[data-kind=language]", (els) => els.map((e) => e.value));
  const recompute = [];
  // BENCH_LANGUAGES=0 skips the recompute loop (full-scale bundles on SwiftShader take minutes each).
  for (const lang of languages.slice(0, Number(process.env.BENCH_LANGUAGES ?? 3))) {
    for (const action of ["uncheck", "check"]) {
      await page.evaluate(() => { document.body.dataset.state = "waiting"; });
      await page[action](`#filters input[data-kind=language][value="${lang}"]`);
      await page.waitForSelector("body[data-state=ready]");
      recompute.push(Number(await attr("data-recompute-ms")));
    }
  }
  // Scatter: first draw after the PCA, then redraws with a new colouring.
  await page.click("#tab-scatter");
  await page.waitForFunction(() => /selected$/.test(document.querySelector("#selection-count")?.textContent ?? ""));
  const points = () => page.getAttribute("#scatter-points", "data-draw-ms").then(Number);
  const scatter = { pcaMs: Number(await attr("data-pca-ms")), renderer: await page.getAttribute("#scatter-points", "data-renderer"), drawMs: [await points()] };
  for (const by of ["culture", "model", "language"]) {
    await page.evaluate(() => { document.querySelector("#selection-count").textContent = ""; });
    await page.selectOption("#colour-by", by);
    await page.waitForFunction(() => /selected$/.test(document.querySelector("#selection-count")?.textContent ?? ""));
    scatter.drawMs.push(await points());
  }
  const peaks = treePeaks();
  const renderers = peaks.filter((p) => p.type === "renderer").map((p) => p.kib);
  console.log(JSON.stringify({ backend: await attr("data-backend"), adapter: await attr("data-adapter"), ...first, recomputeMs: recompute, scatter,
    rendererPeakKib: renderers.length ? Math.max(...renderers) : null, treePeaksKib: peaks }));
  await browser.close();
}
server.close();
