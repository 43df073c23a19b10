"""The Microsoft Teams front end, on the same aiohttp app as the API.

    bot.teams.channel.install(app, engine)   mounts POST /api/messages and registers the
                                             ``teams`` outbox sink (its ``CHANNEL`` record)

This package's own module imports nothing, so that ``signoff teams package`` (``cli``) starts
without the Bot Framework SDK. Modules: ``channel`` (the record and its install), ``adapter``
(the only one importing the Bot Framework SDK), ``activities`` (the plain types it exchanges
with the rest), ``tokens`` (the JWT check before the body is read),
``handlers`` (activities to engine calls, through ``bot.replies``), ``personal`` (a person's
1:1 chat with the bot: install, ``pending``), ``messages`` (cards and notices as Teams shows
them), ``sink`` (outbox delivery, ``teams:@<person or group>`` included), ``pacing`` (Teams
rate limits), ``refusals`` (the bounded log of refused requests), ``package`` (``signoff teams
package``).

An endpoint that cannot verify its caller acts on nothing. With ``teams.appId`` set, every
request must carry a Bot Framework JWT from the configured issuer for that app id; it is
checked from the Authorization header alone before the body is read (401 otherwise), and the
body is then parsed with ``engine.domain.json_input`` (400 for what it refuses). Without an app id,
``/api/messages`` is not mounted (404) and nothing is delivered to Teams. The one exception
is ``teams.insecureLocalDev: true``, accepted only on loopback (``server.host``, and
``signoff serve`` checks the address it actually listens on): then unsigned requests are
accepted (the Agents Playground, the tests), with a loud warning at start.

With ``teams.tenantId`` set, an activity from another tenant, or naming none, is refused with
403 whatever its token (``activities.tenant_refusal``), unsigned ones included.
"""
