"""``signoff login-link``: a fresh one-time sign-in link when the one ``signoff serve`` printed
was used, against the database of the running server; and what an old link says (used, or
replaced by a newer one)."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp

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
            status, page = await opened(http, served)  # used, then replaced: the newer wins
            assert status == 410 and "replaced by a newer link" in page
            assert (await sign_in_with(http, fresh))[0] == 303
            assert (await opened(http, fresh))[0] == 410  # it too works once
    finally:
        await server.stop()


async def test_login_link_needs_an_admin(tmp_path: Path) -> None:
    config = tmp_path / "app.yaml"
    config.write_text(f"database: {{url: 'sqlite+aiosqlite:///{tmp_path}/s.db'}}\n")
    await cli(config, "migrate")
    code, out, err = await run_cli("login-link", "--config", str(config))
    assert code == 2 and "no admins" in err and out == ""
    assert len(err.splitlines()) == 1
