import Core
import Cryptography
import Foundation

/// A Google service account made at run time, as the Cloud console hands one out: a JSON key
/// file (`REDEEM_PLAY_SERVICE_ACCOUNT`) with the account's email, a key id and an RSA private key
/// (PKCS#8 PEM). The fake token endpoint checks assertions with its public half.
public final class TestGoogleServiceAccount: Sendable {
    public let email: String
    public let keyId: String
    public let key: AsymmetricKey
    /// The JSON key file.
    public let keyFile: URL
    private let directory: URL

    public init(email: String = "redeem-play@redeem-tests.iam.gserviceaccount.com") throws {
        self.email = email
        keyId = Crypto.randomBytes(20).hex
        key = AsymmetricKey.generateRSA()!
        directory = try Project.temporaryDirectory("google-key")
        keyFile = directory.appendingPathComponent("service-account.json")
        let file: [String: String] = [
            "type": "service_account", "project_id": "redeem-tests", "private_key_id": keyId,
            "private_key": PEM.encode(key.privateKeyPKCS8!, label: "PRIVATE KEY"), "client_email": email,
            "client_id": "1000000000000000000000", "token_uri": "https://oauth2.googleapis.com/token",
        ]
        try JSONSerialization.data(withJSONObject: file, options: [.sortedKeys]).write(to: keyFile)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// The account as Redeem reads it from the key file.
    public func account() throws -> GoogleServiceAccount { try GoogleServiceAccount(file: keyFile.path) }
}
