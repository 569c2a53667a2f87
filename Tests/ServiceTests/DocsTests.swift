import Core
import HTTP
import Foundation
import TestSupport
import Testing
@testable import GatewayService

/// The documents tell the truth about the code: every `REDEEM_*` setting, route and error code that
/// README.md or a document under docs/ names exists in the code, every route of the route table is
/// in docs/api.md, every integration suite has its row in docs/testing.md, links and the README's
/// paths lead somewhere, and no document cites what a reader does not have (the specification's
/// section numbers, issue numbers). The code is the reference: the route table itself
/// (`Gateway.routes`, `Gateway.internalRoutes`), the `ErrorCode`, `RefusalReason` and
/// `WebhookEventType` enums, and the sources' own text for the settings they read.
@Suite struct DocsTests {
    struct Document {
        let path: String
        let text: String
        var lines: [Substring] { text.split(separator: "\n", omittingEmptySubsequences: false) }
    }

    static func read(_ path: String) throws -> String {
        try String(contentsOf: Project.root.appendingPathComponent(path), encoding: .utf8)
    }

    /// README.md and every Markdown file of docs/.
    static func documents() throws -> [Document] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: Project.root.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }.sorted().map { "docs/\($0)" }
        return try (["README.md"] + docs).map { Document(path: $0, text: try read($0)) }
    }

    /// Every match of `pattern` in `text`, as its capture groups (group 0 first).
    static func matches(_ pattern: String, in text: String) throws -> [[String]] {
        let regex = try NSRegularExpression(pattern: pattern)
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { m in
            (0..<m.numberOfRanges).map { Range(m.range(at: $0), in: text).map { String(text[$0]) } ?? "" }
        }
    }

    /// `file:line` of each match of `pattern`, for messages that say where to look.
    static func whereFound(_ pattern: String, in documents: [Document]) throws -> [String: [String]] {
        var found: [String: [String]] = [:]
        for doc in documents {
            for (n, line) in doc.lines.enumerated() {
                for m in try matches(pattern, in: String(line)) {
                    found[m.count > 1 ? m[1] : m[0], default: []].append("\(doc.path):\(n + 1)")
                }
            }
        }
        return found
    }

    /// The text of every file under `folder` whose name ends with `suffix`.
    static func sources(_ folder: String, suffix: String) throws -> [String] {
        let base = Project.root.appendingPathComponent(folder)
        let files = FileManager.default.enumerator(atPath: base.path)?.compactMap { $0 as? String } ?? []
        return try files.filter { $0.hasSuffix(suffix) }.map {
            try String(contentsOf: base.appendingPathComponent($0), encoding: .utf8)
        }
    }

    // MARK: - References a reader does not have

    @Test func noDocumentCitesTheSpecificationsSectionsOrAnIssueNumber() throws {
        let found = try Self.whereFound(#"(SPEC §|\bSPEC\b|\b[Ii]ssues? #?[0-9]+)"#, in: Self.documents())
        #expect(found.isEmpty, "name the document's section instead: \(found)")
    }

    // MARK: - Settings

    /// The settings the code reads, as RepositoryTests finds them for docs/configuration.md: the
    /// Swift sources' `"REDEEM_…"` literals, and what the stack runner and scripts read. A name built
    /// per service (`"REDEEM_\(service)_EVENTS"`) stands for each service's form.
    static func settingsTheCodeReads() throws -> Set<String> {
        var read: Set<String> = []
        for folder in ["Sources", "Services", "Clients"] {
            for swift in try sources(folder, suffix: ".swift") {
                read.formUnion(try matches(#""(REDEEM_[A-Z0-9_]+)""#, in: swift).map { $0[1] })
                for suffix in try matches(#""REDEEM_\\\([a-z.()]+\)(_[A-Z0-9_]+)""#, in: swift).map({ $0[1] }) {
                    read.formUnion(["ACCOUNTS", "COUPONS", "GRANTS", "GATEWAY"].map { "REDEEM_\($0)\(suffix)" })
                }
            }
        }
        let scripts = [
            "deploy/run-stack", "deploy/postgres", "deploy/database-roles", "scripts/setup",
            "scripts/test", "scripts/env.sh", "scripts/free-port", "scripts/link-order", "deploy/images",
            "docker-compose.yml", "docker-compose.stores.yml",
        ]
        for script in scripts {
            let shell = try Self.read(script)
            read.formUnion(try matches(#"\$\{?(REDEEM_[A-Z0-9_]+)"#, in: shell).map { $0[1] })
            read.formUnion(try matches(#"(?:port_or_free|bus) (REDEEM_[A-Z0-9_]+)"#, in: shell).map { $0[1] })
            read.formUnion(try matches(#"environ(?:ment)?\.get\("(REDEEM_[A-Z0-9_]+)""#, in: shell).map { $0[1] })
        }
        return read
    }

    /// A whole name: `REDEEM_<NAME>_BUS` and `REDEEM_REVENUECAT_*` stand for families, not settings.
    static let settingPattern = #"\b(REDEEM_[A-Z0-9_]*[A-Z0-9])\b(?![<*])"#

    @Test func everySettingTheDocumentsNameIsReadByTheCode() throws {
        let read = try Self.settingsTheCodeReads()
        #expect(read.count > 60, "the scan finds the settings (\(read.count))")
        let named = try Self.whereFound(Self.settingPattern, in: Self.documents())
        #expect(named.count > 60, "the documents name settings (\(named.count))")
        let unknown = named.filter { !read.contains($0.key) }
        #expect(unknown.isEmpty, "named in the documents but read by no code: \(unknown)")
    }

    /// Metrics the documents name (`redeem_http_requests_total`) are ones the code registers.
    @Test func everyMetricTheDocumentsNameIsOneTheCodeRegisters() throws {
        var registered: Set<String> = []
        for folder in ["Sources", "Services"] {
            for swift in try Self.sources(folder, suffix: ".swift") {
                registered.formUnion(try Self.matches(#""(redeem_[a-z_]+)""#, in: swift).map { $0[1] })
            }
        }
        let named = try Self.whereFound(#"`(redeem_[a-z_]+)(?:\{[^}`]*\})?`"#, in: Self.documents())
        #expect(named.count >= 5, "the documents name metrics (\(named.count))")
        let unknown = named.filter { !registered.contains($0.key) }
        #expect(unknown.isEmpty, "metrics in the documents that the code never registers: \(unknown)")
    }

    // MARK: - Routes

    /// Paths of other services' APIs that the documents quote: RevenueCat's, which grants calls
    /// (its customers, and the receipts of Stripe subscriptions).
    static let foreignPaths = ["/v1/subscribers/", "/v1/receipts"]

    /// `GET /v1/coupons/{code}`: a method and a path, up to a query or the end of the path.
    static let routePattern = #"\b((?:GET|POST|PUT|PATCH|DELETE) /[A-Za-z0-9_.{}/-]*[A-Za-z0-9_}/-])"#

    static var routeTable: Set<String> {
        Set((Gateway.routes + Gateway.internalRoutes).map { "\($0.method.rawValue) \($0.path)" })
    }

    @Test func everyRouteTheDocumentsNameIsInTheRouteTable() throws {
        let table = Self.routeTable
        let paths = Set(table.map { $0.split(separator: " ")[1] }.map(String.init))
        let documents = try Self.documents()
        let named = try Self.whereFound(Self.routePattern, in: documents).filter { route, _ in
            !Self.foreignPaths.contains { route.split(separator: " ")[1].hasPrefix($0) }
        }
        #expect(named.count > 50, "the documents name routes (\(named.count))")
        let unknown = named.filter { !table.contains($0.key) }
        #expect(unknown.isEmpty, "named in the documents but not in the route table: \(unknown)")

        // A path quoted without its method (`/v1/coupons/{code}/redemptions`) is a route's path.
        let quoted = try Self.whereFound(#"`(/v1/[A-Za-z0-9_.{}/-]*)"#, in: documents)
            .filter { path, _ in !Self.foreignPaths.contains { path.hasPrefix($0) } }
        let unknownPaths = quoted.filter { !paths.contains($0.key) }
        #expect(unknownPaths.isEmpty, "paths in the documents that no route has: \(unknownPaths)")
    }

    @Test func everyRouteOfTheRouteTableIsInTheAPIDocument() throws {
        let api = Document(path: "docs/api.md", text: try Self.read("docs/api.md"))
        let named = Set(try Self.whereFound(Self.routePattern, in: [api]).keys)
        let missing = Set(Gateway.routes.map { "\($0.method.rawValue) \($0.path)" }).subtracting(named)
        #expect(missing.isEmpty, "routes docs/api.md does not name: \(missing.sorted())")
    }

    // MARK: - Error codes and events

    /// The machine codes an answer can carry: `ErrorCode`, `RefusalReason` (a refused redeem's
    /// code), and the few the HTTP layer writes itself before any service is asked
    /// (`HTTPError(405, "methodNotAllowed", …)`).
    static func codesTheCodeAnswers() throws -> Set<String> {
        var codes = Set(ErrorCode.allCases.map(\.rawValue) + RefusalReason.allCases.map(\.rawValue))
        for folder in ["Sources/Shared/HTTP", "Services/gateway"] {
            for swift in try sources(folder, suffix: ".swift") {
                codes.formUnion(try matches(#"HTTPError\([0-9]{3}, "([A-Za-z]+)""#, in: swift).map { $0[1] })
            }
        }
        return codes
    }

    /// An error code as the documents write it: after its status (401 `invalidToken`, `409 codeInUse`)
    /// or as an error body's `"code"`.
    static let codePatterns = [
        #"\b[1-5][0-9]{2}\)? (?:with )?`([a-z][A-Za-z]+)`"#,
        #"`[1-5][0-9]{2} ([a-z][A-Za-z]+)`"#,
        #""code": ?"([a-z][A-Za-z]+)""#,
    ]

    @Test func everyErrorCodeTheDocumentsNameIsOneTheCodeAnswers() throws {
        let codes = try Self.codesTheCodeAnswers()
        #expect(codes.isSuperset(of: ["methodNotAllowed", "routeNotFound", "invalid", "alreadyOwned"]))
        let documents = try Self.documents()
        var named: [String: [String]] = [:]
        for pattern in Self.codePatterns {
            named.merge(try Self.whereFound(pattern, in: documents)) { $0 + $1 }
        }
        #expect(named.count > 20, "the documents name error codes (\(named.count))")
        let unknown = named.filter { !codes.contains($0.key) }
        #expect(unknown.isEmpty, "error codes in the documents that the code never answers: \(unknown)")
    }

    /// docs/troubleshooting.md quotes what the software prints: each entry's `text` block holds a
    /// stretch of at least 16 characters (between quotes, digits, `: ` or line ends, so a port, a
    /// time or a prefix may vary around it) that some source, script or runner says word for word.
    @Test func theTroubleshootingDocumentQuotesMessagesTheCodePrints() throws {
        let text = try Self.read("docs/troubleshooting.md")
        let blocks = text.components(separatedBy: "```text\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        let entries = text.split(separator: "\n").filter { $0.hasPrefix("## ") }
        #expect(entries.count >= 10, "ten problems at least")
        #expect(blocks.count == entries.count, "one quoted message per problem")
        var corpus = try ["Sources", "Services"].flatMap { try Self.sources($0, suffix: ".swift") }
        for script in ["deploy/run-stack", "deploy/postgres", "deploy/images", "scripts/setup"] {
            corpus.append(try Self.read(script))
        }
        for block in blocks {
            let stretches = String(block.map { $0.isNumber || $0 == "\"" ? "\n" : $0 })
                .components(separatedBy: ": ").flatMap { $0.split(separator: "\n") }
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { $0.count >= 16 }
            #expect(
                stretches.contains { stretch in corpus.contains { $0.contains(stretch) } },
                "nothing the code prints is quoted in: \(block)")
        }
    }

    /// docs/errors.md has an entry (a heading, which each answer's `docUrl` points at) for exactly
    /// the codes an answer can carry.
    @Test func theErrorsDocumentListsEveryCode() throws {
        let text = try Self.read("docs/errors.md")
        let headings = Set(try Self.matches(#"(?m)^### `([A-Za-z]+)`$"#, in: text).map { $0[1] })
        let codes = try Self.codesTheCodeAnswers()
        let missing = codes.subtracting(headings).sorted(), stray = headings.subtracting(codes).sorted()
        #expect(missing.isEmpty, "codes docs/errors.md lacks: \(missing)")
        #expect(stray.isEmpty, "docs/errors.md lists codes nothing answers: \(stray)")
        for type in ErrorType.allCases {
            #expect(text.contains("| `\(type.rawValue)` |"), "\(type.rawValue) is described")
        }
        #expect(ErrorBody.docUrl(code: "codeInUse").hasSuffix("docs/errors.md#codeinuse"))
    }

    /// docs/webhooks.md's catalogue has an entry (a heading) for exactly the events the code
    /// defines, and each entry says what its `data` is.
    @Test func theWebhooksDocumentListsExactlyTheEventsTheCodeDefines() throws {
        let text = try Self.read("docs/webhooks.md")
        let headings = try Self.matches(#"(?m)^### `([A-Za-z.]+)`$"#, in: text).map { $0[1] }
        let events = WebhookEventType.allCases.map(\.rawValue)
        #expect(Set(headings).subtracting(events).sorted() == [], "docs/webhooks.md lists events the code lacks")
        #expect(Set(events).subtracting(headings).sorted() == [], "events docs/webhooks.md lacks")
        #expect(headings.count == Set(headings).count, "an event listed twice")
        let sections = text.components(separatedBy: "\n### ").dropFirst()
        for section in sections {
            #expect(section.contains("`data`"), "the entry \(section.prefix(30)) does not say what its data is")
        }
    }

    // MARK: - Tests, links, the README

    /// Each integration suite (an XCTest class or a Swift Testing suite in Tests/IntegrationTests)
    /// has its row in docs/testing.md, and each row names a suite that exists.
    @Test func theTestsDocumentHasARowForEachIntegrationSuiteAndNoOther() throws {
        let suites = Set(try Self.sources("Tests/IntegrationTests", suffix: ".swift").flatMap { swift in
            try Self.matches(#"final class (\w+): (?:StackTestCase|XCTestCase)"#, in: swift).map { $0[1] }
                + Self.matches(#"@Suite(?:\([^)]*\))? struct (\w+)"#, in: swift).map { $0[1] }
        })
        #expect(suites.count > 25 && suites.contains("PlayStoreTests"), "\(suites.sorted())")
        let testing = try Self.read("docs/testing.md")
        let rows = Set(try Self.matches(#"(?m)^\| `IntegrationTests/(\w+)` \|"#, in: testing).map { $0[1] })
        #expect(suites.subtracting(rows).sorted() == [], "suites without a row in docs/testing.md")
        #expect(rows.subtracting(suites).sorted() == [], "rows in docs/testing.md for suites that do not exist")
    }

    /// A suite the documents name (`StoreTaskTests`, `IntegrationTests/GrantsTests`) is a test type,
    /// a file of tests (`BackgroundTests`) or a test target, here or in RedeemKit's own package.
    @Test func everySuiteTheDocumentsNameExists() throws {
        var known: Set<String> = []
        for root in ["Tests", "Clients/RedeemKit/Tests"] {
            let tests = Project.root.appendingPathComponent(root)
            let files = (FileManager.default.enumerator(atPath: tests.path)?.compactMap { $0 as? String } ?? [])
                .filter { $0.hasSuffix(".swift") }
            known.formUnion(files.map { (($0 as NSString).lastPathComponent as NSString).deletingPathExtension })
            known.formUnion(try FileManager.default.contentsOfDirectory(atPath: tests.path))
            for file in files {
                let swift = try String(contentsOf: tests.appendingPathComponent(file), encoding: .utf8)
                known.formUnion(try Self.matches(#"(?:class|struct|enum) (\w+Tests)\b"#, in: swift).map { $0[1] })
            }
        }
        let named = try Self.whereFound(#"`(?:[A-Za-z]+Tests/)?(\w+Tests)`"#, in: Self.documents())
        #expect(named.count > 30, "the documents name suites (\(named.count))")
        let unknown = named.filter { !known.contains($0.key) }
        #expect(unknown.isEmpty, "suites in the documents that do not exist: \(unknown)")
    }

    /// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.
    static func anchor(_ heading: String) -> String {
        String(heading.lowercased().filter { $0.isLetter || $0.isNumber || $0 == " " || $0 == "-" || $0 == "_" }
            .map { $0 == " " ? "-" : $0 })
    }

    /// Every relative link of a document leads to a file that exists, and an anchor to a heading
    /// of that file.
    @Test func everyLinkLeadsToAFileAndAHeadingThatExist() throws {
        var broken: [String] = []
        let documents = try Self.documents()
        var anchors: [String: Set<String>] = [:]
        for doc in documents {
            anchors[doc.path] = Set(try Self.matches(#"(?m)^#+ (.+)$"#, in: doc.text).map { Self.anchor($0[1]) })
        }
        for doc in documents {
            let folder = (doc.path as NSString).deletingLastPathComponent
            for link in try Self.matches(#"\]\(([^)#\s]*)(?:#([^)\s]*))?\)"#, in: doc.text) {
                let (file, fragment) = (link[1], link[2])
                if file.hasPrefix("http:") || file.hasPrefix("https:") || file.hasPrefix("mailto:") { continue }
                let target = file.isEmpty ? doc.path : (folder.isEmpty ? file : "\(folder)/\(file)")
                let normalized = (target as NSString).standardizingPath
                guard FileManager.default.fileExists(atPath: Project.root.appendingPathComponent(normalized).path) else {
                    broken.append("\(doc.path): \(link[0]) (no file)")
                    continue
                }
                if !fragment.isEmpty, let headings = anchors[normalized], !headings.contains(fragment) {
                    broken.append("\(doc.path): \(link[0]) (no such heading)")
                }
            }
        }
        #expect(broken == [])
    }

    /// The README is short, keeps the two commands, maps every document, and every path of its
    /// "Where each rule lives" table exists (a bare file name is in the folder of the path before it;
    /// `<name>`/`<Name>` stands for each back-end service).
    @Test func theREADMEIsShortMapsEveryDocumentAndItsRulePathsExist() throws {
        let readme = try Self.read("README.md")
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count <= 200, "README.md has \(lines.count) lines")
        #expect(readme.contains("./scripts/test") && readme.contains("./deploy/run-stack"))
        let docs = try FileManager.default.contentsOfDirectory(atPath: Project.root.appendingPathComponent("docs").path).filter { $0.hasSuffix(".md") }
        for doc in docs {
            #expect(readme.contains("](docs/\(doc))"), "the README's map does not link docs/\(doc)")
        }

        let start = try #require(lines.firstIndex { $0.hasPrefix("## Where each rule lives") })
        let table = lines[(start + 1)...].drop { !$0.hasPrefix("|") }.prefix { $0.hasPrefix("|") }.dropFirst(2)
        #expect(table.count > 15)
        let roots = ["Sources/", "Services/", "Clients/", "Tests/", "deploy/", "scripts/", "docs/", "Package.swift"]
        var missing: [String] = []
        var checked = 0
        for row in table {
            let cell = row.split(separator: "|").last.map(String.init) ?? ""
            var folder = ""
            for token in try Self.matches(#"`([^`]+)`"#, in: cell).map({ $0[1] }) {
                let path: String
                if roots.contains(where: { token.hasPrefix($0) }) {
                    path = token
                    folder = token.hasSuffix("/") ? token : (token as NSString).deletingLastPathComponent
                } else if token.hasSuffix(".swift") || token.hasSuffix(".sql") || token.hasSuffix("/") {
                    path = "\(folder)/\(token)"
                } else {
                    continue  // a type or function name
                }
                let forms = path.contains("<name>")
                    ? ["accounts", "coupons", "grants"].map {
                        path.replacingOccurrences(of: "<name>", with: $0)
                            .replacingOccurrences(of: "<Name>", with: $0.capitalized)
                    }
                    : [path]
                for form in forms {
                    checked += 1
                    if form.contains("*") {
                        let dir = (form as NSString).deletingLastPathComponent
                        let pattern = (form as NSString).lastPathComponent
                        let prefix = String(pattern.prefix { $0 != "*" })
                        let suffix = String(pattern.reversed().prefix { $0 != "*" }.reversed())
                        let folder = Project.root.appendingPathComponent(dir).path
                        let files = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
                        if !files.contains(where: { $0.hasPrefix(prefix) && $0.hasSuffix(suffix) }) { missing.append(form) }
                    } else if !FileManager.default.fileExists(atPath: Project.root.appendingPathComponent(form).path) {
                        missing.append(form)
                    }
                }
            }
        }
        #expect(checked > 30, "the table's paths are read (\(checked))")
        #expect(missing == [], "paths in the README's \"Where each rule lives\" that do not exist")
    }

    /// docs/redeemkit.md and RedeemKit's README show the client's example as `ReadmeExampleTests`
    /// runs it, line for line.
    @Test func theRedeemKitDocumentShowsTheExampleTheTestsRun() throws {
        let test = try Self.read("Clients/RedeemKit/Tests/RedeemKitTests/ReadmeExampleTests.swift")
            .split(separator: "\n", omittingEmptySubsequences: false)
        let start = try #require(test.firstIndex { $0.contains("static func example(") })
        let body = test[(start + 1)...].prefix { $0 != "    }" }
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        #expect(body.count > 10)
        for document in ["docs/redeemkit.md", "Clients/RedeemKit/README.md"] {
            let doc = Set(try Self.read(document).split(separator: "\n").map {
                $0.trimmingCharacters(in: .whitespaces)
            })
            #expect(body.filter { !doc.contains($0) } == [], "lines of the tested example missing from \(document)")
        }
    }
}
