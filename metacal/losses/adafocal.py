"""AdaFocal (Ghosh, Schaaf & Gormley, NeurIPS 2022; 3mcloud/adafocal): focal loss whose γ
is kept per confidence bin and adapted once per epoch from validation calibration.

Update (``update_from_validation``, once per epoch), for each of the M equal-mass validation bins b:
  conf_b, acc_b = mean top-label confidence and accuracy of the validation samples in bin b
  γ_b ← γ_b·exp(+λ(conf_b − acc_b)) if γ_b ≥ 0 (focal), γ_b·exp(−λ(conf_b − acc_b)) if γ_b < 0 (inverse)
  if |γ_b| < S_th: switch branch: γ_b ← −S_th (focal → inverse focal) or +S_th (inverse → focal)
  γ_b ← clip(γ_b, γ_min, γ_max)
Empty bins (tied confidences) keep their γ. Fewer than M validation samples is an error
(``check_validation_size``, which the trainer calls before a run writes anything): M equal-mass bins need
at least one sample each, and Ghosh et al. define no update for a bin that is empty by construction.
Defaults (Ghosh et al.): M = 15, γ0 = 1, λ = 1, S_th = 0.2, [γ_min, γ_max] = [−2, 20].
Bins: validation confidences are sorted and split into M groups of (nearly) equal size; the edge between two
groups is the midpoint of their neighbouring confidences, the outer edges are 0 and 1; membership is
(lower, upper] (confidence 0 in the first bin). Until the first update the edges are equal-width.
Differences from the reference code (3mcloud/adafocal), chosen deliberately: its equal-mass edges are those of
focal_calibration's adaptive ECE (``np.interp`` over the sorted confidences, the minimum confidence as the lower
edge, (lower, upper] membership), which shift every bin up by one rank and leave the least-confident
validation sample in no bin (e.g. 2/2/1 of N = 6 samples for M = 3; docs/conventions.md#ace); here every
sample is binned and groups differ in size by at most one.
Training: sample i looks up the bin of its p_t (detached) and uses ℓ_i = −(1 − sign(γ)·p_t)^|γ| log p_t,
i.e. focal loss for γ ≥ 0 and inverse focal loss (Wang, Feng & Zhang 2021, eq. 4) for γ < 0. ``bin_gamma`` and
``bin_edges`` are buffers, so they are part of ``state_dict``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import Loss, check_weight, reduce
from .focal import log_pt, safe_pow
from .registry import LOSSES


def equal_mass_edges(conf: torch.Tensor, num_bins: int) -> torch.Tensor:
    """M + 1 edges: 0, midpoints between the M equal-size groups of sorted ``conf``, 1."""
    n = conf.numel()
    if n < num_bins:
        raise ValueError(f"adafocal needs at least num_bins={num_bins} validation samples, got {n}")
    s = conf.sort().values
    sizes = torch.tensor([len(g) for g in torch.arange(n).tensor_split(num_bins)])
    last = sizes.cumsum(0)[:-1] - 1  # index of the last element of groups 0..M-2
    inner = (s[last] + s[last + 1]) / 2
    return torch.cat([inner.new_zeros(1), inner, inner.new_ones(1)])


@LOSSES.register("adafocal")
class AdaFocal(Loss):
    """Per-bin adaptive focal / inverse-focal loss (Ghosh et al., 2022); defaults from that paper."""

    def __init__(
        self,
        num_bins: int = 15,
        gamma_init: float = 1.0,
        lam: float = 1.0,
        switch_threshold: float = 0.2,
        gamma_min: float = -2.0,
        gamma_max: float = 20.0,
        reduction: str = "mean",
    ) -> None:
        super().__init__(reduction)
        if num_bins < 1 or not gamma_min <= gamma_init <= gamma_max:
            raise ValueError("adafocal needs num_bins >= 1 and gamma_min <= gamma_init <= gamma_max")
        check_weight("adafocal lam", lam)
        check_weight("adafocal switch_threshold", switch_threshold)
        self.num_bins = int(num_bins)
        self.lam = float(lam)
        self.switch_threshold = float(switch_threshold)
        self.gamma_min = float(gamma_min)
        self.gamma_max = float(gamma_max)
        self.register_buffer("bin_edges", torch.linspace(0.0, 1.0, self.num_bins + 1))
        self.register_buffer("bin_gamma", torch.full((self.num_bins,), float(gamma_init)))

    def bin_index(self, conf: torch.Tensor) -> torch.Tensor:
        """Bin of each confidence, (lower, upper] membership with 0 in the first bin."""
        inner = self.bin_edges[1:-1].to(device=conf.device, dtype=conf.dtype)
        return torch.bucketize(conf.contiguous(), inner, right=False)

    def check_validation_size(self, n: int) -> None:
        """ValueError unless the n validation samples fill the M equal-mass bins (n ≥ M)."""
        if n < self.num_bins:
            raise ValueError(f"adafocal needs at least num_bins={self.num_bins} validation samples (one per "
                             f"equal-mass bin), got {n}; lower num_bins or give more validation data")

    @torch.no_grad()
    def update_from_validation(self, logits: torch.Tensor, targets: torch.Tensor) -> None:
        self.check_validation_size(logits.shape[0])
        probs = F.softmax(logits.detach().float(), dim=-1)
        conf, pred = probs.max(dim=-1)
        correct = (pred == targets.to(pred.device).long()).float()
        device = self.bin_gamma.device
        conf, correct = conf.to(device), correct.to(device)
        self.bin_edges.copy_(equal_mass_edges(conf, self.num_bins))
        idx = self.bin_index(conf)
        count = torch.zeros(self.num_bins, device=device).index_add_(0, idx, torch.ones_like(conf))
        sum_conf = torch.zeros(self.num_bins, device=device).index_add_(0, idx, conf)
        sum_acc = torch.zeros(self.num_bins, device=device).index_add_(0, idx, correct)
        gap = (sum_conf - sum_acc) / count.clamp_min(1)
        g = self.bin_gamma
        focal = g > 0  # γ = 0 counts as the inverse side, as in the reference update (so it switches to +S_th)
        new = torch.where(focal, g * torch.exp(self.lam * gap), g * torch.exp(-self.lam * gap))
        small = new.abs() < self.switch_threshold
        s = self.switch_threshold
        new = torch.where(small & focal, torch.full_like(new, -s), new)
        new = torch.where(small & ~focal, torch.full_like(new, s), new)
        new = new.clamp(self.gamma_min, self.gamma_max)
        self.bin_gamma.copy_(torch.where(count > 0, new, g))

    def epoch_metrics(self) -> dict[str, float]:
        """The per-bin γ after this epoch's update: min, mean and max over the bins (a function of the
        checkpointed ``bin_gamma`` alone, so a resumed run reports what an uninterrupted one does)."""
        g = self.bin_gamma.detach().double().cpu()
        return {"adafocal_gamma_min": float(g.min()), "adafocal_gamma_mean": float(g.mean()),
                "adafocal_gamma_max": float(g.max())}

    def sample_gamma(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """γ of each training sample: the γ of the bin its p_t falls in (no gradient)."""
        p_t = F.softmax(logits.detach(), dim=-1).gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)
        return self.bin_gamma.to(device=logits.device, dtype=logits.dtype)[self.bin_index(p_t)]

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, **extra) -> torch.Tensor:
        gamma = self.sample_gamma(logits, targets)
        lp = log_pt(logits, targets)
        focal_w = safe_pow(-torch.expm1(lp), gamma.clamp_min(0))
        inverse_w = torch.exp(gamma.abs() * torch.log1p(lp.exp()))
        weight = torch.where(gamma >= 0, focal_w, inverse_w)
        return reduce(-weight * lp, self.reduction)
