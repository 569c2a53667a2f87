import Foundation

// Apps (docs/apps.md): one deployment serves several apps. Each coupon, plan, API key, webhook and
// audit entry belongs to one app, as it belongs to one mode; accounts are shared, since a person
// has one. Kept by accounts (gateway → accounts).

/// The app every object of a deployment from before apps belongs to, and the one a request
/// without `Redeem-App` works in: a deployment with one app changes nothing.
public enum DefaultApp {
    public static let id = UUID(uuidString: "00000000-0000-0000-0000-000000000001")!
    /// `app` as a message carries it: nil (a caller of an earlier version) is the default app.
    public static func of(_ app: UUID?) -> UUID { app ?? id }
}

/// An app as the API shows it.
public struct AppView: Codable, Sendable, Equatable {
    public var id: UUID
    public var name: String
    public var createdAt: Date
    public init(id: UUID, name: String, createdAt: Date) {
        self.id = id
        self.name = name
        self.createdAt = createdAt
    }
}

public enum Apps {
    /// Makes an app (deployment admins only; the gateway checks).
    public struct Create: BusRequest {
        public static let type = "apps.create"
        public typealias Response = AppView
        /// Who asks, for the audit log.
        public var actor: AuditActor? = nil
        public var name: String
        public init(name: String) { self.name = name }
    }

    /// Every app, oldest first (the default app first), a page at a time (`Keyset`); with
    /// `member`, only the apps that member's session `session` has a role in.
    public struct List: BusRequest {
        public static let type = "apps.list"
        public typealias Response = Page<AppView>
        public var limit: Int?
        public var cursor: String?
        public var member: UUID?
        public var session: UUID?
        public init(limit: Int, cursor: String?, member: UUID? = nil, session: UUID? = nil) {
            self.limit = limit
            self.cursor = cursor
            self.member = member
            self.session = session
        }
    }

    /// One app; `notFound` for an unknown id (how the gateway checks a `Redeem-App` header).
    public struct Get: BusRequest {
        public static let type = "apps.get"
        public typealias Response = AppView
        public var id: UUID
        public init(id: UUID) { self.id = id }
    }
}
