import Foundation

/// The command line, split into words and `--name value` options. A small parser: the toolchain
/// ships no argument-parser package.
struct Arguments {
    /// Options that take no value.
    static let flags: Set<String> = [
        "json", "csv", "dry-run", "new-customers-only", "allow-in-app", "inactive", "all", "help", "version",
    ]

    var words: [String] = []
    var options: [String: String] = [:]
    var present: Set<String> = []

    init(_ arguments: [String]) throws {
        var i = 0
        while i < arguments.count {
            let a = arguments[i]
            i += 1
            if a == "--" {
                words += arguments[i...]
                break
            }
            guard a.hasPrefix("--"), a.count > 2 else {
                if a == "-h" { present.insert("help") } else { words.append(a) }
                continue
            }
            var name = String(a.dropFirst(2))
            var value: String?
            if let eq = name.firstIndex(of: "=") {
                value = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            if Self.flags.contains(name) {
                guard value == nil else { throw UsageError("--\(name) takes no value") }
                present.insert(name)
                continue
            }
            if value == nil {
                guard i < arguments.count else { throw UsageError("--\(name) needs a value") }
                value = arguments[i]
                i += 1
            }
            options[name] = value
        }
    }

    func flag(_ name: String) -> Bool { present.contains(name) }

    /// The option's value, or nil when not given; `used` records it so unknown options are caught.
    mutating func option(_ name: String) -> String? {
        present.insert(name)
        return options[name]
    }

    mutating func required(_ name: String) throws -> String {
        guard let v = option(name) else { throw UsageError("--\(name) is required") }
        return v
    }

    mutating func int(_ name: String) throws -> Int? {
        guard let text = option(name) else { return nil }
        guard let n = Int(text) else { throw UsageError("--\(name) must be a whole number, not \(text)") }
        return n
    }

    mutating func bool(_ name: String) throws -> Bool? {
        guard let text = option(name) else { return nil }
        switch text.lowercased() {
        case "true", "yes", "1": return true
        case "false", "no", "0": return false
        default: throw UsageError("--\(name) must be true or false, not \(text)")
        }
    }

    mutating func list(_ name: String) -> [String]? {
        option(name).map {
            $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
    }

    mutating func date(_ name: String) throws -> Date? {
        guard let text = option(name) else { return nil }
        return try Self.parseDate(text, name: name)
    }

    static func parseDate(_ text: String, name: String) throws -> Date {
        if let d = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return d }
        if let d = try? Date.ISO8601FormatStyle().parse(text) { return d }
        throw UsageError("--\(name) must be an ISO 8601 time such as 2027-01-31T00:00:00Z, not \(text)")
    }

    /// The positional word at `index`, or a usage error naming it.
    func word(_ index: Int, _ what: String) throws -> String {
        guard index < words.count else { throw UsageError("missing \(what)") }
        return words[index]
    }

    /// Fails on options no command read (a typo must not be ignored).
    func checkNoneLeft() throws {
        let unknown = Set(options.keys).subtracting(present)
        if let name = unknown.sorted().first { throw UsageError("unknown option --\(name)") }
    }
}

/// A mistake on the command line: exit 2 with the usage.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}
