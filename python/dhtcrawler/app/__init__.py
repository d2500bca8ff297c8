"""The dhtcrawler application, built on the binding (the ``dhtcrawler`` package): the
``dhtcrawler`` command (cli.py, one module per subcommand in commands/), its acceptance
policy (acceptance.py) and signal handling (signals.py), the torrent database through one
layer for SQLite and PostgreSQL (db/: dialects, the one migration format, the schema), the
sinks, search, dumps, prune, swarm scrapes, the status line, and the web server (web/)."""
