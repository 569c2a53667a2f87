/// Liveness and readiness over the bus: the service answers after a round trip to its database.
public struct Ping: BusRequest {
    public static let type = "ping"
    public init() {}

    public struct Response: Codable, Sendable, Equatable {
        public var service: String
        public var instance: String
        /// `up` when the database answered, `down` otherwise.
        public var database: String
        /// True once migrations are applied and the service takes work.
        public var ready: Bool

        public init(service: String, instance: String, database: String, ready: Bool) {
            self.service = service
            self.instance = instance
            self.database = database
            self.ready = ready
        }
    }
}
