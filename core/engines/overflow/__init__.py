"""Overflow lookup over the whole job: the scan, the origin judgement, the report."""
