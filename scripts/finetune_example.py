#!/usr/bin/env python
"""Pretrain small_resnet on Fashion-MNIST classes 0–4, fine-tune on all 10 with CE and FLγ-SECE, compare
calibration on a page (metacal/experiments/finetune_example.py).

    python scripts/finetune_example.py --page docs/examples/finetune_fashion_mnist.md   # the published page
    python scripts/finetune_example.py --quick                                         # smoke test, seconds
"""

import sys

from metacal.experiments.finetune_example import main

if __name__ == "__main__":
    sys.exit(main())
