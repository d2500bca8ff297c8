"""``dhtcrawler testnet``: the loopback test network program (dhtcrawler-testnet), its
arguments its own."""

from __future__ import annotations

import os
import sys
from typing import Any, List

from .common import EXIT_FAILURE, EXIT_USAGE


def add_parser(sub: Any) -> None:
    # Listed for --help only: main() hands every argument after "testnet" to the program.
    sub.add_parser("testnet", help="run the loopback test network (dhtcrawler-testnet; see its --help)",
                   add_help=False)


def run(argv: List[str]) -> int:
    from ...testnet import locate

    try:
        program = locate()
    except FileNotFoundError as e:
        print(f"dhtcrawler: {e}", file=sys.stderr)
        return EXIT_USAGE
    os.execv(program, [program, *argv])
    return EXIT_FAILURE  # not reached
