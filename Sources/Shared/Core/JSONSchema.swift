/// A JSON Schema as OpenAPI 3.1 writes one, with as much of the vocabulary as the API's bodies
/// need. `SchemaCatalog` reads one from a body's `Decodable` definition; the body's
/// `APIBody.fieldRules` add what its Swift types don't say.
public struct JSONSchema: Sendable, Equatable, Encodable {
    public indirect enum Shape: Sendable, Equatable {
        case string, integer, number, boolean, null
        case array(JSONSchema)
        /// Fields in the order the type reads them.
        case object([Field])
        /// An object whose keys are not fixed (`additionalProperties`).
        case map(JSONSchema)
        /// A schema of `components/schemas`, by name.
        case reference(String)
        /// Any JSON value (`JSONValue`): a record of another body, kept as it was.
        case any
    }

    public struct Field: Sendable, Equatable {
        public var name: String
        public var schema: JSONSchema
        public var required: Bool
    }

    public var shape: Shape
    /// null is accepted too. Every field that may be left out may also be sent as null: the
    /// decoders read null as absent.
    public var nullable = false
    /// The closed set of values of a string (`enum`).
    public var values: [String]?
    public var format: String?
    public var pattern: String?
    public var minimum: Int?
    public var maximum: Int?
    public var maxLength: Int?
    public var defaultValue: Int?
    public var description: String?

    public init(_ shape: Shape) { self.shape = shape }

    public static let string = JSONSchema(.string)
    public static let integer = JSONSchema(.integer)
    public static let boolean = JSONSchema(.boolean)
    public static func reference(_ name: String) -> JSONSchema { JSONSchema(.reference(name)) }
    public static func oneOf(_ values: [String]) -> JSONSchema {
        var s = JSONSchema.string
        s.values = values
        return s
    }

    /// The fields of an object schema, by name (empty for any other shape).
    public var fields: [Field] {
        if case .object(let fields) = shape { return fields }
        return []
    }

    // MARK: - Encoding

    private enum Key: String, CodingKey {
        case type, format, pattern, `enum`, minimum, maximum, maxLength, `default`, description
        case items, properties, required, additionalProperties, anyOf
        case ref = "$ref"
    }

    private struct Properties: Encodable {
        let fields: [Field]
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: AnyKey.self)
            for f in fields { try c.encode(f.schema, forKey: AnyKey(f.name)) }
        }
    }

    private struct AnyKey: CodingKey {
        let stringValue: String
        init(_ s: String) { stringValue = s }
        init?(stringValue: String) { self.stringValue = stringValue }
        var intValue: Int? { nil }
        init?(intValue: Int) { nil }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        let type: String
        switch shape {
        case .any:
            try c.encodeIfPresent(description, forKey: .description)
            return
        case .reference(let name):
            // A reference takes no siblings: a nullable one is "that, or null".
            if nullable {
                try c.encode([JSONSchema.reference(name), JSONSchema(.null)], forKey: .anyOf)
            } else {
                try c.encode("#/components/schemas/\(name)", forKey: .ref)
            }
            return
        case .string: type = "string"
        case .integer: type = "integer"
        case .number: type = "number"
        case .boolean: type = "boolean"
        case .null: type = "null"
        case .array(let items):
            type = "array"
            try c.encode(items, forKey: .items)
        case .object(let fields):
            type = "object"
            try c.encode(Properties(fields: fields), forKey: .properties)
            let required = fields.filter(\.required).map(\.name)
            if !required.isEmpty { try c.encode(required, forKey: .required) }
        case .map(let values):
            type = "object"
            try c.encode(values, forKey: .additionalProperties)
        }
        if nullable { try c.encode([type, "null"], forKey: .type) } else { try c.encode(type, forKey: .type) }
        if let values { try c.encode(nullable ? values.map(Optional.some) + [nil] : values.map(Optional.some), forKey: .enum) }
        try c.encodeIfPresent(format, forKey: .format)
        try c.encodeIfPresent(pattern, forKey: .pattern)
        try c.encodeIfPresent(minimum, forKey: .minimum)
        try c.encodeIfPresent(maximum, forKey: .maximum)
        try c.encodeIfPresent(maxLength, forKey: .maxLength)
        try c.encodeIfPresent(defaultValue, forKey: .default)
        try c.encodeIfPresent(description, forKey: .description)
    }
}

extension JSONSchema {
    /// What a body type says of one of its fields beyond its Swift type (`APIBody.fieldRules`).
    public enum Rule: Sendable {
        /// The API requires it although the Swift type may leave it out: the service checks it,
        /// and answers 422 naming the field.
        case required
        /// Always in the answer, as null when there is none.
        case alwaysSent
        /// A string from a closed set that has no Swift type of its own.
        case oneOf([String])
        case format(String)
        case pattern(String)
        case minimum(Int)
        case maximum(Int)
        case maxLength(Int)
        case note(String)
        /// Rules for the items of an array field.
        indirect case items([Rule])

        public static func oneOf<E: WireEnum>(_: E.Type) -> Rule { .oneOf(E.rawValues) }
        public static func range(_ r: ClosedRange<Int>) -> [Rule] { [.minimum(r.lowerBound), .maximum(r.upperBound)] }
    }

    /// The schema with `rules` applied (not `required` and `alwaysSent`, which belong to the
    /// field's place in its object).
    func applying(_ rules: [Rule]) -> JSONSchema {
        var s = self
        for rule in rules {
            switch rule {
            case .required, .alwaysSent: break
            case .oneOf(let values): s.values = values
            case .format(let f): s.format = f
            case .pattern(let p): s.pattern = p
            case .minimum(let n): s.minimum = n
            case .maximum(let n): s.maximum = n
            case .maxLength(let n): s.maxLength = n
            case .note(let text): s.description = text
            case .items(let inner):
                if case .array(let items) = s.shape { s.shape = .array(items.applying(inner)) }
            }
        }
        return s
    }
}
