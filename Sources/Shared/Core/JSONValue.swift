import Foundation

/// Any JSON value, kept as it was read: what an audit record holds of an object before and after
/// a change (`AuditEntry`), whatever the object's type.
public enum JSONValue: Codable, Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let n = try? c.decode(Double.self) { self = .number(n) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let n):
            if n.rounded() == n, abs(n) < 1e15 { try c.encode(Int64(n)) } else { try c.encode(n) }
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    /// The value of `object`'s public JSON (`JSONEncoder.wire()`).
    public static func of(_ object: some Encodable) throws -> JSONValue {
        try JSONDecoder.wire().decode(JSONValue.self, from: JSONEncoder.wire().encode(object))
    }

    /// Its JSON text (sorted keys).
    public var text: String {
        (try? JSONEncoder.wire().encode(self)).flatMap { String(data: $0, encoding: .utf8) } ?? "null"
    }
}
