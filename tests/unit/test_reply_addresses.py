"""Signed reply addresses (``bot.email.reply_addresses``): one per request and recipient, within
RFC 5321's 64-character local part, read back to the one person they were made for, and
refused when altered, made with another key or for another domain."""

from __future__ import annotations

import pytest

from bot.email.reply_addresses import MAX_LOCAL, ReplyAddress, ReplyAddresses
from engine.services.links import Signer

PEOPLE = ("alice", "bob", "carol", "a-very-long-person-name-from-the-people-section-of-app-yaml")
UUID_ID = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"


@pytest.fixture
def addresses() -> ReplyAddresses:
    return ReplyAddresses(Signer("k" * 32), "signoff", "Replies.Example.com")


@pytest.mark.parametrize("request_id", [UUID_ID, "id-000003"])
@pytest.mark.parametrize("person", PEOPLE)
def test_an_address_reads_back_to_its_request_and_person(
    addresses: ReplyAddresses, request_id: str, person: str
) -> None:
    address = addresses.address(request_id, person)

    local, _, domain = address.partition("@")
    assert len(local) <= MAX_LOCAL and domain == "replies.example.com"
    assert addresses.read(address, PEOPLE) == ReplyAddress(request_id, person)
    assert addresses.read(address.upper(), PEOPLE) == ReplyAddress(request_id, person)
    assert addresses.read(f"  {address}\n", PEOPLE) == ReplyAddress(request_id, person)


def test_each_recipient_and_request_has_its_own(addresses: ReplyAddresses) -> None:
    made = {addresses.address(r, p) for r in (UUID_ID, "id-000003") for p in PEOPLE}

    assert len(made) == 2 * len(PEOPLE)


def test_a_person_no_longer_in_people_is_nobody(addresses: ReplyAddresses) -> None:
    assert addresses.read(addresses.address(UUID_ID, "bob"), ("alice", "carol")) is None


def test_altered_foreign_and_malformed_addresses_are_refused(addresses: ReplyAddresses) -> None:
    address = addresses.address(UUID_ID, "bob")
    local, _, _ = address.partition("@")
    token = local.partition("+")[2]
    flipped = token[:20] + ("a" if token[20] != "a" else "b") + token[21:]
    padded = token[:-1] + ("b" if token[-1] == "a" else "a")  # the same bits, spelled otherwise
    other_key = ReplyAddresses(Signer("x" * 32), "signoff", "replies.example.com")

    for bad in (
        f"signoff+{flipped}@replies.example.com",  # altered
        f"signoff+{padded}@replies.example.com",
        other_key.address(UUID_ID, "bob"),  # another deployment's key
        address.replace("replies.example.com", "example.com"),  # another domain
        address.replace("signoff+", "approvals+"),  # another mailbox
        "signoff@replies.example.com",  # no token
        "signoff+@replies.example.com",
        f"signoff+{token}!@replies.example.com",
        f"signoff+{'a' * 200}@replies.example.com",
        f"signoff+{token[:8]}@replies.example.com",
        "not an address",
        "",
    ):
        assert addresses.read(bad, PEOPLE) is None, bad
