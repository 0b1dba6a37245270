"""The analyses behind the commands: compare, overflow, watch, trend, convert, triage."""
