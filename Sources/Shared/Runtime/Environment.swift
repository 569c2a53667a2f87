import Core
import Foundation

/// Typed access to environment variables with defaults. Every getter fails fast with a `ConfigError`
/// on a value that is present but malformed; an absent variable gives the default.
public struct Environment: Sendable {
    public let values: [String: String]

    public init(_ values: [String: String] = ProcessInfo.processInfo.environment) {
        self.values = values
    }

    /// The raw value, with empty strings treated as unset.
    public func raw(_ name: String) -> String? {
        guard let v = values[name], !v.isEmpty else { return nil }
        return v
    }

    public func string(_ name: String, default def: String) -> String { raw(name) ?? def }

    public func int(_ name: String, default def: Int, range: ClosedRange<Int> = Int.min...Int.max) throws -> Int {
        guard let text = raw(name) else { return def }
        guard let v = Int(text.trimmingCharacters(in: .whitespaces)) else {
            throw ConfigError(variable: name, problem: "expected a whole number, got \(quoted(text))")
        }
        guard range.contains(v) else {
            throw ConfigError(variable: name, problem: "\(v) is outside \(range.lowerBound)...\(range.upperBound)")
        }
        return v
    }

    public func double(_ name: String, default def: Double, range: ClosedRange<Double>) throws -> Double {
        guard let text = raw(name) else { return def }
        guard let v = Double(text), range.contains(v) else {
            throw ConfigError(variable: name, problem: "expected a number in \(range), got \(quoted(text))")
        }
        return v
    }

    public func port(_ name: String, default def: Int) throws -> Int {
        try int(name, default: def, range: 0...65535)
    }

    /// `on/off`, `1/0`, `true/false`, `yes/no`.
    public func flag(_ name: String, default def: Bool) throws -> Bool {
        guard let text = raw(name)?.lowercased() else { return def }
        switch text {
        case "1", "on", "true", "yes": return true
        case "0", "off", "false", "no": return false
        default: throw ConfigError(variable: name, problem: "expected on/off, got \(quoted(text))")
        }
    }

    public func choice(_ name: String, default def: String, allowed: [String]) throws -> String {
        let v = string(name, default: def)
        guard allowed.contains(v) else {
            throw ConfigError(variable: name, problem: "expected one of \(allowed.joined(separator: ", ")), got \(quoted(v))")
        }
        return v
    }

    /// A comma-separated list of non-empty items.
    public func list(_ name: String, default def: [String]) -> [String] {
        guard let text = raw(name) else { return def }
        return text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// A comma-separated list of ZeroMQ endpoints such as `tcp://127.0.0.1:7001`.
    public func endpoints(_ name: String, default def: [String]) throws -> [String] {
        let items = list(name, default: def)
        guard !items.isEmpty else { throw ConfigError(variable: name, problem: "needs at least one endpoint") }
        for item in items where !(item.hasPrefix("tcp://") || item.hasPrefix("ipc://") || item.hasPrefix("inproc://")) {
            throw ConfigError(variable: name, problem: "\(quoted(item)) is not a tcp://, ipc:// or inproc:// endpoint")
        }
        return items
    }

    /// An http(s) URL.
    public func url(_ name: String, default def: String) throws -> URL {
        let text = string(name, default: def)
        guard let u = URL(string: text), let scheme = u.scheme, ["http", "https"].contains(scheme), u.host != nil else {
            throw ConfigError(variable: name, problem: "expected an http(s) URL, got \(quoted(text))")
        }
        return u
    }

    /// A PostgreSQL connection URL (`postgres://` or `postgresql://`), given in `name` or in the
    /// file `file` names (a container's secret). Never echoed back: it may hold a password.
    public func databaseURL(_ name: String = "REDEEM_DATABASE_URL", file: String = "REDEEM_DATABASE_URL_FILE") throws -> String {
        guard let url = try optionalDatabaseURL(name, file: file) else {
            throw ConfigError(variable: name, problem: "is required (or \(file)), e.g. postgresql://user@127.0.0.1:5432/redeem")
        }
        return url
    }

    /// `databaseURL`, nil when neither variable is set.
    public func optionalDatabaseURL(_ name: String, file: String) throws -> String? {
        guard let given = try valueOrFile(name, file: file) else { return nil }
        guard given.text.hasPrefix("postgres://") || given.text.hasPrefix("postgresql://") else {
            throw ConfigError(variable: given.variable, problem: "must start with postgres:// or postgresql://")
        }
        return given.text
    }

    /// A value given either in `name` or in the file `file` names (its text, trimmed): secrets
    /// come from files (a container's secrets, a key made by `redeem-keys`). Nil when neither is
    /// set; both at once is an error. Answers which of the two it came from.
    public func valueOrFile(_ name: String, file: String) throws -> (text: String, variable: String)? {
        switch (raw(name), raw(file)) {
        case (nil, nil): return nil
        case (let value?, nil): return (value.trimmingCharacters(in: .whitespacesAndNewlines), name)
        case (nil, let path?):
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw ConfigError(variable: file, problem: "cannot read \(quoted(path))")
            }
            return (text.trimmingCharacters(in: .whitespacesAndNewlines), file)
        case (_?, _?): throw ConfigError(variable: name, problem: "is set together with \(file); set one of them")
        }
    }

    private func quoted(_ s: String) -> String { "\"\(s.prefix(60))\"" }
}
