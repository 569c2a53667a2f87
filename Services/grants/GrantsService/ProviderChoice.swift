import Core
import Foundation

/// Which entitlement provider records an app's grants, by name (`Provider.swift`; a grant keeps
/// its provider's name). The one place that choice is made.
struct ProviderChoice: Sendable {
    /// The default app's providers, from the environment: `REDEEM_ENTITLEMENT_PROVIDER`'s live one
    /// (`revenuecat` or `local`) and the sandbox one (`revenuecat-sandbox` or `local-sandbox`).
    let defaultLive: String
    let defaultSandbox: String

    /// The providers of `app`'s live and sandbox grants: the default app keeps the environment's;
    /// another app's grants are kept in Redeem's own ledger, as its RevenueCat project is not
    /// connected (docs/apps.md).
    func names(app: UUID) -> (live: String, sandbox: String) {
        guard app == DefaultApp.id else { return (live: "local", sandbox: "local-sandbox") }
        return (live: defaultLive, sandbox: defaultSandbox)
    }

    /// The provider of a grant command's grant.
    func name(for command: GrantCommand) -> String {
        let names = names(app: DefaultApp.of(command.app))
        return command.sandbox ? names.sandbox : names.live
    }
}
