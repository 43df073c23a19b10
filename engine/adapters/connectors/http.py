"""The HTTP connector: one JSON request per action, with an ``Idempotency-Key`` header so the
remote service can recognise a retry of the same step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp

from engine.adapters.outbound import client_session
from engine.domain.errors import ConnectorError
from engine.domain.proxies import ProxySettings
from engine.ports import ConnectorCall

_RETRYABLE = {408, 425, 429, 500, 502, 503, 504}


class HttpConnector:
    def __init__(
        self,
        name: str,
        base_url: str,
        *,
        actions: Mapping[str, tuple[str, str]] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_seconds: float = 10.0,
        proxies: ProxySettings | None = None,
    ) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.actions = dict(actions or {})  # action -> (method, path)
        self.headers = dict(headers or {})
        self.timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self.proxies = proxies or ProxySettings()
        self._session: aiohttp.ClientSession | None = None

    async def call(self, call: ConnectorCall) -> Any:
        method, path = self.actions.get(call.action, ("POST", "/" + call.action))
        headers = {**self.headers, "Idempotency-Key": call.idempotency_key}
        url = self.base_url + path
        try:
            session = self._session_for_loop()
            kwargs: dict[str, Any] = {"headers": headers}
            if method == "GET":
                kwargs["params"] = {k: str(v) for k, v in call.args.items()}
            else:
                kwargs["json"] = dict(call.args)
            async with session.request(method, url, **kwargs) as resp:
                text = await resp.text()
                if resp.status >= 400:
                    raise ConnectorError(
                        f"{self.name}.{call.action}: HTTP {resp.status}: {text[:300]}",
                        retryable=resp.status in _RETRYABLE,
                        status=resp.status,
                    )
                if resp.content_type == "application/json" and text:
                    return await resp.json()
                return {"status": resp.status, "body": text}
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ConnectorError(
                f"{self.name}.{call.action}: {type(exc).__name__}: {exc}", retryable=True
            ) from exc

    def _session_for_loop(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = client_session(self.proxies, timeout=self.timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
