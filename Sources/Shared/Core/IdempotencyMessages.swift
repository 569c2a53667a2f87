import Foundation

/// The gateway's `Idempotency-Key` (docs/api.md, "Idempotency"), kept by accounts: a key is claimed
/// before its request runs, then holds the request's answer for 24 h or is let go.
public enum Idempotency {
    /// How long a key answers its first request's answer.
    public static let keepSeconds = 24 * 3600
    /// The longest key accepted, in bytes.
    public static let maxKeyLength = 255

    /// An answer as the gateway replays it.
    public struct StoredResponse: Codable, Sendable, Equatable {
        public var status: Int
        public var headers: [[String]]
        public var body: Data
        public init(status: Int, headers: [[String]], body: Data) {
            self.status = status
            self.headers = headers
            self.body = body
        }
    }

    /// Claims `key` for `scope` (who is asking: an API key, or an account in a mode) and a request
    /// whose SHA-256 is `requestHash`. `lockSeconds`: how long the claim holds if the gateway that
    /// made it never answers.
    public struct Begin: BusRequest {
        public static let type = "idempotency.begin"
        public enum Response: Codable, Sendable, Equatable {
            /// The key is the caller's: run the request, then `Finish` or `Release`.
            case started
            /// The first request with the key, answered.
            case replay(StoredResponse)
            /// The key came with another request.
            case mismatch
            /// The first request with the key is still running.
            case inFlight
        }
        public var scope: String
        public var key: String
        public var requestHash: Data
        public var lockSeconds: Int
        public init(scope: String, key: String, requestHash: Data, lockSeconds: Int) {
            self.scope = scope
            self.key = key
            self.requestHash = requestHash
            self.lockSeconds = lockSeconds
        }
    }

    /// Keeps the answer of a request that claimed its key.
    public struct Finish: BusRequest {
        public static let type = "idempotency.finish"
        public typealias Response = Empty
        public var scope: String
        public var key: String
        public var response: StoredResponse
        public init(scope: String, key: String, response: StoredResponse) {
            self.scope = scope
            self.key = key
            self.response = response
        }
    }

    /// Lets go of a claimed key without an answer to keep: the next request with it runs.
    public struct Release: BusRequest {
        public static let type = "idempotency.release"
        public typealias Response = Empty
        public var scope: String
        public var key: String
        public init(scope: String, key: String) {
            self.scope = scope
            self.key = key
        }
    }
}
