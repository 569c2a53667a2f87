#!/usr/bin/env python3
"""Drives Sign in with Apple on the redeem page in headless Chromium through the DevTools protocol,
against the tests' fake Apple: open /redeem?code=CODE, press "Sign in with Apple", let the fake
Apple's page post back to the gateway's callback, land on /redeem signed in, then check the code,
redeem it and wait for "Pro until …".

usage: apple_flow.py GATEWAY_URL CODE SCREENSHOT
Prints one JSON line: {"ok": bool, "button": bool, "signedInAs": str, "search": str, "result": str, "status": str}.
"""
import json, sys
from chromium import Chromium, BrowserError

gateway, code, screenshot = sys.argv[1:4]

def out(obj, code=0):
    print(json.dumps(obj))
    sys.exit(code)

try:
    with Chromium(390, 844) as browser:
        js, wait_for = browser.js, browser.wait_for

        def status():
            return js("document.getElementById('status') ? document.getElementById('status').textContent : document.location.href + ' ' + document.body.innerText.slice(0, 300)")

        browser.navigate(f"{gateway}/redeem?code={code}")
        if not wait_for("document.readyState === 'complete' && !!document.getElementById('apple-sign-in')"):
            out({"ok": False, "error": "page did not load"}, 1)
        button = js("!document.getElementById('apple-area').hidden && document.getElementById('apple-sign-in').offsetParent !== null")
        browser.screenshot(screenshot.replace(".png", "-button.png"), settle=0)
        js("document.getElementById('apple-sign-in').click()")
        # To Apple (the fake's page posts itself), back to the callback, and to /redeem, signed in.
        if not wait_for("location.pathname === '/redeem' && !!document.getElementById('signed-in') && document.getElementById('signed-in').hidden === false", 40):
            browser.screenshot(screenshot)
            out({"ok": False, "error": "not signed in: " + str(status()), "url": js("location.href"), "button": button}, 1)
        signed_in_as = js("document.getElementById('signed-in-email').textContent")
        apple_hidden_when_signed_in = js("document.getElementById('apple-area').hidden")
        search = js("location.search")
        if js("document.getElementById('code').value") != code:
            out({"ok": False, "error": "the code did not survive the trip to Apple", "search": search}, 1)
        js("document.getElementById('check').click()")
        if not wait_for("document.getElementById('redeem-button').disabled === false"):
            out({"ok": False, "error": "code not accepted: " + str(status())}, 1)
        js("document.getElementById('redeem-button').click()")
        if not wait_for("document.getElementById('result').hidden === false", 40):
            out({"ok": False, "error": "no completion: " + str(status())}, 1)
        browser.screenshot(screenshot)
        out({"ok": True, "button": button, "signedInAs": signed_in_as, "search": search, "appleHiddenWhenSignedIn": apple_hidden_when_signed_in,
             "result": js("document.getElementById('result-text').textContent"), "status": status()})
except BrowserError as e:
    out({"ok": False, "error": str(e)}, 1)
