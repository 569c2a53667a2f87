/// A unique single-use code of a coupon (`POST /v1/coupons/{code}/codes`): an optional prefix the
/// operator chose, then four groups of four characters, `GIFT-7KQM-3XHT-W9PA-C4RE`. The body's
/// sixteen characters come from an alphabet of 32 that leaves out the look-alikes 0, O, 1 and I;
/// fifteen are random (75 bits) and the last is a check character (Luhn mod 32 over the fifteen),
/// which catches every single mistyped character and every swap of two neighbours but 2 with Z
/// (Luhn mod N's one blind spot), so a typing error is answered `mistyped` before any lookup.
///
/// The shape is reserved: a coupon's own code may not have it (`looksUnique`), so a code that has
/// it is always read as a unique code. A pure value: the caller brings the random bytes.
public enum UniqueCode {
    /// 8 digits and 24 letters: no 0, O, 1 or I.
    public static let alphabet: [Character] = Array("23456789ABCDEFGHJKLMNPQRSTUVWXYZ")
    public static let groups = 4
    public static let groupLength = 4
    /// Characters of the body: the random ones, then the check character.
    public static let bodyLength = groups * groupLength
    public static let randomLength = bodyLength - 1
    /// The longest prefix: 1 to 12 of A-Z and 0-9 (no hyphen, so the shape reads one way).
    public static let maxPrefixLength = 12
    /// The most codes one creation makes.
    public static let maxCount = 100_000

    /// What a code typed by a user is.
    public enum Reading: Equatable, Sendable {
        /// Not of the unique shape: a coupon's own code.
        case shared
        /// Of the unique shape, but a character is outside the alphabet or the check fails.
        case mistyped
        /// A well-formed unique code, as stored (upper-case, with its hyphens).
        case unique(String)
    }

    private static let values: [Character: Int] = Dictionary(
        uniqueKeysWithValues: alphabet.enumerated().map { ($0.element, $0.offset) })

    /// Luhn mod N over `body`'s characters (each in the alphabet): the character that makes the
    /// whole check out. Nil when a character is outside the alphabet.
    public static func checkCharacter(for body: some Sequence<Character>) -> Character? {
        let n = alphabet.count
        var sum = 0
        // From the right, the character next to the check one is doubled, then every second.
        for (i, ch) in body.reversed().enumerated() {
            guard let v = values[ch] else { return nil }
            var addend = i % 2 == 0 ? v * 2 : v
            addend = addend / n + addend % n
            sum += addend
        }
        return alphabet[(n - sum % n) % n]
    }

    /// Whether `body` (the check character last) checks out.
    public static func checks(_ body: [Character]) -> Bool {
        guard let last = body.last, values[last] != nil else { return false }
        return checkCharacter(for: body.dropLast()) == last
    }

    /// A prefix as stored (upper-case), or nil when it breaks the rule (1 to 12 of A-Z, 0-9).
    public static func normalizedPrefix(_ prefix: String) -> String? {
        let p = prefix.uppercased()
        guard (1...maxPrefixLength).contains(p.count), p.unicodeScalars.allSatisfy(isUpperAlphanumeric) else {
            return nil
        }
        return p
    }

    /// A new code from `random` (at least `randomLength` bytes from a CSPRNG; each gives one
    /// character, without bias, as 256 is a multiple of 32).
    public static func make(prefix: String?, random: some Collection<UInt8>) -> String {
        var text: [UInt8] = []
        append(prefix: prefix.map { Array($0.utf8) } ?? [], random: random, to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// `make`, written as ASCII onto `out`: the creation of 100,000 codes works on bytes, not on
    /// `Character`s, which cost several times as much.
    public static func append(prefix: [UInt8], random: some Collection<UInt8>, to out: inout [UInt8]) {
        precondition(random.count >= randomLength, "a unique code needs \(randomLength) random bytes")
        if !prefix.isEmpty {
            out.append(contentsOf: prefix)
            out.append(hyphen)
        }
        let n = alphabetBytes.count
        var sum = 0
        var i = 0
        for byte in random.prefix(randomLength) {
            if i > 0 && i % groupLength == 0 { out.append(hyphen) }
            let v = Int(byte & 31)
            out.append(alphabetBytes[v])
            // From the right, the character next to the check one is doubled, then every second:
            // with 15 random characters, those at even positions from the left.
            var addend = (randomLength - 1 - i) % 2 == 0 ? v * 2 : v
            addend = addend / n + addend % n
            sum += addend
            i += 1
        }
        out.append(alphabetBytes[(n - sum % n) % n])
    }

    private static let hyphen = UInt8(ascii: "-")
    private static let alphabetBytes: [UInt8] = alphabet.map { $0.asciiValue! }

    /// How `input` (as typed: any case, white space around it) reads.
    public static func read(_ input: String) -> Reading {
        let code = Coupons.normalizeCode(input)
        guard looksUnique(code) else { return .shared }
        let body = Array(code.split(separator: "-").suffix(groups).joined())
        return checks(body) ? .unique(code) : .mistyped
    }

    /// Whether an upper-case code has the unique shape: `[PREFIX-]XXXX-XXXX-XXXX-XXXX`, each X of
    /// A-Z or 0-9 (a look-alike in the body makes it mistyped, not another kind of code).
    public static func looksUnique(_ code: String) -> Bool {
        let parts = code.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == groups || parts.count == groups + 1 else { return false }
        if parts.count == groups + 1 {
            let p = parts[0]
            guard (1...maxPrefixLength).contains(p.count), p.unicodeScalars.allSatisfy(isUpperAlphanumeric) else {
                return false
            }
        }
        return parts.suffix(groups).allSatisfy {
            $0.count == groupLength && $0.unicodeScalars.allSatisfy(isUpperAlphanumeric)
        }
    }

    /// What reports show of a code: its last four characters (the check character last).
    public static func last4(_ code: String) -> String { String(code.suffix(4)) }

    private static func isUpperAlphanumeric(_ s: Unicode.Scalar) -> Bool {
        ("A"..."Z").contains(s) || ("0"..."9").contains(s)
    }
}
