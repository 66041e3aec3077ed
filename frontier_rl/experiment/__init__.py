"""The matched-budget comparison: runs, statistics, the report, the papers' settings.

Layer "experiment": comparisons run whole runs, so they may import every layer but the
CLI.
"""
