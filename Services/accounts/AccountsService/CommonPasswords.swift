/// A short list of the most common passwords (from public breach-frequency lists), refused at
/// sign-up whatever their length. Compared without case.
enum CommonPasswords {
    static func contains(_ password: String) -> Bool { list.contains(password.lowercased()) }

    /// Whether a password is made (all but at most 3 characters) of what guessing lists are built
    /// from: fewer than 4 different characters, or runs of 3 or more along the alphabet, the
    /// digits, a keyboard row or column, either way ("abcdefghij", "qwerty123456", "1qaz2wsx3edc",
    /// "a123456789"). The list above can't hold every such variant.
    static func isPredictable(_ password: String) -> Bool {
        let chars = Array(password.lowercased().unicodeScalars)
        if Set(chars).count < 4 { return true }
        var covered = [Bool](repeating: false, count: chars.count)
        var start = 0
        for i in 1...chars.count {
            let continues = i < chars.count && (chars[i] == chars[i - 1] || steps.contains([chars[i - 1], chars[i]]))
            if continues { continue }
            if i - start >= 3 { for j in start..<i { covered[j] = true } }
            start = i
        }
        return covered.filter { !$0 }.count <= 3
    }

    /// Neighbouring pairs along the sequences people type, both ways.
    private static let steps: Set<[Unicode.Scalar]> = {
        var pairs = Set<[Unicode.Scalar]>()
        for line in ["abcdefghijklmnopqrstuvwxyz", "0123456789", "qwertyuiop", "asdfghjkl", "zxcvbnm", "1qaz2wsx3edc4rfv5tgb6yhn7ujm8ik9ol0p"] {
            let s = Array(line.unicodeScalars)
            for i in 1..<s.count { pairs.insert([s[i - 1], s[i]]); pairs.insert([s[i], s[i - 1]]) }
        }
        return pairs
    }()

    static let list: Set<String> = [
        "000000",
        "0000000000",
        "0987654321",
        "111111",
        "11111111",
        "1111111111",
        "11223344",
        "121212",
        "123123",
        "123321",
        "12341234",
        "12345",
        "1234512345",
        "123456",
        "1234567",
        "12345678",
        "123456789",
        "1234567890",
        "1234567891",
        "123456789a",
        "123456abc",
        "123456qwerty",
        "1234qwer",
        "123654",
        "123abc",
        "123qwe",
        "12qwaszx",
        "159753",
        "1q2w3e4r",
        "1q2w3e4r5t",
        "1qaz2wsx",
        "555555",
        "654321",
        "666666",
        "7777777",
        "888888",
        "987654321",
        "9876543210",
        "a1b2c3d4e5",
        "aaaaaaaaaa",
        "abc123",
        "abcd1234",
        "abcdef123",
        "administrator",
        "asdfasdfasdf",
        "asdfghjkl",
        "baseball",
        "baseball1",
        "changeme",
        "charlie123",
        "computer",
        "default",
        "dragon",
        "football",
        "football1",
        "freedom123",
        "hello12345",
        "iloveyou",
        "iloveyou123",
        "internet",
        "jordan2323",
        "letmein",
        "letmein123",
        "lovely",
        "master",
        "michael",
        "monkey",
        "mynoob",
        "p@ssw0rd",
        "p@ssword",
        "passw0rd",
        "password",
        "password!",
        "password1",
        "password12",
        "password123",
        "password1234",
        "passwordpassword",
        "princess",
        "princess1",
        "q1w2e3r4t5",
        "qazwsxedc",
        "qwerty",
        "qwerty1",
        "qwerty123",
        "qwerty1234",
        "qwerty12345",
        "qwertyuiop",
        "qwertyuiop1",
        "secret",
        "shadow",
        "starwars",
        "sunshine",
        "sunshine1",
        "superman",
        "trustno1",
        "trustno11",
        "welcome",
        "welcome123",
        "whatever",
        "zaq12wsx",
        "zxcvbnm",
    ]
}
