"""Headless Chromium through the DevTools protocol, shared by the browser tests' scripts
(redeem_flow.py, apple_flow.py, dashboard_flow.py): start it on a free port with a profile of its
own, call protocol methods, evaluate JavaScript, wait for a condition, type, click, take
screenshots, and leave nothing behind.

    with Chromium(390, 844) as browser:
        browser.navigate(url)
        browser.wait_for("document.readyState === 'complete'")

A protocol error raises BrowserError; `on_event` sees every event read while waiting for an answer.
"""
import base64, json, shutil, socket, subprocess, tempfile, time, urllib.request
import websocket  # python3-websocket (Debian)


class BrowserError(Exception):
    pass


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


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
