import Foundation
import Synchronization
import Testing
@testable import Core
@testable import Cryptography
@testable import Runtime

@Suite struct CryptoTests {
    struct Claims: Codable, Equatable { var sub: String; var n: Int }

    @Test func hmacMatchesRFC4231Case2() {
        let mac = Crypto.hmacSHA256(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8))
        #expect(mac.hex == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test func sha256OfEmptyInput() {
        #expect(Crypto.sha256([UInt8]()).hex == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = hex.startIndex
        while i < hex.endIndex {
            let j = hex.index(i, offsetBy: 2)
            out.append(UInt8(hex[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    @Test func hkdfMatchesRFC5869Cases1And3() {
        let ikm = [UInt8](repeating: 0x0b, count: 22)
        let okm = Crypto.hkdfSHA256(ikm, salt: Self.bytes("000102030405060708090a0b0c"), info: Self.bytes("f0f1f2f3f4f5f6f7f8f9"), length: 42)
        #expect(okm.hex == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
        let noSaltNoInfo = Crypto.hkdfSHA256(ikm, info: [], length: 42)
        #expect(noSaltNoInfo.hex == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
    }

    /// Test cases 14 and 16 of the GCM specification (McGrew and Viega), AES-256.
    @Test func aesGCMMatchesTheGCMSpecificationAndOpensOnlyWhatItSealed() throws {
        let zero = AESGCM.seal([UInt8](repeating: 0, count: 16), key: [UInt8](repeating: 0, count: 32), nonce: [UInt8](repeating: 0, count: 12), aad: [])
        #expect(zero.hex == "000000000000000000000000" + "cea7403d4d606b6e074ec5d3baf39d18" + "d0d1c8a799996bf0265b98b5d48ab919")
        let key = Self.bytes("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")
        let nonce = Self.bytes("cafebabefacedbaddecaf888")
        let aad = Self.bytes("feedfacedeadbeeffeedfacedeadbeefabaddad2")
        let plaintext = Self.bytes("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
        let sealed = AESGCM.seal(plaintext, key: key, nonce: nonce, aad: aad)
        #expect(sealed.hex == nonce.hex
            + "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662"
            + "76fc6ece0f4e1768cddf8853bb2d551b")
        #expect(AESGCM.open(sealed, key: key, aad: aad) == plaintext)
        // Another key, other authenticated data, a flipped bit anywhere, or a cut: nothing opens.
        #expect(AESGCM.open(sealed, key: [UInt8](repeating: 1, count: 32), aad: aad) == nil)
        #expect(AESGCM.open(sealed, key: key, aad: aad + [0]) == nil)
        for i in [0, 12, sealed.count - 1] {
            var tampered = sealed
            tampered[i] ^= 0x01
            #expect(AESGCM.open(tampered, key: key, aad: aad) == nil, "bit flipped at \(i)")
        }
        #expect(AESGCM.open(Array(sealed.dropLast()), key: key, aad: aad) == nil)
        #expect(AESGCM.open([], key: key) == nil)
        // Random nonces: sealing twice gives different boxes that open to the same text.
        let a = AESGCM.seal(Array("pair".utf8), key: key), b = AESGCM.seal(Array("pair".utf8), key: key)
        #expect(a != b)
        #expect(AESGCM.open(a, key: key) == Array("pair".utf8) && AESGCM.open(b, key: key) == Array("pair".utf8))
        #expect(AESGCM.open(AESGCM.seal([], key: key), key: key) == [])
    }

    @Test func base64URLRoundTripsWithoutPadding() {
        let bytes: [UInt8] = [0xfb, 0xff, 0x01]
        #expect(Base64URL.encode(bytes) == "-_8B")
        #expect(Base64URL.decode("-_8B") == bytes)
        #expect(Base64URL.decode("a=") == nil)
        // The standard alphabet's own characters are refused.
        #expect(Base64URL.decode("-_8+") == nil && Base64URL.decode("-/8B") == nil)
        #expect(Base64URL.decode("") == [])
        #expect(Base64URL.decode("-_8B-") == nil, "a length no encoding has")
        // Every length's padding, against Foundation's own encoding of the same bytes.
        for n in 0..<40 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 251) }
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
            #expect(Base64URL.decode(bytes: Array(Base64URL.encode(bytes).utf8)[...]) == bytes)
        }
    }

    @Test func argon2idHashesVerifyAndDiffer() throws {
        let h = PasswordHasher()
        let a = try h.hash("correct horse battery")
        #expect(a.hasPrefix("$argon2id$v=19$m=19456,t=2,p=1$"))
        #expect(try h.verify("correct horse battery", against: a))
        #expect(try !h.verify("correct horse batterY", against: a))
        #expect(try h.hash("correct horse battery") != a)  // salted
    }

    /// A hash whose memory can't be allocated is an `unavailable` error, not the end of the
    /// process (it was a `precondition`). 4 TiB is refused by the kernel's overcommit heuristic
    /// (mode 0) or accounting (mode 2); under mode 1 it would be granted, so the test stands aside.
    @Test func argon2idThatCannotAllocateThrowsAndTheProcessLivesOn() async throws {
        let mode = try String(contentsOfFile: "/proc/sys/vm/overcommit_memory", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        guard mode != "1" else { return }
        var huge = PasswordHasher()
        huge.memoryKiB = UInt32.max
        #expect(throws: ServiceError.self) { try huge.hash("correct horse battery") }
        await #expect(throws: ServiceError.self) { try await huge.hashAsync("correct horse battery") }
        do {
            _ = try huge.hash("correct horse battery")
        } catch {
            #expect(error.code == .unavailable)
        }
        // The gate's place was given back: the next hash (normal size) runs.
        var normal = huge
        normal.memoryKiB = 19_456
        #expect(try await normal.hashAsync("correct horse battery").hasPrefix("$argon2id$"))
    }

    /// The bound on hashes in progress, on the gate itself: `concurrency` run, `waiting` queue in
    /// order, the next is refused at once; each leave lets the first in the queue run.
    @Test func passwordHashesAreBoundedAndTheExcessRefused() async throws {
        let gate = PasswordHashGate(concurrency: 2, waiting: 2)
        #expect(await gate.enter())
        #expect(await gate.enter())
        let queued = (1...2).map { _ in Task { await gate.enter() } }
        // Both are queued (the tasks run concurrently: wait for them to be counted).
        let counted = await waitUntil(.now + .seconds(5), every: .milliseconds(5)) { gate.load.waiting == 2 }
        #expect(counted)
        #expect(await gate.enter() == false, "a third waiter is refused at once")
        #expect(gate.load == (2, 2))
        gate.leave()
        #expect(gate.load == (2, 1), "one place freed: the first waiting takes it")
        gate.leave()
        let firstEntered = await queued[0].value, secondEntered = await queued[1].value
        #expect(firstEntered && secondEntered)
        #expect(gate.load == (2, 0), "the two that waited now run")
        gate.leave()
        gate.leave()
        #expect(gate.load == (0, 0))
        #expect(await gate.enter(), "free again")
        // Through the hasher: a gate with one place and no queue turns a second hash away while
        // the first runs, with `unavailable`, and serves it once the first is done.
        let one = PasswordHasher(concurrency: 1, waiting: 0)
        let results = await withTaskGroup(of: Result<String, ServiceError>.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    do throws(ServiceError) { return .success(try await one.hashAsync("correct horse battery")) } catch { return .failure(error) }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        let refused = results.filter { if case .failure(let e) = $0 { e.code == .unavailable } else { false } }
        #expect(results.count == 4 && refused.count >= 1 && refused.count < 4, "\(results)")
        #expect(one.gate.load == (0, 0))
    }

    @Test func ed25519TokensVerifyOnlyWithTheirKey() throws {
        let key = try #require(AsymmetricKey.ed25519(privateKey: Crypto.randomBytes(32)))
        let other = try #require(AsymmetricKey.ed25519(privateKey: Crypto.randomBytes(32)))
        let raw = try #require(key.ed25519PublicKey)
        let pub = try #require(AsymmetricKey.ed25519(publicKey: raw))
        let token = try JWT.sign(Claims(sub: "a", n: 1), key: key, kid: "k1")
        let (header, claims) = try JWT.verify(token, as: Claims.self, algorithm: .ed25519) { _ in pub }
        #expect(header.kid == "k1")
        #expect(claims == Claims(sub: "a", n: 1))
        let forged = try JWT.sign(Claims(sub: "a", n: 1), key: other, kid: "k1")
        #expect(throws: JWT.Failure.badSignature) { try JWT.verify(forged, as: Claims.self, algorithm: .ed25519) { _ in pub } }
        // A changed payload with the old signature.
        let parts = token.split(separator: ".")
        let tampered = "\(parts[0]).\(Base64URL.encode(Array(#"{"n":2,"sub":"a"}"#.utf8))).\(parts[2])"
        #expect(throws: JWT.Failure.badSignature) { try JWT.verify(tampered, as: Claims.self, algorithm: .ed25519) { _ in pub } }
    }

    @Test func rs256TokensVerifyFromJWKComponentsAndAlgNoneIsRefused() throws {
        let key = try #require(AsymmetricKey.generateRSA(bits: 2048))
        let (n, e) = try #require(key.rsaComponents)
        let pub = try #require(AsymmetricKey.rsa(n: n, e: e))
        let token = try JWT.sign(Claims(sub: "apple", n: 7), key: key, kid: "A")
        #expect(try JWT.verify(token, as: Claims.self, algorithm: .rs256) { _ in pub }.1.n == 7)
        let none = Base64URL.encode(Array(#"{"alg":"none","kid":"A"}"#.utf8)) + "." + token.split(separator: ".")[1] + "."
        #expect(throws: JWT.Failure.self) { try JWT.verify(none, as: Claims.self, algorithm: .rs256) { _ in pub } }
        // An RS256 verifier does not accept an EdDSA token, even with a matching kid.
        let ed = try #require(AsymmetricKey.ed25519(privateKey: Crypto.randomBytes(32)))
        let swapped = try JWT.sign(Claims(sub: "apple", n: 7), key: ed, kid: "A")
        #expect(throws: JWT.Failure.wrongAlgorithm) { try JWT.verify(swapped, as: Claims.self, algorithm: .rs256) { _ in pub } }
    }

    /// Headers of verified tokens are remembered, not trusted: a later token with the same header
    /// still needs the verifier's algorithm, a key for its kid and a good signature.
    @Test func aRememberedHeaderIsStillCheckedOnEveryToken() throws {
        let key = try #require(AsymmetricKey.generateRSA(bits: 2048)), other = try #require(AsymmetricKey.generateRSA(bits: 2048))
        let kid = "remembered-\(UUID().uuidString)"
        let first = try JWT.sign(Claims(sub: "a", n: 1), key: key, kid: kid)
        #expect(try JWT.verify(first, as: Claims.self, algorithm: .rs256) { _ in key }.1.n == 1)
        let second = try JWT.sign(Claims(sub: "b", n: 2), key: key, kid: kid)
        #expect(first.split(separator: ".")[0] == second.split(separator: ".")[0], "one header segment for both tokens")
        let (header, claims) = try JWT.verify(second, as: Claims.self, algorithm: .rs256) { _ in key }
        #expect(header.kid == kid && header.alg == "RS256")
        #expect(claims == Claims(sub: "b", n: 2))
        #expect(throws: JWT.Failure.wrongAlgorithm) { try JWT.verify(second, as: Claims.self, algorithm: .ed25519) { _ in key } }
        #expect(throws: JWT.Failure.unknownKey) { try JWT.verify(second, as: Claims.self, algorithm: .rs256) { _ in nil } }
        #expect(throws: JWT.Failure.badSignature) { try JWT.verify(second, as: Claims.self, algorithm: .rs256) { _ in other } }
        let forged = try JWT.sign(Claims(sub: "b", n: 2), key: other, kid: kid)
        #expect(throws: JWT.Failure.badSignature) { try JWT.verify(forged, as: Claims.self, algorithm: .rs256) { _ in key } }
    }

    /// An RS256 key checks signatures with copies of one prepared context: from many threads at
    /// once, good tokens pass and forged or changed ones fail, each on its own.
    @Test func rs256VerificationHoldsUnderConcurrentUse() async throws {
        let key = try #require(AsymmetricKey.generateRSA(bits: 2048)), other = try #require(AsymmetricKey.generateRSA(bits: 2048))
        let (n, e) = try #require(key.rsaComponents)
        let pub = try #require(AsymmetricKey.rsa(n: n, e: e))
        let good = try JWT.sign(Claims(sub: "a", n: 1), key: key, kid: "k")
        let forged = try JWT.sign(Claims(sub: "a", n: 1), key: other, kid: "k")
        let parts = good.split(separator: ".")
        let tampered = "\(parts[0]).\(Base64URL.encode(Array(#"{"n":2,"sub":"a"}"#.utf8))).\(parts[2])"
        let outcomes = await withTaskGroup(of: (Int, Bool).self) { group in
            for i in 0..<300 {
                group.addTask {
                    let token = [good, forged, tampered][i % 3]
                    return (i % 3, (try? JWT.verify(token, as: Claims.self, algorithm: .rs256) { _ in pub }) != nil)
                }
            }
            return await group.reduce(into: [(Int, Bool)]()) { $0.append($1) }
        }
        #expect(outcomes.count == 300)
        #expect(outcomes.allSatisfy { kind, passed in passed == (kind == 0) })
    }

    /// Access tokens: RS256 keys stored as DER and published as SubjectPublicKeyInfo; a verifier
    /// that accepts both algorithms still takes each token only with a key of its own algorithm.
    @Test func storedKeysRoundTripAndEachTokenNeedsAKeyOfItsAlgorithm() throws {
        let rsa = try #require(AsymmetricKey.generateRSA(bits: 2048))
        let der = try #require(rsa.privateKeyDER)
        let restored = try #require(AsymmetricKey.privateKey(der: der))
        #expect(restored.algorithm == .rs256)
        let rsaPublicDER = try #require(restored.publicKeyDER)
        let rsaPub = try #require(AsymmetricKey.publicKey(der: rsaPublicDER))
        let ed = try #require(AsymmetricKey.ed25519(privateKey: Crypto.randomBytes(32)))
        let edPublicDER = try #require(ed.publicKeyDER)
        let edPub = try #require(AsymmetricKey.publicKey(der: edPublicDER))
        #expect(edPub.algorithm == .ed25519)
        #expect(AsymmetricKey.privateKey(der: Crypto.randomBytes(64)) == nil)

        let keys = ["r": rsaPub, "e": edPub]
        let both: Set<AsymmetricKey.Algorithm> = [.rs256, .ed25519]
        let signed = try JWT.sign(Claims(sub: "a", n: 1), key: restored, kid: "r")
        #expect(try JWT.verify(signed, as: Claims.self, algorithms: both) { keys[$0 ?? ""] }.1.n == 1)
        #expect(try JWT.verify(try JWT.sign(Claims(sub: "a", n: 2), key: ed, kid: "e"), as: Claims.self, algorithms: both) { keys[$0 ?? ""] }.1.n == 2)
        // An EdDSA token naming the RSA key's id, and an RS256 token naming the Ed25519 key's id.
        #expect(throws: JWT.Failure.unknownKey) {
            try JWT.verify(try JWT.sign(Claims(sub: "a", n: 3), key: ed, kid: "r"), as: Claims.self, algorithms: both) { keys[$0 ?? ""] }
        }
        #expect(throws: JWT.Failure.unknownKey) {
            try JWT.verify(try JWT.sign(Claims(sub: "a", n: 4), key: rsa, kid: "e"), as: Claims.self, algorithms: both) { keys[$0 ?? ""] }
        }
        // A token signed by another RSA key fails on its signature.
        let other = try #require(AsymmetricKey.generateRSA(bits: 2048))
        #expect(throws: JWT.Failure.badSignature) {
            try JWT.verify(try JWT.sign(Claims(sub: "a", n: 5), key: other, kid: "r"), as: Claims.self, algorithms: both) { keys[$0 ?? ""] }
        }
    }

    /// Ids come from a pool of kernel random bytes shared by all threads and refilled every 256
    /// ids: taken from many threads at once, across refills, they stay distinct and random.
    @Test func randomUUIDsAreVersion4AndDistinct() throws {
        // Four threads at once, 1,000 ids each (16 refills of the pool); cheap checks on the bytes,
        // so the test holds no thread long.
        let batches = Mutex<[[UUID]]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            let made = (0..<1000).map { _ in UUID.random() }
            batches.withLock { $0.append(made) }
        }
        let ids = batches.withLock { $0 }.flatMap { $0 }
        #expect(ids.count == 4000 && Set(ids).count == 4000)
        #expect(ids.allSatisfy { $0.uuid.6 >> 4 == 4 && $0.uuid.8 >> 6 == 0b10 }, "version 4, RFC 4122 variant")
        #expect(Array(ids[0].uuidString)[14] == "4" && UUID(uuidString: ids[0].uuidString) == ids[0])
        // The 122 random bits of each id: about half of them set, over all ids.
        let ones = ids.reduce(0) { sum, id in
            withUnsafeBytes(of: id.uuid) { raw in sum + raw.enumerated().reduce(0) { $0 + ($1.offset == 6 || $1.offset == 8 ? 0 : $1.element.nonzeroBitCount) } }
        }
        let share = Double(ones) / Double(ids.count * 112)
        #expect(abs(share - 0.5) < 0.01, "share of one bits: \(share)")
    }

    @Test func timeOrderedUUIDsAreVersion7SortedByTimeAndDistinct() throws {
        let start = Date(timeIntervalSince1970: 1_764_483_573.125)
        // 2 ms apart, so no two share a millisecond (within one, the random bits decide the order).
        let ids = (0..<1000).map { UUID.timeOrdered(at: start.addingTimeInterval(Double($0) * 0.002)) }
        #expect(Set(ids).count == 1000)
        let texts = ids.map(\.lowercasedString)
        let sorted = zip(texts, texts.dropFirst()).allSatisfy { $0 < $1 }
        #expect(sorted, "a later millisecond sorts later, as PostgreSQL compares uuids")
        #expect(texts[0].hasPrefix("019ad36a-a585-7"), "48 bits of Unix milliseconds, then version 7: \(texts[0])")
        for text in texts.prefix(50) { #expect("89ab".contains(Array(text)[19])) }
    }

    @Test func uuidTextMatchesFoundationBothWays() throws {
        for _ in 0..<200 {
            let id = UUID()
            #expect(id.lowercasedString == id.uuidString.lowercased())
            #expect(UUID(parsing: id.uuidString) == id)
            #expect(UUID(parsing: id.lowercasedString) == id)
        }
        // Ids ordered by their bytes are ordered by their text; ids sharing a long beginning too.
        let base = UUID.timeOrdered()
        var ids = (0..<300).map { _ in UUID() } + [base, base]
        ids += (0..<100).map { i in
            var u = base.uuid
            withUnsafeMutableBytes(of: &u) { $0[15 - i % 8] = UInt8.random(in: 0...255) }
            return UUID(uuid: u)
        }
        for (a, b) in zip(ids, ids.shuffled()) {
            #expect(a.precedes(b) == (a.lowercasedString < b.lowercasedString), "\(a) \(b)")
        }
        let good = "6f9c2a0e-1b7d-4a53-9b7e-2d1c1f0a9e11"
        #expect(UUID(parsing: good[...]) == UUID(uuidString: good))
        for bad in ["", "6f9c2a0e-1b7d-4a53-9b7e-2d1c1f0a9e1", good + "0", "6f9c2a0e1b7d-4a53-9b7e-2d1c1f0a9e11-",
                    "6f9c2a0e-1b7d-4a53-9b7e-2d1c1f0a9e1g", "6f9c2a0e-1b7d-4a53-9b7e_2d1c1f0a9e11", "{6f9c2a0e-1b7d-4a53-9b7e-2d1c1f0a9e11}"] {
            #expect(UUID(parsing: bad) == nil, "\(bad)")
            #expect(UUID(uuidString: bad) == nil, "Foundation agrees: \(bad)")
        }
    }

    /// Synthesised `Codable` reads and writes UUIDs through Core's container overloads (not
    /// Foundation's `sscanf`/`snprintf`), with the text Foundation writes: upper-case out, either
    /// case in, `null` or absent as nil, anything else a decoding error on that key.
    @Test func uuidFieldsCodeAsFoundationWritesThem() throws {
        struct Ids: Codable, Equatable { var id: UUID; var other: UUID? }
        for _ in 0..<50 {
            let ids = Ids(id: UUID(), other: UUID())
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            let json = try encoder.encode(ids)
            #expect(String(decoding: json, as: UTF8.self) == #"{"id":"\#(ids.id.uuidString)","other":"\#(ids.other!.uuidString)"}"#)
            #expect(try JSONDecoder().decode(Ids.self, from: json) == ids)
            let lower = Data("{\"id\":\"\(ids.id.lowercasedString)\",\"other\":null}".utf8)
            #expect(try JSONDecoder().decode(Ids.self, from: lower) == Ids(id: ids.id, other: nil))
        }
        #expect(String(decoding: try JSONEncoder().encode(Ids(id: UUID(), other: nil)), as: UTF8.self).contains("other") == false)
        do {
            _ = try JSONDecoder().decode(Ids.self, from: Data(#"{"id":"6f9c2a0e-1b7d-4a53-9b7e-2d1c1f0a9e1g"}"#.utf8))
            Issue.record("an invalid UUID was read")
        } catch DecodingError.dataCorrupted(let context) {
            #expect(context.codingPath.map(\.stringValue) == ["id"])
            #expect(context.debugDescription == "not a UUID", "Core's overload, not Foundation's decoding")
        }
    }
}
