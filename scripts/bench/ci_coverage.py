"""Coverage of culturelens' bootstrap intervals by simulation on planted data (issue 37): how
often the `--ci 0.95` interval of `culturelens magbig` covers the true value, for `mad` and
`male_share`, with the percentile and the BCa method. Not a test (it takes minutes and its
result is a rate): run it, read the table, and record it in BENCHMARKS.md.

The planted data: every (model, language, set) group is one simulated study of P prompts with
n images each, every image male with probability p (the same for every prompt, so the prompts
are exchangeable and their deviations i.i.d.). The true values are exact:
    male_share = p,
    mad        = E|2B/n − 1|,  B ~ Binomial(n, p)   (summed exactly over k = 0..n),
so an interval covers when lo ≤ truth ≤ hi. One CLI run scores `--groups` independent groups
(different streams: the group's name seeds its resampling), and `--runs` runs give
runs × groups simulated studies (default 100 × 20 = 2,000). Each group also gets its own seed
of the simulated genders.

    python3 scripts/bench/ci_coverage.py [--bin target/release/culturelens] [--runs 100] \
        [--groups 20] [--prompts 30] [--images 8] [--p 0.7] [--bootstrap 1000]

Prints the coverage per (metric, method) with its binomial standard error; exits non-zero when a
rate falls outside [0.93, 0.97] (the issue's acceptance band), so a regression shows.

Requirements: scripts/requirements/stdlib.txt
"""

import argparse
import csv
import math
import pathlib
import random
import subprocess
import sys
import tempfile


def true_mad(n: int, p: float) -> float:
    """E|2B/n − 1| for B ~ Binomial(n, p)."""
    return sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) * abs(2 * k / n - 1) for k in range(n + 1))


def write_table(path: pathlib.Path, rng: random.Random, groups: int, prompts: int, images: int, p: float) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "language", "set", "prompt_id", "gender"])
        for g in range(groups):
            for q in range(prompts):
                for _ in range(images):
                    w.writerow(["sim", f"g{g:03d}", "occupations", f"p{q}", "male" if rng.random() < p else "female"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/culturelens")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--groups", type=int, default=20)
    ap.add_argument("--prompts", type=int, default=30)
    ap.add_argument("--images", type=int, default=8)
    ap.add_argument("--p", type=float, default=0.7)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=20261127)
    args = ap.parse_args()
    truth = {"mad": true_mad(args.images, args.p), "male_share": args.p}
    hits = {(m, method): 0 for m in truth for method in ("percentile", "bca")}
    undefined = dict.fromkeys(hits, 0)
    total = 0
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        table = tmp / "attributes.csv"
        for run in range(args.runs):
            write_table(table, rng, args.groups, args.prompts, args.images, args.p)
            for method in ("percentile", "bca"):
                out = tmp / f"{method}.csv"
                subprocess.run(
                    [args.bin, "magbig", "--attributes", str(table), "--out", str(out), "--ci", "0.95",
                     "--bootstrap", str(args.bootstrap), "--ci-method", method, "--seed", str(run)],
                    check=True, capture_output=True,
                )
                with out.open() as f:
                    for row in csv.DictReader(f):
                        for metric, value in truth.items():
                            lo, hi = row[f"{metric}_lo"], row[f"{metric}_hi"]
                            if lo == "":
                                undefined[(metric, method)] += 1
                            elif float(lo) <= value <= float(hi):
                                hits[(metric, method)] += 1
            total += args.groups
    print(f"{total} simulated studies: {args.prompts} prompts x {args.images} images, p = {args.p}, "
          f"B = {args.bootstrap}; true mad = {truth['mad']:.6f}")
    ok = True
    for (metric, method), h in hits.items():
        rate = h / total
        se = math.sqrt(rate * (1 - rate) / total)
        inside = 0.93 <= rate <= 0.97
        ok &= inside
        print(f"{metric:<11} {method:<10} coverage {rate:.4f} ± {se:.4f}"
              f" (undefined {undefined[(metric, method)]}){'' if inside else '  OUTSIDE [0.93, 0.97]'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
