// End-to-end test of `culturelens report` in real headless Chromium: the CLI writes a small run
// (demo bundle, SoS with its report, MAGBIG) and a report site with the built app (web/dist); the
// site is served by a plain static server and opened with every request to another origin
// blocked. The page's HTML tables must equal the CLI's CSV files cell for cell, every figure must
// decode, every provenance manifest must be shown, the app opened from the report's link must
// load the run's bundle and give the CLI's scores, and once loaded it must work offline.
//
// Environment: CULTURELENS_BIN, CHROMIUM, WEB_DIST as in app.test.mjs; WEB_SCREENS (a folder)
// also saves the report page's first screen there as report.png (the screenshot in docs/figures-report.md).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { serve } from "./server.mjs";
import { csvRecords } from "./csv.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");
const BIN = process.env.CULTURELENS_BIN || path.join(repo, "target/debug/culturelens");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const DIST = process.env.WEB_DIST || path.join(repo, "web/dist");
const TIMEOUT = Number(process.env.WEB_TEST_TIMEOUT_MS || 300000);
const SCREENS = process.env.WEB_SCREENS || "";
// Page SoS (CPU, f32) vs the CLI's f64-printed f32 scores, as in app.test.mjs.
const SOS_TOL = 8e-7;

let work, run, site, server, origin;

function cli(...args) {
  return execFileSync(BIN, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

before(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), "culturelens-report-"));
  run = path.join(work, "run");
  fs.mkdirSync(run);
  cli("demo-bundle", "--out", path.join(run, "bundle"));
  cli("sos", "--bundle", path.join(run, "bundle"), "--out", path.join(run, "sos.csv"),
    "--report", path.join(run, "sos_report.json"));
  const attributes = path.join(work, "attributes.csv");
  fs.writeFileSync(attributes, "model,language,set,prompt_id,gender\n" +
    "sd,de,adjectives,1,male\nsd,de,adjectives,1,female\nsd,de,adjectives,2,male\nsd,en,adjectives,1,male\n" +
    "sd,en,occupations,1,male\nsd,en,occupations,2,female\n");
  cli("magbig", "--attributes", attributes, "--out", path.join(run, "magbig.csv"));
  site = path.join(work, "site");
  cli("report", run, "--out", site, "--app", DIST, "--scale", "1");
  server = await serve({ "/": site });
  origin = `http://127.0.0.1:${server.address().port}`;
});

after(() => {
  server?.close();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

test("report site: tables equal the CLI's, figures, provenance, the app on the run's bundle, offline after load",
  { timeout: TIMEOUT * 3 }, async () => {
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
      args: ["--headless", "--no-sandbox", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"] });
    try {
      const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
      const foreign = [], failed = [], errors = [];
      await context.route("**/*", (route) => {
        const url = route.request().url();
        if (url.startsWith(origin) || url.startsWith("data:")) return route.continue();
        foreign.push(url);
        return route.abort();
      });
      const page = await context.newPage();
      page.setDefaultTimeout(TIMEOUT);
      page.on("requestfailed", (r) => failed.push(r.url()));
      page.on("pageerror", (e) => errors.push(String(e)));
      await page.goto(`${origin}/index.html`, { waitUntil: "load" });

      // Every CSV of the run is a table of the page, cell for cell.
      const tables = await page.$$eval("table.result", (ts) => Object.fromEntries(ts.map((t) =>
        [t.dataset.file, [...t.rows].map((r) => [...r.cells].map((c) => c.textContent))])));
      for (const file of ["sos.csv", "magbig.csv"]) {
        assert.deepEqual(tables[file], csvRecords(path.join(run, file)), `${file} in the page`);
      }
      assert.deepEqual(Object.keys(tables).sort(), ["magbig.csv", "sos.csv"]);

      // Every figure decodes (PNG), and there is one per expected type.
      const figures = await page.$$eval("figure img", (imgs) => Promise.all(imgs.map((img) => {
        img.loading = "eager";
        return img.decode().then(() => [img.getAttribute("src"), img.naturalWidth], () => [img.getAttribute("src"), 0]);
      })));
      const srcs = figures.map(([src]) => src);
      for (const stem of ["sos_heatmap", "sos_distributions", "sos_pearson", "pca", "magbig_sd"]) {
        assert.ok(srcs.includes(`figures/${stem}.png`), `${stem} in ${srcs}`);
      }
      for (const [src, width] of figures) assert.ok(width > 100, `${src} decodes (width ${width})`);
      if (SCREENS) {
        fs.mkdirSync(SCREENS, { recursive: true });
        await page.evaluate(() => window.scrollTo(0, 0));
        await page.screenshot({ path: path.join(SCREENS, "report.png") });
      }

      // The provenance manifests of every command of the run.
      const manifests = await page.$$eval("details.provenance", (ds) =>
        Object.fromEntries(ds.map((d) => [d.dataset.file, JSON.parse(d.querySelector("pre").textContent)])));
      assert.deepEqual(Object.keys(manifests).sort(),
        ["bundle/provenance.json", "magbig.csv.provenance.json", "sos.csv.provenance.json"]);
      assert.equal(manifests["sos.csv.provenance.json"].command, "sos");
      assert.match(manifests["sos.csv.provenance.json"].inputs[0].sha256, /^[0-9a-f]{64}$/);

      // The app, from the report's link, loads the run's bundle and gives the CLI's scores.
      const href = await page.getAttribute("a.open-bundle", "href");
      assert.equal(href, "app/index.html?bundle=../bundles/bundle/");
      const app = await context.newPage();
      app.setDefaultTimeout(TIMEOUT);
      let online = true;
      app.on("pageerror", (e) => { if (online) errors.push(String(e)); });
      await app.goto(`${origin}/${href}&backend=cpu`);
      const scores = async () => {
        await app.waitForSelector("body[data-state=ready]");
        return JSON.parse(await app.locator("#sos-results").textContent());
      };
      const cliRows = csvRecords(path.join(run, "sos.csv")).slice(1);
      const assertSame = (rows, what) => {
        assert.equal(rows.length, cliRows.length, `${what}: cells`);
        const byKey = new Map(rows.map((r) => [`${r.model}|${r.language}|${r.culture}`, r.sos]));
        for (const [model, language, culture, , sos] of cliRows) {
          const got = byKey.get(`${model}|${language}|${culture}`);
          assert.ok(Math.abs(got - Number(sos)) <= SOS_TOL, `${what}: ${model} ${language} ${culture}: ${got} vs ${sos}`);
        }
      };
      assertSame(await scores(), "app on the report's bundle");

      // Offline after load: the app's service worker serves it again with the network gone, and
      // the report page needs nothing more.
      await app.evaluate(async () => { await navigator.serviceWorker.ready; });
      await app.waitForFunction(() => !!navigator.serviceWorker.controller);
      await app.reload();
      await scores();
      online = false;
      await context.setOffline(true);
      await app.reload();
      assertSame(await scores(), "app reloaded offline");
      await page.click("a[href='#tables']");
      assert.equal(await page.locator("table.result").count(), 2);
      await context.setOffline(false);

      assert.deepEqual(foreign, [], "no request leaves the site");
      assert.deepEqual(failed, [], "no request of the report page fails");
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
    }
  });
