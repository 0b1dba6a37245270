"""Triage: one answer from a job's dumps, and the same document in words."""
