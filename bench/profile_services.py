"""Reads `perf script -F comm,pid,tid,time,ip,sym,dso | swift demangle` of several services on stdin
and prints, for each, its CPU per operation and how it splits by kind of work: a sample counts for
the first kind whose markers appear anywhere in its stack (so a kind includes what it calls).
Usage: ... | python3 bench/profile_services.py OPERATIONS SAMPLE_HZ PID=NAME[,PID=NAME...]"""
import collections
import re
import sys

KINDS = [
    ("JWT verification", ["Authenticator.user", "JWT.verify"]),
    ("JSON encode", ["JSONText", "TextJSONEncoder", "__JSONEncoder", "JSONWriter", "_JSONKeyed"]),
    ("JSON decode", ["JSONDecoder", "JSONScanner", "JSONMap"]),
    ("logging", ["Logger.log", "LogSink", "LogLine", "LineQueue"]),
    ("PostgreSQL client (libpq, rows)", ["PGConnection", "PGPool", "PGRow", "libpq"]),
    ("bus: ZeroMQ and CURVE", ["libzmq", "libsodium", "SocketWorker", "ZMQSocket"]),
    ("bus: routing, binary codec", ["BusRouter", "BusClient", "BusBinary"]),
    ("HTTP (libmicrohttpd, server)", ["libmicrohttpd", "MHD_", "httpAccessHandler"]),
]

operations, hz = int(sys.argv[1]), float(sys.argv[2])
names = dict(pair.split("=") for pair in sys.argv[3].split(","))
counts = collections.defaultdict(collections.Counter)
service, stack = None, []


def count(service, stack):
    if service is None or not stack:
        return
    text = "\n".join(stack)
    for kind, markers in KINDS:
        if any(m in text for m in markers):
            counts[service][kind] += 1
            return
    top = stack[0]
    if "libcrypto" in top:  # built without frame pointers: RSA verification, all a request asks of it
        counts[service]["JWT verification"] += 1
    elif "kernel" in top:
        counts[service]["kernel (TCP, epoll, scheduling)"] += 1
    elif re.search(r"malloc|free|_int_|swift_retain|swift_release|memset|memmove|libc\.so", top):
        counts[service]["malloc, free, reference counting"] += 1
    else:
        counts[service]["other"] += 1


for line in sys.stdin:
    if line.startswith((" ", "\t")):
        stack.append(line.strip())
    elif line.strip():
        count(service, stack)
        match = re.match(r"\s*\S.*?\s+(\d+)/\d+\s", line)
        service, stack = (names.get(match.group(1)) if match else None), []
count(service, stack)


def us(samples):
    return samples / hz * 1e6 / max(operations, 1)


for name in names.values():
    c = counts[name]
    print(f"{name}: {us(sum(c.values())):.0f} µs per operation")
    for kind, n in c.most_common():
        print(f"  {us(n):6.1f} µs  {kind}")
