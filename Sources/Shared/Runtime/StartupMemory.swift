internal import CMalloc
import Foundation
import Glibc

/// What a service keeps resident once started: only the memory it uses, not what start-up
/// touched once (docs/performance.md, "Memory").
///
/// - **The heap.** Start-up allocates far more than a service keeps: the gateway encodes its
///   OpenAPI document through `JSONEncoder`'s tree of values (7 MB at its peak, freed at once),
///   and glibc kept the freed pages, 4 MB of the gateway's idle RSS. `malloc_trim` hands every
///   whole free page back.
/// - **Code.** The kernel maps 64 kB of a file around every page a process touches (fault-around),
///   so the code of every library and of the executable was resident far beyond what ran. Code is
///   mapped by the page (`MADV_RANDOM`: no fault-around and no read-ahead for it), and once
///   start-up has settled, the pages only start-up ran are unmapped (`MADV_DONTNEED`); what the
///   service runs later is mapped again on its first call. Only read-only executable mappings of
///   files are touched, and only while they hold no page of the process's own: their pages are the
///   file's, never written, so unmapping one loses nothing (it stays in the page cache), which a
///   writable or relocated mapping could not promise.
enum StartupMemory {
    /// When start-up has settled: bus connections made, signing keys loaded (within 2 s of a start).
    static let settled = Duration.seconds(5)

    /// From now on, code is mapped a page at a time.
    static func mapCodeByThePage() {
        for range in codeMappings() { _ = madvise(range.start, range.length, MADV_RANDOM) }
    }

    /// Hands freed heap pages back, and unmaps code pages until they run again.
    static func release() {
        _ = malloc_trim(0)
        for range in codeMappings() { _ = madvise(range.start, range.length, MADV_DONTNEED) }
    }

    /// The process's executable mappings of files, read-only and private (`r-xp` in
    /// `/proc/self/smaps`, a path named) that hold none of the process's own pages: the executable's
    /// and its libraries' code as the files have it. A mapping with a page written (a debugger's
    /// breakpoint, a uprobe) holds an anonymous page and is left as it is.
    static func codeMappings() -> [(start: UnsafeMutableRawPointer, length: Int)] {
        guard let smaps = readProcFile("/proc/self/smaps") else { return [] }
        var found: [(start: UnsafeMutableRawPointer, length: Int)] = []
        var current: (start: UnsafeMutableRawPointer, length: Int)?
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if fields.count >= 5, fields[0].contains("-"), !fields[0].hasSuffix(":") {
                // A mapping's first line: `start-end perms offset dev inode [path]`.
                current = nil
                let bounds = fields[0].split(separator: "-")
                guard fields.count >= 6, fields[1] == "r-xp", fields[5].hasPrefix("/"), bounds.count == 2,
                    let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16), end > start,
                    let pointer = UnsafeMutableRawPointer(bitPattern: start)
                else { continue }
                current = (pointer, Int(end - start))
            } else if fields.first == "Anonymous:", let mapping = current {
                if fields.count >= 2, fields[1] == "0" { found.append(mapping) }
                current = nil
            }
        }
        return found
    }

    /// A file of /proc, read to its end: its size is 0 until read, and reading it as a file of that
    /// size (Foundation's `String(contentsOfFile:)`) gave only the first page of a process's maps.
    static func readProcFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                bytes.append(contentsOf: chunk[..<n])
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
