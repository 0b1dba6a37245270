"""Plumbing every stage shares: whole-file writes, child processes, GC pauses, spooled rows."""
