"""The website (``make site``), built from scratch and read in a real browser.

The site is built twice into temporary folders (warnings are errors, and the two builds
must give the same HTML), then served on 127.0.0.1 and visited in Debian's Chromium: every
page loads without a console error or a failed request, every Mermaid graph is drawn,
every formula typeset, every image loaded, exercise solutions are folded until clicked, the
widget note stands where a widget was, search finds ``gradgradcheck`` in chapter 03, and
no request goes to any other host. Screenshots of three pages go to build/screenshots/.
"""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tools.course import REPO

pytest.importorskip("sphinx", reason="the site extra is not installed: pip install -e '.[site]'")
from tools.site import build

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = REPO / "build" / "screenshots"
CHAPTERS = sorted(p.stem for p in (REPO / "notebooks").glob("*.ipynb"))
PAGES = ["index", "running", "instructors", "workshop-hub", *CHAPTERS]
# Sphinx 9 deprecations inside myst-parser, not ours.
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("site")
    build(root / "html", root / "src")
    return root / "html"


def _html_files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.suffix in (".html", ".js") and "_static" not in p.parts
    }


def test_two_clean_builds_give_the_same_html(site: Path, tmp_path: Path) -> None:
    build(tmp_path / "html", tmp_path / "src")
    first, second = _html_files(site), _html_files(tmp_path / "html")
    assert first.keys() == second.keys()
    differing = [name for name in first if first[name] != second[name]]
    assert not differing, f"these files differ between two builds: {differing}"


def test_every_chapter_and_its_download_is_there(site: Path) -> None:
    for page in PAGES:
        assert (site / f"{page}.html").is_file(), page
    downloads = {p.name for p in (site / "_downloads").rglob("*.ipynb")}
    assert downloads == {f"{chapter}.ipynb" for chapter in CHAPTERS}


def test_no_page_points_at_another_host_for_anything_it_loads(site: Path) -> None:
    import re

    loads = re.compile(r'<(?:script|img|link|iframe)[^>]*(?:src|href)="(https?:)?//[^"]*"')
    for page in site.glob("*.html"):
        found = loads.findall(page.read_text(encoding="utf-8"))
        assert not found, f"{page.name} loads from another host"


# --- in the browser ---------------------------------------------------------------------------


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        pytest.skip(
            "SITE BROWSER TEST NOT RUN: Debian's Chromium is not installed (/usr/bin/chromium); "
            "`apt-get install chromium` (.ci/run does)."
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
        )
        yield chromium
        chromium.close()


class Visit:
    """A browser page that records what went wrong: errors, failures, other hosts.

    Routing every request (to see the other hosts) turns the browser's HTTP cache off: each
    page fetches everything it loads from the server again, and so each load is checked."""

    def __init__(self, browser: object, base: str) -> None:
        self.base = base
        self.host = urlparse(base).netloc
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.failed: list[str] = []
        self.elsewhere: list[str] = []
        self.context.route("**/*", self._route)
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on(
            "response", lambda r: r.status >= 400 and self.failed.append(f"{r.status} {r.url}")
        )

    def _route(self, route: object) -> None:
        url = route.request.url  # type: ignore[attr-defined]
        if urlparse(url).netloc not in (self.host, "") and not url.startswith("data:"):
            self.elsewhere.append(url)
            route.abort()  # type: ignore[attr-defined]
        else:
            route.continue_()  # type: ignore[attr-defined]

    def open(self, page: str) -> object:
        self.page.goto(f"{self.base}/{page}.html", wait_until="networkidle")
        return self.page

    def forget(self) -> None:
        """Start a new record: what went wrong before belongs to an earlier test."""
        self.errors.clear()
        self.failed.clear()
        self.elsewhere.clear()

    def close(self) -> None:
        self.context.close()


@pytest.fixture(scope="module")
def visitor(browser: object, served: str) -> Iterator[Visit]:
    """One browser context and page for every visit: each test navigates it anew."""
    shared = Visit(browser, served)
    yield shared
    shared.close()


@pytest.fixture
def visit(visitor: Visit) -> Visit:
    visitor.forget()
    return visitor


MERMAID_DRAWN = """() => [...document.querySelectorAll('pre.mermaid, div.mermaid')]
    .every(block => block.querySelector('svg') !== null)"""
MATH_TYPESET = """() => {
    const blocks = document.querySelectorAll('.math');
    return [...blocks].every(b => b.querySelector('mjx-container') !== null);
}"""
IMAGES_LOADED = """() => [...document.images].every(img => img.complete && img.naturalWidth > 0)"""


@pytest.mark.parametrize("page", PAGES)
def test_a_page_reads_as_it_should(visit: Visit, page: str) -> None:
    tab = visit.open(page)
    if tab.locator(".mermaid").count():  # type: ignore[attr-defined]
        tab.wait_for_function(MERMAID_DRAWN, timeout=30_000)  # type: ignore[attr-defined]
    if tab.locator(".math").count():  # type: ignore[attr-defined]
        tab.wait_for_function(MATH_TYPESET, timeout=30_000)  # type: ignore[attr-defined]
    assert tab.evaluate(IMAGES_LOADED)  # type: ignore[attr-defined]
    if page in ("index", "02_jacobians_hessians", "03_gradcheck"):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(SCREENSHOTS / f"site-{page}.png"), full_page=False)  # type: ignore[attr-defined]
    solutions = tab.locator("details.hide.above-input")  # type: ignore[attr-defined]
    for k in range(solutions.count()):
        details = solutions.nth(k)
        assert details.get_attribute("open") is None, "a solution is open before a click"
        assert "Show solution" in details.locator("summary").inner_text()
    if solutions.count():
        first = solutions.nth(0)
        first.locator("summary").click()
        assert first.get_attribute("open") is not None, "a click did not open the solution"
    if page in ("00_start_here", "03_gradcheck"):
        note = tab.locator(".course-widget-note")  # type: ignore[attr-defined]
        assert note.count() == 1
        assert "Interactive explorer" in note.inner_text()
    assert not visit.errors, f"console or page errors: {visit.errors}"
    assert not visit.failed, f"failed requests: {visit.failed}"
    assert not visit.elsewhere, f"requests to other hosts: {visit.elsewhere}"


def test_search_finds_gradgradcheck_in_chapter_03(visit: Visit) -> None:
    tab = visit.page
    tab.goto(f"{visit.base}/search.html?q=gradgradcheck", wait_until="networkidle")
    tab.wait_for_selector("#search-results li", timeout=30_000)
    links = tab.eval_on_selector_all("#search-results li a", "as => as.map(a => a.href)")
    assert any("03_gradcheck" in link for link in links), links
    assert not visit.elsewhere and not visit.errors


def test_the_other_host_check_catches_an_injected_cdn_script(visit: Visit) -> None:
    # The control: were a page to load a script from a CDN, the check above would see it.
    tab = visit.open("index")
    tab.evaluate(  # type: ignore[attr-defined]
        """() => new Promise(done => {
            const s = document.createElement('script');
            s.src = 'https://cdn.jsdelivr.net/npm/mermaid@11/dist/mermaid.min.js';
            s.onerror = s.onload = done;
            document.head.appendChild(s);
        })"""
    )
    assert visit.elsewhere == ["https://cdn.jsdelivr.net/npm/mermaid@11/dist/mermaid.min.js"]
