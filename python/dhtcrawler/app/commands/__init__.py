"""The subcommands of `dhtcrawler`, one module each: ``add_parser(sub)`` declares its flags,
``run(args)`` runs it (exit status); common.py holds what they share."""
