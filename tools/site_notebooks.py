"""The chapters as the site shows them: the committed notebooks, with four changes.

Only stored outputs are shown (nothing is executed). For the web:

- under the chapter's title, links to download this notebook and the whole course
  (``tools/site_bundle.py`` puts them in the site), and to how to run it;

- an autograd graph's ``text/vnd.mermaid`` output becomes a ``{mermaid}`` directive, which
  the page draws as a diagram (myst-nb knows no such output type and would drop it);
- an exercise's solution cell is folded behind "Show solution", closed until clicked; the
  checker cell after it keeps its recorded feedback;
- a widget, whose state the notebooks do not store, becomes a note naming the interactive
  explorer and how to run it.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from tools.exercises import exercises_of
from tools.site_bundle import NAME as BUNDLE

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
MERMAID = "text/vnd.mermaid"
_MARKER = re.compile(r"\s*### (BEGIN|END) SOLUTION\s*$")
WIDGET_NOTE = (
    '<div class="course-widget-note">\n\n'
    "**Interactive explorer here:** `ah.widgets.{name}` draws sliders in JupyterLab that "
    "these pages cannot run. To use it, run the course yourself ([how](running)) and run "
    "this cell.\n\n</div>"
)


DOWNLOADS = (
    '<p class="course-downloads">Download <a href="downloads/notebooks/{notebook}" download>'
    "this notebook</a> or the whole course "
    '(<a href="downloads/{bundle}.zip" download>.zip</a>, '
    '<a href="downloads/{bundle}.tar.gz" download>.tar.gz</a>), and '
    '<a href="running.html">run it yourself</a>.</p>'
)


def _with_downloads(title_cell: str, notebook: Path) -> str:
    """The chapter's first markdown cell, with the download links under its title."""
    lines = title_cell.split("\n")
    title = next(i for i, line in enumerate(lines) if line.startswith("# "))
    links = DOWNLOADS.format(notebook=notebook.name, bundle=BUNDLE)
    return "\n".join([*lines[: title + 1], "", links, *lines[title + 1 :]])


def _mermaid_output(source: str) -> nbformat.NotebookNode:
    fence = "```{mermaid}\n" + source.strip() + "\n```\n"
    output: nbformat.NotebookNode = nbformat.v4.new_output(
        "display_data", data={"text/markdown": fence}
    )
    return output


def _widget_output(cell_source: str) -> nbformat.NotebookNode:
    found = re.search(r"widgets\.(\w+)\(", cell_source)
    name = found.group(1) if found else "explorer"
    output: nbformat.NotebookNode = nbformat.v4.new_output(
        "display_data", data={"text/markdown": WIDGET_NOTE.format(name=name)}
    )
    return output


def for_the_site(
    nb: nbformat.NotebookNode, notebook: Path = Path("notebook.ipynb")
) -> nbformat.NotebookNode:
    """``nb`` with its graphs, exercises and widgets made ready for a static page.

    Its exercises' solution cells come from the course's registry (``tools/exercises.py``),
    which raises on exercise metadata that cannot be meant, naming ``notebook``'s cell.
    """
    solutions = {index for e in exercises_of(nb, notebook) for index in e.solutions}
    first = next(cell for cell in nb.cells if cell.cell_type == "markdown")
    first.source = _with_downloads(first.source, notebook)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            # The repository's README is the site's home page.
            cell.source = cell.source.replace("](../README.md)", "](index)")
        if cell.cell_type != "code":
            continue
        if index in solutions:
            cell.source = "\n".join(
                line for line in cell.source.splitlines() if not _MARKER.match(line)
            )
            tags = cell.metadata.setdefault("tags", [])
            if "hide-input" not in tags:
                tags.append("hide-input")
            cell.metadata["mystnb"] = {
                "code_prompt_show": "Show solution",
                "code_prompt_hide": "Hide solution",
            }
        outputs = []
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if MERMAID in data:
                outputs.append(_mermaid_output(data[MERMAID]))
            elif WIDGET_VIEW in data:
                outputs.append(_widget_output(cell.source))
            else:
                outputs.append(output)
        cell.outputs = outputs
    return nb


def write_for_the_site(source: Path, destination: Path) -> None:
    nb = nbformat.read(source, as_version=4)
    nbformat.write(for_the_site(nb, source), destination)
