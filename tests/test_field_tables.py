"""launch/field_tables.py's findings say where a verdict changes with the budget (that
docs/results/superseded/field.md is what it renders is checked with every other rendered page, in
tests/test_docs_blocks.py)."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTBED = os.path.join(ROOT, "docs", "results", "superseded")


def _renderer():
    spec = importlib.util.spec_from_file_location(
        "field_tables", os.path.join(ROOT, "launch", "field_tables.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_findings_say_where_a_verdict_changes():
    mod = _renderer()
    field = mod.load(os.path.join(TESTBED, "field.results.json.gz"))
    lines = mod.findings(field, None).splitlines()
    assert len(lines) == len(field["methods"]) - 1  # every arm but the reference
    for line in lines:
        verdicts = {part.split(" at matched")[0].split(": ")[-1]
                    for part in line.rstrip(".").split("; ")}
        assert ("changes" in line) == (len(verdicts) > 1), line
