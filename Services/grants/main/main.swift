import GrantsService
import Runtime

ServiceMain.run("grants") { try ServiceRuntime.group(GrantsService.self, env: $0, defaultHTTPPort: 8083) }
