import Core
import Foundation
import RedeemKit
import TestSupport
import XCTest

/// One version for the whole release: every executable and the CLI print it with `--version`, the
/// gateway names it in `Redeem-Version` (GatewayEdgeTests), `redeem_build_info` carries it
/// (TracingTests), and CHANGELOG.md's latest release is it.
final class VersionTests: XCTestCase {
    /// Every executable product of Package.swift, read from the manifest so that a new one without
    /// `--version` fails here: each prints "<name> <release>".
    func testEveryExecutableAndTheCLIPrintTheRelease() throws {
        let manifest = try String(contentsOf: Project.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let names = manifest.matches(of: #/\.executable\(name: "([^"]+)"/#).map { String($0.output.1) }
        XCTAssertTrue(
            Set(["accounts", "coupons", "grants", "gateway", "redeem", "redeem-keys", "bench-tokens"])
                .isSubset(of: Set(names)), "\(names)")
        for name in names {
            let out = try Subprocess.run(
                Project.binDirectory.appendingPathComponent(name).path, ["--version"], environment: [:])
            XCTAssertEqual(out, "\(name) \(Build.version)")
        }
        XCTAssertEqual(RedeemKitVersion.version, Build.version, "RedeemKit ships with the services")
    }

    /// Keep a Changelog's shape: the first release heading is this build's version.
    func testTheChangelogsLatestReleaseIsThisBuild() throws {
        let text = try String(contentsOf: Project.root.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let releases = text.split(separator: "\n").filter { $0.hasPrefix("## [") && !$0.hasPrefix("## [Unreleased]") }
        let latest = try XCTUnwrap(releases.first)
        XCTAssertTrue(latest.hasPrefix("## [\(Build.version)]"), String(latest))
    }
}
