"""Cost of the affine post-hoc fits: Newton's method against L-BFGS-B, side by side on the same data.

    python scripts/bench_posthoc.py [--n 6000] [--k 10] [--predictions VAL.npz] [--json]

Data: ``--predictions`` (a run's predictions/val.npz, read by metacal.predictions; probs-only files as log p) or
N×K Gaussian logits (scale 3) with labels drawn from softmax(A z), A = 0.6 I + 0.15 · noise (an over-confident
model with class confusions). For each engine it measures the CPU seconds and the end value of L of one
matrix-scaling fit per ODIR strength λ = μ (from W = I, to |∇L| < 1e-7), and of the whole cross-validated fit of
matrix scaling and Dirichlet calibration (5 folds × 7 strengths + the final fit). The ratio column is L-BFGS
time / Newton time; the value columns show which engine got lower (L-BFGS stops short at small λ, where L is
badly conditioned).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

import metacal.posthoc.affine as affine
from metacal.posthoc import DirichletCalibration, MatrixScaling
from metacal.posthoc.odir import ODIR_GRID
from metacal.predictions import load_predictions


def data(n: int, k: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * 3
    a = 0.6 * torch.eye(k, dtype=torch.float64) + 0.15 * torch.randn(k, k, generator=g, dtype=torch.float64)
    return z, torch.multinomial(torch.softmax(z @ a.T, 1), 1, generator=g).squeeze(1)


def cpu_seconds(fn):
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=6000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--predictions", help="a run's predictions/val.npz instead of the synthetic data")
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    args = parser.parse_args(argv)
    if args.predictions:
        try:  # the project's reader of a predictions .npz, with its checks (logits, or probs as log-probabilities)
            stored = load_predictions(args.predictions)
        except (FileNotFoundError, ValueError) as err:
            print(f"bench_posthoc: error: {err}", file=sys.stderr)
            return 2
        z, y = stored.logits_for_scaling().double(), stored.labels
    else:
        if args.n < 1 or args.k < 2:
            print("bench_posthoc: error: --n must be ≥ 1 and --k ≥ 2", file=sys.stderr)
            return 2
        z, y = data(args.n, args.k)
    rows = []
    for strength in ODIR_GRID:
        row = {"fit": f"matrix scaling, λ = μ = {strength:g}"}
        for engine in ("newton", "lbfgs"):
            seconds, (w, b) = cpu_seconds(lambda: affine.fit_affine(z, y, False, strength, strength, engine=engine))
            row[engine] = seconds
            row[f"{engine}_value"] = float(affine.affine_objective(z, y, w, b, strength, strength))
        rows.append(row)
    default_limit = affine.NEWTON_MAX_CLASSES
    for name, cls in (("matrix scaling, CV", MatrixScaling), ("Dirichlet, CV", DirichletCalibration)):
        row = {"fit": name}
        for engine, limit in (("newton", 10**9), ("lbfgs", 0)):
            affine.NEWTON_MAX_CLASSES = limit  # the calibrators choose the engine by K against this limit
            try:
                seconds, fitted = cpu_seconds(lambda: cls().fit(z, y))
            finally:
                affine.NEWTON_MAX_CLASSES = default_limit
            row[engine] = seconds
            row[f"{engine}_value"] = float(fitted.odir_scores.min())  # the chosen strength's held-out NLL
        rows.append(row)
    if args.json:
        print(json.dumps({"n": int(y.shape[0]), "k": int(z.shape[1]), "rows": rows}, indent=2))
        return 0
    print(f"N = {y.shape[0]}, K = {z.shape[1]}, CPU seconds (value: L at the end; CV rows: best held-out NLL)")
    print(f"{'fit':34} {'Newton s':>9} {'L-BFGS s':>9} {'ratio':>6} {'Newton value':>14} {'L-BFGS value':>14}")
    for r in rows:
        ratio = r["lbfgs"] / max(r["newton"], 1e-9)
        print(f"{r['fit']:34} {r['newton']:9.3f} {r['lbfgs']:9.3f} {ratio:6.1f} {r['newton_value']:14.9f} "
              f"{r['lbfgs_value']:14.9f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
