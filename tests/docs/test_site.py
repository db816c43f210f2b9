"""The documentation site builds strictly with no warning, and renders in a real headless browser.

The build runs `mkdocs build --strict` into a temporary folder and keeps its log; the site is then served from that
folder on loopback and opened in Debian's chromium through playwright (executable_path: no browser download). The
home page must have the navigation, the results page a generated table and a generated plot that loaded, and the
framework's API page the rendered docstrings. The results page is saved as docs/figures/docs_site.png when that
file is missing or OPENAFM_UPDATE_SCREENSHOT=1 (as tests/serve/test_playground.py does).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
SCREENSHOT = ROOT / "docs" / "figures" / "docs_site.png"
TRACKER = re.compile(r"\b(?:issue|task) #?\d+", re.IGNORECASE)      # prose: one space
BROWSER_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run"]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@contextlib.contextmanager
def serve(folder: Path):
    """An HTTP server for `folder` on a free loopback port, in a thread; yields its base URL."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    return site, done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def browser_page(build):
    site, code, log = build
    assert code == 0, log
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make setup` installs Debian's chromium package")
    with serve(site) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        yield url, page
        browser.close()


def test_the_build_is_strict_and_has_no_warning(build):
    site, code, log = build
    warnings = [line for line in log.splitlines() if "WARNING" in line]
    assert code == 0 and warnings == [], log
    assert "Documentation built" in log, log
    api_pages = sorted(p.parent.name for p in (site / "api").glob("openafm*/index.html"))
    packages = sorted(".".join(p.parent.relative_to(ROOT / "src").parts)
                      for p in (ROOT / "src" / "openafm").rglob("__init__.py"))
    assert api_pages == packages, "one API reference page per package of src/openafm"


def test_no_tracker_numbers_in_the_built_site(build):
    site, _, _ = build
    pages = list(site.rglob("*.html"))
    assert len(pages) >= 40, f"only {len(pages)} pages built"
    found = {p.relative_to(site).as_posix(): m.group(0) for p in pages
             for m in [TRACKER.search(re.sub(r"<[^>]+>", " ", p.read_text(encoding="utf-8")))] if m}
    assert not found, f"pages mention tracker numbers: {found}"


def test_the_home_page_has_the_navigation(browser_page):
    url, page = browser_page
    page.goto(url + "/")
    assert page.title().startswith("openafm")
    nav = page.inner_text("nav.md-nav--primary")
    for entry in ("Getting started", "The framework (openafm.fm)", "Serving", "Results", "API reference",
                  "Apple's Foundation Models SDK"):
        assert entry in nav, f"{entry!r} is not in the navigation: {nav[:500]}"


def test_the_results_page_has_generated_tables_and_plots(browser_page):
    url, page = browser_page
    page.goto(url + "/results/")
    page.wait_for_load_state("networkidle")
    headers = page.locator("table th").all_inner_texts()
    assert "decode ratio" in headers and "held-out perplexity" in headers, headers[:20]
    assert page.locator("table").count() >= 15
    loaded = page.evaluate("""() => Array.from(document.images)
        .filter(img => img.src.includes('/plots/') && img.complete && img.naturalWidth > 100).length""")
    assert loaded >= 5, f"only {loaded} generated plots loaded on the results page"
    if os.environ.get("OPENAFM_UPDATE_SCREENSHOT") or not SCREENSHOT.exists():
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.set_viewport_size({"width": 1400, "height": 1500})
        page.evaluate("window.scrollTo(0, document.getElementById('decode-speed-against-llamacpp').offsetTop - 70)")
        page.wait_for_timeout(500)                                   # the header's title transition
        page.screenshot(path=str(SCREENSHOT))


def test_the_api_reference_renders_docstrings(browser_page):
    url, page = browser_page
    page.goto(url + "/api/openafm.fm/")
    assert page.locator("[id='openafm.fm.session.LanguageModelSession.respond']").count() == 1
    assert "Plain text; an instance of" in page.inner_text("article")
    assert page.locator("article pre code").count() >= 5           # doctest sessions render as code
