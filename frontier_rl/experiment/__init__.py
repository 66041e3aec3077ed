"""The matched-budget comparison: runs, statistics, the report, the papers' settings.

A comparison's results are read once into one tidy table (table.py); the analyses select from
it (evalcells.py, controls_report.py) and the report formats what they return (report.py).

Layer "experiment": comparisons run whole runs, so they may import every layer but the
CLI.
"""
