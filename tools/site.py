"""``make site``: the course as a static website in ``build/site/``, from committed outputs.

Usage: ``python -m tools.site [--out DIR]``. Builds with Sphinx (myst-nb renders the
notebooks' stored outputs, nothing is re-executed), warnings as errors. Open
``build/site/index.html``, or publish the folder on any static host: every script, font and
image it needs is inside it.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
import tomllib
from pathlib import Path

from tools.course import NOTEBOOKS, REPO
from tools.site_assets import install
from tools.site_bundle import write_downloads
from tools.site_notebooks import write_for_the_site

SOURCES = REPO / "site"
INSTRUCTOR_NOTES = REPO / "deploy" / "INSTRUCTOR-NOTES.md"  # the site's instructors page
WORKSHOP_HUB = REPO / "deploy" / "README.md"  # the site's page on running a workshop hub
STAGING = REPO / "build" / "site-src"
OUT = REPO / "build" / "site"


# The theme's Font Awesome script (1.6 MB, 530 KB gzip'd, on every page) is left out: it
# only turns icons into SVG, and the theme's CSS draws the same icons with the icon font.
ICON_SCRIPT = re.compile(
    r'[ \t]*<script defer src="(?:\.\./)*_static/scripts/fontawesome\.js\?digest=\w+"></script>\n'
)
CHAPTERS_MARK = "<!-- chapters: the README's chapter map, put here by tools/site.py -->"


def chapter_map() -> str:
    """The README's chapter table, its links pointing at the site's pages."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("## Chapters") + 1
    table: list[str] = []
    for line in lines[start:]:
        if table and not line.startswith("|"):
            break
        if line.startswith("|"):
            table.append(re.sub(r"\]\(notebooks/(\w+)\.ipynb\)", r"](\1)", line))
    return "\n".join(table)


DOWNLOADS_MARK = "<!-- chapter downloads: one link per chapter, put here by tools/site.py -->"
WHEEL_MARK = "<!-- the wheel: its link and how to install it, put here by tools/site.py -->"


def running_page(text: str) -> str:
    """The running page, with a download link per chapter and the wheel's name filled in."""
    links = "".join(
        f'<li><a href="downloads/notebooks/{path.name}" download>{path.name}</a></li>'
        for path in sorted(NOTEBOOKS.glob("*.ipynb"))
    )
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    wheel = f"autograd_helpers-{version}-py3-none-any.whl"
    how = (
        "A chapter imports the course's helper library, `autograd_helpers`; to run one "
        f'downloaded alone, install the library\'s <a href="downloads/{wheel}" download>wheel'
        f"</a> beside PyTorch: `pip install torch==2.13.0 {wheel}`."
    )
    text = text.replace(DOWNLOADS_MARK, f'<ul class="course-downloads">{links}</ul>')
    return text.replace(WHEEL_MARK, how)


def stage(staging: Path = STAGING, *, wheel: bool = True) -> Path:
    """Copy the site's sources, the instructor notes and the prepared chapters into
    ``staging``, with the downloads (``tools/site_bundle.py``; the wheel only if ``wheel``)."""
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(SOURCES, staging, ignore=shutil.ignore_patterns("__pycache__"))
    index = staging / "index.md"
    index.write_text(index.read_text().replace(CHAPTERS_MARK, chapter_map()), encoding="utf-8")
    running = staging / "running.md"
    running.write_text(running_page(running.read_text(encoding="utf-8")), encoding="utf-8")
    shutil.copyfile(INSTRUCTOR_NOTES, staging / "instructors.md")  # one document, two places
    hub_page = WORKSHOP_HUB.read_text(encoding="utf-8").replace(
        "](INSTRUCTOR-NOTES.md)", "](instructors.md)"
    )
    (staging / "workshop-hub.md").write_text(hub_page, encoding="utf-8")
    for notebook in sorted(NOTEBOOKS.glob("*.ipynb")):
        write_for_the_site(notebook, staging / notebook.name)
    install(staging / "_static")
    write_downloads(staging / "_extra" / "downloads", wheel=wheel)  # html_extra_path
    return staging


def build(out: Path = OUT, staging: Path = STAGING, *, wheel: bool = True) -> float:
    """Build the site into ``out`` from scratch; return the seconds it took. Without
    ``wheel``, the site has no wheel to download (a build only to compare pages)."""
    from sphinx.cmd.build import build_main

    start = time.perf_counter()
    stage(staging, wheel=wheel)
    shutil.rmtree(out, ignore_errors=True)
    doctrees = staging.parent / f"{staging.name}-doctrees"
    shutil.rmtree(doctrees, ignore_errors=True)
    args = ["-W", "--keep-going", "-q", "-b", "html", "-d", str(doctrees), str(staging), str(out)]
    status = build_main(args)
    if status != 0:
        raise SystemExit(f"sphinx-build failed (status {status}); see the messages above")
    without_icon_script(out)
    return time.perf_counter() - start


def without_icon_script(out: Path) -> None:
    """Take the theme's icon script out of every page of the built site ``out``, and out of
    the site (the icon font stays: the theme's CSS draws the icons with it)."""
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        page.write_text(ICON_SCRIPT.sub("", text), encoding="utf-8")
    for script in (out / "_static" / "scripts").glob("fontawesome.js*"):
        script.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.site", description=__doc__)
    parser.add_argument("--out", type=Path, default=OUT, help="default: build/site")
    args = parser.parse_args(argv)
    seconds = build(args.out)
    print(f"built {args.out} in {seconds:.1f} s: open {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
