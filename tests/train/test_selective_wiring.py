"""The trainer's per-epoch metrics carry the nested selective-prediction dicts: JSON-ready, and TensorBoard
logs them as ``<split>/<key>@<level>``."""

import json

import torch

from metacal.metrics import selective_summary
from metacal.predictions import Predictions
from metacal.train.epoch_eval import summarize
from metacal.train.tb_logging import TBLogger


def test_summarize_and_tensorboard_handle_nested_metrics(tmp_path):
    g = torch.Generator().manual_seed(0)
    pred = Predictions.from_logits(torch.randn(120, 4, generator=g) * 2, torch.randint(0, 4, (120,), generator=g))
    values = summarize(pred, binning_free=False)
    expected = selective_summary(pred.probs, pred.labels)
    assert values["risk_at_coverage"] == expected["risk_at_coverage"] and values["aurc"] == expected["aurc"]
    assert json.loads(json.dumps(values)) == values  # plain JSON: floats, ints and nested dicts of floats
    tb = TBLogger(tmp_path)
    tb.scalars("val", values, 3)
    tb.close()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"val/aurc", "val/augrc", "val/risk_at_coverage@0.8", "val/coverage_at_risk@0.05"} <= tags
    assert "val/risk_at_coverage" not in tags and "val/n" not in tags
    logged = events.Scalars("val/coverage_at_risk@0.01")[0]
    assert logged.step == 3 and logged.value == torch.tensor(expected["coverage_at_risk"]["0.01"]).float().item()
