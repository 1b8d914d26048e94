#!/usr/bin/env bash
# Builds the browser app in the light `web-ci` profile and runs the end-to-end browser tests in
# headless Chromium. Installs what it needs only when missing (wasm32 target, trunk 0.21.14,
# wasm-bindgen-cli matching web/Cargo.lock, Debian chromium + nodejs/npm, playwright-core and axe-core
# pinned in tests/web/package-lock.json).
# Run from anywhere; the lead's .ci/run calls it after `cargo test --workspace` (which runs the unit
# tests of the app's pure logic, crates/culturelens-view), with CULTURELENS_BIN set to the CLI that
# step built (without it, the CLI is built here with `--features wgpu`). A missing WebGPU adapter fails the run
# unless CULTURELENS_WEB_ALLOW_NO_WEBGPU=1 (then the WebGPU test is skipped and reported loudly).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
start=$SECONDS
step() { printf '\n== [web %4ds] %s\n' "$((SECONDS - start))" "$*"; }

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi
apt_need=()
command -v chromium >/dev/null || apt_need+=(chromium)
command -v node >/dev/null || apt_need+=(nodejs)
command -v npm >/dev/null || apt_need+=(npm)
if [ ${#apt_need[@]} -gt 0 ]; then
  step "apt packages: ${apt_need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${apt_need[@]}"
fi

step "rust tools"
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
# Both tools are built in a light release profile: trunk's own manifest asks for fat LTO with one
# codegen unit, which alone took most of this step on a 2-core machine; config overrides a
# manifest's profile. Neither tool's speed matters here (trunk runs cargo and copies files;
# wasm-bindgen's pass over the module takes seconds). trunk without its default features (rustls
# for downloading tools and serving https, the crates.io update check): this build is offline and
# uses the wasm-bindgen installed here.
# `--force`: called only when the tool is missing or another version, which cargo's record of
# installed packages may not know (a deleted binary is "already installed" to it).
light_install() {
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
    cargo install --force "$@"
}
if ! command -v trunk >/dev/null || [ "$(trunk --version)" != "trunk 0.21.14" ]; then
  light_install trunk --version 0.21.14 --locked --no-default-features
fi
wbg=$(grep -A1 '^name = "wasm-bindgen"$' web/Cargo.lock | sed -n 's/^version = "\(.*\)"/\1/p')
if ! command -v wasm-bindgen >/dev/null || [ "$(wasm-bindgen --version)" != "wasm-bindgen $wbg" ]; then
  light_install wasm-bindgen-cli --version "$wbg"
fi

# The CLI with wgpu writes the test bundles and the reference scores. scripts/test.sh hands over
# the one its workspace tests built (CULTURELENS_BIN; the same CLI, with the workspace's features):
# building it again here under this command's own feature set recompiled Burn (5 min on 2 cores).
if [ -n "${CULTURELENS_BIN:-}" ]; then
  [ -x "$CULTURELENS_BIN" ] || { echo "web/ci.sh: CULTURELENS_BIN=$CULTURELENS_BIN is not an executable" >&2; exit 1; }
  bin=$(realpath "$CULTURELENS_BIN")
  step "culturelens CLI: $bin (CULTURELENS_BIN)"
else
  step "culturelens CLI (writes the test bundles and the reference scores)"
  cargo build --locked -p culturelens --features wgpu
  bin="$repo/target/debug/culturelens"
fi

step "web app (trunk, profile web-ci)"
# Fetch the web workspace's crates first: trunk runs offline (no tool downloads) and a fresh
# machine's cargo registry does not yet hold the wasm-only dependencies.
cargo fetch --locked --manifest-path web/Cargo.toml
# The repository's one target folder serves both workspaces (the wasm32 web-ci build lands in
# target/wasm32-unknown-unknown/web-ci, apart from the native build).
(cd web && CARGO_TARGET_DIR="$repo/target" trunk build --release --cargo-profile web-ci --locked --offline)

step "wasm size budget"
# The app's download, gzip-compressed as a static host serves it: the wasm module and its JS glue,
# measured on the web-ci profile (wasm-bindgen 0.2.130 output, no wasm-opt, with sw.js). History:
# 6,318,298 bytes before the classroom lens brought the encoders (culturelens-models, the
# byte-level loading of culturelens-models-io, libjpeg-turbo-rs, the image decoders) and 7,517,399
# with them (+19%, 2026-11-27), the budget 10% above the latter (8,269,138); 7,843,819 at eea3ac9.
# Stop 52 put cubek-matmul at opt-level 0 in web-ci (web/Cargo.toml): eea3ac9's code then measured
# 8,766,506 (x1.1176 with no change of code), so the budget is scaled by that ratio (9,241,856),
# which leaves the app the same 5.4% headroom. Raise it only with a reason in the commit.
WASM_GZIP_AFTER=7517399
WASM_GZIP_BUDGET_OPT1=$((WASM_GZIP_AFTER + WASM_GZIP_AFTER / 10))
WASM_GZIP_BUDGET=$((WASM_GZIP_BUDGET_OPT1 * 8766506 / 7843819))
size=$(cat web/dist/*.wasm web/dist/*.js | gzip -9 | wc -c)
printf 'app (wasm + js), gzip -9: %d bytes; budget %d (web-ci profile of stop 52; see the comment above)\n' \
  "$size" "$WASM_GZIP_BUDGET"
# Beside it, fetched only when a lens opens: CLIP's BPE vocabulary (gzip as open_clip ships it,
# web/clip-vocab.sh) and the prompt index (scripts/make_prompt_index.py).
for f in clip-bpe-16e6.txt.gz prompt-index.json; do
  [ -f "web/dist/$f" ] || { echo "web/ci.sh: web/dist/$f is missing" >&2; exit 1; }
  printf 'beside it: %s, %d bytes (gzip -9: %d)\n' "$f" "$(wc -c < "web/dist/$f")" "$(gzip -9 < "web/dist/$f" | wc -c)"
done
if [ "$size" -gt "$WASM_GZIP_BUDGET" ]; then
  echo "web/ci.sh: the app is over its size budget ($size > $WASM_GZIP_BUDGET bytes gzip)" >&2
  exit 1
fi

step "browser tests (headless Chromium)"
(cd tests/web && { [ -d node_modules/playwright-core ] && [ -d node_modules/axe-core ] || npm ci --no-audit --no-fund; })
report="${WEB_TEST_REPORT:-$repo/target/web-test-report.json}"
(cd tests/web && CULTURELENS_BIN="$bin" WEB_DIST="$repo/web/dist" WEB_TEST_REPORT="$report" \
  node --test --test-concurrency=1 app.test.mjs report.test.mjs tokens.test.mjs classroom.test.mjs)
if grep -q '"skipped"' "$report"; then
  printf '\n%s\n!! web/ci.sh: part of the browser tests was SKIPPED (see %s):\n%s\n%s\n' \
    "$(printf '!%.0s' {1..78})" "$report" "$(grep '"skipped"' "$report")" "$(printf '!%.0s' {1..78})" >&2
fi

step "done in $((SECONDS - start)) s"
