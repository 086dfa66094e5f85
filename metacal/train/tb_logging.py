"""TensorBoard logging on the main process (a no-op object elsewhere or when disabled).

Tags (per epoch): ``train/loss``, ``train/lr``, ``train/meta_objective``, ``train/gamma_hist``,
``train/gamma_mean``, ``{val,test}/{error,nll,ece,mce,ace,…,aurc,augrc}``, ``{val,test}/risk_at_coverage@0.8`` (a nested metric as
``<key>@<inner key>``), ``{val,test}/gamma_mean`` and
``{val,test}/gamma_std`` (Wang & Golebiowski 2024, Fig. 3c–d: γ the γ-Net predicts for held-out samples),
``test/reliability`` (image; every ``logging.reliability_every`` epochs and the last, where the test set is
evaluated), and the hparams summary with the final metrics. Per meta step (this
process's batch): ``step/meta_objective``, ``step/gamma_mean``, ``step/gamma_max``,
``step/dJ_dgamma_offset`` (dJ/dδ for a global offset γ_i + δ: negative = the step asks for a larger γ)
and ``step/meta_grad_norm`` (‖dJ/dφ‖ before clipping); per epoch also ``train/raise_gamma_frac``.

The per-step values stay on the device until :meth:`TBLogger.flush` (the loop's logging points: checkpoints,
the epoch's end), which reads all of them at once and writes them under their own steps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import torch

SCALAR_METRICS = ("error", "nll", "ece", "mce", "ace", "brier", "classwise_ece", "sece")


class TBLogger:
    """Thin wrapper around ``torch.utils.tensorboard.SummaryWriter``."""

    def __init__(self, log_dir: Path | None) -> None:
        self.writer = None
        if log_dir is not None:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=str(log_dir))
        self.pending: list[tuple[int, tuple[str, ...], torch.Tensor]] = []  # per-step values not yet written

    def scalars(self, prefix: str, values: Mapping[str, float], step: int) -> None:
        if self.writer is None:
            return
        for key, value in values.items():
            if key in ("n", "num_classes"):
                continue
            if isinstance(value, Mapping):  # e.g. risk_at_coverage {"0.8": …} → val/risk_at_coverage@0.8
                for level, inner in value.items():
                    if isinstance(inner, (int, float)) and not isinstance(inner, bool):
                        self.writer.add_scalar(f"{prefix}/{key}@{level}", float(inner), step)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(f"{prefix}/{key}", float(value), step)

    def step_scalars(self, out: Any, step: int) -> None:
        """The meta-step diagnostics of one iteration's :class:`metacal.meta.StepResult` (none on plain steps)."""
        if self.writer is not None and out.control is not None:  # an update of the automatic scalar
            self.scalars("auto", out.control, step)
        if self.writer is None or out.meta_objective is None:
            return
        values = {"meta_objective": out.meta_objective}
        if out.gamma is not None:
            values.update(gamma_mean=out.gamma.mean(), gamma_max=out.gamma.max())
        values.update(out.diagnostics)  # the learner's own, e.g. dJ_dgamma_offset, meta_grad_norm, dJ_dlevel
        device = out.meta_objective.device
        dtype = torch.float32 if device.type == "mps" else torch.float64  # exact for the float32 values
        stacked = torch.stack([torch.as_tensor(v).detach().to(device, dtype).reshape(())
                               for v in values.values()])
        self.pending.append((step, tuple(values), stacked))

    def write_pending(self) -> None:
        """Write the buffered per-step values (one host read for all of them)."""
        if not self.pending:
            return
        numbers = torch.cat([values for _, _, values in self.pending]).tolist()
        at = 0
        for step, names, _ in self.pending:
            self.scalars("step", dict(zip(names, numbers[at:at + len(names)])), step)
            at += len(names)
        self.pending = []

    def histogram(self, tag: str, values: torch.Tensor, step: int) -> None:
        if self.writer is not None and values.numel() > 0:
            self.writer.add_histogram(tag, values.detach().float().cpu(), step)

    def figure(self, tag: str, figure: Any, step: int) -> None:
        if self.writer is not None:
            self.writer.add_figure(tag, figure, step, close=True)

    def hparams(self, hparams: Mapping[str, Any], metrics: Mapping[str, float]) -> None:
        """Write the hparams plugin summary into this run's own event file (no sub-directory)."""
        if self.writer is None:
            return
        from torch.utils.tensorboard.summary import hparams as hparams_summary

        clean = {k: (v if isinstance(v, (int, float, str, bool)) else str(v)) for k, v in hparams.items()}
        exp, ssi, sei = hparams_summary(clean, dict(metrics))
        file_writer = self.writer._get_file_writer()
        for summary in (exp, ssi, sei):
            file_writer.add_summary(summary)
        for key, value in metrics.items():
            self.writer.add_scalar(key, value)

    def flush(self) -> None:
        if self.writer is not None:
            self.write_pending()
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.write_pending()
            self.writer.close()
