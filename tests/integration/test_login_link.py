"""``signoff login-link``: a fresh one-time sign-in link when the one ``signoff serve`` printed
was used, against the database of the running server, on SQLite and PostgreSQL; and what an old
link says (used, or replaced by a newer one)."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp
import pytest

from tests.support.process import Server, cli, free_port, run_cli
from tests.support.web import csrf_of

LINK = re.compile(r"\(this link works once\): (http://\S+/console/login\?once=\S+)")
NO_SERVER = "no server answers at"


async def sign_in_with(http: aiohttp.ClientSession, link: str) -> tuple[int, str]:
    """Open the link and press *Sign in as the local admin*, as a browser does."""
    async with http.get(link) as resp:
        assert resp.status == 200, await resp.text()
        html = await resp.text()
    once = link.split("once=", 1)[1]
    form = {"csrf_token": csrf_of(html), "once": once, "next": "/console"}
    async with http.post(link.split("?", 1)[0], data=form, allow_redirects=False) as resp:
        return resp.status, await resp.text()


async def opened(http: aiohttp.ClientSession, link: str) -> tuple[int, str]:
    async with http.get(link) as resp:
        return resp.status, await resp.text()


def write_config(tmp_path: Path, url: str, port: int, extra: str = "") -> Path:
    config = tmp_path / "app.yaml"
    config.write_text(
        f"database: {{url: '{url}'}}\n"
        f"server: {{host: 127.0.0.1, port: {port}, pollSeconds: 0.2}}\n"
        "people: {alice: {email: alice@example.com}, bob: {email: bob@example.com}}\n"
        "admins: [alice, bob]\ngroups: {finance: [alice, bob]}\n" + extra
    )
    return config


async def test_a_used_link_is_renewed_by_login_link(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path, f"sqlite+aiosqlite:///{tmp_path}/s.db", port)
    await cli(config, "migrate")
    log = tmp_path / "server.log"
    server = Server(config, port, log)
    await server.start()
    try:
        (served,) = LINK.findall(log.read_text())
        jar = aiohttp.CookieJar(unsafe=True)  # keep the CSRF cookie of 127.0.0.1
        async with aiohttp.ClientSession(cookie_jar=jar) as http:
            assert (await sign_in_with(http, served))[0] == 303
            status, page = await opened(http, served)
            assert status == 410 and "already used" in page
            assert "Sign in as" not in page and "signoff login-link --person alice" in page

            code, out, err = await run_cli("login-link", "--config", str(config))
            assert code == 0 and NO_SERVER not in err, err
            (fresh,) = LINK.findall(out)
            assert fresh != served and fresh.startswith(f"http://127.0.0.1:{port}/")
            assert "as alice" in out
            assert (await sign_in_with(http, fresh))[0] == 303
            assert (await opened(http, fresh))[0] == 410  # it too works once
    finally:
        await server.stop()


async def test_login_link_on_either_database_follows_the_configured_port(
    tmp_path: Path, migrated_db_url: str
) -> None:
    """PostgreSQL too: the link is a token in the database the server reads, whichever it is.
    The address is the configuration's port, with no SIGNOFF_PORT; a link replaced before it
    was used says so, not "used"."""
    port = free_port()
    config = write_config(tmp_path, migrated_db_url, port)
    code, out, err = await run_cli("login-link", "--config", str(config), "--person", "bob")
    assert code == 0, err
    (early,) = LINK.findall(out)
    assert early.startswith(f"http://127.0.0.1:{port}/console/login?once=") and "as bob" in out
    note = f"note: no server answers at http://127.0.0.1:{port} now: start it with `signoff serve`"
    if migrated_db_url.startswith("sqlite"):  # serve prints a link of its own there
        note += " (at start it prints a link of its own, which replaces this one)"
    assert err.splitlines() == [note]
    log = tmp_path / "server.log"
    server = Server(config, port, log)
    await server.start()
    try:
        code, out, err = await run_cli("login-link", "--config", str(config))
        assert code == 0 and err == "", err
        (link,) = LINK.findall(out)
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as http:
            status, page = await opened(http, early)
            assert status == 410 and "replaced by a newer link" in page
            assert "already used" not in page and "Sign in as" not in page
            assert (await sign_in_with(http, link))[0] == 303
            async with http.get(f"http://127.0.0.1:{port}/console") as resp:
                assert resp.status == 200 and "alice · admin" in await resp.text()
    finally:
        await server.stop()


async def test_login_link_needs_an_admin(tmp_path: Path) -> None:
    config = tmp_path / "app.yaml"
    config.write_text(f"database: {{url: 'sqlite+aiosqlite:///{tmp_path}/s.db'}}\n")
    await cli(config, "migrate")
    code, out, err = await run_cli("login-link", "--config", str(config))
    assert code == 2 and "no admins" in err and out == ""
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("person", "said"),
    [
        ("finance", "--person 'finance' is a group (in groups:), not a person:"),
        ("carol", "--person 'carol' is not in admins: (admins: alice, bob)"),
        ("nobody", "--person 'nobody' is not in people: (people: alice, bob, carol)"),
    ],
)
async def test_login_link_refuses_a_group_or_someone_not_an_admin(
    tmp_path: Path, person: str, said: str
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/s.db"
    config = write_config(tmp_path, url, free_port(), "")
    config.write_text(
        config.read_text().replace(
            "bob: {email: bob@example.com}}", "bob: {email: b@x}, carol: {email: c@x}}"
        )
    )
    await cli(config, "migrate")
    before = await cli(config, "token", "list")
    code, out, err = await run_cli("login-link", "--config", str(config), "--person", person)
    assert code == 2 and out == "", err
    assert (
        err.splitlines() == [err.strip()]
        and said in err
        and err.rstrip().endswith("; no link made")
    )
    assert await cli(config, "token", "list") == before  # nothing stored
