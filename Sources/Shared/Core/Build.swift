/// What this build of Redeem is: one version for the four services, the CLI and the MCP server
/// (CHANGELOG.md), shown by `redeem_build_info` and the MCP `serverInfo`.
public enum Build {
    public static let version = "1.0.0"
}
