import GatewayService
import Runtime

ServiceMain.run("gateway") { try Gateway(config: try GatewayConfig(env: $0)).group() }
