#!/usr/bin/env bash
# A real public demo bundle for the browser app, on a GPU workstation with internet (not run in CI
# or on the project's machines: it downloads three pipelines and a CLIP from the Hugging Face hub).
#
#   scripts/demo/public_demo.sh OUT_DIR [PROMPTS_PER_LANGUAGE]
#
# 1. exports a small subset of the SoS prompt set (PROMPTS_PER_LANGUAGE prompts, default 12, in
#    English, German, Chinese and Amharic: the first rows of each language, so every language asks
#    for the same cultures);
# 2. generates 2 images per prompt with three real pipelines (Stable Diffusion 1.5 and 2.1, and
#    AltDiffusion m9, whose text encoder is multilingual), seeds per image, on CUDA;
# 3. embeds every image with OpenAI's CLIP ViT-B/32 and writes one table with a `model` column;
# 4. writes a bundle with thumbnails, which any static host can serve: open the app with
#    `?bundle=https://HOST/PATH/` (the host must allow CORS: `Access-Control-Allow-Origin: *`).
#
# Needs: a culturelens built with `--features cuda` (scripts/build_cuda.sh) or `wgpu` (then set
# DEVICE=wgpu), about 20 GB of disk for the hub cache, and a few hours on one consumer GPU.
set -euo pipefail
out=${1:?usage: public_demo.sh OUT_DIR [PROMPTS_PER_LANGUAGE]}
per_language=${2:-12}
bin=${CULTURELENS_BIN:-culturelens}
device=${DEVICE:-cuda}
pipelines=(
  "stable-diffusion-v1-5/stable-diffusion-v1-5"
  "stabilityai/stable-diffusion-2-1-base"
  "BAAI/AltDiffusion-m9"
)
clip="openai/clip-vit-base-patch32"
mkdir -p "$out/work"
work="$out/work"

# 1. The prompt subset: the header, then the first PROMPTS_PER_LANGUAGE rows of each language.
"$bin" prompts export sos --languages en,de,zh,am --out "$work/sos.csv"
python3 - "$work/sos.csv" "$work/prompts.csv" "$per_language" <<'PY'
import csv, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(src, newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
taken = {}
keep = []
for r in rows:
    if taken.get(r["language"], 0) < n:
        taken[r["language"]] = taken.get(r["language"], 0) + 1
        keep.append(r)
with open(dst, "w", newline="", encoding="utf-8") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
    w.writeheader()
    w.writerows(keep)
print(f"{len(keep)} prompts")
PY

# 2. Images from each pipeline, then 3. their CLIP embeddings with a `model` column.
tables=()
for repo in "${pipelines[@]}"; do
  name=${repo##*/}
  "$bin" generate --model "$repo" --prompts "$work/prompts.csv" --images-per-prompt 2 --seed 0 \
    --seed-per-image --device "$device" --precision f16 --out "$work/images/$name"
  # The model's name as a column of the manifest (relative image paths stay relative to images/).
  python3 - "$work/images/$name/manifest.csv" "$work/images/$name.csv" "$name" <<'PY'
import csv, sys
src, dst, model = sys.argv[1:4]
with open(src, newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    r["model"] = model
    r["image"] = f"{model}/{r['image']}"
with open(dst, "w", newline="", encoding="utf-8") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
    w.writeheader()
    w.writerows(rows)
PY
  tables+=("$work/images/$name.csv")
done
python3 - "$work/images/all.csv" "${tables[@]}" <<'PY'
import csv, sys
dst, *srcs = sys.argv[1:]
rows = []
for s in srcs:
    with open(s, newline="", encoding="utf-8") as f:
        rows += list(csv.DictReader(f))
fields = list(dict.fromkeys(k for r in rows for k in r))
with open(dst, "w", newline="", encoding="utf-8") as f:
    w = csv.DictWriter(f, fieldnames=fields)
    w.writeheader()
    w.writerows(rows)
PY
"$bin" embed --model "$clip" --images "$work/images/all.csv" --device "$device" --out "$work/clip.npy"

# 4. The bundle, with thumbnails.
"$bin" bundle --embeddings "$work/clip.npy" --meta "$work/clip.csv" --images "$work/images" \
  --title "culturelens public demo: SoS prompts (en, de, zh, am) × 3 pipelines" \
  --embedding-model "$clip" \
  --provenance "scripts/demo/public_demo.sh: ${per_language} SoS prompts per language, 2 images each, seeds 0.., ${pipelines[*]}" \
  --out "$out/bundle"
echo "bundle: $out/bundle (serve it and open the app with ?bundle=URL)"
