// End-to-end tests of the culturelens web app in real headless Chromium (Playwright, Debian
// chromium). The test serves web/dist and CLI-written bundles on 127.0.0.1 and compares the
// page's numbers with the CLI on the same rows: SoS with `culturelens sos --bundle` (≤ SOS_TOL), the
// recomputed SoS after a filter change with `culturelens sos` on the filtered table, the Vendi
// panel with `culturelens vendi` (cosine and categorical kernels, quality, a language subset), the
// educator slide with `culturelens sos --per-image`; the heatmap's interval tooltips with
// `culturelens sos --ci` (same level, B, seed), the Vendi panel's with `culturelens vendi --ci`;
// the box selection with the points inside the
// box (computed here from the drawn coordinates); the result views (MAGBIG bars, CulText2I NA
// matrix, the occupation slide) with the `culturelens magbig` / `cultext2i` tables the bundle
// carries, row by row; a table spread over several GPU buffers (`part-bytes=`) with the CLI; the
// Vendi panel at width 768 with vendi-score (tests/fixtures/vendi/wide.json).
//
// Environment: CULTURELENS_BIN (the CLI, default ../../target/debug/culturelens), CHROMIUM
// (default /usr/bin/chromium), WEB_DIST (default ../../web/dist), WEB_TEST_REPORT (JSON report of
// what ran on which adapter, default /tmp/culturelens-web-test-report.json).
// CULTURELENS_WEB_ALLOW_NO_WEBGPU=1 lets the WebGPU test pass as skipped (with a loud warning)
// when Chromium offers no WebGPU adapter; without it a missing adapter fails the run.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import zlib from "node:zlib";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { serve } from "./server.mjs";
import { csvFields } from "./csv.mjs";

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
// The views of any bundle, and those of a bundle carrying MAGBIG and CulText2I result tables.
const SOS_VIEWS = ["heatmap", "distribution", "correlation", "flags", "scatter", "vendi", "educator"];
const RESULT_VIEWS = ["magbig", "cultext2i"];
// Screenshots of every view at both sizes go here when set (web/ci.sh leaves it unset).
const SCREENS = process.env.WEB_SCREENS || "";
const AXE = fs.readFileSync(path.join(here, "node_modules/axe-core/axe.min.js"), "utf8");

let server, origin, work, cliRows, cliPerImage, cliWithoutAm, tables, thumbMeta, resultFiles;
// Independent reference of the demo's joint SoS: plain float64 numpy straight from the paper's
// Eq. (1) (scripts/fixtures/make_demo_sos_reference.py), not the project's own CLI.
const NUMPY_SOS = readCsv(path.join(repo, "tests/fixtures/demo_sos_reference.csv"));
// Vendi: the CPU panel accumulates the product in f64 like the CLI (only the summation order
// differs); WebGPU in f32 (no f64 there). Bounds at about 3× the measured relative difference
// (CPU 1.0e-15 against the CLI's AVX-512 tiles, 3.6e-16 against its AVX2 ones; WebGPU on
// SwiftShader 5.2e-8; web/ci.sh prints them in its report).
const VENDI_TOL = { cpu: 3e-15, webgpu: 1.5e-7 };
// SoS: page vs CLI and vs the numpy reference, max abs; about 3× the measured 2.6e-7 (WebGPU),
// 1.4e-7 (CPU).
const SOS_TOL = 8e-7;
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

/** A CSV file as objects keyed by its header. */
function readCsvObjects(file) {
  const [header, ...lines] = fs.readFileSync(file, "utf8").trim().split("\n").map(csvFields);
  return lines.map((f) => {
    assert.equal(f.length, header.length, `${file}: fields per record`);
    return Object.fromEntries(header.map((h, i) => [h, f[i]]));
  });
}

/** A float32 `.npy` file of `rows` × `dim` values (row-major little-endian bytes `body`). */
function writeNpy(file, rows, dim, body) {
  let dict = `{'descr': '<f4', 'fortran_order': False, 'shape': (${rows}, ${dim}), }`;
  dict = dict.padEnd(Math.ceil((dict.length + 11) / 64) * 64 - 11) + "\n";
  const head = Buffer.alloc(10);
  head.write("\x93NUMPY", 0, "latin1");
  head[6] = 1;
  head.writeUInt16LE(dict.length, 8);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(dict, "latin1"), body]));
}

/**
 * Writes the rows of the f32 bundle `dir` whose metadata record passes `keep` as a float32 .npy
 * and a metadata CSV (the CLI's --embeddings/--meta input); returns their paths.
 */
function writeTable(dir, name, keep) {
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, "manifest.json"), "utf8"));
  assert.equal(manifest.dtype, "f32");
  const emb = fs.readFileSync(path.join(dir, manifest.embeddings));
  const [headerLine, ...lines] = fs.readFileSync(path.join(dir, manifest.metadata), "utf8").trim().split("\n");
  assert.equal(lines.length, manifest.rows, "one metadata line per row");
  assert.equal(emb.length, manifest.rows * manifest.dim * 4, "rows × dim float32");
  const header = csvFields(headerLine);
  const rowBytes = manifest.dim * 4;
  const kept = lines.map((l, i) => [l, i]).filter(([l]) => keep(Object.fromEntries(header.map((h, k) => [h, csvFields(l)[k]]))));
  const body = Buffer.concat(kept.map(([, i]) => emb.subarray(i * rowBytes, (i + 1) * rowBytes)));
  const npy = path.join(work, `${name}.npy`), csv = path.join(work, `${name}.csv`);
  writeNpy(npy, kept.length, manifest.dim, body);
  fs.writeFileSync(csv, [headerLine, ...kept.map(([l]) => l)].join("\n") + "\n");
  return { npy, csv, rows: kept.length };
}

/** `culturelens sos` on a table written by writeTable. */
function cliSos(table, label) {
  const out = path.join(work, `${label}-sos.csv`);
  cli("sos", "--embeddings", table.npy, "--meta", table.csv, "--out", out);
  return readCsv(out);
}

/** `culturelens vendi ARGS` on the whole demo table; the parsed JSON. */
function cliVendi(label, ...args) {
  const out = path.join(work, `${label}-vendi.json`);
  cli("vendi", ...args, "--out", out);
  return JSON.parse(fs.readFileSync(out, "utf8"));
}

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
  assert.ok(worst <= SOS_TOL, `${label}: max |browser − CLI| = ${worst}`);
  return worst;
}

const CRC = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

/** A `size`×`size` PNG of one RGB colour. */
function solidPng(rgb, size = 8) {
  const chunk = (type, data) => {
    const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
    let c = 0xffffffff;
    for (const b of body) c = CRC[(c ^ b) & 0xff] ^ (c >>> 8);
    const out = Buffer.alloc(body.length + 8);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE((c ^ 0xffffffff) >>> 0, body.length + 4);
    return out;
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(size, 0);
  ihdr.writeUInt32BE(size, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const row = Buffer.concat([Buffer.from([0]), Buffer.from(Array(size).fill(rgb).flat())]);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr),
    chunk("IDAT", zlib.deflateSync(Buffer.concat(Array(size).fill(row)))), chunk("IEND", Buffer.alloc(0))]);
}

/**
 * The demo table with pictures, packed by `culturelens bundle --images`: a bundle with
 * thumbnails. The rows of THUMB_MODEL for THUMB_CULTURES get one picture each (a solid colour
 * that encodes the row); the others none (few thumbnails keep the debug CLI fast). It also
 * carries the MAGBIG and CulText2I result tables (`resultFiles`). Returns its meta.csv as objects.
 */
const THUMB_MODEL = "synth-bilingual", THUMB_CULTURES = ["Chinese", "Japanese", "Mexican"];
function thumbsBundle(out) {
  const images = path.join(work, "images");
  fs.mkdirSync(images, { recursive: true });
  const [header, ...lines] = fs.readFileSync(tables.all.csv, "utf8").trim().split("\n");
  const columns = csvFields(header);
  const named = lines.map((l, i) => {
    const r = Object.fromEntries(columns.map((h, k) => [h, csvFields(l)[k]]));
    if (r.model !== THUMB_MODEL || !THUMB_CULTURES.includes(r.culture)) return `${l},`;
    const name = `${String(i).padStart(6, "0")}.png`;
    fs.writeFileSync(path.join(images, name), solidPng([i & 0xff, (i >> 8) * 16, 255 - (i & 0xff)]));
    return `${l},${name}`;
  });
  const meta = path.join(work, "thumbs-meta.csv");
  fs.writeFileSync(meta, [`${header},image`, ...named].join("\n") + "\n");
  cli("bundle", "--embeddings", tables.all.npy, "--meta", meta, "--images", images, "--synthetic",
    "--title", "demo with thumbnails", "--out", out, "--magbig", resultFiles.magbig, "--magbig-attributes",
    resultFiles.attributes, "--cultext2i", resultFiles.cultext2i, "--cultext2i-report", resultFiles.report);
  return readCsvObjects(path.join(out, "meta.csv"));
}

/** A seeded uniform [0, 1) generator (mulberry32), so the result tables are the same every run. */
function seeded(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const MAGBIG_MODELS = ["mf-synth", "sd-synth"], MAGBIG_SETS = ["direct", "indirect"];
const OCCUPATIONS = { nurse: 0.2, pilot: 0.85, teacher: 0.5 };

/**
 * A MAGBIG attribute table (one row per image: model, language, set, prompt_id, occupation,
 * gender; prompt ids differ per language, as the prompt table's do, so the occupation slide must
 * match languages by `occupation`), with some images without a face and one prompt with none at
 * all (mf-synth, ja, indirect, teacher); then `culturelens magbig` on it.
 */
function magbigResults() {
  const rand = seeded(7);
  const lines = ["model,language,set,prompt_id,occupation,gender"];
  for (const model of MAGBIG_MODELS) {
    for (const language of ["de", "en", "es", "ja"]) {
      for (const set of MAGBIG_SETS) {
        for (const [occupation, male] of Object.entries(OCCUPATIONS)) {
          const noFace = model === "mf-synth" && language === "ja" && set === "indirect" && occupation === "teacher";
          for (let k = 0, n = 4 + Math.floor(rand() * 6); k < n; k++) {
            const gender = noFace || rand() < 0.1 ? "" : rand() < male + (set === "direct" ? 0.1 : -0.1) ? "male" : "female";
            lines.push(`${model},${language},${set},magbig-${language}-${set}-${occupation},${occupation},${gender}`);
          }
        }
      }
    }
  }
  const attributes = path.join(work, "attributes.csv"), out = path.join(work, "magbig.csv");
  fs.writeFileSync(attributes, lines.join("\n") + "\n");
  // With --ci: the bars' tooltips carry the table's intervals.
  cli("magbig", "--attributes", attributes, "--out", out, "--ci", "0.95", "--seed", "3");
  return { attributes, magbig: out };
}

/**
 * CulText2I inputs: 4 nationality texts, 2 dimension texts and 2 English concept texts as unit
 * vectors in 8 dimensions; 96 images (2 models × 4 languages × 2 concepts × 2 templates × 3) near
 * their nationality's and concept's vectors with seeded noise (ad-synth's larger: more images
 * predicted wrong); then
 * `culturelens cultext2i` with its report.
 */
function cultext2iResults() {
  const rand = seeded(11), dim = 8;
  const nationality = { en: "American", de: "German", ja: "Japanese", es: "Spanish" };
  const texts = [...Object.values(nationality).map((n) => ["nationality", n, ""]), ["dimension", "modern", ""],
    ["dimension", "traditional", ""], ["concept", "city", "en"], ["concept", "food", "en"]];
  const unit = (k) => Array.from({ length: dim }, (_, i) => (i === k ? 1 : 0));
  const f32 = (vectors) => Buffer.from(new Float32Array(vectors.flat()).buffer);
  const file = (name, text) => { const f = path.join(work, name); fs.writeFileSync(f, text); return f; };
  const t = path.join(work, "cultext2i-texts.npy");
  writeNpy(t, texts.length, dim, f32(texts.map((_, k) => unit(k))));
  const tm = file("cultext2i-texts.csv", ["kind,label,language", ...texts.map((r) => r.join(","))].join("\n") + "\n");
  const meta = ["model,language,concept,template,nationality"], vectors = [];
  for (const [model, noise] of [["ad-synth", 2.2], ["sd-synth", 1.4]]) {
    Object.keys(nationality).forEach((language, n) => {
      ["city", "food"].forEach((concept, c) => {
        for (const template of ["en_nation", "translated"]) {
          for (let k = 0; k < 3; k++) {
            meta.push(`${model},${language},${concept},${template},${nationality[language]}`);
            vectors.push(Array.from({ length: dim }, (_, i) => (i === n ? 0.8 : 0) + (i === 6 + c ? 0.3 : 0) + noise * (rand() - 0.5)));
          }
        }
      });
    });
  }
  const i = path.join(work, "cultext2i-images.npy");
  writeNpy(i, vectors.length, dim, f32(vectors));
  const im = file("cultext2i-images.csv", meta.join("\n") + "\n");
  const out = path.join(work, "cultext2i.csv"), report = path.join(work, "cultext2i-report.json");
  cli("cultext2i", "--image-embeddings", i, "--image-meta", im, "--text-embeddings", t, "--text-meta", tm, "--out", out, "--report", report);
  return { cultext2i: out, report };
}

before(async () => {
  assert.ok(fs.existsSync(path.join(DIST, "index.html")), `build the app first (web/ci.sh): ${DIST}`);
  work = fs.mkdtempSync(path.join(os.tmpdir(), "culturelens-web-"));
  const bundles = path.join(work, "bundles");
  cli("demo-bundle", "--out", path.join(bundles, "demo"));
  cli("sos", "--bundle", path.join(bundles, "demo"), "--out", path.join(work, "demo-sos.csv"));
  cliRows = readCsv(path.join(work, "demo-sos.csv"));
  cli("sos", "--bundle", path.join(bundles, "demo"), "--out", path.join(work, "demo-sos-again.csv"),
    "--per-image", path.join(work, "demo-per-image.csv"));
  cliPerImage = readCsvObjects(path.join(work, "demo-per-image.csv"));
  tables = {
    all: writeTable(path.join(bundles, "demo"), "demo-all", () => true),
    withoutAm: writeTable(path.join(bundles, "demo"), "demo-without-am", (r) => r.language !== "am"),
  };
  assert.equal(cliPerImage.length, tables.all.rows, "one per-image score per row");
  cliWithoutAm = cliSos(tables.withoutAm, "without-am");
  resultFiles = { ...magbigResults(), ...cultext2iResults() };
  thumbMeta = thumbsBundle(path.join(bundles, "thumbs"));
  // Manifests that lie: meta.csv listed 1 GB longer than it is, and a 10 GB embeddings file.
  for (const [name, edit] of [
    ["lies", (m) => { m.files.find((f) => f.path === m.metadata).bytes += 1e9; }],
    ["huge", (m) => { m.rows = 1e10 / (m.dim * 4); m.files.find((f) => f.path === m.embeddings).bytes = 1e10; }],
  ]) {
    fs.cpSync(path.join(bundles, "demo"), path.join(bundles, name), { recursive: true });
    const file = path.join(bundles, name, "manifest.json");
    const m = JSON.parse(fs.readFileSync(file, "utf8"));
    edit(m);
    fs.writeFileSync(file, JSON.stringify(m));
  }
  // A corrupt copy (one flipped byte) and an oversized one (metadata longer than the manifest says).
  for (const name of ["corrupt", "oversized"]) {
    fs.cpSync(path.join(bundles, "demo"), path.join(bundles, name), { recursive: true });
  }
  const emb = path.join(bundles, "corrupt", "embeddings.f32");
  const bytes = fs.readFileSync(emb);
  bytes[1234] ^= 0x55;
  fs.writeFileSync(emb, bytes);
  // The demo table in 65,536-byte pieces, each with its SHA-256 (the 552,960-byte table in 9, the
  // metadata in 3), and a copy with a byte flipped in the table's piece 4.
  const table = path.join(work, "demo-table");
  cli("demo", "--write", table);
  cli("bundle", "--embeddings", path.join(table, "embeddings.npy"), "--meta", path.join(table, "meta.csv"),
    "--out", path.join(bundles, "pieced"), "--piece-bytes", "65536", "--synthetic");
  fs.cpSync(path.join(bundles, "pieced"), path.join(bundles, "pieced-corrupt"), { recursive: true });
  const pieced = path.join(bundles, "pieced-corrupt", "embeddings.f32");
  const pieceBytes = fs.readFileSync(pieced);
  pieceBytes[300000] ^= 0x01;
  fs.writeFileSync(pieced, pieceBytes);
  fs.appendFileSync(path.join(bundles, "oversized", "meta.csv"), "x".repeat(100000));
  server = await serve({ "/bundles/": bundles, "/": DIST });
  origin = `http://127.0.0.1:${server.address().port}`;
});

after(() => {
  server?.close();
  if (work) fs.rmSync(work, { recursive: true, force: true });
  fs.writeFileSync(REPORT, JSON.stringify(report, null, 2));
  console.log(`browser test report (${REPORT}):\n${JSON.stringify(report, null, 2)}`);
});

async function launch(webgpu) {
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
    args: webgpu ? [...BASE_FLAGS, ...WEBGPU_FLAGS] : BASE_FLAGS });
  report.chromium = browser.version();
  return browser;
}

async function openPage(browser, query, { disableWebGpu = false, viewport = { width: 1280, height: 1000 } } = {}) {
  const page = await browser.newPage({ viewport });
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

/**
 * Canvas pixel positions [x, y] of the drawn coordinates: the scatter's transform
 * (culturelens_view::selection, in f32 like the page). An independent implementation of the
 * geometry, for the selection and hover checks.
 */
function pixelsOf(coords) {
  const f = Math.fround, [W, H, MARGIN] = [820, 560, 12];
  const lo = [Infinity, Infinity], hi = [-Infinity, -Infinity];
  for (let i = 0; i < coords.length; i += 2) {
    for (const k of [0, 1]) { lo[k] = Math.min(lo[k], coords[i + k]); hi[k] = Math.max(hi[k], coords[i + k]); }
  }
  const span = Math.max(f(f(hi[0] - lo[0]) / f(W - 2 * MARGIN)), f(f(hi[1] - lo[1]) / f(H - 2 * MARGIN)), f(1e-12));
  const scale = f(1 / span), x0 = f(f(lo[0] + hi[0]) / 2), y0 = f(f(lo[1] + hi[1]) / 2);
  const out = [];
  for (let i = 0; i < coords.length / 2; i++) {
    out.push([f(f(coords[2 * i] - x0) * scale) + W / 2, H / 2 - f(f(coords[2 * i + 1] - y0) * scale)]);
  }
  return out;
}

/** The rows the page must select for a box from canvas pixel `a` to `b` (edges included). */
function rowsInBox(coords, a, b) {
  const [xmin, xmax, ymin, ymax] = [Math.min(a[0], b[0]), Math.max(a[0], b[0]), Math.min(a[1], b[1]), Math.max(a[1], b[1])];
  const rows = [];
  pixelsOf(coords).forEach(([x, y], i) => { if (x >= xmin && x <= xmax && y >= ymin && y <= ymax) rows.push(i); });
  return rows;
}

/**
 * Drags a box over the middle of the scatter and checks that it selects exactly the points whose
 * drawn position is inside the box (some, not all), then clears the selection.
 */
async function boxSelect(page) {
  await page.click("#tab-scatter");
  await page.waitForFunction(() => /^\d+ selected$/.test(document.querySelector("#selection-count")?.textContent ?? ""));
  // The whole canvas in the viewport, as a user sees it before dragging (pointer events outside
  // the viewport reach no element).
  await page.locator("#scatter-canvas").scrollIntoViewIfNeeded();
  const box = await page.locator("#scatter-canvas").boundingBox();
  // Whole client pixels (MouseEvent.clientX is read as an integer); the page maps them to canvas
  // pixels with the canvas's client rectangle.
  const at = (fx, fy) => [Math.round(box.x + box.width * fx), Math.round(box.y + box.height * fy)];
  const [start, middle, end] = [at(0.25, 0.25), at(0.5, 0.5), at(0.75, 0.75)];
  await page.mouse.move(...start);
  await page.mouse.down();
  await page.mouse.move(...middle, { steps: 4 });
  await page.mouse.move(...end, { steps: 4 });
  await page.mouse.up();
  // A GPU frame is asynchronous: the count reads "" until the frame is on the canvas.
  await page.waitForFunction(() => /^[1-9]\d* selected$/.test(document.querySelector("#selection-count")?.textContent ?? ""));
  const selected = Number((await page.textContent("#selection-count")).split(" ")[0]);
  assert.ok(selected > 0, `the box selects points: ${selected}`);
  const rect = await page.evaluate(() => {
    const r = document.querySelector("#scatter-canvas").getBoundingClientRect();
    return { left: r.left, top: r.top, width: r.width, height: r.height };
  });
  const toCanvas = ([x, y]) => [(x - rect.left) * 820 / rect.width, (y - rect.top) * 560 / rect.height];
  const coords = JSON.parse(await page.textContent("#scatter-data"));
  assert.equal(coords.length, 2 * tables.all.rows, "two coordinates per row");
  const expected = rowsInBox(coords, toCanvas(start), toCanvas(end));
  const got = (await page.getAttribute("#scatter-canvas", "data-selection")).split(",").map(Number);
  assert.ok(expected.length > 0 && expected.length < tables.all.rows, `the box holds some, not all, points: ${expected.length}`);
  assert.equal(got.length, expected.length, "number of selected points = points inside the box");
  assert.deepEqual(got, expected, "the selected rows are exactly the points inside the box");
  assert.equal(selected, expected.length);
  await page.click("[data-action=clear]");
  await page.waitForFunction(() => document.querySelector("#selection-count")?.textContent === "0 selected");
  return expected.length;
}

/**
 * The Vendi panel's numbers in full precision (`data-value`), after the update that follows
 * `change`: waits until no update is pending (a superseded update never writes), clears the
 * values, makes the change and waits for the latest update's numbers.
 */
async function vendiAfter(page, change) {
  await page.waitForSelector("#vendi-table[data-busy=false]");
  await page.evaluate(() => {
    for (const id of ["vendi-n", "vendi-vs", "vendi-qvs", "vendi-qvs-norm"]) document.getElementById(id).dataset.value = "";
  });
  await change();
  await page.waitForFunction(() => document.querySelector("#vendi-qvs-norm")?.dataset.value !== "" ||
    !document.querySelector("#error").hidden);
  assert.equal(await page.isVisible("#error"), false, "no Vendi error");
  const value = (id) => page.getAttribute(`#${id}`, "data-value").then(Number);
  return { n: await value("vendi-n"), vs: await value("vendi-vs"), qvs: await value("vendi-qvs"),
    qvs_norm: await value("vendi-qvs-norm") };
}

/** Asserts the page's Vendi numbers equal the CLI's to `tol` (relative); returns the worst error. */
function assertSameVendi(page, cliValue, tol, label) {
  assert.equal(page.n, cliValue.n, `${label}: N`);
  let worst = 0;
  for (const k of ["vs", "qvs", "qvs_norm"]) {
    const rel = Math.abs(page[k] - cliValue[k]) / Math.abs(cliValue[k]);
    assert.ok(rel <= tol, `${label}: ${k} page ${page[k]} vs CLI ${cliValue[k]} (relative ${rel})`);
    worst = Math.max(worst, rel);
  }
  return worst;
}

/**
 * The Vendi panel against `culturelens vendi` on the same subsets: the whole table (cosine,
 * uniform and `seed` quality), the `am` rows (the CLI's --group-by language), and the categorical
 * kernel with the panel's default weights. Returns the worst relative difference.
 */
async function checkVendi(page, tol, label) {
  const table = ["--embeddings", tables.all.npy, "--meta", tables.all.csv];
  await page.click("#tab-vendi");
  await page.waitForFunction(() => document.querySelector("#vendi-vs")?.textContent !== "–");
  let worst = 0;
  const cosine = await vendiAfter(page, () => page.selectOption("#vendi-quality", ""));
  worst = Math.max(worst, assertSameVendi(cosine, cliVendi("cosine", ...table), tol, `${label}: cosine`));
  const quality = await vendiAfter(page, () => page.selectOption("#vendi-quality", "seed"));
  const cliQuality = cliVendi("quality", ...table, "--quality-col", "seed");
  worst = Math.max(worst, assertSameVendi(quality, cliQuality, tol, `${label}: cosine, quality = seed`));
  await vendiAfter(page, () => page.selectOption("#vendi-quality", ""));
  const am = await vendiAfter(page, () => page.selectOption("#vendi-language", "am"));
  const byLanguage = cliVendi("by-language", ...table, "--group-by", "language");
  worst = Math.max(worst, assertSameVendi(am, byLanguage.am, tol, `${label}: cosine, language am`));
  await vendiAfter(page, () => page.selectOption("#vendi-language", ""));
  const weights = await page.$$eval("input.weight", (els) => els.map((e) => [e.dataset.column, e.value]));
  assert.deepEqual(weights, [["language", "0.250"], ["culture", "0.250"], ["person", "0.250"], ["template", "0.250"]]);
  const categorical = await vendiAfter(page, () => page.selectOption("#vendi-kernel", "categorical"));
  const cliCategorical = cliVendi("categorical", "--kernel", "categorical", "--meta", tables.all.csv,
    "--columns", weights.map(([c]) => c).join(","), "--kernel-weights", weights.map(([, w]) => w).join(","));
  worst = Math.max(worst, assertSameVendi(categorical, cliCategorical, tol, `${label}: categorical`));
  await vendiAfter(page, () => page.selectOption("#vendi-kernel", "cosine"));
  return worst;
}

/**
 * The educator slide shows, per language, the mean of the per-output scores of its (model,
 * culture, person term) — `culturelens sos --per-image` — over exactly those outputs, and the
 * cell's joint score.
 */
async function checkEducator(page) {
  const params = new URL(page.url()).searchParams;
  const [model, culture, person] = ["model", "culture", "person"].map((k) => params.get(k));
  const byLanguage = new Map();
  for (const r of cliPerImage.filter((r) => r.model === model && r.culture === culture && r.person === person)) {
    if (!byLanguage.has(r.language)) byLanguage.set(r.language, []);
    byLanguage.get(r.language).push(Number(r.sos));
  }
  const expected = [...byLanguage.keys()].sort().map((language) => {
    const v = byLanguage.get(language);
    const joint = cliRows.find((j) => j.model === model && j.language === language && j.culture === culture);
    return { language, n: v.length, mean: v.reduce((a, b) => a + b, 0) / v.length, joint: joint.sos };
  });
  const cards = await page.$$eval(".edu-card", (els) => els.map((e) => ({ language: e.dataset.language,
    n: Number(e.dataset.n), mean: Number(e.dataset.sos), joint: Number(e.dataset.joint),
    text: e.querySelector(".edu-sos").textContent })));
  assert.deepEqual(cards.map((c) => c.language), expected.map((e) => e.language), "one card per language");
  assert.equal(cards.length, expected.length);
  let worst = 0;
  for (let i = 0; i < cards.length; i++) {
    const [c, e] = [cards[i], expected[i]];
    assert.equal(c.n, e.n, `educator ${e.language}: n`);
    assert.ok(Math.abs(c.mean - e.mean) <= SOS_TOL, `educator ${e.language}: SoS ${c.mean} vs CLI ${e.mean}`);
    assert.ok(Math.abs(c.joint - e.joint) <= SOS_TOL, `educator ${e.language}: cell ${c.joint} vs CLI ${e.joint}`);
    assert.ok(Math.abs(Number(c.text.replace("SoS ", "")) - c.mean) <= 5e-4 + 1e-12, `educator ${e.language}: shown ${c.text}`);
    worst = Math.max(worst, Math.abs(c.mean - e.mean), Math.abs(c.joint - e.joint));
  }
  return worst;
}

test("CPU fallback (WebGPU disabled): demo, CLI parity, views, filters, errors", { timeout: TIMEOUT * 4 }, async () => {
  const browser = await launch(false);
  try {
    const { page, errors } = await openPage(browser, "?bundle=demo", { disableWebGpu: true });
    const rows = await results(page);
    assert.equal(await page.getAttribute("body", "data-backend"), "cpu");
    assert.match(await page.textContent("#bundle-title"), /SYNTHETIC DEMO DATA/);
    const worst = assertSameScores(rows, cliRows, "?bundle=demo on CPU");
    const numpyMaxDiff = assertSameScores(rows, NUMPY_SOS, "?bundle=demo on CPU vs the numpy reference");
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
    for (const view of RESULT_VIEWS) {
      assert.equal(await page.isVisible(`#tab-${view}`), false, `no ${view} tab for a bundle without its results`);
    }
    for (const view of SOS_VIEWS) {
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
    const vendiMaxRelDiff = await checkVendi(page, VENDI_TOL.cpu, "CPU");
    assert.equal(await page.getAttribute("#scatter-points", "data-renderer"), "canvas2d");
    const boxSelected = await boxSelect(page);
    // Educator mode: keyboard navigation moves the culture and the URL follows.
    await page.click("#tab-educator");
    const before = new URL(page.url()).searchParams.get("culture");
    await page.keyboard.press("ArrowRight");
    const afterKey = new URL(page.url()).searchParams.get("culture");
    assert.ok(before && afterKey && before !== afterKey, `culture in the URL changes: ${before} → ${afterKey}`);
    const educatorMaxDiff = await checkEducator(page);
    // Filter change: dropping a language recomputes SoS without it (references change too).
    await page.click("#tab-heatmap");
    await page.check("#filters input[data-kind=language][value=am]");
    await page.uncheck("#filters input[data-kind=language][value=am]");
    const filtered = await results(page);
    assert.equal(filtered.filter((r) => r.language === "am").length, 0);
    assert.equal(filtered.length, cliRows.length - 30);
    const filteredMaxDiff = assertSameScores(filtered, cliWithoutAm, "filter without am (CPU)");
    timing.recomputeMs = Number(await page.getAttribute("body", "data-recompute-ms"));
    assert.deepEqual(errors, []);
    report.runs.push({ path: "cpu fallback", adapter: await page.getAttribute("body", "data-adapter"),
      bundle: "demo", maxAbsDiff: worst, numpyMaxDiff, filteredMaxDiff, vendiMaxRelDiff, educatorMaxDiff, boxSelected,
      ...timing, screenshots: shots });

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
    // SHA-256 by WebCrypto here (127.0.0.1 is a secure context). Without SubtleCrypto (a page
    // served over plain http from another host) the wasm hash makes the same checks; that page
    // also spreads the table over 9 parts of 256 rows (`part-bytes`), as WebGPU does.
    assert.equal(await served.page.getAttribute("body", "data-digest"), "webcrypto");
    assert.equal(await served.page.getAttribute("body", "data-digests"), "2", "one digest per file below a piece");
    // A bundle listed in pieces: each piece hashed as it arrives, every one checked.
    const pieces = await openPage(browser, "?bundle=/bundles/pieced/&backend=cpu");
    assertSameScores(await results(pieces.page), cliRows, "a bundle in 65,536-byte pieces");
    const piecesMeta = JSON.parse(fs.readFileSync(path.join(work, "bundles", "pieced", "manifest.json"), "utf8"));
    const listed = piecesMeta.files.reduce((n, f) => n + (f.pieces ? f.pieces.sha256.length : 1), 0);
    assert.ok(listed > 9, `the pieces listed: ${listed}`);
    assert.equal(await pieces.page.getAttribute("body", "data-digests"), String(listed));
    const pieceMismatch = /embeddings\.f32: SHA-256 mismatch: piece 4 of 9 \(bytes 262144\.\.327680\)/;
    for (const [bundle, check] of [
      ["demo", async (page) => {
        assertSameScores(await results(page), cliRows, "wasm SHA-256, the table in 9 parts on the CPU");
        assert.equal(await page.getAttribute("body", "data-table-parts"), "9");
      }],
      ["corrupt", async (page) => {
        await page.waitForSelector("body[data-state=error]");
        assert.match(await page.textContent("#error"), /SHA-256 mismatch/);
      }],
      ["pieced", async (page) => {
        assertSameScores(await results(page), cliRows, "wasm SHA-256 of 65,536-byte pieces");
        assert.equal(await page.getAttribute("body", "data-digests"), String(listed));
      }],
      ["pieced-corrupt", async (page) => {
        await page.waitForSelector("body[data-state=error]");
        assert.match(await page.textContent("#error"), pieceMismatch);
      }],
    ]) {
      const plain = await openPage(browser, null);
      await plain.page.addInitScript(() => Object.defineProperty(Crypto.prototype, "subtle", { get: () => undefined }));
      await plain.page.goto(`${origin}/index.html?bundle=/bundles/${bundle}/&backend=cpu&part-bytes=65536`);
      await check(plain.page);
      assert.equal(await plain.page.getAttribute("body", "data-digest"), "wasm", "the wasm SHA-256 without SubtleCrypto");
      await plain.page.close();
    }
    const local = await openPage(browser, "?backend=cpu");
    await local.page.waitForSelector("body[data-loader=ready]");
    const dir = path.join(work, "bundles", "demo");
    await local.page.setInputFiles("#file-input", fs.readdirSync(dir).map((f) => path.join(dir, f)));
    assertSameScores(await results(local.page), cliRows, "local files");
    const localPieced = await openPage(browser, "?backend=cpu");
    await localPieced.page.waitForSelector("body[data-loader=ready]");
    const piecedDir = path.join(work, "bundles", "pieced-corrupt");
    await localPieced.page.setInputFiles("#file-input", fs.readdirSync(piecedDir).map((f) => path.join(piecedDir, f)));
    await localPieced.page.waitForSelector("body[data-state=error]");
    assert.match(await localPieced.page.textContent("#error"), pieceMismatch);

    // Bad bundles: a clear on-screen error, never a blank page.
    for (const [query, message] of [
      ["?bundle=/bundles/corrupt/&backend=cpu", /SHA-256 mismatch/],
      ["?bundle=/bundles/pieced-corrupt/&backend=cpu", pieceMismatch],
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
      const why = "the browser offers no WebGPU adapter";
      if (process.env.CULTURELENS_WEB_ALLOW_NO_WEBGPU !== "1") {
        report.runs.push({ path: "webgpu", failed: why });
        assert.fail(`${why}: the WebGPU path would go untested. Install a working Chromium/SwiftShader, ` +
          "or set CULTURELENS_WEB_ALLOW_NO_WEBGPU=1 to accept a run without it");
      }
      report.runs.push({ path: "webgpu", skipped: why, optOut: "CULTURELENS_WEB_ALLOW_NO_WEBGPU=1" });
      console.warn(`\n${"!".repeat(78)}\n!! WebGPU NOT TESTED: ${why} (CULTURELENS_WEB_ALLOW_NO_WEBGPU=1)\n${"!".repeat(78)}\n`);
      t.skip(`${why} (CULTURELENS_WEB_ALLOW_NO_WEBGPU=1)`);
      return;
    }
    await page.goto(`${origin}/index.html?bundle=demo&backend=webgpu`);
    const rows = await results(page);
    assert.equal(await page.getAttribute("body", "data-backend"), "webgpu");
    const worst = assertSameScores(rows, cliRows, "?bundle=demo on WebGPU");
    const numpyMaxDiff = assertSameScores(rows, NUMPY_SOS, "?bundle=demo on WebGPU vs the numpy reference");
    const shots = {};
    for (const view of ["heatmap", "scatter"]) {
      await page.click(`#tab-${view}`);
      if (view === "scatter") await page.waitForFunction(() => document.querySelector("#selection-count")?.textContent !== "");
      shots[view] = await assertNonBlank(page, page.locator(`#view-${view}`), `${view} (webgpu)`);
    }
    // The scatter's points are GPU sprites (shaders/scatter.wgsl), and selection still works.
    assert.equal(await page.getAttribute("#scatter-points", "data-renderer"), "webgpu");
    const coords = JSON.parse(await page.textContent("#scatter-data"));
    const boxSelected = await boxSelect(page);
    const vendiMaxRelDiff = await checkVendi(page, VENDI_TOL.webgpu, "WebGPU");
    await page.click("#tab-heatmap");
    const firstHeatmapMs = Number(await page.getAttribute("body", "data-first-heatmap-ms"));
    await page.uncheck("#filters input[data-kind=language][value=am]");
    const filtered = await results(page);
    assert.equal(filtered.length, cliRows.length - 30);
    const filteredMaxDiff = assertSameScores(filtered, cliWithoutAm, "filter without am (WebGPU)");
    assert.deepEqual(errors, []);
    report.runs.push({ path: "webgpu", browserAdapter: adapter, burnAdapter: await page.getAttribute("body", "data-adapter"),
      bundle: "demo", maxAbsDiff: worst, numpyMaxDiff, filteredMaxDiff, vendiMaxRelDiff, boxSelected, firstHeatmapMs,
      recomputeMs: Number(await page.getAttribute("body", "data-recompute-ms")), screenshots: shots });
    await page.close();

    // The table in 9 GPU buffers of 256 rows (`part-bytes`; a 772 MB table is split so under the
    // adapter's buffer limits): the CLI's scores, the whole-table cosine Vendi (rows gathered
    // across the parts), the PCA of the one-buffer page, and the scores after a filter (rows of
    // every part).
    const split = await openPage(browser, "?bundle=demo&backend=webgpu&part-bytes=65536");
    const splitMaxDiff = assertSameScores(await results(split.page), cliRows, "WebGPU, 9 parts");
    assert.equal(await split.page.getAttribute("body", "data-backend"), "webgpu");
    assert.equal(await split.page.getAttribute("body", "data-table-parts"), "9");
    await split.page.click("#tab-vendi");
    await split.page.waitForFunction(() => document.querySelector("#vendi-table")?.dataset.busy === "false" &&
      document.querySelector("#vendi-qvs-norm")?.dataset.value);
    const value = (id) => split.page.getAttribute(`#${id}`, "data-value").then(Number);
    const splitVendi = { n: await value("vendi-n"), vs: await value("vendi-vs"), qvs: await value("vendi-qvs"),
      qvs_norm: await value("vendi-qvs-norm") };
    const splitVendiRelDiff = assertSameVendi(splitVendi, cliVendi("cosine-parts", "--embeddings", tables.all.npy,
      "--meta", tables.all.csv), VENDI_TOL.webgpu, "WebGPU, 9 parts: cosine");
    await split.page.click("#tab-scatter");
    await split.page.waitForFunction(() => /^\d+ selected$/.test(document.querySelector("#selection-count")?.textContent ?? ""));
    const splitCoords = JSON.parse(await split.page.textContent("#scatter-data"));
    assert.equal(splitCoords.length, coords.length);
    const pcaMaxDiff = Math.max(...splitCoords.map((v, i) => Math.abs(v - coords[i])));
    assert.ok(pcaMaxDiff <= 1e-5, `PCA in 9 parts vs one: max |Δ| = ${pcaMaxDiff}`);
    await split.page.click("#tab-heatmap");
    await split.page.uncheck("#filters input[data-kind=language][value=am]");
    const splitFilteredMaxDiff = assertSameScores(await results(split.page), cliWithoutAm, "WebGPU, 9 parts, without am");
    assert.deepEqual(split.errors, []);
    report.runs.push({ path: "webgpu, table in 9 parts", maxAbsDiff: splitMaxDiff, filteredMaxDiff: splitFilteredMaxDiff,
      vendiMaxRelDiff: splitVendiRelDiff, pcaMaxDiff });
  } finally {
    await browser.close();
  }
});

/** Loads `?bundle=/bundles/thumbs/…&view=VIEW` on the CPU and waits until the view has drawn. */
async function openView(browser, size, view, extra = "") {
  const opened = await openPage(browser, null, { viewport: size });
  await opened.page.goto(`${origin}/index.html?bundle=/bundles/thumbs/&backend=cpu&view=${view}${extra}`);
  await results(opened.page);
  await viewDrawn(opened.page, view);
  return opened;
}

async function viewDrawn(page, view) {
  if (view === "scatter") await page.waitForFunction(() => /^\d+ selected$/.test(document.querySelector("#selection-count")?.textContent ?? ""));
  if (view === "vendi") await page.waitForFunction(() => document.querySelector("#vendi-vs")?.textContent !== "–");
}

/** axe-core on the page as it is: the serious and critical violations. */
async function axeViolations(page) {
  if (!(await page.evaluate(() => !!window.axe))) await page.addScriptTag({ content: AXE });
  const result = await page.evaluate(async () => (await window.axe.run(document)).violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ")) })));
  return result;
}

/** Where the element is against the viewport, and whether the page scrolls sideways. */
async function placement(page, selector) {
  return page.evaluate((sel) => {
    const r = document.querySelector(sel).getBoundingClientRect();
    return { x: r.x, y: r.y, right: r.right, bottom: r.bottom, width: r.width, height: r.height,
      vw: window.innerWidth, vh: window.innerHeight, scrollWidth: document.scrollingElement.scrollWidth };
  }, selector);
}

const SIZES = [{ width: 1280, height: 720 }, { width: 375, height: 812 }];

test("Figure first at 1280×720 and 375×812: every view's figure in the viewport, axe clean", { timeout: TIMEOUT * 4 }, async () => {
  const browser = await launch(false);
  try {
    const placements = {};
    // Every view of the thumbs bundle (it carries the result tables), and the occupation slide.
    const views = [...SOS_VIEWS, ...RESULT_VIEWS].map((v) => [v, v, ""]).concat([["educator (gender)", "educator", "&slide=gender"]]);
    for (const size of SIZES) {
      for (const [name, view, extra] of views) {
        const { page, errors } = await openView(browser, size, view, extra);
        const label = `${name} at ${size.width}×${size.height}`;
        assert.equal(await page.getAttribute("body", "data-view"), view);
        assert.equal(await page.isVisible("#loader"), false, `${label}: the loader is collapsed`);
        assert.ok(await page.isVisible("#load-another"), `${label}: one "Load another bundle" control`);
        assert.match(await page.textContent("#bundle-title"), /SYNTHETIC DEMO DATA/);
        assert.ok(await page.isVisible("#bundle-title"), `${label}: the synthetic label is on screen`);
        if (SCREENS) {
          fs.mkdirSync(SCREENS, { recursive: true });
          await page.screenshot({ path: path.join(SCREENS, `${name.replace(/\W+/g, "-")}-${size.width}x${size.height}.png`) });
        }
        const at = await placement(page, `#view-${view} [data-figure]`);
        placements[label] = at;
        assert.ok(at.width > 100 && at.height > 50, `${label}: the figure has a size: ${JSON.stringify(at)}`);
        assert.ok(at.x >= 0 && at.y >= 0 && at.right <= at.vw + 0.5 && at.bottom <= at.vh + 0.5,
          `${label}: the figure is inside the viewport: ${JSON.stringify(at)}`);
        assert.ok(at.scrollWidth <= at.vw, `${label}: no sideways scrolling: ${at.scrollWidth} > ${at.vw}`);
        const violations = await axeViolations(page);
        assert.deepEqual(violations, [], `${label}: axe-core serious/critical violations`);
        assert.deepEqual(errors, []);
        await page.close();
      }
    }
    report.runs.push({ path: "layout", figures: placements });
  } finally {
    await browser.close();
  }
});

test("Heatmap cell → exactly its images; scatter hover → the point's thumbnail; drag past the edge", { timeout: TIMEOUT * 2 }, async () => {
  const browser = await launch(false);
  try {
    const { page, errors } = await openView(browser, SIZES[0], "heatmap");
    const base = `${origin}/bundles/thumbs/`;
    const model = await page.inputValue("#model-select");
    assert.equal(model, THUMB_MODEL, "the first model is the one with pictures");
    const imagesOf = (language, culture) => thumbMeta
      .filter((r) => r.model === model && r.language === language && r.culture === culture)
      .map((r) => base + r.thumbnail).sort();
    const shown = async () => (await page.$$eval("#cell-images img", (els) => els.map((e) => e.getAttribute("src")))).sort();
    // Mouse: one cell.
    await page.click("#heatmap-svg .cell[data-language=de][data-culture=Japanese]");
    await page.waitForSelector("#cell-images img");
    const want = imagesOf("de", "Japanese");
    assert.equal(want.length, 9, "3 templates × 3 person terms");
    assert.deepEqual(await shown(), want, "the clicked cell's images, exactly");
    assert.equal(await page.$$eval("#cell-images img", (els) => els.filter((e) => e.complete && e.naturalWidth > 0).length), 9,
      "every thumbnail loads");
    // Keyboard: focus another cell, Enter.
    await page.focus("#heatmap-svg .cell[data-language=am][data-culture=Mexican]");
    assert.ok(await page.isVisible("#tooltip"), "a focused cell shows its tooltip");
    assert.match(await page.textContent("#tooltip"), /^Mexican × am: SoS/);
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => /Mexican × am/.test(document.querySelector("#cell-images h3")?.textContent ?? ""));
    assert.deepEqual(await shown(), imagesOf("am", "Mexican"), "Enter opens the focused cell's images");

    // Scatter hover: the most isolated point (so the pointer's whole-pixel rounding cannot reach
    // another) shows its own thumbnail.
    await page.click("#tab-scatter");
    await viewDrawn(page, "scatter");
    await page.evaluate(() => window.scrollTo(0, 0));
    const coords = JSON.parse(await page.textContent("#scatter-data"));
    const px = pixelsOf(coords);
    let best = { row: -1, gap: -1 };
    px.forEach(([x, y], i) => {
      let gap = Infinity;
      px.forEach(([u, v], j) => { if (j !== i) gap = Math.min(gap, Math.hypot(u - x, v - y)); });
      if (thumbMeta[i].thumbnail && x > 20 && x < 800 && y > 20 && y < 540 && gap > best.gap) best = { row: i, gap };
    });
    assert.ok(best.gap > 4, `an isolated point: ${JSON.stringify(best)}`);
    const rect = await page.evaluate(() => {
      const r = document.querySelector("#scatter-canvas").getBoundingClientRect();
      return { left: r.left, top: r.top, width: r.width, height: r.height };
    });
    const toClient = ([x, y]) => [rect.left + x * rect.width / 820, rect.top + y * rect.height / 560];
    await page.mouse.move(...toClient(px[best.row]).map(Math.round), { steps: 3 });
    await page.waitForSelector("#tooltip[data-row]");
    assert.equal(Number(await page.getAttribute("#tooltip", "data-row")), best.row, "the hovered point's row");
    assert.equal(await page.getAttribute("#tooltip img", "src"), base + thumbMeta[best.row].thumbnail, "its thumbnail");
    const r = thumbMeta[best.row];
    assert.match(await page.textContent("#tooltip"), new RegExp(`${r.language} · ${r.culture} · ${r.person}`));

    // Keyboard: the focused scatter steps through the points in row order, each with its tooltip.
    const keyRow = async (key, want) => {
      await page.keyboard.press(key);
      await page.waitForFunction((w) => document.querySelector("#tooltip")?.getAttribute("data-row") === String(w), want);
      const m = thumbMeta[want];
      assert.match(await page.textContent("#tooltip"), new RegExp(`${m.language} · ${m.culture} · ${m.person}`), `row ${want}'s tooltip`);
    };
    await page.focus("#scatter-points");
    await keyRow("ArrowRight", 0);
    await keyRow("ArrowRight", 1);
    await keyRow("ArrowLeft", 0);
    await keyRow("ArrowLeft", thumbMeta.length - 1);
    await page.keyboard.press("Escape");
    assert.ok(await page.isHidden("#tooltip"), "Escape hides the keyboard tooltip");

    // A box dragged past the canvas's right edge reaches the pointer (pointer capture), not the
    // last position inside the canvas.
    const start = [rect.left + rect.width * 0.3, rect.top + rect.height * 0.05].map(Math.round);
    const end = [rect.left + rect.width + 60, rect.top + rect.height * 0.95].map(Math.round);
    await page.mouse.move(...start);
    await page.mouse.down();
    const steps = 3;
    await page.mouse.move(...end, { steps });
    await page.mouse.up();
    // The last pointer position inside the canvas (Playwright moves in equal steps).
    const lastInside = Math.max(...Array.from({ length: steps }, (_, k) => start[0] + (end[0] - start[0]) * (k + 1) / steps)
      .filter((x) => x < rect.left + rect.width));
    await page.waitForFunction(() => /^[1-9]\d* selected$/.test(document.querySelector("#selection-count")?.textContent ?? ""));
    const toCanvas = ([x, y]) => [(x - rect.left) * 820 / rect.width, (y - rect.top) * 560 / rect.height];
    const expected = rowsInBox(coords, toCanvas(start), toCanvas(end));
    const got = (await page.getAttribute("#scatter-canvas", "data-selection")).split(",").map(Number);
    const cut = toCanvas([lastInside, 0])[0];
    assert.ok(expected.some((i) => px[i][0] > cut), `the box holds points right of the last position inside the canvas (${cut})`);
    assert.deepEqual(got, expected, "the selection reaches past the canvas edge");
    assert.deepEqual(errors, []);
    report.runs.push({ path: "images", cellImages: want.length, hoverRow: best.row, hoverGapPx: best.gap, edgeBoxSelected: got.length });
  } finally {
    await browser.close();
  }
});

/** `culturelens magbig` on the rows of the test's attribute table that pass `keep`: its rows. */
function cliMagbig(label, keep) {
  const [header, ...lines] = fs.readFileSync(resultFiles.attributes, "utf8").trim().split("\n");
  const names = csvFields(header);
  const kept = lines.filter((l) => keep(Object.fromEntries(csvFields(l).map((v, k) => [names[k], v]))));
  const file = path.join(work, `${label}-attributes.csv`), out = path.join(work, `${label}-magbig.csv`);
  fs.writeFileSync(file, [header, ...kept].join("\n") + "\n");
  cli("magbig", "--attributes", file, "--out", out);
  return readCsvObjects(out);
}

/**
 * The occupation slide in the page's URL state against the CLI: one card per language of the
 * occupation's images, with their counts by perceived gender and, per language, the male share
 * that `culturelens magbig` computes on exactly those images (its rows then hold one prompt each);
 * no share where no image has a face.
 */
async function checkOccupationSlide(page) {
  const q = new URL(page.url()).searchParams;
  const [model, set, occupation] = ["rmodel", "set", "occupation"].map((k) => q.get(k));
  const mine = (r) => r.model === model && r.set === set && r.occupation === occupation;
  const images = readCsvObjects(resultFiles.attributes).filter(mine);
  assert.ok(images.length > 0, `${model} ${set} ${occupation} has images`);
  const cliRows = cliMagbig(`${model}-${set}-${occupation}`, mine);
  const languages = [...new Set(images.map((r) => r.language))].sort();
  const cards = await page.$$eval(".gender-card", (els) => els.map((e) => ({ ...e.dataset, text: e.querySelector(".edu-share").textContent })));
  assert.deepEqual(cards.map((c) => c.language), languages, `${occupation}: one card per language`);
  assert.equal(await page.textContent(".edu-title"), `${occupation} · ${set} · ${model}`);
  for (const c of cards) {
    const of = (g) => String(images.filter((r) => r.language === c.language && r.gender === g).length);
    assert.deepEqual([c.male, c.female, c.unclassified], [of("male"), of("female"), of("")], `${occupation} ${c.language}: counts`);
    const row = cliRows.find((r) => r.language === c.language);
    if (row) {
      assert.equal(row.n_prompts, "1");
      assert.equal(c.maleShare, row.male_share, `${occupation} ${c.language}: male share = culturelens magbig's`);
      assert.match(c.text, /^\d+% male$/);
      assert.ok(Math.abs(parseInt(c.text, 10) - 100 * Number(row.male_share)) <= 0.5 + 1e-9, `${occupation} ${c.language}: shown ${c.text}`);
    } else {
      assert.equal(c.maleShare, "", `${occupation} ${c.language}: no face, no share`);
      assert.equal(c.text, "no face found");
    }
  }
  return cards.length;
}

/** The heatmap cells on screen with their intervals (`data-lo`/`data-hi`/`data-ci`). */
async function heatmapIntervals(page) {
  return page.$$eval("#heatmap-svg .cell", (els) => els.map((e) => ({
    model: e.dataset.model, language: e.dataset.language, culture: e.dataset.culture,
    lo: e.dataset.lo, hi: e.dataset.hi, ci: e.dataset.ci,
  })));
}

/** `culturelens sos --bundle demo --ci LEVEL --bootstrap B --seed S [extra]`: rows keyed by cell. */
function cliIntervals(level, resamples, seed, ...extra) {
  const out = path.join(work, `demo-sos-ci-${level}-${resamples}-${seed}${extra.join("")}.csv`);
  cli("sos", "--bundle", path.join(work, "bundles", "demo"), "--out", out, "--ci", String(level),
    "--bootstrap", String(resamples), "--seed", String(seed), ...extra);
  return new Map(readCsvObjects(out).map((r) => [key(r), r]));
}

/** Each bound of the heatmap cells' intervals against the CLI's row: the absolute differences. */
function intervalDifferences(cells, want, label) {
  assert.ok(cells.length > 0, `${label}: cells on screen`);
  return cells.flatMap((c) => {
    const row = want.get(key(c));
    assert.ok(row, `${label}: ${key(c)} is a CLI cell`);
    assert.ok(c.lo !== undefined && c.hi !== undefined, `${label}: ${key(c)} has its interval`);
    return [[c.lo, row.sos_lo], [c.hi, row.sos_hi]].map(([got, cli]) => ({ cell: key(c), got, cli, d: Math.abs(Number(got) - Number(cli)) }));
  });
}

// Heatmap intervals against the CLI's. The page and the CLI resample the same per-output scores
// with the same draws, but those scores differ in the last f32 bits (SOS_TOL). A percentile bound
// is a continuous function of the scores, so it stays within SOS_TOL. A BCa bound is not: its bias
// correction counts the replicates below the estimate, and a replicate within that noise of the
// estimate can fall on the other side, which moves the bound by a fraction of the gap between
// neighbouring replicates (measured on the CPU page with BCa at levels 0.9 and 0.99, B 500, seed
// 7: 4 of 320 bounds by 1.5e-5 to 1.4e-4, the rest below 1.6e-7; at the defaults tested here none). So
// BCa: at least 95% of the bounds within SOS_TOL, every bound within BCA_JUMP (about 3.5× 1.4e-4).
const BCA_JUMP = 5e-4;

test("Heatmap tooltips give the interval of `culturelens sos --ci` for the same seed and B, after the first heatmap", { timeout: TIMEOUT * 2 }, async () => {
  const browser = await launch(false);
  try {
    // Percentile at 0.9, B 500, seed 7 from the URL.
    const { page, errors } = await openPage(browser, "?bundle=/bundles/demo/&backend=cpu&view=heatmap&ci=0.9&bootstrap=500&seed=7&ci-method=percentile");
    await results(page);
    await page.waitForSelector("body[data-ci=ready]");
    assert.ok(Number(await page.getAttribute("body", "data-ci-ms")) >= 0, "the intervals' time is recorded");
    let cells = await heatmapIntervals(page);
    const percentile = intervalDifferences(cells, cliIntervals(0.9, 500, 7, "--ci-method", "percentile"), "percentile 0.9");
    assert.equal(cells[0].ci, "90% percentile bootstrap, 500 resamples, seed 7, fast mode");
    // The tooltip: estimate [lo, hi], level and method.
    const first = cells.find((c) => c.language === "am") ?? cells[0];
    const selector = `#heatmap-svg .cell[data-language="${first.language}"][data-culture="${first.culture}"]`;
    await page.focus(selector);
    const sos = await page.getAttribute(selector, "data-sos");
    const n = cliRows.find((r) => key(r) === key(first)).n;
    assert.equal(await page.textContent("#tooltip"),
      `${first.culture} × ${first.language}: SoS ${sos} [${first.lo}, ${first.hi}], 90% percentile bootstrap, 500 resamples, seed 7, fast mode (n = ${n})`);
    // The control: level 99% recomputes with the URL's seed, B and method.
    await page.selectOption("#ci-level", "0.99");
    await page.waitForFunction(() => document.querySelector("#heatmap-svg .cell")?.dataset.ci?.startsWith("99%"));
    assert.match(await page.evaluate(() => location.search), /ci=0\.99/);
    percentile.push(...intervalDifferences(await heatmapIntervals(page), cliIntervals(0.99, 500, 7, "--ci-method", "percentile"), "percentile 0.99"));
    for (const b of percentile) assert.ok(b.d <= SOS_TOL, `percentile: ${b.cell} bound ${b.got} vs the CLI's ${b.cli}`);
    assert.deepEqual(errors, []);

    // The defaults (BCa, 0.95, B 1000, seed 0) against `culturelens sos --ci 0.95`.
    const bca = await openPage(browser, "?bundle=/bundles/demo/&backend=cpu&view=heatmap");
    await results(bca.page);
    await bca.page.waitForSelector("body[data-ci=ready]");
    cells = await heatmapIntervals(bca.page);
    assert.equal(cells[0].ci, "95% BCa bootstrap, 1000 resamples, seed 0, fast mode");
    const bcaBounds = intervalDifferences(cells, cliIntervals(0.95, 1000, 0), "BCa 0.95");
    const within = bcaBounds.filter((b) => b.d <= SOS_TOL).length;
    for (const b of bcaBounds) assert.ok(b.d <= BCA_JUMP, `BCa: ${b.cell} bound ${b.got} vs the CLI's ${b.cli}`);
    assert.ok(within >= 0.95 * bcaBounds.length, `BCa: ${within} of ${bcaBounds.length} bounds within ${SOS_TOL}`);
    const worst = (bounds) => Math.max(...bounds.map((b) => b.d));
    console.log(`heatmap intervals vs culturelens sos --ci (CPU page): percentile max abs ${worst(percentile).toExponential(2)}; ` +
      `BCa ${within}/${bcaBounds.length} within ${SOS_TOL}, max abs ${worst(bcaBounds).toExponential(2)}`);
    report.runs.push({ path: "heatmap intervals", percentile_max_abs: worst(percentile), bca_within_tol: within,
      bca_bounds: bcaBounds.length, bca_max_abs: worst(bcaBounds) });
    assert.deepEqual(bca.errors, []);
  } finally {
    await browser.close();
  }
});

/** The Vendi panel's intervals once computed: per score, its bounds and label (`data-lo`/`data-hi`/`data-ci`). */
async function vendiIntervals(page) {
  await page.waitForSelector("#vendi-table[data-ci=ready]");
  return page.evaluate(() => Object.fromEntries([["vs", "vendi-vs"], ["qvs", "vendi-qvs"], ["qvs_norm", "vendi-qvs-norm"]]
    .map(([k, id]) => { const d = document.getElementById(id).dataset; return [k, { lo: d.lo, hi: d.hi, ci: d.ci }]; })));
}

/** Each bound of the page's Vendi intervals against the CLI's `<score>_ci`: the relative differences. */
function vendiIntervalDifferences(got, want, label) {
  return ["vs", "qvs", "qvs_norm"].flatMap((k) => {
    assert.ok(want[`${k}_ci`], `${label}: the CLI wrote ${k}_ci`);
    assert.ok(got[k].lo !== undefined && got[k].hi !== undefined, `${label}: the page shows the interval of ${k}`);
    return ["lo", "hi"].map((b) => {
      const cli = want[`${k}_ci`][b];
      return { bound: `${label} ${k}_${b}`, got: got[k][b], cli, rel: Math.abs(Number(got[k][b]) - cli) / Math.abs(cli) };
    });
  });
}

// Vendi intervals against `culturelens vendi --ci`. The page re-runs the same Vendi computation on
// the same draws (the compute crate's `VendiStatistic`), in wasm, where faer's kernels sum in
// another order than the CLI's SIMD ones: each replicate differs from the CLI's in the last bits,
// like the point estimates (VENDI_TOL.cpu). A percentile bound interpolates two replicates, so it
// keeps that error. A BCa bound also counts the replicates below the estimate; Vendi replicates
// are continuous, so none lies within 1e-15 of the estimate here and BCa matches as closely
// (unlike the SoS heatmap's f32 scores). Both: VENDI_CI_TOL relative, about 3× the measured
// worst (1.4e-15 on the CPU page over these 12 bounds; logged below).
const VENDI_CI_TOL = 4e-15;

test("Vendi tooltips give the interval of `culturelens vendi --ci` for the same seed and B, computed without blocking the page", { timeout: TIMEOUT * 2 }, async () => {
  const browser = await launch(false);
  try {
    const table = ["--embeddings", tables.all.npy, "--meta", tables.all.csv];
    // Percentile at 0.9, B 40, seed 3 from the URL: the whole table (the CLI without --group-by).
    const { page, errors } = await openPage(browser, "?bundle=/bundles/demo/&backend=cpu&view=vendi&ci=0.9&bootstrap=40&seed=3&ci-method=percentile");
    await results(page);
    await viewDrawn(page, "vendi");
    const whole = await vendiIntervals(page);
    const bounds = vendiIntervalDifferences(whole, cliVendi("ci-whole", ...table, "--ci", "0.9", "--bootstrap", "40", "--seed", "3",
      "--ci-method", "percentile"), "percentile 0.9, whole table");
    assert.equal(whole.vs.ci, "90% percentile bootstrap, 40 resamples, seed 3, the subset's pictures resampled");
    const vs = await page.getAttribute("#vendi-vs", "data-value");
    assert.equal(await page.getAttribute("#vendi-vs", "title"), `VS_q ${vs} [${whole.vs.lo}, ${whole.vs.hi}], ${whole.vs.ci}`);
    // BCa at 0.95 (the control), on the `am` rows: the CLI's --group-by language group `am`.
    await page.goto(`${origin}/index.html?bundle=/bundles/demo/&backend=cpu&view=vendi&ci=0.9&bootstrap=40&seed=3`);
    await results(page);
    await viewDrawn(page, "vendi");
    await page.waitForSelector("#vendi-table[data-ci=ready]");
    await page.selectOption("#vendi-language", "am");
    await page.selectOption("#vendi-ci-level", "0.95");
    assert.match(await page.evaluate(() => location.search), /ci=0\.95/);
    await page.waitForFunction(() => document.querySelector("#vendi-vs")?.dataset.ci?.startsWith("95% BCa"));
    const am = await vendiIntervals(page);
    const byLanguage = cliVendi("ci-by-language", ...table, "--group-by", "language", "--ci", "0.95", "--bootstrap", "40", "--seed", "3");
    bounds.push(...vendiIntervalDifferences(am, byLanguage.am, "BCa 0.95, language am"));
    for (const b of bounds) assert.ok(b.rel <= VENDI_CI_TOL, `${b.bound}: page ${b.got} vs CLI ${b.cli} (relative ${b.rel})`);
    const worst = Math.max(...bounds.map((b) => b.rel));
    assert.deepEqual(errors, []);

    // The defaults (BCa, 0.95, B 1000) on the whole demo table: the page stays responsive — a click
    // on another tab is handled while the intervals are computing, with their progress on screen.
    const demo = await openPage(browser, "?bundle=/bundles/demo/&backend=cpu&view=vendi");
    await results(demo.page);
    await viewDrawn(demo.page, "vendi");
    await demo.page.waitForFunction(() => /^\d+\/\d+$/.test(document.querySelector("#vendi-table")?.dataset.ciProgress ?? ""));
    assert.match(await demo.page.textContent("#vendi-ci-progress"), /^Bootstrap intervals: \d+ of 3161 Vendi computations/);
    const clickedAt = Date.now();
    await demo.page.click("#tab-heatmap");
    await demo.page.waitForSelector("#view-heatmap:not([hidden])");
    const clickMs = Date.now() - clickedAt;
    assert.equal(await demo.page.getAttribute("#vendi-table", "data-ci"), "computing", "the click was handled while resampling");
    await demo.page.waitForSelector("#vendi-table[data-ci=ready]", { state: "attached" });
    const ms = Number(await demo.page.getAttribute("#vendi-table", "data-ci-ms"));
    console.log(`vendi intervals vs culturelens vendi --ci (CPU page): max relative ${worst.toExponential(2)} over ${bounds.length} bounds; ` +
      `demo (2160 × 64) BCa 0.95 with 1000 resamples: ${(ms / 1000).toFixed(1)} s in the page; a tab click handled in ${clickMs} ms meanwhile`);
    report.runs.push({ path: "vendi intervals", max_relative: worst, bounds: bounds.length, demo_bca_1000_ms: ms, click_ms: clickMs });
    assert.deepEqual(demo.errors, []);
  } finally {
    await browser.close();
  }
});

test("Result tables: MAGBIG bars, the NA matrix and the occupation slide equal the CLI's tables", { timeout: TIMEOUT * 2 }, async () => {
  const browser = await launch(false);
  try {
    const { page, errors } = await openView(browser, SIZES[0], "magbig");
    // MAGBIG: per model, one bar per CLI row in the figures' order (language, then set, by name),
    // with the CLI's numbers, the bar's top at MAD and the dashed tick at mad_random on the axis.
    const magbig = readCsvObjects(resultFiles.magbig);
    const models = [...new Set(magbig.map((r) => r.model))].sort();
    // One model selector per page: the header's, listing the MAGBIG table's models here.
    assert.deepEqual(await page.$$eval("select", (ss) => ss.filter((s) => /model/i.test(s.id) || /model/i.test(s.closest("label")?.textContent ?? ""))
      .map((s) => s.id)), ["model-select"]);
    assert.deepEqual(await page.$$eval("#model-select option", (os) => os.map((o) => o.value)), models);
    let bars = 0;
    for (const model of models) {
      await page.selectOption("#model-select", model);
      await page.waitForFunction((m) => document.querySelector("#magbig-svg .bar")?.dataset.model === m, model);
      assert.equal(new URL(page.url()).searchParams.get("rmodel"), model);
      const want = magbig.filter((r) => r.model === model)
        .sort((a, b) => a.language.localeCompare(b.language) || a.set.localeCompare(b.set))
        .map((r) => [r.language, r.set, r.n_prompts, r.n_images, r.mad, r.mad_random, r.male_share]);
      const drawn = await page.$$eval("#magbig-svg .bar", (els) => els.map((e) => {
        const [rect, base] = [e.querySelector("rect"), e.querySelector("line.baseline")];
        return { ...e.dataset, top: Number(rect.getAttribute("y")), bottom: Number(rect.getAttribute("y")) + Number(rect.getAttribute("height")),
          base: Number(base.getAttribute("y1")) };
      }));
      assert.deepEqual(drawn.map((d) => [d.language, d.set, d.nPrompts, d.nImages, d.mad, d.madRandom, d.maleShare]), want,
        `${model}: the bars are the CLI's rows`);
      const wantCi = magbig.filter((r) => r.model === model)
        .sort((a, b) => a.language.localeCompare(b.language) || a.set.localeCompare(b.set))
        .map((r) => [r.mad_lo, r.mad_hi, r.male_share_lo, r.male_share_hi].map((v) => v || undefined));
      assert.ok(wantCi.some((b) => b[0] !== undefined), `${model}: the table has intervals`);
      assert.deepEqual(drawn.map((d) => [d.madLo, d.madHi, d.maleShareLo, d.maleShareHi]), wantCi,
        `${model}: the bars carry the table's intervals`);
      const grid = await page.$$eval("#magbig-svg line.gridline", (ls) => ls.map((l) => [Number(l.dataset.value), Number(l.getAttribute("y1"))]));
      const [[v0, y0], [v1, y1]] = [grid[0], grid[grid.length - 1]];
      const y = (v) => y0 + (y1 - y0) * (v - v0) / (v1 - v0);
      for (const d of drawn) {
        assert.ok(Math.abs(d.top - y(Number(d.mad))) <= 0.02 && Math.abs(d.bottom - y0) <= 0.02, `${model} ${d.language} ${d.set}: bar at MAD`);
        assert.ok(Math.abs(d.base - y(Number(d.madRandom))) <= 0.02, `${model} ${d.language} ${d.set}: tick at mad_random`);
      }
      const table = await page.$$eval("#magbig-table tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((c) => c.dataset.value ?? c.textContent)));
      assert.deepEqual(table, want, `${model}: the numbers table is the CLI's rows`);
      bars += drawn.length;
    }
    // Keyboard: the bars are in the tab order, and a focused bar shows its numbers.
    await page.focus("#magbig-svg .bar >> nth=-1");
    assert.equal(await page.getAttribute("#magbig-svg .bar >> nth=-1", "tabindex"), "0", "the bars are in the tab order");
    assert.equal(await page.evaluate(() => document.activeElement.classList.contains("bar")), true, "a bar takes the focus");
    assert.ok(await page.isVisible("#tooltip"));
    assert.match(await page.textContent("#tooltip"), /^\w+, \w+: MAD \d\.\d{3} \(fair coin \d\.\d{3}\), male share/);
    assert.match(await page.textContent("#tooltip"),
      /; bootstrap intervals \(magbig --ci\): MAD (\[\d\.\d{3}, \d\.\d{3}\]|undefined), male share (\[\d\.\d{3}, \d\.\d{3}\]|undefined)$/);

    // CulText2I: per model, the report's confusion counts as row shares, its accuracy, and the
    // CLI table's rows.
    const na = JSON.parse(fs.readFileSync(resultFiles.report, "utf8"));
    const cultext2i = readCsvObjects(resultFiles.cultext2i);
    const names = na.nationalities, k = names.length;
    await page.click("#tab-cultext2i");
    for (const model of Object.keys(na.confusion).sort()) {
      await page.selectOption("#model-select", model);
      await page.waitForFunction((m) => document.querySelector("#cultext2i-table tbody tr")?.dataset.model === m, model);
      const { counts, accuracy } = na.confusion[model];
      const cells = await page.$$eval("#cultext2i-svg .na", (els) => els.map((e) => ({ ...e.dataset })));
      assert.equal(cells.length, k * k);
      cells.forEach((c, i) => {
        const [t, p] = [Math.floor(i / k), i % k];
        const total = counts[t].reduce((a, b) => a + b, 0);
        assert.deepEqual([c.true, c.predicted, Number(c.count), Number(c.share)], [names[t], names[p], counts[t][p], counts[t][p] / total],
          `${model}: ${names[t]} → ${names[p]}`);
      });
      const shown = (await page.textContent("#cultext2i-accuracy")).match(/^(.+): accuracy (\d\.\d\d)$/);
      assert.ok(shown && shown[1] === model && Math.abs(Number(shown[2]) - accuracy) <= 0.005 + 1e-12, `${model}: accuracy ${accuracy}`);
      const rows = await page.$$eval("#cultext2i-table tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((c) => c.dataset.value ?? c.textContent)));
      const columns = Object.keys(cultext2i[0]).filter((c) => c !== "model");
      const want = cultext2i.filter((r) => r.model === model).map((r) => columns.map((c) => r[c]));
      assert.deepEqual(rows.map((r) => r.map((v, i) => (i < 4 ? v : Number(v)))), want.map((r) => r.map((v, i) => (i < 4 ? v : Number(v)))),
        `${model}: the table is the CLI's rows`);
    }

    // The occupation slide: counts and male share per language against `culturelens magbig` on
    // the occupation's images, through a prompt without any face and the keys (←/→ occupation,
    // ↓ set, m model).
    await page.goto(`${origin}/index.html?bundle=/bundles/thumbs/&backend=cpu&view=educator&slide=gender&rmodel=mf-synth&set=indirect&occupation=teacher`);
    await results(page);
    await page.waitForSelector(".gender-card");
    let cards = await checkOccupationSlide(page);
    assert.equal(await page.textContent(".gender-card[data-language=ja] .edu-share"), "no face found");
    const url = () => new URL(page.url()).searchParams;
    for (const [key, param, next] of [["ArrowRight", "occupation", "nurse"], ["ArrowDown", "set", "direct"], ["m", "rmodel", "sd-synth"]]) {
      await page.keyboard.press(key);
      assert.equal(url().get(param), next, `${key} moves the ${param}`);
      cards += await checkOccupationSlide(page);
    }
    // The slide chooser switches back to the SoS slide.
    await page.selectOption("#edu-slide", "");
    await page.waitForSelector(".edu-card:not(.gender-card)");
    assert.equal(url().get("slide"), null);
    assert.deepEqual(errors, []);
    report.runs.push({ path: "results", magbigBars: bars, occupationCards: cards });
  } finally {
    await browser.close();
  }
});

test("Presentation mode: F enters (fullscreen, chrome hidden, slide in the URL), keys navigate, Esc leaves", { timeout: TIMEOUT * 2 }, async () => {
  const browser = await launch(false);
  try {
    const { page, errors } = await openPage(browser, null, { viewport: SIZES[0] });
    await page.addInitScript(() => {
      window.__fullscreenCalls = 0;
      const request = Element.prototype.requestFullscreen;
      Element.prototype.requestFullscreen = function (...a) { window.__fullscreenCalls++; return request.apply(this, a); };
    });
    await page.goto(`${origin}/index.html?bundle=/bundles/thumbs/&backend=cpu&view=heatmap`);
    await results(page);
    await page.keyboard.press("f");
    await page.waitForSelector("body[data-present=true]");
    const url = () => new URL(page.url()).searchParams;
    assert.equal(url().get("present"), "1");
    assert.equal(url().get("view"), "educator");
    assert.equal(await page.evaluate(() => window.__fullscreenCalls), 1, "the Fullscreen API is asked");
    for (const chrome of ["#chrome", "#bar", "#tabs", "#side", ".edu-controls"]) {
      assert.equal(await page.isVisible(chrome), false, `${chrome} hidden while presenting`);
    }
    const slide = await placement(page, "#view-educator [data-figure]");
    assert.ok(slide.y >= 0 && slide.bottom <= slide.vh + 0.5 && slide.right <= slide.vw + 0.5, `the slide fits: ${JSON.stringify(slide)}`);
    assert.equal(await page.$$eval(".edu-card", (els) => els.length), 8, "every language side by side");
    assert.ok(await page.$$eval(".edu-card img", (els) => els.length) >= 8, "with its images");
    const title = async () => page.textContent(".edu-title");
    const [culture0, person0, title0] = [url().get("culture"), url().get("person"), await title()];
    await page.keyboard.press("ArrowRight");
    assert.notEqual(url().get("culture"), culture0, "→ moves the culture");
    assert.notEqual(await title(), title0);
    await page.keyboard.press("ArrowLeft");
    assert.equal(url().get("culture"), culture0, "← moves it back");
    await page.keyboard.press("ArrowDown");
    assert.notEqual(url().get("person"), person0, "↓ moves the person term");
    const bookmark = page.url();
    if (SCREENS) await page.screenshot({ path: path.join(SCREENS, "presentation-1280x720.png") });
    await page.keyboard.press("Escape");
    await page.waitForSelector("body[data-present=false]");
    assert.equal(url().get("present"), null, "Esc leaves presentation mode");
    assert.ok(await page.isVisible("#tabs"), "the chrome is back");
    // The bookmarked slide opens as it was.
    await page.goto(bookmark);
    await results(page);
    await page.waitForSelector("body[data-present=true]");
    assert.equal(url().get("person"), new URL(bookmark).searchParams.get("person"));
    assert.equal(await page.isVisible("#tabs"), false);
    assert.deepEqual(await axeViolations(page), [], "presentation mode: axe-core serious/critical violations");
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test("Bundles whose manifest lies about sizes get an on-screen error, and the tab stays responsive", { timeout: TIMEOUT }, async () => {
  const browser = await launch(false);
  try {
    for (const [name, message] of [
      ["lies", /meta\.csv.*has \d+ bytes but the manifest lists 10\d{8} \(truncated or replaced file\)/],
      ["huge", /bundle too large for the browser: embeddings \+ metadata are 9536\.\d MiB \(limit 1536\.0 MiB\)/],
    ]) {
      const bad = await openPage(browser, `?bundle=/bundles/${name}/&backend=cpu`);
      const t0 = Date.now();
      await bad.page.waitForSelector("body[data-state=error]", { timeout: 60000 });
      assert.match(await bad.page.textContent("#error"), message);
      assert.ok(await bad.page.isVisible("#error"));
      // Responsive: the page answers at once and the loader still works.
      assert.equal(await bad.page.evaluate(() => 1 + 1), 2);
      assert.ok(await bad.page.isVisible("#load-demo"));
      report.runs.push({ path: `bad bundle ${name}`, errorAfterMs: Date.now() - t0 });
      await bad.page.close();
    }
  } finally {
    await browser.close();
  }
});

// The app's module needs WebAssembly SIMD (web/.cargo/config.toml). A browser without it is told
// so on the page instead of getting a page that never starts: index.html's check, here made to
// fail by a WebAssembly.validate that refuses every module; unchanged, it passes and says nothing.
test("A browser without WebAssembly SIMD is told why the app cannot run", { timeout: TIMEOUT }, async () => {
  const browser = await launch(false);
  try {
    const old = await browser.newPage();
    await old.addInitScript(() => { WebAssembly.validate = () => false; });
    await old.goto(`${origin}/index.html`);
    await old.waitForSelector("body[data-state=unsupported]", { timeout: 30000 });
    assert.ok(await old.isVisible("#error"));
    assert.match(await old.textContent("#error"),
      /^This browser cannot run culturelens: the app needs WebAssembly with SIMD \(Chrome or Edge 91 or later, Firefox 89 or later, Safari 16\.4 or later\)\.$/);
    const current = await browser.newPage();
    await current.goto(`${origin}/index.html`, { waitUntil: "load" });
    assert.equal(await current.getAttribute("body", "data-state"), "idle");
    assert.ok(!(await current.isVisible("#error")));
  } finally {
    await browser.close();
  }
});

/** splitmix64 (Steele, Lea & Flood), the generator of scripts/fixtures/make_vendi_wide.py's table. */
function splitmix64(x) {
  const M = (1n << 64n) - 1n;
  x = (x + 0x9E3779B97F4A7C15n) & M;
  x = ((x ^ (x >> 30n)) * 0xBF58476D1CE4E5B9n) & M;
  x = ((x ^ (x >> 27n)) * 0x94D049BB133111EBn) & M;
  return x ^ (x >> 31n);
}

// The Vendi panel at a real embedding width (d = 768, N = 900 in 20 clusters: its eigenvalues
// come from the two-stage solver, order ≥ 512) against vendi-score's `score_dual` (q = 1,
// tests/fixtures/vendi/wide.json); the table is rebuilt here from the script's formula, bundled by
// the CLI and opened on the CPU backend. Bound: about 3× the measured 2.6e-15 (relative; the
// CLI's: 2.7e-15).
test("An f16 bundle (decoded while it downloads) gives `culturelens sos --bundle` of the same bundle, CPU fallback", { timeout: TIMEOUT * 2 }, async () => {
  const dir = path.join(work, "bundles", "demo-f16");
  cli("bundle", "--embeddings", tables.all.npy, "--meta", tables.all.csv, "--dtype", "f16", "--title", "demo in f16",
    "--synthetic", "--out", dir);
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, "manifest.json"), "utf8"));
  assert.equal(manifest.dtype, "f16");
  const out = path.join(work, "demo-f16-sos.csv");
  cli("sos", "--bundle", dir, "--out", out);
  const cliF16 = readCsv(out);
  const browser = await launch(false);
  try {
    const { page, errors } = await openPage(browser, "?bundle=/bundles/demo-f16/&backend=cpu", { disableWebGpu: true });
    const rows = await results(page);
    const worst = assertSameScores(rows, cliF16, "f16 bundle on CPU");
    // f16 rounds every value (11 significant bits): the scores move, but by far less than a cell's spread.
    let moved = 0;
    const f32 = new Map(cliRows.map((r) => [key(r), r.sos]));
    for (const r of rows) moved = Math.max(moved, Math.abs(r.sos - f32.get(key(r))));
    assert.ok(moved > 0 && moved < 1e-3, `f16 vs f32 bundle: max |SoS difference| ${moved}`);
    report.runs.push({ bundle: "demo f16", backend: "cpu", maxDiffVsCli: worst, maxDiffVsF32: moved });
    assert.deepEqual(errors, []);
    // A manifest that lists a 1.4 GB f16 table (within the page's limit) for the small file: the
    // values decoded as it arrives reserve memory only as the bytes come, as the bytes do, so the
    // page names the short file and stays responsive.
    const lies = path.join(work, "bundles", "demo-f16-lies");
    fs.cpSync(dir, lies, { recursive: true });
    const m = JSON.parse(fs.readFileSync(path.join(lies, "manifest.json"), "utf8"));
    m.rows = Math.floor(1.4e9 / (m.dim * 2));
    m.files.find((f) => f.path === m.embeddings).bytes = m.rows * m.dim * 2;
    fs.writeFileSync(path.join(lies, "manifest.json"), JSON.stringify(m));
    const bad = await openPage(browser, "?bundle=/bundles/demo-f16-lies/&backend=cpu", { disableWebGpu: true });
    await bad.page.waitForSelector("body[data-state=error]", { timeout: 60000 });
    assert.match(await bad.page.textContent("#error"), /embeddings\.f16.*has \d+ bytes but the manifest lists \d{10}/);
    assert.equal(await bad.page.evaluate(() => 1 + 1), 2);
  } finally {
    await browser.close();
  }
});

test("Vendi at width 768 (two-stage eigensolver) equals vendi-score's, CPU panel", { timeout: TIMEOUT * 2 }, async () => {
  const fixture = JSON.parse(fs.readFileSync(path.join(repo, "tests/fixtures/vendi/wide.json"), "utf8"));
  const { n, d, clusters } = fixture;
  const h = (stream, k) => Number(splitmix64((7n << 56n) | (BigInt(stream) << 48n) | BigInt(k)) >> 11n) / 2 ** 53;
  const body = Buffer.alloc(n * d * 4);
  let checksum = 0;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < d; j++) {
      const v = Math.fround(2 * (h(1, (i % clusters) * d + j) - 0.5) + (h(2, i * d + j) - 0.5));
      body.writeFloatLE(v, (i * d + j) * 4);
      checksum += v;
    }
  }
  assert.ok(Math.abs(checksum - fixture.x_checksum) < 1e-6, `the table: ${checksum} vs ${fixture.x_checksum}`);
  const npy = path.join(work, "wide.npy"), meta = path.join(work, "wide.csv");
  writeNpy(npy, n, d, body);
  const rows = Array.from({ length: n }, (_, i) => `m,${["en", "de"][i % 2]},c${i % clusters}`);
  fs.writeFileSync(meta, ["model,language,culture", ...rows].join("\n") + "\n");
  cli("bundle", "--embeddings", npy, "--meta", meta, "--title", "vendi width 768", "--out", path.join(work, "bundles", "wide"));
  const browser = await launch(false);
  try {
    const { page, errors } = await openPage(browser, "?bundle=/bundles/wide/&backend=cpu", { disableWebGpu: true });
    await results(page);
    await page.click("#tab-vendi");
    await page.waitForFunction(() => document.querySelector("#vendi-vs")?.textContent !== "–");
    const got = await vendiAfter(page, () => page.selectOption("#vendi-quality", ""));
    const want = fixture.dual["1"];
    const rel = Math.abs(got.vs - want) / want;
    report.runs.push({ bundle: "wide", backend: "cpu", vendiWidth768RelDiff: rel });
    assert.equal(got.n, n);
    assert.ok(rel <= 8e-15, `VS ${got.vs} vs vendi-score's ${want}: relative ${rel}`);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});
