// Browser benchmark of the classroom lens: an encoder folder served on loopback is loaded in the
// page (`?encoder=`), then N copies of a photo are embedded; the page's own timings give the load
// time (headers, download, building the model on the device), the first result (the time to embed
// one photo, from a fresh page: load + one image) and images/s (N photos, batches of 16, after
// that). On the CPU fallback (flex, wasm32, one thread) and on WebGPU (SwiftShader on a machine
// without a GPU). Usage (needs web/dist built):
//   [BENCH_IMAGES=16] node bench_classroom.mjs MODEL_DIR PHOTO [cpu|webgpu ...]
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { serve } from "./server.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const [modelDir, photo, ...backends] = process.argv.slice(2);
const n = Number(process.env.BENCH_IMAGES || 16);
const server = await serve({ "/model/": modelDir, "/": process.env.WEB_DIST || path.join(here, "../../web/dist") });
const origin = `http://127.0.0.1:${server.address().port}`;
const base = ["--headless", "--no-sandbox", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const bytes = fs.readFileSync(photo);
const name = path.basename(photo);

async function embed(page, count) {
  const files = Array.from({ length: count }, (_, i) => ({ name: `${i}-${name}`, mimeType: "application/octet-stream", buffer: bytes }));
  await page.evaluate(() => { document.body.dataset.state = "idle"; });
  await page.setInputFiles("#lens-photos", files);
  await page.setInputFiles("#lens-labels", { name: "labels.csv", mimeType: "text/csv", buffer: Buffer.from(
    "image,language,culture\n" + files.map((f, i) => `${f.name},${["en", "de"][i % 2]},${["A", "B"][(i >> 1) % 2]}`).join("\n") + "\n") });
  await page.waitForFunction((c) => document.querySelectorAll("#lens-photo-rows input[value='en']").length >= Math.ceil(c / 2), count);
  await page.click("#lens-embed-photos");
  await page.waitForFunction(() => ["ready", "error"].includes(document.body.dataset.state));
  return Number(await page.getAttribute("body", "data-lens-embed-ms"));
}

for (const backend of backends.length ? backends : ["cpu", "webgpu"]) {
  const args = backend === "webgpu" ? [...base, "--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader"] : base;
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args });
  const page = await browser.newPage();
  page.setDefaultTimeout(3600000);
  const t0 = Date.now();
  await page.goto(`${origin}/index.html?lens=classroom&backend=${backend}&encoder=model/`);
  await page.waitForFunction(() => ["ready", "error"].includes(document.getElementById("view-classroom").dataset.state));
  if ((await page.getAttribute("#view-classroom", "data-state")) === "error") {
    console.log(JSON.stringify({ backend, error: await page.textContent("#lens-errors") }));
    await browser.close();
    continue;
  }
  const loadMs = Number(await page.getAttribute("body", "data-encoder-ms"));
  const oneMs = await embed(page, 1);
  const firstResultMs = Date.now() - t0;
  // Warm: the next batches reuse the compiled kernels.
  const manyMs = await embed(page, n);
  console.log(JSON.stringify({ backend, adapter: await page.getAttribute("body", "data-adapter"), loadMs,
    oneImageMs: oneMs, firstResultMs, images: n, embedMs: manyMs, imagesPerS: n / (manyMs / 1000) }));
  await browser.close();
}
server.close();
