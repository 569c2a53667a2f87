"""Reads `perf script | swift demangle` on stdin and prints the share of samples, and µs per
operation, of each part of a request: a sample counts for the first part whose markers appear
anywhere in its stack. Usage: ... | python3 bench/profile_parts.py OPERATIONS SAMPLE_HZ"""
import collections
import re
import sys

from perf_stacks import stacks

PARTS = [
    ("access log (Logger.log, the sink's writer thread)", ["Logger.log", "LogSink.write", "LogLine", "TypedLine", "LineQueue"]),
    ("request metrics (MetricsRegistry)", ["MetricsRegistry"]),
    ("tracing (Tracer, TraceContext)", ["Tracer.", "TraceContext"]),
    ("JWT verification (Authenticator.user)", ["Authenticator.user", "JWT.verify", "Authenticator.principal"]),
    ("request body, JSON decode", ["JSONBody.decode", "RedeemBody.init"]),
    ("bus: reply, decode", ["busFrames", "decodeFrames", "BusBinaryReader", "ReplyEnvelope", "BatchAnswer"]),
    ("bus: request, encode and send", ["Envelope.encode", "BusClient.request", "JSONEncoder", "BusBinaryWriter"]),
    ("bus: ZeroMQ and CURVE", ["libzmq", "libsodium", "zmq_", "ZMQSocket", "PeerSockets", "BusNode"]),
    ("reservation batching (Coalescer)", ["Coalescer", "ReservationBatcher"]),
    ("response, queued to libmicrohttpd", ["queue(_:on:)", "HTTPResponse.json", "MHD_queue_response", "MHD_create_response"]),
    ("request, headers read (makeRequest)", ["makeRequest", "collect(_:_:lowercaseKeys:)", "ClientAddress"]),
    ("router and handler", ["Router.handle", "Gateway.redeem", "Gateway.validate", "AbuseGuard"]),
    ("libmicrohttpd", ["libmicrohttpd", "MHD_"]),
]

operations, hz = int(sys.argv[1]), float(sys.argv[2])
counts, total = collections.Counter(), 0
# Kernel samples by the user-space function that entered the kernel (the system call's wrapper).
entries = collections.Counter()


def count(stack):
    global total
    if not stack:
        return
    total += 1
    if "kernel" in stack[0]:
        user = next((f for f in stack if "kernel" not in f), "")
        name = re.sub(r"^[0-9a-f]+ ", "", user)
        entries[re.sub(r"\+0x[0-9a-f]+.*", "", name).strip() or "(kernel only)"] += 1
    text = "\n".join(stack)
    for name, markers in PARTS:
        if any(m in text for m in markers):
            counts[name] += 1
            return
    top = stack[0]
    # Libraries built without frame pointers end the stack at their own frame: their part is
    # known by the library alone (RSA verification is all the gateway asks of libcrypto).
    if "libcrypto" in top:
        counts["JWT verification (Authenticator.user)"] += 1
    elif "kernel" in top:
        counts["other: kernel (TCP, epoll, scheduling)"] += 1
    elif re.search(r"malloc|free|_int_|swift_retain|swift_release|memset|memmove|libc\.so", top):
        counts["other: malloc, free, reference counting"] += 1
    else:
        counts["other"] += 1


for stack in stacks(sys.stdin):
    count(stack)
for name, c in counts.most_common():
    print(f"{100 * c / max(total, 1):5.1f}%  {c / hz * 1e6 / max(operations, 1):6.1f} µs  {name}")
print(f"{total} samples, {total / hz * 1e6 / max(operations, 1):.0f} µs per operation in all")
print("kernel time by where user space entered it (system call wrappers; every part above included):")
for name, c in entries.most_common(8):
    print(f"{c / hz * 1e6 / max(operations, 1):6.1f} µs  {name[:70]}")
