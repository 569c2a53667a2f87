import CouponsService
import Runtime

ServiceMain.run("coupons") { try ServiceRuntime.group(CouponsService.self, env: $0, defaultHTTPPort: 8082) }
