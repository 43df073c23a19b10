"""The Bot Framework SDK's outbound calls through the proxy curl's rules choose (part of the
boundary ``bot.teams.adapter`` draws: a switch of SDK rewrites both modules).

msrest (every Bot Connector call) and msal (the app's login) send with ``requests``, which reads
the proxy variables itself and applies ``NO_PROXY`` by rules of its own (a plain suffix match:
``ample.com`` covers ``example.com``). Here each connector client, made per serviceUrl, and each
login get the proxy ``engine.domain.proxies`` chooses for their URL, with the environment off
(``trust_env``); the rest of the SDK is untouched.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import requests
from botbuilder.integration.aiohttp import (
    ConfigurationBotFrameworkAuthentication,
    ConfigurationServiceClientCredentialFactory,
)
from botframework.connector.auth import ConnectorFactory
from msal import ConfidentialClientApplication

from engine.domain.proxies import ProxySettings


class ProxiedAuthentication(ConfigurationBotFrameworkAuthentication):  # type: ignore[misc]
    """The SDK's authentication, its connector clients and logins through the chosen proxy."""

    def __init__(self, settings: SimpleNamespace, proxies: ProxySettings) -> None:
        super().__init__(settings, credentials_factory=_ProxiedCredentials(settings, proxies))
        self.proxies = proxies

    def create_connector_factory(self, claims_identity: Any) -> ConnectorFactory:
        return _ProxiedConnectors(super().create_connector_factory(claims_identity), self.proxies)


class _ProxiedConnectors(ConnectorFactory):  # type: ignore[misc]
    def __init__(self, inner: ConnectorFactory, proxies: ProxySettings) -> None:
        self.inner = inner
        self.proxies = proxies

    async def create(self, service_url: str, audience: str | None = None) -> Any:
        client = await self.inner.create(service_url, audience)
        client.config.proxies.use_env_settings = False  # msrest: requests' trust_env
        client.config.proxies.proxies = _requests_proxies(self.proxies, service_url)
        return client


class _ProxiedCredentials(ConfigurationServiceClientCredentialFactory):  # type: ignore[misc]
    def __init__(self, settings: SimpleNamespace, proxies: ProxySettings) -> None:
        super().__init__(settings)
        self.proxies = proxies

    async def create_credentials(self, *args: Any, **kwargs: Any) -> Any:
        credentials = await super().create_credentials(*args, **kwargs)
        password = getattr(credentials, "microsoft_app_password", None)
        if password and getattr(credentials, "app", "") is None:  # MicrosoftAppCredentials
            credentials.app = _Login(credentials, password, self.proxies)
        return credentials


class _Login:
    """The msal app ``MicrosoftAppCredentials`` would make, with the chosen proxy; made on the
    first token request, as the SDK's is (msal fetches its authority's metadata when made)."""

    def __init__(self, credentials: Any, password: str, proxies: ProxySettings) -> None:
        self.credentials = credentials
        self.password = password
        self.proxies = proxies
        self._app: ConfidentialClientApplication | None = None

    def _msal(self) -> ConfidentialClientApplication:
        if self._app is None:
            session = requests.Session()
            session.trust_env = False
            endpoint = self.credentials.oauth_endpoint
            session.proxies = _requests_proxies(self.proxies, endpoint)
            self._app = ConfidentialClientApplication(
                client_id=self.credentials.microsoft_app_id,
                client_credential=self.password,
                authority=endpoint,
                http_client=session,
            )
        return self._app

    def acquire_token_silent(self, *args: Any, **kwargs: Any) -> Any:
        return self._msal().acquire_token_silent(*args, **kwargs)

    def acquire_token_for_client(self, *args: Any, **kwargs: Any) -> Any:
        return self._msal().acquire_token_for_client(*args, **kwargs)


def _requests_proxies(proxies: ProxySettings, url: str) -> dict[str, str]:
    """``requests``' proxies argument for calls to ``url`` (empty: direct)."""
    chosen = proxies.proxy_for(url)
    return {} if chosen is None else {url.partition(":")[0].lower(): chosen}
