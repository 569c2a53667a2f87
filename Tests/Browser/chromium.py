"""Headless Chromium through the DevTools protocol, shared by the browser tests' scripts
(redeem_flow.py, apple_flow.py, dashboard_*.py): start it on a free port with a profile of its
own, call protocol methods, evaluate JavaScript, wait for a condition, type, click, take
screenshots, and leave nothing behind.

    with Chromium(390, 844) as browser:
        browser.navigate(url)
        browser.wait_for("document.readyState === 'complete'")

A protocol error raises BrowserError; `on_event` sees every event read while waiting for an answer.
`Report` is what a script saw, printed as its one JSON line; `sign_in_to_dashboard` signs a member
in to the operator dashboard.
"""
import base64, json, shutil, socket, subprocess, sys, tempfile, time, urllib.request
import websocket  # python3-websocket (Debian)


class BrowserError(Exception):
    pass


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


class Report:
    """What a script saw: `seen`, printed as one JSON line by `finish` (with "ok"), which ends the
    script. `note`, as a Chromium's `on_event`, keeps the page's script errors and the Content
    Security Policy's refusals."""

    def __init__(self):
        self.seen = {"exceptions": [], "violations": []}

    def finish(self, ok, **extra):
        self.seen.update(extra)
        self.seen["ok"] = ok
        print(json.dumps(self.seen))
        sys.exit(0 if ok else 1)

    def note(self, msg):
        if msg.get("method") == "Runtime.exceptionThrown":
            self.seen["exceptions"].append(msg["params"]["exceptionDetails"].get("exception", {}).get("description", "exception"))
        if msg.get("method") == "Log.entryAdded":
            text = msg["params"]["entry"].get("text", "")
            if "Content Security Policy" in text or "Refused to" in text:
                self.seen["violations"].append(text)


class Chromium:
    def __init__(self, width, height, on_event=None):
        self.on_event = on_event
        self.seq = 0
        self.ws = None
        port = free_port()
        self.profile = tempfile.mkdtemp(prefix="redeem-chromium-")
        self.process = subprocess.Popen([
            shutil.which("chromium") or "/usr/bin/chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
            "--no-first-run", "--disable-extensions", f"--remote-debugging-port={port}", f"--user-data-dir={self.profile}",
            f"--window-size={width},{height}", "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        target = None
        for _ in range(100):
            try:
                targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=1))
                target = next(t for t in targets if t.get("type") == "page")
                break
            except Exception:
                time.sleep(0.1)
        if target is None:
            self.close()
            raise BrowserError("chromium did not start")
        self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30)
        self.call("Page.enable")
        self.call("Runtime.enable")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        try:
            self.process.terminate(); self.process.wait(10)
        except Exception:
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method, **params):
        self.seq += 1
        self.ws.send(json.dumps({"id": self.seq, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.seq:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if self.on_event:
                self.on_event(msg)

    def navigate(self, url):
        self.call("Page.navigate", url=url)

    def js(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        return r.get("result", {}).get("value")

    def wait_for(self, expr, seconds=30):
        """Whether `expr` became true within `seconds`. An evaluation that fails (the page is
        navigating) counts as not yet."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                if self.js(expr):
                    return True
            except Exception:
                pass
            time.sleep(0.1)
        return False

    def type_into(self, selector, text):
        self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", text=text)

    def click(self, selector):
        self.js(f"document.querySelector({json.dumps(selector)}).click()")

    def screenshot(self, path, settle=0.2, **options):
        time.sleep(settle)
        data = self.call("Page.captureScreenshot", format="png", **options)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def text(self, id):
        """The text of the element with this id (None without one)."""
        return self.js(f"(document.getElementById({json.dumps(id)}) || {{}}).textContent")

    def must(self, report, expr, what, seconds=20):
        """Waits for `expr`; without it the script ends, reporting `what` and the page's status line."""
        if not self.wait_for(expr, seconds):
            report.finish(False, error=what, status=self.text("status"))


def sign_in_to_dashboard(browser, report, gateway, email, password):
    """Opens the dashboard and signs a member in with the form, until the coupons list shows."""
    browser.navigate(f"{gateway}/dashboard")
    browser.must(report, "document.readyState === 'complete' && !document.getElementById('view-signin').hidden", "the sign-in form did not show")
    browser.type_into("#signin-email", email)
    browser.type_into("#signin-password", password)
    browser.click("#signin-submit")
    browser.must(report, "!document.getElementById('view-coupons').hidden && document.getElementById('nav').hidden === false", "sign-in did not reach the coupons list")
