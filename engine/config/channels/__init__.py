"""What the configuration knows of each channel: the one place in ``engine`` that names them.

A channel (``bot/<channel>/`` registers it, ``bot.channels`` lists it) owns an address prefix:
``<name>:<target>``, or its bare name when it has no targets (the approval page). The engine
never imports ``bot``, so the syntax of each lives here, as data: card destinations are
checked against it (``check_channel``), the stored-workflow JSON schema is built from it
(``channel_pattern``), and a channel that needs credentials says which (``channel_warnings``).
A channel that reaches people (``ChannelAddress.people``: Slack) also takes
``<name>:@<person or group>`` (each person's direct message; an unknown name is a config error,
``person_problem``) and ``<name>:dm`` (each approver of the request); ``expand_channels``
turns both into one ``<name>:@<person>`` per person when a request is made.
Besides the addresses: the ``people:`` fields holding a person's id on a channel
(``PERSON_IDS``, read into ``Person.ids``) and each channel's own top-level section of
``app.yaml`` (``CHANNEL_SECTIONS``; records and parsers in ``.sections``), which ``AppConfig``
holds generically in ``channel_sections`` and reads through ``ChannelSections``.

This package (one unit: ``bench/channel_names.py`` counts it once) and ``bot.channels`` are the
only modules outside a channel's packages that name it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from engine.config.channels.sections import (
    SlackConfig,
    TeamsConfig,
    WebhookConfig,
    WebhooksConfig,
    parse_slack,
    parse_teams,
    parse_webhooks,
    slack_state,
    slack_warnings,
    teams_bind_problem,
    teams_state,
    teams_warnings,
)
from engine.config.sections import Person, PersonId, ServerConfig
from engine.config.values import NAME, suggest

__all__ = [
    "CHANNEL_ADDRESSES",
    "CHANNEL_SECTIONS",
    "PERSON_IDS",
    "ChannelAddress",
    "ChannelSection",
    "ChannelSections",
    "SlackConfig",
    "TeamsConfig",
    "WebhookConfig",
    "bind_problems",
    "channel_pattern",
    "channel_states",
    "channel_warnings",
    "check_channel",
    "each_approver_warnings",
    "expand_channels",
    "person_problem",
    "personal_problem",
    "personal_target",
    "target_problem",
]

T = TypeVar("T")


@dataclass(frozen=True)
class ChannelAddress:
    """How ``channels:`` addresses one channel."""

    name: str  # the prefix before ":" (or the whole address when ``target`` is None)
    target: str | None  # a pattern (Python ``re`` and JavaScript alike) of what follows ":"
    shape: str  # as messages spell it: "slack:<channel id>"
    bad_target: str | None = None  # the problem for a bad target ({target}: it, as JSON)
    # A channel that needs credentials: (its title, the keys that enable it). Addresses of it
    # parse without them but deliver nothing, which is a warning.
    needs: tuple[str, str] | None = None
    # Whether its credentials are set, from its own section of app.yaml (``signoff check``).
    state: Callable[[Any], str] | None = None
    # The prefix of targets naming a person or group of ``people:``/``groups:`` rather than a
    # place: the card goes to each one's own chat with the bot (``personal_problem``).
    personal: str | None = None
    # Whether it reaches people directly: ``<name>:@<person or group>`` and ``<name>:dm``.
    people: bool = False

    def matches_target(self, target: str) -> bool:
        return self.target is not None and re.fullmatch(self.target, target) is not None


CHANNEL_ADDRESSES: tuple[ChannelAddress, ...] = (
    # No target: the approval page, which every request has. Delivery skips every address
    # without a ":" (engine.domain.notify), so it gets no outbox message.
    ChannelAddress("web", None, "web"),
    ChannelAddress(
        "slack",
        r"[CGD][A-Z0-9]{2,}",
        "slack:<channel id>, slack:@<person or group>, slack:dm",
        bad_target=(
            "slack channel must be a channel id like C0123ABCD, @<person or group> or dm, "
            "got {target}"
        ),
        needs=(
            "Slack",
            "slack.botToken and slack.signingSecret, or slack.appToken in Socket Mode",
        ),
        state=slack_state,
        people=True,
    ),
    ChannelAddress(
        "teams",
        r"[\s\S]*\S[\s\S]*",
        "teams:<conversation name>",
        state=teams_state,
        personal="@",  # teams:@alice, teams:@finance: each one's personal chat with the bot
    ),
    ChannelAddress("webhook", NAME, "webhook:<name>"),
)


# The ``people:`` fields holding a person's id on a channel (``Person.ids``), in this order.
PERSON_IDS: tuple[PersonId, ...] = (
    PersonId(
        "slack",
        re.compile(r"[UW][A-Z0-9]{2,}\Z"),
        "must be a Slack user id like U012ABCDEF, got {value}",
    ),
    PersonId("teams"),  # the Azure AD object id
)


PERSONAL = "@"  # <channel>:@<person or group>: their direct messages
EACH_APPROVER = "dm"  # <channel>:dm: each approver of the request, in direct messages
_PERSON_TARGET = f"{PERSONAL}{NAME}|{EACH_APPROVER}"


def _shapes() -> str:
    shapes = [a.shape for a in CHANNEL_ADDRESSES]
    return ", ".join(shapes[:-1]) + " or " + shapes[-1]


def _personal(channel: str) -> tuple[str, str] | None:
    """(channel name, target) of an address to people (``@<name>`` or ``dm``), else None."""
    kind, sep, target = channel.partition(":")
    if not sep or re.fullmatch(_PERSON_TARGET, target) is None:
        return None
    if not any(a.people and a.name == kind for a in CHANNEL_ADDRESSES):
        return None
    return kind, target


def person_problem(channel: str, names: Collection[str]) -> str | None:
    """Why ``channel`` names a person or group that is not among ``names`` (``people:`` and
    ``groups:``), or None."""
    found = _personal(channel)
    if found is None or not found[1].startswith(PERSONAL):
        return None
    name = found[1][len(PERSONAL) :]
    if name in names:
        return None
    hint = suggest(name, names, list_all=False)
    return f"unknown person or group {json.dumps(name)} (people: and groups:){hint}"


def each_approver_warnings(channels: Iterable[str], at: Callable[[int], str]) -> list[str]:
    """``<name>:dm`` addresses of a node that has no approvers (nor project ``approvers:``):
    they load, and reach nobody."""
    return [
        f"{at(i)}: {channel} sends the card to each approver's direct messages, and there are "
        "none (the node names no approvers, nor does approvers:), so nobody gets it there"
        for i, channel in enumerate(channels)
        if (found := _personal(channel)) is not None and found[1] == EACH_APPROVER
    ]


def expand_channels(
    channels: Iterable[str], approvers: Iterable[str], expand: Callable[[Iterable[str]], Any]
) -> tuple[str, ...]:
    """``channels`` with each address to people as one ``<name>:@<person>`` per person, each
    once: ``<name>:dm`` for each of ``approvers`` (people), ``<name>:@<group>`` for each of
    its members (``expand``: groups to people). Other addresses stay as they are."""
    out: list[str] = []
    for channel in channels:
        found = _personal(channel)
        if found is None:
            out.append(channel)
            continue
        kind, target = found
        people = approvers if target == EACH_APPROVER else expand([target[len(PERSONAL) :]])
        out.extend(f"{kind}:{PERSONAL}{person}" for person in people)
    return tuple(dict.fromkeys(out))


def check_channel(channel: str) -> str | None:
    """Why ``channel`` is not a valid card destination, or None when it is."""
    kind, sep, target = channel.partition(":")
    if _personal(channel) is not None:
        return None
    for address in CHANNEL_ADDRESSES:
        if address.target is None:
            if channel == address.name:
                return None
        elif sep and kind == address.name:
            if address.matches_target(target):
                return None
            if address.bad_target is not None:
                return address.bad_target.format(target=json.dumps(target))
    return f"must be {_shapes()}, got {json.dumps(channel)}"


def channel_pattern() -> str:
    """Every valid address as one pattern (unanchored), for the stored-workflow schema."""
    return "|".join(
        a.name
        if a.target is None
        else f"{a.name}:(?:{a.target}|{_PERSON_TARGET})"
        if a.people
        else f"{a.name}:{a.target}"
        for a in CHANNEL_ADDRESSES
    )


def channel_warnings(
    channels: Iterable[str], at: Callable[[int], str], enabled: Callable[[str], bool]
) -> list[str]:
    """Addresses that parse but deliver nothing: their channel lacks its credentials.
    ``at(i)``: the YAML path of the i-th; ``enabled(name)``: whether that channel is set up."""
    out: list[str] = []
    for i, channel in enumerate(channels):
        for address in CHANNEL_ADDRESSES:
            if address.needs is None or enabled(address.name):
                continue
            if channel.startswith(f"{address.name}:"):
                title, keys = address.needs
                out.append(
                    f"{at(i)}: {title} is not configured ({keys}), so {channel} gets no card"
                )
    return out


def channel_states(section: Callable[[str], object]) -> list[tuple[str, str]]:
    """Each channel that needs credentials, and whether they are set; ``section(name)``: that
    channel's section of the configuration (``AppConfig.channel_sections``)."""
    return [(a.name, a.state(section(a.name))) for a in CHANNEL_ADDRESSES if a.state is not None]


@dataclass(frozen=True)
class ChannelSection:
    """A channel's own top-level section of ``app.yaml``."""

    channel: str  # the channel it configures: its key in ``AppConfig.channel_sections``
    key: str  # its YAML key
    parse: Callable[[Any, str, list[str], ServerConfig], object]  # (raw, path, problems, server)
    # The targets ``<channel>:<target>`` may name, when the section declares them; such a
    # section is read before the addresses that name them are checked.
    targets: Callable[[Any], Collection[str]] | None = None
    warnings: Callable[[Any], list[str]] = lambda _: []  # what loads but is likely a mistake
    # Why serving on the address bound (``by`` chose it) is refused, or None.
    bind_problem: Callable[[Any, str, str], str | None] | None = None


CHANNEL_SECTIONS: tuple[ChannelSection, ...] = (
    ChannelSection("webhook", "webhooks", parse_webhooks, targets=lambda s: s.hooks),
    ChannelSection("slack", "slack", parse_slack, warnings=slack_warnings),
    ChannelSection(
        "teams", "teams", parse_teams, warnings=teams_warnings, bind_problem=teams_bind_problem
    ),
)


def bind_problems(sections: Mapping[str, object], bound: str, by: str) -> list[str]:
    """Why the channels' ``sections`` refuse serving on ``bound`` (``by`` chose it)."""
    return [
        problem
        for each in CHANNEL_SECTIONS
        if each.bind_problem is not None and each.channel in sections
        if (problem := each.bind_problem(sections[each.channel], bound, by)) is not None
    ]


def target_problem(
    channel: str,
    sections: Mapping[str, object],
    people: Mapping[str, Person] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> str | None:
    """Why ``channel`` names a target its channel's section (of ``sections``) does not declare,
    or a person or group that ``people`` and ``groups`` lack (``personal_problem``), or None."""
    kind, _, target = channel.partition(":")
    if people is not None and (why := personal_problem(channel, people, groups or {})):
        return why
    for each in CHANNEL_SECTIONS:
        if each.targets is None or kind != each.channel or each.channel not in sections:
            continue
        declared = each.targets(sections[each.channel])
        if target not in declared:
            hint = suggest(target, declared, list_all=False)
            return f"unknown {each.channel} {json.dumps(target)}{hint}"
    return None


def personal_target(channel: str) -> tuple[str, str] | None:
    """``(channel name, person or group)`` when ``channel`` addresses people's personal chats
    (``teams:@finance``), else None."""
    kind, sep, target = channel.partition(":")
    for address in CHANNEL_ADDRESSES:
        if sep and kind == address.name and address.personal is not None:
            if target.startswith(address.personal):
                return kind, target[len(address.personal) :]
    return None


def personal_problem(
    channel: str, people: Mapping[str, Person], groups: Mapping[str, Sequence[str]]
) -> str | None:
    """Why ``channel``, addressing personal chats (``teams:@<person or group>``), reaches
    nobody: the name is no person or group, or none of them has an id on that channel."""
    found = personal_target(channel)
    if found is None:
        return None
    kind, name = found
    if name in groups:
        members = list(groups[name])
    elif name in people:
        members = [name]
    else:
        hint = suggest(name, [*people, *groups], list_all=False)
        return f"{json.dumps(channel)}: {json.dumps(name)} is no person or group{hint}"
    if not any(kind in people[m].ids for m in members if m in people):
        return (
            f"{json.dumps(channel)}: nobody in {name} has a {kind}: id in people:, so the card "
            "would reach no one"
        )
    return None


class ChannelSections:
    """``AppConfig``'s reading of the channels' sections: ``section(SlackConfig)`` by type, and
    for its many callers the attributes ``slack``, ``teams`` and ``webhooks``; people by their
    id on a channel (``person_by``)."""

    __slots__ = ()
    channel_sections: Mapping[str, object]  # channel name -> its section's record
    people: Mapping[str, Person]
    groups: Mapping[str, tuple[str, ...]]

    def section(self, kind: type[T]) -> T:
        """The channel section of type ``kind``; ``KeyError`` when there is none."""
        for value in self.channel_sections.values():
            if isinstance(value, kind):
                return value
        raise KeyError(kind.__name__)

    def target_problem(self, channel: str) -> str | None:
        """Why ``channel`` names a target, person or group this configuration lacks."""
        return target_problem(
            channel, self.channel_sections, self.people, self.groups
        ) or person_problem(channel, [*self.people, *self.groups])

    def expand_channels(self, channels: Iterable[str], approvers: Iterable[str]) -> tuple[str, ...]:
        """``expand_channels`` under this configuration's groups."""
        groups = self.groups
        return expand_channels(
            channels, approvers, lambda names: [p for n in names for p in groups.get(n, (n,))]
        )

    def person_by(self, channel: str, user_id: str) -> Person | None:
        """The person whose id on ``channel`` (``Person.ids``) is ``user_id``."""
        return next((p for p in self.people.values() if p.ids.get(channel) == user_id), None)

    @property
    def slack(self) -> SlackConfig:
        return self.section(SlackConfig)

    @property
    def teams(self) -> TeamsConfig:
        return self.section(TeamsConfig)

    @property
    def webhooks(self) -> Mapping[str, WebhookConfig]:
        return self.section(WebhooksConfig).hooks

    def person_by_slack(self, user_id: str) -> Person | None:
        return self.person_by("slack", user_id)

    def person_by_teams(self, aad_object_id: str) -> Person | None:
        return self.person_by("teams", aad_object_id)
