// Where the page's main thread spends a bundle's load: opens the app on a served bundle (CPU
// fallback) with V8's sampling profiler running (Chrome DevTools Protocol, 1 ms samples) from
// navigation to the first heatmap, and prints the functions with the most self time. It found the
// static constructors that ran on every call into the app (web/src/main.rs). Usage:
//   node profile.mjs BUNDLE_DIR [TOP=25]   (needs web/dist built, or WEB_DIST)
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { serve } from "./server.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const [bundleDir, top = "25"] = process.argv.slice(2);
if (!bundleDir) throw new Error("usage: node profile.mjs BUNDLE_DIR [TOP]");
const server = await serve({ "/bundle/": bundleDir, "/": process.env.WEB_DIST || path.join(here, "../../web/dist") });
const origin = `http://127.0.0.1:${server.address().port}`;
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"] });
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(600000);
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Profiler.enable");
  await cdp.send("Profiler.setSamplingInterval", { interval: 1000 });
  await cdp.send("Profiler.start");
  await page.goto(`${origin}/index.html?bundle=/bundle/&backend=cpu`);
  await page.waitForSelector("body[data-state=ready], body[data-state=error]");
  const { profile } = await cdp.send("Profiler.stop");
  const attr = (n) => page.getAttribute("body", n);
  console.log(`state ${await attr("data-state")}; first heatmap ${await attr("data-first-heatmap-ms")} ms after the app started loading, of which load ${await attr("data-load-ms")} ms; page open ${(await page.evaluate(() => performance.now())).toFixed(0)} ms`);
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const frame = nodes.get(id).callFrame;
    const name = frame.functionName || `(${frame.url.split("/").pop() || "program"})`;
    const us = profile.timeDeltas[i] ?? 0;
    self.set(name, (self.get(name) ?? 0) + us);
    total += us;
  });
  console.log(`${(total / 1000).toFixed(0)} ms sampled; self time:`);
  for (const [name, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(top))) {
    console.log(`${(us / 1000).toFixed(0).padStart(7)} ms  ${name}`);
  }
} finally {
  await browser.close();
  server.close();
}
