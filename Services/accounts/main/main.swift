import AccountsService
import Runtime

ServiceMain.run("accounts") { try ServiceRuntime.group(AccountsService.self, env: $0, defaultHTTPPort: 8081) }
