import Foundation

/// A JSON body of the public HTTP API, which the OpenAPI document describes. Its fields, their
/// types and which of them may be left out come from its `Decodable` definition (read by
/// `SchemaCatalog`); its rules add what the Swift types don't say.
public protocol APIBody: Decodable, SendableMetatype {
    /// Its name under `components/schemas`; nil: written out where it is used.
    static var schemaName: String? { get }
    /// Ranges, patterns, formats, closed sets of strings and notes, by field name. A rule for a
    /// field the type does not have is an error (`SchemaCatalog.Problem`).
    static var fieldRules: [String: [JSONSchema.Rule]] { get }
}

extension APIBody {
    public static var schemaName: String? { nil }
    public static var fieldRules: [String: [JSONSchema.Rule]] { [:] }
}

/// A closed set of strings on the wire, written as a Swift enum: its schema is the `enum` of its
/// raw values, so adding a case adds it to the document.
public protocol WireEnum: CaseIterable, RawRepresentable, Decodable, SendableMetatype where RawValue == String {}

extension WireEnum {
    public static var rawValues: [String] { allCases.map(\.rawValue) }
}

/// Reads the schemas of body types from their `Decodable` definitions, and keeps the named ones
/// (`components/schemas`). Reading decodes the type with a decoder that answers every question
/// with a placeholder and notes what was asked: each key, as what type, and whether with
/// `decode` (required) or `decodeIfPresent` (may be left out, or null).
public final class SchemaCatalog {
    public private(set) var schemas: [String: JSONSchema] = [:]

    /// A type the reader cannot describe, a rule for a field that does not exist, or two types
    /// under one name.
    public struct Problem: Error, CustomStringConvertible {
        public let description: String
    }

    public init() {}

    /// The schema of `type` where a body or field of it is: a reference for a named `APIBody`
    /// (whose schema joins `schemas`), the schema itself otherwise.
    public func schema<T: Decodable>(of type: T.Type) throws -> JSONSchema { try read(type).schema }

    func read<T: Decodable>(_ type: T.Type) throws -> (value: T, schema: JSONSchema) {
        if let leaf = Self.leaf(type) { return leaf }
        if let closed = type as? any WireEnum.Type {
            return (closed.allCases.first! as! T, .oneOf(closed.rawValues))
        }
        if let map = type as? any StringKeyedMap.Type {
            return (map.empty as! T, JSONSchema(.map(try map.valueSchema(in: self))))
        }
        let reader = SchemaReader(catalog: self)
        let value: T
        do {
            value = try T(from: reader)
        } catch let problem as Problem {
            throw problem
        } catch {
            throw Problem(description: "\(T.self) cannot be described from its Decodable definition: \(error)")
        }
        reader.markIds(in: value)
        guard let read = reader.schema else { throw Problem(description: "\(T.self) reads nothing") }
        let body = type as? any APIBody.Type
        let schema = try Self.refine(read, with: body?.fieldRules ?? [:], of: "\(T.self)")
        guard let name = body?.schemaName else { return (value, schema) }
        if let known = schemas[name], known != schema { throw Problem(description: "two schemas named \(name)") }
        schemas[name] = schema
        return (value, .reference(name))
    }

    /// Every field may be sent as null when it may be left out; `required` and `alwaysSent`
    /// change which fields those are.
    static func refine(_ schema: JSONSchema, with rules: [String: [JSONSchema.Rule]], of type: String) throws -> JSONSchema {
        guard case .object(var fields) = schema.shape else {
            if rules.isEmpty { return schema }
            throw Problem(description: "\(type) has field rules but is not an object")
        }
        for name in rules.keys where !fields.contains(where: { $0.name == name }) {
            throw Problem(description: "\(type) has a rule for \(name), which it does not have")
        }
        for i in fields.indices {
            let own = rules[fields[i].name] ?? []
            let alwaysSent = own.contains { if case .alwaysSent = $0 { true } else { false } }
            if alwaysSent || own.contains(where: { if case .required = $0 { true } else { false } }) { fields[i].required = true }
            fields[i].schema = fields[i].schema.applying(own)
            fields[i].schema.nullable = alwaysSent || !fields[i].required
        }
        var refined = schema
        refined.shape = .object(fields)
        return refined
    }

    /// Values of the types the JSON coders write as strings, numbers and booleans.
    private static func leaf<T>(_ type: T.Type) -> (value: T, schema: JSONSchema)? {
        func format(_ f: String) -> JSONSchema {
            var s = JSONSchema.string
            s.format = f
            return s
        }
        let found: (Any, JSONSchema)?
        switch type {
        case is String.Type: found = ("", .string)
        case is Bool.Type: found = (false, .boolean)
        case is Int.Type: found = (0, .integer)
        case is Int64.Type: found = (Int64(0), .integer)
        case is Int32.Type: found = (Int32(0), .integer)
        case is Double.Type: found = (0.0, JSONSchema(.number))
        case is Date.Type: found = (Date(timeIntervalSince1970: 0), format("date-time"))
        case is UUID.Type: found = (UUID(), format("uuid"))
        case is JSONValue.Type: found = (JSONValue.null, JSONSchema(.any))
        default: found = nil
        }
        return found.map { ($0.0 as! T, $0.1) }
    }
}

/// `[String: Value]`: an object whose keys are data.
protocol StringKeyedMap {
    static var empty: Self { get }
    static func valueSchema(in catalog: SchemaCatalog) throws -> JSONSchema
}

extension Dictionary: StringKeyedMap where Key == String, Value: Decodable {
    static var empty: Self { [:] }
    static func valueSchema(in catalog: SchemaCatalog) throws -> JSONSchema { try catalog.schema(of: Value.self) }
}

/// The decoder of `SchemaCatalog`: notes which container the type asks for and what it reads
/// from it. Every key is there and none is null, so a custom `init(from:)` takes the path that
/// reads the field.
final class SchemaReader: Decoder {
    let catalog: SchemaCatalog
    let codingPath: [any CodingKey] = []
    let userInfo: [CodingUserInfoKey: Any] = [:]
    private var fields: [JSONSchema.Field]?
    private var items: JSONSchema?
    private var single: JSONSchema?
    private(set) var asked: Container?
    /// The id-shaped text each string field was given, to its field's name.
    private var idPlaceholders: [String: String] = [:]

    enum Container { case keyed, unkeyed, single }

    init(catalog: SchemaCatalog) { self.catalog = catalog }

    var schema: JSONSchema? {
        switch asked {
        case .keyed?: JSONSchema(.object(fields ?? []))
        case .unkeyed?: items.map { JSONSchema(.array($0)) }
        case .single?: single
        case nil: nil
        }
    }

    func field<T: Decodable>(_ type: T.Type, _ key: any CodingKey, required: Bool) throws -> T {
        var (value, schema) = try catalog.read(type)
        if T.self == String.self {
            // Ids are read as text (`UUID+Wire.swift`): a text that is also an id, one per field,
            // tells those fields apart once the value is made (`markIds`).
            let id = UUID().uuidString
            idPlaceholders[id] = key.stringValue
            value = id as! T
        }
        var list = fields ?? []
        if let i = list.firstIndex(where: { $0.name == key.stringValue }) {
            list[i].required = list[i].required || required
        } else {
            list.append(JSONSchema.Field(name: key.stringValue, schema: schema, required: required))
        }
        fields = list
        return value
    }

    /// Gives `uuid` format to the string fields that `value` holds as ids.
    func markIds(in value: Any) {
        guard var list = fields else { return }
        for child in Mirror(reflecting: value).children {
            guard let id = child.value as? UUID, let name = idPlaceholders[id.uuidString],
                  let i = list.firstIndex(where: { $0.name == name }) else { continue }
            list[i].schema.format = "uuid"
        }
        fields = list
    }

    func item<T: Decodable>(_ type: T.Type) throws -> T {
        let (value, schema) = try catalog.read(type)
        items = schema
        return value
    }

    func value<T: Decodable>(_ type: T.Type) throws -> T {
        let (value, schema) = try catalog.read(type)
        single = schema
        return value
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        asked = .keyed
        if fields == nil { fields = [] }
        return KeyedDecodingContainer(Keyed<Key>(reader: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        asked = .unkeyed
        return Unkeyed(reader: self)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        asked = .single
        return Single(reader: self)
    }

    static func unsupported(_ what: String) -> SchemaCatalog.Problem {
        SchemaCatalog.Problem(description: "the schema reader does not follow \(what)")
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let reader: SchemaReader
        var codingPath: [any CodingKey] { [] }
        var allKeys: [Key] { [] }
        func contains(_ key: Key) -> Bool { true }
        func decodeNil(forKey key: Key) throws -> Bool { false }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try reader.field(type, key, required: true) }
        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { try reader.field(type, key, required: false) }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try reader.field(type, key, required: true) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try reader.field(type, key, required: true) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try reader.field(type, key, required: true) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try reader.field(type, key, required: true) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try reader.field(type, key, required: true) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try reader.field(type, key, required: true) }
        func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try reader.field(type, key, required: false) }
        func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try reader.field(type, key, required: false) }
        func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try reader.field(type, key, required: false) }
        func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try reader.field(type, key, required: false) }
        func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try reader.field(type, key, required: false) }
        func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try reader.field(type, key, required: false) }
        // The number types no body uses: a field of one is a type the reader does not describe.
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { throw SchemaReader.unsupported("Float") }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { throw SchemaReader.unsupported("Int8") }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { throw SchemaReader.unsupported("Int16") }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { throw SchemaReader.unsupported("UInt") }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { throw SchemaReader.unsupported("UInt8") }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { throw SchemaReader.unsupported("UInt16") }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { throw SchemaReader.unsupported("UInt32") }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { throw SchemaReader.unsupported("UInt64") }
        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            throw SchemaReader.unsupported("nested containers")
        }
        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { throw SchemaReader.unsupported("nested containers") }
        func superDecoder() throws -> any Decoder { throw SchemaReader.unsupported("super decoders") }
        func superDecoder(forKey key: Key) throws -> any Decoder { throw SchemaReader.unsupported("super decoders") }
    }

    /// One item, which stands for them all.
    struct Unkeyed: UnkeyedDecodingContainer {
        let reader: SchemaReader
        var codingPath: [any CodingKey] { [] }
        var count: Int? { 1 }
        private(set) var currentIndex = 0
        var isAtEnd: Bool { currentIndex > 0 }
        init(reader: SchemaReader) { self.reader = reader }
        mutating func decodeNil() throws -> Bool { false }
        private mutating func next<T: Decodable>(_ type: T.Type) throws -> T {
            defer { currentIndex += 1 }
            return try reader.item(type)
        }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next(type) }
        mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type) }
        mutating func decode(_ type: String.Type) throws -> String { try next(type) }
        mutating func decode(_ type: Double.Type) throws -> Double { try next(type) }
        mutating func decode(_ type: Int.Type) throws -> Int { try next(type) }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            throw SchemaReader.unsupported("nested containers")
        }
        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { throw SchemaReader.unsupported("nested containers") }
        mutating func superDecoder() throws -> any Decoder { throw SchemaReader.unsupported("super decoders") }
    }

    struct Single: SingleValueDecodingContainer {
        let reader: SchemaReader
        var codingPath: [any CodingKey] { [] }
        func decodeNil() -> Bool { false }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try reader.value(type) }
        func decode(_ type: Bool.Type) throws -> Bool { try reader.value(type) }
        func decode(_ type: String.Type) throws -> String { try reader.value(type) }
        func decode(_ type: Double.Type) throws -> Double { try reader.value(type) }
        func decode(_ type: Int.Type) throws -> Int { try reader.value(type) }
        func decode(_ type: Int32.Type) throws -> Int32 { try reader.value(type) }
        func decode(_ type: Int64.Type) throws -> Int64 { try reader.value(type) }
    }
}
