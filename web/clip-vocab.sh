#!/usr/bin/env sh
# Trunk's post-build hook (Trunk.toml): puts CLIP's real BPE vocabulary beside the app, as
# dist/clip-bpe-16e6.txt.gz (1,356,917 bytes, gzip as open_clip ships it; MIT, open_clip 3.3.0's
# wheel, pinned by sha256). The tokenizer lens and the classroom lens fetch it when they open, so
# they start with CLIP's tokenizer before anything is loaded; the app's wasm does not carry it.
# The file comes from scripts/fetch_test_weights.sh's folder (CULTURELENS_TEST_WEIGHTS, default
# target/test-weights), which that script fills from the pinned wheel when it is missing.
set -eu
repo="$TRUNK_SOURCE_DIR/.."
weights="${CULTURELENS_TEST_WEIGHTS:-$repo/target/test-weights}"
case "$weights" in /*) ;; *) weights="$repo/$weights" ;; esac
gz="$weights/open_clip/bpe_simple_vocab_16e6.txt.gz"
sha=924691ac288e54409236115652ad4aa250f48203de50a9e4722a6ecd48d6804a
if ! [ -f "$gz" ]; then
  CULTURELENS_TEST_WEIGHTS="$weights" "$repo/scripts/fetch_test_weights.sh"
fi
echo "$sha  $gz" | sha256sum -c --status || { echo "web/clip-vocab.sh: checksum mismatch: $gz" >&2; exit 1; }
cp "$gz" "$TRUNK_STAGING_DIR/clip-bpe-16e6.txt.gz"
