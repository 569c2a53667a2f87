#!/usr/bin/env python3
"""Drives the redeem page in headless Chromium through the DevTools protocol, as a person would:
sign up, check a code, redeem it and wait for "Pro until …" (or the sentence for a refusal).

usage: redeem_flow.py GATEWAY_URL CODE EXPECT SCREENSHOT [PASSWORD]
  EXPECT: "completed", a refusal reason such as "expired", or "signUpRefused" (the sign-up is
  answered with an error, shown in the status line)
Prints one JSON line: {"ok": bool, "status": <status text>, "result": <result text>}.
"""
import json, os, sys, time
from chromium import Chromium, BrowserError

gateway, code, expect, screenshot = sys.argv[1:5]
password = sys.argv[5] if len(sys.argv) > 5 else "a long browser passphrase"

def fail(msg):
    print(json.dumps({"ok": False, "error": msg}))
    sys.exit(1)

try:
    with Chromium(390, 844) as browser:
        js, wait_for, type_into, click = browser.js, browser.wait_for, browser.type_into, browser.click
        browser.navigate(f"{gateway}/redeem?code={code}")
        if not wait_for("document.readyState === 'complete' && !!document.getElementById('email')"):
            fail("page did not load")
        if js("document.getElementById('code').value") != code:
            fail("the code from the URL was not filled in")
        type_into("#email", f"browser-{os.getpid()}-{int(time.time()*1000)}@example.com")
        type_into("#password", password)
        click("#sign-up")
        if expect == "signUpRefused":
            if not wait_for("document.getElementById('status').className.indexOf('error') >= 0"):
                fail("no refusal of the sign-up shown")
        else:
            if not wait_for("document.getElementById('signed-in').hidden === false"):
                fail("sign-up did not finish: " + str(js("document.getElementById('status').textContent")))
            click("#check")
            if expect == "completed":
                if not wait_for("document.getElementById('redeem-button').disabled === false"):
                    fail("code not accepted: " + str(js("document.getElementById('status').textContent")))
                click("#redeem-button")
                if not wait_for("document.getElementById('result').hidden === false", 40):
                    fail("no completion: " + str(js("document.getElementById('status').textContent")))
            else:
                if not wait_for("document.getElementById('status').className.indexOf('error') >= 0"):
                    fail("no refusal shown")
        browser.screenshot(screenshot)
        status = js("document.getElementById('status').textContent")
        result = js("document.getElementById('result-text').textContent")
        live = js("document.getElementById('status').getAttribute('aria-live')")
        labelled = js("Array.from(document.querySelectorAll('input')).every(i => !!document.querySelector('label[for=\"' + i.id + '\"]'))")
        print(json.dumps({"ok": True, "status": status, "result": result, "live": live, "labelled": labelled}))
except BrowserError as e:
    fail(str(e))
