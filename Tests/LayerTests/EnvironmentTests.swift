import Testing
@testable import Core
@testable import Runtime

@Suite struct EnvironmentTests {
    @Test func defaultsApplyWhenUnsetOrEmpty() throws {
        let env = Environment(["REDEEM_X": ""])
        #expect(try env.int("REDEEM_X", default: 7) == 7)
        #expect(try env.port("REDEEM_Y", default: 8080) == 8080)
        #expect(try env.flag("REDEEM_Z", default: true))
    }

    @Test func malformedValuesFailNamingTheVariable() {
        let env = Environment(["REDEEM_HTTP_PORT": "80x", "REDEEM_RATE_LIMITS": "maybe", "REDEEM_POOL": "0"])
        #expect(throws: ConfigError.self) { try env.port("REDEEM_HTTP_PORT", default: 1) }
        #expect(throws: ConfigError.self) { try env.flag("REDEEM_RATE_LIMITS", default: true) }
        #expect(throws: ConfigError.self) { try env.int("REDEEM_POOL", default: 8, range: 1...10) }
        do {
            _ = try env.port("REDEEM_HTTP_PORT", default: 1)
        } catch let e as ConfigError {
            #expect(e.variable == "REDEEM_HTTP_PORT")
            #expect(e.description.contains("80x"))
        } catch { Issue.record("unexpected \(error)") }
    }

    @Test func portOutOfRangeIsRefused() {
        #expect(throws: ConfigError.self) { try Environment(["P": "70000"]).port("P", default: 1) }
    }

    @Test func endpointsAreCheckedAndSplit() throws {
        let env = Environment(["A": "tcp://127.0.0.1:1, tcp://127.0.0.1:2", "B": "http://x"])
        #expect(try env.endpoints("A", default: []) == ["tcp://127.0.0.1:1", "tcp://127.0.0.1:2"])
        #expect(throws: ConfigError.self) { try env.endpoints("B", default: []) }
    }

    @Test func databaseURLIsRequiredAndNeverEchoed() {
        #expect(throws: ConfigError.self) { try Environment([:]).databaseURL() }
        do {
            _ = try Environment(["REDEEM_DATABASE_URL": "mysql://u:secretpw@h/db"]).databaseURL()
            Issue.record("accepted a non-postgres URL")
        } catch {
            #expect(!String(describing: error).contains("secretpw"))
        }
    }

    @Test func serviceConfigReadsBusAddresses() throws {
        let env = Environment(["REDEEM_DATABASE_URL": "postgresql://u@h/db", "REDEEM_COUPONS_BUS": "tcp://127.0.0.1:9001,tcp://127.0.0.1:9002"])
        let c = try ServiceConfig(name: "coupons", env: env, defaultHTTPPort: 8082)
        #expect(c.busBind == ["tcp://127.0.0.1:9001"])
        #expect(c.httpPort == 8082)
        let bound = try ServiceConfig(name: "coupons", env: Environment(env.values.merging(["REDEEM_COUPONS_BUS_BIND": "tcp://127.0.0.1:9002"]) { $1 }), defaultHTTPPort: 8082)
        #expect(bound.busBind == ["tcp://127.0.0.1:9002"])
        #expect(throws: ConfigError.self) {
            try ServiceConfig(name: "coupons", env: Environment(env.values.merging(["REDEEM_LOG_LEVEL": "loud"]) { $1 }), defaultHTTPPort: 1)
        }
    }
}
