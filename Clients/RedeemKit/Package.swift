// swift-tools-version:6.0
// RedeemKit: the Swift client an app links to redeem coupons at a Redeem server. A package of its
// own, so an app depends on it without resolving the server. Foundation only (FoundationNetworking
// on Linux); StoreKit, UIKit, Keychain and CloudKit code is behind `#if canImport(…)`.
// The server's root Package.swift builds the same sources for its tests and the `redeem` command.
import PackageDescription

let package = Package(
    name: "RedeemKit",
    platforms: [.iOS(.v16), .macOS(.v13)],
    products: [
        .library(name: "RedeemKit", targets: ["RedeemKit"]),
    ],
    targets: [
        .target(name: "RedeemKit"),
        // Over a stubbed URLProtocol: no server, runs on Linux and on a Mac alike.
        .testTarget(name: "RedeemKitTests", dependencies: ["RedeemKit"]),
    ]
)
