"""Headless Chromium for the browser tests (Debian's chromium + chromium-driver, installed by
`make test`; no browser downloads): one driver with a throw-away profile, stopped when done."""
import contextlib
import os

import pytest

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@contextlib.contextmanager
def chromium(profile_dir, window_size: str = "1400,2600"):
    """A Selenium driver of headless Chromium whose profile (cookies, IndexedDB) lives in ``profile_dir``."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.fail("Debian's chromium and chromium-driver are missing: `make test` installs them")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--window-size={window_size}", f"--user-data-dir={profile_dir}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()
