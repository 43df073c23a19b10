"""The email channel's configuration: ``smtp:``, ``people:`` ``tz`` and the ``email`` addresses,
each bad value refused at its YAML path; the password never shown."""

from __future__ import annotations

import re

import pytest

from engine.config import parse_config
from engine.config.channels import SmtpConfig, channel_pattern, channel_states, check_channel
from engine.config.workflow_schema import anchored
from engine.domain.errors import ConfigError

PEOPLE = """
people:
  alice: {email: alice@example.com, tz: Europe/Berlin}
  bob: {email: bob@example.com}
  nomail: {slack: U0NOMAIL1}
groups:
  finance: [alice, bob]
  silent: [nomail]
approvers: [finance]
"""
SMTP = "smtp: {host: mail.example.com, from: signoff@example.com}\n"


def _problems(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, env or {})
    return caught.value.problems


def _node(channel: str) -> str:
    return (
        "workflows:\n  pay:\n    nodes:\n"
        f"      - {{id: ask, type: approval, approvers: [finance], channels: ['{channel}']}}\n"
    )


def test_smtp_defaults_and_a_password_from_the_environment_that_is_never_shown() -> None:
    text = (
        "smtp: {host: mail.example.com, user: signoff, password: '${SMTP_PASSWORD}', "
        "from: signoff@example.com, minIntervalSeconds: 0.5}\n"
    )
    config = parse_config(text, {"SMTP_PASSWORD": "hunter2-secret"})
    smtp = config.section(SmtpConfig)
    assert (smtp.host, smtp.port, smtp.security, smtp.user) == (
        "mail.example.com",
        587,
        "starttls",
        "signoff",
    )
    assert smtp.password == "hunter2-secret" and smtp.min_interval_seconds == 0.5
    assert smtp.from_domain == "example.com" and smtp.enabled
    assert "hunter2" not in repr(smtp) and "hunter2" not in repr(config)
    states = dict(channel_states(config.channel_sections.__getitem__))
    assert states["email"].startswith("set (mail.example.com:587, starttls, signing in as")
    assert "hunter2" not in states["email"]
    implicit = parse_config("smtp: {host: m.example.com, security: tls, from: a@example.com}", {})
    assert implicit.section(SmtpConfig).port == 465
    assert dict(channel_states(parse_config("", {}).channel_sections.__getitem__))["email"] == (
        "unset"
    )


@pytest.mark.parametrize(
    ("smtp", "problem"),
    [
        ("{host: mail.example.com, from: a@example.com, security: none}", "smtp.security: none"),
        ("{host: mail.example.com, from: a@example.com, security: ssl}", "smtp.security: must be"),
        ("{host: mail.example.com, from: 'Signoff <a@example.com>'}", "smtp.from: not an email"),
        ("{host: mail.example.com}", "smtp.from: required"),
        ("{host: 'mail example', from: a@example.com}", "smtp.host: not a host"),
        ("{host: mail.example.com, from: a@example.com, port: 0}", "smtp.port: must be"),
        ("{host: m.example.com, from: a@example.com, password: x}", "smtp.user: required"),
        ("{host: m.example.com, from: a@example.com, timeoutSeconds: 0}", "smtp.timeoutSeconds"),
        ("{host: m.example.com, from: a@example.com, relay: yes}", "smtp.relay: unknown key"),
    ],
)
def test_a_bad_smtp_section_fails_at_its_path(smtp: str, problem: str) -> None:
    problems = _problems(f"smtp: {smtp}\n")
    assert any(p.startswith(problem) for p in problems), problems


def test_no_encryption_is_allowed_to_this_machine_only() -> None:
    for host in ("127.0.0.1", "localhost", "::1"):
        config = parse_config(f"smtp: {{host: '{host}', security: none, from: a@b.example}}", {})
        assert config.section(SmtpConfig).security == "none"
        assert config.section(SmtpConfig).port == 25


def test_a_time_zone_must_be_one_zoneinfo_knows() -> None:
    assert parse_config(PEOPLE, {}).people["alice"].tz == "Europe/Berlin"
    for bad in ("Mars/Olympus", "../../etc/passwd", "x" * 100):
        problems = _problems(f"people:\n  alice: {{tz: '{bad}'}}\n")
        assert problems[0].startswith("people.alice.tz: not a time zone name"), problems


@pytest.mark.parametrize(
    ("channel", "expanded"),
    [
        ("email", ("email:@alice", "email:@bob")),
        ("email:dm", ("email:@alice", "email:@bob")),
        ("email:alice", ("email:@alice",)),
        ("email:@alice", ("email:@alice",)),
        ("email:finance", ("email:@alice", "email:@bob")),
        ("email:@finance", ("email:@alice", "email:@bob")),
        ("email:ops+approvals@example.com", ("email:ops+approvals@example.com",)),
    ],
)
def test_email_addresses_expand_to_one_address_per_person(
    channel: str, expanded: tuple[str, ...]
) -> None:
    config = parse_config(PEOPLE + SMTP + _node(channel), {})
    assert not [w for w in config.warnings if "channels" in w]
    node = config.workflows["pay"].nodes[0]
    assert config.expand_channels(node.channels, ["alice", "bob"]) == expanded
    assert re.fullmatch(anchored(channel_pattern()), channel)


@pytest.mark.parametrize(
    ("channel", "problem"),
    [
        ("email:ghost", 'unknown person or group "ghost"'),
        ("email:@silent", "nobody in silent has an email: in people:"),
        ("email:nomail", "nobody in nomail has an email: in people:"),
        ("email:a@@example.com", "email must be an address like ops@example.com"),
        ("email:ops@example.com\\nBcc: x@evil.example", "email must be an address"),
        ("email:ops@localhost", "email must be an address"),
    ],
)
def test_a_bad_email_address_fails_at_its_path(channel: str, problem: str) -> None:
    problems = _problems(PEOPLE + SMTP + _node(channel.replace("\\n", "\n")))
    assert problems[0].startswith("workflows.pay.nodes[0].channels[0]: "), problems
    assert problem in problems[0]


def test_email_without_smtp_loads_with_a_warning() -> None:
    config = parse_config(PEOPLE + _node("email"), {})
    assert config.warnings[1:] == (
        "workflows.pay.nodes[0].channels[0]: Email is not configured (smtp.host and smtp.from), "
        "so email gets no card",
    )
    assert check_channel("email") is None and check_channel("emails") is not None
