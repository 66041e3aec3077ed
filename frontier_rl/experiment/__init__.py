"""The matched-budget comparison: runs, statistics, the report, the papers' settings."""
