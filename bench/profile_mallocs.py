"""Reads `perf script | swift demangle` of a uprobe on libc's malloc on stdin and prints mallocs per
operation, with the functions that make them. Usage: ... | python3 bench/profile_mallocs.py OPERATIONS

A probe fires at malloc's first instruction, before it has a frame of its own, so the stack's
second frame is its caller's caller: the allocator's own functions (swift_allocObject, array and
string storage, dictionary storage) are stepped over to name the first function of Redeem's or of
the standard library's hot paths. C libraries built without frame pointers end their stacks at
their own frame; their mallocs are counted by library."""
import collections
import re
import sys

from perf_stacks import stacks

# Frames that only pass an allocation on: the first frame past them is the one reported.
PLUMBING = re.compile(
    r"^(malloc|__GI___libc_malloc|swift_|_swift|specialized (_Contiguous|Array|_copy|static __String|static String|"
    r"String|_NativeDictionary|Dictionary|Data|closure #1 in String|protocol witness for Sequence|Collection|"
    r"ContiguousArray|_ArrayBuffer|_StringGuts)|_allocate|String\.|_StringGuts|static _DictionaryStorage|"
    r"Data\.|__DataStorage|_ContiguousArrayBuffer|Array\.|Dictionary\.|\[unknown\])"
)

operations = int(sys.argv[1])
callers, total = collections.Counter(), 0


def count(stack):
    global total
    if not stack:
        return
    total += 1
    frames = [re.sub(r"^[0-9a-f]+ ", "", f) for f in stack]
    names = [re.sub(r"\+0x[0-9a-f]+.*", "", f).strip() for f in frames]
    caller = next((n for n in names[1:] if not PLUMBING.search(n)), None)
    if caller is None:
        libraries = [m.group(1).split("/")[-1] for f in frames[1:] if (m := re.search(r"\(([^()]*)\)\s*$", f))]
        caller = f"(C: {libraries[0]})" if libraries else "(C: a library whose stack ends at malloc)"
    callers[caller] += 1


for stack in stacks(sys.stdin):
    count(stack)

print(f"{total / max(operations, 1):.1f} mallocs per operation ({total} in all)")
for name, n in callers.most_common(25):
    print(f"{n / max(operations, 1):7.2f}  {name[:140]}")
