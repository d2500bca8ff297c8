"""python -m dhtcrawler: the same as the dhtcrawler command."""

import sys

from .app.cli import main

sys.exit(main())
