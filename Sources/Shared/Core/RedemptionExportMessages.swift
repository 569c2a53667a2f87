import Foundation

/// What `POST /v1/coupons/{code}/redemption-exports` answers: how many redemptions the coupon has,
/// and a one-time address where a person downloads them as CSV without a key. The rows themselves
/// are in no answer but that CSV (MCP's `export_redemptions_csv` hands a model this, never the rows).
public struct RedemptionExport: Codable, Sendable, Equatable {
    /// The coupon's own code.
    public var code: String
    /// Its redemptions now, of every status: the CSV's rows, unless more come before the download.
    public var count: Int
    /// The CSV `GET /v1/coupons/{code}/redemptions` answers with `Accept: text/csv`, for whoever
    /// holds this address: once, then 410. It carries a one-time token.
    public var downloadUrl: String
    /// After this, the address answers 410.
    public var expiresAt: Date

    public init(code: String, count: Int, downloadUrl: String, expiresAt: Date) {
        self.code = code
        self.count = count
        self.downloadUrl = downloadUrl
        self.expiresAt = expiresAt
    }
}

extension Coupons {
    /// Counts the redemptions of the coupon `code` in `mode` and makes a one-time token for their
    /// CSV (gateway → coupons). Only the token's hash is kept, with the coupon, until its download.
    public struct ExportRedemptions: BusRequest {
        public static let type = "coupons.exportRedemptions"
        public struct Response: Codable, Sendable {
            public var code: String
            public var count: Int
            /// The one-time token of the download address (the gateway makes the address).
            public var downloadToken: String
            public var expiresAt: Date
            public init(code: String, count: Int, downloadToken: String, expiresAt: Date) {
                self.code = code
                self.count = count
                self.downloadToken = downloadToken
                self.expiresAt = expiresAt
            }
        }
        public var code: String
        public var mode: Mode
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(code: String, mode: Mode, app: UUID) {
            self.code = code
            self.mode = mode
            self.app = app
        }
    }

    /// Takes the one-time token of a redemptions CSV, once: answers its coupon and mode (the gateway
    /// then streams the CSV as the API does). Deleted as it is answered; a second take, or one after
    /// the token expired, is `downloadGone`.
    public struct TakeRedemptionExport: BusRequest {
        public static let type = "coupons.takeRedemptionExport"
        public struct Response: Codable, Sendable {
            public var code: String
            public var mode: Mode
            /// The coupon's app (`DefaultApp.of`: nil from a coupons of an earlier version).
            public var app: UUID?
            public init(code: String, mode: Mode, app: UUID) {
                self.code = code
                self.mode = mode
                self.app = app
            }
        }
        public var token: String
        public init(token: String) { self.token = token }
    }
}
