import Foundation

/// Reading JSON request bodies by the rules of SPEC §4.7: a JSON content type (415 otherwise),
/// valid JSON (400 `malformedJson`), nesting at most 32 deep (400), a JSON object (422 `invalid`),
/// required fields present and well-typed (422 `invalid` naming the field). Unknown fields are ignored.
public enum JSONBody {
    public static let maxDepth = 32

    public static func decode<T: Decodable>(_ type: T.Type, from request: HTTPRequest) throws -> T {
        guard let contentType = request.header("content-type"), isJSON(contentType) else {
            throw HTTPError.unsupportedMediaType
        }
        let body = request.body
        if exceedsDepth(body, limit: maxDepth) {
            throw HTTPError.malformedJson("the JSON is nested deeper than \(maxDepth) levels")
        }
        if body.range(of: nulEscape) != nil, let path = nulPath(body) {
            // PostgreSQL's text cannot hold it, and C strings would silently end there.
            throw HTTPError.invalid(path.isEmpty ? nil : path, "\(path.isEmpty ? "the body" : path) must not contain the NUL character (\\u0000)")
        }
        do {
            return try JSONDecoder.wire().decode(T.self, from: body)
        } catch let error as DecodingError {
            var described = describe(error, body: body)
            if described.status == 422, described.field == nil, let key = culprit(T.self, body) {
                described = .invalid(key, "\(key) has the wrong type or an out-of-range number")
            }
            throw described
        } catch let error as HTTPError {
            throw error
        } catch {
            throw HTTPError.malformedJson()
        }
    }

    private static let nulEscape = Data(#"\u0000"#.utf8)

    /// The path of the first string (value or key) holding U+0000, if any ("" for the body itself).
    static func nulPath(_ body: Data) -> String? {
        guard let root = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) else { return nil }
        func find(_ value: Any, _ path: String) -> String? {
            switch value {
            case let s as String:
                return s.utf8.contains(0) ? path : nil
            case let a as [Any]:
                for (i, v) in a.enumerated() { if let p = find(v, "\(path)[\(i)]") { return p } }
            case let o as [String: Any]:
                for key in o.keys.sorted() {
                    let p = path.isEmpty ? key : "\(path).\(key)"
                    if key.utf8.contains(0) { return p }
                    if let found = find(o[key]!, p) { return found }
                }
            default:
                break
            }
            return nil
        }
        return find(root, "")
    }

    /// Foundation reports a number that does not fit its field (12.5 for an Int) as "not valid
    /// JSON" without a path. Find the top-level key at fault by decoding without each key in turn.
    static func culprit<T: Decodable>(_ type: T.Type, _ body: Data) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else { return nil }
        for key in object.keys.sorted() {
            var without = object
            without[key] = nil
            guard let data = try? JSONSerialization.data(withJSONObject: without) else { continue }
            do {
                _ = try JSONDecoder.wire().decode(T.self, from: data)
                return key
            } catch let DecodingError.keyNotFound(k, ctx) where ctx.codingPath.isEmpty && k.stringValue == key {
                return key
            } catch DecodingError.dataCorrupted(let ctx) where ctx.codingPath.isEmpty {
                continue
            } catch {
                return key
            }
        }
        return nil
    }

    public static func isJSON(_ contentType: String) -> Bool {
        if contentType == "application/json" { return true }  // what nearly every client sends
        let mime = contentType.split(separator: ";").first.map { $0.trimmingSpaces.lowercased() } ?? ""
        return mime == "application/json" || (mime.hasPrefix("application/") && mime.hasSuffix("+json"))
    }

    static func describe(_ error: DecodingError, body: Data) -> HTTPError {
        func field(_ path: [any CodingKey]) -> String? {
            let names = path.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return names.isEmpty ? nil : names.joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
        }
        switch error {
        case .keyNotFound(let key, let ctx):
            let f = field(ctx.codingPath + [key]) ?? key.stringValue
            return .invalid(f, "\(f) is required")
        case .valueNotFound(_, let ctx):
            let f = field(ctx.codingPath)
            return .invalid(f, "\(f ?? "the body") must not be null")
        case .typeMismatch(_, let ctx):
            guard let f = field(ctx.codingPath) else {
                if (try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])) == nil { return .malformedJson() }
                return .invalid(nil, "the body must be a JSON object")
            }
            return .invalid(f, "\(f) has the wrong type")
        case .dataCorrupted(let ctx):
            guard let f = field(ctx.codingPath) else {
                if (try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])) == nil { return .malformedJson() }
                return .invalid(nil, "the body must be a JSON object")
            }
            // Foundation's own text ("Cannot initialize Role from invalid String value x") names
            // Swift types; say it in the API's words.
            if ctx.debugDescription.hasPrefix("Cannot initialize") { return .invalid(f, "\(f) is not one of the accepted values") }
            return .invalid(f, "\(f) is not valid: \(ctx.debugDescription)")
        @unknown default:
            return .malformedJson()
        }
    }

    /// Whether arrays/objects nest deeper than `limit`, scanning bytes (strings skipped) so a deep
    /// document is refused before any parser recurses into it.
    public static func exceedsDepth(_ data: Data, limit: Int) -> Bool {
        // Read through the buffer: Data's own iterator costs a call per byte.
        data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Bool in
            var depth = 0
            var inString = false
            var escaped = false
            for byte in bytes {
                if inString {
                    if escaped { escaped = false }
                    else if byte == UInt8(ascii: "\\") { escaped = true }
                    else if byte == UInt8(ascii: "\"") { inString = false }
                    continue
                }
                switch byte {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    if depth > limit { return true }
                case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
                default: break
                }
            }
            return false
        }
    }
}
