"""The YAML reader of config files and ``--set`` values: YAML 1.2's core scalars, so that what a key's
documentation says is what it gets.

PyYAML follows YAML 1.1, where ``no``, ``off``, ``yes``, ``on``, ``y`` and ``n`` are booleans: a string-typed key
such as ``run.mixed_precision`` given ``no`` (accelerate's value for "no mixed precision") then received ``False``
and OmegaConf turned it into the text ``'False'``. Here only ``true`` and ``false`` (any case, as in the YAML 1.2
core schema, https://yaml.org/spec/1.2.2/#1032-tag-resolution) are booleans; every other word stays text.
Boolean-typed keys still accept ``yes``/``no``/``on``/``off`` written as text: OmegaConf converts those strings
for a ``bool`` field. Numbers such as ``5e-4`` (no dot) read as floats, as YAML 1.2 and OmegaConf read them.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)(?:[eE][-+]?[0-9]+)?$|^[-+]?\.(?:inf|Inf|INF)$"
                   r"|^\.(?:nan|NaN|NAN)$")
BOOL_TAG, FLOAT_TAG = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:float"


class ConfigLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with YAML 1.2 booleans and floats (module docstring); a key given twice in one mapping
    is an error (PyYAML alone keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError("while constructing a mapping", node.start_mark,
                                                        f"found duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


ConfigLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
ConfigLoader.add_implicit_resolver(BOOL_TAG, BOOL, list("tTfF"))
ConfigLoader.add_implicit_resolver(FLOAT_TAG, FLOAT, list("-+0123456789."))


def _bool(loader: ConfigLoader, node: yaml.ScalarNode) -> bool:
    return loader.construct_scalar(node).lower() == "true"


ConfigLoader.add_constructor(BOOL_TAG, _bool)


def load_yaml(text: str) -> Any:
    """The Python value of a YAML document read with :class:`ConfigLoader` (yaml.YAMLError when invalid)."""
    return yaml.load(text, Loader=ConfigLoader)  # noqa: S506 - a SafeLoader subclass
