"""A click on a Slack button, as the handlers read it (``bot.slack.actions``, ``bot.slack.home``):
who clicked, in which workspace, and on what."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Click:
    """The parts of a ``block_actions`` payload a handler needs."""

    user_id: str
    team_id: str | None  # the clicker's own workspace (``team_of``): who they are
    workspace: str | None  # the workspace the click came through: whose token answers
    action_id: str
    value: str
    response_url: str | None
    trigger_id: str | None
    in_home: bool = False  # clicked on the clicker's Home tab (no response_url there)

    @classmethod
    def of(cls, body: dict[str, Any]) -> Click:
        action = (body.get("actions") or [{}])[0]
        return cls(
            user_id=str((body.get("user") or {}).get("id", "")),
            team_id=team_of(body),
            workspace=(body.get("team") or {}).get("id"),
            action_id=str(action.get("action_id", "")),
            value=str(action.get("value", "")),
            response_url=body.get("response_url"),
            trigger_id=body.get("trigger_id"),
            in_home=((body.get("view") or {}).get("type") == "home"),
        )


def team_of(body: dict[str, Any]) -> str | None:
    """The workspace of the person in an interaction payload: their own (``user.team_id``,
    which differs from ``team.id`` for a guest from another organization), else the payload's.
    The payload is signed by Slack, and bolt found the workspace installed before any listener
    runs."""
    user_team = (body.get("user") or {}).get("team_id")
    team = user_team or (body.get("team") or {}).get("id")
    return str(team) if team else None
