/// One page of a list: `{ "data": [...], "nextCursor": "…" | null }`, the same on the
/// bus and over HTTP.
public struct Page<Item: Codable & Sendable>: Codable, Sendable {
    public var data: [Item]
    public var nextCursor: String?

    public init(data: [Item], nextCursor: String?) {
        self.data = data
        self.nextCursor = nextCursor
    }

    private enum CodingKeys: String, CodingKey { case data, nextCursor }

    /// `nextCursor` is written as null on the last page, not left out.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(data, forKey: .data)
        try c.encode(nextCursor, forKey: .nextCursor)
    }
}
