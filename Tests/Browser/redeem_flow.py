#!/usr/bin/env python3
"""Drives the redeem page in headless Chromium through the DevTools protocol, as a person would:
sign up, check a code, redeem it and wait for "Pro until …" (or the sentence for a refusal).

usage: redeem_flow.py GATEWAY_URL CODE EXPECT SCREENSHOT [PASSWORD]
  EXPECT: "completed", a refusal reason such as "expired", or "signUpRefused" (the sign-up is
  answered with an error, shown in the status line)
Prints one JSON line: {"ok": bool, "status": <status text>, "result": <result text>}.
"""
import json, os, shutil, socket, subprocess, sys, tempfile, time, urllib.request
import websocket  # python3-websocket (Debian)

gateway, code, expect, screenshot = sys.argv[1:5]
password = sys.argv[5] if len(sys.argv) > 5 else "a long browser passphrase"

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

port = free_port()
profile = tempfile.mkdtemp(prefix="redeem-chromium-")
browser = subprocess.Popen([
    shutil.which("chromium") or "/usr/bin/chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
    "--no-first-run", "--disable-extensions", f"--remote-debugging-port={port}", f"--user-data-dir={profile}",
    "--window-size=390,844", "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def fail(msg):
    print(json.dumps({"ok": False, "error": msg}))
    sys.exit(1)

try:
    target = None
    for _ in range(100):
        try:
            targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=1))
            target = next(t for t in targets if t.get("type") == "page")
            break
        except Exception:
            time.sleep(0.1)
    if target is None:
        fail("chromium did not start")
    ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30)
    seq = [0]

    def call(method, **params):
        seq[0] += 1
        ws.send(json.dumps({"id": seq[0], "method": method, "params": params}))
        while True:
            msg = json.loads(ws.recv())
            if msg.get("id") == seq[0]:
                if "error" in msg:
                    fail(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def js(expr):
        r = call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        return r.get("result", {}).get("value")

    def wait_for(expr, seconds=30):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if js(expr):
                return True
            time.sleep(0.1)
        return False

    def type_into(selector, text):
        js(f"document.querySelector({json.dumps(selector)}).focus()")
        call("Input.insertText", text=text)

    def click(selector):
        js(f"document.querySelector({json.dumps(selector)}).click()")

    call("Page.enable")
    call("Runtime.enable")
    call("Page.navigate", url=f"{gateway}/redeem?code={code}")
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
    time.sleep(0.2)
    shot = call("Page.captureScreenshot", format="png")
    import base64
    with open(screenshot, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    status = js("document.getElementById('status').textContent")
    result = js("document.getElementById('result-text').textContent")
    live = js("document.getElementById('status').getAttribute('aria-live')")
    labelled = js("Array.from(document.querySelectorAll('input')).every(i => !!document.querySelector('label[for=\"' + i.id + '\"]'))")
    print(json.dumps({"ok": True, "status": status, "result": result, "live": live, "labelled": labelled}))
finally:
    try:
        browser.terminate(); browser.wait(10)
    except Exception:
        browser.kill()
    shutil.rmtree(profile, ignore_errors=True)
