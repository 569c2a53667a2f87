import Foundation
import RedeemKit

// `redeem`: the operator command, on RedeemKit's OperatorClient. Exit 0 on success, 1 when the
// server refused (with its message), 2 for a mistake on the command line, 3 when the server could
// not be reached (refused connection, timeout), 4 when it failed on its side (a 5xx).

let usage = """
usage: redeem [--url URL] [--api-key KEY] [--json] <command>
       redeem --version

Settings: REDEEM_URL (the gateway, e.g. http://127.0.0.1:8080) and REDEEM_API_KEY (sk_live_… or
sk_test_…), or --url and --api-key. --json prints JSON for scripts instead of tables.

  coupons create --code CODE --kind freePeriod|percentOff|amountOff --duration "1 month"
                 [--percent-off N] [--amount-off "4.99 EUR"] [--period-count N] [--entitlement ID]
                 [--products a,b] [--platforms ios,android,web] [--starts-at TIME] [--expires-at TIME]
                 [--max-redemptions N] [--new-customers-only] [--allow-in-app] [--inactive] [--dry-run]
  coupons list [--active true|false] [--limit N] [--cursor C] [--all]
  coupons get CODE
  coupons update CODE [--active true|false] [--max-redemptions N|none] [--expires-at TIME|none]
  coupons deactivate CODE
  redemptions list CODE [--limit N] [--cursor C] [--all]
  redemptions get ID
  redemptions export CODE --csv [--output FILE]
  codes create CODE --count N [--prefix P] [--output FILE]   unique single-use codes; the CSV once
  codes download CODE [--output FILE]   the CSV of codes made but not yet downloaded (once)
  keys create --name NAME --role readonly|support|admin [--mode live|test]
  keys list [--limit N] [--cursor C] [--all]
  keys revoke ID
  webhooks create --url URL --events coupon.redeemed,redemption.failed
  webhooks list [--limit N] [--cursor C] [--all]
  webhooks delete ID
  webhooks test ID
  webhooks deliveries ID [--limit N] [--cursor C]
  webhooks retry ID DELIVERY
  plans create --product-id ID --name NAME [--app-store-subscription ID]
  plans list [--limit N] [--cursor C] [--all]
  plans get PRODUCT_ID

"""

/// What a script can tell apart: the network (3: try again later, or check the address) from the
/// server's own failure (4) and from a refusal (1: the request must change).
func exitStatus(of error: RedeemError) -> Int32 {
    switch error.kind {
    case .transport, .timedOut: 3
    case .server(let status) where status >= 500: 4
    default: 1
    }
}

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(code)
}

do {
    var args = try Arguments(Array(CommandLine.arguments.dropFirst()))
    if args.flag("version") {
        print("redeem \(RedeemKitVersion.version)")
        exit(0)
    }
    if args.flag("help") || args.words.isEmpty {
        print(usage, terminator: "")
        exit(args.words.isEmpty && !args.flag("help") ? 2 : 0)
    }
    let environment = ProcessInfo.processInfo.environment
    // The gateway option shares its name with `webhooks create --url`; there it is the endpoint.
    let isWebhookCreate = args.words.prefix(2) == ["webhooks", "create"]
    let urlText = (isWebhookCreate ? nil : args.option("url")) ?? environment["REDEEM_URL"] ?? args.option("gateway")
    guard let urlText, let url = URL(string: urlText), url.scheme != nil else {
        throw UsageError("set REDEEM_URL or --url to the gateway's address")
    }
    guard let key = args.option("api-key") ?? environment["REDEEM_API_KEY"], !key.isEmpty else {
        throw UsageError("set REDEEM_API_KEY or --api-key to an API key")
    }
    let command = Command(client: OperatorClient(baseURL: url, apiKey: key), output: Output(json: args.flag("json")))
    try await command.run(&args)
} catch let e as UsageError {
    fail("redeem: \(e.description)\n\n\(usage)", code: 2)
} catch let e as RedeemError {
    let field = e.field.map { ", field \($0)" } ?? ""
    let request = e.requestId.map { ", request \($0)" } ?? ""
    fail("redeem: \(e.message) (\(e.code)\(field)\(request))", code: exitStatus(of: e))
} catch {
    fail("redeem: \(error)", code: 1)
}
