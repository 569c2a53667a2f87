import Foundation
import Testing
import TestSupport

/// Checks on the repository's own deployment files.
@Suite struct RepositoryTests {
    @Test func composeFileIsValid() async throws {
        let compose = ["/usr/bin/docker-compose", "/usr/local/bin/docker-compose"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let path = try #require(compose, "docker-compose is installed by scripts/setup")
        let file = Project.root.appendingPathComponent("docker-compose.yml").path
        let config = try await offThePool { try Subprocess.run(path, ["-f", file, "config"]) }
        for service in ["postgres", "accounts", "coupons", "grants", "gateway"] {
            #expect(config.contains("  \(service):"), "compose defines \(service)")
        }
        #expect(config.contains("healthcheck"))
    }

    @Test func ciRunsTheREADMETestCommand() throws {
        let readme = try String(contentsOf: Project.root.appendingPathComponent("README.md"), encoding: .utf8)
        let ci = try String(contentsOf: Project.root.appendingPathComponent(".ci/run"), encoding: .utf8)
        #expect(readme.contains("./scripts/test"))
        #expect(ci.contains("./scripts/test"))
    }
}
