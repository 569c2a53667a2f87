import Shared
import GrantsService

ServiceRuntime.main(GrantsService.self, defaultHTTPPort: 8083)
