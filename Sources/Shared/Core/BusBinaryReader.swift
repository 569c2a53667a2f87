import Foundation

/// Reads one value in the bus's binary format (`BusBinary`). Every read is bounds-checked: bytes
/// from the network never trap, they throw a `DecodingError`. An object's fields are found by name
/// (starting after the field read last, since readers usually ask in the order writers wrote), so
/// order does not matter, an absent field is absent and an unknown one is stepped over.
final class BusBinaryReader: Decoder {
    let bytes: [UInt8]
    let userInfo: [CodingUserInfoKey: Any]
    private(set) var codingPath: [any CodingKey] = []
    /// Where the value being decoded starts.
    private var at = 0
    /// The frames after the envelope, which `WireJSON` values name by number (`BusFrames`).
    let frames: BusFrames?

    init(bytes: [UInt8], userInfo: [CodingUserInfoKey: Any], at: Int = 0, codingPath: [any CodingKey] = []) {
        self.bytes = bytes
        self.userInfo = userInfo
        frames = userInfo[BusFrames.key] as? BusFrames
        self.at = at
        self.codingPath = codingPath
    }

    /// Decodes the value at `offset`: the types with a tag of their own directly, the rest through
    /// `init(from:)`.
    func value<T: Decodable>(_ type: T.Type, at offset: Int, key: (any CodingKey)?) throws -> T {
        if let key { codingPath.append(key) }
        defer { if key != nil { codingPath.removeLast() } }
        if T.self == Date.self { return Date(timeIntervalSince1970: try double(at: offset, tag: .date)) as! T }
        if T.self == UUID.self { return try uuid(at: offset) as! T }
        if T.self == Data.self { return Data(bytes[try payload(at: offset, .bytes)]) as! T }
        if T.self == URL.self {
            guard let url = URL(string: try string(at: offset)) else { throw corrupted("not a URL") }
            return url as! T
        }
        if T.self == Decimal.self {
            let text = String(decoding: bytes[try payload(at: offset, .decimal)], as: UTF8.self)
            guard let decimal = Decimal(string: text) else { throw corrupted("not a decimal") }
            return decimal as! T
        }
        let saved = at
        at = offset
        defer { at = saved }
        return try T(from: self)
    }

    // MARK: Decoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(try KeyedReader<Key>(reader: self, at: at, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try UnkeyedReader(reader: self, at: at, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleReader(reader: self, at: at, codingPath: codingPath)
    }

    // MARK: Reading

    func corrupted(_ why: String) -> DecodingError {
        DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: why))
    }

    func mismatch(_ type: Any.Type, at offset: Int) -> DecodingError {
        let found = offset < bytes.count ? BusBinary.Tag(rawValue: bytes[offset]).map { "\($0)" } ?? "?" : "nothing"
        return DecodingError.typeMismatch(
            type, .init(codingPath: codingPath, debugDescription: "expected \(type), found \(found)"))
    }

    func tag(at offset: Int) throws -> BusBinary.Tag {
        guard offset >= 0, offset < bytes.count, let tag = BusBinary.Tag(rawValue: bytes[offset]) else {
            throw corrupted("truncated or unknown value")
        }
        return tag
    }

    /// A varint at `offset`, and where it ends.
    func varint(at offset: Int) throws -> (value: UInt64, end: Int) {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        var i = offset
        while true {
            guard i < bytes.count, shift < 64 else { throw corrupted("truncated number") }
            let byte = bytes[i]
            value |= UInt64(byte & 0x7F) << shift
            i += 1
            if byte < 0x80 { return (value, i) }
            shift += 7
        }
    }

    /// The bytes of a length-prefixed value (`string`, `bytes`, `decimal`) at `offset`.
    func payload(at offset: Int, _ expected: BusBinary.Tag) throws -> Range<Int> {
        guard try tag(at: offset) == expected else { throw mismatch(String.self, at: offset) }
        let (count, start) = try varint(at: offset + 1)
        guard count <= UInt64(bytes.count - start) else { throw corrupted("truncated value") }
        return start..<(start + Int(count))
    }

    /// The inside of a container (`array`, `object`) at `offset`.
    func contents(at offset: Int, _ expected: BusBinary.Tag, as type: Any.Type) throws -> Range<Int> {
        guard try tag(at: offset) == expected else { throw mismatch(type, at: offset) }
        guard offset + 5 <= bytes.count else { throw corrupted("truncated container") }
        var length = 0
        for i in 0..<4 { length |= Int(bytes[offset + 1 + i]) << (8 * i) }
        guard length <= bytes.count - offset - 5 else { throw corrupted("truncated container") }
        return (offset + 5)..<(offset + 5 + length)
    }

    /// Where the value at `offset` ends.
    func end(of offset: Int) throws -> Int {
        let end: Int
        let found = try tag(at: offset)
        switch found {
        case .null, .no, .yes: end = offset + 1
        case .int, .uint: end = try varint(at: offset + 1).end
        case .double, .date: end = offset + 9
        case .float: end = offset + 5
        case .uuid: end = offset + 17
        case .string, .bytes, .decimal: end = try payload(at: offset, found).upperBound
        case .array, .object: end = try contents(at: offset, found, as: Any.self).upperBound
        }
        guard end <= bytes.count else { throw corrupted("truncated value") }
        return end
    }

    func isNil(at offset: Int) throws -> Bool { try tag(at: offset) == .null }

    func bool(at offset: Int) throws -> Bool {
        switch try tag(at: offset) {
        case .yes: return true
        case .no: return false
        default: throw mismatch(Bool.self, at: offset)
        }
    }

    func string(at offset: Int) throws -> String {
        String(decoding: bytes[try payload(at: offset, .string)], as: UTF8.self)
    }

    func integer<I: FixedWidthInteger>(_ type: I.Type, at offset: Int) throws -> I {
        let result: I?
        switch try tag(at: offset) {
        case .int:
            let raw = try varint(at: offset + 1).value
            result = I(exactly: Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1))))
        case .uint: result = I(exactly: try varint(at: offset + 1).value)
        default: throw mismatch(type, at: offset)
        }
        guard let result else { throw corrupted("number does not fit in \(type)") }
        return result
    }

    /// A `double` (or `date`) at `offset`, or a number of another kind read as one.
    func double(at offset: Int, tag expected: BusBinary.Tag = .double) throws -> Double {
        let found = try tag(at: offset)
        if found == expected {
            guard offset + 9 <= bytes.count else { throw corrupted("truncated number") }
            var bits: UInt64 = 0
            for i in 0..<8 { bits |= UInt64(bytes[offset + 1 + i]) << (8 * UInt64(i)) }
            return Double(bitPattern: bits)
        }
        guard expected == .double else { throw mismatch(Date.self, at: offset) }
        switch found {
        case .float: return Double(try float(at: offset))
        case .int: return Double(try integer(Int64.self, at: offset))
        case .uint: return Double(try integer(UInt64.self, at: offset))
        default: throw mismatch(Double.self, at: offset)
        }
    }

    func float(at offset: Int) throws -> Float {
        switch try tag(at: offset) {
        case .float:
            guard offset + 5 <= bytes.count else { throw corrupted("truncated number") }
            var bits: UInt32 = 0
            for i in 0..<4 { bits |= UInt32(bytes[offset + 1 + i]) << (8 * UInt32(i)) }
            return Float(bitPattern: bits)
        default: return Float(try double(at: offset))
        }
    }

    func uuid(at offset: Int) throws -> UUID {
        switch try tag(at: offset) {
        case .uuid:
            guard offset + 17 <= bytes.count else { throw corrupted("truncated UUID") }
            var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &raw) { $0.copyBytes(from: bytes[(offset + 1)..<(offset + 17)]) }
            return UUID(uuid: raw)
        case .string:
            guard let id = UUID(parsing: try string(at: offset)) else { throw corrupted("not a UUID") }
            return id
        default: throw mismatch(UUID.self, at: offset)
        }
    }

    /// Reads the value at `offset` as `T`: a primitive type directly, anything else through `value`.
    func read<T: Decodable>(_ type: T.Type, at offset: Int, key: (any CodingKey)?) throws -> T {
        if T.self == String.self { return try string(at: offset) as! T }
        if T.self == Int.self { return try integer(Int.self, at: offset) as! T }
        if T.self == Bool.self { return try bool(at: offset) as! T }
        if T.self == Int64.self { return try integer(Int64.self, at: offset) as! T }
        if T.self == Double.self { return try double(at: offset) as! T }
        if T.self == Float.self { return try float(at: offset) as! T }
        if T.self == Int8.self { return try integer(Int8.self, at: offset) as! T }
        if T.self == Int16.self { return try integer(Int16.self, at: offset) as! T }
        if T.self == Int32.self { return try integer(Int32.self, at: offset) as! T }
        if T.self == UInt.self { return try integer(UInt.self, at: offset) as! T }
        if T.self == UInt8.self { return try integer(UInt8.self, at: offset) as! T }
        if T.self == UInt16.self { return try integer(UInt16.self, at: offset) as! T }
        if T.self == UInt32.self { return try integer(UInt32.self, at: offset) as! T }
        if T.self == UInt64.self { return try integer(UInt64.self, at: offset) as! T }
        return try value(type, at: offset, key: key)
    }

    /// Whether the key at `start` (`count` UTF-8 bytes) is `name`.
    func keyIs(_ name: String, at start: Int, count: Int) -> Bool {
        var name = name
        return name.withUTF8 { utf8 in
            guard utf8.count == count else { return false }
            for i in 0..<count where utf8[i] != bytes[start + i] { return false }
            return true
        }
    }
}

/// An object's fields, found by name.
private final class KeyedReader<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let reader: BusBinaryReader
    let fields: Range<Int>
    let codingPath: [any CodingKey]
    /// Where the search for the next field starts: after the one found last.
    private var hint: Int

    init(reader: BusBinaryReader, at offset: Int, codingPath: [any CodingKey]) throws {
        self.reader = reader
        self.codingPath = codingPath
        fields = try reader.contents(at: offset, .object, as: [String: Any].self)
        hint = fields.lowerBound
    }

    /// The field at `field`: its key's bytes, its value's offset, and where it ends.
    private func field(at field: Int) throws -> (key: Range<Int>, value: Int, end: Int) {
        let (count, start) = try reader.varint(at: field)
        guard start <= fields.upperBound, count <= UInt64(fields.upperBound - start) else {
            throw reader.corrupted("truncated key")
        }
        let value = start + Int(count)
        let end = try reader.end(of: value)
        guard end <= fields.upperBound else { throw reader.corrupted("truncated field") }
        return (start..<value, value, end)
    }

    /// The offset of the value of the field named `name` between `from` and `to`.
    private func find(_ name: String, from: Int, to: Int) throws -> Int? {
        var p = from
        while p < to {
            let f = try field(at: p)
            if reader.keyIs(name, at: f.key.lowerBound, count: f.key.count) {
                hint = f.end < fields.upperBound ? f.end : fields.lowerBound
                return f.value
            }
            p = f.end
        }
        return nil
    }

    /// The offset of `key`'s value, or nil when the object has no such field.
    private func find(_ key: Key) throws -> Int? {
        let name = key.stringValue
        let from = hint
        if let found = try find(name, from: from, to: fields.upperBound) { return found }
        return try find(name, from: fields.lowerBound, to: from)
    }

    private func require(_ key: Key) throws -> Int {
        guard let offset = try find(key) else {
            throw DecodingError.keyNotFound(
                key, .init(codingPath: codingPath, debugDescription: "no field \"\(key.stringValue)\""))
        }
        return offset
    }

    var allKeys: [Key] {
        var keys: [Key] = []
        var p = fields.lowerBound
        while p < fields.upperBound, let f = try? field(at: p) {
            if let key = Key(stringValue: String(decoding: reader.bytes[f.key], as: UTF8.self)) { keys.append(key) }
            p = f.end
        }
        return keys
    }

    func contains(_ key: Key) -> Bool { (try? find(key)) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { try reader.isNil(at: try require(key)) }

    private func decode<T: Decodable>(_ key: Key, _ type: T.Type) throws -> T {
        try reader.read(type, at: try require(key), key: key)
    }

    /// The field's value; nil when it is absent or null (one search, not three).
    private func present<T: Decodable>(_ key: Key, _ type: T.Type) throws -> T? {
        guard let offset = try find(key), try !reader.isNil(at: offset) else { return nil }
        return try reader.read(type, at: offset, key: key)
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decode(key, type) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try decode(key, type) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decode(key, type) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decode(key, type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decode(key, type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decode(key, type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decode(key, type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decode(key, type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decode(key, type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decode(key, type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decode(key, type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decode(key, type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decode(key, type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decode(key, type) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try decode(key, type) }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try present(key, type) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try present(key, type) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try present(key, type) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try present(key, type) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try present(key, type) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try present(key, type) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try present(key, type) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try present(key, type) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try present(key, type) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try present(key, type) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try present(key, type) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try present(key, type) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try present(key, type) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try present(key, type) }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { try present(key, type) }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        KeyedDecodingContainer(
            try KeyedReader<NestedKey>(reader: reader, at: try require(key), codingPath: codingPath + [key]))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try UnkeyedReader(reader: reader, at: try require(key), codingPath: codingPath + [key])
    }

    func superDecoder() throws -> any Decoder {
        let key = BusBinaryKey("super")
        guard let offset = try find(key.stringValue, from: fields.lowerBound, to: fields.upperBound) else {
            throw reader.corrupted("no field \"super\"")
        }
        return BusBinaryReader(
            bytes: reader.bytes, userInfo: reader.userInfo, at: offset, codingPath: codingPath + [key])
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        BusBinaryReader(
            bytes: reader.bytes, userInfo: reader.userInfo, at: try require(key), codingPath: codingPath + [key])
    }
}

/// An array's elements, in order.
private final class UnkeyedReader: UnkeyedDecodingContainer {
    let reader: BusBinaryReader
    let codingPath: [any CodingKey]
    private let elements: Range<Int>
    private var position: Int
    private(set) var currentIndex = 0

    init(reader: BusBinaryReader, at offset: Int, codingPath: [any CodingKey]) throws {
        self.reader = reader
        self.codingPath = codingPath
        elements = try reader.contents(at: offset, .array, as: [Any].self)
        position = elements.lowerBound
    }

    var count: Int? { nil }
    var isAtEnd: Bool { position >= elements.upperBound }

    /// Reads the next element; moves past it only once it was read.
    private func take<T>(_ read: (Int) throws -> T) throws -> T {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                T.self, .init(codingPath: codingPath, debugDescription: "the array has no more elements"))
        }
        let value = try read(position)
        let end = try reader.end(of: position)
        guard end <= elements.upperBound else { throw reader.corrupted("truncated element") }
        position = end
        currentIndex += 1
        return value
    }

    private func next<T: Decodable>(_ type: T.Type) throws -> T {
        try take { offset in try reader.read(type, at: offset, key: BusBinaryIndex(currentIndex)) }
    }

    func decodeNil() throws -> Bool {
        guard !isAtEnd, try reader.isNil(at: position) else { return false }
        _ = try take { _ in true }
        return true
    }

    func decode(_ type: Bool.Type) throws -> Bool { try next(type) }
    func decode(_ type: String.Type) throws -> String { try next(type) }
    func decode(_ type: Double.Type) throws -> Double { try next(type) }
    func decode(_ type: Float.Type) throws -> Float { try next(type) }
    func decode(_ type: Int.Type) throws -> Int { try next(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try next(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try next(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try next(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try next(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try next(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try next(type) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey>
    {
        try take { offset in
            KeyedDecodingContainer(try KeyedReader<NestedKey>(reader: reader, at: offset, codingPath: codingPath))
        }
    }

    func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try take { offset in try UnkeyedReader(reader: reader, at: offset, codingPath: codingPath) }
    }

    func superDecoder() throws -> any Decoder {
        try take { offset in
            BusBinaryReader(bytes: reader.bytes, userInfo: reader.userInfo, at: offset, codingPath: codingPath)
        }
    }
}

/// A single value.
private struct SingleReader: SingleValueDecodingContainer {
    let reader: BusBinaryReader
    let at: Int
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool { (try? reader.isNil(at: at)) ?? false }

    func decode(_ type: Bool.Type) throws -> Bool { try reader.read(type, at: at, key: nil) }
    func decode(_ type: String.Type) throws -> String { try reader.read(type, at: at, key: nil) }
    func decode(_ type: Double.Type) throws -> Double { try reader.read(type, at: at, key: nil) }
    func decode(_ type: Float.Type) throws -> Float { try reader.read(type, at: at, key: nil) }
    func decode(_ type: Int.Type) throws -> Int { try reader.read(type, at: at, key: nil) }
    func decode(_ type: Int8.Type) throws -> Int8 { try reader.read(type, at: at, key: nil) }
    func decode(_ type: Int16.Type) throws -> Int16 { try reader.read(type, at: at, key: nil) }
    func decode(_ type: Int32.Type) throws -> Int32 { try reader.read(type, at: at, key: nil) }
    func decode(_ type: Int64.Type) throws -> Int64 { try reader.read(type, at: at, key: nil) }
    func decode(_ type: UInt.Type) throws -> UInt { try reader.read(type, at: at, key: nil) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try reader.read(type, at: at, key: nil) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try reader.read(type, at: at, key: nil) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try reader.read(type, at: at, key: nil) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try reader.read(type, at: at, key: nil) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try reader.read(type, at: at, key: nil) }
}

/// An array element's place, in a coding path.
private struct BusBinaryIndex: CodingKey {
    let intValue: Int?
    init(_ index: Int) { intValue = index }
    init?(intValue: Int) { self.intValue = intValue }
    init?(stringValue: String) { return nil }
    var stringValue: String { "\(intValue ?? 0)" }
}
