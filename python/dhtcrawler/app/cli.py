"""The `dhtcrawler` command: crawl into SQLite (or, in a fleet, PostgreSQL) and JSON lines,
search, export and import, prune, serve the search page, JSON API and Torznab, run the test
network, demo. One module per subcommand (commands/); this one parses and dispatches.

Exit status: 0 after a clean stop (--duration, SIGINT, SIGTERM), 2 for bad options or
arguments (one line on stderr), 1 for other failures.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from .. import __version__
from .._errors import DhtcError, OptionsError
from .commands import crawl, demo, export, import_, prune, reparse, search, serve, testnet
from .commands.common import EXIT_FAILURE, EXIT_USAGE, StartError, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dhtcrawler", description="BitTorrent DHT crawler.")
    parser.add_argument("--version", action="version", version=f"dhtcrawler {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in (crawl, search, export, import_, prune, reparse, serve, demo, testnet):
        command.add_parser(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "testnet":
        return testnet.run(argv[1:])  # its arguments are the program's own
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except UsageError as e:
        print(f"dhtcrawler {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except OptionsError as e:
        print(f"dhtcrawler {args.command}: error: bad option: {e.message}", file=sys.stderr)
        return EXIT_USAGE
    except DhtcError as e:
        print(f"dhtcrawler {args.command}: error: {e.message or e.status_name}", file=sys.stderr)
        return EXIT_FAILURE
    except (StartError, RuntimeError) as e:  # RuntimeError: e.g. the test network did not start
        print(f"dhtcrawler {args.command}: error: {e}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
