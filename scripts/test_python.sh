#!/usr/bin/env bash
# The Python package's test (crates/culturelens-py), as scripts/test.sh runs it: builds the wheel
# with maturin (dev profile, abi3), installs it with numpy, pandas, Pillow (the PIL images of
# `Encoder.embed_images`), pytest, nbconvert and ipykernel into a FRESH virtualenv (never the
# source tree), runs the pytest suite, which compares every function with the `culturelens`
# binary on the same inputs (CULTURELENS_BIN, default $CARGO_TARGET_DIR/debug/culturelens, built
# here when missing), and executes examples/notebook.ipynb (SoS and MAGBIG on the demo table);
# then builds the GPU wheel (`--features gpu`) and runs test_wgpu.py against it.
# maturin and uv are installed, pinned, into $CARGO_TARGET_DIR/python-tools only when missing. uv
# makes the virtualenv and installs into it, with its cache in $CARGO_TARGET_DIR/uv-cache: it
# resolves the same versions as pip would, downloads in parallel and unpacks in Rust
# (scripts/check_requirements.py uses it too, docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
python=${PYTHON:-python3}
tools=$target/python-tools
if ! "$tools/bin/maturin" --version 2>/dev/null | grep -qx "maturin 1.16.0" \
  || ! "$tools/bin/uv" --version 2>/dev/null | grep -q "^uv 0.13.9\b"; then
  "$python" -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check maturin==1.16.0 uv==0.13.9
fi
uv=$tools/bin/uv
UV_CACHE_DIR=$(realpath -m "$target/uv-cache")
export UV_CACHE_DIR UV_NO_CONFIG=1 UV_PYTHON_DOWNLOADS=never
wheels=$target/python-wheels
rm -rf "$wheels"
"$tools/bin/maturin" build --locked -q -m crates/culturelens-py/Cargo.toml --out "$wheels"
bin=${CULTURELENS_BIN:-$target/debug/culturelens}
[ -x "$bin" ] || cargo build --locked -p culturelens
bin=$(realpath "$bin")
root=$(pwd)
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
"$uv" venv -q --python "$python" "$venv"
"$uv" pip install -q --python "$venv/bin/python" "$wheels"/culturelens-*.whl numpy==2.4.6 pandas==3.1.1 pillow==12.0.0 pytest==9.2.0 \
  nbconvert==7.17.2 ipykernel==7.4.0
# From a folder outside the checkout, so `import culturelens` can only find the installed wheel.
cd "$venv"
CULTURELENS_BIN=$bin "$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/crates/culturelens-py/tests"
# The example notebook, executed top to bottom in this virtualenv's kernel: a cell that raises
# fails the run. Its executed copy goes to the temporary folder; the committed one keeps no outputs.
"$venv/bin/jupyter" nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 \
  --ExecutePreprocessor.kernel_name=python3 --output-dir "$venv/notebook" "$root/examples/notebook.ipynb"
# The GPU wheel (`--features gpu`, opt-in for users) in the same virtualenv: its wgpu device
# (lavapipe here) against the CLI's `--device wgpu` (test_wgpu.py, skipped against the default
# wheel above, which instead is checked to refuse wgpu).
cd "$root"
"$tools/bin/maturin" build --locked -q -m crates/culturelens-py/Cargo.toml --features gpu --out "$wheels/gpu"
"$uv" pip install -q --python "$venv/bin/python" --reinstall --no-deps "$wheels"/gpu/culturelens-*.whl
cd "$venv"
CULTURELENS_WHEEL_GPU=1 CULTURELENS_BIN=$bin "$venv/bin/python" -m pytest -q -p no:cacheprovider -s \
  "$root/crates/culturelens-py/tests/test_wgpu.py"
