"""The ``dumpscope`` command line: one module per command family; ``entry.main`` is the console script."""
