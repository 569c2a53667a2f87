import Core
import Cryptography
import Foundation
import HTTP

/// `Idempotency-Key` on every POST, as Stripe has it (docs/api.md, "Idempotency"): the first
/// request with a key runs and its answer is kept for 24 h, then the same key and request are
/// answered that answer again (`Idempotent-Replayed: true`), without running; the key with another
/// request is 422 `idempotencyKeyReused`; while the first still runs, 409 `idempotencyKeyInUse`.
/// A key belongs to its caller: an API key, or an account in a mode; without a credential, to the
/// route and the request itself (`anonymousScope`). Accounts keeps the keys (`Idempotency`), each
/// answer sealed under the secret key, so every gateway sees the same ones and a copy of the
/// database alone reads no token.
enum IdempotencyRule {
    static let header = "idempotency-key"

    /// Whether a POST ignores the header: the stores' notifications and events (`/v1/stores/`),
    /// which their senders sign and send without it and which are deduplicated by their own ids;
    /// Apple's form post to the web flow's callback, which a browser sends once on Apple's page and
    /// which a one-time state guards.
    static func ignores(_ path: String) -> Bool {
        path.hasPrefix("/v1/stores/") || path == "/v1/sessions/apple/callback"
    }

    /// Who a key belongs to.
    static func scope(of principal: Principal, request: HTTPRequest) -> String {
        switch principal {
        case .apiKey(let id, _, let mode, _): "apiKey:\(id.lowercasedString):\(mode.rawValue)"
        case .user(let account, _, _, _):
            "account:\(account.lowercasedString):\((request.header("redeem-mode") ?? Mode.live.rawValue).lowercased())"
                + (request.header("redeem-app").map { ":\($0.lowercased())" } ?? "")
        }
    }

    /// Whose a key is on a route anyone may call: nobody's but the request's. The scope is the
    /// route and a SHA-256 of what proves who sends it, the body (a password, a refresh token, a
    /// code) and the cookies (the dashboard's session, Apple's flow): only a client that sends the
    /// very same request again can get its answer. The same key with another body is thus another
    /// key, not a 422.
    static func anonymousScope(_ request: HTTPRequest) -> String {
        var proof = request.body
        proof.append(Data("\ncookie:\(request.header("cookie") ?? "")".utf8))
        return "anonymous:\(request.method) \(request.path):\(Crypto.sha256(proof).hex)"
    }

    /// What makes two requests the same: the route they were sent to and their body, byte for byte.
    static func requestHash(_ request: HTTPRequest) -> Data {
        Data(Crypto.sha256(Data("\(request.method) \(request.path)\n".utf8) + request.body))
    }

    /// Whether an answer is kept for the key. A request that did not run, or may run differently
    /// when tried again, is not: refused for its credential (401, 403) or for a rate limit (429),
    /// or failed on Redeem's side (5xx). Its key is let go, and the next request with it runs.
    static func keeps(status: Int) -> Bool {
        status < 500 && ![401, 403, 429].contains(status)
    }

    /// A key that is empty or too long (over 255 bytes) is 422 before anything runs.
    static func check(_ key: String) throws {
        guard !key.isEmpty, key.utf8.count <= Idempotency.maxKeyLength else {
            throw HTTPError.invalid(
                "Idempotency-Key", "the Idempotency-Key must be 1 to \(Idempotency.maxKeyLength) bytes")
        }
    }

    static let reusedMessage = "this Idempotency-Key was used with another request; use a new key for a new request"
    static let inUseMessage = "a request with this Idempotency-Key is still running; try again in a moment"
    static let reused = HTTPError(422, "idempotencyKeyReused", reusedMessage, field: "Idempotency-Key")
    static let inUse = HTTPError(409, "idempotencyKeyInUse", inUseMessage, field: "Idempotency-Key",
                                 headers: [("Retry-After", "1")])
}

extension Gateway {
    /// Runs `handle` once per Idempotency-Key (`IdempotencyRule`). Without the header, or on a
    /// route for callers with a credential without one that names its caller (the handler then
    /// answers 401), it just runs. `anonymous`: the route is anyone's (`anonymousScope`).
    func idempotently(_ request: HTTPRequest, anonymous: Bool, _ handle: Router.Handler) async throws -> HTTPResponse {
        guard let key = request.header(IdempotencyRule.header) else { return try await handle(request) }
        let scope: String
        if anonymous {
            scope = IdempotencyRule.anonymousScope(request)
        } else {
            // Who is asking comes first: without a credential the handler answers 401, whatever the key.
            guard let principal = try? await auth.principal(request) else { return try await handle(request) }
            scope = IdempotencyRule.scope(of: principal, request: request)
        }
        try IdempotencyRule.check(key)
        let lock = config.requestTimeoutSeconds + Int(config.busTimeout.seconds.rounded(.up)) + 5
        let begin = Idempotency.Begin(
            scope: scope, key: key, requestHash: IdempotencyRule.requestHash(request), lockSeconds: lock)
        switch try await accounts.request(begin) {
        case .replay(let stored):
            var response = HTTPResponse(
                status: stored.status, headers: stored.headers.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil },
                body: stored.body)
            response.headers.append(("Idempotent-Replayed", "true"))
            return response
        case .mismatch: throw IdempotencyRule.reused
        case .inFlight: throw IdempotencyRule.inUse
        case .started: break
        }
        var response: HTTPResponse
        do {
            response = try await handle(request)
        } catch {
            response = GatewayErrors.response(for: error, request: request)
        }
        do {
            if response.producer == nil, IdempotencyRule.keeps(status: response.status) {
                let stored = Idempotency.StoredResponse(
                    status: response.status, headers: response.headers.map { [$0.0, $0.1] },
                    body: response.body)
                _ = try await accounts.request(Idempotency.Finish(scope: scope, key: key, response: stored))
            } else {
                _ = try await accounts.request(Idempotency.Release(scope: scope, key: key))
            }
        } catch {
            // The answer stands; the key stays claimed until its lock lapses, then the next request runs.
            logger.warning(
                "idempotency key not settled", ["error": String(describing: error), "request.id": request.requestId])
        }
        return response
    }
}
