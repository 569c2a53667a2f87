import Foundation

/// What `POST /v1/coupons/{code}/codes` answers: how many codes were made, and where their CSV is
/// downloaded, once. The codes themselves are never in it (nor in any other answer but the CSV).
public struct CodesCreated: Codable, Sendable, Equatable {
    /// The coupon's own code.
    public var code: String
    public var count: Int
    public var prefix: String?
    /// The CSV for an operator key (`GET /v1/coupons/{code}/codes.csv`): once, then 410.
    public var csvUrl: String
    /// The same CSV for whoever holds this address, without a key (a person handed it by an
    /// assistant over MCP, say): once, then 410. It carries a one-time token.
    public var downloadUrl: String
    /// After this, the CSV is deleted undownloaded.
    public var expiresAt: Date

    public init(
        code: String, count: Int, prefix: String?, csvUrl: String, downloadUrl: String, expiresAt: Date
    ) {
        self.code = code
        self.count = count
        self.prefix = prefix
        self.csvUrl = csvUrl
        self.downloadUrl = downloadUrl
        self.expiresAt = expiresAt
    }
}

/// The fields an operator sends to make codes; each is checked with a 422 naming it.
public struct CodesInput: Codable, Sendable {
    public var count: Int?
    public var prefix: String?
    public init(count: Int?, prefix: String? = nil) {
        self.count = count
        self.prefix = prefix
    }
}

extension Coupons {
    /// Makes `count` unique single-use codes of the coupon `code` in `mode`, in one transaction,
    /// and holds their CSV sealed until its download (gateway → coupons).
    public struct CreateCodes: BusRequest {
        public static let type = "coupons.createCodes"
        /// Who asks, for the audit log.
        public var actor: AuditActor? = nil
        public struct Response: Codable, Sendable {
            public var code: String
            public var count: Int
            public var prefix: String?
            /// The one-time token of the download address (the gateway makes the address).
            public var downloadToken: String
            public var expiresAt: Date
            public init(code: String, count: Int, prefix: String?, downloadToken: String, expiresAt: Date) {
                self.code = code
                self.count = count
                self.prefix = prefix
                self.downloadToken = downloadToken
                self.expiresAt = expiresAt
            }
        }
        public var code: String
        public var mode: Mode
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public var input: CodesInput
        public init(code: String, mode: Mode, app: UUID, input: CodesInput) {
            self.code = code
            self.mode = mode
            self.app = app
            self.input = input
        }
    }

    /// Takes a creation's CSV, once: every CSV of the coupon `code` in `mode` not yet downloaded,
    /// or the one of `token`. Deleted as it is answered; a second take is `downloadGone`.
    public struct TakeCodes: BusRequest {
        public static let type = "coupons.takeCodes"
        public struct Response: Codable, Sendable {
            /// The coupon's own code (names the file).
            public var code: String
            public var count: Int
            /// `code` then one code a line.
            public var csv: String
            public init(code: String, count: Int, csv: String) {
                self.code = code
                self.count = count
                self.csv = csv
            }
        }
        public var code: String?
        public var mode: Mode?
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public var token: String?
        /// An operator key's take of its mode's coupon's CSV.
        public init(code: String, mode: Mode, app: UUID) {
            self.code = code
            self.mode = mode
            self.app = app
        }
        /// A take by the one-time token of the download address.
        public init(token: String) { self.token = token }
    }
}
