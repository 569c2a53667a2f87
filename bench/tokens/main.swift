import AccountsService
import Core
import Cryptography
import Database
import Foundation
import Runtime
import Synchronization

// bench-tokens DATABASE_URL COUNT OUT_FILE   (with REDEEM_SECRET_KEY or _FILE, which opens the stored key)
// Writes COUNT access tokens for COUNT distinct fresh accounts, one per line, signed with the
// accounts service's own key (asked of accounts' key store), so the load generator can act as many
// signed-in users without paying for COUNT sign-ups (each an argon2id hash). An RS256 signature
// costs about 1 ms, so the tokens are signed on every core. `bench-tokens --version` prints the release.
//
// bench-tokens --sign-ups DATABASE_URL COUNT OUT_FILE ACCOUNTS_FILE
// Signs up COUNT users with the accounts service's own code (`BenchSignUps`: real accounts and
// sessions, one shared password hash) and writes their access tokens to OUT_FILE and their
// account ids, one a line in the same order, to ACCOUNTS_FILE.
if CommandLine.arguments.dropFirst().first == "--version" {
    print("bench-tokens \(Build.version)")
    exit(0)
}
var args = CommandLine.arguments
let signUps = args.count > 1 && args[1] == "--sign-ups"
if signUps { args.remove(at: 1) }
guard args.count == (signUps ? 5 : 4), let count = Int(args[2]) else {
    print("usage: bench-tokens [--sign-ups] DATABASE_URL COUNT OUT_FILE [ACCOUNTS_FILE]")
    exit(2)
}
if signUps {
    do {
        let users = try await BenchSignUps.make(
            databaseURL: args[1], env: Environment(), count: count,
            connections: 2 * max(1, ProcessInfo.processInfo.activeProcessorCount))
        let tokens = users.map { $0.tokens.accessToken + "\n" }.joined()
        let accounts = users.map { $0.account.lowercasedString + "\n" }.joined()
        try tokens.write(toFile: args[3], atomically: true, encoding: .utf8)
        try accounts.write(toFile: args[4], atomically: true, encoding: .utf8)
        exit(0)
    } catch {
        print("bench-tokens: \(error)")
        exit(1)
    }
}
do {
    guard let signing = try SigningKeyStore.signing(try PGConnection(url: args[1]), keyring: try SecretKeyring(env: Environment())) else {
        throw ConfigError(variable: "DATABASE_URL", problem: "holds no signing key yet: start accounts once first")
    }
    let now = Date()
    let chunks = max(1, ProcessInfo.processInfo.activeProcessorCount)
    let parts = Mutex([String](repeating: "", count: chunks))
    let failure = Mutex<(any Error)?>(nil)
    DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
        var out = ""
        out.reserveCapacity(count / chunks * 600)
        do {
            for _ in stride(from: chunk, to: count, by: chunks) {
                let account = UUID()
                let claims = AccessClaims(account: account, appUserId: account.lowercasedString, session: UUID(),
                                          issuedAt: now, expiresAt: now.addingTimeInterval(900))
                out += try JWT.sign(claims, key: signing.key, kid: signing.kid) + "\n"
            }
        } catch {
            failure.withLock { $0 = error }
        }
        parts.withLock { [out] in $0[chunk] = out }
    }
    if let error = failure.withLock({ $0 }) { throw error }
    try parts.withLock { $0.joined() }.write(toFile: args[3], atomically: true, encoding: .utf8)
} catch {
    print("bench-tokens: \(error)")
    exit(1)
}
