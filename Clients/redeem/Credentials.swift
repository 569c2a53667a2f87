import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The saved profiles: `credentials` in `$REDEEM_CONFIG_DIR`, or `$XDG_CONFIG_HOME/redeem`, or
/// `~/.config/redeem`, one section a profile:
///
///     [default]
///     api_url = "http://127.0.0.1:8080"
///     api_key = "sk_live_…"
///
/// The file is its owner's alone (0600, in a 0700 directory), written whole to a temporary file
/// and renamed over the old one, and refused when others may read it, as ssh refuses a key.
struct Credentials {
    struct Profile: Equatable {
        var apiURL: String
        var apiKey: String
    }

    let file: URL
    var profiles: [String: Profile] = [:]

    static func directory(_ environment: [String: String]) -> URL {
        if let dir = environment["REDEEM_CONFIG_DIR"], !dir.isEmpty { return URL(fileURLWithPath: dir) }
        if let xdg = environment["XDG_CONFIG_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg).appendingPathComponent("redeem")
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".config/redeem")
    }

    /// The profiles saved, none when there is no file yet.
    static func load(_ environment: [String: String]) throws -> Credentials {
        var c = Credentials(file: directory(environment).appendingPathComponent("credentials"))
        var info = stat()
        guard stat(c.file.path, &info) == 0 else {
            if errno == ENOENT { return c }
            throw Refusal("can't read \(c.file.path): \(String(cString: strerror(errno)))", status: 2)
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw Refusal(
                "\(c.file.path) is readable by others (mode \(String(mode, radix: 8))): its keys may be known; "
                    + "run `chmod 600 \(c.file.path)` and, if others could read it, revoke and replace the keys",
                status: 2)
        }
        guard info.st_uid == getuid() else {
            throw Refusal("\(c.file.path) belongs to another user: refused", status: 2)
        }
        let text = try String(contentsOf: c.file, encoding: .utf8)
        c.profiles = try parse(text, file: c.file.path)
        return c
    }

    static func parse(_ text: String, file: String) throws -> [String: Profile] {
        var sections: [String: [String: String]] = [:]
        var current: String?
        for (n, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                current = String(line.dropFirst().dropLast())
                sections[current!, default: [:]] = sections[current!] ?? [:]
                continue
            }
            guard let current, let eq = line.firstIndex(of: "=") else {
                throw Refusal("\(file):\(n + 1): not `[profile]` or `name = \"value\"`", status: 2)
            }
            let name = line[..<eq].trimmingCharacters(in: .whitespaces)
            var value = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
                value = String(value.dropFirst().dropLast()).replacingOccurrences(of: "\\\"", with: "\"")
                    .replacingOccurrences(of: "\\\\", with: "\\")
            }
            sections[current]![name] = value
        }
        return sections.compactMapValues { s in
            guard let url = s["api_url"], let key = s["api_key"] else { return nil }
            return Profile(apiURL: url, apiKey: key)
        }
    }

    var text: String {
        func quoted(_ s: String) -> String {
            "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        var text = "# redeem's saved API keys, written by `redeem login`: keep this file 0600.\n"
        for name in profiles.keys.sorted() {
            let p = profiles[name]!
            text += "\n[\(name)]\napi_url = \(quoted(p.apiURL))\napi_key = \(quoted(p.apiKey))\n"
        }
        return text
    }

    /// Writes the profiles: a new 0600 file beside the old one, renamed over it, so the file is
    /// never readable by others nor half-written. With no profile left, the file is removed.
    func save() throws {
        let dir = file.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        // Only the last directory is the CLI's own; the ones above (~/.config) keep their modes.
        if chmod(dir.path, 0o700) != 0 { throw Refusal("can't set \(dir.path) to 0700", status: 2) }
        if profiles.isEmpty {
            if unlink(file.path) != 0, errno != ENOENT { throw Refusal("can't remove \(file.path)", status: 2) }
            return
        }
        let temporary = dir.appendingPathComponent(".credentials.\(getpid()).\(UUID().uuidString.prefix(8))")
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw Refusal("can't write \(temporary.path): \(String(cString: strerror(errno)))") }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let ok = written == bytes.count && fchmod(fd, 0o600) == 0 && fsync(fd) == 0
        close(fd)
        guard ok, rename(temporary.path, file.path) == 0 else {
            _ = unlink(temporary.path)
            throw Refusal("can't write \(file.path): \(String(cString: strerror(errno)))")
        }
    }

    /// What a key shows of itself: its `sk_live_`/`sk_test_` prefix and last four characters.
    static func masked(_ key: String) -> String {
        let prefix = ["sk_live_", "sk_test_"].first { key.hasPrefix($0) } ?? ""
        guard key.count >= prefix.count + 8 else { return prefix + "…" }
        return prefix + "…" + key.suffix(4)
    }

    /// A profile's name: letters, digits, `.`, `_` and `-`.
    static func checkName(_ name: String) throws {
        let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "._-"))
        guard !name.isEmpty, name.count <= 64, name.unicodeScalars.allSatisfy({ allowed.contains($0) && $0.isASCII })
        else {
            throw UsageError("--profile must be 1 to 64 letters, digits, '.', '_' or '-', not \(name)")
        }
    }
}

/// Reads the key for `redeem login`: without echo from a terminal, else one line of standard input.
enum KeyReader {
    static func read(prompt: Bool) throws -> String {
        let terminal = isatty(STDIN_FILENO) == 1
        var saved = termios()
        if terminal, prompt {
            FileHandle.standardError.write(Data("API key (sk_live_… or sk_test_…): ".utf8))
            tcgetattr(STDIN_FILENO, &saved)
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
        }
        let line = readLine(strippingNewline: true)
        if terminal, prompt {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        let key = (line ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard !key.isEmpty else { throw UsageError("no API key on standard input") }
        guard !key.contains(where: \.isWhitespace) else { throw UsageError("an API key has no spaces") }
        return key
    }
}
