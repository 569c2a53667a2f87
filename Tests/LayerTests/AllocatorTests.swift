import Foundation
import Glibc
import Testing

@testable import Runtime

/// `Allocator`: every process that links `Runtime` allocates through mimalloc, and hands what it
/// freed back to the kernel by itself.
@Suite struct AllocatorTests {
    @Test func mallocIsMimallocs() {
        #expect(Allocator.replacesMalloc)
        #expect(Allocator.version.hasPrefix("mimalloc 2."))
    }

    /// What a burst of sign-ups does to accounts: argon2id's 19 MiB blocks, on threads at once, then
    /// freed. The pages go back without a call (under glibc this took `mallopt` settings).
    @Test func aBurstOfLargeBlocksIsHandedBack() async throws {
        let before = residentMiB()
        let blockBytes = 19 << 20
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<6 {
                group.addTask {
                    let block = try #require(malloc(blockBytes))
                    memset(block, 1, blockBytes)  // resident, as argon2id fills its memory
                    free(block)
                }
            }
            try await group.waitForAll()
        }
        // Six blocks were resident at once at most; none of them may stay. Other suites run beside
        // this one, so it allows 40 MiB of theirs.
        var after = residentMiB()
        for _ in 0..<50 where after > before + 40 {
            try await Task.sleep(for: .milliseconds(100))
            after = residentMiB()
        }
        #expect(after <= before + 40, "resident \(before) MiB before, \(after) MiB after six 19 MiB blocks were freed")
    }

    private func residentMiB() -> Int {
        let statm = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
        let pages = statm.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return pages * sysconf(Int32(_SC_PAGESIZE)) >> 20
    }
}
