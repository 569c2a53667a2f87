/// RedeemKit's release, which is Redeem's (CHANGELOG.md): the `redeem` command's `--version`.
/// RepositoryTests holds it equal to the services' `Build.version`.
public enum RedeemKitVersion {
    public static let version = "1.0.0"
}
