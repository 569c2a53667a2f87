// The compose suite's fakes (ComposeStackTests), run in a container on the stack's network: the
// services call them by the name `fakes`, as they would call RevenueCat and a webhook endpoint, and
// the test, which talks only to 127.0.0.1, reads what they received on a control port that compose
// publishes there.
//
//   compose-fakes [CONTROL_PORT REVENUECAT_PORT WEBHOOK_PORT]   (default 9000 9001 9002)
//
// Control port: GET /healthz; GET /revenuecat/calls (every promotional grant asked, in order);
// GET /webhooks/deliveries (every request the webhook receiver took, its body in base64).
import Foundation
import HTTP
import Telemetry
import TestSupport

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let ports = arguments.count == 3 ? arguments : [9000, 9001, 9002]

/// One call RevenueCat's fake took.
struct CallRecord: Encodable {
    let appUserId: String
    let entitlementId: String
    let endTimeMs: Int64?
    let authorization: String?
    let status: Int
}

/// One request the webhook receiver took.
struct DeliveryRecord: Encodable {
    let id: String
    let timestamp: String
    let signature: String
    let body: String
    let method: String
    let path: String
}

let revenueCat = try FakeRevenueCat(host: "0.0.0.0", port: ports[1])
let receiver = try WebhookReceiver(host: "0.0.0.0", port: ports[2])

var router = Router()
router.get("/healthz") { _ in HTTPResponse(status: 200) }
router.get("/revenuecat/calls") { _ in
    .json(
        200,
        revenueCat.received.map {
            CallRecord(
                appUserId: $0.appUserId, entitlementId: $0.entitlementId, endTimeMs: $0.endTimeMs,
                authorization: $0.authorization, status: $0.status)
        })
}
router.get("/webhooks/deliveries") { _ in
    .json(
        200,
        receiver.received.map {
            DeliveryRecord(
                id: $0.id, timestamp: $0.timestamp, signature: $0.signature, body: $0.body.base64EncodedString(),
                method: $0.method, path: $0.path)
        })
}
let routes = router
var options = HTTPServer.Options()
options.host = "0.0.0.0"
options.port = ports[0]
options.threads = 2
let control = HTTPServer(options: options, logger: Logger(service: "compose-fakes"), accessLog: false) {
    await routes.handle($0)
}
try control.start()
FileHandle.standardError.write(
    Data("compose-fakes: control \(ports[0]), revenuecat \(ports[1]), webhooks \(ports[2])\n".utf8))
dispatchMain()
