"""Where the Teams bot sends requests: replies only to the Bot Framework's own services, files only from the hosts
Teams keeps them on. An activity names both URLs itself (`serviceUrl`, an attachment's `downloadUrl`), so nothing
is sent to a URL before it is checked here.

Without credentials (the SDK's unauthenticated mode, for the Emulator and tests) anyone who can reach the
endpoint can name any URL, so only this machine is allowed: loopback. With credentials the channel's token binds
the `serviceUrl` (botbuilder checks its `serviceurl` claim; its own list of trusted service URLs is obsolete
and checks nothing), and the hosts below are checked besides.
"""
from __future__ import annotations

from urllib.parse import urlsplit

from adapters.addresses import is_loopback
from adapters.web import UrlPolicy

# The Bot Connector of each cloud Teams runs in (the hosts the Teams SDK allows), and the Bot Framework's own
# channels (Web Chat, Direct Line: the Azure portal's "Test in Web Chat").
SERVICE_HOSTS = frozenset({
    "smba.trafficmanager.net", "smba.onyx.prod.teams.trafficmanager.net", "smba.infra.gcc.teams.microsoft.com",
    "smba.infra.gov.teams.microsoft.us", "smba.infra.dod.teams.microsoft.us",
    "frontend.botapi.msg.infra.teams.microsoftonline.cn",
})
SERVICE_DOMAINS = ("botframework.com", "botframework.azure.us")
# Files sent to a bot are pre-authorised SharePoint/OneDrive links (and Graph, which serves the same content), in
# each cloud.
FILE_HOSTS = frozenset({"graph.microsoft.com", "graph.microsoft.us", "dod-graph.microsoft.us",
                        "microsoftgraph.chinacloudapi.cn", "onedrive.live.com"})
FILE_DOMAINS = ("sharepoint.com", "sharepoint.us", "sharepoint-mil.us", "sharepoint.cn", "1drv.com")


def service_url_policy(authenticated: bool) -> UrlPolicy:
    """Which `serviceUrl`s replies may be posted to: loopback (the Emulator, which also runs with credentials),
    and with credentials the Bot Framework's services."""
    return lambda url: _allowed(url, loopback=True, hosts=SERVICE_HOSTS if authenticated else frozenset(),
                                domains=SERVICE_DOMAINS if authenticated else ())


def file_url_policy(authenticated: bool) -> UrlPolicy:
    """Which URLs (a `downloadUrl` and each of its redirects) a file may be downloaded from: with credentials
    Teams' file hosts, without them loopback only (the Emulator and tests)."""
    if authenticated:
        return lambda url: _allowed(url, loopback=False, hosts=FILE_HOSTS, domains=FILE_DOMAINS)
    return lambda url: _allowed(url, loopback=True, hosts=frozenset(), domains=())


def _allowed(url: str, *, loopback: bool, hosts: frozenset[str], domains: tuple[str, ...]) -> bool:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        return False
    host = (parts.hostname or "").lower()
    if is_loopback(host):
        return loopback and parts.scheme in ("http", "https")
    return parts.scheme == "https" and (host in hosts or any(host.endswith("." + domain) for domain in domains))


__all__ = ["FILE_DOMAINS", "FILE_HOSTS", "SERVICE_DOMAINS", "SERVICE_HOSTS", "file_url_policy", "service_url_policy"]
