import Core
import Foundation

/// The schemas of the OpenAPI document: every body the API takes or gives. (The tables are
/// constants built once and never mutated, hence `nonisolated(unsafe)` on their `let`s.)
enum OpenAPISchemas {
    typealias JSON = [String: Any]

    /// Optional fields may also be sent as null: the decoders treat null as absent.
    static func nullable(_ schema: JSON) -> JSON {
        if let ref = schema["$ref"] { return ["anyOf": [["$ref": ref], ["type": "null"]]] }
        var s = schema
        if let t = s["type"] as? String { s["type"] = [t, "null"] }
        if let e = s["enum"] as? [Any] { s["enum"] = e + [NSNull()] }
        return s
    }

    static func object(_ props: [String: JSON], required: [String] = []) -> JSON {
        var props = props
        for (k, v) in props where !required.contains(k) { props[k] = nullable(v) }
        var o: JSON = ["type": "object", "properties": props]
        if !required.isEmpty { o["required"] = required }
        return o
    }
    nonisolated(unsafe) static let string: JSON = ["type": "string"]
    nonisolated(unsafe) static let nullableString: JSON = ["type": ["string", "null"]]
    nonisolated(unsafe) static let time: JSON = ["type": "string", "format": "date-time"]
    nonisolated(unsafe) static let nullableTime: JSON = ["type": ["string", "null"], "format": "date-time"]
    nonisolated(unsafe) static let uuid: JSON = ["type": "string", "format": "uuid"]
    nonisolated(unsafe) static let bool: JSON = ["type": "boolean"]
    nonisolated(unsafe) static let int: JSON = ["type": "integer"]
    static func ref(_ n: String) -> JSON { ["$ref": "#/components/schemas/\(n)"] }
    static func array(_ items: JSON) -> JSON { ["type": "array", "items": items] }
    static func page(_ item: String) -> JSON {
        object(["data": array(ref(item)), "nextCursor": nullableString], required: ["data", "nextCursor"])
    }
    nonisolated(unsafe) static let platform: JSON = ["type": "string", "enum": ["ios", "android", "web"]]
    nonisolated(unsafe) static let mode: JSON = ["type": "string", "enum": ["live", "test"]]
    nonisolated(unsafe) static let environment: JSON = [
        "type": "string", "enum": ["production", "sandbox"],
        "description": "production (default) reaches the live coupon of a code both modes have, sandbox the test one; either reaches the only one there is",
    ]

    nonisolated(unsafe) static let all: JSON = [
        "Error": object(["error": object(["code": string, "message": string, "field": string], required: ["code", "message"])], required: ["error"]),
        "Status": object(["status": string]),
        "Readiness": object(["status": ["type": "string", "enum": ["ready", "notReady"]],
                             "services": ["type": "object", "additionalProperties": object(["status": string, "database": string, "instance": string, "error": string])]]),
        "Money": object(["amount": ["type": "string", "pattern": "^[0-9]+(\\.[0-9]{1,2})?$"], "currency": ["type": "string", "pattern": "^[A-Z]{3}$"]],
                        required: ["amount", "currency"]),
        "Duration": object(["unit": ["type": "string", "enum": ["day", "week", "month", "year"]], "count": ["type": "integer", "minimum": 1]],
                           required: ["unit", "count"]),
        "SignUp": object(["email": string, "password": string, "cloudkitRecordName": string], required: ["email", "password"]),
        "SignIn": object(["email": string, "password": string], required: ["email", "password"]),
        "AppleSignIn": object(["identityToken": string, "cloudkitRecordName": string], required: ["identityToken"]),
        "Refresh": object(["refreshToken": string], required: ["refreshToken"]),
        "CloudKitLink": object(["recordName": string], required: ["recordName"]),
        "AppUserId": object(["appUserId": string], required: ["appUserId"]),
        "Identity": object(["type": ["type": "string", "enum": ["email", "apple", "cloudkit"]], "email": string, "recordName": string], required: ["type"]),
        "Account": object(["id": uuid, "email": string, "appUserId": string, "identities": array(ref("Identity")), "createdAt": time],
                          required: ["id", "appUserId", "identities", "createdAt"]),
        "Session": object(["accessToken": string, "refreshToken": string, "expiresAt": time], required: ["accessToken", "refreshToken", "expiresAt"]),
        "AuthResult": object(["account": ref("Account"), "session": ref("Session")], required: ["account", "session"]),
        "ApiKeyInput": object(["name": string, "role": ["type": "string", "enum": ["admin", "support", "readonly"]],
                               "mode": ["type": "string", "enum": ["live", "test"],
                                        "description": "left out: the mode of the key making it; a test key makes test keys only (403)"]],
                              required: ["name", "role"]),
        "ApiKey": object(["id": uuid, "prefix": string, "name": string, "role": string, "mode": string, "createdAt": time, "lastUsedAt": time],
                         required: ["id", "prefix", "name", "role", "mode", "createdAt"]),
        "CreatedApiKey": object(["id": uuid, "prefix": string, "name": string, "role": string, "mode": string, "createdAt": time,
                                 "lastUsedAt": time, "key": string], required: ["id", "prefix", "key"]),
        "ApiKeyPage": page("ApiKey"),
        "StoreLimit": object(["store": string, "limit": string, "value": int], required: ["store", "limit", "value"]),
        "CouponInput": object(["code": ["type": "string", "pattern": "^[A-Za-z0-9_-]{3,64}$"],
                               "kind": ["type": "string", "enum": ["freePeriod", "percentOff", "amountOff"]],
                               "percentOff": ["type": "integer", "minimum": 1, "maximum": 100], "amountOff": ref("Money"), "duration": ref("Duration"),
                               "periodCount": ["type": "integer", "minimum": 1], "entitlementId": string, "productIds": array(string),
                               "platforms": array(platform), "startsAt": time, "expiresAt": time,
                               "maxRedemptions": ["type": "integer", "minimum": 1, "maximum": Coupons.largestCap], "newCustomersOnly": bool],
                              required: ["code", "kind", "duration"]),
        "CouponPatch": object(["active": bool, "maxRedemptions": ["type": ["integer", "null"], "minimum": 1, "maximum": Coupons.largestCap, "description": "null removes the cap"],
                               "expiresAt": ["type": ["string", "null"], "format": "date-time", "description": "null removes the end"]]),
        "Coupon": object(["code": string, "kind": string, "percentOff": int, "amountOff": ref("Money"), "duration": ref("Duration"),
                          "periodCount": int, "entitlementId": string, "productIds": array(string), "platforms": array(platform),
                          "startsAt": time, "expiresAt": time, "maxRedemptions": int, "newCustomersOnly": bool, "active": bool,
                          "mode": string, "redeemedCount": int, "reservedCount": int, "remaining": int, "createdAt": time,
                          "storeLimits": array(ref("StoreLimit"))],
                         required: ["code", "kind", "duration", "productIds", "platforms", "active", "mode", "redeemedCount", "reservedCount", "createdAt", "storeLimits"]),
        "CouponPage": page("Coupon"),
        "PublicCoupon": object(["code": string, "kind": string, "percentOff": int, "amountOff": ref("Money"), "duration": ref("Duration"),
                                "periodCount": int, "entitlementId": string], required: ["code", "kind", "duration"]),
        "ValidateInput": object(["code": string, "platform": platform, "environment": environment], required: ["code"]),
        "ValidateResult": object(["valid": bool, "reason": ["type": "string", "enum": RefusalReason.allCases.map(\.rawValue)],
                                  "coupon": ref("PublicCoupon"), "eligibleProductIds": array(string)], required: ["valid", "eligibleProductIds"]),
        "RedeemInput": object(["code": string, "productId": string, "platform": platform, "environment": environment], required: ["code", "platform"]),
        "PurchaseInput": object(["pricePaid": ref("Money"), "storeTransactionId": string], required: ["pricePaid", "storeTransactionId"]),
        "Redemption": object(["redemptionId": uuid, "code": string,
                              "status": ["type": "string", "enum": ["reserved", "granting", "completed", "failed", "released"]],
                              "platform": platform, "productId": string, "pricePaid": ref("Money"), "sandbox": bool, "reservedAt": time,
                              "completedAt": time, "failureReason": string,
                              "entitlement": object(["entitlementId": string, "expiresAt": time], required: ["entitlementId", "expiresAt"]),
                              "accountId": uuid, "appUserId": string],
                             required: ["redemptionId", "code", "status", "platform", "sandbox", "reservedAt"]),
        "RedemptionPage": page("Redemption"),
        "Entitlement": object(["entitlementId": string, "expiresAt": time, "sandbox": bool, "source": string],
                              required: ["entitlementId", "expiresAt", "sandbox", "source"]),
        "EntitlementList": object(["data": array(ref("Entitlement"))], required: ["data"]),
        "WebhookInput": object(["url": ["type": "string", "format": "uri"],
                                "events": array(["type": "string", "enum": ["coupon.redeemed", "redemption.failed"]])], required: ["url", "events"]),
        "Webhook": object(["id": uuid, "url": string, "events": array(string), "active": bool, "mode": mode, "createdAt": time],
                          required: ["id", "url", "events", "active", "mode", "createdAt"]),
        "CreatedWebhook": object(["id": uuid, "url": string, "events": array(string), "active": bool, "mode": mode, "createdAt": time, "secret": string],
                                 required: ["id", "url", "events", "mode", "secret"]),
        "WebhookPage": page("Webhook"),
        "Delivery": object(["id": uuid, "webhookId": string, "type": string, "status": ["type": "string", "enum": ["pending", "delivered", "failed"]],
                            "attempts": int, "lastStatusCode": int, "lastError": string,
                            "lastResponse": ["type": "string", "maxLength": 1024], "createdAt": time, "deliveredAt": time, "nextAttemptAt": time],
                           required: ["id", "webhookId", "type", "status", "attempts", "createdAt"]),
        "DeliveryPage": page("Delivery"),
    ]
}
