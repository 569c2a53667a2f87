import Foundation
import Testing

@testable import RedeemKit

/// A Mac app is an App Store app: `ios` on the wire, as universal purchase makes one app of the
/// iPhone, iPad and Mac ones. Only other systems are `web`.
@Suite struct PlatformTests {
    @Test func everyAppleSystemIsTheAppStore() {
        for system in ["iOS", "macOS", "visionOS", "tvOS", "watchOS"] {
            #expect(Platform.platform(ofOperatingSystem: system) == .ios, "\(system)")
        }
        #expect(Platform.platform(ofOperatingSystem: "Android") == .android)
        #expect(Platform.platform(ofOperatingSystem: "other") == .web)
    }

    @Test func thisSystemMapsAsItsName() {
        #expect(Platform.current == Platform.platform(ofOperatingSystem: Platform.operatingSystem))
        #if os(Linux)
        #expect(Platform.current == .web)
        #elseif os(macOS)
        #expect(Platform.current == .ios)
        #endif
    }
}
