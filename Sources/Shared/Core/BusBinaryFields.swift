import Foundation

/// A bus message that writes and reads its binary form (`BusBinary`) itself, field by field: the
/// bytes its `Codable` conformance writes through `BusBinaryWriter`, without Codable's containers,
/// key boxes and type lookups, which cost the gateway and coupons about 20 µs per reservation
/// (docs/performance.md, session 33). Only the envelopes and the messages every reservation and
/// validation sends have one; `BusBinaryTests` holds each to its `Codable` form, byte for byte
/// and field for field.
///
/// Reading finds fields by name, in any order, reads an absent optional field as nil and steps over
/// fields it does not know, as `BusBinaryReader` does. A message it cannot read is read again the
/// `Codable` way (`BusBinary.decode`, `BusBinaryEnvelope.body`), which throws the error it always
/// threw, with its coding path.
protocol BusBinaryFields {
    /// Writes the value (an object) at the writer's end.
    func write(to writer: BusBinaryWriter) throws
    /// Reads the value at `offset`.
    init(binary reader: BusBinaryReader, at offset: Int) throws
}

extension BusBinaryWriter {
    /// Writes `value` by hand when it knows how, else through its `Codable` conformance.
    func message<T: Encodable>(_ value: T) throws {
        if let own = value as? any BusBinaryFields { try own.write(to: self) } else { try write(value) }
    }

    /// An object or array written by hand: `contents` writes its fields (`name`, then a value) or
    /// its elements; its length is filled in once they are written.
    func container(_ tag: BusBinary.Tag, _ contents: () throws -> Void) rethrows {
        bytes.append(tag.rawValue)
        let at = bytes.count
        for _ in 0..<4 { bytes.append(0) }
        try contents()
        let length = UInt32(bytes.count - at - 4)
        for i in 0..<4 { bytes[at + i] = UInt8(truncatingIfNeeded: length >> (8 * i)) }
    }

    /// A field's name.
    func name(_ name: StaticString) {
        varint(UInt64(name.utf8CodeUnitCount))
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
    }

    /// An id in a field, as `Codable` writes it there: its text (Foundation's `KeyedEncodingContainer`
    /// writes a UUID as `uuidString`, and an earlier version's reader reads only that).
    func put(_ id: UUID) { put(id.uppercasedString) }

    /// A field's name that is data (a dictionary's key).
    func name(_ name: String) {
        var name = name
        name.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    func put(_ strings: [String]) {
        container(.array) { for s in strings { put(s) } }
    }

    func put(_ date: Date) { put(date.timeIntervalSince1970, tag: .date) }

    /// A field, or, when it is nil, nothing (as `encodeIfPresent` writes an optional one).
    func field<T: BusBinaryScalar>(_ name: StaticString, _ value: T?) {
        guard let value else { return }
        self.name(name)
        value.put(into: self)
    }

    /// An object whose one field is an array of values written by hand: a batch's items or answers.
    func object<T: BusBinaryFields>(_ name: StaticString, array: [T]) throws {
        try container(.object) {
            self.name(name)
            try container(.array) { for element in array { try element.write(to: self) } }
        }
    }

    /// A `WireJSON` value: the number of its frame when the caller reads frames, else the value inline.
    func put<V>(_ wire: WireJSON<V>) throws {
        guard let frames else { return try write(wire) }
        put(signed: Int64(frames.append(wire.bytes)))
    }
}

/// A value a hand-written field holds, written as `Codable` writes it there.
protocol BusBinaryScalar {
    func put(into writer: BusBinaryWriter)
}

extension String: BusBinaryScalar { func put(into w: BusBinaryWriter) { w.put(self) } }
extension Bool: BusBinaryScalar { func put(into w: BusBinaryWriter) { w.put(self) } }
extension UUID: BusBinaryScalar { func put(into w: BusBinaryWriter) { w.put(self) } }
extension Int: BusBinaryScalar { func put(into w: BusBinaryWriter) { w.put(signed: Int64(self)) } }
extension Int64: BusBinaryScalar { func put(into w: BusBinaryWriter) { w.put(signed: self) } }
extension Date: BusBinaryScalar { func put(into w: BusBinaryWriter) { w.put(self) } }
extension Array: BusBinaryScalar where Element == String { func put(into w: BusBinaryWriter) { w.put(self) } }

extension BusBinaryReader {
    /// Reads `type` by hand when it knows how, else through its `Codable` conformance.
    func message<T: Decodable>(_ type: T.Type, at offset: Int, key: String) throws -> T {
        if let own = T.self as? any BusBinaryFields.Type, let value = try own.init(binary: self, at: offset) as? T {
            return value
        }
        return try read(type, at: offset, key: BusBinaryKey(key))
    }

    /// Calls `field` with each field of the object at `offset`: its key's bytes and its value's offset.
    func fields(at offset: Int, _ field: (_ key: Range<Int>, _ value: Int) throws -> Void) throws {
        let inside = try contents(at: offset, .object, as: [String: Any].self)
        var p = inside.lowerBound
        while p < inside.upperBound {
            let (count, start) = try varint(at: p)
            guard start <= inside.upperBound, count <= UInt64(inside.upperBound - start) else {
                throw corrupted("truncated key")
            }
            let value = start + Int(count)
            let end = try end(of: value)
            guard end <= inside.upperBound else { throw corrupted("truncated field") }
            try field(start..<value, value)
            p = end
        }
    }

    /// Calls `element` with the offset of each element of the array at `offset`.
    func elements(at offset: Int, _ element: (Int) throws -> Void) throws {
        let inside = try contents(at: offset, .array, as: [Any].self)
        var p = inside.lowerBound
        while p < inside.upperBound {
            try element(p)
            let end = try end(of: p)
            guard end <= inside.upperBound else { throw corrupted("truncated element") }
            p = end
        }
    }

    /// The array in the object at `offset` under its one field `name` (`BusBinaryWriter.object(_:array:)`).
    func array<T: BusBinaryFields>(_ name: StaticString, of type: T.Type, inObjectAt offset: Int) throws -> [T] {
        var found: [T]?
        try fields(at: offset) { key, at in
            guard self.key(key, is: name) else { return }
            var read: [T] = []
            try elements(at: at) { read.append(try T(binary: self, at: $0)) }
            found = read
        }
        guard let found else { throw missing("\(name)") }
        return found
    }

    /// Whether the key whose bytes are `key` is `name`.
    func key(_ key: Range<Int>, is name: StaticString) -> Bool {
        guard key.count == name.utf8CodeUnitCount else { return false }
        let utf8 = name.utf8Start
        for i in 0..<key.count where utf8[i] != bytes[key.lowerBound + i] { return false }
        return true
    }

    /// The value at `offset` unless it is null (as `decodeIfPresent` reads a field that is there).
    func optional<T>(at offset: Int, _ read: (Int) throws -> T) throws -> T? {
        try isNil(at: offset) ? nil : read(offset)
    }

    func date(at offset: Int) throws -> Date { Date(timeIntervalSince1970: try double(at: offset, tag: .date)) }

    func strings(at offset: Int) throws -> [String] {
        var strings: [String] = []
        try elements(at: offset) { strings.append(try string(at: $0)) }
        return strings
    }

    func raw<R: RawRepresentable>(_ type: R.Type, at offset: Int) throws -> R where R.RawValue == String {
        guard let value = R(rawValue: try string(at: offset)) else { throw corrupted("not a \(R.self)") }
        return value
    }

    /// A `WireJSON` value: the number of one of the frames after the envelope, or the value inline.
    func wire<V>(_ type: WireJSON<V>.Type, at offset: Int) throws -> WireJSON<V> {
        guard [.int, .uint].contains(try tag(at: offset)) else { return try read(type, at: offset, key: nil) }
        guard let frame = frames?[try integer(Int.self, at: offset)] else { throw corrupted("no such frame") }
        return WireJSON(bytes: frame)
    }

    /// A field that was required but absent.
    func missing(_ name: String) -> DecodingError { corrupted("no field \"\(name)\"") }
}

// MARK: The envelopes

extension Envelope: BusBinaryFields {
    func write(to w: BusBinaryWriter) throws {
        try w.container(.object) {
            w.field("v", v)
            w.field("id", id)
            w.field("type", type)
            w.field("requestId", requestId)
            w.field("traceparent", traceparent)
            w.field("deadlineMs", deadlineMs)
            w.field("frames", frames)
            w.name("body")
            try w.message(body)
        }
    }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        let (header, body) = try BusBinaryEnvelope.header(r, at: offset)
        guard let body else { throw r.missing("body") }
        self.init(
            id: header.id, type: header.type, requestId: header.requestId, traceparent: header.traceparent,
            deadlineMs: header.deadlineMs, frames: header.frames, body: try r.message(Body.self, at: body, key: "body"))
        v = header.v
    }
}

extension ReplyEnvelope: BusBinaryFields {
    func write(to w: BusBinaryWriter) throws {
        try w.container(.object) {
            w.field("v", v)
            w.field("id", id)
            if let body {
                w.name("body")
                try w.message(body)
            }
            if let error {
                w.name("error")
                try w.write(error)
            }
        }
    }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        var v: Int?, id: String?, body: Body?, error: ServiceError?
        try r.fields(at: offset) { key, at in
            if r.key(key, is: "v") {
                v = try r.integer(Int.self, at: at)
            } else if r.key(key, is: "id") {
                id = try r.string(at: at)
            } else if r.key(key, is: "body") {
                body = try r.optional(at: at) { try r.message(Body.self, at: $0, key: "body") }
            } else if r.key(key, is: "error") {
                error = try r.optional(at: at) { try r.read(ServiceError.self, at: $0, key: BusBinaryKey("error")) }
            }
        }
        guard let v else { throw r.missing("v") }
        guard let id else { throw r.missing("id") }
        self.init(v: v, id: id, body: body, error: error)
    }
}

/// A binary request envelope read by hand: its header, then its body as the type the header's
/// `type` names (`BusRouter`).
public struct BusBinaryEnvelope {
    public let header: EnvelopeHeader
    private let reader: BusBinaryReader
    private let bodyAt: Int

    /// The envelope's header, or nil when `data` is not a well-formed binary envelope with a body.
    public init?(_ data: Data) {
        guard BusBinary.isBinary(data) else { return nil }
        let reader = BusBinaryReader(bytes: [UInt8](data), userInfo: [:])
        guard let read = try? Self.header(reader, at: 1), let body = read.body else { return nil }
        (self.header, self.reader, self.bodyAt) = (read.header, reader, body)
    }

    /// The body as `T`, or nil when it does not read as one.
    public func body<T: Decodable>(as type: T.Type) -> T? {
        try? reader.message(type, at: bodyAt, key: "body")
    }

    /// The header's fields, and where the body is.
    fileprivate static func header(_ r: BusBinaryReader, at offset: Int) throws -> (header: EnvelopeHeader, body: Int?) {
        var v: Int?, id: String?, type: String?, requestId: String?, traceparent: String?
        var deadlineMs: Int64?, frames: Bool?, body: Int?
        try r.fields(at: offset) { key, at in
            if r.key(key, is: "v") {
                v = try r.integer(Int.self, at: at)
            } else if r.key(key, is: "id") {
                id = try r.string(at: at)
            } else if r.key(key, is: "type") {
                type = try r.string(at: at)
            } else if r.key(key, is: "requestId") {
                requestId = try r.optional(at: at) { try r.string(at: $0) }
            } else if r.key(key, is: "traceparent") {
                traceparent = try r.optional(at: at) { try r.string(at: $0) }
            } else if r.key(key, is: "deadlineMs") {
                deadlineMs = try r.optional(at: at) { try r.integer(Int64.self, at: $0) }
            } else if r.key(key, is: "frames") {
                frames = try r.optional(at: at) { try r.bool(at: $0) }
            } else if r.key(key, is: "body") {
                body = at
            }
        }
        guard let v else { throw r.missing("v") }
        guard let id else { throw r.missing("id") }
        guard let type else { throw r.missing("type") }
        let header = EnvelopeHeader(
            v: v, id: id, type: type, requestId: requestId, traceparent: traceparent, deadlineMs: deadlineMs,
            frames: frames)
        return (header, body)
    }
}
