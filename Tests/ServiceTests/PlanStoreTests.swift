import Foundation
import TestSupport
import Testing
@testable import CouponsService
@testable import Core
@testable import Database

/// The plans catalog (docs/stores.md): field rules with a 422 naming the field, one plan per
/// product id in each mode (409 `productInUse`), 404 for an unknown one, pages, and changes.
@Suite struct PlanStoreTests {
    @Test func eachFieldRuleNamesItsField() throws {
        func field(_ input: PlanInput) -> String? {
            do { _ = try PlanRules.definition(input); return nil } catch let e as ServiceError { return e.field } catch { return "?" }
        }
        let ok = PlanInput(productId: "pro.monthly", name: "Pro", appStore: .init(subscriptionId: "6447000001"),
                           playStore: .init(productId: "pro_monthly", basePlanIds: ["monthly", "monthly-intro"]))
        #expect(field(ok) == nil)
        var i = ok
        for bad in [nil, "", "pro monthly", "pro/monthly", String(repeating: "p", count: 201)] {
            i = ok; i.productId = bad
            #expect(field(i) == "productId", "\(String(describing: bad))")
        }
        i = ok; i.name = "  "
        #expect(field(i) == "name")
        i = ok; i.name = nil
        #expect(field(i) == "name")
        i = ok; i.appStore = .init(subscriptionId: "com.example.pro")
        #expect(field(i) == "appStore.subscriptionId")
        i = ok; i.appStore = .init(subscriptionId: nil)
        #expect(field(i) == "appStore.subscriptionId")
        i = ok; i.playStore = .init(productId: "Pro.Monthly", basePlanIds: ["monthly"])
        #expect(field(i) == "playStore.productId")
        for bases in [[], ["Monthly"], ["monthly", "monthly"], ["-monthly"]] as [[String]] {
            i = ok; i.playStore = .init(productId: "pro_monthly", basePlanIds: bases)
            #expect(field(i) == "playStore.basePlanIds", "\(bases)")
        }
        // Neither store is required: a plan may be sold on the web only.
        #expect(field(PlanInput(productId: "pro.web", name: "Web")) == nil)
        #expect(try PlanRules.definition(PlanInput(productId: "pro.web", name: "  Web  ")).name == "Web")
    }

    @Test func plansAreMadeReadListedAndChangedInTheirOwnMode() async throws {
        let world = try await StoreWorld.make()
        defer { world.close() }
        let pool = world.pool
        let made = try await pool.transaction {
            try PlanStore.create($0, PlanInput(productId: "pro.monthly", name: "Pro monthly", appStore: .init(subscriptionId: "6447000001"),
                                               playStore: .init(productId: "pro_monthly", basePlanIds: ["monthly"])), mode: .live, app: DefaultApp.id)
        }
        #expect(made.productId == "pro.monthly" && made.appStore?.subscriptionId == "6447000001" && made.playStore?.basePlanIds == ["monthly"])
        #expect(made.mode == .live)
        let dup = await #expect(throws: ServiceError.self) {
            try await pool.transaction {
                try PlanStore.create(
                    $0, PlanInput(productId: "pro.monthly", name: "Again"),
                    mode: .live, app: DefaultApp.id)
            }
        }
        #expect(dup?.code == .productInUse && dup?.field == "productId")
        // The test mode has its own catalog.
        let test = try await pool.transaction { try PlanStore.create($0, PlanInput(productId: "pro.monthly",
            name: "Test"), mode: .test, app: DefaultApp.id) }
        #expect(test.mode == .test && test.appStore == nil)
        #expect(
            try await pool.withConnection {
                try PlanStore.get(
                    $0, productId: "pro.monthly", mode: .test,
                    app: DefaultApp.id)
            }.name == "Test")
        let missing = await #expect(throws: ServiceError.self) {
            try await pool.withConnection {
                try PlanStore.get(
                    $0,
                    productId: "pro.weekly", mode: .live, app: DefaultApp.id)
            }
        }
        #expect(missing?.code == .notFound)
        // Pages, newest first.
        for n in 1...3 { try await world.plan("pro.extra\(n)") }
        let first = try await pool.withConnection { try PlanStore.list($0, Plans.List(limit: 2, cursor: nil,
            mode: .live, app: DefaultApp.id)) }
        #expect(first.data.map(\.productId) == ["pro.extra3", "pro.extra2"] && first.nextCursor != nil)
        let second = try await pool.withConnection { try PlanStore.list($0, Plans.List(limit: 2,
            cursor: first.nextCursor, mode: .live, app: DefaultApp.id)) }
        #expect(second.data.map(\.productId) == ["pro.extra1", "pro.monthly"] && second.nextCursor == nil)
        // A change: a new name, no Play side; the product id stays.
        let changed = try await pool.transaction {
            try PlanStore.patch($0, Plans.Patch(productId: "pro.monthly", mode: .live, app: DefaultApp.id,
                name: "Pro, monthly", removing: ["playStore"]))
        }
        #expect(changed.name == "Pro, monthly" && changed.playStore == nil && changed.appStore == made.appStore && changed.updatedAt >= made.updatedAt)
        let bad = await #expect(throws: ServiceError.self) {
            try await pool.transaction {
                try PlanStore.patch(
                    $0,
                    Plans.Patch(
                        productId: "pro.monthly", mode: .live,
                        app: DefaultApp.id, removing: ["name"]))
            }
        }
        #expect(bad?.field == "name")
        // The JSON shape: every field, a store the plan is not in as null.
        let json = try #require(try JSONSerialization.jsonObject(with: JSONEncoder.wire().encode(changed)) as? [String: Any])
        #expect(
            json.keys.sorted() == [
                "appStore", "createdAt", "mode", "name", "playStore", "productId", "stripe", "updatedAt",
            ])
        #expect(json["playStore"] is NSNull)
        #expect(json["stripe"] is NSNull)
    }
}
