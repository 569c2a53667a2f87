// Makes the bus's CURVE keys (docs/security.md, "The bus"):
//
//   redeem-keys <dir> <name>...   for each name without one, a secret key in <dir>/<name>.key
//                                 (mode 0600); then <dir>/public-keys, "name=public key" for every
//                                 name given (REDEEM_BUS_PUBLIC_KEYS_FILE). deploy/run-stack runs it.
//   redeem-keys --env <name>...   new keys as lines of a compose .env file: BUS_SECRET_KEY_<NAME>
//                                 for each name, and BUS_PUBLIC_KEYS with every public key.
//   redeem-keys --version
import Bus
import Core
import Foundation

if CommandLine.arguments.dropFirst().first == "--version" {
    print("redeem-keys \(Build.version)")
    exit(0)
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("redeem-keys: \(message)\n".utf8))
    exit(1)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2 else { fail("usage: redeem-keys <dir> <name>... | redeem-keys --env <name>...") }
let names = Array(arguments.dropFirst())
for name in names where name.isEmpty || !name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) {
    fail("\"\(name)\" is not a name (letters, digits, - and _)")
}

do {
    if arguments[0] == "--env" {
        // Single quotes: Z85 has `$` and `#`, which compose would read otherwise.
        var lines: [String] = [], keyring: [BusKeyring.Entry] = []
        for name in names {
            let pair = try CurveKeyPair.generate()
            lines.append("BUS_SECRET_KEY_\(name.uppercased().replacingOccurrences(of: "-", with: "_"))='\(pair.secretKey)'")
            keyring.append(.init(name: name, key: pair.publicKey))
        }
        lines.append("BUS_PUBLIC_KEYS='\(keyring.map { "\($0.name)=\($0.key)" }.joined(separator: ","))'")
        print(lines.joined(separator: "\n"))
    } else {
        let dir = URL(fileURLWithPath: arguments[0])
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var keyring: [BusKeyring.Entry] = []
        for name in names {
            let file = dir.appendingPathComponent("\(name).key")
            let pair: CurveKeyPair
            if let text = try? String(contentsOf: file, encoding: .utf8) {
                do { pair = try CurveKeyPair(secretKey: text.trimmingCharacters(in: .whitespacesAndNewlines)) } catch {
                    fail("\(file.path) does not hold a CURVE secret key")
                }
            } else {
                pair = try CurveKeyPair.generate()
                guard FileManager.default.createFile(atPath: file.path, contents: Data((pair.secretKey + "\n").utf8),
                                                     attributes: [.posixPermissions: 0o600]) else { fail("cannot write \(file.path)") }
            }
            keyring.append(.init(name: name, key: pair.publicKey))
        }
        try Data(BusKeyring(keyring).text.utf8).write(to: dir.appendingPathComponent("public-keys"), options: .atomic)
    }
} catch {
    fail(String(describing: error))
}
