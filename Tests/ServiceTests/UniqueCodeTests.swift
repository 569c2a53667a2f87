import Cryptography
import Database
import Foundation
import Testing

@testable import Core
@testable import CouponsService

/// Unique codes without a database: the alphabet, the check character (Luhn mod 32), how a typed
/// code reads, the rules of a creation, and what a batch of reservations of one unique code
/// comes to (`ReservationPlan`). `UniqueCodesTests` races real clients against the database.
@Suite struct UniqueCodeTests {
    @Test func theAlphabetHas32CharactersAndNoLookAlikes() {
        #expect(UniqueCode.alphabet.count == 32)
        #expect(Set(UniqueCode.alphabet).count == 32)
        for ch: Character in ["0", "O", "1", "I"] { #expect(!UniqueCode.alphabet.contains(ch)) }
    }

    /// Known answers worked by hand (Luhn mod N, N = 32, values by position in the alphabet).
    @Test(arguments: [
        // "22…2" is all zeros: the check is the zero character.
        ("222222222222222", Character("2")),
        // "3" (value 1) at the right is doubled: 2, so the check is 32 - 2 = 30 → "Y".
        ("222222222222223", Character("Y")),
        // "3" one further left is not doubled: 1, so the check is 31 → "Z".
        ("222222222222232", Character("Z")),
        // "Z" (31) doubled is 62 = 1·32 + 30 → 1 + 30 = 31, so the check is 1 → "3".
        ("22222222222222Z", Character("3"))
    ])
    func checkCharacters(body: String, check: Character) {
        #expect(UniqueCode.checkCharacter(for: Array(body)) == check)
        #expect(UniqueCode.checks(Array(body) + [check]))
    }

    @Test func madeCodesHaveTheirShapeAndCheckOut() {
        for prefix in [nil, "GIFT", "CLUB2026"] as [String?] {
            for _ in 0..<200 {
                let code = UniqueCode.make(prefix: prefix, random: Crypto.randomBytes(UniqueCode.randomLength))
                #expect(code.count == (prefix.map { $0.count + 1 } ?? 0) + 19)
                #expect(code.hasPrefix(prefix.map { $0 + "-" } ?? ""))
                #expect(UniqueCode.read(code) == .unique(code))
                #expect(UniqueCode.read("  " + code.lowercased() + "\n") == .unique(code))
                #expect(code.split(separator: "-").suffix(4).joined().allSatisfy { UniqueCode.alphabet.contains($0) })
            }
        }
    }

    /// Every single mistyped character, and every swap of two different neighbours in the body
    /// but 2 with Z (Luhn mod N's one blind spot: values 0 and N-1), is caught without a lookup.
    @Test func everySingleTypoAndNeighbourSwapIsMistyped() {
        for _ in 0..<20 {
            let code = UniqueCode.make(prefix: nil, random: Crypto.randomBytes(UniqueCode.randomLength))
            let chars = Array(code)
            let positions = chars.indices.filter { chars[$0] != "-" }
            for i in positions {
                for other in UniqueCode.alphabet + ["0", "O", "1", "I"] where other != chars[i] {
                    var typo = chars
                    typo[i] = other
                    #expect(UniqueCode.read(String(typo)) == .mistyped, "\(String(typo))")
                }
            }
            for (a, b) in zip(positions, positions.dropFirst())
            where b == a + 1 && chars[a] != chars[b] && Set([chars[a], chars[b]]) != ["2", "Z"] {
                var swapped = chars
                swapped.swapAt(a, b)
                #expect(UniqueCode.read(String(swapped)) == .mistyped, "\(String(swapped))")
            }
        }
    }

    @Test(arguments: [
        ("SPRING-25", UniqueCode.Reading.shared),
        ("ABCD-EFGH-JKLM", .shared),
        ("ABCDEFGHJKLMNPQR", .shared),  // no hyphens: a coupon's own code
        ("TOO-LONG-PREFIX-1-ABCD-EFGH-JKLM-NPQR", .shared),
        ("THIRTEENCHARS-ABCD-EFGH-JKLM-NPQR", .shared),
        ("ABCD-EFGH-JKLM-NPQ", .shared),
        ("ABCD-EFGH-JKLM-NPQR", .mistyped),  // the shape, a wrong check character
        ("GIFT-0BCD-EFGH-JKLM-NPQR", .mistyped)  // a look-alike in the body
    ])
    func readings(text: String, reading: UniqueCode.Reading) {
        #expect(UniqueCode.read(text) == reading)
    }

    @Test func aCouponsOwnCodeMayNotHaveTheUniqueShape() {
        #expect(throws: ServiceError.self) { try CouponRules.checkCode("GIFT-ABCD-EFGH-JKLM-NPQR") }
        #expect(throws: ServiceError.self) { try CouponRules.checkCode("abcd-efgh-jklm-npqr") }
        #expect((try? CouponRules.checkCode("SPRING-25")) == "SPRING-25")
    }

    @Test(arguments: [
        (CodesInput(count: nil), "count"),
        (CodesInput(count: 0), "count"),
        (CodesInput(count: 100_001), "count"),
        (CodesInput(count: 10, prefix: "GIFT-X"), "prefix"),
        (CodesInput(count: 10, prefix: "ABCDEFGHIJKLM"), "prefix"),
        (CodesInput(count: 10, prefix: "ÉTÉ"), "prefix")
    ])
    func creationsRefusedNamingTheirField(input: CodesInput, field: String) {
        do {
            _ = try UniqueCodeStore.checked(input)
            Issue.record("accepted \(input)")
        } catch let e as ServiceError {
            #expect(e.code == .invalid)
            #expect(e.field == field)
        } catch { Issue.record("\(error)") }
    }

    @Test func aCreationTakesItsCountAndAnUpperCasePrefix() throws {
        let (count, prefix) = try UniqueCodeStore.checked(CodesInput(count: 100_000, prefix: "gift"))
        #expect(count == 100_000)
        #expect(prefix == "GIFT")
        let codes = UniqueCodeStore.make(count: 1000, prefix: prefix)
        #expect(Set(codes).count == 1000)
        #expect(codes.allSatisfy { UniqueCode.read($0) == .unique($0) })
    }

    /// The largest CSV (100,000 codes with the longest prefix) fits in one bus message with room
    /// to spare, as JSON text.
    @Test func theLargestCSVFitsInABusMessage() throws {
        let line = String(repeating: "A", count: UniqueCode.maxPrefixLength + 1 + 19) + "\\n"
        #expect(UniqueCode.maxCount * line.utf8.count + 1024 < 4 << 20)
    }

    /// A creation's batch: each hash is its code's SHA-256, each last four its code's, the CSV one
    /// code a line. Also prints how long the Swift side of 100,000 codes takes (not asserted).
    @Test func aBatchHoldsEachCodesHashAndLastFour() throws {
        let batch = UniqueCodeStore.Batch(count: 1000, prefix: "GIFT")
        let codes = batch.codes
        #expect(codes.count == 1000)
        #expect(Set(codes).count == 1000)
        for (i, code) in codes.enumerated() {
            #expect(UniqueCode.read(code) == .unique(code))
            #expect(batch.hashes[i] == UniqueCodeStore.hex(Crypto.sha256(Array(code.utf8))))
            #expect(batch.last4[i] == String(code.suffix(4)))
        }
        let clock = ContinuousClock()
        var big: UniqueCodeStore.Batch?
        let making = clock.measure { big = UniqueCodeStore.Batch(count: 100_000, prefix: "BIG") }
        var text: String?
        let array = clock.measure { text = PGArray(big!.hashes).pgText }
        let keyring = SecretKeyring.random()
        var sealed: [UInt8] = []
        let sealing = clock.measure { sealed = keyring.seal(big!.csv, context: "bench").sealed }
        let base64 = clock.measure { _ = Data(sealed).base64EncodedString() }
        print(
            "unique codes, 100,000 in Swift: batch \(making), hash array text \(array) (\(text!.utf8.count) B),"
                + " seal \(sealing), base64 \(base64)")
    }

    // MARK: - A batch of one unique code

    static func inputs(held: Bool) -> ReservationPlan.Inputs {
        var i = ReservationPlanTests.inputs()
        i.uniqueCode = .init(id: 7, last4: "NPQR", held: held)
        return i
    }

    @Test func theFirstRequestOfABatchTakesTheCodeAndTheOthersAreRefused() {
        let accounts = (0..<4).map { _ in UUID() }
        let plan = ReservationPlan(
            Self.inputs(held: false), requests: accounts.map { ReservationPlanTests.request($0) })
        #expect(
            ReservationPlanTests.names(plan) == ["new 0", "refused codeUsed", "refused codeUsed", "refused codeUsed"])
        #expect(plan.fresh[0].uniqueCode?.id == 7)
    }

    @Test func aCodeHeldBeforeTheBatchIsRefusedButItsHolderGetsItsRedemption() {
        let holder = UUID(), other = UUID()
        var inputs = Self.inputs(held: true)
        let existing = RedemptionView(
            redemptionId: UUID(), code: "FREE", status: .granting, platform: .web, productId: nil, pricePaid: nil,
            sandbox: false, reservedAt: ReservationPlanTests.now, completedAt: nil, failureReason: nil,
            entitlement: nil,
            accountId: holder, appUserId: "h")
        inputs.existing[.init(account: holder, sandbox: false)] = existing
        let plan = ReservationPlan(
            inputs, requests: [ReservationPlanTests.request(other), ReservationPlanTests.request(holder)])
        #expect(ReservationPlanTests.names(plan) == ["refused codeUsed", "existing"])
    }

    @Test func aDoubleTapOfTheWinnerIsItsTwin() {
        let a = UUID(), b = UUID()
        let plan = ReservationPlan(
            Self.inputs(held: false),
            requests: [
                ReservationPlanTests.request(a), ReservationPlanTests.request(a), ReservationPlanTests.request(b)
            ])
        #expect(ReservationPlanTests.names(plan) == ["new 0", "twin of 0", "refused codeUsed"])
    }

    @Test func aRefusedFirstRequestLeavesTheCodeToTheNext() {
        var inputs = Self.inputs(held: false)
        inputs.coupon.platforms = [.web]
        let a = UUID(), b = UUID()
        let plan = ReservationPlan(
            inputs, requests: [ReservationPlanTests.request(a, platform: .android), ReservationPlanTests.request(b)])
        #expect(ReservationPlanTests.names(plan) == ["refused notEligible", "new 0"])
    }
}
