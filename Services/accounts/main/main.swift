import Shared
import AccountsService

ServiceRuntime.main(AccountsService.self, defaultHTTPPort: 8081)
