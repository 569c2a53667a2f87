"""Reads `perf script` on stdin and prints the functions that took the most samples, in µs per
operation: by their own samples (the function on top of the stack) and by every sample they appear
in (the function and what it calls). For a process whose parts bench/profile_parts.py does not know,
PostgreSQL's backends above all. Usage: ... | python3 bench/profile_functions.py OPERATIONS SAMPLE_HZ [TOP]"""
import collections
import sys

operations, hz = int(sys.argv[1]), float(sys.argv[2])
top = int(sys.argv[3]) if len(sys.argv) > 3 else 30
own, anywhere, total, stack = collections.Counter(), collections.Counter(), 0, []


def frame(line):
    """`ip symbol+offset (dso)` -> the symbol, or `[unknown in DSO]` for a stripped frame."""
    fields = line.strip().split(None, 1)
    if len(fields) < 2:
        return None
    symbol, _, dso = fields[1].rpartition(" (")
    symbol = symbol.split("+0x")[0]
    if symbol in ("", "[unknown]"):
        return "[unknown in " + dso.rstrip(")").rsplit("/", 1)[-1] + "]"
    return symbol


def count(stack):
    global total
    if not stack:
        return
    total += 1
    own[stack[0]] += 1
    for name in set(stack):
        anywhere[name] += 1


for line in sys.stdin:
    if not line.strip():
        count(stack)
        stack = []
    elif line[0] in " \t":
        name = frame(line)
        if name:
            stack.append(name)
count(stack)


def us(samples):
    return samples / hz * 1e6 / max(operations, 1)


print(f"{total} samples, {us(total):.1f} µs per operation")
print("own samples (µs per operation):")
for name, n in own.most_common(top):
    print(f"  {us(n):7.1f}  {name}")
print("with what they call (µs per operation):")
for name, n in anywhere.most_common(top * 2):
    print(f"  {us(n):7.1f}  {name}")
