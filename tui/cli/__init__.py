"""The ``dumpscope`` command line: one module per command family; ``entry.script`` is the console script (``entry.main`` the command line without its process settings)."""
