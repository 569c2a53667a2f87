import AccountsService
import Runtime

ServiceRuntime.main(AccountsService.self, defaultHTTPPort: 8081)
