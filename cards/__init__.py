"""Approval cards: one ``ApprovalView`` rendered in each channel's format, plus the thread
notices beside it.

Public API:

* ``cards.view``: ``ApprovalView``, ``build_view(request, run, *, approval_url, run_url, now)``,
  ``safe_url``.
* ``cards.render``: the registry of card formats by channel name (``card_channels``,
  ``renderer``, ``render_card``, ``render_notice(kind, channel, **data)``), ``CardTooLarge``.
* ``cards/<channel>/``: one package per format, each with ``render`` (its card and notice
  renderer, registered as ``RENDERER``), ``templating`` (its jinja2 environment and escaping
  filters) and, where the platform has them, ``limits``: ``cards.slack`` (Block Kit),
  ``cards.teams`` (Adaptive Card 1.5, ``teams_mention_activity``), ``cards.web`` (HTML).
* ``cards.notices``: one dataclass per notice kind, naming its data fields;
  ``cards.notice_fields``: those fields read from an outbox payload, once for every channel.
* ``cards.text``: ``canonical_json``, ``visible``, ``undo_visible``, ``escape_mrkdwn``.
* ``cards.templating``: the shared template loader and escaping contract.
* ``cards.cli``: ``add_cards_parser(subparsers)`` for ``signoff cards render``.

Only ``engine.domain.model`` is imported from the engine.
"""
