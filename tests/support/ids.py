"""Predictable ids for tests and golden journals."""

from __future__ import annotations


class SequentialIds:
    """Predictable ids for tests and golden journals: ``<prefix>-000001`` ..."""

    def __init__(self, prefix: str = "id") -> None:
        self.prefix = prefix
        self.count = 0

    def new_id(self) -> str:
        self.count += 1
        return f"{self.prefix}-{self.count:06d}"
