"""Who may use the server: an API key, given as Torznab clients send it (``?apikey=``, or the
``X-Api-Key`` header), or as the password of HTTP basic auth (any user name), for browsers.

The policy: required by default when the server listens beyond loopback; off on a loopback
address unless asked for. The key comes from --api-key, else $DHTCRAWLER_API_KEY, else one
is generated and printed once at start.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import os
import secrets
from typing import Mapping, Optional

ENV_KEY = "DHTCRAWLER_API_KEY"
HEADER = "x-api-key"


def is_loopback(host: str) -> bool:
    """True for an address that only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name or a wildcard: assume it is reachable


def auth_required(listen_host: str, mode: str = "auto") -> bool:
    """``mode`` is "on", "off" or "auto" (on exactly when listening beyond loopback)."""
    if mode == "on":
        return True
    if mode == "off":
        return False
    return not is_loopback(listen_host)


def choose_key(given: Optional[str], env: Mapping[str, str] = os.environ) -> "tuple[str, bool]":
    """(key, generated): the given key, else the environment's, else a new random one."""
    if given:
        return given, False
    if env.get(ENV_KEY):
        return env[ENV_KEY], False
    return secrets.token_urlsafe(24), True


def presented_key(query: Mapping[str, str], headers: Mapping[str, str]) -> Optional[str]:
    """The key a request carries, wherever it carries it."""
    if query.get("apikey"):
        return query["apikey"]
    if headers.get(HEADER):
        return headers[HEADER]
    value = headers.get("authorization", "")
    scheme, _, credentials = value.partition(" ")
    if scheme.lower() == "basic" and credentials:
        try:
            decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    if scheme.lower() == "bearer" and credentials:
        return credentials.strip()
    return None


def key_matches(key: str, presented: Optional[str]) -> bool:
    return presented is not None and hmac.compare_digest(key.encode("utf-8"), presented.encode("utf-8"))
