import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The restore drill of docs/backup.md (`deploy/restore-drill`), run as an operator would: a
/// private PostgreSQL 15 with WAL archiving, Redeem's roles and schemas made by the built services'
/// `migrate`, rows before a base backup, after it, and after a target time; the backup restored to
/// that time must hold exactly the rows committed before it.
@Suite struct RestoreDrillTests {
    @Test func aBaseBackupAndArchivedWALRestoreExactlyTheRowsBeforeTheTarget() async throws {
        let dir = try Project.temporaryDirectory("drill")
        defer { try? FileManager.default.removeItem(at: dir) }
        let log = dir.appendingPathComponent("drill.log").path
        let drill = try Subprocess(
            Project.root.appendingPathComponent("deploy/restore-drill").path, [Project.binDirectory.path],
            stdout: log, stderr: log)
        let status = try await offThePool { () throws -> Int32 in
            guard let s = drill.wait(seconds: 180) else {
                drill.signal(SIGTERM)
                drill.wait()
                throw TestFailure("the restore drill still ran after 180 s")
            }
            return s
        }
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(status == 0, "the drill passes: \(output)")
        #expect(output.contains("restore drill: passed"), "\(output)")
        #expect(output.contains("recovery stopping before commit"), "recovery stopped at the target: \(output)")
        #expect(
            output.contains("accounts:1=100 accounts:2=50 coupons:1=100 coupons:2=50 webhooks:1=100 webhooks:2=50"),
            "\(output)")
    }
}
