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
import gzip
import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from tools.course import REPO

pytest.importorskip("sphinx", reason="the site extra is not installed: pip install -e '.[site]'")
from tools.site import build
from tools.site_bundle import NAME as BUNDLE

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
    build(tmp_path / "html", tmp_path / "src", wheel=False)  # the pages alone are compared
    first, second = _html_files(site), _html_files(tmp_path / "html")
    assert first.keys() == second.keys()
    differing = [name for name in first if first[name] != second[name]]
    assert not differing, f"these files differ between two builds: {differing}"


def test_every_chapter_and_its_download_is_there(site: Path) -> None:
    for page in PAGES:
        assert (site / f"{page}.html").is_file(), page
    downloads = {p.name for p in (site / "downloads" / "notebooks").glob("*.ipynb")}
    assert downloads == {f"{chapter}.ipynb" for chapter in CHAPTERS}
    for chapter in CHAPTERS:  # as committed: outputs and solutions, not the site's version
        shipped = site / "downloads" / "notebooks" / f"{chapter}.ipynb"
        assert shipped.read_bytes() == (REPO / "notebooks" / f"{chapter}.ipynb").read_bytes()


def test_no_page_points_at_another_host_for_anything_it_loads(site: Path) -> None:

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


@pytest.fixture
def own_visit(browser: object, served: str) -> Iterator[Visit]:
    """A browser context of its own, for a test that changes its size or colour mode."""
    visitor = Visit(browser, served)
    yield visitor
    visitor.close()


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


# --- issue 27: phones, downloads, tables, weight ---------------------------------------------


def test_every_chapter_links_its_notebook_and_the_course_and_they_are_there(site: Path) -> None:
    for chapter in CHAPTERS:
        page = (site / f"{chapter}.html").read_text(encoding="utf-8")
        for link in (
            f"downloads/notebooks/{chapter}.ipynb",
            f"downloads/{BUNDLE}.zip",
            f"downloads/{BUNDLE}.tar.gz",
        ):
            assert f'href="{link}"' in page, f"{chapter} does not link {link}"
            assert (site / link).is_file(), link
    running = (site / "running.html").read_text(encoding="utf-8")
    for chapter in CHAPTERS:
        assert f'href="downloads/notebooks/{chapter}.ipynb"' in running
    (wheel,) = (site / "downloads").glob("autograd_helpers-*-py3-none-any.whl")
    assert f'href="downloads/{wheel.name}"' in running
    text = " ".join(re.sub(r"<[^>]+>", " ", running).split())  # as a reader sees it
    assert f"pip install torch==2.13.0 {wheel.name}" in text
    for page in site.glob("*.html"):
        assert "REPOSITORY-URL" not in page.read_text(encoding="utf-8"), page.name


PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1366, "height": 900}
VISIBLE_LINKS = "m => [...document.querySelectorAll(m + ' a')].filter(a => a.offsetParent).length"


def _tab(visit: Visit, viewport: dict[str, int], page: str) -> Any:
    visit.page.set_viewport_size(viewport)
    return visit.open(page)


def test_on_a_phone_both_toggles_open_their_sidebars(own_visit: Visit) -> None:
    visit = own_visit
    tab = _tab(visit, PHONE, "03_gradcheck")
    for toggle, dialog in (
        (".primary-toggle", "#pst-primary-sidebar-modal"),
        (".secondary-toggle", "#pst-secondary-sidebar-modal"),
    ):
        shown = tab.locator(f"{toggle}:visible")
        assert shown.count() == 1, f"{toggle}: {shown.count()} buttons on screen"
        shown.click()
        tab.wait_for_function(f"() => document.querySelector('{dialog}').open", timeout=5_000)
        assert tab.evaluate(VISIBLE_LINKS, dialog) > 3, f"{dialog} opened without its links"
        tab.keyboard.press("Escape")
        tab.wait_for_function(f"() => !document.querySelector('{dialog}').open", timeout=5_000)
    chapters = tab.evaluate(
        "() => [...document.querySelectorAll('#pst-primary-sidebar a')].map(a => a.textContent)"
    )
    assert sum("·" in text for text in chapters) >= len(CHAPTERS), chapters
    assert not visit.errors and not visit.failed


def test_on_a_desktop_the_menu_button_folds_the_chapters_and_one_search_box_shows(
    own_visit: Visit,
) -> None:
    visit = own_visit
    tab = _tab(visit, DESKTOP, "03_gradcheck")
    hidden = (
        "() => document.querySelector('#pst-primary-sidebar')"
        ".classList.contains('pst-sidebar-hidden')"
    )
    assert not tab.evaluate(hidden)
    tab.locator(".primary-toggle:visible").click()
    tab.wait_for_function(hidden, timeout=5_000)
    tab.locator(".primary-toggle:visible").click()
    tab.wait_for_function(f"() => !({hidden})()", timeout=5_000)
    boxes = tab.locator(".search-button-field:visible, .search-button:visible")
    assert boxes.count() == 1, f"{boxes.count()} search boxes on screen"
    assert not visit.errors and not visit.failed


# The contrast of a text colour on a background colour, both CSS rgb() strings (WCAG's
# ratio: 4.5 reads well).
RATIO = """([text, back]) => {
    const lum = s => s.match(/[\\d.]+/g).slice(0, 3).map(v => v / 255)
        .map(v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)
        .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
    const [a, b] = [lum(text), lum(back)];
    return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}"""
# An element's text colour and the background it is drawn on (the nearest one not clear).
COLOURS = """el => {
    let back = el;
    while (back && /rgba\\(.*, 0\\)$/.test(getComputedStyle(back).backgroundColor))
        back = back.parentElement;
    return [getComputedStyle(el).color, getComputedStyle(back || document.body).backgroundColor];
}"""


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_output_tables_are_ruled_and_padded_and_read_in_both_modes(
    own_visit: Visit, mode: str
) -> None:
    visit = own_visit
    visit.context.add_init_script(f"localStorage.setItem('mode', '{mode}')")  # the reader's pick
    for page in ("05_grad_mode_vs_eval", "06_profiler"):
        tab = visit.open(page)
        assert tab.evaluate("() => document.documentElement.dataset.theme") == mode
        cells = tab.locator(".cell_output .output.text_html td")
        assert cells.count() > 10, page
        cell = cells.nth(1)
        style = cell.evaluate(
            "el => [getComputedStyle(el).borderLeftWidth, getComputedStyle(el).paddingLeft]"
        )
        assert float(style[0].removesuffix("px")) >= 1 and float(style[1].removesuffix("px")) >= 4
        colours = cell.evaluate(COLOURS)
        assert tab.evaluate(RATIO, colours) >= 4.5, f"{page}, {mode}: {colours} hard to read"


def test_graph_labels_read_in_dark_mode(own_visit: Visit) -> None:
    visit = own_visit
    visit.context.add_init_script("localStorage.setItem('mode', 'dark')")
    tab = visit.open("02_jacobians_hessians")
    tab.wait_for_function(MERMAID_DRAWN, timeout=30_000)
    graph = tab.locator("pre.mermaid > svg").first
    assert graph.evaluate("el => getComputedStyle(el).filter") == "none"
    label = graph.locator(".nodeLabel").first
    box = graph.locator(".node rect").first
    text = label.evaluate("el => getComputedStyle(el.querySelector('p') || el).color")
    fill = box.evaluate("el => getComputedStyle(el).fill")
    ratio = tab.evaluate(RATIO, [text, fill])
    assert ratio >= 4.5, f"graph label {text} on {fill}"


# Bytes a first visit fetches, compressed as a static host sends them (gzip).
BUDGET = {"index": 350_000, **{chapter: 1_000_000 for chapter in CHAPTERS}}


@pytest.mark.parametrize("page", list(BUDGET))
def test_a_first_visit_stays_within_its_byte_budget(browser: Any, served: str, page: str) -> None:
    context = browser.new_context(viewport=DESKTOP)  # a fresh cache: a first visit
    tab = context.new_page()
    responses: list[Any] = []
    tab.on("response", lambda response: responses.append(response))
    try:
        tab.goto(f"{served}/{page}.html", wait_until="networkidle")
        failed = [f"{r.status} {r.url}" for r in responses if r.status >= 400]
        assert not failed, failed
        sent = sum(len(gzip.compress(r.body(), 6)) for r in responses)
    finally:
        context.close()
    assert sent < BUDGET[page], f"{page}: {sent / 1000:.0f} KB gzip-compressed"
    assert any(r.url.endswith("favicon.svg") for r in responses), "no favicon"


def test_long_lines_scroll_inside_their_boxes_on_a_phone(own_visit: Visit) -> None:
    visit = own_visit
    tab = _tab(visit, PHONE, "01_custom_function")
    overflowing = tab.evaluate(
        """() => [...document.querySelectorAll('.cell pre')]
            .filter(p => p.scrollWidth > p.clientWidth + 1)
            .map(p => getComputedStyle(p).overflowX)"""
    )
    assert overflowing, "no long line on the page: the check would not bite"
    assert set(overflowing) <= {"auto", "scroll"}, overflowing
    assert tab.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth + 1")
