extension Dictionary {
    /// Changes the value stored for `key`: `body` gets it, or nil when the key is absent, and a nil
    /// it leaves removes the key.
    ///
    /// The value is moved out and written back whole. Changed in place instead (`self[key]?.x = y`,
    /// `self[key, default: v].x = y`), it goes through the subscript's modify accessors, and inside
    /// a `Mutex` those allocate their coroutine frames on the heap: three mallocs a call in a
    /// release build, eight in the gateway's profile. Moved out, the value is not shared while
    /// `body` runs, so an array in it grows without a copy.
    @inlinable
    public mutating func change<R>(_ key: Key, _ body: (inout Value?) throws -> R) rethrows -> R {
        var value = removeValue(forKey: key)
        defer { if let value { updateValue(value, forKey: key) } }
        return try body(&value)
    }
}
