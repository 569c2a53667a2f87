#!/usr/bin/env python3
"""Signs a member with TOTP in to the operator dashboard in headless Chromium: email and password
first, then the code field the page opens when the server answers totpRequired, then the code
(RFC 6238, computed here from the member's base32 secret, for the step after STEP: STEP's code was
taken when TOTP was turned on).

usage: dashboard_totp.py GATEWAY_URL EMAIL PASSWORD BASE32_SECRET STEP OUTPUT_DIR
Prints one JSON line: {"ok": bool, ...what was seen}.
"""
import base64, hashlib, hmac, json, os, struct, sys
from chromium import Chromium, BrowserError, Report

gateway, email, password, secret, step, out_dir = sys.argv[1:7]
report = Report()
seen, finish = report.seen, report.finish

def totp(secret, step):
    key = base64.b32decode(secret + "=" * (-len(secret) % 8))
    mac = hmac.new(key, struct.pack(">Q", step), hashlib.sha1).digest()
    offset = mac[19] & 0x0F
    return "%06d" % ((struct.unpack(">I", mac[offset:offset + 4])[0] & 0x7FFFFFFF) % 1000000)

try:
    with Chromium(1280, 900, on_event=report.note) as browser:
        js, wait_for, click = browser.js, browser.wait_for, browser.click

        def must(expr, what, seconds=20):
            browser.must(report, expr, what, seconds)

        browser.navigate(f"{gateway}/dashboard")
        must("document.readyState === 'complete' && !document.getElementById('view-signin').hidden", "the sign-in form did not show")
        seen["codeFieldAtFirst"] = not js("document.getElementById('signin-totp-field').hidden")
        browser.type_into("#signin-email", email)
        browser.type_into("#signin-password", password)
        click("#signin-submit")
        must("!document.getElementById('signin-totp-field').hidden", "the code field did not open")
        seen["codeFocused"] = js("document.activeElement && document.activeElement.id === 'signin-totp'")
        browser.screenshot(os.path.join(out_dir, "dashboard-signin-totp.png"), settle=0.3)
        browser.type_into("#signin-totp", totp(secret, int(step) + 1))
        click("#signin-submit")
        must("!document.getElementById('view-coupons').hidden && document.getElementById('nav').hidden === false", "sign-in with the code did not reach the coupons list")
        seen["who"] = js("document.getElementById('who').textContent")
        finish(True)
except BrowserError as e:
    finish(False, error=str(e))
