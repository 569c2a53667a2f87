import Foundation

/// One option of a command: `--name VALUE`, or a flag when `value` is nil.
struct OptionSpec: Sendable {
    let name: String
    let value: String?
    let help: String
    var required = false

    var usage: String {
        let text = "--\(name)" + (value.map { " \($0)" } ?? "")
        return required ? text : "[\(text)]"
    }
}

/// One command: the words that name it, what it takes, and what runs it. The dispatcher finds
/// commands here, the usage errors quote them and `redeem help` prints them: one table, so help
/// can't drift from what runs. An option a command reads must be declared here (reading an
/// undeclared one stops the command), and an option given that no entry declares is refused.
struct CommandSpec: Sendable {
    typealias Handler = @Sendable (Command, inout Arguments) async throws -> Void

    /// `["coupons", "create"]`, `["members", "invites", "list"]`, `["login"]`.
    let path: [String]
    let summary: String
    /// Positional words after the path, in order: `(NAME, what it is)`.
    var arguments: [(String, String)] = []
    var options: [OptionSpec] = []
    /// More than the summary, printed under it by `redeem help`.
    var details: String? = nil
    let example: String
    let run: Handler

    var name: String { path.joined(separator: " ") }

    var usage: String {
        (["redeem", name] + arguments.map(\.0) + options.map(\.usage)).joined(separator: " ")
    }

    func declares(_ option: String) -> Bool { options.contains { $0.name == option } }
}

/// Options every command takes, read before the command runs.
let globalOptions: [OptionSpec] = [
    OptionSpec(
        name: "url", value: "URL",
        help: "the gateway, such as http://127.0.0.1:8080 (default: REDEEM_URL, then the profile's)"),
    OptionSpec(
        name: "api-key", value: "KEY",
        help: "an API key, sk_live_… or sk_test_… (default: REDEEM_API_KEY, then the profile's)"),
    OptionSpec(
        name: "profile", value: "NAME", help: "the saved profile to use (default: REDEEM_PROFILE, then default)"),
    OptionSpec(name: "json", value: nil, help: "print JSON for scripts instead of tables"),
    OptionSpec(name: "help", value: nil, help: "print this command's help (also -h); calls no server")
]

let pageOptions: [OptionSpec] = [
    OptionSpec(name: "limit", value: "N", help: "items per page (1 to 100)"),
    OptionSpec(name: "cursor", value: "C", help: "the page after this cursor (printed as `more: --cursor C`)"),
    OptionSpec(name: "all", value: nil, help: "every page, following the cursors")
]

let roleValues = "readonly|support|admin"

extension CommandSpec {
    /// Every command, in the order `redeem help` lists them.
    static let all: [CommandSpec] = coupons + codesAndRedemptions + keysAndWebhooks + plans + members + audit + profiles

    static let coupons: [CommandSpec] = [
        CommandSpec(
            path: ["coupons", "create"], summary: "Create a coupon (or only check it, with --dry-run)",
            options: [
                OptionSpec(
                    name: "code", value: "CODE", help: "the code people type (stored in capitals)", required: true),
                OptionSpec(
                    name: "kind", value: "freePeriod|percentOff|amountOff", help: "what it gives", required: true),
                OptionSpec(
                    name: "duration", value: "\"1 month\"", help: "a count and a unit: day, week, month, year",
                    required: true),
                OptionSpec(name: "percent-off", value: "N", help: "percentOff: the percentage taken off"),
                OptionSpec(
                    name: "amount-off", value: "\"4.99 EUR\"", help: "amountOff: the amount and currency taken off"),
                OptionSpec(name: "period-count", value: "N", help: "percentOff, amountOff: for how many periods"),
                OptionSpec(name: "entitlement", value: "ID", help: "the entitlement a free period grants"),
                OptionSpec(name: "products", value: "a,b", help: "only these product ids (default: any)"),
                OptionSpec(name: "platforms", value: "ios,android,web", help: "only on these platforms"),
                OptionSpec(
                    name: "starts-at", value: "TIME", help: "valid from (ISO 8601, such as 2027-01-31T00:00:00Z)"),
                OptionSpec(name: "expires-at", value: "TIME", help: "valid until (ISO 8601)"),
                OptionSpec(name: "max-redemptions", value: "N", help: "at most N redemptions (default: no cap)"),
                OptionSpec(name: "new-customers-only", value: nil, help: "only accounts that never paid"),
                OptionSpec(name: "allow-in-app", value: nil, help: "a free period may be redeemed in the iOS app"),
                OptionSpec(name: "inactive", value: nil, help: "create it switched off"),
                OptionSpec(name: "dry-run", value: nil, help: "check it and show the stores' limits; save nothing")
            ],
            example:
                "redeem coupons create --code SPRING-25 --kind freePeriod --duration \"1 month\" --max-redemptions 500",
            run: { try await $0.createCoupon(&$1) }),
        CommandSpec(
            path: ["coupons", "list"], summary: "List coupons, newest first",
            options: [OptionSpec(name: "active", value: "true|false", help: "only active, or only inactive, coupons")]
                + pageOptions,
            example: "redeem coupons list --active true --all", run: { try await $0.listCoupons(&$1) }),
        CommandSpec(
            path: ["coupons", "get"], summary: "Show one coupon with its counts",
            arguments: [("CODE", "the coupon's code")], example: "redeem coupons get SPRING-25",
            run: { try await $0.getCoupon(&$1) }),
        CommandSpec(
            path: ["coupons", "update"], summary: "Change a coupon's switch, cap or end",
            arguments: [("CODE", "the coupon's code")],
            options: [
                OptionSpec(name: "active", value: "true|false", help: "switch it on or off"),
                OptionSpec(name: "max-redemptions", value: "N|none", help: "a new cap, or none to remove it"),
                OptionSpec(name: "expires-at", value: "TIME|none", help: "a new end (ISO 8601), or none to remove it")
            ],
            example: "redeem coupons update SPRING-25 --max-redemptions none --expires-at 2027-06-01T00:00:00Z",
            run: { try await $0.updateCoupon(&$1) }),
        CommandSpec(
            path: ["coupons", "deactivate"], summary: "Switch a coupon off for good (its redemptions are kept)",
            arguments: [("CODE", "the coupon's code")], example: "redeem coupons deactivate SPRING-25",
            run: { try await $0.deactivateCoupon(&$1) })
    ]

    static let codesAndRedemptions: [CommandSpec] = [
        CommandSpec(
            path: ["redemptions", "list"], summary: "List a coupon's redemptions, newest first",
            arguments: [("CODE", "the coupon's code")], options: pageOptions,
            example: "redeem redemptions list SPRING-25 --all", run: { try await $0.listRedemptions(&$1) }),
        CommandSpec(
            path: ["redemptions", "get"], summary: "Show one redemption",
            arguments: [("ID", "the redemption's id")],
            example: "redeem redemptions get 6F9619FF-8B86-D011-B42D-00C04FC964FF",
            run: { try await $0.getRedemption(&$1) }),
        CommandSpec(
            path: ["redemptions", "export"], summary: "Write every redemption of a coupon as CSV, oldest first",
            arguments: [("CODE", "the coupon's code")],
            options: [
                OptionSpec(name: "csv", value: nil, help: "CSV (the only export format)", required: true),
                OptionSpec(name: "output", value: "FILE", help: "write to FILE (default: standard output)")
            ],
            example: "redeem redemptions export SPRING-25 --csv --output spring.csv",
            run: { try await $0.exportRedemptions(&$1) }),
        CommandSpec(
            path: ["codes", "create"], summary: "Make unique single-use codes of a coupon and take their CSV (once)",
            arguments: [("CODE", "the coupon's code")],
            options: [
                OptionSpec(name: "count", value: "N", help: "how many codes (up to 100000)", required: true),
                OptionSpec(name: "prefix", value: "P", help: "each code starts with P-"),
                OptionSpec(name: "output", value: "FILE", help: "write the CSV to FILE, readable by you only")
            ],
            example: "redeem codes create SPRING-25 --count 1000 --prefix spring --output codes.csv",
            run: { try await $0.createCodes(&$1) }),
        CommandSpec(
            path: ["codes", "download"], summary: "Take the CSV of codes made but not yet downloaded (once)",
            arguments: [("CODE", "the coupon's code")],
            options: [OptionSpec(name: "output", value: "FILE", help: "write the CSV to FILE, readable by you only")],
            example: "redeem codes download SPRING-25 --output codes.csv", run: { try await $0.downloadCodes(&$1) })
    ]

    static let keysAndWebhooks: [CommandSpec] = [
        CommandSpec(
            path: ["keys", "create"], summary: "Make an API key (its secret is shown once)",
            options: [
                OptionSpec(name: "name", value: "NAME", help: "what it is for", required: true),
                OptionSpec(name: "role", value: roleValues, help: "what it may do", required: true),
                OptionSpec(name: "mode", value: "live|test", help: "its world (default: the calling key's)")
            ],
            example: "redeem keys create --name ci --role readonly --mode test", run: { try await $0.createKey(&$1) }),
        CommandSpec(
            path: ["keys", "list"], summary: "List API keys (never their secrets)", options: pageOptions,
            example: "redeem keys list --all", run: { try await $0.listKeys(&$1) }),
        CommandSpec(
            path: ["keys", "revoke"], summary: "Revoke an API key", arguments: [("ID", "the key's id")],
            example: "redeem keys revoke 6F9619FF-8B86-D011-B42D-00C04FC964FF", run: { try await $0.revokeKey(&$1) }),
        CommandSpec(
            path: ["webhooks", "create"], summary: "Add a webhook endpoint (its signing secret is shown once)",
            options: [
                OptionSpec(
                    name: "url", value: "URL", help: "where events are posted (here --url is the endpoint)",
                    required: true),
                OptionSpec(
                    name: "events", value: "a,b",
                    help: "the events it takes (default: coupon.redeemed,redemption.failed)")
            ],
            details: "The gateway comes from REDEEM_URL or the profile, since --url names the endpoint.",
            example:
                "redeem webhooks create --url https://example.com/hooks --events coupon.redeemed,redemption.failed",
            run: { try await $0.createWebhook(&$1) }),
        CommandSpec(
            path: ["webhooks", "list"], summary: "List webhook endpoints", options: pageOptions,
            example: "redeem webhooks list", run: { try await $0.listWebhooks(&$1) }),
        CommandSpec(
            path: ["webhooks", "delete"], summary: "Remove a webhook endpoint",
            arguments: [("ID", "the endpoint's id")],
            example: "redeem webhooks delete 6F9619FF-8B86-D011-B42D-00C04FC964FF",
            run: { try await $0.deleteWebhook(&$1) }),
        CommandSpec(
            path: ["webhooks", "test"], summary: "Send a webhook.test event to an endpoint",
            arguments: [("ID", "the endpoint's id")],
            example: "redeem webhooks test 6F9619FF-8B86-D011-B42D-00C04FC964FF", run: { try await $0.testWebhook(&$1) }
        ),
        CommandSpec(
            path: ["webhooks", "deliveries"], summary: "List an endpoint's deliveries, newest first",
            arguments: [("ID", "the endpoint's id")], options: pageOptions,
            example: "redeem webhooks deliveries 6F9619FF-8B86-D011-B42D-00C04FC964FF",
            run: { try await $0.listDeliveries(&$1) }),
        CommandSpec(
            path: ["webhooks", "retry"], summary: "Send a delivery again (the same event and webhook-id)",
            arguments: [("ID", "the endpoint's id"), ("DELIVERY", "the delivery's id")],
            example: "redeem webhooks retry 6F9619FF-8B86-D011-B42D-00C04FC964FF 0E984725-C51C-4BF4-9960-E1C80E27ABA0",
            run: { try await $0.retryDelivery(&$1) })
    ]

    static let plans: [CommandSpec] = [
        CommandSpec(
            path: ["plans", "create"], summary: "Register a plan coupons can cover",
            options: [
                OptionSpec(name: "product-id", value: "ID", help: "the product id coupons name", required: true),
                OptionSpec(name: "name", value: "NAME", help: "its name", required: true),
                OptionSpec(name: "app-store-subscription", value: "ID", help: "its App Store Connect subscription id")
            ],
            example:
                "redeem plans create --product-id pro.monthly --name \"Pro monthly\" --app-store-subscription 6444000000",
            run: { try await $0.createPlan(&$1) }),
        CommandSpec(
            path: ["plans", "list"], summary: "List plans", options: pageOptions, example: "redeem plans list",
            run: { try await $0.listPlans(&$1) }),
        CommandSpec(
            path: ["plans", "get"], summary: "Show one plan", arguments: [("PRODUCT_ID", "the plan's product id")],
            example: "redeem plans get pro.monthly", run: { try await $0.getPlan(&$1) })
    ]

    static let members: [CommandSpec] = [
        CommandSpec(
            path: ["members", "list"], summary: "List members (admin; a live key)", options: pageOptions,
            example: "redeem members list --all", run: { try await $0.listMembers(&$1) }),
        CommandSpec(
            path: ["members", "invite"], summary: "Invite a member: the one-time invite URL is shown once",
            options: [
                OptionSpec(name: "email", value: "EMAIL", help: "whom to invite", required: true),
                OptionSpec(name: "role", value: roleValues, help: "what they may do", required: true)
            ],
            details: "Pass the invite URL on (the server mails it too when it sends mail); it sets their password.",
            example: "redeem members invite --email ana@example.com --role support",
            run: { try await $0.inviteMember(&$1) }),
        CommandSpec(
            path: ["members", "update"], summary: "Change a member's role (their sessions end)",
            arguments: [("ID", "the member's id")],
            options: [OptionSpec(name: "role", value: roleValues, help: "the new role", required: true)],
            example: "redeem members update 6F9619FF-8B86-D011-B42D-00C04FC964FF --role readonly",
            run: { try await $0.updateMember(&$1) }),
        CommandSpec(
            path: ["members", "remove"], summary: "Remove a member (the account stays; its sessions end)",
            arguments: [("ID", "the member's id")],
            example: "redeem members remove 6F9619FF-8B86-D011-B42D-00C04FC964FF",
            run: { try await $0.removeMember(&$1) }),
        CommandSpec(
            path: ["members", "invites", "list"], summary: "List pending invitations (never their tokens)",
            options: pageOptions, example: "redeem members invites list", run: { try await $0.listInvites(&$1) }),
        CommandSpec(
            path: ["members", "invites", "revoke"], summary: "Revoke a pending invitation: its URL makes no member",
            arguments: [("ID", "the invitation's id")],
            example: "redeem members invites revoke 6F9619FF-8B86-D011-B42D-00C04FC964FF",
            run: { try await $0.revokeInvite(&$1) })
    ]

    static let audit: [CommandSpec] = [
        CommandSpec(
            path: ["audit", "list"], summary: "List operator changes in the key's mode, newest first (admin)",
            options: [
                OptionSpec(
                    name: "object-type", value: "TYPE", help: "only changes to this kind of object, such as coupon"),
                OptionSpec(
                    name: "object-id", value: "ID", help: "only changes to this object (a code, a product id, an id)"),
                OptionSpec(name: "actor", value: "ID", help: "only changes made by this API key or member"),
                OptionSpec(name: "action", value: "ACTION", help: "only this action, such as coupon.create")
            ] + pageOptions,
            details: "--json prints each change with the object before and after it.",
            example: "redeem audit list --object-type coupon --object-id SPRING-25 --all",
            run: { try await $0.listAudit(&$1) })
    ]

    static let profiles: [CommandSpec] = [
        CommandSpec(
            path: ["login"], summary: "Save an API key in a profile, once the server accepts it",
            options: [
                OptionSpec(
                    name: "api-url", value: "URL", help: "the gateway (default: --url, REDEEM_URL, the profile's)"),
                OptionSpec(name: "key-stdin", value: nil, help: "read the key from standard input without a prompt")
            ],
            details: """
                Reads the key from the terminal without echo, or one line from standard input when piped
                (or with --key-stdin). It is checked with one read of the coupons, then written with the
                gateway's address to the credentials file (mode 0600): $REDEEM_CONFIG_DIR/credentials, or
                $XDG_CONFIG_HOME/redeem/credentials, or ~/.config/redeem/credentials. --profile names the
                profile (default: REDEEM_PROFILE, then default). A key given by --api-key or REDEEM_API_KEY
                wins over the profile's.
                """,
            example: "printf '%s\\n' \"$KEY\" | redeem login --profile staging --api-url https://redeem.example.com",
            run: { try await $0.login(&$1) }),
        CommandSpec(
            path: ["logout"], summary: "Remove a profile's saved key (--profile, default: default)",
            example: "redeem logout --profile staging", run: { try await $0.logout(&$1) }),
        CommandSpec(
            path: ["profiles", "list"], summary: "List saved profiles: the gateway and the key's prefix and last four",
            example: "redeem profiles list", run: { try await $0.listProfiles(&$1) })
    ]
}

/// What `redeem help` prints, all from the table.
enum Help {
    /// The options that take no value: every flag of the table.
    static var flags: Set<String> {
        Set((globalOptions + CommandSpec.all.flatMap(\.options)).filter { $0.value == nil }.map(\.name) + ["version"])
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + "  " : text.padding(toLength: width, withPad: " ", startingAt: 0)
    }

    static func optionLines(_ options: [OptionSpec]) -> String {
        let names = options.map { "--\($0.name)" + ($0.value.map { " \($0)" } ?? "") }
        let width = min(34, (names.map(\.count).max() ?? 0) + 2)
        return zip(names, options).map { name, o in "  " + pad(name, width) + o.help + (o.required ? " (required)" : "")
        }
        .joined(separator: "\n")
    }

    /// `redeem help`: every command with its summary, and the settings.
    static var overview: String {
        let width = (CommandSpec.all.map(\.name.count).max() ?? 0) + 2
        var text = """
            usage: redeem <command> [options]
                   redeem help [<command>]     the command's usage, options and an example
                   redeem --version

            Settings: REDEEM_URL (the gateway, e.g. http://127.0.0.1:8080) and REDEEM_API_KEY (sk_live_… or
            sk_test_…), or --url and --api-key, or a profile saved by `redeem login`.

            Commands:

            """
        var group = ""
        for spec in CommandSpec.all {
            if spec.path[0] != group, !group.isEmpty { text += "\n" }
            group = spec.path[0]
            text += "  " + pad(spec.name, width) + spec.summary + "\n"
        }
        text += "\nOptions of every command:\n" + optionLines(globalOptions) + "\n"
        text += "\nExit status: 0 done, 1 the server refused, 2 a usage mistake, 3 the server out of reach,"
        text += " 4 the server failed.\n"
        return text
    }

    /// `redeem help coupons create`: usage, arguments, options and an example.
    static func text(of spec: CommandSpec) -> String {
        var text = "usage: \(spec.usage)\n\n\(spec.summary).\n"
        if let details = spec.details { text += "\n\(details)\n" }
        if !spec.arguments.isEmpty {
            let width = (spec.arguments.map(\.0.count).max() ?? 0) + 2
            text +=
                "\nArguments:\n" + spec.arguments.map { "  " + pad($0.0, width) + $0.1 }.joined(separator: "\n") + "\n"
        }
        if !spec.options.isEmpty { text += "\nOptions:\n" + optionLines(spec.options) + "\n" }
        text += "\nOptions of every command:\n" + optionLines(globalOptions) + "\n"
        text += "\nExample:\n  \(spec.example)\n"
        return text
    }

    /// `redeem help members`: the commands under those words.
    static func text(under prefix: [String], _ specs: [CommandSpec]) -> String {
        let width = (specs.map(\.name.count).max() ?? 0) + 2
        return "usage: redeem \(prefix.joined(separator: " ")) <command>\n\n"
            + specs.map { "  " + pad($0.name, width) + $0.summary + "\n    " + $0.usage }.joined(separator: "\n")
            + "\n\nRun `redeem help <command>` for its options and an example.\n"
    }

    /// The help of the command, or of the commands under, `words`; a usage error naming the
    /// closest commands when there is none.
    static func text(for words: [String]) throws -> String {
        if words.isEmpty || words == ["help"] { return overview }
        if let spec = CommandSpec.match(words) { return text(of: spec) }
        let under = CommandSpec.all.filter { $0.path.starts(with: words) }
        if !under.isEmpty { return text(under: words, under) }
        throw CommandSpec.unknown(words)
    }

    /// A machine-readable listing of the table (`redeem help --json`), for scripts and completions.
    struct Listed: Encodable {
        struct Option: Encodable {
            let name: String
            let value: String?
            let required: Bool
            let help: String
        }
        let command: String
        let summary: String
        let usage: String
        let arguments: [String]
        let options: [Option]
        let example: String
    }

    static var listing: [Listed] {
        CommandSpec.all.map { s in
            Listed(
                command: s.name, summary: s.summary, usage: s.usage, arguments: s.arguments.map(\.0),
                options: s.options.map {
                    Listed.Option(name: $0.name, value: $0.value, required: $0.required, help: $0.help)
                },
                example: s.example)
        }
    }
}

extension CommandSpec {
    /// The command whose words start `words` (the longest such); the rest are its arguments.
    static func match(_ words: [String]) -> CommandSpec? {
        all.filter { words.starts(with: $0.path) }.max { $0.path.count < $1.path.count }
    }

    /// A usage error for words that name no command, naming the closest ones.
    static func unknown(_ words: [String]) -> UsageError {
        let asked = words.prefix(3).joined(separator: " ")
        // Under a known group, its commands by how close their next word is; otherwise the
        // commands whose group is within a couple of typos.
        let sameGroup = all.filter { $0.path[0] == words[0] }
        var close: [CommandSpec]
        if !sameGroup.isEmpty {
            let next = words.count > 1 ? words[1] : ""
            close = sameGroup.sorted {
                distance($0.path[1...].joined(separator: " "), next)
                    < distance($1.path[1...].joined(separator: " "), next)
            }
            close = Array(close.prefix(3))
        } else {
            let ranked = all.map { ($0, distance($0.path[0], words[0])) }.filter { $0.1 <= max(2, words[0].count / 3) }
            close = ranked.sorted { $0.1 < $1.1 }.map(\.0)
            if words.count > 1 {
                let exact = close.filter { $0.path.count > 1 && $0.path[1] == words[1] }
                if !exact.isEmpty { close = exact }
            }
            close = Array(close.prefix(3))
        }
        var message = "unknown command: \(asked)"
        if !close.isEmpty {
            message += "; did you mean " + close.map { "`redeem \($0.name)`" }.joined(separator: ", ") + "?"
        }
        return UsageError(message)
    }

    /// Levenshtein distance: how many letters to change, add or drop.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var row = Array(0...b.count)
        for i in 1...a.count {
            var previous = row[0]
            row[0] = i
            for j in 1...b.count {
                let old = row[j]
                row[j] = a[i - 1] == b[j - 1] ? previous : 1 + min(previous, row[j], row[j - 1])
                previous = old
            }
        }
        return row[b.count]
    }
}
