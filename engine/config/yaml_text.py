"""YAML text into plain data, strictly: what PyYAML would accept silently is refused.

A duplicate key (PyYAML keeps the last) and an alias to a structure that contains it are
configuration errors here, with their paths and lines. A duplicate key is one problem among the
others the loader finds; a structure that contains itself stops the load (it cannot be walked).
"""

from __future__ import annotations

from typing import Any

import yaml

from engine.config.values import join
from engine.domain.errors import ConfigError

__all__ = ["load_yaml"]

_SELF_ALIAS = "a YAML alias may not refer to a structure that contains it"


def load_yaml(text: str, source: str, problems: list[str]) -> Any:
    """The data in ``text`` (``{}`` when empty). A repeated key is added to ``problems`` and the
    data returned all the same (the last value, as PyYAML keeps it), so the rest of the file is
    checked in the same pass. ``ConfigError`` naming ``source`` when it is not valid YAML, or
    when an alias refers to a structure that contains it (there is no data to check then)."""
    try:
        tree = yaml.compose(text, Loader=yaml.SafeLoader)
        found = _duplicate_keys(tree, "", frozenset())
        if any(line.endswith(_SELF_ALIAS) for line in found):
            raise ConfigError(found)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        reason = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([f"{where}: invalid YAML: {reason}"]) from exc
    problems.extend(found)
    return {} if data is None else data


def _duplicate_keys(node: yaml.Node | None, path: str, above: frozenset[int]) -> list[str]:
    """PyYAML keeps the last of two equal keys silently; a config should say so instead.
    Also refuses an alias to one of its own ancestors (a structure that contains itself)."""
    if node is None:
        return []
    if id(node) in above:
        return [f"{path}: {_SELF_ALIAS}"]
    above = above | {id(node)}
    found: list[str] = []
    if isinstance(node, yaml.MappingNode):
        keys: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue
            key = key_node.value
            line = key_node.start_mark.line + 1
            if key in keys:
                found.append(f"{join(path, key)}: duplicate key (lines {keys[key]} and {line})")
            keys[key] = line
            found.extend(_duplicate_keys(value_node, join(path, key), above))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found.extend(_duplicate_keys(item, join(path, i), above))
    return found
