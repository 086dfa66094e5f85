"""The loss registry: ``LOSSES.build(name, **params)``."""

from metacal.registry import Registry

from .base import Loss

LOSSES: Registry[Loss] = Registry("loss", listing="metacal.losses")
