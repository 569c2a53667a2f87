import Foundation
import RedeemKit

// `redeem`: the operator command, on RedeemKit's OperatorClient. Exit 0 on success, 1 when the
// server refused (with its message), 2 for a mistake on the command line, 3 when the server could
// not be reached (refused connection, timeout), 4 when it failed on its side (a 5xx). The commands,
// their options and their help are one table: `CommandSpec.all` in Help.swift.

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

/// Finds the command in the table, checks its words and options, and runs it; help never calls
/// the server.
func run() async throws {
    var args = try Arguments(Array(CommandLine.arguments.dropFirst()))
    if args.flag("version") {
        print("redeem \(RedeemKitVersion.version)")
        exit(0)
    }
    if args.words.first == "help" {
        if args.flag("json") {
            try Output(json: true).write(Help.listing)
        } else {
            print(try Help.text(for: Array(args.words.dropFirst())), terminator: "")
        }
        exit(0)
    }
    if args.flag("help") {
        print(try Help.text(for: args.words), terminator: "")
        exit(0)
    }
    if args.words.isEmpty {
        print(Help.overview, terminator: "")
        exit(2)
    }
    guard let spec = CommandSpec.match(args.words) else {
        if CommandSpec.all.contains(where: { $0.path.starts(with: args.words) }) {
            var e = UsageError("`redeem \(args.words.joined(separator: " "))` needs one more word: which command?")
            e.usage = try Help.text(for: args.words)
            throw e
        }
        throw CommandSpec.unknown(args.words)
    }
    do {
        args.words.removeFirst(spec.path.count)
        let allowed = Set((spec.options + globalOptions).map(\.name))
        try args.checkOnly(allowed)
        if args.words.count > spec.arguments.count {
            throw UsageError("unexpected \(args.words[spec.arguments.count])")
        }
        let environment = ProcessInfo.processInfo.environment
        // `webhooks create --url` is the endpoint: there the gateway comes from REDEEM_URL or the profile.
        let command = Command(
            output: Output(json: args.flag("json")), environment: environment,
            url: spec.declares("url") ? nil : args.option("url"), apiKey: args.option("api-key"),
            profile: args.option("profile"))
        args.declared = allowed
        try await spec.run(command, &args)
    } catch var e as UsageError {
        e.usage = e.usage ?? "usage: \(spec.usage)\nRun `redeem help \(spec.name)` for its options and an example."
        throw e
    }
}

do {
    try await run()
} catch let e as UsageError {
    fail("redeem: \(e.description)\n\n\(e.usage ?? "Run `redeem help` for every command.")", code: 2)
} catch let e as Refusal {
    fail("redeem: \(e.description)", code: e.status)
} catch let e as RedeemError {
    let field = e.field.map { ", field \($0)" } ?? ""
    let request = e.requestId.map { ", request \($0)" } ?? ""
    fail("redeem: \(e.message) (\(e.code)\(field)\(request))", code: exitStatus(of: e))
} catch {
    fail("redeem: \(error)", code: 1)
}
