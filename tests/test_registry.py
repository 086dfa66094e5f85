"""metacal.registry.Registry: names and options checked once for every registry (timm-style, parametrized over
what each registry lists)."""

from __future__ import annotations

import pytest

from metacal import data, losses, models, objectives, posthoc
from metacal.registry import Registry, UnknownNameError

REGISTRIES = {"dataset": data.DATASETS, "model": models.MODELS, "loss": losses.LOSSES,
              "objective": objectives.OBJECTIVES, "post-hoc calibrator": posthoc.registry.CALIBRATORS}


@pytest.mark.parametrize("kind", REGISTRIES)
def test_every_registry_words_an_unknown_name_with_its_kind(kind):
    registry = REGISTRIES[kind]
    assert registry.kind == kind and registry.available() == sorted(registry.available())
    name = registry.available()[0]
    with pytest.raises(UnknownNameError) as info:
        registry.get(name + "x")
    assert str(info.value).startswith(f"unknown {kind} '{name}x'; did you mean {name}")


@pytest.mark.parametrize("name", losses.available())
def test_every_loss_lists_options_its_constructor_takes(name):
    options = losses.LOSSES.options(name)
    assert options is not None and "reduction" in options  # every loss reduces; none takes **kwargs
    with pytest.raises(ValueError, match=rf"^loss '{name}' has no option\(s\) nonsense; valid: "):
        losses.build(name, nonsense=1)


def test_supplied_arguments_are_not_options_and_var_keywords_defer_to_the_constructor():
    reg: Registry[object] = Registry("thing", supplied=("size",))

    @reg.register("plain")
    def plain(size: int, width: int = 2, *, depth: int = 1) -> tuple[int, int, int]:
        return size, width, depth

    @reg.register("open")
    def open_(size: int, **options: int) -> dict[str, int]:
        return {"size": size, **options}

    assert reg.options("plain") == ["width", "depth"] and reg.options("open") is None
    assert reg.build("plain", size=3, depth=4) == (3, 2, 4)  # the supplied argument passes the check
    assert reg.build("open", size=1, anything=5) == {"size": 1, "anything": 5}
    with pytest.raises(ValueError, match=r"^thing 'plain' has no option\(s\) colour, size2; valid: width, depth$"):
        reg.build("plain", size=3, colour=1, size2=0)
    reg.check_options("plain", ["width", "extra"], extra=("extra",))  # options the caller handles itself
    with pytest.raises(ValueError, match="is registered twice"):
        reg.register("plain")(plain)
