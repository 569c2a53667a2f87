import Core

/// Which messages each key of the bus may send (docs/security.md, "The bus"). Under CURVE a
/// server knows the sender by the name its key is listed under (the ZAP handler hands libzmq
/// that name as the connection's user id), and answers a message its sender may not send with
/// `forbidden`, logged, without running it.
///
/// - `coupons` sends the commands and notices of its outbox: grant commands, completed
///   redemptions, store offer commands and webhook events; nobody else may, so no other key can grant.
///   It asks grants which store settings another app has (`AppStores.List`, as the gateway does).
/// - `grants` answers back to coupons: acknowledgements, completions, releases, store reports.
/// - `accounts` asks grants about a record name's store purchases, and moves its holder.
/// - `gateway` sends what the HTTP API asks for: every other request, and API key messages
///   (only accounts answers them) only from it.
/// - any admitted key may `ping`; a key under another name (an operator's tool) may only `ping`.
public enum BusPermissions {
    /// The messages only these services send.
    static let serviceMessages: [String: Set<String>] = [
        "coupons": [
            GrantCommand.type, RedemptionCompletedNotice.type, StoreProvisionCommand.type, StoreSwitchCommand.type,
            WebhookEventNotice.type, AppStores.List.type,
        ],
        "grants": [OutboxAck.type, Coupons.Release.type, Coupons.CompleteMany.type, Coupons.StoreOfferReport.type],
        "accounts": [Grants.StoreView.type, Grants.MoveHolder.type]
    ]

    /// The messages of `serviceMessages` the gateway sends as well.
    static let alsoFromTheGateway: Set<String> = [Grants.StoreView.type, AppStores.List.type]

    /// Whether the key listed as `sender` may send a message of `type`.
    public static func allows(_ sender: String, toSend type: String) -> Bool {
        if type == Ping.type { return true }
        if sender == "gateway" {
            return alsoFromTheGateway.contains(type) || !serviceMessages.values.contains { $0.contains(type) }
        }
        return serviceMessages[sender]?.contains(type) ?? false
    }
}
