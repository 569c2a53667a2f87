import Foundation

/// The bus's binary format: the typed messages (`Envelope`, `ReplyEnvelope` and the bodies they
/// carry) written through their own `Codable` conformances, without JSON text in between.
///
/// A frame starts with `BusBinary.marker`, then holds one value. Every value starts with a `Tag`:
///
/// | tag | then |
/// |---|---|
/// | `null`, `no`, `yes` | nothing |
/// | `int` / `uint` | a LEB128 varint (zigzag for `int`) |
/// | `double` / `float` | 8 / 4 bytes, the IEEE 754 bit pattern, little-endian |
/// | `string`, `bytes`, `decimal` | a varint length, then UTF-8 (the decimal as text) or raw bytes |
/// | `uuid` | 16 bytes |
/// | `date` | seconds since 1970 as a `double` |
/// | `array` | 4 bytes of length (little-endian), then the elements |
/// | `object` | 4 bytes of length, then fields: a varint length and the key's UTF-8, then the value |
///
/// Fields carry their names, so a reader finds them in any order, reads an absent optional field
/// as nil, and steps over a field it does not know (containers by their length, everything else
/// by its tag): a message from a newer version, with a field added, reads in an older one.
///
/// JSON frames start with `{`; readers take both (`BusCoding`), so versions that write JSON and
/// versions that write this can share a bus during a rolling upgrade.
public enum BusBinary {
    /// The first byte of a binary frame (format 1). JSON never starts with it.
    public static let marker: UInt8 = 0xB1

    enum Tag: UInt8 {
        case null = 0, no, yes, int, uint, double, float, string, bytes, array, object, uuid, date, decimal
    }

    /// Encodes `value` as a binary frame. `userInfo` reaches every `encode(to:)` (`BusFrames`).
    /// Written by hand when `value` knows how (`BusBinaryFields`), else through `Codable`: the same bytes.
    public static func encode<T: Encodable>(_ value: T, userInfo: [CodingUserInfoKey: Any] = [:]) throws -> Data {
        try encode(value, userInfo: userInfo, byHand: true)
    }

    static func encode<T: Encodable>(_ value: T, userInfo: [CodingUserInfoKey: Any], byHand: Bool) throws -> Data {
        Data(try BusBinaryWriter(userInfo: userInfo).frame(value, byHand: byHand))
    }

    /// Decodes a binary frame (one that starts with `marker`): by hand when `T` knows how
    /// (`BusBinaryFields`) and `byHand`, else, or when that fails, through `Codable`, which then
    /// throws what it always threw.
    public static func decode<T: Decodable>(
        _ type: T.Type, from data: Data, userInfo: [CodingUserInfoKey: Any] = [:]
    ) throws -> T {
        try decode(type, from: data, userInfo: userInfo, byHand: true)
    }

    static func decode<T: Decodable>(
        _ type: T.Type, from data: Data, userInfo: [CodingUserInfoKey: Any], byHand: Bool
    ) throws -> T {
        let reader = BusBinaryReader(bytes: [UInt8](data), userInfo: userInfo)
        guard reader.bytes.first == marker else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not a binary bus frame"))
        }
        if byHand, let own = T.self as? any BusBinaryFields.Type,
           let value = try? own.init(binary: reader, at: 1) as? T {
            return value
        }
        return try reader.value(T.self, at: 1, key: nil)
    }

    /// Whether `data` is a binary frame (else it is JSON).
    public static func isBinary(_ data: Data) -> Bool { data.first == marker }
}

/// Bus messages as they travel: written binary, read in either format.
public enum BusCoding {
    /// A binary frame of `value`.
    public static func encode<T: Encodable>(_ value: T) throws -> Data { try BusBinary.encode(value) }

    /// A message's frames, binary: the envelope, then the `WireJSON` values it carries.
    public static func encodeFrames<T: Encodable>(_ value: T) throws -> [Data] {
        let frames = BusFrames()
        let envelope = try BusBinary.encode(value, userInfo: [BusFrames.key: frames])
        return [envelope] + frames.all
    }

    /// Decodes a frame in either format: binary, or JSON (from an earlier version, or an outbox row).
    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        BusBinary.isBinary(data) ? try BusBinary.decode(type, from: data) : try JSONDecoder.bus.decode(type, from: data)
    }

    /// Decodes a message from its frames, in either format: the envelope, then the `WireJSON`
    /// values it carries.
    public static func decodeFrames<T: Decodable>(_ type: T.Type, from frames: some Collection<Data>) throws -> T {
        guard let envelope = frames.first, BusBinary.isBinary(envelope) else {
            return try JSONDecoder.busFrames(type, from: frames)
        }
        guard frames.count > 1 else { return try BusBinary.decode(type, from: envelope) }
        return try BusBinary.decode(
            type, from: envelope, userInfo: [BusFrames.key: BusFrames(Array(frames.dropFirst()))])
    }
}
