import Foundation
import Testing
@testable import AccountsService
@testable import Core
@testable import Runtime

/// The record-name proof's settings and its decision on CloudKit's answer (docs/security.md, "A
/// record name is claimed only with proof"), without a network.
@Suite struct RecordNameProofRulesTests {
    static let container = ["REDEEM_CLOUDKIT_CONTAINER": "iCloud.com.example.app", "REDEEM_CLOUDKIT_API_TOKEN": "abc+/="]

    @Test func settingsChooseTheProofTrustOrRefusal() throws {
        func mode(_ env: [String: String]) throws -> String {
            switch try RecordNameProof(env: Environment(env)) {
            case .cloudKit: "cloudKit"
            case .trustClient: "trustClient"
            case .notConfigured: "notConfigured"
            }
        }
        #expect(try mode([:]) == "notConfigured")
        #expect(try mode(["REDEEM_CLOUDKIT_TRUST_CLIENT": "0"]) == "notConfigured")
        #expect(try mode(["REDEEM_CLOUDKIT_TRUST_CLIENT": "1"]) == "trustClient")
        #expect(try mode(Self.container) == "cloudKit")
        #expect(try mode(Self.container.merging(["REDEEM_CLOUDKIT_TRUST_CLIENT": "1"]) { $1 }) == "cloudKit", "the proof wins over trust")
        for bad: [String: String] in [
            ["REDEEM_CLOUDKIT_CONTAINER": "iCloud.com.example.app"],
            ["REDEEM_CLOUDKIT_API_TOKEN": "abc"],
            ["REDEEM_CLOUDKIT_CONTAINER": "com.example.app", "REDEEM_CLOUDKIT_API_TOKEN": "abc"],
            Self.container.merging(["REDEEM_CLOUDKIT_ENVIRONMENT": "staging"]) { $1 },
            Self.container.merging(["REDEEM_CLOUDKIT_URL": "ftp://x"]) { $1 },
            ["REDEEM_CLOUDKIT_TRUST_CLIENT": "maybe"],
        ] {
            #expect(throws: ConfigError.self, "\(bad)") { try RecordNameProof(env: Environment(bad)) }
        }
    }

    @Test func theURLIsUsersCurrentWithBothTokensEncoded() throws {
        let settings = try #require(try CloudKitSettings(env: Environment(Self.container.merging(["REDEEM_CLOUDKIT_URL": "http://127.0.0.1:9/"]) { $1 })))
        #expect(settings.environment == "production")
        let url = try #require(settings.currentUserURL(webAuthToken: "a+b/c=&d"))
        #expect(url.absoluteString
            == "http://127.0.0.1:9/database/1/iCloud.com.example.app/production/public/users/current?ckAPIToken=abc%2B%2F%3D&ckWebAuthToken=a%2Bb%2Fc%3D%26d")
    }

    @Test func onlyTheClaimedUsersAnswerProvesIt() {
        let table: [(CloudKitClient.Answer, CloudKitClient.Verdict)] = [
            (.user("_abc"), .proven),
            (.user("_ABC"), .unproven),
            (.user("_other"), .unproven),
            (.refused(status: 421, code: "AUTHENTICATION_REQUIRED"), .unproven),
            (.refused(status: 200, code: "noUserRecordName"), .unproven),
            (.misconfigured(status: 401, code: "AUTHENTICATION_FAILED"), .unavailable),
            (.unavailable("CloudKit answered 503"), .unavailable),
        ]
        for (answer, verdict) in table {
            #expect(CloudKitClient.verdict(answer, claimed: "_abc") == verdict, "\(answer)")
        }
    }
}
