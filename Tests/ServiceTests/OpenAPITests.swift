import Foundation
import TestSupport
import Testing

@testable import Core
@testable import GatewayService
@testable import HTTP
@testable import Runtime

/// The router and `/openapi.json` come from one route table (`Gateway.routes`): every route the
/// router answers is described, every described route is answered, and the access a route
/// describes is the one its handler gets.
@Suite struct OpenAPITests {
    struct Described {
        let method: String
        let path: String
        let operation: [String: Any]
    }

    func document() throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: OpenAPIDocument.json) as? [String: Any])
    }

    func described() throws -> [Described] {
        let paths = try #require(try document()["paths"] as? [String: [String: [String: Any]]])
        return paths.flatMap { path, methods in
            methods.map { Described(method: $0.key.uppercased(), path: path, operation: $0.value) }
        }
    }

    /// `webhooks` describes every event the code defines, as delivered: `type` is the event's own
    /// name, `timestamp` a date-time, `data` the schema of its type, which the components hold.
    @Test func everyWebhookEventHasItsSchema() throws {
        let doc = try document()
        let hooks = try #require(doc["webhooks"] as? [String: [String: [String: Any]]])
        #expect(Set(hooks.keys) == Set(WebhookEventType.allCases.map(\.rawValue)))
        let schemas = try #require((doc["components"] as? [String: Any])?["schemas"] as? [String: Any])
        for event in WebhookEventType.allCases {
            let post = try #require(hooks[event.rawValue]?["post"], "\(event.rawValue)")
            let body = try #require(
                ((post["requestBody"] as? [String: Any])?["content"] as? [String: [String: Any]])?["application/json"]?["schema"]
                    as? [String: Any])
            let properties = try #require(body["properties"] as? [String: [String: Any]], "\(body)")
            #expect(properties["type"]?["enum"] as? [String] == [event.rawValue])
            #expect(properties["timestamp"]?["format"] as? String == "date-time")
            let data = try #require(properties["data"]?["$ref"] as? String, "\(event.rawValue)")
            let name = String(data.split(separator: "/").last ?? "")
            #expect(schemas[name] != nil, "\(name) is not in components")
        }
        let released = try #require(schemas["RedemptionEventData"] as? [String: Any])
        let fields = try #require(released["properties"] as? [String: Any])
        #expect(fields["redemptionId"] != nil && fields["coupon"] != nil, "the redemption's fields and its coupon")
    }

    /// A route given to the router any other way than through the table (so without a
    /// description) fails here, and so would a description without its route.
    @Test func theRouterAnswersExactlyTheDescribedRoutes() throws {
        let gateway = try Gateway(config: GatewayConfig(env: Environment(["REDEEM_BUS_SECURITY": "plain"])))
        defer { gateway.stop() }
        let answered = Set(gateway.router().routes.map { "\($0.method) \($0.template)" })
        let described = Set(try described().map { "\($0.method) \($0.path)" })
        #expect(
            answered.subtracting(described).isEmpty,
            "answered but not described: \(answered.subtracting(described).sorted())")
        #expect(
            described.subtracting(answered).isEmpty,
            "described but not answered: \(described.subtracting(answered).sorted())")
        #expect(answered.count == Gateway.routes.count)
    }

    /// `/readyz` and `/metrics` are on the operations port, and on the public one only when asked.
    @Test func readinessAndMetricsAreOnTheOperationsPortUnlessAskedForOnThePublicOne() throws {
        func answered(_ env: [String: String]) throws -> (public: Set<String>, operations: Set<String>) {
            let gateway = try Gateway(
                config: GatewayConfig(env: Environment(env.merging(["REDEEM_BUS_SECURITY": "plain"]) { $1 })))
            defer { gateway.stop() }
            return (Set(gateway.router().routes.map(\.template)), Set(gateway.internalRouter().routes.map(\.template)))
        }
        let plain = try answered([:])
        #expect(
            plain.public.contains("/healthz") && !plain.public.contains("/readyz") && !plain.public.contains("/metrics")
        )
        #expect(plain.operations == ["/healthz", "/readyz", "/backends", "/metrics"])
        #expect(!plain.public.contains("/backends"))
        let asked = try answered(["REDEEM_OPS_ON_PUBLIC_PORT": "1"])
        #expect(asked.public.isSuperset(of: ["/healthz", "/readyz", "/backends", "/metrics"]))
        #expect(
            !(try described().contains { ["/readyz", "/backends", "/metrics"].contains($0.path) }),
            "never in the public description")
    }

    /// The gateway's `/readyz` is its own state: not ready while it starts, ready once it serves, not
    /// ready again once it drains. It asks no back-end (none is running here, and none is needed).
    @Test func gatewayReadinessIsItsOwnState() async throws {
        let gateway = try Gateway(config: GatewayConfig(env: Environment(["REDEEM_BUS_SECURITY": "plain"])))
        let router = gateway.internalRouter()
        func ready() async -> (Int, String) {
            let r = await router.handle(HTTPRequest(method: "GET", path: "/readyz"))
            return (r.status, String(decoding: r.body, as: UTF8.self))
        }
        let starting = await ready()
        #expect(starting.0 == 503 && starting.1.contains(#""starting""#), "\(starting)")
        gateway.lifecycle.withLock { $0 = .serving }
        let serving = await ready()
        #expect(serving.0 == 200 && serving.1.contains(#""ready""#) && !serving.1.contains("coupons"), "\(serving)")
        gateway.stop()  // the stop the service group makes, once
        let draining = await ready()
        #expect(draining.0 == 503 && draining.1.contains(#""draining""#), "\(draining)")
    }

    @Test func everyOperationHasASummaryItsParametersAndAnAnswer() throws {
        let doc = try document()
        #expect(doc["openapi"] as? String == "3.1.0")
        for d in try described() {
            let name = "\(d.method) \(d.path)"
            #expect(!(d.operation["summary"] as? String ?? "").isEmpty, "\(name) has no summary")
            let responses = d.operation["responses"] as? [String: Any] ?? [:]
            // A redirect is the success of the routes that send a browser on (Sign in with Apple).
            #expect(
                responses.keys.contains { $0.hasPrefix("2") || $0 == "302" || $0 == "303" },
                "\(name) has no success answer")
            let parameters = d.operation["parameters"] as? [[String: Any]] ?? []
            for p in OpenAPIDocument.pathParameters(d.path) {
                #expect(
                    parameters.contains { $0["name"] as? String == p && $0["in"] as? String == "path" },
                    "\(name) lacks {\(p)}")
            }
            let schemes = (d.operation["security"] as? [[String: Any]] ?? []).flatMap(\.keys)
            if schemes.contains("bearer") {
                #expect(responses.keys.contains("401") && responses.keys.contains("403"), "\(name) needs a credential")
            } else if !schemes.isEmpty {
                // The dashboard's cookie: a session, or none (401); no role to lack.
                #expect(schemes == ["dashboardSession"] && responses.keys.contains("401"), "\(name): \(schemes)")
            }
        }
        // Every schema reference resolves, and every named schema is used.
        let text = String(decoding: OpenAPIDocument.json, as: UTF8.self)
        let schemas = ((doc["components"] as? [String: Any])?["schemas"] as? [String: Any]) ?? [:]
        let refs = Set(
            text.components(separatedBy: "#/components/schemas/").dropFirst().map { String($0.prefix { $0 != "\"" }) })
        #expect(refs == Set(schemas.keys))
    }

    /// For generated clients: each operation has a readable `operationId` of its own (written in
    /// `OperationNaming.ids`, which names no route that is gone) and one tag the document lists.
    @Test func everyOperationHasItsOwnReadableIdAndATag() throws {
        let routes = Set(Gateway.routes.map { "\($0.method.rawValue) \($0.path)" })
        let named = Set(OperationNaming.ids.keys)
        #expect(
            routes.subtracting(named).isEmpty, "routes without an operationId: \(routes.subtracting(named).sorted())")
        #expect(named.subtracting(routes).isEmpty, "ids of no route: \(named.subtracting(routes).sorted())")
        let ids = try described().compactMap { $0.operation["operationId"] as? String }
        #expect(ids.count == routes.count)
        #expect(Set(ids).count == ids.count, "operationIds repeat")
        #expect(ids.allSatisfy { $0.wholeMatch(of: #/[a-z][A-Za-z0-9]+/#) != nil }, "camelCase ids: \(ids.sorted())")
        let tags = Set(((try document()["tags"] as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String })
        for d in try described() {
            let given = d.operation["tags"] as? [String] ?? []
            #expect(given.count == 1 && tags.contains(given[0]), "\(d.method) \(d.path): \(given)")
        }
        #expect(OperationNaming.tag("/v1/coupons/{code}/codes.csv") == "Unique codes")
        #expect(OperationNaming.tag("/v1/coupons/{code}/redemptions") == "Coupons")
        #expect(OperationNaming.tag("/v1/me/totp/confirm") == "Members")
        #expect(OperationNaming.tag("/v1/me") == "Accounts")
    }

    /// Every JSON body, sent or answered, has an example; an error answer lists the codes of
    /// its status (`x-error-codes`) and its example carries one of them.
    @Test func everyBodyHasAnExampleAndEveryErrorItsCodes() throws {
        for d in try described() {
            let name = "\(d.method) \(d.path)"
            if let body = (d.operation["requestBody"] as? [String: Any])?["content"] as? [String: [String: Any]],
                let json = body["application/json"]
            {
                #expect(json["example"] != nil || json["examples"] != nil, "\(name): no example body")
            }
            for (status, answer) in d.operation["responses"] as? [String: [String: Any]] ?? [:] {
                // A document served as it is (`/openapi.json` itself) is text, not a body of a type.
                guard let json = (answer["content"] as? [String: [String: Any]])?["application/json"],
                    (json["schema"] as? [String: Any])?["type"] as? String != "string"
                else { continue }
                #expect(json["example"] != nil || json["examples"] != nil, "\(name) \(status): no example")
                guard let code = Int(status), code >= 400 else { continue }
                let codes = answer["x-error-codes"] as? [String] ?? []
                #expect(!codes.isEmpty, "\(name) \(status): no error codes")
                let example = ((json["example"] as? [String: Any])?["error"] as? [String: Any])?["code"] as? String
                #expect(example.map(codes.contains) == true, "\(name) \(status): example \(example ?? "none")")
            }
        }
        #expect(ErrorCodes.answered(status: 401).contains("invalidToken"))
        #expect(ErrorCodes.answered(status: 422).contains("exhausted"))
    }

    /// Whether a POST ignores `Idempotency-Key` (docs/api.md, "Idempotency"): the stores' signed
    /// notifications and Apple's form post.
    static func ignoresIdempotencyKey(_ path: String) -> Bool {
        path.hasPrefix("/v1/stores/") || path == "/v1/sessions/apple/callback"
    }

    /// The headers: an API operation takes `X-Request-Id`, one for keys and members also
    /// `Redeem-Mode` and `Redeem-App`, one for end users `Redeem-App`, every POST (with or without a credential) `Idempotency-Key`; every answer
    /// names `X-Request-Id` and `Redeem-Version`, a 429 or 503 and a POST's 409 `Retry-After`, and
    /// an answer a POST keeps for its key `Idempotent-Replayed`.

    @Test func theHeadersTakenAndAnsweredAreDescribed() throws {
        for d in try described() {
            let name = "\(d.method) \(d.path)"
            let refs = (d.operation["parameters"] as? [[String: Any]] ?? []).compactMap { $0["$ref"] as? String }
            if d.path.hasPrefix("/v1/") {
                #expect(refs.contains("#/components/parameters/RequestId"), "\(name)")
            }
            let forKeys = (d.operation["description"] as? String ?? "").contains("API key")
            let forUsers = (d.operation["description"] as? String ?? "").contains("signed-in user")
            #expect(
                refs.contains("#/components/parameters/RedeemMode") == (forKeys && d.path.hasPrefix("/v1/")), "\(name)")
            // An end user's app names its app as a member does (docs/apps.md).
            let namesApp = (forKeys || forUsers) && d.path.hasPrefix("/v1/")
            #expect(refs.contains("#/components/parameters/RedeemApp") == namesApp, "\(name)")
            // Every POST takes an Idempotency-Key, but those whose senders sign them (the stores)
            // and Apple's form post; nothing else does.
            let keyed = d.method == "POST" && !Self.ignoresIdempotencyKey(d.path)
            #expect(refs.contains("#/components/parameters/IdempotencyKey") == keyed, "\(name)")
            for (status, answer) in d.operation["responses"] as? [String: [String: Any]] ?? [:] {
                let headers = Set((answer["headers"] as? [String: Any] ?? [:]).keys)
                #expect(headers.isSuperset(of: ["X-Request-Id", "Redeem-Version"]), "\(name) \(status)")
                // 409 idempotencyKeyInUse is sent with Retry-After: 1.
                let waits = status == "429" || status == "503" || (keyed && status == "409")
                #expect(headers.contains("Retry-After") == waits, "\(name) \(status)")
                // An answer kept for the key may be given again, marked Idempotent-Replayed.
                let kept = keyed && (Int(status) ?? 500) < 500 && !["401", "403", "429"].contains(status)
                #expect(headers.contains("Idempotent-Replayed") == kept, "\(name) \(status)")
            }
            if keyed {
                let conflict = (d.operation["responses"] as? [String: [String: Any]])?["409"]
                #expect(
                    (conflict?["x-error-codes"] as? [String])?.contains("idempotencyKeyInUse") == true, "\(name)")
            }
        }
        let components = try #require(try document()["components"] as? [String: Any])
        let parameters = try #require(components["parameters"] as? [String: [String: Any]])
        #expect(parameters["RedeemMode"]?["name"] as? String == "Redeem-Mode")
        #expect(parameters["RedeemApp"]?["name"] as? String == "Redeem-App")
        #expect(parameters["RequestId"]?["in"] as? String == "header")
        #expect(parameters["IdempotencyKey"]?["name"] as? String == "Idempotency-Key")
        let headers = try #require(components["headers"] as? [String: [String: Any]])
        #expect(Set(headers.keys).isSuperset(of: ["Retry-After", "Idempotent-Replayed"]))
    }

    /// The body types read are the body types described: each route's request schema is the
    /// one its handler's `Incoming<Body>` reads.
    @Test func aRequestBodyIsDescribedByTheTypeItsHandlerReads() throws {
        let paths = try #require(try document()["paths"] as? [String: [String: [String: Any]]])
        let catalog = SchemaCatalog()
        for route in Gateway.routes {
            let operation = try #require(paths[route.path]?[route.method.rawValue.lowercased()])
            let described =
                ((operation["requestBody"] as? [String: Any])?["content"] as? [String: [String: Any]])?[
                    route.bodyMediaType]?["schema"] as? [String: Any]
            guard let body = route.body else {
                #expect(described == nil, "\(route.path) describes a body it does not read")
                continue
            }
            let read = try catalog.schema(of: body)
            guard case .reference(let name) = read.shape else {
                Issue.record("\(body) has no schema name")
                continue
            }
            #expect(described?["$ref"] as? String == "#/components/schemas/\(name)")
        }
    }

    @Test func aHandlerSeesOnlyTheQueryParametersItsRouteDescribes() async throws {
        let gateway = try Gateway(config: GatewayConfig(env: Environment(["REDEEM_BUS_SECURITY": "plain"])))
        defer { gateway.stop() }
        let route = APIRoute.route(.get, "/echo", "Echo", query: QueryParameter.page, answers: [200: .empty]) { _ in
            { request in .json(200, request.query) }
        }
        let answer = try await route.handler(gateway)(
            HTTPRequest(method: "GET", path: "/echo", query: ["limit": "5", "cursor": "c", "wait": "9"]))
        #expect(try JSONDecoder().decode([String: String].self, from: answer.body) == ["limit": "5", "cursor": "c"])
    }

    @Test func aRouteForKeysNeverRunsItsHandlerWithoutOne() async throws {
        let gateway = try Gateway(config: GatewayConfig(env: Environment(["REDEEM_BUS_SECURITY": "plain"])))
        defer { gateway.stop() }
        struct Reached: Error {}
        let route = APIRoute.route(.get, "/secret", "Secret", access: .key(.admin), answers: [200: .empty]) { _ in
            { _, _ in throw Reached() }
        }
        await #expect(throws: ServiceError.self) {
            try await route.handler(gateway)(HTTPRequest(method: "GET", path: "/secret"))
        }
        let bad = HTTPRequest(method: "GET", path: "/secret", headers: ["authorization": "Basic x"])
        do {
            _ = try await route.handler(gateway)(bad)
            Issue.record("a bad credential reached the handler")
        } catch let e as ServiceError {
            #expect(e.code == .invalidToken)
        }
    }

    /// docs/api.md's table lists each route once, with who may call it.
    @Test func theAPIDocListsExactlyTheRoutesAndWhoMayCallThem() throws {
        let text = try String(contentsOf: Project.root.appendingPathComponent("docs/api.md"), encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let header = try #require(lines.firstIndex { $0.hasPrefix("| group | method and path | who |") })
        var listed: [String: String] = [:]
        for line in lines[(header + 2)...].prefix(while: { $0.hasPrefix("|") }) {
            let columns = line.split(separator: "|", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            try #require(columns.count >= 4, "\(line)")
            for match in columns[2].matches(of: #/`(GET|POST|PATCH|DELETE|PUT) (/[^`?\s]*)/#) {
                let route = "\(match.1) \(match.2)"
                #expect(listed[route] == nil, "\(route) listed twice")
                listed[route] = columns[3]
            }
        }
        let routes = Dictionary(
            uniqueKeysWithValues: Gateway.routes.map { ("\($0.method.rawValue) \($0.path)", $0.access) })
        #expect(
            Set(listed.keys) == Set(routes.keys),
            "listed only: \(Set(listed.keys).subtracting(routes.keys).sorted()), missing: \(Set(routes.keys).subtracting(listed.keys).sorted())"
        )
        for (route, who) in listed {
            guard let access = routes[route] else { continue }
            let word =
                switch access {
                case .anyone: "anyone"
                case .user: "user"
                case .userOrKey: "the owning user"
                case .key(let role): role.rawValue
                }
            #expect(who.hasPrefix(word), "\(route): docs say \(who), the route is for \(word)")
        }
    }

    /// The page says what the server says: refusal sentences come from `RefusalReason`, and the
    /// script keeps no sentences of its own for error codes.
    @Test func thePageScriptHoldsTheServersRefusalSentencesAndNoCopyOfItsOwn() throws {
        let script = RedeemPage.script
        #expect(!script.contains("/*REFUSALS*/"))
        let sentences = try JSONDecoder().decode([String: String].self, from: Data(RedeemPage.refusalSentences.utf8))
        #expect(
            sentences == Dictionary(uniqueKeysWithValues: RefusalReason.allCases.map { ($0.rawValue, $0.sentence) }))
        #expect(script.contains("var refusals = \(RedeemPage.refusalSentences);"))
        for code in ErrorCode.allCases.map(\.rawValue) + RefusalReason.allCases.map(\.rawValue) {
            #expect(!script.contains("\(code): \""), "the script has its own sentence for \(code)")
        }
    }

    /// The JSON answers the apps read carry samples (`ResponseExamples.swift`), and a sample reads
    /// back as its type: what the clients' contract tests decode is what the gateway sends.
    @Test func theAnswersTheAppsReadCarryExamplesThatReadBackAsTheirTypes() throws {
        let appOperations = [
            "POST /v1/accounts", "POST /v1/sessions", "POST /v1/sessions/refresh", "POST /v1/sessions/exchange",
            "POST /v1/sessions/apple", "GET /v1/me", "POST /v1/coupons/validate", "POST /v1/redemptions",
            "GET /v1/redemptions/{id}", "GET /v1/me/redemptions", "GET /v1/me/entitlements",
            "GET /v1/customers/{appUserId}", "GET /v1/customers"
        ]
        let routes = Dictionary(uniqueKeysWithValues: Gateway.routes.map { ("\($0.method.rawValue) \($0.path)", $0) })
        for name in appOperations {
            let route = try #require(routes[name], "\(name) is not a route")
            let described = try #require(try described().first { "\($0.method) \($0.path)" == name })
            let responses = try #require(described.operation["responses"] as? [String: [String: Any]])
            for (status, answer) in route.answers {
                guard case .json(let type) = answer else { continue }
                let content = responses[String(status)]?["content"] as? [String: [String: Any]]
                let media = try #require(content?["application/json"])
                let samples: [Any] =
                    if let one = media["example"] { [one] } else {
                        ((media["examples"] as? [String: [String: Any]]) ?? [:]).values.compactMap { $0["value"] }
                    }
                #expect(!samples.isEmpty, "\(name) \(status) has no example")
                for sample in samples {
                    let data = try JSONSerialization.data(withJSONObject: sample)
                    #expect(throws: Never.self, "\(name) \(status)") {
                        _ = try JSONDecoder.wire().decode(type, from: data)
                    }
                }
            }
        }
        let validate = try #require(try described().first { $0.method == "POST" && $0.path == "/v1/coupons/validate" })
        let ok = (validate.operation["responses"] as? [String: [String: Any]])?["200"]
        let media = (ok?["content"] as? [String: [String: Any]])?["application/json"]
        let examples = media?["examples"] as? [String: [String: Any]]
        #expect(Set(examples?.keys.map { $0 } ?? []) == ["valid", "refused", "webOnly", "appStore", "googlePlay"])
        #expect((examples?["refused"]?["value"] as? [String: Any])?["reason"] as? String == "exhausted")
        // The refusal an iOS app must handle itself: the redeem page's URL comes with it.
        let webOnly = examples?["webOnly"]?["value"] as? [String: Any]
        #expect(
            webOnly?["reason"] as? String == "webOnly"
                && (webOnly?["redeemUrl"] as? String)?.contains("/redeem?code=") == true)
    }
}
