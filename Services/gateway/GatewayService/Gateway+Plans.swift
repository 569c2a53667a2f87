import Core
import Foundation
import HTTP

/// The plans catalog (docs/stores.md): the products discount coupons can cover, and what each is
/// called in each store. Admin keys only; each key reaches its own mode's plans.
extension Gateway {
    /// A change to a plan: fields left out stay; `appStore` or `playStore` sent as `null` is
    /// removed; `name` can't be null, and the product id never changes.
    struct PlanPatchBody: APIBody {
        var name: String?
        var appStore: PlanInput.AppStore?
        var playStore: PlanInput.PlayStore?
        var stripe: PlanInput.Stripe?
        var removing: [String] = []
        private enum Keys: String, CodingKey { case name, appStore, playStore, stripe }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            try c.refuseNull(.name, as: String.self)
            name = try c.decodeIfPresent(String.self, forKey: .name)
            appStore = try c.decodeIfPresent(PlanInput.AppStore.self, forKey: .appStore)
            playStore = try c.decodeIfPresent(PlanInput.PlayStore.self, forKey: .playStore)
            stripe = try c.decodeIfPresent(PlanInput.Stripe.self, forKey: .stripe)
            removing = try c.sentNull([.appStore, .playStore, .stripe])
        }

        static let schemaName: String? = "PlanPatch"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "appStore": [.note("null removes the plan from the App Store (409 invalidState while a coupon has a live offer on it)")],
            "playStore": [.note("null removes the plan from Google Play")],
            "stripe": [.note("null removes the plan from Stripe")],
        ]
    }

    static let planRoutes: [APIRoute] = [
        .route(
            .post, "/v1/plans", "Register a plan coupons can cover", access: .appKey(.admin),
            answers: [201: .json(PlanView.self)], errors: [409, 422], handle: Gateway.createPlan),
        .route(
            .get, "/v1/plans", "List plans, newest first", access: .appKey(.admin), query: QueryParameter.page,
            answers: [200: .json(Page<PlanView>.self)], errors: [422], handle: Gateway.listPlans),
        .route(
            .get, "/v1/plans/{productId}", "One plan", access: .appKey(.admin),
            answers: [200: .json(PlanView.self)], errors: [404], handle: Gateway.getPlan),
        .route(
            .patch, "/v1/plans/{productId}", "Change a plan", access: .appKey(.admin),
            answers: [200: .json(PlanView.self)], errors: [404, 409, 422], handle: Gateway.changePlan)
    ]

    func createPlan(_ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<PlanInput>) async throws -> HTTPResponse {
        .json(201, try await coupons.request(Plans.Create(input: try body.read(), mode: key.mode,
            app: key.app).by(key.actor)))
    }

    func listPlans(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        .json(
            200,
            try await coupons.request(
                Plans.List(
                    limit: try Query.limit(req), cursor: req.query["cursor"],
                    mode: key.mode, app: key.app)))
    }

    func getPlan(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        .json(200, try await coupons.request(Plans.Get(productId: req.pathParameters["productId"] ?? "",
            mode: key.mode, app: key.app)))
    }

    func changePlan(_ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<PlanPatchBody>) async throws -> HTTPResponse {
        let b = try body.read()
        let patch = Plans.Patch(
            productId: req.pathParameters["productId"] ?? "", mode: key.mode, app: key.app, name: b.name,
                appStore: b.appStore,
            playStore: b.playStore, removing: b.removing.isEmpty ? nil : b.removing, stripe: b.stripe)
        return .json(200, try await coupons.request(patch.by(key.actor)))
    }
}
