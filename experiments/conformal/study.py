"""What the prediction-set pages compare: per over-confident regime, the runs of each training method (the MLPs reuse
the clean-label sweeps of the regime study, ``runs/regimes/<study>/clean``, same configs and seeds; the ResNet has its
own sweep folder), each score at each α, on the raw softmax and after the run's own temperature scaling.

Methods (the pages' rows): CE, the per-seed fixed-γ grid pick (lowest validation ECE among CE and focal γ = 1…5, as
on the other results pages; the ResNet's grid is coarser, γ = 1, 3, 5, see ``RESNET_GRID``), auto γ, FLγ-SECE,
focal γ = 5 (Mukhoti et al.'s over-regularised end), LS-0.05 and MbLS.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from experiments.regimes.study import COMMON_SETS, SEEDS as REGIME_SEEDS

#: the rows: sweep folders (methods), GRID for the per-seed grid pick
GRID = "grid"
METHODS = ("ce", GRID, "auto_gamma", "flgamma_sece", "focal5", "ls_005", "mbls")
LABELS = {"ce": "CE", GRID: "Grid pick", "auto_gamma": "Auto γ", "flgamma_sece": "FLγ-SECE", "focal5": "Focal γ = 5",
          "ls_005": "LS-0.05", "mbls": "MbLS"}
GRID_STEMS = ("ce", "focal", "focal2", "focal3", "focal4", "focal5")
#: the rows other than the grid's (a study's ``swept`` adds its grid)
OTHERS = ("auto_gamma", "flgamma_sece", "ls_005", "mbls")
SCORES = ("thr", "aps", "raps")
ALPHAS = (0.1, 0.05)
COLUMNS = ("uncalibrated", "ts_nll")  # the raw softmax, and after the run's TS
SHIFT_ALPHA = 0.1
SEVERITIES = (1, 2, 3, 4, 5)
#: the MLPs read the regime study's five seeds; the ResNet (hours per seed on a CPU) has three
MLP_SEEDS = REGIME_SEEDS
RESNET_SEEDS = (0, 1, 2)
#: the ResNet's grid leaves out γ = 2 and 4: 24 trainings instead of 30 (each about 7 minutes of one of two CPU cores),
#: so that its sweep, its page and a check of both fit in one three-hour working session
RESNET_GRID = ("ce", "focal", "focal3", "focal5")


@dataclass(frozen=True)
class Study:
    name: str  # docs/results/conformal_<name>.md
    title: str
    base: str  # the config the runs were trained from
    runs: Path  # the sweep folder: <method>/seed<S>
    shift: str  # the shift suite of metacal.data.shift_suites
    seeds: tuple[int, ...] = MLP_SEEDS  # what its sweep command trains
    grid: tuple[str, ...] = GRID_STEMS  # the runs the grid pick chooses among

    @property
    def swept(self) -> tuple[str, ...]:
        """Every run the page reads: the grid, the other rows."""
        return (*self.grid, *OTHERS)

    def sweep_command(self) -> str:
        return (f"python scripts/sweep.py --base {self.base} --methods {' '.join(self.swept)} --seeds "
                f"{' '.join(map(str, self.seeds))} --out {self.runs} --jobs 2 --set {' '.join(COMMON_SETS)}")


STUDIES = (
    Study("mnist1d_overconfident", "MNIST-1D, MLP (over-confident CE)", "configs/mnist1d_overconfident/base.yaml",
          Path("runs/regimes/noisy_mnist1d/clean"), "mnist1d_natural"),
    Study("fashion_mnist_overconfident", "Fashion-MNIST, MLP (over-confident CE)",
          "configs/fashion_mnist_overconfident/base.yaml", Path("runs/regimes/noisy_fashion_mnist/clean"),
          "corruptions"),
    # its own sweep folder: the ResNet's runs on the other results pages are not kept in the repository
    Study("fashion_mnist_resnet_overconfident", "Fashion-MNIST, ResNet (over-confident CE)",
          "configs/fashion_mnist_resnet_overconfident/base.yaml",
          Path("runs/conformal/fashion_mnist_resnet_overconfident"), "corruptions", RESNET_SEEDS, RESNET_GRID),
)
