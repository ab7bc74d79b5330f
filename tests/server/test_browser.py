"""The web chat page in headless Chromium (Debian's chromium + chromium-driver, driven by
Selenium): load /, send a message, see the reply stream in with a tokens/s line, send a second
message that continues the conversation."""
import os
import shutil

import pytest


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def find_driver():
    for path in (shutil.which("chromedriver"), "/usr/bin/chromedriver",
                 "/usr/lib/chromium/chromedriver"):
        if path and os.path.exists(path):
            return path
    return None


@pytest.fixture
def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    chromium, driver = find_chromium(), find_driver()
    if chromium is None or driver is None:
        pytest.skip("chromium and chromium-driver are not installed (apt-get install chromium "
                    "chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1000,800", "--no-proxy-server"):
        opts.add_argument(arg)
    b = webdriver.Chrome(service=Service(executable_path=driver), options=opts)
    b.set_page_load_timeout(30)
    yield b
    b.quit()


def test_chat_page(server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(server.url + "/")
    assert browser.title == "tessera chat"
    # The page keeps the API key in localStorage; set it as a user would.
    browser.find_element(By.TAG_NAME, "summary").click()
    key = browser.find_element(By.ID, "apikey")
    key.send_keys(server.api_key)
    browser.execute_script("arguments[0].dispatchEvent(new Event('change'))", key)
    max_tokens = browser.find_element(By.ID, "max_tokens")
    max_tokens.clear()
    max_tokens.send_keys("12")
    wait = WebDriverWait(browser, 90)
    wait.until(lambda b: "context" in b.find_element(By.ID, "model").text)

    def send(text):
        box = browser.find_element(By.ID, "input")
        box.send_keys(text)
        browser.find_element(By.ID, "send").click()

    send("Hello! Who are you?")
    wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, ".msg.assistant")) == 1)
    # Finished: the Send button is enabled again and the reply has text and a speed line.
    wait.until(lambda b: b.find_element(By.ID, "send").is_enabled())
    reply = browser.find_element(By.CSS_SELECTOR, ".msg.assistant .body").text
    meta = browser.find_element(By.CSS_SELECTOR, ".msg.assistant .meta").text
    assert reply.strip(), browser.find_element(By.ID, "log").text
    assert "tokens/s" in meta and "tokens" in meta
    assert not browser.find_elements(By.CSS_SELECTOR, ".msg.error")

    send("Thanks.")
    wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, ".msg.assistant")) == 2)
    wait.until(lambda b: b.find_element(By.ID, "send").is_enabled())
    users = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".msg.user")]
    assert users == ["Hello! Who are you?", "Thanks."]
    # The second request carried the whole conversation: its prompt was longer.
    assert browser.execute_script("return conversation.length") == 4


def test_chat_page_reports_errors(server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(server.url + "/")
    browser.execute_script("localStorage.removeItem('tessera.apikey')")
    browser.get(server.url + "/")
    browser.find_element(By.ID, "input").send_keys("hi")
    browser.find_element(By.ID, "send").click()
    WebDriverWait(browser, 30).until(
        lambda b: b.find_elements(By.CSS_SELECTOR, ".msg.error"))
    assert "401" in browser.find_element(By.CSS_SELECTOR, ".msg.error").text
