import Backend
import CouponsService
import Runtime

ServiceRuntime.main(CouponsService.self, defaultHTTPPort: 8082)
