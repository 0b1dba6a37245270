"""``python -m dumpscope`` runs the same command line as the ``dumpscope`` script."""

from dumpscope.tui.cli import main

raise SystemExit(main())
