import Foundation
import GatewayService
import Runtime
import Telemetry

Lifecycle.blockTerminationSignals()  // before any thread exists
let gateway: Gateway
do {
    gateway = try Gateway(config: try GatewayConfig(env: Environment()))
} catch {
    Logger(service: "gateway").error("bad configuration", ["error": String(describing: error)])
    exit(2)
}
gateway.main()
