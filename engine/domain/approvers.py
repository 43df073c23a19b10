"""Who is acting, and who may decide: the one home of these rules.

Every front end (REST API, web console, Slack, Teams, the CLI) asks here; none decides alone.

- **Admins** are the people listed in ``admins:`` (people only; the config refuses groups
  there), through any credential bound to them: an approver or admin token naming them, their
  Slack or Teams identity, a sign-in link. ``acting_role`` is that rule, for every front end:
  a token's person decides, checked on every request (an admin token whose person was removed
  from ``admins:`` acts as an approver from its next request on); an admin token naming no
  person acts as an approver; an agent token stays an agent's, whoever it names. ``signoff token
  create --role admin`` refuses a person who is not listed (``admin_token_problem``).
- **The acting agent** of a run or held call is the calling token's own name. A body ``agent``
  may only narrow it: it must be the token's name or a sub-name ``<token name>/<sub>`` (one
  agent token serving several bots). Naming anything else is refused (403) before anything is
  stored, so an agent cannot borrow another agent's gate settings.
- **Ratings** (feedback on steps) come from people only, never from agents.
- **Operator takeovers** of a run may be opened, and decided, only by the run's own deciders
  (``run_deciders``) and by admins; a request cannot appoint deciders beyond them.
- **The configuration in force now decides**: a request's approvers are fixed when it parks,
  but a person who is no longer in ``people:`` may not grant, deny, take over or release it,
  whatever the request, a signed link or a token says (admins are checked now too). A request
  also records the names its approvers were written as (``APPROVERS_AS_WRITTEN``: people and
  groups); those are expanded again under today's ``groups:``, and someone asked only through
  a group they have since left no longer decides (``current_approvers``).
- **Seeing a request**: its arguments and reason are shown to its approvers, admins and the
  run's starter (``may_see``); anyone else learns only that it exists.
- **Admin override**: an admin may decide any pending request of a run even when not among its
  approvers (recorded as ``{"override": "admin"}`` on the journal event and on the request);
  the four-eyes rules still hold (no deciding one's own run, nor the call of an agent acting
  for oneself).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Protocol

from engine.domain.delegation import seat
from engine.domain.errors import Forbidden
from engine.domain.model import ApiToken, Principal, Role, TakeoverRequest, Workflow

APPROVERS_AS_WRITTEN = "approversAsWritten"
"""The ``details`` key of a request that holds its approvers as written (people and groups, its
``escalateTo`` names too), before the groups were expanded when it parked."""

ADMIN_OVERRIDE = "admin"
"""The ``override`` value journaled when an admin decides a request they are not an approver of."""

SUB_AGENT = "/"  # separates a token's name from a sub-agent's: ``billing-bot/refunds``


class Contact(Protocol):
    """A person as the rules here know them: a name and the ids they act under in chat."""

    @property
    def name(self) -> str: ...
    @property
    def email(self) -> str | None: ...
    @property
    def ids(self) -> Mapping[str, str]: ...  # channel -> their id on it


class GateApprovers(Protocol):
    """Who decides what the confidence gate diverts (people and groups)."""

    @property
    def approvers(self) -> Sequence[str]: ...


class Roster(Protocol):
    """What these rules read of the project's people: ``engine.config.AppConfig`` is one. A
    protocol, so the domain never imports the configuration that loads them."""

    @property
    def people(self) -> Mapping[str, Contact]: ...
    @property
    def admins(self) -> Collection[str]: ...
    @property
    def approvers(self) -> Sequence[str]: ...  # the project's default deciders
    @property
    def gate(self) -> GateApprovers: ...

    def expand_people(self, names: Iterable[str]) -> tuple[str, ...]:
        """``names`` with every group replaced by its people, each once."""
        ...


# -- admins --------------------------------------------------------------------------------------


def is_admin(config: Roster, person: str | None) -> bool:
    """Whether ``person`` is an admin: listed in ``admins:``."""
    return person is not None and person in config.admins


def acting_role(config: Roster, role: Role, person: str | None) -> Role:
    """The role a credential of ``role`` bound to ``person`` (None: bound to nobody) acts with
    now. The person decides: listed in ``admins:``, they act as an admin; otherwise as an
    approver, also through an admin token (removed from ``admins:`` since it was made). An
    admin is a person: an admin token bound to nobody (made before admin tokens needed one)
    acts as an approver. An agent's credential stays an agent's: a bot acting for an admin is
    no admin."""
    if role == Role.AGENT:
        return role
    if person is None:
        return Role.APPROVER
    return Role.ADMIN if is_admin(config, person) else Role.APPROVER


def admin_refusal(config: Roster, role: Role, person: str | None) -> str | None:
    """Why a credential of ``role`` bound to ``person`` does not act as an admin, in the words of
    its owner; None when it does (``acting_role``)."""
    if acting_role(config, role, person) == Role.ADMIN:
        return None
    if role == Role.AGENT:
        return "this is an agent token, and agent tokens never act as admins"
    if person is None:
        return (
            f"this {role.value} token names no person, and only people listed in admins: "
            "act as admins"
        )
    if role == Role.ADMIN:
        return f"{person}'s token is an admin token, but {person} is not listed in admins:"
    return f"{person}'s token is an approver token and {person} is not listed in admins:"


def person_principal(config: Roster, person: str) -> Principal:
    """A person from ``people:`` acting in chat or through a signed link (``acting_role``)."""
    return Principal(name=person, role=acting_role(config, Role.APPROVER, person), person=person)


def token_principal(config: Roster, token: ApiToken) -> Principal:
    """Who acts through ``token`` (REST API, console session), its role as ``acting_role`` says
    now."""
    role = acting_role(config, token.role, token.person)
    if token.person is not None:
        return Principal(name=token.person, role=role, person=token.person, token=token.name)
    return Principal(name=f"token:{token.name}", role=role, token=token.name)


def admin_token_problem(config: Roster, person: str | None) -> str | None:
    """Why an admin token for ``person`` may not be created, or None."""
    if person is None:
        return "an admin token needs --person, someone listed in admins:"
    if not is_admin(config, person):
        listed = ", ".join(config.admins) or "nobody"
        return f"--person {person!r} is not in admins: (admins: {listed})"
    return None


# -- the acting agent ----------------------------------------------------------------------------


def acting_agent(who: Principal, claimed: str | None) -> str | None:
    """The agent a run or call is recorded under: the token's own name, or the sub-name the
    body's ``agent`` narrows it to. ``Forbidden`` when ``claimed`` names another agent."""
    own = who.token
    if claimed is None or claimed == "":
        return own if who.role == Role.AGENT else None
    if own is not None and (claimed == own or _is_sub_name(claimed, own)):
        return claimed
    if own is None:
        raise Forbidden(f"agent {claimed!r}: only an API token can name an agent")
    raise Forbidden(
        f"agent {claimed!r} is not this token's agent: use {own!r} or a sub-name "
        f"{own}{SUB_AGENT}<name> (or leave agent out)"
    )


def _is_sub_name(claimed: str, own: str) -> bool:
    prefix = own + SUB_AGENT
    return claimed.startswith(prefix) and len(claimed) > len(prefix)


def agent_layers(agent: str) -> tuple[str, ...]:
    """The agent names whose settings apply to ``agent``, least specific first: a sub-agent
    ``bot/refunds`` gets ``bot``'s settings, then its own on top."""
    head, sep, _ = agent.partition(SUB_AGENT)
    return (head, agent) if sep and head else (agent,)


# -- ratings -------------------------------------------------------------------------------------


def rating_refusal(who: Principal) -> str | None:
    """Why ``who`` may not rate a step, or None: only people rate, never agents."""
    if who.role == Role.AGENT:
        return "agents cannot rate steps; only people can"
    if who.person is None:
        return "only people can rate steps, and this token is not tied to a person"
    return None


# -- deciding requests ---------------------------------------------------------------------------


def session_person(config: Roster, session: str | None) -> str | None:
    """The person a call's ``session`` names: their name, email, Slack or Teams id."""
    if not session:
        return None
    for person in config.people.values():
        if session in (person.name, person.email, *person.ids.values()):
            return person.name
    return None


# The verb as a refusal says it: "you started this run, so you cannot deny it".
_DOING = {
    "grant": "approve it",
    "takeover": "take it over",
    "deny": "deny it",
    "release": "release it",
}


def decision_refusal(
    config: Roster, request: TakeoverRequest, who: Principal, verb: str = "grant"
) -> str | None:
    """Why ``who`` may not ``verb`` (grant, takeover, deny, release) ``request``, or None when
    they may. The sentence names the verb: "you cannot deny it". Releasing a granted request
    is ``release_refusal``'s rule."""
    if who.role == Role.AGENT:
        return "agents cannot decide approval requests"
    doing = _DOING.get(verb, "decide it")
    if who.person is not None and who.person not in config.people:
        # The request's approvers were fixed when it parked; the configuration in force now
        # says who may decide (a restart after removing someone ends their say).
        return f"{who.person} is no longer in people:, so you cannot {doing}"
    if who.person is not None and not who.is_admin and _left(config, request, who.person):
        # Asked through a group they have left since: the group as configured now decides.
        written = ", ".join(_written(request) or ())
        return (
            f"{who.person} is no longer among this request's approvers ({written}) under the "
            f"configuration in force, so you cannot {doing}"
        )
    if verb == "release" and request.decided_by is not None:
        return release_refusal(request, who)
    if not request.allow_self_approval and request.requested_by in (who.name, who.person):
        return f"you started this run, so you cannot {doing}"
    if not request.approvers or (who.person is not None and who.person in request.approvers):
        return None
    if who.is_admin and who.person is not None:
        own = session_person(config, _text(request.details.get("session")))
        if own == who.person:
            return f"the agent acts for you, so you cannot {doing}"
        return None  # an admin override
    return "you are not an approver for this request"


def may_see(request: TakeoverRequest, who: Principal | None) -> bool:
    """Whether ``who`` may see what ``request`` asks (its arguments, summary, reason and
    approvers): its approvers (any person or approver token when it names none), admins, whoever
    started its run, and whoever voted on, took over or released it. Nobody else, and no agent:
    the approval page shows them only that a request exists (link previewers open it too)."""
    if who is None or who.role == Role.AGENT:
        return False
    if who.is_admin or not request.approvers:
        return True
    names = {who.name, who.person} - {None}
    involved = {
        request.requested_by,
        request.decided_by,
        request.released_by,
        *request.approvers,
        *(vote.person for vote in request.votes),
    }
    return bool(names & involved)


def approvers_as_written(names: Iterable[str]) -> dict[str, list[str]]:
    """The ``details`` entry recording a request's approvers as written (``names``: people and
    groups, before expansion), each once; empty when none are named (anyone may decide)."""
    written = list(dict.fromkeys(names))
    return {APPROVERS_AS_WRITTEN: written} if written else {}


def current_approvers(config: Roster, request: TakeoverRequest) -> tuple[str, ...]:
    """Those of ``request``'s approvers (asked when it parked, on escalation, or for someone
    away: ``delegation.seat``) still among its approvers as written, expanded under ``config``'s
    groups now. A request without recorded names keeps its approvers as they are."""
    written = _written(request)
    if written is None:
        return request.approvers
    now = set(config.expand_people(written))  # a delegate decides while the one away would
    return tuple(p for p in request.approvers if seat(request, p) in now)


def _written(request: TakeoverRequest) -> tuple[str, ...] | None:
    """The recorded names, None when absent. Malformed (never written so) reads as no names:
    it fails closed, leaving only admins to decide."""
    if APPROVERS_AS_WRITTEN not in request.details:
        return None
    raw = request.details[APPROVERS_AS_WRITTEN]
    if not isinstance(raw, list):
        return ()
    return tuple(name for name in raw if isinstance(name, str))


def _left(config: Roster, request: TakeoverRequest, person: str) -> bool:
    """Whether ``person`` was asked to decide ``request`` but is no longer among its approvers
    as written, read under ``config``."""
    return person in request.approvers and person not in current_approvers(config, request)


def release_refusal(request: TakeoverRequest, who: Principal) -> str | None:
    """Who may release (or answer) a run taken over: the person who took it over (the run waits
    for their work), or an admin (journaled as such). Not another approver: the card says the
    run waits until the taker, or an admin, releases it."""
    if who.role == Role.AGENT:
        return "agents cannot decide approval requests"
    taker = request.decided_by
    if taker is None or who.is_admin or taker in (who.name, who.person):
        return None
    return f"{taker} took this run over, so only they or an admin can release it"


def releases_freely(request: TakeoverRequest, who: Principal) -> bool:
    """Whether ``who`` may release a granted request: ``release_refusal`` has no objection."""
    return request.decided_by is not None and release_refusal(request, who) is None


def override_of(config: Roster, request: TakeoverRequest, who: Principal) -> str | None:
    """``ADMIN_OVERRIDE`` when ``who`` (allowed to decide ``request``) decides it as an admin
    rather than as one of its approvers (``current_approvers``); None otherwise."""
    if not request.approvers or who.person in current_approvers(config, request):
        return None
    return ADMIN_OVERRIDE if who.is_admin else None


# -- operator takeovers --------------------------------------------------------------------------


def approver_names(*choices: Sequence[str]) -> tuple[str, ...]:
    """The approvers (names as written: people or groups) of a new request: the first of
    ``choices`` that names anyone, most specific first (the step's, the policy rule's or the
    gate's own, then the project's ``approvers:``); ``()`` lets any approver decide."""
    for names in choices:
        if names:
            return tuple(names)
    return ()


def run_deciders(config: Roster, workflow: Workflow | None) -> tuple[str, ...] | None:
    """The people who decide for a run of ``workflow``: the approvers and escalation targets its
    nodes name, else the project's default approvers, plus the gate's; None when nothing names
    anyone (then any approver decides, as for a request without approvers)."""
    named: list[str] = []
    if workflow is not None:
        for node in workflow.nodes:
            named += [*node.approvers, *node.escalate_to]
    named = list(approver_names(named, config.approvers))
    if named:
        named += config.gate.approvers
    people = config.expand_people(named)
    return people or None


def takeover_deciders(
    config: Roster,
    deciders: tuple[str, ...] | None,
    who: Principal,
    asked: Iterable[str],
) -> tuple[str, ...]:
    """The approvers of an operator takeover that ``who`` opens on a run whose deciders are
    ``deciders`` (``run_deciders``), with ``asked`` the people the request names (groups
    expanded). ``Forbidden`` when ``who`` may not open it or ``asked`` goes beyond the run."""
    if who.role == Role.AGENT:
        raise Forbidden("agents cannot request a takeover")
    asked = tuple(dict.fromkeys(asked))
    if deciders is None:
        return asked
    if not who.is_admin and (who.person is None or who.person not in deciders):
        raise Forbidden(
            f"{who.name} is not an approver of this run, so cannot take it over "
            f"(its approvers: {', '.join(deciders)}; admins may too)"
        )
    allowed = (*deciders, *config.admins)
    outside = [p for p in asked if p not in allowed]
    if outside:
        raise Forbidden(
            f"approvers: {', '.join(outside)} may not decide this run; a takeover request can "
            f"only name the run's approvers ({', '.join(deciders)}) or admins"
        )
    return asked or deciders


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


# -- escalation ----------------------------------------------------------------------------------


def escalated_approvers(request: TakeoverRequest) -> tuple[str, ...] | None:
    """Who may decide ``request`` once it escalates: its approvers and then the people it
    escalates to, each once. None when it names no approvers: any approver may decide it
    already, and escalating only tells more people."""
    if not request.approvers:
        return None
    return tuple(dict.fromkeys([*request.approvers, *request.escalate_to]))
