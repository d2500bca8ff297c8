"""python -m dhtcrawler: the same as the dhtcrawler command."""

import sys

from .cli import main

sys.exit(main())
