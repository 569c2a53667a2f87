#!/usr/bin/env python3
"""A member who forgot their password resets it on the operator dashboard in headless Chromium:
"Forgot your password?", the email, then the code the test harness reads from the mail and writes
to CODE_FILE (this script waits for it), and a new password, which signs the member in.

usage: dashboard_reset.py GATEWAY_URL EMAIL NEW_PASSWORD CODE_FILE OUTPUT_DIR
Prints one JSON line: {"ok": bool, ...what was seen}.
"""
import json, os, sys, time
from chromium import Chromium, BrowserError

gateway, email, password, code_file, out_dir = sys.argv[1:6]
seen = {"exceptions": []}

def finish(ok, **extra):
    seen.update(extra)
    seen["ok"] = ok
    print(json.dumps(seen))
    sys.exit(0 if ok else 1)

def note(msg):
    if msg.get("method") == "Runtime.exceptionThrown":
        seen["exceptions"].append(msg["params"]["exceptionDetails"].get("exception", {}).get("description", "exception"))

try:
    with Chromium(1280, 900, on_event=note) as browser:
        js, wait_for, click = browser.js, browser.wait_for, browser.click

        def must(expr, what, seconds=20):
            if not wait_for(expr, seconds):
                finish(False, error=what, status=js("document.getElementById('status').textContent"))

        browser.navigate(f"{gateway}/dashboard")
        must("document.readyState === 'complete' && !document.getElementById('view-signin').hidden", "the sign-in form did not show")
        click("#forgot")
        must("!document.getElementById('view-reset').hidden && !document.getElementById('reset-request-form').hidden", "the reset form did not open")
        browser.type_into("#reset-email", email)
        click("#reset-request-submit")
        must("!document.getElementById('reset-confirm-form').hidden", "the code form did not open")
        seen["codeFocused"] = js("document.activeElement && document.activeElement.id === 'reset-code'")
        browser.screenshot(os.path.join(out_dir, "dashboard-reset.png"), settle=0.3)
        # A wrong code first: the error shows next to the code field.
        browser.type_into("#reset-code", "pr_not-the-code-we-mailed-to-you-at-all-000000000")
        browser.type_into("#reset-password", password)
        click("#reset-confirm-submit")
        must("document.getElementById('err-reset-token').textContent.length > 0", "no error for a wrong code")
        seen["wrongCodeError"] = js("document.getElementById('err-reset-token').textContent")
        deadline = time.time() + 30
        while not os.path.exists(code_file) and time.time() < deadline:
            time.sleep(0.1)
        if not os.path.exists(code_file):
            finish(False, error="the harness wrote no code")
        with open(code_file) as f:
            code = f.read().strip()
        js("document.getElementById('reset-code').value = ''")
        browser.type_into("#reset-code", code)
        click("#reset-confirm-submit")
        must("!document.getElementById('view-coupons').hidden && document.getElementById('nav').hidden === false", "the reset did not sign the member in")
        seen["who"] = js("document.getElementById('who').textContent")
        finish(True)
except BrowserError as e:
    finish(False, error=str(e))
