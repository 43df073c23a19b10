"""Approval cards: one ``ApprovalView`` rendered for Slack (Block Kit), Teams (Adaptive Card 1.5)
and the web (HTML), plus the thread notices beside it.

Public API:

* ``cards.view``: ``ApprovalView``, ``build_view(request, run, *, approval_url, run_url, now)``,
  ``safe_url``.
* ``cards.render``: ``render_slack_card``, ``render_teams_card``, ``render_web_card``,
  ``render_notice(kind, platform, **data)``, ``NoticeKind``, ``teams_mention_activity``,
  ``CardTooLarge``.
* ``cards.notices``: one dataclass per notice kind, naming its data fields.
* ``cards.text``: ``canonical_json``, ``visible``, ``undo_visible``, ``escape_mrkdwn``.
* ``cards.limits``: ``check_blocks`` / ``check_message`` (Block Kit limits),
  ``teams_card_bytes`` / ``check_teams_card``.
* ``cards.cli``: ``add_cards_parser(subparsers)`` for ``signoff cards render``.

Only ``engine.domain.model`` is imported from the engine.
"""
