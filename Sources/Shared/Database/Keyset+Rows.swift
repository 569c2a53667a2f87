import Core

extension Keyset {
    /// The page of the first `limit` rows (asked for with `fetch`), its cursor made of the last
    /// row's `micros` column and its `id`.
    public func page<Item: Codable & Sendable>(_ rows: [PGRow], micros column: String, _ view: (PGRow) throws -> Item) throws -> Page<Item> {
        let data = try rows.prefix(limit).map(view)
        guard rows.count > limit else { return Page(data: data, nextCursor: nil) }
        let last = rows[limit - 1]
        return Page(data: data, nextCursor: KeysetCursor(micros: try last.decode(column), id: try last.decode("id")).text)
    }
}
