// The classroom lens (web/src/views/classroom.rs, web/src/encoder.rs) in headless Chromium, against
// the CLI, on the CPU backend and on WebGPU (SwiftShader): the page loads the tiny random-weight
// CLIP and SigLIP folders of tests/fixtures/encoders from the test server (`?encoder=`), embeds
// typed sentences and dropped photos (PNG, greyscale, RGBA, JPEG, WebP), and
// - its text and image embeddings equal `culturelens embed-text` / `culturelens embed` on the same
//   folder and inputs (max |page − CLI| ≤ EMB_TOL, f32);
// - the views' SoS (`#sos-results`) equals `culturelens sos` on the CLI's embedding table
//   (≤ SOS_TOL): the text-side SoS of the sentences, and the SoS of the photos;
// - a reload loads the model from the browser's cache: the server sees no second download of
//   model.safetensors (nor a ranged read of it);
// - a broken folder (an HTML page saved as model.safetensors), an unsupported model (a BERT
//   config) and an oversized one (a header declaring a 4 GiB tensor; refused from its header
//   alone, before any download of the weights) end in an error on the page, and the tab stays
//   responsive;
// - axe-core finds no serious or critical violation on the lens at 1280 and 375 px;
// - photos added to an opened bundle of the same model (`?bundle=`, "add them to the opened
//   bundle"): the views' SoS and Vendi equal `culturelens sos` / `culturelens vendi` on the combined
//   table (the bundle's rows, then the photos' rows as `culturelens embed` embeds them);
// - a link with `encoder` and `sentences` (the URL the lens keeps) shows the sentences' scores on
//   opening, equal to the CLI's;
// - in f16 (`?precision=f16` on the CPU backend, Burn's flex f16 kernels) the text and photo
//   embeddings of CLIP and SigLIP stay within F16_TEXT_TOL / F16_IMAGE_TOL of the CLI's f32 ones
//   (the CLI computes f16 on a GPU only), show f16's rounding, and the size check before the
//   download counts half the bytes; `?precision=auto` on SwiftShader (no shader-f16) runs in f32,
//   equal to the CLI's, and f16 asked for there runs in f32 with a notice on the page;
// - on a phone (375 px) the heatmap's cells show colour only, and a tap shows the cell's value
//   (the page's SoS, which the tests above check against the CLI);
// - the prompt index the app ships (dist/prompt-index.json) holds rows of `culturelens prompts
//   export` only, and no prompt of the sets that may not be shipped (SoS, CUBE); picking a meaning
//   fills the sentence box (and the URL) with its prompts in all their languages, and before any
//   model is loaded the lens counts their tokens with CLIP's shipped tokenizer.
//
// Environment: CULTURELENS_BIN, CHROMIUM, WEB_DIST as for app.test.mjs; CULTURELENS_WEB_ALLOW_NO_WEBGPU=1
// skips the WebGPU runs (loudly) where Chromium offers no adapter.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { serve } from "./server.mjs";
import { csvFields, csvRecords } from "./csv.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");
const BIN = process.env.CULTURELENS_BIN || path.join(repo, "target/debug/culturelens");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const DIST = process.env.WEB_DIST || path.join(repo, "web/dist");
const TIMEOUT = Number(process.env.WEB_TEST_TIMEOUT_MS || 300000);
const AXE = fs.readFileSync(path.join(here, "node_modules/axe-core/axe.min.js"), "utf8");
const BASE_FLAGS = ["--headless", "--no-sandbox", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"];
const WEBGPU_FLAGS = ["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader"];
const ENCODERS = path.join(repo, "tests/fixtures/encoders");
const MIRROR = process.env.CULTURELENS_DATA_MIRROR || path.join(repo, "../shared/data/upstream");
// Page vs CLI, max abs over every embedding value (f32 both; the page's batches are the CLI's).
// Measured (2026-11-28): CPU ≤ 6.2e-7 (the CLI's own CPU passes, one GEMM per linear layer over
// the whole batch, sum in another order than the page's flex graph), WebGPU/SwiftShader ≤ 1e-6
// (printed by the test).
const EMB_TOL = 1e-5;
// SoS: page vs CLI, max abs.
const SOS_TOL = 1e-5;
// The page in f16 (CPU, flex) vs the CLI in f32, max abs over every embedding value: about 2× the
// measured (CLIP text 1.7e-3, photos 8.4e-4; SigLIP text 2.3e-3, photos 8.1e-4; printed by the test).
const F16_TEXT_TOL = 4e-3;
const F16_IMAGE_TOL = 2e-3;
// Sentences: two cultures in three languages, twice each (12 rows).
const SENTENCES = [
  ["en", "Japan", "a photo of a Japanese woman"], ["de", "Japan", "ein Foto einer japanischen Frau"],
  ["es", "Japan", "una foto de una mujer japonesa"], ["en", "Nigeria", "a photo of a Nigerian woman"],
  ["de", "Nigeria", "ein Foto einer nigerianischen Frau"], ["es", "Nigeria", "una foto de una mujer nigeriana"],
  ["en", "Japan", "a Japanese teacher in a classroom"], ["de", "Japan", "eine japanische Lehrerin im Klassenzimmer"],
  ["es", "Japan", "una maestra japonesa en un aula"], ["en", "Nigeria", "a Nigerian teacher in a classroom"],
  ["de", "Nigeria", "eine nigerianische Lehrerin im Klassenzimmer"], ["es", "Nigeria", "una maestra nigeriana en un aula"],
];
// Photos of every kind the CLI reads, labelled by a CSV.
const PHOTOS = [
  ["a_rgb.png", "en", "Japan"], ["b_grey.png", "de", "Japan"], ["c_rgba.png", "en", "Nigeria"],
  ["d_photo.jpg", "de", "Nigeria"], ["e_lossless.webp", "en", "Japan"], ["d_photo.jpg", "de", "Japan"],
];

let server, origin, work;

before(async () => {
  assert.ok(fs.existsSync(BIN), `${BIN} missing: cargo build -p culturelens`);
  assert.ok(fs.existsSync(path.join(DIST, "index.html")), `${DIST} missing: web/ci.sh builds it`);
  work = fs.mkdtempSync(path.join(os.tmpdir(), "culturelens-classroom-"));
  makeBadFolders(path.join(work, "bad"));
  makeTamperedMirror(path.join(work, "tampered"));
  server = await serve({ "/encoders/": ENCODERS, "/bad/": path.join(work, "bad"), "/upstream/": MIRROR,
    "/tampered/": path.join(work, "tampered"), "/": DIST });
  origin = `http://127.0.0.1:${server.address().port}`;
});

after(async () => {
  server?.close();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

/** A mirror whose SoS and CUBE files each have one byte changed (their sha256 no longer the pinned one). */
function makeTamperedMirror(dir) {
  for (const f of ["Surface-Over-Semantics/full_dataset.csv", "cube/cube_1k.json"]) {
    const bytes = fs.readFileSync(path.join(MIRROR, f));
    const i = bytes.indexOf("a");
    bytes[i] = "b".charCodeAt(0);
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    fs.writeFileSync(path.join(dir, f), bytes);
  }
}

/** Folders the page must refuse, each with a reason it must name. */
function makeBadFolders(dir) {
  const clip = path.join(ENCODERS, "clip");
  const copy = (name, files) => {
    fs.mkdirSync(path.join(dir, name), { recursive: true });
    for (const f of ["config.json", "preprocessor_config.json", "tokenizer.json"]) {
      fs.copyFileSync(path.join(clip, f), path.join(dir, name, f));
    }
    for (const [f, bytes] of Object.entries(files)) fs.writeFileSync(path.join(dir, name, f), bytes);
  };
  // A wrong file: an HTML page saved under the weights' name.
  copy("html", { "model.safetensors": "<!DOCTYPE html><html><body>Not found</body></html>" });
  // Unsupported: a BERT config.
  copy("bert", { "config.json": JSON.stringify({ model_type: "bert", hidden_size: 8 }) });
  // Oversized: a header declaring a 1,048,576 × 1024 f32 tensor (4 GiB), with no data behind it.
  const header = JSON.stringify({ "text_model.embeddings.token_embedding.weight":
    { dtype: "F32", shape: [1048576, 1024], data_offsets: [0, 4294967296] } });
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(header.length));
  copy("huge", { "model.safetensors": Buffer.concat([len, Buffer.from(header)]) });
}

function cli(...args) {
  return execFileSync(BIN, args, { encoding: "utf8" });
}

/** A float32 `.npy` as rows. */
function readNpy(file) {
  const b = fs.readFileSync(file);
  const headerLen = b.readUInt16LE(8);
  const header = b.subarray(10, 10 + headerLen).toString("latin1");
  assert.match(header, /'descr': '<f4'/);
  const [rows, dim] = /'shape': \((\d+), (\d+)\)/.exec(header).slice(1).map(Number);
  const data = new Float32Array(b.buffer.slice(b.byteOffset + 10 + headerLen, b.byteOffset + b.length));
  return Array.from({ length: rows }, (_, i) => Array.from(data.subarray(i * dim, (i + 1) * dim)));
}

function readSos(file) {
  const [header, ...lines] = fs.readFileSync(file, "utf8").trim().split("\n").map(csvFields);
  const col = (n) => header.indexOf(n);
  return lines.map((f) => ({ model: f[col("model")], language: f[col("language")], culture: f[col("culture")],
    n: Number(f[col("n")]), sos: Number(f[col("sos")]) }));
}

/** `culturelens embed-text` and `culturelens sos` on the sentences, with the folder `model`. */
function cliText(model) {
  const csv = path.join(work, `${model}-sentences.csv`);
  fs.writeFileSync(csv, "model,language,culture,prompt\n" +
    SENTENCES.map(([l, c, s]) => `${model},${l},${c},"${s}"`).join("\n") + "\n");
  const out = path.join(work, `${model}-text.npy`);
  cli("embed-text", "--weights", path.join(ENCODERS, model), "--prompts", csv, "--out", out);
  const sos = path.join(work, `${model}-text-sos.csv`);
  cli("sos", "--embeddings", out, "--meta", out.replace(/\.npy$/, ".csv"), "--out", sos);
  return { rows: readNpy(out), sos: readSos(sos) };
}

/** `culturelens embed` and `culturelens sos` on the photos. */
function cliPhotos(model) {
  const csv = path.join(work, `${model}-photos.csv`);
  fs.writeFileSync(csv, "image,model,language,culture\n" +
    PHOTOS.map(([f, l, c]) => `${path.join(ENCODERS, "images", f)},${model},${l},${c}`).join("\n") + "\n");
  const out = path.join(work, `${model}-photos.npy`);
  cli("embed", "--weights", path.join(ENCODERS, model), "--images", csv, "--out", out);
  const sos = path.join(work, `${model}-photos-sos.csv`);
  cli("sos", "--embeddings", out, "--meta", out.replace(/\.npy$/, ".csv"), "--out", sos);
  return { rows: readNpy(out), sos: readSos(sos) };
}

function maxDiff(a, b, label) {
  assert.equal(a.length, b.length, `${label}: rows`);
  let worst = 0;
  a.forEach((row, i) => {
    assert.equal(row.length, b[i].length, `${label}: row ${i} width`);
    row.forEach((v, j) => { worst = Math.max(worst, Math.abs(v - b[i][j])); });
  });
  return worst;
}

function assertSameSos(page, cliRows, label) {
  const key = (r) => `${r.model}|${r.language}|${r.culture}`;
  assert.equal(page.length, cliRows.length, `${label}: SoS rows`);
  const want = new Map(cliRows.map((r) => [key(r), r]));
  let worst = 0;
  for (const r of page) {
    const e = want.get(key(r));
    assert.ok(e, `${label}: unexpected SoS row ${key(r)}`);
    assert.equal(r.n, e.n, `${label}: n of ${key(r)}`);
    worst = Math.max(worst, Math.abs(r.sos - e.sos));
  }
  assert.ok(worst <= SOS_TOL, `${label}: max |page − CLI| SoS = ${worst}`);
  return worst;
}

async function launch(webgpu) {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: webgpu ? [...BASE_FLAGS, ...WEBGPU_FLAGS] : BASE_FLAGS });
}

async function openPage(browser, query, viewport = { width: 1280, height: 900 }) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  // The lens probes optional files of a folder (tokenizer.json, spiece.model, …): Chromium logs
  // each 404 as a console error, which is no error of the page.
  page.on("console", (m) => {
    if (m.type() === "error" && !/Failed to load resource: .*404/.test(m.text())) errors.push(m.text());
  });
  await page.goto(`${origin}/index.html${query}`);
  return { page, context, errors };
}

async function waitLens(page) {
  await page.waitForFunction(() => {
    const s = document.getElementById("view-classroom").dataset.state;
    return s === "ready" || s === "error";
  });
  const state = await page.getAttribute("#view-classroom", "data-state");
  if (state === "error") throw new Error(`lens error: ${await page.textContent("#lens-errors")}`);
}

async function embedText(page) {
  await page.fill("#lens-sentences", SENTENCES.map((r) => r.join(", ")).join("\n"));
  await page.evaluate(() => { document.body.dataset.state = "idle"; });
  await page.click("#lens-embed-text");
  await page.waitForFunction(() => document.body.dataset.state === "ready" || document.body.dataset.state === "error");
  await waitLens(page);
  assert.equal(await page.getAttribute("body", "data-state"), "ready", await page.textContent("#error"));
  return {
    rows: JSON.parse(await page.textContent("#lens-embeddings")),
    sos: JSON.parse(await page.textContent("#sos-results")),
  };
}

async function embedPhotos(page) {
  await page.setInputFiles("#lens-photos", PHOTOS.map(([f]) => ({ name: f, mimeType: "application/octet-stream",
    buffer: fs.readFileSync(path.join(ENCODERS, "images", f)) })).filter((f, i, all) => all.findIndex((g) => g.name === f.name) === i));
  // The duplicate photo (same file, another label) is added again by a second pick.
  await page.setInputFiles("#lens-photos", [{ name: "d_photo.jpg", mimeType: "image/jpeg",
    buffer: fs.readFileSync(path.join(ENCODERS, "images", "d_photo.jpg")) }]);
  // Labels: the CSV for the first five, typed for the last.
  await page.setInputFiles("#lens-labels", { name: "labels.csv", mimeType: "text/csv",
    buffer: Buffer.from("image,language,culture\n" + PHOTOS.slice(0, 5).map((p) => p.join(",")).join("\n") + "\n") });
  await page.waitForFunction(() => document.querySelector("#lens-photo-rows input[data-photo='0']")?.value === "en");
  await page.fill("#lens-photo-rows input[data-photo='5'][data-field='language']", "de");
  await page.fill("#lens-photo-rows input[data-photo='5'][data-field='culture']", "Japan");
  await page.dispatchEvent("#lens-photo-rows input[data-photo='5'][data-field='culture']", "change");
  await page.dispatchEvent("#lens-photo-rows input[data-photo='5'][data-field='language']", "change");
  await page.evaluate(() => { document.body.dataset.state = "idle"; });
  await page.click("#lens-embed-photos");
  await page.waitForFunction(() => document.body.dataset.state === "ready" || document.body.dataset.state === "error");
  await waitLens(page);
  assert.equal(await page.getAttribute("body", "data-state"), "ready", await page.textContent("#error"));
  return {
    rows: JSON.parse(await page.textContent("#lens-embeddings")),
    sos: JSON.parse(await page.textContent("#sos-results")),
  };
}

const requestsFor = (suffix) => server.requests.filter((r) => r.path.endsWith(suffix));

for (const backend of ["cpu", "webgpu"]) {
  test(`classroom lens on ${backend}: CLIP and SigLIP text and photo embeddings and SoS equal the CLI's; a reload reads the cache`, { timeout: TIMEOUT * 4 }, async (t) => {
    const browser = await launch(backend === "webgpu");
    try {
      for (const model of ["clip", "siglip"]) {
        const weights = `/encoders/${model}/model.safetensors`;
        const before = requestsFor(weights).length;
        const { page, context, errors } = await openPage(browser, `?lens=classroom&backend=${backend}&encoder=encoders/${model}/`);
        await waitLens(page);
        const got = await page.getAttribute("body", "data-backend");
        if (got !== backend) {
          assert.ok(backend === "webgpu" && process.env.CULTURELENS_WEB_ALLOW_NO_WEBGPU === "1",
            `asked for ${backend}, the page runs on ${got}`);
          t.skip("no WebGPU adapter in this Chromium");
          await context.close();
          return;
        }
        assert.equal(await page.getAttribute("body", "data-encoder"), model);
        const downloads = requestsFor(weights).slice(before);
        assert.ok(downloads.some((r) => r.range === null), `${model}: the weights were downloaded once`);
        assert.ok(downloads.some((r) => r.range === "bytes=0-7"), `${model}: the header was read first`);

        const text = await embedText(page);
        const cliT = cliText(model);
        const textDiff = maxDiff(text.rows, cliT.rows, `${model} text`);
        assert.ok(textDiff <= EMB_TOL, `${model} text embeddings: max |page − CLI| = ${textDiff}`);
        const textSos = assertSameSos(text.sos, cliT.sos, `${model} text SoS`);
        // The tokenizer lens shows the encoder's tokens of the first sentence.
        assert.equal(await page.inputValue("#tokens-text"), SENTENCES[0][2]);
        assert.ok(await page.$(`#tokens-rows .tok-row[data-tokenizer='${model}']`), `${model}: a tokenizer row`);

        const photos = await embedPhotos(page);
        const cliP = cliPhotos(model);
        const photoDiff = maxDiff(photos.rows, cliP.rows, `${model} photos`);
        assert.ok(photoDiff <= EMB_TOL, `${model} photo embeddings: max |page − CLI| = ${photoDiff}`);
        const photoSos = assertSameSos(photos.sos, cliP.sos, `${model} photo SoS`);
        console.log(`# ${backend} ${model}: text ${textDiff.toExponential(2)}, photos ${photoDiff.toExponential(2)}, ` +
          `SoS text ${textSos.toExponential(2)}, photos ${photoSos.toExponential(2)}`);

        // A reload: the model comes from the browser's cache, nothing of the weights is fetched.
        const beforeReload = requestsFor(weights).length;
        await page.reload();
        await waitLens(page);
        assert.equal(requestsFor(weights).length, beforeReload, `${model}: the reload fetched the weights again`);
        assert.notEqual(await page.getAttribute("body", "data-encoder-cached"), "0");
        assert.match(await page.textContent("#enc-status"), /from the browser's cache/);
        assert.deepEqual(errors, []);
        await context.close();
      }
    } finally {
      await browser.close();
    }
  });
}

test("classroom lens in f16 on the CPU: CLIP and SigLIP embeddings within the f16 bound of the CLI's f32; the size check counts 2 bytes a weight", { timeout: TIMEOUT * 4 }, async () => {
  const browser = await launch(false);
  try {
    for (const model of ["clip", "siglip"]) {
      const open = async (precision) => {
        const opened = await openPage(browser, `?lens=classroom&backend=cpu&precision=${precision}&encoder=encoders/${model}/`);
        await waitLens(opened.page);
        assert.equal(await opened.page.getAttribute("body", "data-encoder-precision"), precision);
        return opened;
      };
      const f32 = await open("f32");
      const needs32 = Number(await f32.page.getAttribute("body", "data-encoder-needs"));
      await f32.context.close();
      const { page, context, errors } = await open("f16");
      assert.equal(await page.getAttribute("body", "data-backend"), "cpu");
      assert.match(await page.textContent("#enc-status"), / in f16,/);
      const needs16 = Number(await page.getAttribute("body", "data-encoder-needs"));
      assert.ok(needs32 > 0 && needs16 * 2 === needs32, `${model}: device bytes f16 ${needs16}, f32 ${needs32}`);

      const text = await embedText(page);
      const textDiff = maxDiff(text.rows, cliText(model).rows, `${model} f16 text`);
      const photos = await embedPhotos(page);
      const photoDiff = maxDiff(photos.rows, cliPhotos(model).rows, `${model} f16 photos`);
      console.log(`# cpu f16 ${model}: max |page f16 − CLI f32| text ${textDiff.toExponential(2)} ` +
        `(bound ${F16_TEXT_TOL}), photos ${photoDiff.toExponential(2)} (bound ${F16_IMAGE_TOL})`);
      assert.ok(textDiff <= F16_TEXT_TOL, `${model} f16 text embeddings: max |page − CLI| = ${textDiff}`);
      assert.ok(photoDiff <= F16_IMAGE_TOL, `${model} f16 photo embeddings: max |page − CLI| = ${photoDiff}`);
      // f16's rounding shows: the page did compute in f16 (in f32 it equals the CLI exactly).
      assert.ok(textDiff > 1e-5 && photoDiff > 1e-5, `${model}: no f16 rounding (${textDiff}, ${photoDiff})`);
      assert.deepEqual(errors, []);
      await context.close();
    }
    // A precision the page does not know is an error naming it.
    const { page, context } = await openPage(browser, "?lens=classroom&backend=cpu&precision=f8&encoder=encoders/clip/");
    await page.waitForSelector("#view-classroom[data-state=error]");
    assert.match(await page.textContent("#lens-errors"), /precision=f8: expected f16, f32 or auto/);
    await context.close();
  } finally {
    await browser.close();
  }
});

test("classroom lens on SwiftShader (no shader-f16): auto runs in f32, equal to the CLI; f16 asked for runs in f32 with a notice", { timeout: TIMEOUT * 2 }, async (t) => {
  const browser = await launch(true);
  try {
    const { page, context, errors } = await openPage(browser, "?lens=classroom&backend=webgpu&encoder=encoders/clip/");
    await waitLens(page);
    if (await page.getAttribute("body", "data-backend") !== "webgpu") {
      assert.ok(process.env.CULTURELENS_WEB_ALLOW_NO_WEBGPU === "1", "no WebGPU adapter in this Chromium");
      t.skip("no WebGPU adapter in this Chromium");
      return;
    }
    const hasF16 = await page.evaluate(async () => (await navigator.gpu.requestAdapter()).features.has("shader-f16"));
    assert.equal(hasF16, false, "SwiftShader offers no shader-f16 (the premise of this test)");
    assert.equal(await page.inputValue("#enc-precision"), "auto");
    assert.equal(await page.getAttribute("body", "data-encoder-precision"), "f32");
    assert.match(await page.textContent("#enc-status"), / in f32,/);
    assert.equal((await page.textContent("#enc-notice")).trim(), "");
    const text = await embedText(page);
    const diff = maxDiff(text.rows, cliText("clip").rows, "auto text");
    console.log(`# webgpu auto (SwiftShader): f32, max |page − CLI| text ${diff.toExponential(2)}`);
    assert.ok(diff <= EMB_TOL, `auto on SwiftShader: max |page − CLI| = ${diff} (f32 expected)`);
    assert.deepEqual(errors, []);
    await context.close();

    const asked = await openPage(browser, "?lens=classroom&backend=webgpu&precision=f16&encoder=encoders/clip/");
    await waitLens(asked.page);
    assert.equal(await asked.page.getAttribute("body", "data-encoder-precision"), "f32");
    assert.equal(await asked.page.inputValue("#enc-precision"), "f16");
    assert.ok(await asked.page.isVisible("#enc-notice"));
    assert.match(await asked.page.textContent("#enc-notice"), /f16 was asked for .* has no shader-f16: the model runs in f32/);
    assert.deepEqual(asked.errors, []);
    await asked.context.close();
  } finally {
    await browser.close();
  }
});

test("classroom lens: a broken, unsupported or oversized folder is an error on the page; the tab stays responsive", { timeout: TIMEOUT * 2 }, async () => {
  const browser = await launch(true);
  try {
    const cases = [
      ["html", /model\.safetensors: a header of \d+ bytes: not a safetensors file/],
      ["bert", /config\.json: config\.json has model_type `bert`/],
      ["huge", /too big for this (GPU|page)/],
    ];
    for (const [name, message] of cases) {
      const before = server.requests.length;
      const { page, context } = await openPage(browser, `?lens=classroom&encoder=bad/${name}/`);
      await page.waitForSelector("#view-classroom[data-state=error]");
      assert.match(await page.textContent("#lens-errors"), message, name);
      const seen = server.requests.slice(before).filter((r) => r.path.endsWith("model.safetensors"));
      if (name === "huge") {
        assert.ok(seen.every((r) => r.range !== null), "huge: refused from its header, the weights were never downloaded");
      }
      // Responsive: the page answers, and typing still updates the URL (read from the page:
      // Playwright's page.url() learns of a replaceState only later, by an event).
      await page.fill("#lens-sentences", "en, Japan, still alive");
      const url = await page.evaluate(() => location.href);
      assert.equal(new URL(url).searchParams.get("sentences"), "en, Japan, still alive", name);
      assert.equal(await page.evaluate(() => 1 + 1), 2);
      await context.close();
    }
  } finally {
    await browser.close();
  }
});

test("classroom lens: accessible at 1280 and 375 px", { timeout: TIMEOUT * 2 }, async () => {
  const browser = await launch(false);
  try {
    for (const viewport of [{ width: 1280, height: 900 }, { width: 375, height: 812 }]) {
      const { page, context, errors } = await openPage(browser, "?lens=classroom&backend=cpu&encoder=encoders/clip/", viewport);
      await waitLens(page);
      await page.setInputFiles("#lens-photos", [{ name: "a_rgb.png", mimeType: "image/png",
        buffer: fs.readFileSync(path.join(ENCODERS, "images", "a_rgb.png")) }]);
      const fit = await page.evaluate(() => ({ scroll: document.scrollingElement.scrollWidth, vw: window.innerWidth }));
      assert.ok(fit.scroll <= fit.vw, `${viewport.width} px: the page scrolls sideways (${JSON.stringify(fit)})`);
      await page.addScriptTag({ content: AXE });
      const violations = await page.evaluate(async () => (await window.axe.run(document)).violations
        .filter((v) => v.impact === "serious" || v.impact === "critical")
        .map((v) => ({ id: v.id, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ")) })));
      assert.deepEqual(violations, [], `${viewport.width} px: axe-core serious/critical violations`);
      assert.deepEqual(errors, []);
      await context.close();
    }
  } finally {
    await browser.close();
  }
});

test("classroom lens: the shipped prompt index is `prompts export`'s rows of the shippable sets; picking fills the sentences", { timeout: TIMEOUT }, async () => {
  const index = JSON.parse(fs.readFileSync(path.join(DIST, "prompt-index.json"), "utf8"));
  const shipped = fs.readFileSync(path.join(DIST, "prompt-index.json"), "utf8");
  let rows = 0;
  for (const set of index.sets) {
    const csv = path.join(work, `${set.set}-export.csv`);
    cli("prompts", "export", set.set, "--mirror", MIRROR, "--out", csv);
    const [header, ...records] = csvRecords(csv);
    const col = (n) => header.indexOf(n);
    const byId = new Map(records.map((r) => [r[col("id")], r]));
    if (!set.shipped) {
      assert.deepEqual(set.groups ?? [], [], `${set.set}: not shippable, yet prompts are shipped`);
      assert.match(set.why, /not shipped/);
      // No prompt of the set anywhere in the file (short ones could be common phrases).
      const leaked = records.map((r) => r[col("prompt")]).filter((p) => p.length > 24 && shipped.includes(JSON.stringify(p)));
      assert.deepEqual(leaked, [], `${set.set}: prompts in the shipped index`);
      continue;
    }
    assert.ok(set.groups.length > 0, set.set);
    for (const g of set.groups) {
      for (const [id, language, culture, prompt] of g.rows) {
        const r = byId.get(id);
        assert.ok(r, `${set.set}: ${id} is not a row of prompts export`);
        assert.deepEqual([language, culture, prompt, g.english],
          [r[col("language")], r[col("culture")] || "none", r[col("prompt")], r[col("english")]], id);
        rows += 1;
      }
    }
  }
  console.log(`# prompt index: ${rows} rows equal prompts export's; ${Buffer.byteLength(shipped)} bytes`);

  const browser = await launch(false);
  try {
    const { page, context, errors } = await openPage(browser, "?lens=classroom&backend=cpu");
    await page.waitForSelector("#lens-pick option[value='cultext2i:1']", { state: "attached" });
    for (const [set, i] of [["cultext2i", 1], ["magbig", 0]]) {
      await page.selectOption("#lens-pick", `${set}:${i}`);
      const group = index.sets.find((s) => s.set === set).groups[i];
      const want = group.rows.map(([, l, c, p]) => `${l}, ${c}, ${p}`).join("\n");
      assert.equal(await page.inputValue("#lens-sentences"), want, set);
      const url = await page.evaluate(() => location.href);
      assert.equal(new URL(url).searchParams.get("sentences"), want, `${set}: the URL keeps the picked sentences`);
    }
    // With no model loaded, the sentences' token counts by CLIP's shipped tokenizer: one row per
    // sentence, each the tokenizer lens's count of that sentence.
    await page.waitForSelector("#lens-token-counts td[data-tokens]");
    const counts = await page.$$eval("#lens-token-counts tbody tr", (trs) => trs.map((tr) =>
      [tr.cells[3].textContent, Number(tr.cells[2].dataset.tokens)]));
    const magbig = index.sets.find((s) => s.set === "magbig").groups[0].rows;
    assert.deepEqual(counts.map(([t]) => t), magbig.map((r) => r[3]));
    for (const [text, n] of counts) {
      const lens = await page.evaluate((t) => {
        const area = document.getElementById("tokens-text");
        area.value = t;
        area.dispatchEvent(new Event("input", { bubbles: true }));
        return Number(document.querySelector("#tokens-rows .tok-row[data-tokenizer='CLIP']").dataset.count);
      }, text);
      assert.equal(n, lens, `tokens of ${JSON.stringify(text)}`);
    }
    assert.ok(new Set(counts.map(([, n]) => n)).size > 1, "the languages differ in token counts");
    const fetchable = await page.$$eval("#lens-pick option[value^='fetch:']", (o) => o.map((x) => x.value));
    assert.deepEqual(fetchable, ["fetch:sos", "fetch:cube"]);
    assert.deepEqual(errors, []);
    await context.close();
  } finally {
    await browser.close();
  }
});

// SoS and CUBE may not be shipped: the page fetches them from their pinned upstream files (here
// the test server's copy of the shared mirror, `?mirror=`), checks the pinned sha256 and parses
// them with the CLI's prompt-set code; every meaning the picker offers, and the prompts picked,
// are `culturelens prompts export`'s. A file with one byte changed, or none at all, ends in an
// on-page error naming it, with the tab responsive.
test("classroom lens: SoS and CUBE fetched in the page from their pinned files equal `prompts export`; a tampered file is refused", { timeout: TIMEOUT }, async () => {
  const browser = await launch(false);
  try {
    const { page, context, errors } = await openPage(browser, "?lens=classroom&backend=cpu&mirror=/upstream/");
    await page.waitForSelector("#lens-pick option[value='fetch:cube']", { state: "attached" });
    for (const set of ["sos", "cube"]) {
      const csv = path.join(work, `${set}-fetched-export.csv`);
      cli("prompts", "export", set, "--mirror", MIRROR, "--out", csv);
      const [header, ...records] = csvRecords(csv);
      const col = (n) => header.indexOf(n);
      const groups = new Map();
      for (const r of records) {
        if (!groups.has(r[col("english")])) groups.set(r[col("english")], []);
        groups.get(r[col("english")]).push(`${r[col("language")]}, ${r[col("culture")] || "none"}, ${r[col("prompt")]}`);
      }
      const want = [...groups.entries()];
      await page.selectOption("#lens-pick", `fetch:${set}`);
      await page.waitForSelector(`#lens-pick option[value='${set}:0']`, { state: "attached" });
      const options = await page.$$eval(`#lens-pick option[value^='${set}:']`, (o) => o.map((x) => x.textContent));
      assert.deepEqual(options, want.map(([english, lines]) => `${english} (${lines.length} languages)`), set);
      assert.match(await page.textContent("#lens-pick-status"), new RegExp(`${set}: ${records.length} prompts in ${want.length} meanings .*sha256 verified`));
      for (const i of [0, Math.floor(want.length / 2), want.length - 1]) {
        await page.selectOption("#lens-pick", `${set}:${i}`);
        assert.equal(await page.inputValue("#lens-sentences"), want[i][1].join("\n"), `${set} meaning ${i}`);
      }
      console.log(`# ${set} fetched in the page: ${records.length} prompts, ${want.length} meanings equal prompts export's`);
    }
    assert.deepEqual(errors, []);
    await context.close();

    for (const [mirror, set, file, reason] of [
      ["/tampered/", "cube", "cube/cube_1k.json", "checksum mismatch"],
      ["/tampered/", "sos", "Surface-Over-Semantics/full_dataset.csv", "checksum mismatch"],
      ["/missing/", "cube", "cube/cube_1k.json", "HTTP 404"],
    ]) {
      // At a phone's width: the message (two sha256) wraps and never widens the page.
      const { page, context } = await openPage(browser, `?lens=classroom&backend=cpu&mirror=${mirror}`, { width: 375, height: 812 });
      await page.waitForSelector(`#lens-pick option[value='fetch:${set}']`, { state: "attached" });
      await page.selectOption("#lens-pick", `fetch:${set}`);
      await page.waitForSelector("#view-classroom[data-state='error']");
      const message = await page.textContent("#lens-errors");
      assert.ok(message.includes(reason) && message.includes(file), message);
      if (reason === "checksum mismatch") {
        const actual = crypto.createHash("sha256").update(fs.readFileSync(path.join(work, "tampered", file))).digest("hex");
        const pinned = crypto.createHash("sha256").update(fs.readFileSync(path.join(MIRROR, file))).digest("hex");
        assert.ok(message.includes(actual) && message.includes(pinned), message);
      }
      assert.equal(await page.$$eval(`#lens-pick option[value^='${set}:']`, (o) => o.length), 0, "nothing of the file is offered");
      assert.equal(await page.evaluate(() => 1 + 1), 2, "the tab stays responsive");
      assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 375), "the error widens the page at 375 px");
      console.log(`# ${set} from ${mirror}: ${message}`);
      await context.close();
    }
  } finally {
    await browser.close();
  }
});

/** A float32 `.npy` of `rows`. */
function writeNpy(file, rows) {
  const dim = rows[0].length;
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${rows.length}, ${dim}), }`;
  header += " ".repeat(63 - ((10 + header.length) % 64)) + "\n";
  const head = Buffer.alloc(10);
  head.write("\x93NUMPY", 0, "latin1");
  head.writeUInt8(1, 6);
  head.writeUInt8(0, 7);
  head.writeUInt16LE(header.length, 8);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, "latin1"), Buffer.from(new Float32Array(rows.flat()).buffer)]));
}

test("classroom lens: photos added to an opened bundle of the same model; SoS and Vendi equal the CLI's on the combined table", { timeout: TIMEOUT * 2 }, async () => {
  // The bundle: four photos "generated" by two models, embedded by the CLI with the tiny CLIP.
  const base = [["a_rgb.png", "gen-a", "en", "Nigeria"], ["b_grey.png", "gen-a", "de", "Nigeria"],
    ["c_rgba.png", "gen-b", "en", "Japan"], ["e_lossless.webp", "gen-b", "de", "Japan"], ["d_photo.jpg", "gen-b", "en", "Japan"]];
  const baseCsv = path.join(work, "base.csv");
  fs.writeFileSync(baseCsv, "image,model,language,culture\n" +
    base.map(([f, m, l, c]) => `${path.join(ENCODERS, "images", f)},${m},${l},${c}`).join("\n") + "\n");
  const baseNpy = path.join(work, "base.npy");
  cli("embed", "--weights", path.join(ENCODERS, "clip"), "--images", baseCsv, "--out", baseNpy);
  const bundleDir = path.join(work, "bundle-clip");
  cli("bundle", "--embeddings", baseNpy, "--meta", baseNpy.replace(/\.npy$/, ".csv"), "--out", bundleDir,
    "--embedding-model", "clip", "--title", "four generated images");
  const served = await serve({ "/encoders/": ENCODERS, "/bundle/": bundleDir, "/": DIST });
  const at = `http://127.0.0.1:${served.address().port}`;
  // The combined table as the CLI makes it: the bundle's rows, then the photos embedded by `embed`
  // (model "class photos", as the lens names added photos).
  const photosCsv = path.join(work, "added-photos.csv");
  fs.writeFileSync(photosCsv, "image,model,language,culture\n" +
    PHOTOS.map(([f, l, c]) => `${path.join(ENCODERS, "images", f)},class photos,${l},${c}`).join("\n") + "\n");
  const photosNpy = path.join(work, "added-photos.npy");
  cli("embed", "--weights", path.join(ENCODERS, "clip"), "--images", photosCsv, "--out", photosNpy);
  const allNpy = path.join(work, "combined.npy");
  writeNpy(allNpy, [...readNpy(baseNpy), ...readNpy(photosNpy)]);
  const allCsv = allNpy.replace(/\.npy$/, ".csv");
  fs.writeFileSync(allCsv, "model,language,culture\n" + [...base.map(([, m, l, c]) => `${m},${l},${c}`),
    ...PHOTOS.map(([, l, c]) => `class photos,${l},${c}`)].join("\n") + "\n");
  const sosCsv = path.join(work, "combined-sos.csv");
  cli("sos", "--embeddings", allNpy, "--meta", allCsv, "--out", sosCsv);
  const vendiJson = path.join(work, "combined-vendi.json");
  cli("vendi", "--embeddings", allNpy, "--meta", allCsv, "--out", vendiJson);
  const cliVendi = JSON.parse(fs.readFileSync(vendiJson, "utf8"));

  const browser = await launch(false);
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(`${at}/index.html?lens=classroom&backend=cpu&encoder=encoders/clip/&bundle=bundle/`);
    await waitLens(page);
    await page.waitForFunction(() => document.body.dataset.loaded === "true" && document.body.dataset.state === "ready");
    assert.equal(JSON.parse(await page.textContent("#sos-results")).length, 4, "the bundle's own SoS rows");
    await page.check("#lens-add");
    const photos = await embedPhotos(page);
    const photoDiff = maxDiff(photos.rows, readNpy(photosNpy), "added photos");
    assert.ok(photoDiff <= EMB_TOL, `added photos: max |page − CLI| = ${photoDiff}`);
    assert.match(await page.textContent("#bundle-title"), /four generated images \+ the class's 6 photos/);
    const sos = assertSameSos(photos.sos, readSos(sosCsv), "combined SoS");
    assert.equal(await page.$$eval("#lens-photo-rows input", (els) => els.length), 0,
      "added photos leave the list, so a second embed does not add them twice");
    await page.click("#tab-vendi");
    await page.waitForFunction(() => (document.querySelector("#vendi-qvs-norm")?.dataset.value ?? "") !== "");
    const value = (id) => page.getAttribute(`#${id}`, "data-value").then(Number);
    assert.equal(await value("vendi-n"), base.length + PHOTOS.length);
    const vs = await value("vendi-vs");
    const vendiRel = Math.abs(vs - cliVendi.vs) / cliVendi.vs;
    assert.ok(vendiRel <= 1e-5, `combined Vendi: page ${vs}, CLI ${cliVendi.vs}`);
    console.log(`# added to the bundle: photos ${photoDiff.toExponential(2)}, SoS ${sos.toExponential(2)}, ` +
      `Vendi relative ${vendiRel.toExponential(2)} (${base.length} + ${PHOTOS.length} rows)`);

    // Another model's bundle refuses the photos, with the reason on the page.
    await page.evaluate(() => { document.body.dataset.state = "idle"; });
    await page.goto(`${at}/index.html?lens=classroom&backend=cpu&encoder=encoders/siglip/&bundle=bundle/`);
    await waitLens(page);
    await page.waitForFunction(() => document.body.dataset.loaded === "true");
    await page.check("#lens-add");
    await page.setInputFiles("#lens-photos", [{ name: "a_rgb.png", mimeType: "image/png",
      buffer: fs.readFileSync(path.join(ENCODERS, "images", "a_rgb.png")) }]);
    await page.fill("#lens-photo-rows input[data-photo='0'][data-field='language']", "en");
    await page.dispatchEvent("#lens-photo-rows input[data-photo='0'][data-field='language']", "change");
    await page.fill("#lens-photo-rows input[data-photo='0'][data-field='culture']", "Japan");
    await page.dispatchEvent("#lens-photo-rows input[data-photo='0'][data-field='culture']", "change");
    await page.click("#lens-embed-photos");
    await page.waitForSelector("#view-classroom[data-state=error]");
    assert.match(await page.textContent("#lens-errors"), /embedded by clip .*the lens's model is siglip/);
    assert.deepEqual(errors, []);
    await context.close();
  } finally {
    await browser.close();
    served.close();
  }
});

test("phone: at 375 px the heatmap shows colour only; a tap shows the cell's value", { timeout: TIMEOUT }, async () => {
  const browser = await launch(false);
  try {
    for (const [width, numbers] of [[375, false], [1280, true]]) {
      const context = await browser.newContext({ viewport: { width, height: 812 }, hasTouch: true, isMobile: width < 500 });
      const page = await context.newPage();
      page.setDefaultTimeout(TIMEOUT);
      await page.goto(`${origin}/index.html?bundle=demo&backend=cpu&view=heatmap`);
      await page.waitForFunction(() => document.body.dataset.state === "ready");
      await page.waitForSelector("#heatmap-svg .cell");
      const shown = await page.$$eval("#heatmap-svg .cell text, #heatmap-svg .mean text",
        (els) => els.filter((e) => getComputedStyle(e).display !== "none").length);
      if (!numbers) {
        assert.equal(shown, 0, "375 px: no number is drawn in the cells");
        const cell = page.locator("#heatmap-svg .cell").nth(3);
        const [language, culture, sos] = await Promise.all(["data-language", "data-culture", "data-sos"].map((a) => cell.getAttribute(a)));
        await cell.tap();
        await page.waitForSelector("#tooltip:not([hidden])");
        const tip = await page.textContent("#tooltip");
        assert.ok(tip.startsWith(`${culture} × ${language}: SoS ${sos}`), tip);
        const model = await page.inputValue("#model-select");
        const row = JSON.parse(await page.textContent("#sos-results"))
          .find((r) => r.model === model && r.language === language && r.culture === culture);
        assert.equal(Number(sos), row.sos, "the tapped value is the page's SoS");
      } else {
        assert.ok(shown > 0, "1280 px: the cells print their numbers");
      }
      await context.close();
    }
  } finally {
    await browser.close();
  }
});

test("classroom lens: a link with the model and sentences reproduces the scores on opening", { timeout: TIMEOUT }, async () => {
  const browser = await launch(false);
  try {
    const sentences = SENTENCES.map((r) => r.join(", ")).join("\n");
    const { page, context, errors } = await openPage(browser,
      `?lens=classroom&backend=cpu&encoder=encoders/clip/&sentences=${encodeURIComponent(sentences)}`);
    await page.waitForFunction(() => document.body.dataset.state === "ready" || document.body.dataset.state === "error");
    await waitLens(page);
    assert.equal(await page.inputValue("#lens-sentences"), sentences);
    const cliT = cliText("clip");
    const diff = maxDiff(JSON.parse(await page.textContent("#lens-embeddings")), cliT.rows, "linked text");
    assert.ok(diff <= EMB_TOL, `linked text embeddings: max |page − CLI| = ${diff}`);
    assertSameSos(JSON.parse(await page.textContent("#sos-results")), cliT.sos, "linked text SoS");
    const url = new URL(await page.evaluate(() => location.href));
    assert.deepEqual([url.searchParams.get("lens"), url.searchParams.get("encoder"), url.searchParams.get("sentences")],
      ["classroom", "encoders/clip/", sentences], "the URL still holds the lens state");
    assert.deepEqual(errors, []);
    await context.close();
  } finally {
    await browser.close();
  }
});
