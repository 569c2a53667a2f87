#!/usr/bin/env python3
"""Drives Sign in with Apple on the redeem page in headless Chromium through the DevTools protocol,
against the tests' fake Apple: open /redeem?code=CODE, press "Sign in with Apple", let the fake
Apple's page post back to the gateway's callback, land on /redeem signed in, then check the code,
redeem it and wait for "Pro until …".

usage: apple_flow.py GATEWAY_URL CODE SCREENSHOT
Prints one JSON line: {"ok": bool, "button": bool, "signedInAs": str, "search": str, "result": str, "status": str}.
"""
import base64, json, shutil, socket, subprocess, sys, tempfile, time, urllib.request
import websocket  # python3-websocket (Debian)

gateway, code, screenshot = sys.argv[1:4]

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

port = free_port()
profile = tempfile.mkdtemp(prefix="redeem-chromium-")
browser = subprocess.Popen([
    shutil.which("chromium") or "/usr/bin/chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
    "--no-first-run", "--disable-extensions", f"--remote-debugging-port={port}", f"--user-data-dir={profile}",
    "--window-size=390,844", "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def out(obj, code=0):
    print(json.dumps(obj))
    sys.exit(code)

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
        out({"ok": False, "error": "chromium did not start"}, 1)
    ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30)
    seq = [0]

    def call(method, **params):
        seq[0] += 1
        ws.send(json.dumps({"id": seq[0], "method": method, "params": params}))
        while True:
            msg = json.loads(ws.recv())
            if msg.get("id") == seq[0]:
                if "error" in msg:
                    out({"ok": False, "error": f"{method}: {msg['error']}"}, 1)
                return msg.get("result", {})

    def js(expr):
        r = call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        return r.get("result", {}).get("value")

    def wait_for(expr, seconds=30):
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                if js(expr):
                    return True
            except Exception:
                pass
            time.sleep(0.1)
        return False

    def status():
        return js("document.getElementById('status') ? document.getElementById('status').textContent : document.location.href + ' ' + document.body.innerText.slice(0, 300)")

    def shoot():
        time.sleep(0.2)
        shot = call("Page.captureScreenshot", format="png")
        with open(screenshot, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    call("Page.enable")
    call("Runtime.enable")
    call("Page.navigate", url=f"{gateway}/redeem?code={code}")
    if not wait_for("document.readyState === 'complete' && !!document.getElementById('apple-sign-in')"):
        out({"ok": False, "error": "page did not load"}, 1)
    button = js("!document.getElementById('apple-area').hidden && document.getElementById('apple-sign-in').offsetParent !== null")
    shot = call("Page.captureScreenshot", format="png")
    with open(screenshot.replace(".png", "-button.png"), "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    js("document.getElementById('apple-sign-in').click()")
    # To Apple (the fake's page posts itself), back to the callback, and to /redeem, signed in.
    if not wait_for("location.pathname === '/redeem' && !!document.getElementById('signed-in') && document.getElementById('signed-in').hidden === false", 40):
        shoot()
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
    shoot()
    out({"ok": True, "button": button, "signedInAs": signed_in_as, "search": search, "appleHiddenWhenSignedIn": apple_hidden_when_signed_in,
         "result": js("document.getElementById('result-text').textContent"), "status": status()})
finally:
    try:
        browser.terminate(); browser.wait(10)
    except Exception:
        browser.kill()
    shutil.rmtree(profile, ignore_errors=True)
