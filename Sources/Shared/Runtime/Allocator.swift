internal import CMalloc
import Glibc

/// The allocator every process that links `Runtime` uses: mimalloc (`CMalloc`), linked before libc,
/// so its `malloc` and `free` take the place of glibc's for the Swift runtime and every C library.
///
/// - **A heap per thread, no lock between threads.** A block freed by another thread than the one
///   that allocated it (libmicrohttpd's thread reads a request, the Swift executor's frees it) goes
///   back without a lock. Under glibc's malloc the gateway spent about a fifth of its CPU per
///   request in malloc, free and their locks; in turns against the same code on glibc, the gateway's
///   CPU per hot reservation fell by about a sixth (docs/performance.md, "An allocator per thread").
/// - **Freed memory goes back by itself.** Free pages are handed back to the kernel a moment after
///   they are freed (`decommit_delay`), so a burst of sign-ups (argon2id, 19 MiB each) is not kept.
///   Under glibc that took `mallopt` settings per service (a fixed mmap threshold, two arenas in
///   accounts), which mimalloc has no need of.
public enum Allocator {
    /// mimalloc's version, e.g. "mimalloc 2.0.9".
    public static var version: String {
        let v = Int(mi_version())
        return "mimalloc \(v / 100).\(v % 100 / 10).\(v % 10)"
    }

    /// Whether `malloc` in this process is mimalloc's: a block from libc's `malloc` symbol lies in
    /// mimalloc's heap. False if the link order ever put glibc's first.
    public static var replacesMalloc: Bool {
        guard let block = malloc(64) else { return false }
        defer { free(block) }
        return mi_is_in_heap_region(block)
    }

    /// While a service starts, a page left empty goes back to the kernel at once (`page_reset`,
    /// `decommit_delay` 0): start-up frees far more than it keeps (the gateway's OpenAPI document
    /// peaks at 7 MB), and a thread keeps its empty pages until it next allocates, so with
    /// mimalloc's own settings an idle gateway kept 9 MB more than under glibc. Once start-up has
    /// settled (`settled`), mimalloc's own settings apply again: handing pages back and faulting
    /// them in again on every request cost the gateway more CPU than glibc's malloc did.
    static func configure() {
        _ = ownSettings  // read before they are changed
        mi_option_set(mi_option_page_reset, 1)
        mi_option_set(mi_option_decommit_delay, 0)
    }

    /// Start-up is over: mimalloc's own settings from now on.
    static func settled() {
        mi_option_set(mi_option_page_reset, ownSettings.pageReset)
        mi_option_set(mi_option_decommit_delay, ownSettings.decommitDelay)
    }

    /// mimalloc's settings as the process started (its defaults, or `MIMALLOC_` variables).
    private static let ownSettings = (
        pageReset: mi_option_get(mi_option_page_reset), decommitDelay: mi_option_get(mi_option_decommit_delay)
    )

    /// Hands every free page of this thread's heap and mimalloc's caches back to the kernel now,
    /// rather than a moment later.
    static func collect() { mi_collect(true) }
}
