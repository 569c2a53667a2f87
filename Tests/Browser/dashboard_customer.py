#!/usr/bin/env python3
"""Drives the dashboard's Customers page in headless Chromium, as an operator would: sign in as a
member, search an end user by email, see the account, its entitlement and its redemption of CODE,
search it again by appUserId, get told of an unknown one, switch to test mode (no live redemption
shows), and reach the customer from the coupon's redemptions list. Screenshots go to OUTPUT_DIR.

usage: dashboard_customer.py GATEWAY_URL EMAIL PASSWORD CUSTOMER_EMAIL APP_USER_ID CODE OUTPUT_DIR
Prints one JSON line: {"ok": bool, ...what was seen}.
"""
import json, os, sys
from chromium import Chromium, BrowserError, Report, sign_in_to_dashboard

gateway, email, password, customer_email, app_user_id, code, out_dir = sys.argv[1:8]
report = Report()
seen, finish = report.seen, report.finish

try:
    with Chromium(1280, 900, on_event=report.note) as browser:
        js, click, text = browser.js, browser.click, browser.text

        def must(expr, what, seconds=20):
            browser.must(report, expr, what, seconds)

        def cells(selector):
            return js(f"Array.from(document.querySelectorAll({json.dumps(selector)})).map(function (r) {{"
                      f" return Array.from(r.cells).map(function (c) {{ return c.textContent; }}); }})")

        def search(query):
            js("document.getElementById('customer-query').value = ''")
            browser.type_into("#customer-query", query)
            click("#customer-find")

        shown = "!document.getElementById('customer').hidden && document.getElementById('customer-title').textContent === " + json.dumps("Account " + app_user_id)

        browser.call("Log.enable")
        sign_in_to_dashboard(browser, report, gateway, email, password)
        click('nav a[href="#customers"]')
        must("!document.getElementById('view-customers').hidden && document.getElementById('customer').hidden", "the Customers page did not open")
        seen["navCurrent"] = js("document.querySelector('nav a[aria-current=\"page\"]').getAttribute('href')")

        # By email, in another case than the account's.
        search(customer_email.upper())
        must(shown + " && document.querySelectorAll('#customer-redemptions tbody a').length > 0", "the customer found by email did not show")
        seen["facts"] = js("Array.from(document.querySelectorAll('#customer-facts div')).map(function (d) { return d.textContent; })")
        seen["entitlements"] = cells("#customer-entitlements tbody tr")
        seen["redemptions"] = cells("#customer-redemptions tbody tr")
        seen["hash"] = js("location.hash")
        browser.screenshot(os.path.join(out_dir, "dashboard-customer.png"), settle=0.3, captureBeyondViewport=True)

        # By appUserId, after an unknown one.
        search("nobody-" + app_user_id)
        must("document.getElementById('err-customer-query').textContent !== ''", "an unknown appUserId was not told")
        seen["unknown"] = text("err-customer-query")
        seen["unknownHidesCustomer"] = js("document.getElementById('customer').hidden")
        search(app_user_id)
        must(shown + " && document.getElementById('err-customer-query').textContent === ''", "the customer found by appUserId did not show")
        seen["byIdRedemptions"] = len(cells("#customer-redemptions tbody tr"))

        # Test mode: the live redemption is not this mode's.
        js("(function(e){e.value='test'; e.dispatchEvent(new Event('change', {bubbles: true}));})(document.getElementById('mode'))")
        must(shown + " && /No redemptions in test mode/.test(document.getElementById('customer-redemptions').textContent)", "test mode still showed the live redemption")
        seen["testMode"] = cells("#customer-redemptions tbody tr")
        js("(function(e){e.value='live'; e.dispatchEvent(new Event('change', {bubbles: true}));})(document.getElementById('mode'))")

        # From the coupon's redemptions, the appUserId leads to the customer.
        browser.navigate(f"{gateway}/dashboard#coupon/{code}")
        link = f'#redemptions-table a[href="#customer/{app_user_id}"]'
        must(f"!!document.querySelector({json.dumps(link)})", "the coupon's redemption did not link to its customer")
        click(link)
        must(shown, "the link did not open the customer")
        seen["fromCoupon"] = js("location.hash")
        finish(True)
except (BrowserError, TypeError, KeyError) as e:
    finish(False, error=repr(e))
