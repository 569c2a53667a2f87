"""The samples of `perf script` output, for the bench's profile readers."""


def stacks(lines):
    """Yields each sample's stack: its frame lines (indented), stripped, leaf first."""
    stack = []
    for line in lines:
        if line.startswith((" ", "\t")):
            stack.append(line.strip())
        else:
            if stack:
                yield stack
            stack = []
    if stack:
        yield stack
