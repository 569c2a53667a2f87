import Core
import Cryptography
import Foundation

/// Access tokens verified already, until they expire, in two generations of at most `limit / 2`
/// tokens each. A token is looked up in the newer, then in the older, which hands it on to the
/// newer. When the newer is full, it becomes the older and the older is dropped (its caller frees
/// it): under the lock, an insert costs the same however full the cache is, and a token used again
/// within the last `limit / 2` new ones stays.
///
/// One map that was emptied when full dropped the tokens in use with the rest, and looked for the
/// expired ones first: a pass over all 50,000 under the gateway's lock, once per 50,000 new tokens
/// (a flash sale brings one per user).
struct VerifiedTokens {
    /// A token's SHA-256: an RS256 token is about 600 bytes.
    struct Digest: Hashable {
        let a: UInt64, b: UInt64, c: UInt64, d: UInt64
    }

    struct Claims {
        let account: UUID, session: UUID, appUserId: String, expiresAt: Date, role: Role?
    }

    typealias Generation = [Digest: Claims]

    /// The most tokens held, both generations together.
    let limit: Int
    private(set) var newer: Generation = [:]
    private(set) var older: Generation = [:]

    init(limit: Int) { self.limit = max(2, limit) }

    var count: Int { newer.count + older.count }

    /// A token's claims while they have not expired at `now`. An expired one is forgotten.
    mutating func claims(of digest: Digest, now: Date) -> Claims? {
        if let known = newer[digest] {
            guard known.expiresAt > now else {
                newer[digest] = nil
                return nil
            }
            return known
        }
        guard let known = older[digest] else { return nil }
        guard known.expiresAt > now else {
            older[digest] = nil
            return nil
        }
        // Handed on while the newer has room; otherwise it stays until the next turn drops it.
        if newer.count < limit / 2 {
            older[digest] = nil
            newer[digest] = known
        }
        return known
    }

    /// Keeps a token's claims. Answers the generation it dropped, if it dropped one, so that the
    /// caller frees its entries after letting go of its lock.
    mutating func insert(_ claims: Claims, for digest: Digest) -> Generation {
        var dropped: Generation = [:]
        if newer.count >= limit / 2 {
            swap(&dropped, &older)
            swap(&older, &newer)
        }
        newer[digest] = claims
        return dropped
    }
}

extension VerifiedTokens.Digest {
    init(token: String) {
        let h = Crypto.sha256(Array(token.utf8))
        func word(_ i: Int) -> UInt64 { h[i..<i + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        self.init(a: word(0), b: word(8), c: word(16), d: word(24))
    }
}
