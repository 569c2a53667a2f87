import Core
import Foundation

/// Reading JSON request bodies by the rules every route follows (docs/api.md): a JSON content type (415 otherwise),
/// valid JSON (400 `malformedJson`), nesting at most 32 deep (400), a JSON object (422 `invalid`),
/// required fields present and well-typed (422 `invalid` naming the field). Unknown fields are ignored.
public enum JSONBody {
    public static let maxDepth = 32

    public static func decode<T: Decodable>(_ type: T.Type, from request: HTTPRequest) throws -> T {
        guard let contentType = request.header("content-type"), isJSON(contentType) else {
            throw HTTPError.unsupportedMediaType
        }
        let body = request.body
        // JSON text is UTF-8 (RFC 8259 §8.1); a string of other bytes is not JSON at all, and must not
        // reach the search for a wrong number below, which would blame a field for it.
        guard isUTF8(body) else { throw HTTPError.malformedJson("the body is not valid UTF-8") }
        if exceedsDepth(body, limit: maxDepth) {
            throw HTTPError.malformedJson("the JSON is nested deeper than \(maxDepth) levels")
        }
        if mayHoldNul(body), let path = nulPath(body) {
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

    private static let nulEscape = Array(#"\u0000"#.utf8)

    /// Whether the body's bytes hold the escape `\u0000` anywhere (`nulPath` then decides whether
    /// it is one), read from the bytes: `Data.range(of:)` went through `NSData` and cost 2 µs a
    /// request.
    static func mayHoldNul(_ body: Data) -> Bool {
        body.withUnsafeBytes { ASCIIText.bytes($0, contain: nulEscape) }
    }

    static func isUTF8(_ body: Data) -> Bool {
        body.withUnsafeBytes { String(validating: $0.bindMemory(to: UInt8.self), as: UTF8.self) != nil }
    }

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
    /// JSON" without a path. Find it by putting 1, which every number type holds, in place of each
    /// number in turn ("duration.count" when it is nested): the one whose replacement lets the body
    /// decode is at fault. Failing that, the top-level key without which the body decodes.
    /// Each try decodes the whole body again, so at most `culpritTries` numbers and as many keys
    /// are tried: a megabyte of numbers must not buy a megabyte of decodes per number. Past that
    /// the answer is still 422, without a field.
    static let culpritTries = 32

    static func culprit<T: Decodable>(_ type: T.Type, _ body: Data) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else { return nil }
        func decodes(_ value: [String: Any]) -> Bool {
            guard let data = try? JSONSerialization.data(withJSONObject: value) else { return false }
            return (try? JSONDecoder.wire().decode(T.self, from: data)) != nil
        }
        for path in numberPaths(object, []).prefix(culpritTries) where decodes(replacing(path, in: object, with: 1) as? [String: Any] ?? [:]) {
            return path.reduce("") { name, step in
                if case .index(let i) = step { return "\(name)[\(i)]" }
                guard case .key(let k) = step else { return name }
                return name.isEmpty ? k : "\(name).\(k)"
            }
        }
        for key in object.keys.sorted().prefix(culpritTries) {
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

    private enum Step { case key(String), index(Int) }

    /// Where the numbers (and, as Foundation reads them, booleans) are, keys in order.
    private static func numberPaths(_ value: Any, _ path: [Step]) -> [[Step]] {
        switch value {
        case let o as [String: Any]: return o.keys.sorted().flatMap { numberPaths(o[$0]!, path + [.key($0)]) }
        case let a as [Any]: return a.indices.flatMap { numberPaths(a[$0], path + [.index($0)]) }
        case is NSNumber: return [path]
        default: return []
        }
    }

    private static func replacing(_ path: [Step], in value: Any, with new: Any) -> Any {
        guard let step = path.first else { return new }
        let rest = Array(path.dropFirst())
        switch (step, value) {
        case (.key(let k), var o as [String: Any]):
            if let inner = o[k] { o[k] = replacing(rest, in: inner, with: new) }
            return o
        case (.index(let i), var a as [Any]) where a.indices.contains(i):
            a[i] = replacing(rest, in: a[i], with: new)
            return a
        default:
            return value
        }
    }

    /// The paths of numbers no Swift number type holds (1e400, an integer of a thousand digits).
    /// Foundation's JSONSerialization refuses such a document and JSONDecoder reports it without a
    /// path, yet it is valid JSON: the field is named with this, which reads the document through
    /// JSONDecoder (that parses numbers only when asked). Throws when the body is not JSON.
    struct UnrepresentableNumbers: Decodable {
        private(set) var paths: [String] = []

        private struct Key: CodingKey {
            let stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        init(from decoder: any Decoder) throws { try visit(decoder, "") }

        private mutating func visit(_ decoder: any Decoder, _ path: String) throws {
            if let object = try? decoder.container(keyedBy: Key.self) {
                for key in object.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) {
                    try visit(try object.superDecoder(forKey: key), path.isEmpty ? key.stringValue : "\(path).\(key.stringValue)")
                }
            } else if var array = try? decoder.unkeyedContainer() {
                var i = 0
                while !array.isAtEnd {
                    try visit(try array.superDecoder(), "\(path)[\(i)]")
                    i += 1
                }
            } else {
                let value = try decoder.singleValueContainer()
                if value.decodeNil() || (try? value.decode(Bool.self)) != nil || (try? value.decode(String.self)) != nil { return }
                if (try? value.decode(Double.self)) == nil { paths.append(path) }
            }
        }
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
                if (try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])) == nil {
                    if let number = (try? JSONDecoder().decode(UnrepresentableNumbers.self, from: body))?.paths.first {
                        return .invalid(number.isEmpty ? nil : number, "\(number.isEmpty ? "the body" : number) is a number out of range")
                    }
                    return .malformedJson()
                }
                // An object here holds a number its field cannot take (`decode` names the field
                // when its bounded search finds it).
                let isObject = (try? JSONSerialization.jsonObject(with: body)) is [String: Any]
                return .invalid(nil, isObject ? "a number has the wrong type or is out of range" : "the body must be a JSON object")
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
