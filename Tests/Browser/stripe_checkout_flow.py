#!/usr/bin/env python3
"""Drives the redeem page through Stripe Checkout in headless Chromium, as a person would: sign
up, check a Stripe-backed code, redeem it, land on the (fake) Stripe's checkout page, then pay
(`success`) or go back (`cancel`), return to /redeem, sign in again (the session lives in the
page's memory only) and see the result.

usage: stripe_checkout_flow.py GATEWAY_URL CODE success|cancel SCREENSHOT EMAIL PASSWORD
Prints one JSON line: {"ok": bool, "checkoutUrl", "returnUrl", "returnStatus", "status", "result",
"error": bool, "againUrl"}: `returnStatus` is the status line on return (before signing in
again), `status` the one at the end; after `cancel`, `againUrl` is where pressing Redeem again led.
"""
import json, sys
from chromium import Chromium, BrowserError

gateway, code, path, screenshot, email, password = sys.argv[1:7]

def fail(msg, **extra):
    print(json.dumps(dict({"ok": False, "error": msg}, **extra)))
    sys.exit(1)

def status(js):
    return js("document.getElementById('status').textContent")

try:
    with Chromium(390, 844) as browser:
        js, wait_for, type_into, click = browser.js, browser.wait_for, browser.type_into, browser.click
        on_checkout = "location.pathname.indexOf('/c/pay/') === 0 && !!document.getElementById('pay-button')"
        browser.navigate(f"{gateway}/redeem?code={code}")
        if not wait_for("document.readyState === 'complete' && !!document.getElementById('email')"):
            fail("page did not load")
        type_into("#email", email)
        type_into("#password", password)
        click("#sign-up")
        if not wait_for("document.getElementById('signed-in').hidden === false"):
            fail("sign-up did not finish: " + str(status(js)))
        click("#check")
        if not wait_for("document.getElementById('redeem-button').disabled === false"):
            fail("code not accepted: " + str(status(js)))
        click("#redeem-button")
        if not wait_for(on_checkout):
            fail("not sent to checkout: " + str(js("location.href")) + " " + str(status(js)))
        checkout_url = js("location.href")
        if path == "success":
            click("#pay-button")
        else:
            click("#back")
        if not wait_for("location.pathname === '/redeem' && location.search.indexOf('checkout=') >= 0 "
                        "&& document.readyState === 'complete' && document.getElementById('status').textContent !== ''"):
            fail("not back on /redeem: " + str(js("location.href")))
        return_url = js("location.href")
        return_status = status(js)
        type_into("#email", email)
        type_into("#password", password)
        click("#sign-in")
        if not wait_for("document.getElementById('signed-in').hidden === false"):
            fail("sign-in did not finish: " + str(status(js)))
        again_url = None
        if path == "success":
            if not wait_for("document.getElementById('result').hidden === false", 40):
                fail("no completion shown: " + str(status(js)))
        else:
            if not wait_for("document.getElementById('redeem-button').disabled === false"):
                fail("Redeem not offered again: " + str(status(js)))
        browser.screenshot(screenshot)
        final_status = status(js)
        result = js("document.getElementById('result-text').textContent")
        error = js("document.getElementById('status').className.indexOf('error') >= 0")
        if path != "success":
            click("#redeem-button")
            if not wait_for(on_checkout):
                fail("not sent to checkout again: " + str(js("location.href")) + " " + str(status(js)))
            again_url = js("location.href")
        print(json.dumps({"ok": True, "checkoutUrl": checkout_url, "returnUrl": return_url, "returnStatus": return_status,
                          "status": final_status, "result": result, "error": error, "againUrl": again_url}))
except BrowserError as e:
    fail(str(e))
