"""The regimes where one temperature may not be enough, as sweeps: noisy labels, overlapping classes, a long tail.

Each :class:`Study` is one dataset's grid: a config folder's base, the methods of :data:`METHODS` and one sweep per
:class:`Regime` (``--set`` overrides of the regime options, metacal/data/label_noise.py and long_tail.py), written to
``runs/regimes/<study>/<regime>/``. A page (``docs/results/<page>.md``) gathers the studies that name it.

Sources of the regimes: Chidambaram & Ge (ICLR 2024) for overlap; Han et al. (2018) for symmetric and pair
noise; Shu et al. (NeurIPS 2019) for the small trusted set; Cao et al. (2019) for the exponential long tail.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: every page's methods: CE, the fixed-γ grid (the grid pick is chosen per seed from CE and these on validation
#: ECE), the automatic γ, the γ-Net (FLγ-SECE), mixup (Chidambaram & Ge's remedy), dual focal and LS-0.05
METHODS = ("ce", "focal", "focal2", "focal3", "focal4", "focal5", "auto_gamma", "flgamma_sece", "mixup",
           "dual_focal", "ls_005")
SEEDS = (0, 1, 2, 3, 4)
#: what every study run leaves out: the numbers the pages read are in predictions/ and metrics.json
COMMON_SETS = ("eval.bootstrap=0", "eval.binning_free=false", "eval.test_every_epoch=false",
               "logging.tensorboard=false", "run.torch_threads=1")
RUNS = Path("runs/regimes")
#: the own-data study's arrays file: 5,000 Fashion-MNIST training images as 784-d rows and the 10,000 test images
#: (python scripts/regime_study.py arrays)
ARRAYS = Path("runs/data/fashion_mnist_5000.npz")


@dataclass(frozen=True)
class Regime:
    name: str  # the sweep's folder under the study's
    label: str  # how the page names it
    kind: str  # which branch of the method guide reads it: clean, noisy, trusted, overlap, balanced, imbalanced
    sets: tuple[str, ...]  # --set overrides
    trusted: int = 0  # clean held-out samples (data.options.trusted)


@dataclass(frozen=True)
class Page:
    """One results page: its headline metric (a key of experiments/regimes/numbers.py), the other metrics it
    tabulates, the post-hoc calibrators of its reference rows (CE + each), and the other metrics that also get a
    paired table against their own best reference."""

    name: str
    title: str
    headline: str
    metrics: tuple[str, ...]
    references: tuple[str, ...] = ("ts_nll", "ets")
    paired: tuple[str, ...] = ()


@dataclass(frozen=True)
class Study:
    name: str
    page: str  # docs/results/<page>.md
    title: str  # the dataset as the page names it
    base: str  # the config folder's base.yaml
    regimes: tuple[Regime, ...]
    sets: tuple[str, ...] = ()  # overrides of every regime (the arrays file)

    def out(self, regime: Regime) -> Path:
        return RUNS / self.name / regime.name

    def sweep_argv(self, regime: Regime, seeds=SEEDS, jobs: int = 1) -> list[str]:
        """The ``scripts/sweep.py`` arguments of one regime."""
        return ["--base", self.base, "--methods", *METHODS, "--seeds", *map(str, seeds), "--out",
                str(self.out(regime)), "--jobs", str(jobs), "--set", *COMMON_SETS, *self.sets, *regime.sets]


def noise_regimes(trusted: int) -> tuple[Regime, ...]:
    """Clean labels; symmetric noise 0.2 and 0.4; pair noise 0.3 — each noisy one also with ``trusted`` clean
    held-out samples."""
    noisy = (("sym20", 0.2, "symmetric"), ("sym40", 0.4, "symmetric"), ("pair30", 0.3, "pair"))
    out = [Regime("clean", "clean", "clean", ())]
    for name, rate, kind in noisy:
        sets = (f"data.options.noise_rate={rate}", f"data.options.noise_kind={kind}")
        out.append(Regime(name, f"{kind} {rate:g}", "noisy", sets))
    for name, rate, kind in noisy:
        sets = (f"data.options.noise_rate={rate}", f"data.options.noise_kind={kind}",
                f"data.options.trusted={trusted}")
        out.append(Regime(f"{name}_trusted{trusted}", f"{kind} {rate:g}, {trusted} clean", "trusted", sets, trusted))
    return tuple(out)


#: gaussian_mixture separations with a Bayes error of 0.1, 0.3 and 0.5 (K = 10, d = 10, σ = 1; measured on 200,000
#: samples with metacal.metrics.bayes_error: 0.100, 0.300, 0.499)
SEPARATIONS = ((0.1, 4.22), (0.3, 2.95), (0.5, 2.09))

STUDIES = (
    Study("noisy_fashion_mnist", "noisy_labels", "Fashion-MNIST MLP (3,000 training images)",
          "configs/fashion_mnist_overconfident/base.yaml", noise_regimes(500)),
    Study("noisy_mnist1d", "noisy_labels", "MNIST-1D MLP (4,000 training samples)",
          "configs/mnist1d_overconfident/base.yaml", noise_regimes(200)),
    Study("noisy_arrays", "noisy_labels", "own-data arrays: 5,000 Fashion-MNIST images as 784-d rows",
          "configs/own_data/arrays/base.yaml", noise_regimes(200), (f"data.root={ARRAYS}",)),
    Study("overlap", "overlap", "Gaussian mixture (K = 10, d = 10), MLP", "configs/overlap/base.yaml",
          tuple(Regime(f"bayes{round(100 * b):02d}", f"Bayes error {b:g}", "overlap",
                       (f"data.options.separation={s}",))
                for b, s in SEPARATIONS)),
    Study("long_tail", "long_tail", "Fashion-MNIST MLP, long-tailed train / val / meta-val",
          "configs/long_tail/base.yaml",
          tuple(Regime(f"rho{rho}", f"ρ = {rho}", "imbalanced" if rho > 1 else "balanced",
                       (f"data.options.imbalance={rho}",)) for rho in (10, 100))),
)

PAGES = (
    Page("noisy_labels", "Noisy labels: where one temperature fitted on noisy held-out data is not enough", "ece",
         ("ece", "error", "ece_noisy", "classwise_ece")),
    Page("overlap", "Overlapping classes: calibration against the true posterior", "gap",
         ("gap", "ece", "error", "tv"), paired=("ece",)),
    Page("long_tail", "A long tail: classwise calibration when the classes are imbalanced", "classwise_ece",
         ("classwise_ece", "ece", "error"), ("ts_nll", "ets", "vector", "dirichlet"), ("ece",)),
)


def page(name: str) -> Page:
    found = {p.name: p for p in PAGES}
    if name not in found:
        raise ValueError(f"unknown page {name!r}; the pages: {', '.join(found)}")
    return found[name]


def study(name: str) -> Study:
    found = {s.name: s for s in STUDIES}
    if name not in found:
        raise ValueError(f"unknown study {name!r}; the studies: {', '.join(found)}")
    return found[name]


def page_studies(page: str) -> list[Study]:
    return [s for s in STUDIES if s.page == page]
