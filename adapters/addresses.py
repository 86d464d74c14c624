"""Which hosts are this machine: the one network rule the settings and the HTTP adapters share, kept free of
heavy imports because the settings load it for every command."""
from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
