"""docs/results/testbed/field.md is what launch/field_tables.py renders from the committed
results files: a number edited by hand, or a results file changed without rendering again,
fails here."""

import contextlib
import importlib.util
import io
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTBED = os.path.join(ROOT, "docs", "results", "testbed")


def _renderer():
    spec = importlib.util.spec_from_file_location(
        "field_tables", os.path.join(ROOT, "launch", "field_tables.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_field_page_is_rendered_from_its_results_files():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _renderer().main([os.path.join(TESTBED, "field.results.json.gz"),
                          os.path.join(TESTBED, "field_pflops.results.json.gz")])
    with open(os.path.join(TESTBED, "field.md")) as f:
        assert out.getvalue() == f.read()


def test_findings_say_where_a_verdict_changes():
    mod = _renderer()
    field = mod.load(os.path.join(TESTBED, "field.results.json.gz"))
    lines = mod.findings(field, None).splitlines()
    assert len(lines) == len(field["methods"]) - 1  # every arm but the reference
    for line in lines:
        verdicts = {part.split(" at matched")[0].split(": ")[-1]
                    for part in line.rstrip(".").split("; ")}
        assert ("changes" in line) == (len(verdicts) > 1), line
