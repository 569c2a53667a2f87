import XCTest
import TestSupport

// In the test target, not TestSupport: TestSupport is also built into release tools
// (`bench-tokens`), where XCTest does not exist.

/// An XCTest suite that starts what it needs once (`startSuite`, from the class `setUp`) and stops
/// it in `stopSuite`. When the start fails, each of its tests fails with the reason, and the other
/// suites in the process still run.
open class StackTestCase: XCTestCase {
    /// Starts the suite's stack and fakes (override; throwing fails the suite's tests).
    open class func startSuite() throws {}
    /// Stops what `startSuite` started, also what it started before it failed (override).
    open class func stopSuite() {}

    override open class func setUp() {
        super.setUp()
        SuiteStart.run(self) { try startSuite() }
    }

    override open class func tearDown() {
        stopSuite()
        super.tearDown()
    }

    override open func setUpWithError() throws {
        try super.setUpWithError()
        try SuiteStart.check(type(of: self))
    }
}
