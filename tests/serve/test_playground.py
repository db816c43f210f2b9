"""The playground in a real headless browser: Debian's chromium driven by playwright (executable_path; playwright's
own browser download is not used). It types a prompt, runs it, waits for the streamed answer and the profiler,
checks forced and sampled tokens are told apart and that "copy as Python" gives openafm.fm code, and saves a
screenshot (docs/figures/playground.png, shown in the README, with OPENAFM_UPDATE_SCREENSHOT=1)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
from live_server import live_server
from playwright.sync_api import sync_playwright

import openafm
from openafm.runtime.engine import EngineConfig

pytestmark = pytest.mark.real_model
CHROMIUM = "/usr/bin/chromium"
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "figures" / "playground.png"


@pytest.fixture(scope="module")
def page():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make setup` installs Debian's chromium package")
    with live_server(openafm.load(), EngineConfig(max_batch=4)) as (url, _), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "/")
        page.wait_for_function("document.getElementById('model').options.length > 0")
        yield page
        browser.close()


def run(page) -> None:
    page.evaluate("document.body.dataset.state = ''; document.getElementById('stats').dataset.done = ''")
    page.click("#run")
    page.wait_for_selector("body[data-state=done]", timeout=90_000)


def test_plain_prompt_streams_and_profiles(page):
    page.fill("#prompt", "What is the capital of France?")
    page.fill("#max-tokens", "24")
    run(page)
    assert "Paris" in page.inner_text("#output")
    stats = page.inner_text("#stats")
    for field in ("time to first token", "prefill", "decode", "grammar mask", "KV cache", "usage"):
        assert field in stats
    assert page.locator("#tokens .tok.sampled").count() > 3 and page.locator("#tokens .tok.forced").count() == 0


def test_schema_output_colours_forced_tokens_and_copies_python(page):
    page.check("#use-schema")
    page.select_option("#schema-example", "Person")
    page.fill("#prompt", "Invent a person.")
    page.fill("#max-tokens", "60")
    run(page)
    output = page.inner_text("#output")
    assert output.startswith('{"name": "') and '"age": ' in output
    assert page.locator("#tokens .tok.forced").count() >= 3          # '{"name": "' and the other keys
    assert page.locator("#tokens .tok.sampled").count() >= 3
    page.click("#copy-python")
    code = page.inner_text("#python")
    ast.parse(code)                                                   # the generated code is Python
    assert "import openafm.fm as fm" in code and "json_schema=schema" in code and "fm.LanguageModelSession(" in code
    if os.environ.get("OPENAFM_UPDATE_SCREENSHOT") or not SCREENSHOT.exists():
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT), full_page=True)


def test_an_error_is_shown_with_its_field(page):
    page.uncheck("#use-schema")
    page.fill("#temperature", "7")
    run(page)
    assert "temperature" in page.inner_text("#output") and "400" in page.inner_text("#output")
    page.fill("#temperature", "0")
