#!/usr/bin/env python
"""Pretrain small_resnet on Fashion-MNIST classes 0–4, fine-tune on all 10 with CE and FLγ-SECE, compare
calibration on a page (experiments/finetune_fashion_mnist.py).

    python scripts/finetune_example.py --page docs/examples/finetune_fashion_mnist.md   # the published page
    python scripts/finetune_example.py --quick                                         # smoke test, seconds
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root: experiments/ is not installed
from experiments.finetune_fashion_mnist import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
