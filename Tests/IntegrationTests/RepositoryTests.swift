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

    /// docs/configuration.md lists every environment variable the code reads, and nothing else: the
    /// Swift sources' `REDEEM_…` names, and what the stack runner and scripts read (`$REDEEM_…`,
    /// `${REDEEM_…}`, or a name handed to the runner's port helpers). A name built per service
    /// (`REDEEM_\(service)_EVENTS`) is documented by at least one service's form or by `<NAME>`.
    @Test func theConfigurationDocumentListsExactlyTheVariablesTheCodeReads() throws {
        let root = Project.root
        func text(_ path: String) throws -> String { try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8) }
        func names(_ pattern: String, in text: String) throws -> Set<String> {
            let regex = try NSRegularExpression(pattern: pattern)
            return Set(regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
                Range($0.range(at: 1), in: text).map { String(text[$0]) }
            })
        }
        let services = ["ACCOUNTS", "COUPONS", "GRANTS"]
        var read: Set<String> = [], perService: Set<String> = []
        for folder in ["Sources", "Services"] {
            let files = FileManager.default.enumerator(atPath: root.appendingPathComponent(folder).path)?.compactMap { $0 as? String } ?? []
            for file in files where file.hasSuffix(".swift") {
                let swift = try text("\(folder)/\(file)")
                read.formUnion(try names(#""(REDEEM_[A-Z0-9_]+)""#, in: swift))
                perService.formUnion(try names(#""REDEEM_\\\([a-z.()]+\)(_[A-Z0-9_]+)""#, in: swift))
            }
        }
        for script in ["deploy/run-stack", "deploy/postgres", "scripts/setup", "scripts/test", "scripts/env.sh", "scripts/free-port", "scripts/link-order"] {
            let shell = try text(script)
            read.formUnion(try names(#"\$\{?(REDEEM_[A-Z0-9_]+)"#, in: shell))
            read.formUnion(try names(#"(?:port_or_free|bus) (REDEEM_[A-Z0-9_]+)"#, in: shell))
            read.formUnion(try names(#"environ(?:ment)?\.get\("(REDEEM_[A-Z0-9_]+)""#, in: shell))
        }
        let doc = try text("docs/configuration.md")
        var documented = try names(#"`(REDEEM_[A-Z0-9_]+)`"#, in: doc)
        for suffix in try names(#"`REDEEM_<NAME>(_[A-Z0-9_]+)`"#, in: doc) {
            documented.formUnion(services.map { "REDEEM_\($0)\(suffix)" })
        }
        let forms = { (suffix: String) in Set(services.map { "REDEEM_\($0)\(suffix)" }) }
        #expect(read.count > 40 && perService.count >= 3, "the scan finds the variables (\(read.count), \(perService.count) per service)")
        #expect(read.subtracting(documented).sorted() == [], "read by the code but not in docs/configuration.md")
        #expect(perService.filter { forms($0).isDisjoint(with: documented) }.sorted() == [], "built per service but documented for none")
        let explained = read.union(perService.flatMap(forms))
        #expect(documented.subtracting(explained).sorted() == [], "in docs/configuration.md but read by no code")
    }

    @Test func ciRunsTheREADMETestCommand() throws {
        let readme = try String(contentsOf: Project.root.appendingPathComponent("README.md"), encoding: .utf8)
        let ci = try String(contentsOf: Project.root.appendingPathComponent(".ci/run"), encoding: .utf8)
        #expect(readme.contains("./scripts/test"))
        #expect(ci.contains("./scripts/test"))
    }
}
