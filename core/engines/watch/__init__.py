"""Dump-Watch: snapshot diffs and the report of which op overwrote a watched tensor."""
