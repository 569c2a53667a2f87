import Core
import Foundation
import RedeemKit
import TestSupport
import XCTest

/// One version for the whole release: every executable and the CLI print it with `--version`, the
/// gateway names it in `Redeem-Version` (GatewayEdgeTests), `redeem_build_info` carries it
/// (TracingTests), and CHANGELOG.md's latest release is it.
final class VersionTests: XCTestCase {
    func testEveryExecutableAndTheCLIPrintTheRelease() throws {
        for name in ["accounts", "coupons", "grants", "gateway"] {
            let out = try Subprocess.run(
                Project.binDirectory.appendingPathComponent(name).path, ["--version"], environment: [:])
            XCTAssertEqual(out, "\(name) \(Build.version)")
        }
        let cli = try Subprocess.run(
            Project.binDirectory.appendingPathComponent("redeem").path, ["--version"], environment: [:])
        XCTAssertEqual(cli, "redeem \(Build.version)")
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
