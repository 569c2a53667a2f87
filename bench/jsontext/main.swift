import BenchSupport
import Core
import Foundation

// The hot messages' JSON, timed (bench/json-text): each encoded ROUNDS rounds of COUNT times by the
// encoder the services use (`JSONEncoder.wire()`, `JSONEncoder.bus`: `TextJSONEncoder`), then by
// Foundation's `JSONEncoder` with the same options (the reference). CPU per encode is the process's
// CPU time over the encodes; the best round of each is printed, and their ratio.

let bench = BenchRounds(name: "bench-json-text", defaultCount: 100_000)

/// The best round, in ns of CPU per encode.
@MainActor func best(_ encode: () throws -> Data) throws -> Double {
    var bytes = 0
    defer { if bytes == 0 { print("nothing encoded") } }
    return try bench.best { _ in bytes &+= try encode().count }
}

func foundation(_ dates: JSONText.Dates, escapeSlashes: Bool) -> JSONEncoder {
    let e = JSONEncoder()
    JSONText.configure(e, dates: dates, escapeSlashes: escapeSlashes)
    return e
}

let at = Date(timeIntervalSince1970: 1_733_400_000.125)
let account = UUID(uuidString: "0f8c1d2e-5b6a-4c3d-9e8f-7a6b5c4d3e2f")!
// Coupons' answer to a reservation of a free period (the HTTP body the gateway sends).
let view = RedemptionView(
    redemptionId: UUID(uuidString: "019aef3c-5b6a-7c3d-9e8f-7a6b5c4d3e2f")!, code: "BENCH-FREE", status: .granting,
    platform: .web, productId: nil, pricePaid: nil, sandbox: false, reservedAt: at, completedAt: nil,
    failureReason: nil, entitlement: nil, accountId: account, appUserId: "u-0f8c1d2e5b6a")
// The grant command of that reservation, as its outbox row holds it.
let command = Envelope(
    id: "4bf92f35-77b3-4da6-a3ce-929d0e0e4736", type: GrantCommand.type, requestId: nil,
    traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    body: GrantCommand(
        redemptionId: view.redemptionId, accountId: account, appUserId: "u-0f8c1d2e5b6a", entitlementId: "pro",
        duration: .init(unit: "month", count: 1), sandbox: false,
        coupon: PublicCoupon(
            code: "BENCH-FREE", kind: .freePeriod, percentOff: nil, amountOff: nil,
            duration: .init(unit: "month", count: 1), periodCount: nil, entitlementId: "pro"),
        platform: .web, productId: nil, reservedAt: at, mode: .live, app: nil))

let wire = JSONEncoder.wire(), bus = JSONEncoder.bus
let foundationWire = foundation(.text, escapeSlashes: false)
let foundationBus = foundation(.milliseconds, escapeSlashes: true)
guard try wire.encode(view) == foundationWire.encode(view), try bus.encode(command) == foundationBus.encode(command)
else {
    print("the two encoders disagree")
    exit(1)
}
for (name, ours, reference) in [
    ("a redemption (wire)", { try wire.encode(view) }, { try foundationWire.encode(view) }),
    ("a grant command (bus)", { try bus.encode(command) }, { try foundationBus.encode(command) }),
] as [(String, () throws -> Data, () throws -> Data)] {
    let a = try best(ours), b = try best(reference)
    print(
        "\(name): \(Int(a.rounded())) ns of CPU per encode; Foundation's JSONEncoder (the reference): "
            + "\(Int(b.rounded())) ns; ratio " + String(format: "%.2f", a / b))
}
