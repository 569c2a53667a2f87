#!/usr/bin/env python3
"""Drives the operator dashboard in headless Chromium through the DevTools protocol, as an operator
would: sign in as a member, try a coupon over a store limit (the error shows next to its field),
then a valid one, see it, redeem it as a user through /redeem (redeem_flow.py), see the redemption
on the coupon page, download the CSV, and visit every other page. A screenshot of each page goes to
OUTPUT_DIR, at 1280 px wide and, for the coupon page, 390 px.

usage: dashboard_flow.py GATEWAY_URL EMAIL PASSWORD CODE OUTPUT_DIR
Prints one JSON line: {"ok": bool, ...what was seen}.
"""
import json, os, shutil, subprocess, sys, tempfile, time
from chromium import Chromium, BrowserError, Report

gateway, email, password, code, out_dir = sys.argv[1:6]
here = os.path.dirname(os.path.abspath(__file__))
report = Report()
seen, finish = report.seen, report.finish
downloads = tempfile.mkdtemp(prefix="redeem-downloads-")

try:
    with Chromium(1280, 900, on_event=report.note) as browser:
        call, js, wait_for, click, text = browser.call, browser.js, browser.wait_for, browser.click, browser.text

        def must(expr, what, seconds=20):
            browser.must(report, expr, what, seconds)

        def type_into(selector, value, clear=True):
            if clear:
                js(f"(function(e){{e.value=''; e.dispatchEvent(new Event('input', {{bubbles: true}}));}})(document.querySelector({json.dumps(selector)}))")
            browser.type_into(selector, value)

        def select(selector, value):
            js(f"(function(e){{e.value={json.dumps(value)}; e.dispatchEvent(new Event('change', {{bubbles: true}}));}})(document.querySelector({json.dumps(selector)}))")

        def shot(name):
            browser.screenshot(os.path.join(out_dir, name), settle=0.3, captureBeyondViewport=True)

        def width(w):
            call("Emulation.setDeviceMetricsOverride", width=w, height=900 if w > 500 else 844, deviceScaleFactor=1, mobile=w < 500)

        call("Log.enable")
        call("Page.setDownloadBehavior", behavior="allow", downloadPath=downloads)
        width(1280)
        browser.navigate(f"{gateway}/dashboard")
        must("document.readyState === 'complete' && !!document.getElementById('signin-email') && !document.getElementById('view-signin').hidden", "the sign-in form did not show")
        seen["labelled"] = js("""Array.from(document.querySelectorAll('input, select')).every(function (i) {
            return !!(i.id && document.querySelector('label[for="' + i.id + '"]')) || !!i.closest('label') || !!i.getAttribute('aria-label'); })""")
        shot("dashboard-signin.png")

        # Sign in with the keyboard: type, then Enter submits the form.
        type_into("#signin-email", email)
        type_into("#signin-password", password)
        call("Input.dispatchKeyEvent", type="keyDown", key="Enter", code="Enter", windowsVirtualKeyCode=13, text="\r")
        call("Input.dispatchKeyEvent", type="keyUp", key="Enter", code="Enter", windowsVirtualKeyCode=13)
        must("!document.getElementById('view-coupons').hidden && document.getElementById('nav').hidden === false", "sign-in did not reach the coupons list")
        must("document.querySelectorAll('#coupons-table tbody tr').length > 0", "the coupons list did not load")
        seen["who"] = text("who")
        shot("dashboard-coupons.png")

        # A reload keeps the member signed in: the session cookie, which the page's script can't read.
        call("Page.reload")
        time.sleep(0.3)
        must("document.readyState === 'complete' && document.getElementById('nav').hidden === false && !document.getElementById('view-coupons').hidden", "a reload signed the member out")
        seen["reloadSignedIn"] = text("who") == email
        seen["cookieReadable"] = "redeem_dashboard" in js("document.cookie")
        seen["tokenStored"] = js("JSON.stringify(Object.assign({}, localStorage, sessionStorage)).indexOf('rt_') >= 0")

        # A coupon over a store limit: an iOS discount without a cap. The dry run shows the error next to the cap.
        click("a[href='#new']")
        must("!document.getElementById('view-new').hidden", "the form did not open")
        type_into("#f-code", code)
        select("#f-kind", "percentOff")
        type_into("#f-percentOff", "20")
        type_into("#f-periodCount", "1")
        type_into("#f-productIds", "pro.monthly")
        js("document.getElementById('f-android').checked = false; document.getElementById('f-web').checked = false;")
        select("#f-ios", "ios")
        must("document.getElementById('err-maxRedemptions').textContent.length > 0", "no store-limit error next to the cap")
        seen["storeLimitError"] = text("err-maxRedemptions")
        seen["storeLimitState"] = text("limits-state")
        shot("dashboard-new-store-limit.png")

        # Then a valid one: a free month on every platform. The limits line says none apply.
        select("#f-kind", "freePeriod")
        type_into("#f-productIds", "")
        js("document.getElementById('f-android').checked = true; document.getElementById('f-web').checked = true;")
        select("#f-web", "web")
        must("document.getElementById('limits-state').textContent.indexOf('No store limits') === 0", "the valid coupon was not checked")
        seen["errorsCleared"] = js("Array.from(document.querySelectorAll('#coupon-form .field-error')).every(function (p) { return p.textContent === ''; })")
        shot("dashboard-new-valid.png")
        click("#coupon-save")
        must(f"location.hash === '#coupon/{code}' && document.getElementById('coupon-title').textContent === 'Coupon {code}'", "the new coupon's page did not open")
        shot("dashboard-coupon-new.png")

        # Redeem it as a user on /redeem, in a browser of its own.
        redeem = subprocess.run([sys.executable, os.path.join(here, "redeem_flow.py"), gateway, code, "completed",
                                 os.path.join(out_dir, "dashboard-redeem-completed.png")], capture_output=True, text=True, timeout=120)
        seen["redeem"] = json.loads(redeem.stdout.strip().splitlines()[-1]) if redeem.stdout.strip() else {"ok": False, "error": redeem.stderr[-500:]}
        if not seen["redeem"].get("ok"):
            finish(False, error="the redemption through /redeem failed")

        # The redemption appears on the coupon page, and the status filter keeps it under "completed".
        js("location.hash = '#coupons'")
        must("!document.getElementById('view-coupons').hidden", "back to the list")
        must(f"Array.from(document.querySelectorAll('#coupons-table a')).some(function (a) {{ return a.textContent === '{code}'; }})", "the coupon is not in the list")
        click(f"#coupons-table a[href='#coupon/{code}']")
        must("document.querySelectorAll('#redemptions-table tbody tr').length === 1 && document.querySelector('#redemptions-table tbody tr').cells.length === 8 && document.querySelector('#redemptions-table tbody tr').cells[4].textContent === 'completed'", "the redemption is not on the coupon page")
        seen["redemptionRow"] = js("Array.from(document.querySelector('#redemptions-table tbody tr').cells).map(function (c) { return c.textContent; })")
        seen["figures"] = text("coupon-figures")
        select("#redemptions-filter", "failed")
        must("document.querySelector('#redemptions-table tbody tr').cells[0].textContent.indexOf('No redemptions') === 0", "the status filter did not filter")
        select("#redemptions-filter", "completed")
        must("document.querySelector('#redemptions-table tbody tr').cells[4].textContent === 'completed'", "completed rows not shown")
        shot("dashboard-coupon-redeemed.png")
        width(390)
        shot("dashboard-coupon-390.png")
        seen["narrowOverflow"] = js("document.documentElement.scrollWidth > window.innerWidth + 1")
        width(1280)

        click("#csv")
        csv_path = os.path.join(downloads, f"redemptions-{code}.csv")
        deadline = time.time() + 15
        while time.time() < deadline and not os.path.exists(csv_path):
            time.sleep(0.2)
        if not os.path.exists(csv_path):
            finish(False, error="the CSV was not downloaded", files=os.listdir(downloads))
        with open(csv_path) as f:
            seen["csv"] = f.read()

        # Unique codes: "Create codes" makes them and saves their CSV at once (the server gives it once).
        type_into("#c-count", "5")
        type_into("#c-prefix", "dash")
        click("#codes-create")
        codes_path = os.path.join(downloads, f"codes-{code}.csv")
        deadline = time.time() + 15
        while time.time() < deadline and not os.path.exists(codes_path):
            time.sleep(0.2)
        if not os.path.exists(codes_path):
            finish(False, error="the codes' CSV was not downloaded", files=os.listdir(downloads))
        must("document.getElementById('codes-note').textContent.indexOf('Codes downloaded') === 0", "the codes were not downloaded")
        time.sleep(0.5)
        with open(codes_path) as f:
            lines = f.read().split()
        if lines[0] != "code" or len(lines) != 6 or not all(line.startswith("DASH-") and len(line) == 24 for line in lines[1:]):
            finish(False, error="the codes' CSV is not five codes", lines=lines)
        seen["uniqueCodes"] = len(lines) - 1
        shot("dashboard-coupon-codes.png")

        for page in ["webhooks", "keys", "members", "audit"]:
            js(f"location.hash = '#{page}'")
            must(f"!document.getElementById('view-{page}').hidden && document.querySelectorAll('#{page}-table tbody tr').length > 0", f"the {page} page did not load")
            shot(f"dashboard-{page}.png")
        # A test event to the endpoint: its delivery shows in the endpoint's log.
        js("location.hash = '#webhooks'")
        must("document.querySelectorAll('#webhooks-table tbody button').length > 1", "no endpoint to test")
        js("Array.from(document.querySelectorAll('#webhooks-table tbody button')).find(function (b) { return b.textContent === 'Send test event'; }).click()")
        must("!document.getElementById('deliveries-table').hidden && document.querySelector('#deliveries-table tbody tr').cells[0].textContent === 'webhook.test'", "the test event is not in the deliveries")
        seen["testEvent"] = text("status")
        shot("dashboard-webhook-test.png")
        # The delivery's Retry button sends it again.
        js("Array.from(document.querySelectorAll('#deliveries-table tbody button')).find(function (b) { return b.textContent === 'Retry'; }).click()")
        must("document.getElementById('status').textContent === 'Delivery sent again.'", "the delivery was not sent again")
        seen["retried"] = text("status")
        js("location.hash = '#audit'")
        must("!document.getElementById('view-audit').hidden && document.querySelectorAll('#audit-table tbody tr').length > 0", "the audit page did not load again")
        seen["auditFirst"] = js("Array.from(document.querySelector('#audit-table tbody tr').cells).slice(1, 4).map(function (c) { return c.textContent; })")

        # Test mode: the new live coupon is not in the test world.
        js("location.hash = '#coupons'")
        select("#mode", "test")
        must("document.getElementById('test-banner').hidden === false", "no test-mode banner")
        time.sleep(0.5)
        seen["testModeHasCoupon"] = js(f"Array.from(document.querySelectorAll('#coupons-table a')).some(function (a) {{ return a.textContent === '{code}'; }})")
        shot("dashboard-test-mode.png")
        select("#mode", "live")

        # The overview: today's bar (web) and the coupon among those redeemed most.
        js("location.hash = '#overview'")
        must(f"!document.getElementById('view-overview').hidden && Array.from(document.querySelectorAll('#overview-coupons tbody a')).some(function (a) {{ return a.textContent === '{code}'; }})", "the overview does not show the coupon")
        seen["overviewBars"] = js("document.querySelectorAll('#overview-chart rect.bar-web').length")
        seen["overviewDays"] = js("document.querySelectorAll('#overview-chart g').length")
        seen["overviewPlatforms"] = text("overview-platforms")
        shot("dashboard-overview.png")

        # Plans: one without a name is refused next to the field; a whole one joins the list.
        js("location.hash = '#plans'")
        must("!document.getElementById('view-plans').hidden", "the plans page did not open")
        type_into("#p-productId", "plan." + code.lower())
        click("#plan-submit")
        must("document.getElementById('err-plan-name').textContent.length > 0", "no error next to the plan's name")
        seen["planNameError"] = text("err-plan-name")
        type_into("#p-name", "Pro monthly")
        type_into("#p-appStore", "6450000001")
        type_into("#p-play", "pro_monthly")
        type_into("#p-basePlans", "monthly, monthly-intro")
        click("#plan-submit")
        must(f"Array.from(document.querySelectorAll('#plans-table tbody tr')).some(function (r) {{ return r.cells[0].textContent === 'plan.{code.lower()}'; }})", "the new plan is not listed")
        seen["planRow"] = js(f"Array.from(document.querySelectorAll('#plans-table tbody tr')).filter(function (r) {{ return r.cells[0].textContent === 'plan.{code.lower()}'; }}).map(function (r) {{ return Array.from(r.cells).map(function (c) {{ return c.textContent; }}); }})[0]")
        shot("dashboard-plans.png")

        click("#sign-out")
        must("!document.getElementById('view-signin').hidden", "sign-out did not return to the sign-in form")
        # Signed out, a reload stays signed out: the cookie is gone.
        call("Page.reload")
        time.sleep(0.3)
        must("document.readyState === 'complete' && !document.getElementById('view-signin').hidden", "the sign-in form did not show after the reload")
        time.sleep(0.5)
        seen["reloadAfterSignOut"] = js("document.getElementById('nav').hidden === true && !document.getElementById('view-signin').hidden")
        finish(True)
except BrowserError as e:
    finish(False, error=str(e))
finally:
    shutil.rmtree(downloads, ignore_errors=True)
