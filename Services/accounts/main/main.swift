import AccountsService
import Backend
import Runtime

ServiceRuntime.main(AccountsService.self, defaultHTTPPort: 8081)
