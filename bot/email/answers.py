"""Signoff's answers to replies to decide (``bot.email.inbound``): queued in the outbox as one
message of kind ``answer`` on the sender's ``email:<mailbox>``, so they are sent like every
other email (retried, paced, never twice: the dedupe key is the reply's), and sent as text
alone, in the reply's own thread."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from bot.email.inbound import Answer
from bot.email.message import message_id
from cards.email.render import Email, subject_line
from engine.domain.model import OutboxMessage, OutboxRecord

ANSWER = "answer"  # the outbox kind
_MESSAGE_ID = re.compile(r"<[^<>\s\"\\]{1,250}>")


def answer_message(answer: Answer) -> OutboxMessage:
    """The outbox message that sends ``answer``."""
    key = hashlib.sha256(answer.key.encode()).hexdigest()[:40]
    payload: dict[str, Any] = {
        "subject": answer.subject,
        "text": answer.text,
        "inReplyTo": answer.in_reply_to,
        "requestId": answer.request_id,
    }
    return OutboxMessage(
        channel=f"email:{answer.to}", kind=ANSWER, dedupe_key=f"email:answer:{key}", payload=payload
    )


def answer_of(message: OutboxRecord, domain: str) -> tuple[Email, str, str | None]:
    """What an ``answer`` message sends: its content, its Message-ID and the reply it answers
    (None when the reply's own Message-ID is not one a header can carry)."""
    payload = message.payload
    replied = str(payload.get("inReplyTo") or "")
    text = str(payload.get("text", ""))
    content = Email(subject=subject_line(str(payload.get("subject", ""))), text=text, html="")
    in_reply_to = replied if _MESSAGE_ID.fullmatch(replied) else None
    return content, message_id(message.dedupe_key, domain), in_reply_to
