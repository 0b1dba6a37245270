"""``python -m dumpscope`` runs the same command line as the ``dumpscope`` script."""

from dumpscope.tui.cli.entry import script

if __name__ == "__main__":  # pool workers started by spawn/forkserver must not run the command again
    raise SystemExit(script())
