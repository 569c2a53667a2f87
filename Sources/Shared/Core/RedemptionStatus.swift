/// Where a redemption is in its life: `reserved` → `granting` → `completed` | `failed`
/// (the use given back), and `released` (a discount whose purchase did not come in time). A closed
/// set: the column's CHECK constraint holds the same values.
public enum RedemptionStatus: String, Codable, Sendable, CaseIterable {
    /// A discount's use, waiting for its store purchase.
    case reserved
    /// A free period's use, its grant on the way.
    case granting
    case completed, failed, released

    /// Whether the redemption has reached its end and will change no more: where a long poll stops
    /// (a discount's `reserved` waits for its purchase).
    public var isSettled: Bool {
        switch self {
        case .reserved, .granting: false
        case .completed, .failed, .released: true
        }
    }
}
