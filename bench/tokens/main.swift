import Foundation
import Shared

// bench-tokens DATABASE_URL COUNT OUT_FILE
// Writes COUNT access tokens for COUNT distinct fresh accounts, one per line, signed with the
// accounts service's own key (read from its schema), so the load generator can act as many
// signed-in users without paying for COUNT sign-ups (each an argon2id hash).
let args = CommandLine.arguments
guard args.count == 4, let count = Int(args[2]) else {
    print("usage: bench-tokens DATABASE_URL COUNT OUT_FILE")
    exit(2)
}
do {
    let db = try PGConnection(url: args[1])
    guard let row = try db.query("SELECT kid, private_key FROM accounts.signing_keys ORDER BY created_at DESC LIMIT 1").first,
          let key = AsymmetricKey.ed25519(privateKey: Array(try row.decode("private_key", as: PGBytes.self).data)) else {
        print("no signing key yet: start the stack first")
        exit(1)
    }
    let kid: String = try row.decode("kid")
    var out = ""
    out.reserveCapacity(count * 330)
    let now = Date()
    for _ in 0..<count {
        let account = UUID()
        let claims = AccessClaims(account: account, appUserId: account.uuidString.lowercased(), session: UUID(),
                                  issuedAt: now, expiresAt: now.addingTimeInterval(900))
        out += try JWT.sign(claims, key: key, kid: kid) + "\n"
    }
    try out.write(toFile: args[3], atomically: true, encoding: .utf8)
} catch {
    print("bench-tokens: \(error)")
    exit(1)
}
