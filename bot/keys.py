"""Typed keys for what the aiohttp application holds."""

from __future__ import annotations

from aiohttp import web

from engine.config import AppConfig
from engine.runtime import Engine

ENGINE = web.AppKey("engine", Engine)
CONFIG = web.AppKey("config", AppConfig)
