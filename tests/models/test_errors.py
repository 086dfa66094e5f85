"""Bad names and bad options fail with one clear message."""

from __future__ import annotations

import pytest
import torch

from metacal import models
from metacal.registry import UnknownNameError


def test_unknown_name_suggests_the_closest_and_says_where_the_list_is():
    with pytest.raises(UnknownNameError) as info:
        models.build("resnet19", 10, 3)
    message = str(info.value)
    assert message == ("unknown model 'resnet19'; did you mean resnet18, resnet110, resnet56? "
                       "full list: python -c 'import metacal.models as m; print(m.available())'")
    assert isinstance(info.value, KeyError)
    with pytest.raises(UnknownNameError, match="did you mean torchvision:convnext_tiny"):  # a torchvision network
        models.build("convnext_tiny", 10, 3)


def test_unknown_option_lists_the_accepted_ones():
    with pytest.raises(ValueError, match=r"^model 'resnet18' has no option\(s\) widen; valid: shortcut, input_shape$"):
        models.build("resnet18", 10, 3, widen=2)


@pytest.mark.parametrize(
    "name,num_classes,in_channels,options,match",
    [
        ("small_resnet", 0, 1, {}, "num_classes must be a positive int"),
        ("resnet18", 10, 0, {}, "in_channels must be a positive int"),
        ("resnet18", 10.0, 3, {}, "num_classes must be a positive int"),
        ("resnet18", 10, 3, {"input_shape": (1, 32, 32)}, "has 1 channels but in_channels=3"),
        ("resnet18", 10, 3, {"input_shape": (3, 32)}, "must be a 3-d shape"),
        ("resnet110", 10, 3, {"shortcut": "C"}, "shortcut must be"),
        ("cnn1d", 10, 1, {"input_shape": (1, 28, 28)}, "must be a 2-d shape"),
        ("cnn1d", 10, 1, {"input_length": 2}, "too short"),
        ("cnn1d", 10, 1, {"pool": "max"}, "pool must be"),
        ("mlp", 10, 1, {}, "give the input size"),
        ("mlp", 10, 1, {"input_shape": (1, 4), "in_features": 5}, "disagrees"),
        ("mlp", 10, 1, {"in_features": 4, "activation": "swish"}, "unknown activation"),
        ("wide_resnet", 10, 3, {"depth": 26}, "6n\\+4"),
        ("wide_resnet", 10, 3, {"depth": 28, "style": "postact"}, "6n\\+2"),
        ("wide_resnet", 10, 3, {"style": "other"}, "style must be"),
        ("densenet121", 10, 3, {"stem": "tiny"}, "stem must be"),
        ("small_resnet", 10, 1, {"widths": (16, 32), "blocks": (1,)}, "same length"),
    ],
)
def test_bad_options_raise_value_error(name, num_classes, in_channels, options, match):
    with pytest.raises(ValueError, match=match):
        models.build(name, num_classes, in_channels, **options)


def test_wrong_input_size_is_reported_at_forward():
    with pytest.raises(ValueError, match="expected inputs with 40 values"):
        models.build("mlp", 10, 1, input_shape=(1, 40))(torch.randn(2, 1, 41))
    with pytest.raises(ValueError, match="built for length 40"):
        models.build("cnn1d", 10, 1)(torch.randn(2, 1, 50))
    assert models.build("cnn1d", 10, 1, pool="avg")(torch.randn(2, 1, 50)).shape == (2, 10)
