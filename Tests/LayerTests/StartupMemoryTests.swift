import Foundation
import Glibc
import Testing

@testable import Runtime

/// `StartupMemory`: what a service keeps resident once started (docs/performance.md, "Memory").
@Suite struct StartupMemoryTests {
    /// Resident kB of the process's code mappings that `StartupMemory` would unmap.
    private func residentCode() -> Int {
        let code = Set(StartupMemory.codeMappings().map { UInt(bitPattern: $0.start) })
        var total = 0
        var counting = false
        for line in (StartupMemory.readProcFile("/proc/self/smaps") ?? "").split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let range = fields.first, range.contains("-"), !range.hasSuffix(":") {
                counting = UInt(range.split(separator: "-")[0], radix: 16).map(code.contains) ?? false
            } else if counting, fields.first == "Rss:", fields.count >= 2, let kB = Int(fields[1]) {
                total += kB
            }
        }
        return total
    }

    @Test func procFilesAreReadToTheirEnd() throws {
        // A process's maps run to many pages of text; their size in /proc is 0.
        let maps = try #require(StartupMemory.readProcFile("/proc/self/maps"))
        #expect(maps.utf8.count > 4096)
        #expect(maps.split(separator: "\n").contains { $0.hasSuffix("[stack]") })
    }

    @Test func codeMappingsAreTheFilesExecutableMappingsOnly() throws {
        let starts = Set(StartupMemory.codeMappings().map { UInt(bitPattern: $0.start) })
        let lines = try #require(StartupMemory.readProcFile("/proc/self/maps")).split(separator: "\n")
        let executable = try #require(try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        var listed: [String] = []
        for line in lines {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let start = UInt(fields[0].split(separator: "-")[0], radix: 16), starts.contains(start) else {
                continue
            }
            // Nothing writable, anonymous or named in brackets ([vdso], [heap]…) is ever listed.
            #expect(fields[1] == "r-xp", "\(line)")
            #expect(fields.count >= 6 && fields[5].hasPrefix("/"), "\(line)")
            if fields.count >= 6 { listed.append(String(fields[5])) }
        }
        // The test executable's own code and libc's are among them.
        #expect(listed.contains(executable))
        #expect(listed.contains { $0.contains("/libc.so") })
    }

    @Test func releaseUnmapsCodeUntilItRunsAgain() throws {
        let before = residentCode()
        StartupMemory.release()
        let after = residentCode()
        #expect(after < before / 2, "resident code \(before) kB before the release, \(after) kB after")
        // The process goes on: code unmapped is mapped again when it runs.
        let maps = try #require(StartupMemory.readProcFile("/proc/self/maps"))
        #expect(!maps.isEmpty)
        #expect(residentCode() > 0)
    }
}
