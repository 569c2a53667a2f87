import Foundation
import TestSupport
import Testing

/// Each client's README has what an app team looks for first: install; the three calls; the store
/// hand-off; errors; a relaunch example.
@Suite struct ClientReadmeTests {
    /// A section: what its heading (`##` or `###`) says, in any case, and what it must hold.
    struct Section {
        var name: String
        var headings: [String]
        var needsCode: Bool
        var mentions: [String] = []
    }

    static let sections = [
        Section(name: "install", headings: ["install"], needsCode: true),
        Section(
            name: "the three calls", headings: ["three calls"], needsCode: true,
            mentions: ["validateCoupon", "redeemCoupon", "awaitCouponCompletion"]),
        Section(name: "the store hand-off", headings: ["hand-off", "handoff", "hand off"], needsCode: false),
        Section(name: "errors", headings: ["error"], needsCode: false),
        Section(name: "a relaunch example", headings: ["relaunch"], needsCode: true)
    ]

    /// The README's `##` and `###` sections, each with its text up to the next such heading.
    static func sections(of readme: String) -> [(heading: String, body: String)] {
        var found: [(heading: String, body: String)] = []
        var inCode = false
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inCode.toggle() }
            if !inCode, line.hasPrefix("## ") || line.hasPrefix("### ") {
                found.append((String(line.drop { $0 == "#" }).trimmingCharacters(in: .whitespaces), ""))
            } else if !found.isEmpty {
                found[found.count - 1].body += line + "\n"
            }
        }
        return found
    }

    /// What the README lacks: a sentence per missing section, empty example or call not shown.
    static func problems(in readme: String) -> [String] {
        let found = sections(of: readme)
        var problems: [String] = []
        for wanted in Self.sections {
            let section = found.first { s in wanted.headings.contains { s.heading.lowercased().contains($0) } }
            guard let section else {
                let headings = wanted.headings.joined(separator: " or ")
                problems.append("no section for \(wanted.name) (a heading with \(headings))")
                continue
            }
            let text = section.body.trimmingCharacters(in: .whitespacesAndNewlines)
            if text.count < 40 { problems.append("\(section.heading) is empty") }
            if wanted.needsCode && !text.contains("```") { problems.append("\(section.heading) has no example") }
            for name in wanted.mentions where !text.contains(name) {
                problems.append("\(section.heading) does not show \(name)")
            }
        }
        return problems
    }

    static func check(_ path: String) throws {
        let readme = try String(contentsOf: Project.root.appendingPathComponent(path), encoding: .utf8)
        #expect(problems(in: readme) == [], "\(path)")
    }

    @Test func androidsReadmeHasTheFiveSections() throws { try Self.check("Clients/android/README.md") }

    @Test func theWebReadmeHasTheFiveSections() throws { try Self.check("Clients/web/README.md") }

    @Test func redeemKitsReadmeHasTheFiveSections() throws { try Self.check("Clients/RedeemKit/README.md") }

    /// The check finds a missing section, so a pass means something.
    @Test func aReadmeWithoutARelaunchExampleFails() {
        let readme = """
            ## Install
            Build it, then add the library to the app:
            ```sh
            ./build.sh
            ```
            ## The three calls
            ```
            validateCoupon redeemCoupon awaitCouponCompletion
            ```
            """
        #expect(Self.sections(of: readme).map(\.heading) == ["Install", "The three calls"])
        let problems = Self.problems(in: readme)
        #expect(problems.count == 3, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("no section for a relaunch example") }, "\(problems)")
    }
}
