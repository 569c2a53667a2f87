#!/usr/bin/env python3
"""Drives the dashboard's app switcher in headless Chromium, as an operator would: sign in as a
member with a role in two apps (and none in the default app), see the switcher list exactly those
two, switch to the second and see its coupon CODE, then reload: the choice is remembered.

usage: dashboard_apps.py GATEWAY_URL EMAIL PASSWORD CODE OUTPUT_DIR
Prints one JSON line: {"ok": bool, ...what was seen}.
"""
import json, os, sys
from chromium import Chromium, BrowserError, Report, sign_in_to_dashboard

gateway, email, password, code, out_dir = sys.argv[1:6]
report = Report()
seen, finish = report.seen, report.finish

try:
    with Chromium(1280, 900, on_event=report.note) as browser:
        js = browser.js

        def must(expr, what, seconds=20):
            browser.must(report, expr, what, seconds)

        options = "Array.from(document.getElementById('app').options).map(function (o) { return o.textContent; })"
        current = "document.getElementById('app').selectedOptions[0].textContent"
        listed = "Array.from(document.querySelectorAll('#coupons-table tbody tr')).some(function (r) { return r.textContent.indexOf(" + json.dumps(code) + ") >= 0; })"

        sign_in_to_dashboard(browser, report, gateway, email, password)
        must("!document.getElementById('app-field').hidden && document.getElementById('app').options.length > 0", "the app switcher did not show")
        seen["apps"] = js(options)
        seen["first"] = js(current)
        seen["firstListsCode"] = js(listed)

        # The second app: its coupons.
        js("(function(e){e.value=e.options[1].value; e.dispatchEvent(new Event('change', {bubbles: true}));})(document.getElementById('app'))")
        must(listed, "the second app's coupon did not show")
        seen["switched"] = js(current)
        browser.screenshot(os.path.join(out_dir, "dashboard-apps.png"), settle=0.3)

        # A reload signs in again from the cookie, in the app chosen before.
        browser.navigate(f"{gateway}/dashboard#coupons")
        must("document.getElementById('nav').hidden === false && !document.getElementById('app-field').hidden", "the reload did not sign in again")
        must(listed, "after the reload the chosen app's coupon did not show")
        seen["afterReload"] = js(current)
        finish(True)
except (BrowserError, TypeError, KeyError) as e:
    finish(False, error=repr(e))
