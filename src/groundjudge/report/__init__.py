"""Report stage: metrics.json, report.md and friends."""
