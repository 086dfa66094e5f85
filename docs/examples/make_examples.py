"""Write the small example prediction files used in the README (fixed seed, ~150 KB in total).

    python docs/examples/make_examples.py

A synthetic 10-class problem whose TRUE posteriors are softmax(z) with z = N(0, 1) noise + 4.5 on a latent
class; labels are drawn from those posteriors, and the "model" reports logits 2.2·z + small noise, i.e. it
is over-confident (as networks trained with cross-entropy are) and temperature scaling with T ≈ 2.2
recovers calibration. Files: predictions_test.npz (2000 samples) and predictions_val.npz (1000 samples),
each with ``logits`` (float32, N×10) and ``labels`` (int64, N).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

NUM_CLASSES = 10
SHARPEN = 2.2
SEED = 20240611


def make_split(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    latent = rng.integers(0, NUM_CLASSES, size=n)
    z = rng.normal(0.0, 1.0, size=(n, NUM_CLASSES))
    z[np.arange(n), latent] += 4.5
    posterior = np.exp(z - z.max(axis=1, keepdims=True))
    posterior /= posterior.sum(axis=1, keepdims=True)
    u = rng.random(n)[:, None]
    labels = (posterior.cumsum(axis=1) < u).sum(axis=1).clip(0, NUM_CLASSES - 1)  # inverse-CDF sampling
    logits = SHARPEN * z + rng.normal(0.0, 0.1, size=z.shape)
    return logits.astype(np.float32), labels.astype(np.int64)


def main(out_dir: Path = Path(__file__).resolve().parent) -> None:
    rng = np.random.default_rng(SEED)
    for name, n in (("predictions_test.npz", 2000), ("predictions_val.npz", 1000)):
        logits, labels = make_split(rng, n)
        np.savez_compressed(out_dir / name, logits=logits, labels=labels)
        acc = float((logits.argmax(axis=1) == labels).mean())
        print(f"wrote {out_dir / name}: N={n}, K={NUM_CLASSES}, accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
