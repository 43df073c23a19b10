"""The cards' hostile values, sent as a run's input, appear as text on every page: the approval
page (through a link, and to a signed-in admin), the queue, the runs list, the run page, its
live stream, and error pages. No element, attribute or link of theirs survives, and invisible
characters are shown as escapes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from html.parser import HTMLParser
from urllib.parse import quote

import pytest

from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT
from tests.support.hostile import HIDDEN, HOSTILE
from tests.support.web import REFUND_DEMO, link_path, page, pending_request, sign_in

OUR_TAGS = {
    "html", "head", "meta", "title", "link", "body", "header", "nav", "a", "form", "input",
    "span", "button", "main", "p", "strong", "section", "h1", "h2", "h3", "dl", "dt", "dd",
    "code", "pre", "time", "ol", "li", "label", "textarea", "table", "thead", "tbody", "tr",
    "th", "td", "div", "select", "option", "ul", "script", "noscript", "progress", "br", "footer",
    "svg", "circle", "path",  # a card's state icon (cards/templates/web/card.html.j2)
}  # fmt: skip


OUR_SCRIPTS = {"/static/approval.js", "/static/live.js"}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self.text: list[str] = []
        self.scripts: list[str | None] = []  # each script's src

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [(k, v or "") for k, v in attrs]
        if tag == "script":
            self.scripts.append(dict(attrs).get("src"))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def assert_safe(html: str, value: str, *, in_attribute: bool = False) -> None:
    parsed = _Page()
    parsed.feed(html)
    assert set(parsed.tags) <= OUR_TAGS, set(parsed.tags) - OUR_TAGS
    assert set(parsed.scripts) <= OUR_SCRIPTS, parsed.scripts  # ours, none inline
    assert not [k for k, _ in parsed.attrs if k.startswith("on")]
    for key, url in parsed.attrs:
        if key in ("href", "src", "action"):
            assert url.startswith("/") and not url.startswith("//"), url
    assert "evil.example" not in "".join(v for _, v in parsed.attrs)
    assert not HIDDEN.search(html)
    if in_attribute:
        assert value in [v for _, v in parsed.attrs]
    elif not HIDDEN.search(value):
        # the value is there, as text (the page may show it inside JSON, and agent text on one
        # line, so compare without white space)
        text = "".join("".join(parsed.text).replace("\\n", "").split())
        assert "".join(value.split()) in text, value


@pytest.fixture
async def api(migrated_db_url: str) -> AsyncIterator[Api]:
    async with running_api(migrated_db_url, REFUND_DEMO, clock=ManualClock()) as api:
        yield api


async def test_hostile_values_are_text_on_every_page(api: Api) -> None:
    requests = {}
    for name, value in HOSTILE.items():
        run, _ = await api.engine.runs.start_run(
            # An agent may only name a sub-agent of its own token: the hostile part is the sub.
            "refund-demo",
            {"order": value},
            AGENT,
            agent=f"{AGENT.token}/{value}",
        )
        requests[name] = await pending_request(api.engine, run.id)

    for name, request in requests.items():
        value = HOSTILE[name]
        status, link_page = await page(api.client, link_path(api.client, request, "bob"))
        assert status == 200, name
        assert 'value="grant"' in link_page
        assert_safe(link_page, value)

    await sign_in(api.client, api.tokens["admin"])
    _, queue = await page(api.client, "/console")
    _, runs = await page(api.client, "/console/runs")
    for name, value in HOSTILE.items():
        assert_safe(queue, value)
        assert_safe(runs, value if name != "backticks" else "*bold*")  # agent names: one line
        request = requests[name]
        _, signed_in = await page(api.client, f"/approvals/{request.id}")
        assert_safe(signed_in, value)
        _, run_page = await page(api.client, f"/console/runs/{request.run_id}")
        assert_safe(run_page, value)
        stream = await api.client.get(f"/console/runs/{request.run_id}/events?after=0")
        chunk = (await stream.content.readuntil(b"event: status")).decode()
        stream.close()
        items = "".join(
            line[len("data: ") :] for line in chunk.splitlines() if line.startswith("data: ")
        )
        assert_safe(items, value)


async def test_hostile_paths_and_parameters_are_text_on_error_and_login_pages(api: Api) -> None:
    value = HOSTILE["html"]
    status, missing = await page(api.client, "/approvals/" + quote(value, safe=""))
    assert status == 404
    assert_safe(missing, value)

    status, login = await page(api.client, "/console/login?next=" + quote("/" + value))
    assert status == 200
    assert_safe(login, "/" + value, in_attribute=True)  # the hidden field's value

    status, bad_link = await page(api.client, "/approvals/x?p=" + quote(value) + "&exp=1&sig=0")
    assert status == 403
    assert_safe(bad_link, "this approval link is not valid")
