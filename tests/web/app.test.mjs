// End-to-end tests of the culturelens web app in real headless Chromium (Playwright, Debian
// chromium). The test serves web/dist and CLI-written bundles on 127.0.0.1 and compares the
// page's SoS numbers with `culturelens sos --bundle` for the same bundle (≤ 1e-5).
//
// Environment: CULTURELENS_BIN (the CLI, default ../../target/debug/culturelens), CHROMIUM
// (default /usr/bin/chromium), WEB_DIST (default ../../web/dist), WEB_TEST_REPORT (JSON report of
// what ran on which adapter, default /tmp/culturelens-web-test-report.json).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { serve } from "./server.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");
const BIN = process.env.CULTURELENS_BIN || path.join(repo, "target/debug/culturelens");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const DIST = process.env.WEB_DIST || path.join(repo, "web/dist");
const REPORT = process.env.WEB_TEST_REPORT || path.join(os.tmpdir(), "culturelens-web-test-report.json");
const BASE_FLAGS = ["--headless", "--no-sandbox", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"];
const WEBGPU_FLAGS = ["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader"];
const TIMEOUT = Number(process.env.WEB_TEST_TIMEOUT_MS || 300000);
const VIEWS = ["heatmap", "distribution", "correlation", "flags", "scatter", "vendi", "educator"];

let server, origin, work, cliRows;
const report = { chromium: "", runs: [] };

function cli(...args) {
  return execFileSync(BIN, args, { encoding: "utf8" });
}

function readCsv(file) {
  const [header, ...lines] = fs.readFileSync(file, "utf8").trim().split("\n");
  assert.equal(header, "model,language,culture,n,sos");
  return lines.map((l) => {
    const [model, language, culture, n, sos] = l.split(",");
    return { model, language, culture, n: Number(n), sos: Number(sos) };
  });
}

const key = (r) => `${r.model}|${r.language}|${r.culture}`;

function assertSameScores(actual, expected, label) {
  assert.equal(actual.length, expected.length, `${label}: number of (model, language, culture) rows`);
  const want = new Map(expected.map((r) => [key(r), r]));
  let worst = 0;
  for (const r of actual) {
    const e = want.get(key(r));
    assert.ok(e, `${label}: unexpected row ${key(r)}`);
    assert.equal(r.n, e.n, `${label}: n of ${key(r)}`);
    worst = Math.max(worst, Math.abs(r.sos - e.sos));
  }
  assert.ok(worst <= 1e-5, `${label}: max |browser − CLI| = ${worst}`);
  return worst;
}

before(async () => {
  assert.ok(fs.existsSync(path.join(DIST, "index.html")), `build the app first (web/ci.sh): ${DIST}`);
  work = fs.mkdtempSync(path.join(os.tmpdir(), "culturelens-web-"));
  const bundles = path.join(work, "bundles");
  cli("demo-bundle", "--out", path.join(bundles, "demo"));
  cli("sos", "--bundle", path.join(bundles, "demo"), "--out", path.join(work, "demo-sos.csv"));
  cliRows = readCsv(path.join(work, "demo-sos.csv"));
  // A corrupt copy (one flipped byte) and an oversized one (metadata longer than the manifest says).
  for (const name of ["corrupt", "oversized"]) {
    fs.cpSync(path.join(bundles, "demo"), path.join(bundles, name), { recursive: true });
  }
  const emb = path.join(bundles, "corrupt", "embeddings.f32");
  const bytes = fs.readFileSync(emb);
  bytes[1234] ^= 0x55;
  fs.writeFileSync(emb, bytes);
  fs.appendFileSync(path.join(bundles, "oversized", "meta.csv"), "x".repeat(100000));
  server = await serve({ "/bundles/": bundles, "/": DIST });
  origin = `http://127.0.0.1:${server.address().port}`;
});

after(() => {
  server?.close();
  fs.writeFileSync(REPORT, JSON.stringify(report, null, 2));
  console.log(`browser test report (${REPORT}):\n${JSON.stringify(report, null, 2)}`);
});

async function launch(webgpu) {
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
    args: webgpu ? [...BASE_FLAGS, ...WEBGPU_FLAGS] : BASE_FLAGS });
  report.chromium = browser.version();
  return browser;
}

async function openPage(browser, query, { disableWebGpu = false } = {}) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  page.setDefaultTimeout(TIMEOUT);
  if (disableWebGpu) {
    await page.addInitScript(() => { delete Object.getPrototypeOf(navigator).gpu; });
  }
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  if (query !== null) await page.goto(`${origin}/index.html${query}`);
  return { page, errors };
}

async function results(page) {
  await page.waitForSelector("body[data-state=ready]");
  return JSON.parse(await page.locator("#sos-results").textContent());
}

/// Non-blank: the screenshot has many non-white pixels and several colours (decoded in the page).
async function assertNonBlank(page, locator, label) {
  const png = (await locator.screenshot()).toString("base64");
  const stats = await page.evaluate(async (b64) => {
    const img = new Image();
    img.src = `data:image/png;base64,${b64}`;
    await img.decode();
    const c = document.createElement("canvas");
    [c.width, c.height] = [img.width, img.height];
    const ctx = c.getContext("2d");
    ctx.drawImage(img, 0, 0);
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    let ink = 0;
    const colours = new Set();
    for (let i = 0; i < d.length; i += 4) {
      if (d[i] < 240 || d[i + 1] < 240 || d[i + 2] < 240) ink++;
      colours.add((d[i] >> 4) << 8 | (d[i + 1] >> 4) << 4 | (d[i + 2] >> 4));
    }
    return { ink: ink / (d.length / 4), colours: colours.size, w: c.width, h: c.height };
  }, png);
  assert.ok(stats.ink > 0.01 && stats.colours >= 4, `${label} screenshot looks blank: ${JSON.stringify(stats)}`);
  return stats;
}

/** Drags a box over the middle of the scatter and checks that it selects some, not all, points. */
async function boxSelect(page) {
  await page.click("#tab-scatter");
  await page.waitForFunction(() => /^\d+ selected$/.test(document.querySelector("#selection-count")?.textContent ?? ""));
  const box = await page.locator("#scatter-canvas").boundingBox();
  await page.mouse.move(box.x + box.width * 0.25, box.y + box.height * 0.25);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.5, { steps: 4 });
  await page.mouse.move(box.x + box.width * 0.75, box.y + box.height * 0.75, { steps: 4 });
  await page.mouse.up();
  // A GPU frame is asynchronous: the count reads "" until the frame is on the canvas.
  await page.waitForFunction(() => /^[1-9]\d* selected$/.test(document.querySelector("#selection-count")?.textContent ?? ""));
  const selected = Number((await page.textContent("#selection-count")).split(" ")[0]);
  assert.ok(selected > 0, `the box selects points: ${selected}`);
  await page.click("[data-action=clear]");
  await page.waitForFunction(() => document.querySelector("#selection-count")?.textContent === "0 selected");
}

test("CPU fallback (WebGPU disabled): demo, CLI parity, views, filters, errors", { timeout: TIMEOUT * 4 }, async () => {
  const browser = await launch(false);
  try {
    const { page, errors } = await openPage(browser, "?bundle=demo", { disableWebGpu: true });
    const rows = await results(page);
    assert.equal(await page.getAttribute("body", "data-backend"), "cpu");
    assert.match(await page.textContent("#bundle-title"), /SYNTHETIC DEMO DATA/);
    const worst = assertSameScores(rows, cliRows, "?bundle=demo on CPU");
    // The heatmap cells in the DOM show the same numbers, model by model.
    for (const model of [...new Set(cliRows.map((r) => r.model))]) {
      await page.selectOption("#model-select", model);
      const cells = await page.$$eval("#heatmap-svg .cell", (els) => els.map((e) => ({
        model: e.dataset.model, language: e.dataset.language, culture: e.dataset.culture,
        n: Number(e.dataset.n), sos: Number(e.dataset.sos) })));
      assertSameScores(cells, cliRows.filter((r) => r.model === model), `heatmap of ${model}`);
    }
    const timing = { firstHeatmapMs: Number(await page.getAttribute("body", "data-first-heatmap-ms")) };
    const shots = {};
    for (const view of VIEWS) {
      await page.click(`#tab-${view}`);
      if (view === "scatter") await page.waitForFunction(() => document.querySelector("#selection-count")?.textContent !== "");
      if (view === "vendi") await page.waitForFunction(() => document.querySelector("#vendi-vs")?.textContent !== "–");
      shots[view] = await assertNonBlank(page, page.locator(`#view-${view}`), view);
    }
    assert.ok(Number(await page.textContent("#vendi-vs")) >= 1, "VS of a non-empty subset is at least 1");
    // Quality from a numeric metadata column: the demo's `seed` is 42 everywhere, so qVS = 42 · VS.
    await page.click("#tab-vendi");
    await page.waitForFunction(() => document.querySelector("#vendi-vs")?.textContent !== "–");
    const vs = Number(await page.textContent("#vendi-vs"));
    await page.selectOption("#vendi-quality", "seed");
    await page.waitForFunction((v) => document.querySelector("#vendi-qvs")?.textContent !== v,
      await page.textContent("#vendi-vs"));
    assert.ok(Math.abs(Number(await page.textContent("#vendi-qvs")) - 42 * vs) < 0.01, "qVS = mean quality · VS");
    assert.equal(await page.getAttribute("#scatter-points", "data-renderer"), "canvas2d");
    await boxSelect(page);
    // Educator mode: keyboard navigation moves the culture and the URL follows.
    await page.click("#tab-educator");
    const before = new URL(page.url()).searchParams.get("culture");
    await page.keyboard.press("ArrowRight");
    const afterKey = new URL(page.url()).searchParams.get("culture");
    assert.ok(before && afterKey && before !== afterKey, `culture in the URL changes: ${before} → ${afterKey}`);
    // Filter change: dropping a language recomputes SoS without it (references change too).
    await page.click("#tab-heatmap");
    await page.check("#filters input[data-kind=language][value=am]");
    await page.uncheck("#filters input[data-kind=language][value=am]");
    const filtered = await results(page);
    assert.equal(filtered.filter((r) => r.language === "am").length, 0);
    assert.equal(filtered.length, cliRows.length - 30);
    timing.recomputeMs = Number(await page.getAttribute("body", "data-recompute-ms"));
    assert.deepEqual(errors, []);
    report.runs.push({ path: "cpu fallback", adapter: await page.getAttribute("body", "data-adapter"),
      bundle: "demo", maxAbsDiff: worst, ...timing, screenshots: shots });

    // Offline once loaded: the service worker caches the app shell on a controlled load; with the
    // network gone, a reload still shows the demo.
    const offline = await openPage(browser, "?bundle=demo&backend=cpu");
    await results(offline.page);
    await offline.page.evaluate(async () => { await navigator.serviceWorker.ready; });
    await offline.page.waitForFunction(() => !!navigator.serviceWorker.controller);
    await offline.page.reload();
    await results(offline.page);
    await offline.page.context().setOffline(true);
    await offline.page.reload();
    assertSameScores(await results(offline.page), cliRows, "reloaded offline");
    await offline.page.context().setOffline(false);

    // ?bundle=URL with the CLI-written bundle, and local files through the picker.
    const served = await openPage(browser, "?bundle=/bundles/demo/&backend=cpu");
    assertSameScores(await results(served.page), cliRows, "?bundle=URL");
    const local = await openPage(browser, "?backend=cpu");
    await local.page.waitForSelector("body[data-loader=ready]");
    const dir = path.join(work, "bundles", "demo");
    await local.page.setInputFiles("#file-input", fs.readdirSync(dir).map((f) => path.join(dir, f)));
    assertSameScores(await results(local.page), cliRows, "local files");

    // Bad bundles: a clear on-screen error, never a blank page.
    for (const [query, message] of [
      ["?bundle=/bundles/corrupt/&backend=cpu", /SHA-256 mismatch/],
      ["?bundle=/bundles/oversized/&backend=cpu", /larger than the \d+ bytes the manifest lists/],
      ["?bundle=/bundles/missing/&backend=cpu", /HTTP 404/],
    ]) {
      const bad = await openPage(browser, query);
      await bad.page.waitForSelector("body[data-state=error]");
      assert.match(await bad.page.textContent("#error"), message);
      assert.ok(await bad.page.isVisible("#error"));
    }
  } finally {
    await browser.close();
  }
});

test("WebGPU on the browser's adapter (SwiftShader here) gives the CLI's numbers", { timeout: TIMEOUT * 2 }, async (t) => {
  const browser = await launch(true);
  try {
    const { page, errors } = await openPage(browser, null);
    await page.goto(`${origin}/index.html`);
    const adapter = await page.evaluate(async () => {
      if (!navigator.gpu) return null;
      const a = await navigator.gpu.requestAdapter();
      return a ? { ...(a.info ? { vendor: a.info.vendor, architecture: a.info.architecture, device: a.info.device, description: a.info.description } : {}) } : null;
    });
    if (!adapter) {
      report.runs.push({ path: "webgpu", skipped: "the browser offers no WebGPU adapter" });
      t.skip("the browser offers no WebGPU adapter");
      return;
    }
    await page.goto(`${origin}/index.html?bundle=demo&backend=webgpu`);
    const rows = await results(page);
    assert.equal(await page.getAttribute("body", "data-backend"), "webgpu");
    const worst = assertSameScores(rows, cliRows, "?bundle=demo on WebGPU");
    const shots = {};
    for (const view of ["heatmap", "scatter"]) {
      await page.click(`#tab-${view}`);
      if (view === "scatter") await page.waitForFunction(() => document.querySelector("#selection-count")?.textContent !== "");
      shots[view] = await assertNonBlank(page, page.locator(`#view-${view}`), `${view} (webgpu)`);
    }
    // The scatter's points are GPU sprites (shaders/scatter.wgsl), and selection still works.
    assert.equal(await page.getAttribute("#scatter-points", "data-renderer"), "webgpu");
    await boxSelect(page);
    await page.click("#tab-heatmap");
    const firstHeatmapMs = Number(await page.getAttribute("body", "data-first-heatmap-ms"));
    await page.uncheck("#filters input[data-kind=language][value=am]");
    const filtered = await results(page);
    assert.equal(filtered.length, cliRows.length - 30);
    assert.deepEqual(errors, []);
    report.runs.push({ path: "webgpu", browserAdapter: adapter, burnAdapter: await page.getAttribute("body", "data-adapter"),
      bundle: "demo", maxAbsDiff: worst, firstHeatmapMs,
      recomputeMs: Number(await page.getAttribute("body", "data-recompute-ms")), screenshots: shots });
  } finally {
    await browser.close();
  }
});
