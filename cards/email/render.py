"""Render an ``ApprovalView`` or a notice as an email: a subject, a text part and an HTML part.

The HTML part is tables and inline styles only (``cards/templates/email/_layout.html.j2``), so
that Outlook's Word engine and Gmail draw it alike; it has no scripts, no remote images and no
forms: the one action is a link to the approval page, where the decision is a POST (opening
the link, as mail scanners and link previews do, decides nothing). The arguments are the
canonical JSON, shown up to ``EMAIL_ARGUMENT_CHARS`` characters, with the cards' words for what
was left out. Times are shown in the recipient's time zone (``cards.email.templating.local``).

Subjects are one line (``subject_line``): a title with a CR or LF in it cannot start a header of
its own. Every reply in a request's thread has the card's subject with "Re: " before it
(``thread_subject``), whatever the request's state, so that clients thread by subject too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cards.email.templating import EMAIL_HTML, EMAIL_TEXT
from cards.render import CardRenderer
from cards.templating import words
from cards.text import Excerpt, Flavor, agent_text, excerpt_arguments, truncate
from cards.view import ApprovalView, safe_url

__all__ = [
    "EMAIL_ARGUMENT_CHARS",
    "Email",
    "render_email_card",
    "render_email_notice",
    "subject_line",
    "thread_subject",
]

# The last line of every email: whether a reply decides (``smtp.inbound``, to a person who may).
FOOTER = {
    True: "Sent by Signoff. Reply with approve or deny as the first word (a reason may follow) "
    "to decide by email.",
    False: "Sent by Signoff. Replies to this address are not read.",
}
EMAIL_ARGUMENT_CHARS = 20_000  # keeps the HTML part well under Gmail's 102 KB clipping
SUBJECT_CHARS = 150
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")


@dataclass(frozen=True)
class Email:
    """One message's content; the headers are the sink's (``bot.email.message``)."""

    subject: str
    text: str
    html: str

    def as_dict(self) -> dict[str, str]:
        return {"subject": self.subject, "text": self.text, "html": self.html}


def subject_line(text: str, limit: int = SUBJECT_CHARS) -> str:
    """``text`` as a subject: one line, no control characters, at most ``limit`` characters."""
    line = _CONTROL.sub(" ", agent_text(text)).strip()
    return truncate(line, limit, Flavor.PLAIN, cost=len) or "Signoff"


def thread_subject(view: ApprovalView) -> str:
    """The subject of a request's thread: what is asked ("Approval needed"), the card's title
    and reason (its summary) and the connector's action when neither names it."""
    about = " — ".join(part for part in (view.title, view.reason) if part)
    if view.connector and view.action and f"{view.connector} · {view.action}" not in about:
        about = f"{about} ({view.connector} · {view.action})"
    return subject_line(f"{words('STATE')['pending']}: {about}")


def _excerpt(view: ApprovalView) -> Excerpt:
    if view.arguments_json is None:
        return Excerpt((), 0)
    return excerpt_arguments(
        view.arguments_json,
        Flavor.PLAIN,
        budget=EMAIL_ARGUMENT_CHARS,
        chunk_size=EMAIL_ARGUMENT_CHARS,
        cost=len,
    )


def render_email_card(
    view: ApprovalView,
    *,
    link: str | None,
    tz: str | None = None,
    personal: bool = False,
    replies: bool = False,
) -> Email:
    """The approval email for ``view``. ``link``: where its button goes (the recipient's own
    signed link when ``personal``, else the approval page, which asks them to sign in);
    ``tz``: the recipient's time zone (``people:`` ``tz``), else times are shown in UTC;
    ``replies``: a reply to it decides (``FOOTER``)."""
    excerpt = _excerpt(view)
    subject = thread_subject(view)
    context: dict[str, Any] = {
        "v": view,
        "arguments": excerpt.text,
        "omitted": excerpt.omitted,
        "link": safe_url(link),
        "tz": tz,
        "personal": personal,
        "subject": subject,
        "footer": FOOTER[replies],
    }
    return Email(
        subject=subject,
        text=EMAIL_TEXT.get_template("email/card.txt.j2").render(**context),
        html=EMAIL_HTML.get_template("email/card.html.j2").render(**context),
    )


def render_email_notice(
    name: str,
    notice: Any,
    *,
    tz: str | None = None,
    link: str | None = None,
    subject: str | None = None,
    replies: bool = False,
) -> Email:
    """The notice template ``name`` (``notice_<kind>``) for ``notice`` (``cards.notices``) as
    an email. ``subject``: its thread's ("Re: ..."); else its own first line. ``replies``: a
    reply to it decides (``FOOTER``)."""
    context: dict[str, Any] = {
        "n": notice,
        "tz": tz,
        "link": safe_url(link),
        "footer": FOOTER[replies],
    }
    text = EMAIL_TEXT.get_template(f"email/{name}.txt.j2").render(**context, subject="")
    own = subject_line(text.strip().partition("\n")[0])
    chosen = subject_line(subject) if subject else own
    html = EMAIL_HTML.get_template(f"email/{name}.html.j2").render(**context, subject=chosen)
    return Email(subject=chosen, text=text, html=html)


def _sample_card(view: ApprovalView) -> dict[str, str]:
    """The email as ``signoff cards render`` prints it: the button goes to the page."""
    return render_email_card(view, link=view.approval_url).as_dict()


def _notice(name: str, notice: Any) -> dict[str, str]:
    return render_email_notice(name, notice).as_dict()


RENDERER = CardRenderer(card=_sample_card, notice=_notice)
