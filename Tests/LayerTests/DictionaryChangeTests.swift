import Testing
@testable import Core

/// `Dictionary.change`: the hot paths' way to change a value kept in a dictionary under a lock.
struct DictionaryChangeTests {
    @Test func anAbsentKeyIsGivenAsNilAndStaysAbsentUnlessSet() {
        var d = ["a": 1]
        let seen = d.change("b") { value -> Int? in value }
        #expect(seen == nil)
        #expect(d == ["a": 1])
        d.change("b") { $0 = 2 }
        #expect(d == ["a": 1, "b": 2])
    }

    @Test func aPresentValueIsChangedOrRemoved() {
        var d = ["a": 1, "b": 2]
        let old = d.change("a") { value -> Int? in
            defer { value? += 10 }
            return value
        }
        #expect(old == 1)
        #expect(d == ["a": 11, "b": 2])
        d.change("b") { $0 = nil }
        #expect(d == ["a": 11])
    }

    @Test func aThrowKeepsWhatTheBodyLeft() {
        struct Stop: Error {}
        var d = ["a": 1]
        #expect(throws: Stop.self) {
            try d.change("a") { value in
                value = 5
                throw Stop()
            }
        }
        #expect(d == ["a": 5])
    }

    /// Moved out, not copied: an array kept in the value grows in its own buffer, where a copy
    /// read out and written back would share the buffer and copy it on the first append.
    @Test func theValueIsNotCopied() {
        var list: [Int] = [1]
        list.reserveCapacity(16)
        var d = ["a": list]
        list = []
        let before = d["a"]!.withUnsafeBufferPointer { $0.baseAddress }
        let during = d.change("a") { value -> UnsafePointer<Int>? in
            value!.append(2)
            return value!.withUnsafeBufferPointer { $0.baseAddress }
        }
        #expect(d["a"] == [1, 2])
        #expect(during == before)
    }
}
