import Foundation

/// Writes one value in the bus's binary format (`BusBinary`) straight into a byte buffer: no tree
/// of values in between. A container's length is left open while it is written and filled in when
/// the value it belongs to is done. Codable types write their containers one after another, so
/// that is always known; a container written to after one opened after it was closed (interleaved
/// nested containers) is refused with an `EncodingError` rather than written wrong.
final class BusBinaryWriter: Encoder, SingleValueEncodingContainer {
    /// What is written so far (hand-written messages append to it too: `BusBinaryFields`).
    var bytes: [UInt8] = []
    let userInfo: [CodingUserInfoKey: Any]
    /// Not tracked (encoding our own types does not fail on a path).
    var codingPath: [any CodingKey] { [] }

    /// Containers still open: where each one's length goes, and its serial.
    private var open: [(at: Int, serial: Int)] = []
    private var serials = 0
    /// The container of the value being written, once it asked for one.
    private var current: Int?
    /// Why the value cannot be written (found where a container's method cannot throw).
    private var failure: EncodingError?

    /// Where `WireJSON` values go when the caller reads frames (`BusFrames`).
    let frames: BusFrames?

    init(userInfo: [CodingUserInfoKey: Any]) {
        self.userInfo = userInfo
        frames = userInfo[BusFrames.key] as? BusFrames
        bytes.reserveCapacity(512)
    }

    /// The frame of `value`: the marker, then the value, written by hand when it knows how
    /// (`BusBinaryFields`) unless `byHand` is false.
    func frame<T: Encodable>(_ value: T, byHand: Bool = true) throws -> [UInt8] {
        bytes.append(BusBinary.marker)
        if byHand { try message(value) } else { try write(value) }
        if let failure { throw failure }
        return bytes
    }

    /// Writes one value: the types with a tag of their own directly, the rest through `encode(to:)`.
    func write<T: Encodable>(_ value: T) throws {
        if T.self == Date.self { return put((value as! Date).timeIntervalSince1970, tag: .date) }
        if T.self == UUID.self {
            bytes.append(BusBinary.Tag.uuid.rawValue)
            return withUnsafeBytes(of: (value as! UUID).uuid) { bytes.append(contentsOf: $0) }
        }
        if T.self == Data.self { return put(.bytes, Array(value as! Data)) }
        if T.self == URL.self { return put(.string, Array((value as! URL).absoluteString.utf8)) }
        if T.self == Decimal.self { return put(.decimal, Array((value as! Decimal).description.utf8)) }
        let saved = current
        let depth = open.count
        let start = bytes.count
        current = nil
        defer { current = saved }
        try value.encode(to: self)
        close(downTo: depth)
        if bytes.count == start {  // wrote nothing: an empty object, as JSONEncoder writes `{}`
            bytes.append(BusBinary.Tag.object.rawValue)
            bytes.append(contentsOf: [0, 0, 0, 0])
        }
    }

    // MARK: Containers

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedWriter<Key>(writer: self, serial: levelContainer(.object)))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedWriter(writer: self, serial: levelContainer(.array))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    /// The container of the value being written: the one it opened already (a type may ask again,
    /// as `WebhookData` writes a view's fields and then its own), or a new one.
    private func levelContainer(_ tag: BusBinary.Tag) -> Int {
        if let current, open.contains(where: { $0.serial == current }) { return current }
        let serial = openContainer(tag)
        current = serial
        return serial
    }

    func openContainer(_ tag: BusBinary.Tag) -> Int {
        bytes.append(tag.rawValue)
        serials += 1
        open.append((bytes.count, serials))
        bytes.append(contentsOf: [0, 0, 0, 0])
        return serials
    }

    /// Makes `serial` the container written to: closes those opened after it.
    func enter(_ serial: Int) {
        if open.last?.serial == serial { return }
        guard let index = open.lastIndex(where: { $0.serial == serial }) else {
            failure =
                failure
                ?? EncodingError.invalidValue(
                    serial,
                    .init(codingPath: [], debugDescription: "a bus container was written to after it was closed"))
            return
        }
        close(downTo: index + 1)
    }

    private func close(downTo depth: Int) {
        while open.count > depth {
            let at = open.removeLast().at
            let length = UInt32(bytes.count - at - 4)
            for i in 0..<4 { bytes[at + i] = UInt8(truncatingIfNeeded: length >> (8 * i)) }
        }
    }

    // MARK: Primitives

    func key(_ key: some CodingKey, in serial: Int) {
        enter(serial)
        var name = key.stringValue
        name.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    func put(_ tag: BusBinary.Tag, _ payload: some Collection<UInt8>) {
        bytes.append(tag.rawValue)
        varint(UInt64(payload.count))
        bytes.append(contentsOf: payload)
    }

    func put(_ value: Double, tag: BusBinary.Tag = .double) {
        bytes.append(tag.rawValue)
        let bits = value.bitPattern
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: bits >> (8 * i))) }
    }

    func put(_ value: String) {
        var value = value
        value.withUTF8 { put(.string, $0) }
    }

    func put(signed value: Int64) {
        bytes.append(BusBinary.Tag.int.rawValue)
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    func put(unsigned value: UInt64) {
        bytes.append(BusBinary.Tag.uint.rawValue)
        varint(value)
    }

    func put(_ value: Bool) { bytes.append(value ? BusBinary.Tag.yes.rawValue : BusBinary.Tag.no.rawValue) }

    func put(_ value: Float) {
        bytes.append(BusBinary.Tag.float.rawValue)
        let bits = value.bitPattern
        for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: bits >> (8 * i))) }
    }

    // MARK: SingleValueEncodingContainer

    func encodeNil() { bytes.append(BusBinary.Tag.null.rawValue) }
    func encode(_ value: Bool) { put(value) }
    func encode(_ value: String) { put(value) }
    func encode(_ value: Double) { put(value) }
    func encode(_ value: Float) { put(value) }
    func encode(_ value: Int) { put(signed: Int64(value)) }
    func encode(_ value: Int8) { put(signed: Int64(value)) }
    func encode(_ value: Int16) { put(signed: Int64(value)) }
    func encode(_ value: Int32) { put(signed: Int64(value)) }
    func encode(_ value: Int64) { put(signed: value) }
    func encode(_ value: UInt) { put(unsigned: UInt64(value)) }
    func encode(_ value: UInt8) { put(unsigned: UInt64(value)) }
    func encode(_ value: UInt16) { put(unsigned: UInt64(value)) }
    func encode(_ value: UInt32) { put(unsigned: UInt64(value)) }
    func encode(_ value: UInt64) { put(unsigned: value) }
    func encode<T: Encodable>(_ value: T) throws { try write(value) }
}

/// An object's fields: each its key, then its value.
private struct KeyedWriter<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let writer: BusBinaryWriter
    let serial: Int
    var codingPath: [any CodingKey] { [] }

    func encodeNil(forKey key: Key) {
        writer.key(key, in: serial)
        writer.encodeNil()
    }
    func encode(_ value: Bool, forKey key: Key) {
        writer.key(key, in: serial)
        writer.put(value)
    }
    func encode(_ value: String, forKey key: Key) {
        writer.key(key, in: serial)
        writer.put(value)
    }
    func encode(_ value: Double, forKey key: Key) {
        writer.key(key, in: serial)
        writer.put(value)
    }
    func encode(_ value: Float, forKey key: Key) {
        writer.key(key, in: serial)
        writer.put(value)
    }
    func encode(_ value: Int, forKey key: Key) {
        writer.key(key, in: serial)
        writer.put(signed: Int64(value))
    }
    func encode(_ value: Int8, forKey key: Key) {
        writer.key(key, in: serial)
        writer.put(signed: Int64(value))
    }
    func encode(_ value: Int16, forKey key: Key) {
        writer.key(key, in: serial)
        writer.put(signed: Int64(value))
    }
    func encode(_ value: Int32, forKey key: Key) {
        writer.key(key, in: serial)
        writer.put(signed: Int64(value))
    }
    func encode(_ value: Int64, forKey key: Key) {
        writer.key(key, in: serial)
        writer.put(signed: value)
    }
    func encode(_ value: UInt, forKey key: Key) {
        writer.key(key, in: serial)
        writer.put(unsigned: UInt64(value))
    }
    func encode(_ value: UInt8, forKey key: Key) {
        writer.key(key, in: serial)
        writer.put(unsigned: UInt64(value))
    }
    func encode(_ value: UInt16, forKey key: Key) {
        writer.key(key, in: serial)
        writer.put(unsigned: UInt64(value))
    }
    func encode(_ value: UInt32, forKey key: Key) {
        writer.key(key, in: serial)
        writer.put(unsigned: UInt64(value))
    }
    func encode(_ value: UInt64, forKey key: Key) {
        writer.key(key, in: serial)
        writer.put(unsigned: value)
    }
    func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        writer.key(key, in: serial)
        try writer.write(value)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        writer.key(key, in: serial)
        return KeyedEncodingContainer(KeyedWriter<NestedKey>(writer: writer, serial: writer.openContainer(.object)))
    }

    func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        writer.key(key, in: serial)
        return UnkeyedWriter(writer: writer, serial: writer.openContainer(.array))
    }

    func superEncoder() -> any Encoder { SuperWriter(writer: writer, parent: serial, key: BusBinaryKey("super")) }
    func superEncoder(forKey key: Key) -> any Encoder { SuperWriter(writer: writer, parent: serial, key: key) }
}

/// An array's elements, one after another.
private struct UnkeyedWriter: UnkeyedEncodingContainer {
    let writer: BusBinaryWriter
    let serial: Int
    var codingPath: [any CodingKey] { [] }
    private(set) var count = 0

    init(writer: BusBinaryWriter, serial: Int) {
        self.writer = writer
        self.serial = serial
    }

    private mutating func next() {
        writer.enter(serial)
        count += 1
    }

    mutating func encodeNil() {
        next()
        writer.encodeNil()
    }
    mutating func encode(_ value: Bool) {
        next()
        writer.put(value)
    }
    mutating func encode(_ value: String) {
        next()
        writer.put(value)
    }
    mutating func encode(_ value: Double) {
        next()
        writer.put(value)
    }
    mutating func encode(_ value: Float) {
        next()
        writer.put(value)
    }
    mutating func encode(_ value: Int) {
        next()
        writer.put(signed: Int64(value))
    }
    mutating func encode(_ value: Int8) {
        next()
        writer.put(signed: Int64(value))
    }
    mutating func encode(_ value: Int16) {
        next()
        writer.put(signed: Int64(value))
    }
    mutating func encode(_ value: Int32) {
        next()
        writer.put(signed: Int64(value))
    }
    mutating func encode(_ value: Int64) {
        next()
        writer.put(signed: value)
    }
    mutating func encode(_ value: UInt) {
        next()
        writer.put(unsigned: UInt64(value))
    }
    mutating func encode(_ value: UInt8) {
        next()
        writer.put(unsigned: UInt64(value))
    }
    mutating func encode(_ value: UInt16) {
        next()
        writer.put(unsigned: UInt64(value))
    }
    mutating func encode(_ value: UInt32) {
        next()
        writer.put(unsigned: UInt64(value))
    }
    mutating func encode(_ value: UInt64) {
        next()
        writer.put(unsigned: value)
    }
    mutating func encode<T: Encodable>(_ value: T) throws {
        next()
        try writer.write(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
        next()
        return KeyedEncodingContainer(KeyedWriter<NestedKey>(writer: writer, serial: writer.openContainer(.object)))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        next()
        return UnkeyedWriter(writer: writer, serial: writer.openContainer(.array))
    }

    mutating func superEncoder() -> any Encoder {
        next()
        return SuperWriter(writer: writer, parent: nil, key: nil)
    }
}

/// The encoder a `superEncoder` call answers: its value is an object under its key.
private struct SuperWriter: Encoder {
    let writer: BusBinaryWriter
    let parent: Int?
    let key: (any CodingKey)?
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { writer.userInfo }

    private func open(_ tag: BusBinary.Tag) -> Int {
        if let parent, let key { writer.key(key, in: parent) }
        return writer.openContainer(tag)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedWriter<Key>(writer: writer, serial: open(.object)))
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { UnkeyedWriter(writer: writer, serial: open(.array)) }
    func singleValueContainer() -> any SingleValueEncodingContainer {
        if let parent, let key { writer.key(key, in: parent) }
        return writer
    }
}

/// A key made from its name.
struct BusBinaryKey: CodingKey {
    let stringValue: String
    init(_ name: String) { stringValue = name }
    init(stringValue: String) { self.stringValue = stringValue }
    var intValue: Int? { nil }
    init?(intValue: Int) { return nil }
}
