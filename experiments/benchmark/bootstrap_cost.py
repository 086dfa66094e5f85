"""Cost of the bootstrap intervals: the batched path against a loop of summary() calls, and the skipped metrics.

    python scripts/bench_bootstrap.py [--n 10000] [--k 10] [--bootstrap 1000] [--bins 15] [--repeats 3]
        [--threads 1] [--loop-samples 5] [--json]

Data: N×K softmax probabilities of Gaussian logits (scale 2, sharpened ×1.3) with labels drawn from the unsharpened
ones. Measures, with torch set to ``--threads`` intra-op threads:

* ``batched``: ``metacal.metrics.bootstrap_intervals`` — B resamples, every metric it covers (error, NLL, Brier,
  ECE, MCE, ACE, RMSCE, ECE-sweep, debiased L2 CE, classwise ECE), wall-clock and CPU seconds of each repeat;
  the target is < 10 s for B = 1000, N = 10,000, K = 10 on one core;
* ``loop``: the same metrics as one ``summary(..., binning_free=False)`` call per resample, timed on
  ``--loop-samples`` resamples and scaled to B;
* the per-resample cost of the estimators the intervals skip (SECE, KDE-ECE, smECE), scaled to B.

The machine may be shared: CPU seconds of this process are less sensitive to other jobs than wall-clock
seconds; quote the median of the repeats.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from metacal import metrics


def data(n: int, k: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * 2
    labels = torch.multinomial(z.softmax(1), 1, generator=g).squeeze(1)
    return (1.3 * z).softmax(1), labels


def timed(fn) -> tuple[float, float]:
    """(wall-clock, CPU) seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def per_resample(fn, probs: torch.Tensor, labels: torch.Tensor, samples: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds of ``fn(probs[idx], labels[idx])`` over ``samples`` resamples (after a warm-up)."""
    g = torch.Generator().manual_seed(1)
    index = torch.randint(0, probs.shape[0], (samples + 1, probs.shape[0]), generator=g)
    fn(probs[index[0]], labels[index[0]])
    times = [timed(lambda i=i: fn(probs[i], labels[i])) for i in index[1:]]
    return statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--bins", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--loop-samples", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    args = parser.parse_args(argv)
    if min(args.n, args.k, args.bootstrap, args.bins, args.repeats, args.threads, args.loop_samples) < 1 or args.k < 2:
        print("bench_bootstrap.py: error: --n, --bootstrap, --bins, --repeats, --threads, --loop-samples must be "
              ">= 1 and --k >= 2", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    probs, labels = data(args.n, args.k)
    spec = metrics.BootstrapSpec(args.bootstrap, 0.9, 0)
    metrics.bootstrap_intervals(probs[:500], labels[:500], args.bins, metrics.BootstrapSpec(20, 0.9, 0))  # warm-up
    batched = [timed(lambda: metrics.bootstrap_intervals(probs, labels, args.bins, spec)) for _ in range(args.repeats)]
    loop = per_resample(lambda p, y: metrics.summary(p, y, args.bins, binning_free=False), probs, labels,
                        args.loop_samples)
    skipped = {"sece": lambda p, y: metrics.sece_metric(p, y), "kde_ece": lambda p, y: metrics.kde_ece(p, y),
               "smece": lambda p, y: metrics.smece(p, y)}
    skipped_cost = {k: per_resample(fn, probs, labels, min(3, args.loop_samples)) for k, fn in skipped.items()}
    result = {
        "n": args.n, "k": args.k, "bootstrap": args.bootstrap, "bins": args.bins, "threads": args.threads,
        "batched_wall_s": [round(w, 3) for w, _ in batched], "batched_cpu_s": [round(c, 3) for _, c in batched],
        "batched_wall_median_s": round(statistics.median(w for w, _ in batched), 3),
        "batched_cpu_median_s": round(statistics.median(c for _, c in batched), 3),
        "loop_wall_s": round(loop[0] * args.bootstrap, 2), "loop_cpu_s": round(loop[1] * args.bootstrap, 2),
        "skipped_cpu_s": {k: round(v[1] * args.bootstrap, 1) for k, v in skipped_cost.items()},
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"B = {args.bootstrap}, N = {args.n}, K = {args.k}, {args.bins} bins, {args.threads} thread(s)")
    print(f"batched (all interval metrics): wall {result['batched_wall_s']} s, CPU {result['batched_cpu_s']} s; "
          f"median wall {result['batched_wall_median_s']} s, CPU {result['batched_cpu_median_s']} s (target < 10 s)")
    print(f"loop of summary(binning_free=False) per resample, scaled to B: wall {result['loop_wall_s']} s, "
          f"CPU {result['loop_cpu_s']} s")
    print("skipped estimators, CPU s scaled to B: " + ", ".join(f"{k} {v}" for k, v in result["skipped_cpu_s"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
