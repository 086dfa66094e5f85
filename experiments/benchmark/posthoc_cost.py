"""Cost of the affine post-hoc fits: Newton's method against L-BFGS-B, side by side on the same data.

    python scripts/bench_posthoc.py [--n 6000] [--k 10] [--predictions VAL.npz] [--json]

Data: ``--predictions`` (a run's predictions/val.npz: logits, labels) or N×K Gaussian logits (scale 3) with
labels drawn from softmax(A z), A = 0.6 I + 0.15 · noise (an over-confident model with class confusions).
For each engine it measures the CPU seconds and the end value of L of one matrix-scaling fit per ODIR strength
λ = μ (from W = I, to |∇L| < 1e-7), and of the whole cross-validated fit of matrix scaling and Dirichlet
calibration (5 folds × 7 strengths + the final fit). The ratio column is L-BFGS time / Newton time; the
value columns show which engine got lower (L-BFGS stops short at small λ, where L is badly conditioned).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

import metacal.posthoc.affine as affine
from metacal.posthoc import DirichletCalibration, MatrixScaling
from metacal.posthoc.odir import ODIR_GRID


def data(n: int, k: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * 3
    a = 0.6 * torch.eye(k, dtype=torch.float64) + 0.15 * torch.randn(k, k, generator=g, dtype=torch.float64)
    return z, torch.multinomial(torch.softmax(z @ a.T, 1), 1, generator=g).squeeze(1)


def predictions(path: Path) -> tuple[torch.Tensor, torch.Tensor] | str:
    """(logits, labels) of a run's predictions .npz, or what is wrong with the file (one line)."""
    if not path.is_file():
        return "no such file"
    try:
        with np.load(path) as stored:
            missing = [k for k in ("logits", "labels") if k not in stored.files]
            if missing:
                return f"no {' or '.join(missing)} in it (a run's predictions/val.npz has both)"
            z, y = torch.from_numpy(stored["logits"]).double(), torch.from_numpy(stored["labels"]).long()
    except (OSError, ValueError) as err:
        return f"not a numpy .npz file ({type(err).__name__})"
    if z.dim() != 2 or z.shape[1] < 2 or y.shape != z.shape[:1]:
        return f"logits must be N×K (K ≥ 2) with N labels, got {tuple(z.shape)} and {tuple(y.shape)}"
    if len(y) == 0 or y.min() < 0 or y.max() >= z.shape[1]:
        return f"labels must be class indices in [0, {z.shape[1]}) for {z.shape[1]} logits per row"
    return z, y


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
        loaded = predictions(Path(args.predictions))
        if isinstance(loaded, str):
            print(f"bench_posthoc: error: --predictions {args.predictions}: {loaded}", file=sys.stderr)
            return 2
        z, y = loaded
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
