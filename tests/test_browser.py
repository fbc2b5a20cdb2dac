"""Every notebook, opened the way learners open it: in JupyterLab, in a real browser.

JupyterLab is started as `make lab` starts it (127.0.0.1, a random token), on a temporary
copy of the notebooks, and loaded once in Debian's Chromium, driven by Playwright, in a fresh
workspace. Each notebook is opened from the file browser, alone (the one before is closed), and
checked for what a learner would see: plots and Mermaid graphs rendered, no JavaScript error
(while it is opened, checked or closed; Lab's own start-up counts for the first). A notebook
with widgets is also run as a learner runs it (Run All, then saved): errors only where a cell
is tagged `raises-exception`, every widget control visible and reacting to input, which needs
a live kernel. The others' cells are executed by nbval and by the answer banks' kernels, so a
second run here would only repeat them. A screenshot of each notebook goes to
build/screenshots/.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.lab_server import running_lab
from tools.course import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
SCREENSHOTS = REPO / "build" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
# Chromium flags for a headless run as root on a machine without network (CONTRIBUTING.md).
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LAB_SETTINGS = {
    # every cell in the DOM, so that every output can be checked
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
    # no "news?" toast over the notebook, no update check over the network
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}
pytestmark = [pytest.mark.browser, pytest.mark.slow]

if not CHROMIUM.exists():
    pytest.skip(
        "BROWSER TEST NOT RUN: Debian's Chromium is not installed (/usr/bin/chromium). "
        "Install it with `apt-get install chromium`; .ci/run does so before `make test`.",
        allow_module_level=True,
    )

from playwright.sync_api import Browser, Page, sync_playwright  # noqa: E402
from playwright.sync_api import TimeoutError as PlaywrightTimeout  # noqa: E402

# The notebook on screen (JupyterLab keeps other panels in the DOM, hidden).
ACTIVE = ".jp-NotebookPanel:not(.lm-mod-hidden)"
ALL_PROMPTS_NUMBERED = f"""() => {{
    const prompts = [...document.querySelectorAll('{ACTIVE} .jp-CodeCell .jp-InputPrompt')];
    return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
}}"""
WIDGET = "application/vnd.jupyter.widget-view+json"
POLL = 0.1  # seconds between two looks at the server or the saved file
MAIN_TABS = "#jp-main-dock-panel .lm-TabBar-tab"
KERNEL_READY = f"""() => {{
    const name = document.querySelector('{ACTIVE} .jp-Toolbar-kernelName');
    const status = document.querySelector('{ACTIVE} .jp-Notebook-ExecutionIndicator');
    return name !== null && name.textContent !== 'No Kernel' && status?.dataset.status === 'idle';
}}"""
CLOSED = "n => document.querySelectorAll('.jp-NotebookPanel').length < n"
CLOSED_OR_ASKED = f"n => document.querySelector('.jp-Dialog') !== null || ({CLOSED})(n)"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with running_lab(
        REPO / "notebooks", tmp_path_factory.mktemp("browser-lab"), settings=LAB_SETTINGS
    ) as server:
        yield server


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
        )
        yield chromium
        chromium.close()


@dataclass
class LabTab:
    """One browser page holding JupyterLab, loaded once; the JavaScript errors it raised
    since the last notebook was checked (for the first: since Lab started loading)."""

    page: Page
    errors: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def lab_tab(lab, browser: Browser) -> Iterator[LabTab]:
    """JupyterLab in a fresh workspace (?reset), its file browser listing the notebooks."""
    tab = LabTab(browser.new_page(viewport={"width": 1280, "height": 900}))
    tab.page.on("pageerror", lambda error: tab.errors.append(str(error)))
    tab.page.goto(f"{lab.url}/lab?reset&token={lab.token}")
    tab.page.wait_for_selector(".jp-DirListing-item", timeout=60_000)
    yield tab
    tab.page.close()


def _reference(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _has_output(notebook: dict, mime: str) -> int:
    return sum(
        mime in output.get("data", {})
        for cell in notebook["cells"]
        for output in cell.get("outputs", [])
    )


def _wait_for_idle_kernel(page: Page) -> None:
    page.wait_for_selector(
        f"{ACTIVE} .jp-Notebook-ExecutionIndicator[data-status='idle']",
        state="attached",
        timeout=60_000,
    )


def _wait_for_session_kernel(lab, name: str, timeout: float = 60) -> None:
    """Until the server has an idle kernel for this notebook (the page's indicator can say
    "idle" before the session has a kernel, and Run All then runs nothing)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = lab.get("/api/sessions")
        sessions = json.loads(body) if status == 200 else []
        if any(
            s["path"].endswith(name) and s["kernel"]["execution_state"] == "idle" for s in sessions
        ):
            return
        time.sleep(POLL)
    pytest.fail(f"{name}: no idle kernel for the notebook after {timeout:.0f} s")


def _run_all_and_save(page: Page, lab, saved: Path) -> dict:
    _wait_for_session_kernel(lab, saved.name)
    _wait_for_idle_kernel(page)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator('li[data-command="runmenu:run-all"]').click()
    page.wait_for_function(ALL_PROMPTS_NUMBERED, timeout=240_000)
    _wait_for_idle_kernel(page)
    page.locator(f"{ACTIVE} .jp-Notebook").first.click()
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the file on disk is what the browser ran
        notebook = json.loads(saved.read_text(encoding="utf-8"))
        code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        if all(c["execution_count"] is not None for c in code):
            return notebook
        time.sleep(POLL)
    pytest.fail(f"{saved.name}: JupyterLab did not save the executed notebook within 30 s")


def _check_errors_only_where_tagged(name: str, notebook: dict) -> None:
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
        tagged = "raises-exception" in cell["metadata"].get("tags", [])
        if errors and not tagged:
            error = errors[0]
            pytest.fail(f"{name}, cell {index}: {error['ename']}: {error['evalue']}")
        assert errors or not tagged, f"{name}, cell {index}: tagged raises-exception, no error"


def _check_widgets_react(page: Page, name: str) -> int:
    """Move every slider one step; the widget around it must change what it shows."""
    sliders = page.locator(f"{ACTIVE} .jp-OutputArea-output .widget-slider")
    for i in range(sliders.count()):
        slider = sliders.nth(i)
        slider.scroll_into_view_if_needed()
        assert slider.is_visible(), f"{name}: slider {i} is not visible"
        container = slider.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
        shown = "el => el.innerText + [...el.querySelectorAll('img')].map(i => i.src).join()"
        before = container.evaluate(shown)
        slider.locator("[role=slider]").first.focus()
        page.keyboard.press("ArrowRight")
        container.page.wait_for_function(
            f"([el, old]) => ({shown})(el) !== old", arg=[container.element_handle(), before]
        )
    return sliders.count()


def _check_rendered(page: Page, name: str, notebook: dict) -> None:
    """The committed (or just computed) plots and Mermaid graphs show as images."""
    if _has_output(notebook, "image/png"):  # Lab renders outputs after the cells appear
        try:
            page.wait_for_function(
                f"() => [...document.querySelectorAll('{ACTIVE} .jp-RenderedImage img')]"
                ".some(i => i.complete && i.naturalWidth > 0)",
                timeout=30_000,
            )
        except PlaywrightTimeout:
            pytest.fail(f"{name}: no matplotlib image rendered within 30 s")

    expected = _has_output(notebook, "text/vnd.mermaid")
    if expected:
        page.locator(f"{ACTIVE} .jp-RenderedMermaid").first.scroll_into_view_if_needed()
        page.wait_for_function(
            f"n => [...document.querySelectorAll('{ACTIVE} .jp-RenderedMermaid figure img')]"
            ".filter(i => i.complete && i.naturalWidth > 0).length >= n",
            arg=expected,
            timeout=30_000,
        )


def _close_every_notebook(page: Page) -> None:
    """Close the open notebooks; one Lab marked as changed is closed without saving (the file
    on disk is the one that was checked: run and saved, or only opened)."""
    close_icons = page.locator(f"{MAIN_TABS} .lm-TabBar-tabCloseIcon[title$='.ipynb']")
    while notebooks := page.locator(".jp-NotebookPanel").count():
        close_icons.first.click()
        page.wait_for_function(CLOSED_OR_ASKED, arg=notebooks)
        if page.locator(".jp-Dialog").count():
            page.locator(".jp-Dialog button", has_text="Discard").click()
            page.wait_for_function(CLOSED, arg=notebooks)


def _wait_for_kernel_ready(page: Page) -> None:
    """Until the kernel Lab started for the notebook is connected and idle: closing a notebook
    while its kernel starts throws "Disposed" in the page."""
    page.wait_for_function(KERNEL_READY, timeout=60_000)


def _open_alone(page: Page, name: str) -> None:
    """Open ``name`` from the file browser, as a learner does, with no other tab open."""
    _close_every_notebook(page)
    page.locator(".jp-DirListing-content").get_by_text(name, exact=True).dblclick()
    page.wait_for_selector(f"{ACTIVE} .jp-Cell", timeout=60_000)
    assert page.locator(".jp-NotebookPanel").count() == 1, f"{name}: not the only notebook open"
    current = page.locator(f"{MAIN_TABS}.lm-mod-current").inner_text().strip()
    assert current == name, f"{name}: the tab on screen is {current!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_opens_and_renders_in_jupyterlab(lab, lab_tab: LabTab, path: Path) -> None:
    reference = _reference(path)
    runs = _has_output(reference, WIDGET) > 0  # widgets need the kernel behind them
    page = lab_tab.page
    try:
        _open_alone(page, path.name)
        shown = reference
        if runs:
            shown = _run_all_and_save(page, lab, lab.root / path.name)
            _check_errors_only_where_tagged(path.name, shown)
        _check_rendered(page, path.name, shown)
        if runs:
            assert _check_widgets_react(page, path.name) > 0, f"{path.name}: no widget control"
        _wait_for_kernel_ready(page)
    finally:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{path.stem}.png"))
        try:
            _close_every_notebook(page)
        finally:  # errors raised while this notebook was opened, checked or closed
            page_errors, lab_tab.errors[:] = lab_tab.errors.copy(), []
    assert page_errors == [], f"{path.name}: JavaScript errors: {page_errors}"


def test_at_least_one_notebook_is_run_in_jupyterlab():
    """The Lab run above covers Lab's kernel path only if some notebook has a widget."""
    assert any(_has_output(_reference(path), WIDGET) for path in NOTEBOOKS)
