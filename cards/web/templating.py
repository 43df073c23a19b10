"""The web channel's jinja2 environment: the shared HTML one (``cards.html``) over the cards'
templates, with the notices' ``mention_name``."""

from __future__ import annotations

from cards.html import html_environment
from cards.notices import mention_name
from cards.templating import LOADER

WEB = html_environment(LOADER)
WEB.filters["mention_name"] = mention_name
