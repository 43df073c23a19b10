"""The ``away`` words every chat front end takes (Slack's ``/signoff away ...``, a message to
the Teams bot), one parser and one set of answers:

    away                                   whether you are away, until when, who decides for you
    away until 2026-12-24 delegate @bob    be away until then; bob decides for you meanwhile
    away delegate @bob until 2026-12-24    the same
    away off                               back now: requests come to you again

The person away is always the one who wrote it (their chat identity); the delegate is named by
the channel's mention (``resolve``), or by their name or email in ``people:``. The rules (who,
until when, one hop) are ``engine.domain.delegation``'s, through ``engine.services.delegations``;
a refusal is the engine's sentence and changes nothing. The answers are ``words.j2``'s ``AWAY``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from cards.templating import plain_date, words
from engine.assembly import Engine
from engine.domain.delegation import parse_until
from engine.domain.errors import Forbidden, InvalidRequest, NotFound
from engine.domain.model import Principal

VERB = "away"
OFF = "off"
Resolve = Callable[[str], Awaitable[str | None]]  # a mention or name -> a person of people:


def _words() -> Mapping[str, str]:
    return words("AWAY")


def by_name_or_email(engine: Engine, written: str) -> str | None:
    """The person of ``people:`` whose name or email ``written`` is (an ``@`` before it is
    left out), else None."""
    name = written.removeprefix("@")
    if name in engine.config.people:
        return name
    found = engine.config.person_by_email(name)
    return None if found is None else found.name


def _parse(args: list[str]) -> tuple[str, str] | None:
    """(until, delegate) as written, from ``until X delegate Y`` in either order; else None."""
    if len(args) != 4:
        return None
    pairs = {args[0].lower(): args[1], args[2].lower(): args[3]}
    if set(pairs) != {"until", "delegate"}:
        return None
    return pairs["until"], pairs["delegate"]


async def answer_away(engine: Engine, who: Principal, args: list[str], resolve: Resolve) -> str:
    """Do what ``away <args>`` asks for ``who`` (a person) and say what happened."""
    said = _words()
    person = who.person or who.name
    delegations = engine.delegations
    try:
        if not args:
            absence = await delegations.away(who, person)
            if absence is None:
                return said["not_away"]
            return said["shown"] % (plain_date(absence.until), absence.delegate)
        if len(args) == 1 and args[0].lower() == OFF:
            ended = await delegations.end_away(who, person)
            return said["was_not_away"] if ended is None else said["off"] % ended.delegate
        parsed = _parse(args)
        if parsed is None:
            return said["usage"]
        until_text, named = parsed
        delegate = await resolve(named)
        if delegate is None:
            return said["unknown"] % named[:80]
        until = parse_until(until_text)
        absence = await delegations.set_away(who, person, until, delegate)
    except (Forbidden, InvalidRequest, NotFound) as refused:
        return f"{refused.message.rstrip('.')}. Nothing changed."
    return said["set"] % (plain_date(absence.until), absence.delegate)
