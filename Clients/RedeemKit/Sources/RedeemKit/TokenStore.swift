import Foundation
#if canImport(Security)
import Security
#endif

/// Where a client keeps what must outlive the process: the session's tokens and the ids of
/// redemptions still being awaited. Values are small opaque blobs under a few fixed keys.
///
/// Use `KeychainTokenStore` on Apple platforms, `FileTokenStore` or `MemoryTokenStore` elsewhere,
/// or your own. Calls come from the client's actor, one at a time per client.
public protocol TokenStore: Sendable {
    /// The value under `key`, or nil.
    func data(forKey key: String) throws -> Data?
    /// Stores `data` under `key`; nil removes it.
    func setData(_ data: Data?, forKey key: String) throws
}

/// Keeps values in memory only: a relaunch starts signed out. For tests, previews and guests.
public final class MemoryTokenStore: TokenStore, @unchecked Sendable {
    // Every access to `values` holds `lock`.
    private let lock = NSLock()
    private var values: [String: Data] = [:]

    /// An empty store.
    public init() {}

    /// The value under `key`, or nil.
    public func data(forKey key: String) throws -> Data? {
        lock.lock()
        defer { lock.unlock() }
        return values[key]
    }

    /// Stores `data` under `key`; nil removes it.
    public func setData(_ data: Data?, forKey key: String) throws {
        lock.lock()
        defer { lock.unlock() }
        values[key] = data
    }
}

/// Keeps each value in a file of its own in a directory, readable by the owner only. For Linux,
/// command-line tools and servers.
public final class FileTokenStore: TokenStore, @unchecked Sendable {
    /// The directory the files are in.
    public let directory: URL
    // Serialises writes of one store; each write replaces its file atomically.
    private let lock = NSLock()

    /// A store in `directory`, created (mode 0700) if missing.
    public init(directory: URL) throws {
        self.directory = directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    private func file(_ key: String) -> URL {
        let safe = key.map { $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" ? $0 : "_" }
        return directory.appendingPathComponent(String(safe))
    }

    /// The value under `key`, or nil.
    public func data(forKey key: String) throws -> Data? {
        lock.lock()
        defer { lock.unlock() }
        let url = file(key)
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        return try Data(contentsOf: url)
    }

    /// Stores `data` under `key`; nil removes it.
    public func setData(_ data: Data?, forKey key: String) throws {
        lock.lock()
        defer { lock.unlock() }
        let url = file(key)
        guard let data else {
            if FileManager.default.fileExists(atPath: url.path) { try FileManager.default.removeItem(at: url) }
            return
        }
        try data.write(to: url, options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
    }
}

#if canImport(Security)
/// Keeps values in the Keychain as generic passwords of one service, readable after the first
/// unlock and never synced to other devices.
public final class KeychainTokenStore: TokenStore, @unchecked Sendable {
    /// The Keychain service the items are filed under.
    public let service: String
    /// The access group to share the items with an app extension, if any.
    public let accessGroup: String?

    /// A store filed under `service` (default: the bundle id plus `.redeemkit`).
    public init(service: String = (Bundle.main.bundleIdentifier ?? "redeemkit") + ".redeemkit", accessGroup: String? = nil) {
        self.service = service
        self.accessGroup = accessGroup
    }

    private func query(_ key: String) -> [String: Any] {
        var q: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                kSecAttrAccount as String: key]
        if let accessGroup { q[kSecAttrAccessGroup as String] = accessGroup }
        return q
    }

    /// The value under `key`, or nil.
    public func data(forKey key: String) throws -> Data? {
        var q = query(key)
        q[kSecReturnData as String] = true
        q[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        let status = SecItemCopyMatching(q as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess else { throw KeychainError(status: status) }
        return result as? Data
    }

    /// Stores `data` under `key`; nil removes it.
    public func setData(_ data: Data?, forKey key: String) throws {
        guard let data else {
            let status = SecItemDelete(query(key) as CFDictionary)
            guard status == errSecSuccess || status == errSecItemNotFound else { throw KeychainError(status: status) }
            return
        }
        let update: [String: Any] = [kSecValueData as String: data]
        var status = SecItemUpdate(query(key) as CFDictionary, update as CFDictionary)
        if status == errSecItemNotFound {
            var add = query(key)
            add[kSecValueData as String] = data
            add[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            status = SecItemAdd(add as CFDictionary, nil)
        }
        guard status == errSecSuccess else { throw KeychainError(status: status) }
    }

    /// A Keychain call that failed, with its `OSStatus`.
    public struct KeychainError: Error, Sendable {
        /// The `OSStatus` the Keychain answered.
        public var status: OSStatus
    }
}
#endif

/// The default store: the Keychain on Apple platforms, memory elsewhere.
public func defaultTokenStore() -> any TokenStore {
    #if canImport(Security)
    KeychainTokenStore()
    #else
    MemoryTokenStore()
    #endif
}
