// Browser benchmark: time to first heatmap and recompute latency after a filter change (one
// language unchecked), for a served bundle, on the CPU fallback and on WebGPU (whatever adapter
// the browser offers; SwiftShader on a machine without GPU). Usage:
//   node bench.mjs BUNDLE_DIR [cpu|webgpu ...]      (needs web/dist built)
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { serve } from "./server.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const [bundleDir, ...backends] = process.argv.slice(2);
const server = await serve({ "/bundle/": bundleDir, "/": process.env.WEB_DIST || path.join(here, "../../web/dist") });
const origin = `http://127.0.0.1:${server.address().port}`;
const base = ["--headless", "--no-sandbox", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];
for (const backend of backends.length ? backends : ["cpu", "webgpu"]) {
  const args = backend === "webgpu" ? [...base, "--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader"] : base;
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args });
  const page = await browser.newPage();
  page.setDefaultTimeout(1800000);
  const t0 = Date.now();
  await page.goto(`${origin}/index.html?bundle=/bundle/&backend=${backend}`);
  await page.waitForSelector("body[data-state=ready], body[data-state=error]");
  const attr = (n) => page.getAttribute("body", n);
  if ((await attr("data-state")) === "error") {
    console.log(JSON.stringify({ backend, error: await page.textContent("#error") }));
    await browser.close();
    continue;
  }
  const first = { wallMs: Date.now() - t0, firstHeatmapMs: Number(await attr("data-first-heatmap-ms")), loadMs: Number(await attr("data-load-ms")) };
  const languages = await page.$$eval("#filters input[data-kind=language]", (els) => els.map((e) => e.value));
  const recompute = [];
  for (const lang of languages.slice(0, 3)) {
    for (const action of ["uncheck", "check"]) {
      await page.evaluate(() => { document.body.dataset.state = "waiting"; });
      await page[action](`#filters input[data-kind=language][value="${lang}"]`);
      await page.waitForSelector("body[data-state=ready]");
      recompute.push(Number(await attr("data-recompute-ms")));
    }
  }
  console.log(JSON.stringify({ backend: await attr("data-backend"), adapter: await attr("data-adapter"), ...first, recomputeMs: recompute }));
  await browser.close();
}
server.close();
