import Foundation

/// The command line, split into words and `--name value` options. A small parser: the toolchain
/// ships no argument-parser package.
struct Arguments {
    /// Options that take no value: the flags of the command table (Help.swift).
    static let flags: Set<String> = Help.flags

    var words: [String] = []
    var options: [String: String] = [:]
    var present: Set<String> = []
    /// The options of the command running (its own and everyone's), once it is known: reading
    /// another is a mistake in the table, caught by the first run of the command.
    var declared: Set<String>?

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

    func flag(_ name: String) -> Bool {
        checkDeclared(name)
        return present.contains(name)
    }

    func checkDeclared(_ name: String) {
        if let declared, !declared.contains(name) {
            preconditionFailure("--\(name) is read but not declared in the command table (Help.swift)")
        }
    }

    /// The option's value, or nil when not given; `used` records it so unknown options are caught.
    mutating func option(_ name: String) -> String? {
        checkDeclared(name)
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

    /// Fails on an option, or a flag, that the command does not take, naming the closest it does.
    func checkOnly(_ allowed: Set<String>) throws {
        let given = Set(options.keys).union(present.subtracting(["help", "version"]))
        guard let name = given.subtracting(allowed).sorted().first else { return }
        let close = allowed.map { ($0, CommandSpec.distance($0, name)) }.filter { $0.1 <= 2 }.min { $0.1 < $1.1 }
        throw UsageError("unknown option --\(name)" + (close.map { "; did you mean --\($0.0)?" } ?? ""))
    }
}

/// A mistake on the command line: exit 2 with the command's usage.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    /// The usage of the command it is about, once known.
    var usage: String?
    init(_ d: String) { description = d }
}

/// A problem that is not the server's and needs no usage printed (a credentials file readable by
/// others, no such profile): its message and exit status.
struct Refusal: Error, CustomStringConvertible {
    let description: String
    let status: Int32
    init(_ d: String, status: Int32 = 1) {
        description = d
        self.status = status
    }
}
