#!/usr/bin/env python3
"""Drives the dashboard's Stores page in headless Chromium, as an operator would: a member of the
default app and an admin of app APP_ID sees that the default app's settings are the environment's,
switches to the app, is shown the API's error next to its field, sets the app's RevenueCat
settings with the form (the secret ending listed, the secret gone from the page and the browser's
storage, the settings stored as the API answers them), sees none in test mode, and removes them.

usage: dashboard_stores.py GATEWAY_URL EMAIL PASSWORD APP_ID ADMIN_KEY SECRET OUTPUT_DIR
Prints one JSON line: {"ok": bool, ...what was seen}.
"""
import json, os, sys, urllib.request
from chromium import Chromium, BrowserError, Report, sign_in_to_dashboard

gateway, email, password, app, admin_key, secret, out_dir = sys.argv[1:8]
report = Report()
seen, finish = report.seen, report.finish


def stored(mode):
    """The app's settings in `mode`, as the API answers a deployment admin."""
    req = urllib.request.Request(f"{gateway}/v1/apps/{app}/stores", headers={
        "Authorization": f"Bearer {admin_key}", "Redeem-Mode": mode})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)["data"]


try:
    with Chromium(1280, 1400, on_event=report.note) as browser:
        js = browser.js

        def must(expr, what, seconds=20):
            browser.must(report, expr, what, seconds)

        def select(id, value):
            js("(function(e){e.value=" + json.dumps(value) + "; e.dispatchEvent(new Event('change', {bubbles: true}));})(document.getElementById(" + json.dumps(id) + "))")

        rows = "Array.from(document.querySelectorAll('#stores-table tbody tr')).map(function (r) { return Array.from(r.cells).map(function (c) { return c.textContent; }); })"
        empty = lambda mode: "(document.querySelector('#stores-table tbody') || {}).textContent === " + json.dumps(f"No settings in {mode} mode yet.")
        listed = "document.querySelector('#stores-table tbody').textContent.indexOf('RevenueCat') >= 0"

        sign_in_to_dashboard(browser, report, gateway, email, password)
        browser.navigate(f"{gateway}/dashboard#stores")
        must("!document.getElementById('view-stores').hidden && document.getElementById('app').options.length > 1", "the Stores page did not show")
        # The default app: its settings are the environment's, and there is no form.
        must("!document.getElementById('stores-default').hidden", "the default app's note did not show")
        seen["defaultFormHidden"] = js("document.getElementById('stores-app').hidden")

        # The app: nothing set yet in live mode.
        select("app", app)
        must("!document.getElementById('stores-app').hidden && " + empty("live"), "the app's empty settings did not show")
        seen["emptyBefore"] = js(rows)
        seen["labelled"] = js("Array.from(document.querySelectorAll('#stores-app input, #stores-app textarea')).every(function (f) { return document.querySelector('label[for=\"' + f.id + '\"]') !== null; })")
        seen["secretInputsHidden"] = js("Array.from(document.querySelectorAll('#stores-app input[data-secret]')).every(function (f) { return f.type === 'password'; })")

        # The API's error, next to its field.
        browser.type_into("#s-revenuecat-secretKey", "short")
        browser.click("#store-save-revenuecat")
        must("document.getElementById('err-s-revenuecat-secretKey').textContent !== ''", "the API's error did not show")
        seen["fieldError"] = browser.text("err-s-revenuecat-secretKey")
        js("document.getElementById('s-revenuecat-secretKey').value = ''")

        # Set: the secret's ending is listed, and the secret is nowhere in the page or its storage.
        browser.type_into("#s-revenuecat-secretKey", secret)
        browser.click("#store-save-revenuecat")
        must(listed, "the saved settings were not listed")
        seen["listed"] = js(rows)
        seen["status"] = browser.text("status")
        seen["errorCleared"] = browser.text("err-s-revenuecat-secretKey")
        seen["secretInPage"] = js(
            "(function(s){ return document.documentElement.outerHTML.indexOf(s) >= 0"
            " || Array.from(document.querySelectorAll('input, textarea')).some(function (f) { return f.value.indexOf(s) >= 0; })"
            " || JSON.stringify(localStorage).indexOf(s) >= 0 || JSON.stringify(sessionStorage).indexOf(s) >= 0; })(" + json.dumps(secret) + ")")
        seen["storedLive"] = stored("live")
        browser.screenshot(os.path.join(out_dir, "dashboard-stores.png"), settle=0.3, captureBeyondViewport=True)

        # Test mode has its own settings: none.
        select("mode", "test")
        must(empty("test"), "test mode's settings did not show")
        seen["testMode"] = js(rows)
        select("mode", "live")
        must(listed, "live mode's settings did not show again")

        # Remove.
        js("window.confirm = function () { return true; }")
        js("document.querySelector('#stores-table tbody button').click()")
        must(empty("live"), "the removed settings were still listed")
        seen["removedStatus"] = browser.text("status")
        seen["storedAfter"] = stored("live")
        finish(True)
except (BrowserError, TypeError, KeyError, OSError) as e:
    finish(False, error=repr(e))
