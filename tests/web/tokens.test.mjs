// The Tokens view (tokenizer lens, web/src/views/tokens.rs) in headless Chromium, against the CLI:
// the page loads a SentencePiece tokenizer.json by URL (`?tokenizers=`, XLM-R's Metaspace/Unigram,
// tests/fixtures/tokens/xlm-r, from scripts/fixtures/make_tokens_xlm_r.py) and CLIP's
// byte-level BPE tokenizer.json through the file picker; for prompts with MAGBIG's gender star
// ("Jurist*innen") and scripts the tiny vocabularies lack (Amharic, Chinese) every row's chips
// (id, piece, text, kind, word end) must equal `culturelens tokens --json` on the same files and
// text. Also: the prompt and URLs survive a reload (`text=`, `tokenizers=`), a drop onto the lens
// adds a tokenizer without starting the bundle loader, a malformed file is an error on the page,
// the id shows on keyboard focus, axe-core finds no serious/critical violation, and at 375 px the
// page does not scroll sideways. With nothing loaded the lens (and the classroom lens) starts with
// CLIP's real tokenizer, built in the page from open_clip's BPE vocabulary that the app ships
// (dist/clip-bpe-16e6.txt.gz): its ids equal transformers' `CLIPTokenizer` (the fixture
// tests/fixtures/tokens/clip_bpe/ids.tsv, by scripts/fixtures/make_tokens_clip_bpe.py) on prompts
// of every language of the four prompt sets, exported by `culturelens prompts export` from the data
// mirror (CULTURELENS_DATA_MIRROR, default ../shared/data/upstream).
//
// Environment: CULTURELENS_BIN (default ../../target/debug/culturelens), CHROMIUM (default
// /usr/bin/chromium), WEB_DIST (default ../../web/dist), WEB_SCREENS (a folder for screenshots).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { serve } from "./server.mjs";
import { csvRecords } from "./csv.mjs";
import crypto from "node:crypto";
import os from "node:os";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");
const BIN = process.env.CULTURELENS_BIN || path.join(repo, "target/debug/culturelens");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const DIST = process.env.WEB_DIST || path.join(repo, "web/dist");
const SCREENS = process.env.WEB_SCREENS || "";
const TIMEOUT = Number(process.env.WEB_TEST_TIMEOUT_MS || 120000);
const AXE = fs.readFileSync(path.join(here, "node_modules/axe-core/axe.min.js"), "utf8");
const CLIP_DIR = path.join(repo, "tests/fixtures/encoders/clip");
const XLMR_DIR = path.join(repo, "tests/fixtures/tokens/xlm-r");
const PROMPTS = ["Die Jurist*innen ሀገር", "Jurist*in", "中 ሀ a photo"];
const MIRROR = process.env.CULTURELENS_DATA_MIRROR || path.join(repo, "../shared/data/upstream");
// CLIP's text length and end token (the fixture's ids are padded to it, as the CLI pads).
const MAX_LENGTH = 77;
const EOT = 49407;
// Prompts per (set, language) compared in the page, spread over the set.
const PER_LANGUAGE = 8;

let server, origin, browser;

before(async () => {
  assert.ok(fs.existsSync(BIN), `${BIN} missing: cargo build -p culturelens`);
  assert.ok(fs.existsSync(path.join(DIST, "index.html")), `${DIST} missing: web/ci.sh builds it`);
  server = await serve({ "/fixtures/": path.join(repo, "tests/fixtures/tokens"), "/": DIST });
  origin = `http://127.0.0.1:${server.address().port}`;
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
    args: ["--headless", "--no-sandbox", "--no-first-run", "--disable-background-networking"] });
});

after(async () => {
  await browser?.close();
  server?.close();
});

/** `culturelens tokens --json`: one list of tokens per folder, in order. */
function cliTokens(dirs, text) {
  const args = ["tokens", ...dirs.flatMap((d) => ["--weights", d]), "--text", text, "--json"];
  const out = JSON.parse(execFileSync(BIN, args, { encoding: "utf8" }));
  assert.equal(out.length, dirs.length);
  return out.map((c) => c.tokens);
}

/** The lens's rows as the page shows them: label and, per chip, the token and what is drawn. */
async function pageRows(page) {
  await page.waitForSelector("#view-tokens[data-state=ready]");
  return page.$$eval("#tokens-rows .tok-row", (rows) => rows.map((r) => ({
    label: r.dataset.tokenizer,
    count: Number(r.dataset.count),
    tokens: [...r.querySelectorAll("li.chip")].map((c) => ({
      id: Number(c.dataset.id), piece: c.dataset.piece, text: c.dataset.text, kind: c.dataset.kind,
      word_end: c.dataset.wordEnd === "true",
    })),
    // What a reader sees: the word-start mark and the chip's text.
    shown: [...r.querySelectorAll("li.chip")].map((c) =>
      (c.querySelector(".ws-mark") ? " " : "") + c.querySelector(".t").textContent),
  })));
}

async function open(query, viewport = { width: 1280, height: 900 }) {
  const page = await browser.newPage({ viewport });
  page.setDefaultTimeout(TIMEOUT);
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto(`${origin}/index.html${query}`);
  return { page, errors };
}

test("Tokens view: each row equals `culturelens tokens --json` (URL + file tokenizers, typed prompts)", { timeout: TIMEOUT * 3 }, async () => {
  const { page, errors } = await open("?tokenizers=fixtures/xlm-r/tokenizer.json");
  await page.waitForSelector("#tokens-rows .tok-row[data-tokenizer='xlm-r']");
  assert.equal(await page.isVisible("#view-tokens"), true);
  assert.equal(await page.getAttribute("#open-tokens", "aria-expanded"), "true");
  await page.setInputFiles("#tokens-files", { name: "clip.json", mimeType: "application/json",
    buffer: fs.readFileSync(path.join(CLIP_DIR, "tokenizer.json")) });
  await page.waitForSelector("#tokens-rows .tok-row[data-tokenizer='clip.json']");
  for (const text of PROMPTS) {
    await page.fill("#tokens-text", text);
    const rows = await pageRows(page);
    assert.deepEqual(rows.map((r) => r.label), ["xlm-r", "clip.json"]);
    const cli = cliTokens([XLMR_DIR, CLIP_DIR], text);
    rows.forEach((row, i) => {
      assert.deepEqual(row.tokens, cli[i], `${row.label}, ${JSON.stringify(text)}: page vs CLI`);
      assert.equal(row.count, cli[i].length);
      assert.deepEqual(row.shown, cli[i].map((t) => t.text), `${row.label}: the chips show the CLI's text`);
    });
    assert.equal(new URL(page.url()).searchParams.get("text"), text);
  }
  // What the fixtures show (so the comparison above covers every kind): CLIP splits the star
  // off as its own word and falls back to bytes for Amharic and Chinese; the tiny XLM-R vocabulary
  // has the unknown token for what it lacks; both have special tokens.
  await page.fill("#tokens-text", PROMPTS[0]);
  const [xlmr, clip] = await pageRows(page);
  const kinds = (r) => new Set(r.tokens.map((t) => t.kind));
  assert.deepEqual([...kinds(clip)].sort(), ["bytes", "special", "text"]);
  assert.ok(kinds(xlmr).has("unknown") && kinds(xlmr).has("special"));
  assert.ok(clip.tokens.some((t) => t.text === "*" && t.word_end), "CLIP: the star is a word of its own");
  assert.ok(clip.tokens.some((t) => t.kind === "bytes" && t.text.endsWith('of "ሀ"')));
  assert.ok(xlmr.tokens.some((t) => t.text === " " && t.kind === "text"), "XLM-R: a word start");

  // The id on keyboard focus (the tooltip), and the chip's text alternative.
  const chip = page.locator("#tokens-rows .tok-row[data-tokenizer='clip.json'] li.chip").nth(1);
  await chip.focus();
  await page.waitForSelector("#tooltip:not([hidden])");
  assert.match(await page.textContent("#tooltip"), new RegExp(`id ${clip.tokens[1].id}\\b`));
  assert.match(await chip.locator(".sr").textContent(), new RegExp(`token 2.*id ${clip.tokens[1].id}`));

  // A drop onto the lens adds a tokenizer and leaves the bundle loader alone; a malformed file
  // is an error on the page, not a dead app.
  const drop = await page.evaluateHandle((json) => {
    const d = new DataTransfer();
    d.items.add(new File([json], "clip.json", { type: "application/json" }));
    d.items.add(new File(['{"model": {'], "broken.json", { type: "application/json" }));
    return d;
  }, fs.readFileSync(path.join(CLIP_DIR, "tokenizer.json"), "utf8"));
  await page.dispatchEvent("#view-tokens", "drop", { dataTransfer: drop });
  await page.waitForSelector("#tokens-rows .tok-row[data-tokenizer='clip.json (2)']");
  await page.waitForSelector("#tokens-errors .lens-error");
  assert.match(await page.textContent("#tokens-errors"), /broken\.json: not JSON/);
  assert.equal(await page.getAttribute("body", "data-state"), "idle", "the bundle loader did not run");
  const rows = await pageRows(page);
  assert.deepEqual(rows[2].tokens, rows[1].tokens);

  // Removing a row: the URL drops a URL tokenizer too.
  await page.click("#tokens-rows .tok-row[data-tokenizer='xlm-r'] .tok-remove");
  assert.deepEqual((await pageRows(page)).map((r) => r.label), ["clip.json", "clip.json (2)"]);
  assert.equal(new URL(page.url()).searchParams.get("tokenizers"), null);
  assert.deepEqual(errors, []);
  await page.close();
});

const sha = (text, n) => crypto.createHash("sha256").update(text, "utf8").digest("hex").slice(0, n);
const idsSha = (ids) => sha(ids.join(","), 8);

/** PER_LANGUAGE prompts of every language of the four sets, and every prompt longer than 77
 * tokens (the fixture's third column), as `culturelens prompts export` writes them. */
function samplePrompts(fixture) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "culturelens-tokens-"));
  const out = [];
  try {
    for (const set of ["sos", "magbig", "cube", "cultext2i"]) {
      const csv = path.join(dir, `${set}.csv`);
      execFileSync(BIN, ["prompts", "export", set, "--mirror", MIRROR, "--out", csv], { stdio: "ignore" });
      const [header, ...rows] = csvRecords(csv);
      const [lang, prompt] = [header.indexOf("language"), header.indexOf("prompt")];
      const byLanguage = new Map();
      for (const r of rows.filter((r) => r.length === header.length)) {
        if (!byLanguage.has(r[lang])) byLanguage.set(r[lang], []);
        byLanguage.get(r[lang]).push(r[prompt]);
      }
      for (const [language, texts] of byLanguage) {
        const step = Math.max(1, Math.floor(texts.length / PER_LANGUAGE));
        for (let i = 0; i < texts.length && i < step * PER_LANGUAGE; i += step) out.push({ set, language, text: texts[i] });
        for (const text of texts.filter((t) => fixture.get(sha(t, 12))?.full)) out.push({ set, language, text });
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return out;
}

test("Tokens view: with nothing loaded, CLIP's real tokenizer (shipped) gives transformers' ids on prompts of the four sets", { timeout: TIMEOUT * 3 }, async () => {
  const fixture = new Map(fs.readFileSync(path.join(repo, "tests/fixtures/tokens/clip_bpe/ids.tsv"), "utf8")
    .split("\n").filter((l) => l && !l.startsWith("#")).map((l) => l.split("\t"))
    .map(([key, ids77, full]) => [key, { ids77, full }]));
  const prompts = samplePrompts(fixture);
  const { page, errors } = await open("?lens=tokens");
  await page.waitForSelector("#tokens-rows .tok-row[data-tokenizer='CLIP']");
  // It starts with content: the default prompt, split by CLIP (the star a word of its own).
  const [first] = await pageRows(page);
  assert.equal(first.label, "CLIP");
  assert.ok(first.tokens.some((t) => t.text === "*" && t.word_end), JSON.stringify(first.tokens));
  let longer = 0;
  const wrong = [];
  for (const { set, language, text } of prompts) {
    await page.fill("#tokens-text", text);
    const [row] = await pageRows(page);
    const ids = row.tokens.map((t) => t.id);
    const want = fixture.get(sha(text, 12));
    assert.ok(want, `${set} ${language} ${JSON.stringify(text)} is not in the fixture: the mirror drifted`);
    // The fixture's ids: cut to 77 (76 and the end token) and padded with the end token.
    const ids77 = ids.length > MAX_LENGTH ? [...ids.slice(0, MAX_LENGTH - 1), EOT] : [...ids];
    while (ids77.length < MAX_LENGTH) ids77.push(EOT);
    let ok = idsSha(ids77) === want.ids77;
    if (want.full) {
      longer += 1;
      ok &&= idsSha(ids) === want.full;
    }
    if (!ok) wrong.push(`${set} ${language} ${JSON.stringify(text)}`);
  }
  const languages = new Set(prompts.map((p) => `${p.set}/${p.language}`)).size;
  console.log(`# shipped CLIP tokenizer: ${prompts.length - wrong.length} of ${prompts.length} prompts ` +
    `(${languages} set/language pairs, ${longer} longer than ${MAX_LENGTH} tokens) with transformers' ids`);
  assert.deepEqual(wrong, [], "prompts whose ids differ from transformers'");
  assert.ok(languages >= 35 && longer > 0, `${languages} set/language pairs, ${longer} long prompts`);
  assert.deepEqual(errors, []);
  await page.close();

  // The classroom lens opens with it too (its sentences' tokens before any model is loaded).
  const classroom = await open("?lens=classroom");
  await classroom.page.waitForSelector("#tokens-rows .tok-row[data-tokenizer='CLIP']", { state: "attached" });
  assert.deepEqual(classroom.errors, []);
  await classroom.page.close();
});

test("Tokens view: URL state survives a reload; accessible; fits 375 px", { timeout: TIMEOUT * 2 }, async () => {
  const text = PROMPTS[0];
  const query = `?lens=tokens&tokenizers=fixtures/xlm-r/tokenizer.json&text=${encodeURIComponent(text)}`;
  for (const viewport of [{ width: 1280, height: 800 }, { width: 375, height: 812 }]) {
    const { page, errors } = await open(query, viewport);
    await page.waitForSelector("#tokens-rows .tok-row[data-tokenizer='xlm-r']");
    assert.equal(await page.inputValue("#tokens-text"), text);
    await page.setInputFiles("#tokens-files", { name: "clip.json", mimeType: "application/json",
      buffer: fs.readFileSync(path.join(CLIP_DIR, "tokenizer.json")) });
    await page.waitForSelector("#tokens-rows .tok-row[data-tokenizer='clip.json']");
    const rows = await pageRows(page);
    const cli = cliTokens([XLMR_DIR, CLIP_DIR], text);
    assert.deepEqual(rows.map((r) => r.tokens), cli);
    const fit = await page.evaluate(() => ({ scroll: document.scrollingElement.scrollWidth, vw: window.innerWidth }));
    assert.ok(fit.scroll <= fit.vw, `${viewport.width} px: the page scrolls sideways (${JSON.stringify(fit)})`);
    await page.addScriptTag({ content: AXE });
    const violations = await page.evaluate(async () => (await window.axe.run(document)).violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => ({ id: v.id, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ")) })));
    assert.deepEqual(violations, [], `${viewport.width} px: axe-core serious/critical violations`);
    // Keyboard: the lens button closes and reopens it.
    await page.focus("#tokens-close");
    await page.keyboard.press("Enter");
    assert.equal(await page.isVisible("#view-tokens"), false);
    assert.equal(new URL(page.url()).searchParams.get("lens"), null);
    await page.keyboard.press("Enter");
    assert.equal(await page.isVisible("#view-tokens"), true);
    if (SCREENS) {
      fs.mkdirSync(SCREENS, { recursive: true });
      await page.locator("#tokens-rows .chip").first().focus();
      await page.screenshot({ path: path.join(SCREENS, `tokens-${viewport.width}x${viewport.height}.png`), fullPage: true });
    }
    assert.deepEqual(errors, []);
    await page.close();
  }
});
