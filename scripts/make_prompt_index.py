"""Writes web/prompt-index.json: the small index of the four prompt sets that the browser app
ships, so the classroom lens can pick prompts (one meaning in all its languages) without a download.

Built from the product's own prompt-set code: every row is a row of `culturelens prompts export`
(crates/culturelens-prompts), read from the data mirror. Only what may be shipped is shipped:
- MAGBIG (Apache-2.0, as its authors publish the prompts on the Hugging Face dataset felfri/MAGBIG)
  and CulText2I (typed in from the paper's tables by culturelens; no upstream data) carry prompts:
  the first GROUPS meanings of each (rows sharing their `english` text), CulText2I's reference and
  nation templates only (not the gibberish one);
- SoS (no licence upstream: all rights reserved) and CUBE (CC BY-NC-SA 4.0, non-commercial and
  share-alike) carry their name and licence only, no prompt.
Each set's licence text is the one `culturelens prompts show SET` prints.

Run from the repository root (needs the CLI built and the mirror):
    python3 scripts/make_prompt_index.py [--bin target/debug/culturelens] [--mirror ../shared/data/upstream]
The browser test tests/web/classroom.test.mjs checks every shipped row against a fresh export.
"""
import argparse
import csv
import json
import pathlib
import re
import subprocess
import tempfile

GROUPS = 24
SHIPPED = {"magbig", "cultext2i"}
NOT_SHIPPED = {
    "sos": "not shipped: the upstream data carries no licence (all rights reserved)",
    "cube": "not shipped: CC BY-NC-SA 4.0 (non-commercial, share-alike) does not fit the app's licence",
}
TEMPLATES = {"cultext2i": {"en_reference", "en_nation"}}


def show(binary, name):
    out = subprocess.run([binary, "prompts", "show", name], capture_output=True, text=True, check=True).stdout
    title = out.splitlines()[0].strip()
    licence = re.search(r"^Licence: (.*)$", out, re.M).group(1).strip()
    return title, licence


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/debug/culturelens")
    ap.add_argument("--mirror", default="../shared/data/upstream")
    ap.add_argument("--out", default="web/prompt-index.json")
    args = ap.parse_args()
    sets = []
    for name in ["sos", "magbig", "cube", "cultext2i"]:
        title, licence = show(args.bin, name)
        entry = {"set": name, "title": title, "licence": licence, "shipped": name in SHIPPED}
        if name in SHIPPED:
            with tempfile.TemporaryDirectory() as tmp:
                out = pathlib.Path(tmp) / f"{name}.csv"
                subprocess.run([args.bin, "prompts", "export", name, "--mirror", args.mirror, "--out", str(out)],
                               check=True, capture_output=True)
                with open(out, encoding="utf-8", newline="") as f:
                    rows = list(csv.DictReader(f))
            groups = {}
            for r in rows:
                if name in TEMPLATES and r["template"] not in TEMPLATES[name]:
                    continue
                if r["english"] not in groups and len(groups) == GROUPS:
                    continue
                groups.setdefault(r["english"], []).append(
                    [r["id"], r["language"], r["culture"] or "none", r["prompt"]])
            entry["groups"] = [{"english": k, "rows": v} for k, v in groups.items()]
        else:
            entry["why"] = NOT_SHIPPED[name]
        sets.append(entry)
    index = {"about": "culturelens prompts export rows (scripts/make_prompt_index.py); "
                      "rows: [id, language, culture, prompt]", "sets": sets}
    pathlib.Path(args.out).write_text(json.dumps(index, ensure_ascii=False, separators=(",", ":")) + "\n",
                                      encoding="utf-8")
    print(f"{args.out}: {sum(len(g['rows']) for s in sets for g in s.get('groups', []))} rows")


if __name__ == "__main__":
    main()
