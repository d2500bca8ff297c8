"""Run inside `unshare -n` by test_web_api.py: gives this private network namespace the
address 192.0.2.1 (TEST-NET-1; it exists nowhere else), serves the database given on it with
the default auth policy, and prints one JSON line of what requests with and without the key got."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from webutil import Served  # noqa: E402


def status(url: str, headers: dict = {}) -> int:  # noqa: B006 - read only
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=20) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def main() -> int:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["ip", "addr", "add", "192.0.2.1/32", "dev", "lo"], check=True)
    s = Served(["serve", "--db", sys.argv[1], "--listen", "192.0.2.1:0"], env={"DHTCRAWLER_API_KEY": ""})
    try:
        result = {
            "url": s.url,
            "key_printed": bool(s.api_key),
            "without_key": status(s.url + "api/v1/stats"),
            "torznab_without_key": status(s.url + "torznab/api?t=caps"),
            "wrong_key": status(s.url + "api/v1/stats?apikey=nope"),
            "with_key": status(s.url + f"api/v1/stats?apikey={s.api_key}"),
        }
    finally:
        result["exit"] = s.stop()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
