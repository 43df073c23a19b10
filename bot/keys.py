"""Typed keys for what the aiohttp application holds."""

from __future__ import annotations

from aiohttp import web

from engine.assembly import Engine
from engine.config import AppConfig
from engine.services.links import ApprovalLinks

ENGINE = web.AppKey("engine", Engine)
CONFIG = web.AppKey("config", AppConfig)
LINKS = web.AppKey("links", ApprovalLinks)  # the approval page's signed links
