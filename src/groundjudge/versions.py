"""The version of the documents groundjudge writes (metrics.json, report.json).

Readers refuse other versions by name. 3 adds the claim verdict and class ``unchecked``
(claim_check v4) and ``usage.unmetered``; 4 adds a metric value's ``reason`` (cases left out:
an input was not recorded) and case details with no behaviour (null: not recorded). Each
version's document is a valid document of the next, so readers take them all.
"""

from typing import Final

SCHEMA_VERSION: Final = 4
READABLE_VERSIONS = (2, 3, 4)

__all__ = ["READABLE_VERSIONS", "SCHEMA_VERSION"]
