"""What the configuration knows of each channel: the one place in ``engine`` that names them.

A channel (``bot/<channel>/`` registers it, ``bot.channels`` lists it) owns an address prefix:
``<name>:<target>``, or its bare name when it has no targets (the approval page). The engine
never imports ``bot``, so the syntax of each lives here, as data: card destinations are
checked against it (``check_channel``), the stored-workflow JSON schema is built from it
(``channel_pattern``), and a channel that needs credentials says which (``channel_warnings``).
A channel that reaches people in their own chat with the bot (``ChannelAddress.people``: Slack,
Teams) also takes ``<name>:@<person or group>`` and ``<name>:dm`` (each approver of the
request); email also takes its bare name for ``<name>:dm`` and a person or group without the
"@" (``ChannelAddress.bare``, ``.unmarked``). ``person_problem`` refuses a name that is no
person or group, or a group nobody of which the channel can find; ``expand_channels`` turns
them all into one ``<name>:@<person>`` per person when a request is made, so each person's
copy is an outbox channel of its own, posted and updated like any other (``addressed_person``
reads the person back).
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from engine.config.channels.sections import (
    CHANNEL_SECTIONS,
    SLACK_TEAM,
    ChannelSection,
    SlackConfig,
    TeamsConfig,
    WebhookConfig,
    WebhooksConfig,
    bind_problems,
    slack_state,
    teams_state,
)
from engine.config.channels.smtp import MAILBOX, SmtpConfig, smtp_state
from engine.config.sections import Person, PersonId
from engine.config.values import NAME, suggest

__all__ = [
    "CHANNEL_ADDRESSES",
    "CHANNEL_SECTIONS",
    "PERSON_IDS",
    "ChannelAddress",
    "ChannelSection",
    "ChannelSections",
    "SlackConfig",
    "SmtpConfig",
    "TeamsConfig",
    "WebhookConfig",
    "addressed_person",
    "bind_problems",
    "channel_pattern",
    "channel_states",
    "channel_warnings",
    "check_channel",
    "each_approver_warnings",
    "expand_channels",
    "person_problem",
    "target_problem",
]

T = TypeVar("T")
Expand = Callable[[Iterable[str]], Any]  # names of people and groups -> people
Stand = Mapping[str, str] | None  # a person away -> their delegate (engine.domain.delegation)


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
    # When it reaches people in their own chat with the bot (``<name>:@<person or group>``,
    # ``<name>:dm``): the ``people:`` fields it can find a person by (an id on it, or
    # ``email`` when it looks people up by address); someone with none of them is unreachable.
    # Empty: it reaches places only.
    people: tuple[str, ...] = ()
    mentions: bool = False  # a message in a shared place can mention a person (requester)
    bare: bool = False  # to people: its bare name is ``<name>:dm`` (each approver)
    unmarked: bool = False  # to people: ``<name>:<person or group>`` needs no "@"

    def matches_target(self, target: str) -> bool:
        return self.target is not None and re.fullmatch(self.target, target) is not None


CHANNEL_ADDRESSES: tuple[ChannelAddress, ...] = (
    # No target: the approval page, which every request has. Delivery skips every address
    # without a ":" (engine.domain.notify), so it gets no outbox message.
    ChannelAddress("web", None, "web"),
    # ``slack:C0456``: a channel of the one workspace (botToken), or of the only one installed
    # (OAuth); ``slack:T0123/C0456``: a channel of workspace T0123, when several are installed.
    ChannelAddress(
        "slack",
        rf"(?:{SLACK_TEAM}/)?[CGD][A-Z0-9]{{2,}}",
        "slack:<channel id>, slack:@<person or group>, slack:dm",
        # The message names the common form; docs/slack.md tells the workspace form.
        bad_target=(
            "slack channel must be a channel id like C0123ABCD, @<person or group> or dm, "
            "got {target}"
        ),
        needs=(
            "Slack",
            "slack.botToken (or clientId and clientSecret) and slack.signingSecret, or "
            "slack.appToken in Socket Mode",
        ),
        state=slack_state,
        people=("slack", "email"),  # a Slack user is found by id, or looked up by email
        mentions=True,
    ),
    ChannelAddress(
        "teams",
        r"[^\x00]*[^\s\x00][^\x00]*",  # a name: not blank, no NUL (refused in every input)
        "teams:<conversation name>, teams:@<person or group>, teams:dm",
        state=teams_state,
        people=("teams",),  # a bot can write only to a personal chat stored by AAD object id
        mentions=True,
    ),
    # ``email:ops@example.com``: that mailbox; ``email:alice``, ``email:@finance``: each
    # person's ``people:`` email; ``email`` alone: each approver's.
    ChannelAddress(
        "email",
        MAILBOX,
        "email:<address>, email:<person or group>, email:@<person or group>, email",
        bad_target=(
            "email must be an address like ops@example.com, a person or group (with or "
            "without @) or nothing (each approver), got {target}"
        ),
        needs=("Email", "smtp.host and smtp.from"),
        state=smtp_state,
        people=("email",),  # a person's own mailbox: their people: email
        bare=True,
        unmarked=True,
    ),
    ChannelAddress("webhook", NAME, "webhook:<name>"),
)


# The ``people:`` fields holding a person's id on a channel (``Person.ids``), in this order.
PERSON_IDS: tuple[PersonId, ...] = (
    # ``U012ABCDEF``: that user in the one workspace (botToken) or the only one installed;
    # ``T0123ABCD/U012ABCDEF``: that user of workspace T0123ABCD, and of no other.
    PersonId(
        "slack",
        re.compile(rf"(?:{SLACK_TEAM}/)?[UW][A-Z0-9]{{2,}}\Z"),
        "must be a Slack user id like U012ABCDEF, got {value}",
    ),
    PersonId("teams"),  # the Azure AD object id
)


PERSONAL = "@"  # <channel>:@<person or group>: their own chats with the bot
EACH_APPROVER = "dm"  # <channel>:dm: each approver of the request, in their own chats
_PERSON_TARGET = f"{PERSONAL}{NAME}|{EACH_APPROVER}"


def _shapes() -> str:
    shapes = [a.shape for a in CHANNEL_ADDRESSES]
    return ", ".join(shapes[:-1]) + " or " + shapes[-1]


def _people_address(kind: str) -> ChannelAddress | None:
    """The channel named ``kind`` when it reaches people (``ChannelAddress.people``)."""
    return next((a for a in CHANNEL_ADDRESSES if a.people and a.name == kind), None)


def _personal(channel: str) -> tuple[str, str] | None:
    """(channel name, target) of an address to people, the target as ``@<name>`` or ``dm``
    (a bare name and an unmarked person read as these), else None."""
    kind, sep, target = channel.partition(":")
    address = _people_address(kind)
    if address is None:
        return None
    if not sep:
        return (kind, EACH_APPROVER) if address.bare else None
    if re.fullmatch(_PERSON_TARGET, target) is not None:
        return kind, target
    if address.unmarked and re.fullmatch(NAME, target) is not None:
        return kind, f"{PERSONAL}{target}"
    return None


def addressed_person(channel: str) -> str | None:
    """The person or group ``<name>:@<person or group>`` names (after ``expand_channels``: the
    one person whose own chat the card goes to), else None."""
    found = _personal(channel)
    if found is None or not found[1].startswith(PERSONAL):
        return None
    return found[1][len(PERSONAL) :]


def _reachable_by(fields: Sequence[str]) -> str:
    """``("slack", "email")`` as "a slack: id or an email:"."""
    return " or ".join("an email:" if f == "email" else f"a {f}: id" for f in fields)


def person_problem(
    channel: str, people: Mapping[str, Person], groups: Mapping[str, Sequence[str]]
) -> str | None:
    """Why ``channel``, an address to people (``slack:@finance``, ``teams:@alice``), reaches
    nobody: the name is no person or group of ``people``/``groups``, or nobody in it has a
    ``people:`` field its channel finds people by (``ChannelAddress.people``); else None."""
    name = addressed_person(channel)
    address = _people_address(channel.partition(":")[0])
    if name is None or address is None:
        return None
    if name in groups:
        members = [people[m] for m in groups[name] if m in people]
    elif name in people:
        members = [people[name]]
    else:
        hint = suggest(name, [*people, *groups], list_all=False)
        return f"unknown person or group {json.dumps(name)} (people: and groups:){hint}"
    fields = address.people
    if not any(m.reached_by(f) for m in members for f in fields):
        return (
            f"nobody in {name} has {_reachable_by(fields)} in people:, so {channel} would "
            "reach no one"
        )
    return None


def each_approver_warnings(channels: Iterable[str], at: Callable[[int], str]) -> list[str]:
    """``<name>:dm`` addresses of a node that has no approvers (nor project ``approvers:``):
    they load, and reach nobody."""
    return [
        f"{at(i)}: {channel} sends the card to each approver (their direct messages, their "
        "mailbox), and there are none (the node names no approvers, nor does approvers:), so "
        "nobody gets it there"
        for i, channel in enumerate(channels)
        if (found := _personal(channel)) is not None and found[1] == EACH_APPROVER
    ]


def expand_channels(
    channels: Iterable[str], approvers: Iterable[str], expand: Expand, delegates: Stand = None
) -> tuple[str, ...]:
    """``channels`` with each address to people as one ``<name>:@<person>`` per person, each
    once: ``<name>:dm`` for each of ``approvers`` (people), ``<name>:@<group>`` for each of its
    members (``expand``: groups to people), each followed by their delegate while away
    (``delegates``: person -> delegate). Other addresses stay as they are."""
    out: list[str] = []
    for channel in channels:
        found = _personal(channel)
        if found is None:
            out.append(channel)
            continue
        kind, target = found
        people = approvers if target == EACH_APPROVER else expand([target[len(PERSONAL) :]])
        for person in people:
            out += [f"{kind}:{PERSONAL}{p}" for p in (person, (delegates or {}).get(person)) if p]
    return tuple(dict.fromkeys(out))


def check_channel(channel: str) -> str | None:
    """Why ``channel`` is not a valid card destination, or None when it is."""
    kind, sep, target = channel.partition(":")
    if _personal(channel) is not None:
        return None
    if sep and target.startswith(PERSONAL) and _people_address(kind) is not None:
        return f"{kind}:@ must be followed by a person or group, got {json.dumps(channel)}"
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


def _pattern(a: ChannelAddress) -> str:
    if a.target is None:
        return a.name
    targets = [a.target, *([_PERSON_TARGET] if a.people else []), *([NAME] if a.unmarked else [])]
    pattern = f"{a.name}:(?:{'|'.join(targets)})"
    return f"{pattern}|{a.name}" if a.bare else pattern


def channel_pattern() -> str:
    """Every valid address as one pattern (unanchored), for the stored-workflow schema."""
    return "|".join(_pattern(a) for a in CHANNEL_ADDRESSES)


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
            if channel.startswith(f"{address.name}:") or (address.bare and channel == address.name):
                title, keys = address.needs
                out.append(
                    f"{at(i)}: {title} is not configured ({keys}), so {channel} gets no card"
                )
    return out


def channel_states(section: Callable[[str], object]) -> list[tuple[str, str]]:
    """Each channel that needs credentials, and whether they are set; ``section(name)``: that
    channel's section of the configuration (``AppConfig.channel_sections``)."""
    return [(a.name, a.state(section(a.name))) for a in CHANNEL_ADDRESSES if a.state is not None]


def target_problem(
    channel: str,
    sections: Mapping[str, object],
    people: Mapping[str, Person] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> str | None:
    """Why ``channel`` names a target its channel's section (of ``sections``) does not declare,
    or a person or group that ``people`` and ``groups`` lack (``person_problem``), or None."""
    kind, _, target = channel.partition(":")
    if people is not None and (why := person_problem(channel, people, groups or {})):
        return why
    for each in CHANNEL_SECTIONS:
        if each.targets is None or kind != each.channel or each.channel not in sections:
            continue
        declared = each.targets(sections[each.channel])
        if target not in declared:
            hint = suggest(target, declared, list_all=False)
            return f"unknown {each.channel} {json.dumps(target)}{hint}"
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
        return target_problem(channel, self.channel_sections, self.people, self.groups)

    def expand_channels(
        self, channels: Iterable[str], approvers: Iterable[str], delegates: Stand = None
    ) -> tuple[str, ...]:
        """``expand_channels`` under this configuration's groups."""
        groups = self.groups
        return expand_channels(
            channels, approvers, lambda ns: [p for n in ns for p in groups.get(n, (n,))], delegates
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
