/// A setting that could not be read. The message names the variable and what was wrong, so a
/// service can print it and exit at start instead of misbehaving later.
public struct ConfigError: Error, CustomStringConvertible, Sendable {
    public let variable: String
    public let problem: String
    public var description: String { "\(variable): \(problem)" }

    public init(variable: String, problem: String) {
        self.variable = variable
        self.problem = problem
    }
}
