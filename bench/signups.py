"""N sign-ups at once against GATEWAY (POST /v1/accounts, each a new email): prints how many
were answered 201, how many 503 (accounts' argon2id queue full: try again) and any other status.
Usage: python3 bench/signups.py GATEWAY N"""
import collections
import json
import sys
import threading
import urllib.error
import urllib.request
import uuid

gateway, n = sys.argv[1], int(sys.argv[2])
statuses = collections.Counter()
lock = threading.Lock()
start = threading.Barrier(n)


def sign_up():
    body = json.dumps({"email": f"burst-{uuid.uuid4().hex}@example.com", "password": f"pw-{uuid.uuid4().hex}"}).encode()
    request = urllib.request.Request(gateway + "/v1/accounts", data=body, headers={"Content-Type": "application/json"})
    start.wait()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status = response.status
    except urllib.error.HTTPError as e:
        status = e.code
    except OSError:
        status = "error"
    with lock:
        statuses[status] += 1


threads = [threading.Thread(target=sign_up) for _ in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(", ".join(f"{count} × {status}" for status, count in sorted(statuses.items(), key=lambda kv: str(kv[0]))))
