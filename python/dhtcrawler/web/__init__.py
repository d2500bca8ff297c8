"""``dhtcrawler.web``: kept for the names docs/api.md gave it (``queries``, ``categories``);
the web server lives in :mod:`dhtcrawler.app.web`."""
