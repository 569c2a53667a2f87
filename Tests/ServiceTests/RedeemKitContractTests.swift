import Core
import Foundation
import Testing

@testable import GatewayService
@testable import RedeemKit

/// RedeemKit reads what the gateway says it answers: every example body `/openapi.json` holds
/// for an operation RedeemKit calls decodes into RedeemKit's own model, with RedeemKit's own
/// decoder, so a server change that breaks the Swift client fails here (as the Android and web
/// clients' contract tests do for theirs). And every code the server can put in an error, and
/// every refusal reason, is a case RedeemKit knows, not `unknown`.
@Suite struct RedeemKitContractTests {
    /// How RedeemKit reads one operation's success body.
    struct Reader: Sendable {
        let read: @Sendable (Data) throws -> Void
        static func of<T: Decodable>(_ type: T.Type) -> Reader {
            Reader { _ = try RedeemKit.JSONCoding.decoder.decode(type, from: $0) }
        }
    }

    /// The operations `RedeemClient` calls that answer JSON: each must have an example.
    static let appOperations: [(String, String, Reader)] = [
        ("post", "/v1/accounts", .of(RedeemKit.AuthResult.self)),
        ("post", "/v1/sessions", .of(RedeemKit.AuthResult.self)),
        ("post", "/v1/sessions/apple", .of(RedeemKit.AuthResult.self)),
        ("post", "/v1/sessions/refresh", .of(RedeemKit.AuthResult.self)),
        ("post", "/v1/sessions/exchange", .of(RedeemKit.AuthResult.self)),
        ("post", "/v1/sessions/password/reset/confirm", .of(RedeemKit.AuthResult.self)),
        ("get", "/v1/me", .of(RedeemKit.Account.self)),
        ("post", "/v1/me/apple", .of(RedeemKit.Account.self)),
        ("post", "/v1/me/cloudkit", .of(RedeemKit.CloudKitLink.self)),
        ("post", "/v1/coupons/validate", .of(RedeemKit.CouponValidation.self)),
        ("post", "/v1/redemptions", .of(RedeemKit.Redemption.self)),
        ("get", "/v1/redemptions/{id}", .of(RedeemKit.Redemption.self)),
        ("post", "/v1/redemptions/{id}/purchase", .of(RedeemKit.Redemption.self)),
        ("post", "/v1/redemptions/{id}/release", .of(RedeemKit.Redemption.self)),
        ("get", "/v1/me/redemptions", .of(RedeemKit.Page<RedeemKit.Redemption>.self)),
        ("get", "/v1/me/entitlements", .of(RedeemKit.DataList<RedeemKit.Entitlement>.self))
    ]

    /// The operations `OperatorClient` calls: their examples, where the document has some, decode.
    static let operatorOperations: [(String, String, Reader)] = [
        ("post", "/v1/coupons", .of(RedeemKit.Coupon.self)),
        ("get", "/v1/coupons", .of(RedeemKit.Page<RedeemKit.Coupon>.self)),
        ("get", "/v1/coupons/{code}", .of(RedeemKit.Coupon.self)),
        ("patch", "/v1/coupons/{code}", .of(RedeemKit.Coupon.self)),
        ("get", "/v1/coupons/{code}/redemptions", .of(RedeemKit.Page<RedeemKit.Redemption>.self)),
        ("post", "/v1/coupons/{code}/codes", .of(RedeemKit.CreatedCodes.self)),
        ("post", "/v1/api-keys", .of(RedeemKit.CreatedAPIKey.self)),
        ("get", "/v1/api-keys", .of(RedeemKit.Page<RedeemKit.APIKey>.self)),
        ("post", "/v1/webhooks", .of(RedeemKit.CreatedWebhook.self)),
        ("get", "/v1/webhooks", .of(RedeemKit.Page<RedeemKit.WebhookEndpoint>.self)),
        ("post", "/v1/webhooks/{id}/test", .of(RedeemKit.WebhookDelivery.self)),
        ("get", "/v1/webhooks/{id}/deliveries", .of(RedeemKit.Page<RedeemKit.WebhookDelivery>.self)),
        ("post", "/v1/plans", .of(RedeemKit.Plan.self)),
        ("get", "/v1/plans", .of(RedeemKit.Page<RedeemKit.Plan>.self)),
        ("get", "/v1/plans/{productId}", .of(RedeemKit.Plan.self)),
        ("post", "/v1/members", .of(RedeemKit.CreatedMemberInvite.self)),
        ("get", "/v1/members", .of(RedeemKit.Page<RedeemKit.Member>.self)),
        ("patch", "/v1/members/{id}", .of(RedeemKit.Member.self)),
        ("get", "/v1/members/invites", .of(RedeemKit.Page<RedeemKit.MemberInvite>.self)),
        ("get", "/v1/audit", .of(RedeemKit.Page<RedeemKit.AuditEntry>.self))
    ]

    /// A media type's example bodies: `example`, or each `examples` entry's `value`, by name.
    static func examples(_ media: [String: Any]) -> [(String, Any)] {
        if let one = media["example"] { return [("example", one)] }
        let named = media["examples"] as? [String: [String: Any]] ?? [:]
        return named.compactMap { name, example in example["value"].map { (name, $0) } }
    }

    /// Decodes every success example of `operations`; answers how many, and the operations that
    /// answer JSON without an example.
    static func decodeAll(_ operations: [(String, String, Reader)]) throws -> (decoded: [String], missing: [String]) {
        let document = try #require(try JSONSerialization.jsonObject(with: OpenAPIDocument.json) as? [String: Any])
        let paths = try #require(document["paths"] as? [String: [String: [String: Any]]])
        var decoded: [String] = []
        var missing: [String] = []
        for (method, path, reader) in operations {
            let name = "\(method.uppercased()) \(path)"
            let operation = try #require(paths[path]?[method], "\(name) is not in /openapi.json")
            let responses = operation["responses"] as? [String: [String: Any]] ?? [:]
            var answersJSON = false
            var found = 0
            for (status, answer) in responses where status.hasPrefix("2") {
                guard let content = answer["content"] as? [String: [String: Any]],
                    let media = content["application/json"]
                else { continue }
                answersJSON = true
                for (example, body) in examples(media) {
                    let data = try JSONSerialization.data(withJSONObject: body, options: [.fragmentsAllowed])
                    do {
                        try reader.read(data)
                    } catch {
                        Issue.record(
                            "\(name) \(status) \(example): RedeemKit can't read it (\(error)): \(String(decoding: data, as: UTF8.self))"
                        )
                    }
                    decoded.append("\(name) \(status) \(example)")
                    found += 1
                }
            }
            if answersJSON && found == 0 { missing.append(name) }
        }
        return (decoded, missing)
    }

    @Test func everyExampleOfAnOperationTheAppClientCallsDecodes() throws {
        let (decoded, missing) = try Self.decodeAll(Self.appOperations)
        #expect(missing == [], "operations RedeemClient calls with no example of their answer in /openapi.json")
        #expect(decoded.count >= Self.appOperations.count, "\(decoded)")
        // Validate's examples hold a refusal, which reads as one.
        #expect(decoded.contains { $0.hasPrefix("POST /v1/coupons/validate 200 refused") }, "\(decoded)")
    }

    @Test func everyExampleOfAnOperationTheOperatorClientCallsDecodes() throws {
        _ = try Self.decodeAll(Self.operatorOperations)
    }

    /// A code the server puts in an error body is a case of `RedeemErrorCode`; the bus's own codes
    /// reach no client (the gateway answers them as `internal`).
    @Test func everyServerErrorCodeAndRefusalReasonIsKnown() throws {
        let busOnly: Set<Core.ErrorCode> = [.malformedMessage, .unknownMessageType, .unsupportedVersion]
        for code in Core.ErrorCode.allCases where !busOnly.contains(code) {
            let read = RedeemErrorCode(rawValue: code.rawValue)
            if case .unknown = read { Issue.record("\(code.rawValue) is unknown to RedeemKit") }
            #expect(read.rawValue == code.rawValue)
        }
        // The codes the HTTP layer and the gateway write themselves (`idempotencyKeyReused`,
        // `methodNotAllowed`, …), found as DocsTests finds them, save the signature checks of the
        // stores' own notifications, which no RedeemKit client sends.
        let storesOnly: Set = ["malformedSignature", "staleSignature", "invalidSignature"]
        let answered = try DocsTests.codesTheCodeAnswers()
        #expect(storesOnly.isSubset(of: answered), "stale exceptions: \(storesOnly.subtracting(answered))")
        #expect(answered.isSuperset(of: ["idempotencyKeyReused", "idempotencyKeyInUse", "methodNotAllowed"]))
        for code in answered.subtracting(storesOnly).subtracting(busOnly.map(\.rawValue)).sorted() {
            if case .unknown = RedeemErrorCode(rawValue: code) { Issue.record("\(code) is unknown to RedeemKit") }
        }
        for reason in Core.RefusalReason.allCases {
            #expect(
                RedeemKit.CouponError.Reason(rawValue: reason.rawValue) != nil,
                "\(reason.rawValue) is no CouponError.Reason")
            let read = RedeemErrorCode(rawValue: reason.rawValue)
            #expect(read.couponReason?.rawValue == reason.rawValue, "a refused redeem's \(reason.rawValue)")
            // RedeemKit's sentence for a reason is the server's own.
            #expect(
                RedeemKit.CouponError(RedeemKit.CouponError.Reason(rawValue: reason.rawValue) ?? .unknown)
                    .localizedDescription
                    == reason.sentence, "\(reason.rawValue)")
        }
    }
}
