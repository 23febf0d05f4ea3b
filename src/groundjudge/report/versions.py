"""The version of the documents groundjudge writes (metrics.json, report.json)."""

SCHEMA_VERSION = 2
