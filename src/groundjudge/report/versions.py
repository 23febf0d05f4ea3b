"""The version of the documents groundjudge writes (metrics.json, report.json)."""

from groundjudge.contracts import REPORT_SCHEMA_VERSION as SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION"]
