"""Every measured table of the README and docs/ is rendered from a results file under
docs/results/ (launch/docs.py): a number edited by hand, or a results file changed without
rendering again, fails here. Each results file names its machine, date, commit and command,
the README stays a short guide, and docs/README.md indexes every page."""

import glob
import gzip
import importlib.util
import json
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def docs():
    spec = importlib.util.spec_from_file_location("docs", os.path.join(ROOT, "launch", "docs.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_block_is_what_its_results_file_renders(docs):
    stale = []
    for path in docs.pages():
        _, _, changed = docs.regenerate(path)
        stale += [f"{os.path.relpath(path, ROOT)}: {name}" for name in changed]
    assert not stale, f"run launch/docs.sh: {stale}"


def test_a_hand_edited_number_fails_the_check(docs):
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    block = re.search(r"<!-- docs:begin default-arms -->\n(.*?)<!-- docs:end", text, re.S)
    number = re.search(r"\+\d+\.\d", block.group(1)).group(0)
    edited = text[:block.start(1)] + block.group(1).replace(
        number, number[:-1] + str((int(number[-1]) + 1) % 10), 1) + text[block.end(1):]
    assert docs.render_text(text, ROOT)[1] == []
    assert docs.render_text(edited, ROOT)[1] == ["default-arms"]
    # and the rewrite puts the file's figure back
    assert docs.render_text(edited, ROOT)[0] == text


def test_every_page_has_blocks_and_names_only_known_renderers(docs):
    names = [name for path in docs.pages()
             for name in docs.BLOCK.findall(open(path).read())]
    names = [m[1] for m in names]
    assert len(names) >= 15
    for name in names:
        assert name.startswith("table:") or name in docs.RENDERERS, name


def _results_files():
    pattern = os.path.join(ROOT, "docs", "results", "**", "*.json")
    return sorted(glob.glob(pattern, recursive=True) + glob.glob(pattern + ".gz", recursive=True))


def test_every_results_file_names_its_machine_date_commit_and_command():
    files = _results_files()
    assert len(files) > 30
    for path in files:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            meta = json.load(f).get("meta") or {}
        for key in ("machine", "date", "commit", "command"):
            assert meta.get(key), f"{os.path.relpath(path, ROOT)}: meta has no {key}"
        assert re.match(r"\d{4}-\d{2}-\d{2}", meta["date"]), path
        # a command a reader can retype: no absolute path of the machine that made it
        assert not re.search(r"(^|[\s=])/(home|root|work|Users|tmp)/", meta["command"]), path


def test_a_recorded_command_names_the_cli_and_paths_relative_to_the_repository():
    from frontier_rl.run import provenance

    home = os.path.expanduser("~")
    cmd = provenance.command([os.path.join(ROOT, "frontier_rl", "cli.py"), "fit",
                              f"--config={os.path.join(ROOT, 'configs', 'x.py')}",
                              f"--cache={os.path.join(home, '.cache', 'c')}"])
    assert cmd == "frontier-rl fit --config=configs/x.py '--cache=~/.cache/c'"


def test_readme_is_a_short_guide_whose_links_resolve():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    assert len(text.splitlines()) <= 300
    for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        assert os.path.exists(os.path.join(ROOT, link)), link


def test_docs_index_links_every_page():
    with open(os.path.join(ROOT, "docs", "README.md")) as f:
        index = f.read()
    linked = {os.path.normpath(os.path.join(ROOT, "docs", link))
              for link in re.findall(r"\]\(([^)#]+)\)", index)}
    pages = glob.glob(os.path.join(ROOT, "docs", "*.md"))
    pages += glob.glob(os.path.join(ROOT, "docs", "results", "*", "README.md"))
    pages += [os.path.join(ROOT, "docs", "results", "superseded", "field.md")]
    for page in pages:
        if os.path.basename(page) == "README.md" and os.path.dirname(page).endswith("docs"):
            continue
        assert os.path.normpath(page) in linked, os.path.relpath(page, ROOT)
    for path in linked:
        assert os.path.exists(path), path


def test_the_readme_types_no_measured_figure():
    """Outside its rendered blocks and code, the README states no figure a measurement gives
    (decimals, percentages, speed-ups, durations, thousands): those live in results files."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    text = re.sub(r"<!-- docs:begin (\S+) -->.*?<!-- docs:end \1 -->", "", text, flags=re.S)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    typed = re.findall(r"\S*(?:\d+\.\d+|\d+%|\d+m\d+s|\b\d+(?:\.\d+)?x\b|\d,\d{3})\S*", text)
    assert typed == []


def test_every_link_between_the_docs_pages_resolves():
    """Links of the guide pages (the reports a comparison writes link their plots, which are
    not kept)."""
    for page in glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True):
        if page.endswith(".report.md"):
            continue
        with open(page) as f:
            text = f.read()
        for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if not link.startswith("http"):
                assert os.path.exists(os.path.join(os.path.dirname(page), link)), (page, link)
