import Backend
import GrantsService
import Runtime

ServiceRuntime.main(GrantsService.self, defaultHTTPPort: 8083)
