// swift-tools-version:6.0
// Redeem: four services (accounts, coupons, grants, gateway) sharing PostgreSQL and a ZeroMQ bus.
// Only the toolchain's own modules and system C libraries (see README "Dependencies").
import PackageDescription

/// Release builds let a module inline and specialise the code of the modules it imports (the
/// services call the generic bus, database and coalescing code on every request): 5–10 %
/// less CPU per request in the gateway and coupons (bench/HISTORY.md, session 4).
let optimized: [SwiftSetting] = [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))]

/// Services link with lld and packed relative relocations (DT_RELR, glibc 2.36+): the static
/// Swift runtime's 1.8 MB relocation table, which the loader reads whole at every start, shrinks
/// to 32 kB, and each process's resident memory by about 2 MB (bench/HISTORY.md, session 6).
let linked: [LinkerSetting] = [.unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"], .when(platforms: [.linux]))]

/// Release builds lay out together the functions a service runs (deploy/link-order/<service>.txt,
/// written by scripts/link-order): the kernel maps code 64 kB around each page touched, so
/// scattered they keep about 3 MB more of each executable resident (bench/README.md, "Memory").
func laidOut(_ service: String) -> [LinkerSetting] {
    [.unsafeFlags(["-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/deploy/link-order/\(service).txt",
                   "-Xlinker", "--no-warn-symbol-ordering"], .when(platforms: [.linux], configuration: .release))]
}

/// The layers under the services (`Sources/Shared/<Layer>`), bottom first. Each depends only on
/// layers before it, and only these import C (the system-library targets), so the compiler keeps
/// the direction:
/// - Core: the bus messages, error codes and refusal reasons, JSON and byte codecs, list cursors. No C.
/// - Telemetry: the JSON-lines logger and the Prometheus registry.
/// - Cryptography: hashes, random bytes, JWTs, signing keys, AES-GCM, argon2id (libcrypto, libargon2).
/// - Database: libpq connection and pool, migrations and SQL functions, list pages.
/// - Bus: ZeroMQ sockets, the bus client and server, PUB/SUB.
/// - HTTP: the libmicrohttpd server, router, JSON bodies.
/// - Outbound: HTTP and SMTP to the outside through libcurl, the only code that imports it.
/// - Runtime: configuration, services and their life cycle, background loops, coalescing. No database.
/// - Backend: what a back-end service is made of (accounts, coupons, grants): it owns the database pool.
let layers: [Target] = [
    .target(name: "Core", path: "Sources/Shared/Core", swiftSettings: optimized),
    .target(name: "Telemetry", dependencies: ["Core"], path: "Sources/Shared/Telemetry", swiftSettings: optimized),
    .target(name: "Cryptography", dependencies: ["Core", "CCrypto", "CArgon2"], path: "Sources/Shared/Cryptography", swiftSettings: optimized),
    .target(name: "Database", dependencies: ["Core", "Telemetry", "CLibPQ"], path: "Sources/Shared/Database",
            resources: [.embedInCode("SQL")], swiftSettings: optimized),
    .target(name: "Bus", dependencies: ["Core", "Telemetry", "CZeroMQ"], path: "Sources/Shared/Bus", swiftSettings: optimized),
    .target(name: "HTTP", dependencies: ["Core", "Telemetry", "CMicroHTTPD"], path: "Sources/Shared/HTTP", swiftSettings: optimized),
    .target(
        name: "Outbound", dependencies: ["Core", "Telemetry", "CCurl"], path: "Sources/Shared/Outbound",
        swiftSettings: optimized),
    .target(
        name: "Runtime", dependencies: ["Core", "Telemetry", "Cryptography", "Bus", "Outbound", "CMalloc"],
        path: "Sources/Shared/Runtime",
        swiftSettings: optimized),
    .target(name: "Backend", dependencies: ["Core", "Telemetry", "Database", "Bus", "HTTP", "Runtime"], path: "Sources/Shared/Backend",
            swiftSettings: optimized),
]

let allLayers: [Target.Dependency] = ["Core", "Telemetry", "Cryptography", "Database", "Bus", "HTTP", "Outbound", "Runtime", "Backend"]

/// What each service may import: RepositoryTests reads every service's imports and fails on one
/// not listed here. The gateway holds no database (it does not link libpq). Only accounts and grants
/// call out to the world themselves; every service links libcurl through Runtime, whose span
/// exporter (OTLP/HTTP) uses Outbound's client.
let serviceLayers: [String: [String]] = [
    "accounts": ["Core", "Telemetry", "Cryptography", "Database", "Bus", "Outbound", "Runtime", "Backend"],
    "coupons": ["Core", "Telemetry", "Cryptography", "Database", "Bus", "Runtime", "Backend"],
    "grants": ["Core", "Telemetry", "Cryptography", "Database", "Bus", "Outbound", "Runtime", "Backend"],
    "gateway": ["Core", "Telemetry", "Cryptography", "Bus", "HTTP", "Runtime"],
]

/// A service is a library target with its logic (testable without sockets) and a small executable.
/// Its SQL (`Migrations/`, `SQL/`) and web assets (`Assets/`) are files of their own, embedded in the
/// code at build time: nothing is looked up at run time.
func service(_ dir: String, library: String, embedded: [String] = []) -> [Target] {
    let layers = serviceLayers[dir]!.map { Target.Dependency(stringLiteral: $0) }
    return [
        .target(name: library, dependencies: layers, path: "Services/\(dir)/\(library)",
                resources: embedded.map { .embedInCode($0) }, swiftSettings: optimized),
        .executableTarget(name: dir, dependencies: [.target(name: library)] + layers, path: "Services/\(dir)/main", swiftSettings: optimized,
                          linkerSettings: linked + laidOut(dir)),
    ]
}

let package = Package(
    name: "Redeem",
    // iOS for RedeemKit, the client library apps link; macOS 15 for the services'
    // Synchronization.Mutex. RedeemKit's own package (Clients/RedeemKit) declares iOS 16 and macOS 13.
    platforms: [.macOS(.v15), .iOS(.v16)],
    products: [
        .executable(name: "accounts", targets: ["accounts"]),
        .executable(name: "coupons", targets: ["coupons"]),
        .executable(name: "grants", targets: ["grants"]),
        .executable(name: "gateway", targets: ["gateway"]),
        .executable(name: "bench-tokens", targets: ["bench-tokens"]),
        .executable(name: "bench-log-line", targets: ["bench-log-line"]),
        .executable(name: "bench-json-text", targets: ["bench-json-text"]),
        .executable(name: "redeem-keys", targets: ["redeem-keys"]),
        // The Swift client for apps (Foundation only: no layer, no C library in its graph).
        .library(name: "RedeemKit", targets: ["RedeemKit"]),
        // The operator command, built on RedeemKit's OperatorClient.
        .executable(name: "redeem", targets: ["redeem"]),
    ],
    targets: [
        // System libraries. No pkgConfig for libzmq: its .pc adds -isystem flags SwiftPM prohibits.
        .systemLibrary(name: "CMalloc", path: "Sources/Shared/CMalloc"),
        .systemLibrary(name: "CZeroMQ", path: "Sources/Shared/CZeroMQ", providers: [.apt(["libzmq3-dev"])]),
        .systemLibrary(name: "CLibPQ", path: "Sources/Shared/CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CCrypto", path: "Sources/Shared/CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", path: "Sources/Shared/CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CArgon2", path: "Sources/Shared/CArgon2", pkgConfig: "libargon2", providers: [.apt(["libargon2-dev"])]),
        // Webhook delivery (grants) and mail over SMTP (accounts); coupons and the gateway don't link
        // it. No pkgConfig: curl.h is on the default include path, and libcurl.pc's -I of the
        // multiarch system directory would put it before the compiler's own.
        .systemLibrary(name: "CCurl", path: "Sources/Shared/CCurl", providers: [.apt(["libcurl4-openssl-dev"])]),
    ]
    + layers
    + service("accounts", library: "AccountsService", embedded: ["Migrations", "SQL"])
    + service("coupons", library: "CouponsService", embedded: ["Migrations", "SQL"])
    + service("grants", library: "GrantsService", embedded: ["Migrations", "SQL"])
    + service("gateway", library: "GatewayService", embedded: ["Assets"])
    + [
        // Makes the bus's CURVE keys (deploy/run-stack, compose's .env).
        .executableTarget(name: "redeem-keys", dependencies: ["Core", "Bus"], path: "deploy/redeem-keys"),
        // Clients: RedeemKit depends on Foundation alone, so an iOS app can link it. Apps take it
        // from its own package (Clients/RedeemKit/Package.swift); these are the same sources.
        .target(name: "RedeemKit", path: "Clients/RedeemKit/Sources/RedeemKit"),
        .executableTarget(name: "redeem", dependencies: ["RedeemKit"], path: "Clients/redeem"),
        .testTarget(
            name: "RedeemKitTests", dependencies: ["RedeemKit"], path: "Clients/RedeemKit/Tests/RedeemKitTests"),
        // Signs access tokens for the benchmark's many simulated users (bench/run), with accounts' key.
        .executableTarget(name: "bench-tokens", dependencies: ["Core", "Cryptography", "Database", "Runtime", "AccountsService"], path: "bench/tokens"),
        // Times the gateway's access-log line at info against JSONEncoder's (bench/log-line).
        .executableTarget(
            name: "bench-log-line", dependencies: ["BenchSupport", "Core", "Telemetry", "HTTP"],
            path: "bench/logline",
            swiftSettings: optimized),
        // Times the hot messages' JSON against Foundation's JSONEncoder (bench/json-text).
        .executableTarget(
            name: "bench-json-text", dependencies: ["BenchSupport", "Core"], path: "bench/jsontext",
            swiftSettings: optimized),
        // What the timing executables share: their arguments and their clock.
        .target(name: "BenchSupport", dependencies: ["Core"], path: "bench/support", swiftSettings: optimized),
        // Real PostgreSQL clusters, the stack runner, HTTP clients and fakes for the tests.
        // CCrypto: the test Apple CA issues its certificates with libcrypto (Apple/TestAppleCA.swift).
        .target(name: "TestSupport", dependencies: allLayers + ["CCrypto"], path: "Tests/TestSupport"),
        // The compose suite's fakes (RevenueCat, a webhook receiver), run in a container on the
        // stack's network (ComposeStackTests, deploy/compose/test.yml).
        .executableTarget(
            name: "compose-fakes", dependencies: ["TestSupport", "HTTP", "Telemetry"], path: "Tests/ComposeFakes"),
        .testTarget(name: "LayerTests", dependencies: allLayers + ["TestSupport"]),
        .testTarget(name: "IntegrationTests", dependencies: allLayers + ["TestSupport", "RedeemKit", "AccountsService"]),
        // The services' logic without sockets: rules, policies, documents (and RedeemKit's contract
        // with the gateway's document).
        .testTarget(
            name: "ServiceTests",
            dependencies: allLayers + [
                "TestSupport", "GatewayService", "CouponsService", "GrantsService", "AccountsService", "RedeemKit",
            ]),
    ]
)
