import Shared
import CouponsService

ServiceRuntime.main(CouponsService.self, defaultHTTPPort: 8082)
