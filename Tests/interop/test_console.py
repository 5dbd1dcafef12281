"""The operator's page in a real browser: headless Chromium (Debian's) driven by Selenium, against the real binary and
its emulator. Sign in, see a webhook's delivery, retry a ping FCM refused, and the attacks: a forged form post, a
rotated-out token's session, a token in a URL, a page or the log. Screenshots of each page go to
.build/console-screenshots/ (a test artifact)."""
import json
import os
import shutil

import pytest
import requests
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from conftest import recorded, shot, signed_headers, start_relay, stop_relay, until

TOKEN = "console-token-" + os.urandom(12).hex()
OTHER = "console-other-" + os.urandom(12).hex()


def config(tokens, spool):
    listed = ", ".join(f'"{t}"' for t in tokens)
    return f"""
webhook: {{secrets: [{{env: TEST_WEBHOOK_SECRET}}]}}
admin: {{tokens: [{listed}]}}
routes:
  - name: stale
    topic: PUSH_RC
    data: {{CONFIG_STATE: STALE, CONFIG_VERSION: "{{{{version}}}}"}}
  - name: fleet
    waves: {{shards: 4, spreadSeconds: 4000, topic: "PUSH_RC_{{shard}}"}}
    data: {{CONFIG_STATE: STALE}}
delivery: {{drainSeconds: 0, spoolDirectory: "{spool}", maxAttempts: 1}}
"""


def post_webhook(relay, version):
    body = json.dumps({"versionNumber": str(version), "updateType": "INCREMENTAL_UPDATE"}).encode()
    return requests.post(relay["webhook"], data=body, headers={"content-type": "application/json", **signed_headers(body)}, timeout=30)


def click_and_load(driver, element):
    """Clicks a button and waits for the page it loads. The old page carries a mark set here; the event is a complete
    document without it. (Asking the old page's element whether it went stale raced the navigation: chromedriver may
    answer "unhandled inspector error" while the document is being replaced, which a soak run met once in 400 tests.)"""
    driver.execute_script("window.__rcRelayOldPage = true")
    try:
        element.click()
    except WebDriverException as error:
        # chromedriver may report the click's own node gone when the form's navigation outran the command's reply;
        # the click happened, and the wait below is for the page it loads.
        if "does not belong to the document" not in str(error):
            raise
    WebDriverWait(driver, 60, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script("return window.__rcRelayOldPage !== true && document.readyState === 'complete'"))


def sign_in(driver, relay, token):
    driver.get(relay["url"] + "/console")
    assert driver.current_url.endswith("/console/sign-in")
    field = driver.find_element(By.ID, "token")
    assert driver.find_element(By.CSS_SELECTOR, "label[for=token]").text == "Admin token"
    field.send_keys(token)
    click_and_load(driver, driver.find_element(By.CSS_SELECTOR, "form button[type=submit]"))


OUTCOMES = {"accepted": "accepted", "validated": "accepted", "failed": "refused or dead", "dead": "refused or dead",
            "pending": "waiting", "interrupted": "waiting", "superseded": "superseded"}


def check_overview_shows_the_last_day(browser, relay):
    """The overview at 1280×800 (a screenshot to .build/console-screenshots/overview-day.png): the last 24 hours as a
    chart drawn on the server (no script on the page), its bars counting exactly the pings the admin API lists, each
    publish marked, and each wave under way as a progress bar with its next shard's time; all of it visible."""
    browser.set_window_size(1280, 800)
    browser.get(relay["url"] + "/console")
    assert not browser.find_elements(By.TAG_NAME, "script"), "the overview draws without script"
    listed = requests.get(relay["url"] + "/admin/deliveries?limit=1000", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).json()["deliveries"]
    expected = {}
    for record in listed:
        if record["origin"] != "send" and "target" not in record:
            outcome = OUTCOMES[record["status"]]
            expected[outcome] = expected.get(outcome, 0) + 1
    drawn = browser.execute_script("""
        const visible = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && r.right <= innerWidth; };
        const chart = document.querySelector('svg.activity');
        const counts = {};
        for (const bar of chart.querySelectorAll('rect.bar')) counts[bar.dataset.outcome] = (counts[bar.dataset.outcome] || 0) + +bar.dataset.count;
        const box = chart.getBoundingClientRect();
        return {visible: visible(chart), width: box.width, height: box.height, counts,
                publishes: chart.querySelectorAll('path.publish').length,
                bars: [...chart.querySelectorAll('rect.bar')].every(visible),
                waves: [...document.querySelectorAll('section[aria-labelledby=overview-waves] progress')].map(p => [visible(p), p.value, p.max]),
                next: document.querySelector('section[aria-labelledby=overview-waves]').innerText};
    """)
    shot(browser, "overview-day")
    assert drawn["visible"] and drawn["height"] > 150 and drawn["bars"], drawn
    assert drawn["counts"] == expected, (drawn, listed)
    assert drawn["publishes"] == 2, "versions 77 and 78 are marked"
    assert drawn["waves"] and all(visible and max_ == 4 for visible, _, max_ in drawn["waves"]), drawn
    assert "Next shard 20" in drawn["next"], drawn["next"]  # its time, "2026-… UTC (in …)"


def test_the_console_in_a_browser(emulator, tmp_path, browser):
    relay = start_relay(emulator, tmp_path, config([TOKEN, OTHER], tmp_path / "spool"))
    seen_urls = []
    try:
        # A wrong token is refused, slowed down and logged; the page says so.
        sign_in(browser, relay, "not-a-token")
        seen_urls.append(browser.current_url)
        assert "That is not an admin token." in browser.page_source
        shot(browser, "sign-in")
        relay["proc"].wait_for(lambda line: "console sign-in refused" in line)

        sign_in(browser, relay, TOKEN)
        seen_urls.append(browser.current_url)
        assert browser.current_url.endswith("/console")
        assert "Readiness" in browser.page_source and "demo-project" in browser.page_source
        cookie = browser.get_cookie("rc_console")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/console"

        # A signed webhook's delivery appears: overview and the deliveries page.
        # The fleet route's shards wait for their turns: the event is spooled and answered 202 at once.
        assert post_webhook(relay, 77).status_code == 202
        browser.get(relay["url"] + "/console")
        assert "Version 77" in browser.page_source
        shot(browser, "overview")

        # FCM is unavailable for one request, and with one attempt allowed the ping dies; the Retry button sends it
        # again and the emulator records it.
        requests.post(emulator["url"] + "/emulator/faults", json={"status": 503, "count": 1}, timeout=10)
        before = len(recorded(emulator))
        # Answered 202 as soon as the fleet route's shards wait for their turns: the stale ping may still be on its way.
        assert post_webhook(relay, 78).status_code == 202
        def listed():
            return requests.get(relay["url"] + "/admin/deliveries?version=78&route=stale",
                                headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).json()["deliveries"]

        assert until(lambda: [d["status"] for d in listed()] == ["dead"], 60), listed()
        browser.get(relay["url"] + "/console/deliveries?version=78&route=stale")
        seen_urls.append(browser.current_url)
        rows = browser.find_elements(By.CSS_SELECTOR, "tbody tr")
        assert len(rows) == 1 and "dead" in rows[0].text, browser.page_source
        shot(browser, "deliveries")
        click_and_load(browser, rows[0].find_element(By.CSS_SELECTOR, "button[aria-label^='Retry ping']"))
        seen_urls.append(browser.current_url)
        assert "/console/deliveries/" in browser.current_url
        assert "accepted" in browser.find_element(By.CSS_SELECTOR, "dl.facts").text
        assert browser.find_elements(By.CSS_SELECTOR, "table tbody tr"), "the attempts are listed"
        shot(browser, "delivery")
        stale = [m for m in recorded(emulator)[before:] if m["message"].get("topic") == "PUSH_RC"]
        assert [m["message"]["data"]["CONFIG_VERSION"] for m in stale] == ["78"], "the retried ping reached FCM"

        check_overview_shows_the_last_day(browser, relay)

        browser.get(relay["url"] + "/console/schedules")
        assert browser.find_elements(By.TAG_NAME, "progress"), "the wave of version 78 shows its progress"
        shot(browser, "schedules")
        browser.get(relay["url"] + "/console/routes")
        assert "PUSH_RC_{shard}" in browser.page_source
        shot(browser, "routes")
        click_and_load(browser, browser.find_element(By.LINK_TEXT, "fetch-load chart"))
        assert browser.find_element(By.NAME, "shards").get_attribute("value") == "4"
        assert browser.find_element(By.NAME, "spread").get_attribute("value") == "4000"

        # The preview form: what version 79 would send, nothing sent.
        sent_before = len(recorded(emulator))
        browser.get(relay["url"] + "/console/preview")
        browser.find_element(By.NAME, "version").send_keys("79")
        click_and_load(browser, browser.find_element(By.CSS_SELECTOR, "form[action='/console/preview'] button"))
        decisions = browser.find_element(By.CSS_SELECTOR, "section[aria-labelledby=decisions] tbody").text
        assert "stale yes topic:PUSH_RC" in decisions, decisions
        assert "fleet yes topic:PUSH_RC_0, topic:PUSH_RC_1, topic:PUSH_RC_2, topic:PUSH_RC_3" in decisions, decisions
        assert '"CONFIG_VERSION" : "79"' in browser.page_source or '"CONFIG_VERSION": "79"' in browser.page_source
        assert len(recorded(emulator)) == sent_before, "a preview sends nothing"
        shot(browser, "preview")

        # The fetch-load chart of the fleet route's waves, from the routes page's link: the peak the model gives.
        browser.get(relay["url"] + "/console/chart?devices=2000000&shards=20&spread=600&delay=120")
        assert "Peak as set: 3,333.3 fetches/s at 100 s" in browser.find_element(By.TAG_NAME, "main").text
        WebDriverWait(browser, 60).until(lambda d: d.execute_script("return document.querySelector('main img').complete"))
        assert browser.execute_script("return document.querySelector('main img').naturalWidth") == 1000, "the SVG chart loads"
        png = browser.find_element(By.LINK_TEXT, "The chart as a PNG").get_attribute("href")
        answer = requests.get(png, cookies={"rc_console": cookie["value"]}, timeout=30)
        assert answer.status_code == 200 and answer.headers["content-type"] == "image/png" and answer.content[:8] == b"\x89PNG\r\n\x1a\n"
        shot(browser, "chart")

        # A forged form post: the session cookie (as a cross-site form would carry it, were it not SameSite) without
        # the page's CSRF token, then with another origin.
        failed_id = browser.current_url.rsplit("/", 1)[-1]
        jar = {"rc_console": cookie["value"]}
        forged = requests.post(relay["url"] + "/console/sign-out", cookies=jar, data={}, allow_redirects=False, timeout=10)
        assert forged.status_code == 403
        csrf = browser.find_element(By.CSS_SELECTOR, "input[name=csrf]").get_attribute("value")
        cross = requests.post(relay["url"] + "/console/sign-out", cookies=jar, data={"csrf": csrf}, allow_redirects=False,
                              headers={"Origin": "https://evil.example"}, timeout=10)
        assert cross.status_code == 403
        browser.get(relay["url"] + "/console")
        assert browser.current_url.endswith("/console"), "the forged posts changed nothing: still signed in"
        assert failed_id

        # The token the session was opened with is rotated out: the session ends with it.
        (tmp_path / "rc-relay.yaml").write_text((tmp_path / "rc-relay.yaml").read_text().replace(f'"{TOKEN}", ', ""))
        reloaded = requests.post(relay["url"] + "/admin/reload", headers={"authorization": f"Bearer {OTHER}"}, timeout=10)
        assert reloaded.status_code == 200, reloaded.text
        browser.get(relay["url"] + "/console/deliveries")
        assert browser.current_url.endswith("/console/sign-in")

        # Sign out ends a session too.
        sign_in(browser, relay, OTHER)
        click_and_load(browser, browser.find_element(By.CSS_SELECTOR, "form[action='/console/sign-out'] button"))
        browser.get(relay["url"] + "/console")
        assert browser.current_url.endswith("/console/sign-in")

        for url in seen_urls:
            assert TOKEN not in url and OTHER not in url
        assert TOKEN not in browser.page_source
    finally:
        stop_relay(relay)
    log = relay["proc"].output
    assert TOKEN not in log and OTHER not in log and cookie["value"] not in log


def test_the_console_is_absent_without_admin_tokens_and_answers_with_a_strict_policy(emulator, tmp_path):
    relay = start_relay(emulator, tmp_path, "webhook: {secrets: [{env: TEST_WEBHOOK_SECRET}]}")
    try:
        assert requests.get(relay["url"] + "/console/sign-in", timeout=10).status_code == 404
    finally:
        stop_relay(relay)
    relay = start_relay(emulator, tmp_path, config([TOKEN], tmp_path / "spool"))
    try:
        page = requests.get(relay["url"] + "/console/sign-in", timeout=10)
        assert page.status_code == 200
        policy = page.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy and "script" not in policy
        assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"
        assert "<script" not in page.text
        assert requests.get(relay["url"] + "/console", allow_redirects=False, timeout=10).status_code == 303
        # Bodies no browser sends (a raw space, a stray %, invalid UTF-8) get an answer, and the relay lives on.
        form = {"content-type": "application/x-www-form-urlencoded"}
        for body in [b"token=a b", b"token=%zz%", b"token=%C3%28&#\"<>", b"\xff\xfe=\x00"]:
            answer = requests.post(relay["url"] + "/console/sign-in", data=body, headers=form, timeout=30)
            assert answer.status_code == 401, (body, answer.status_code)
        assert requests.get(relay["url"] + "/healthz", timeout=10).status_code == 200
        # A form from an opaque origin (a sandboxed frame, a data: URL) is refused.
        opaque = requests.post(relay["url"] + "/console/sign-in", data={"token": TOKEN}, headers={"Origin": "null"}, timeout=10)
        assert opaque.status_code == 403 and "set-cookie" not in opaque.headers
    finally:
        stop_relay(relay)
