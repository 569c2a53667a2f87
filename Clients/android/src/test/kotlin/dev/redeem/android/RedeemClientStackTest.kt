package dev.redeem.android

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.json.JSONObject
import java.io.File
import java.util.UUID

/**
 * The client against the real stack (started by AndroidClientTests with the fake Play Developer
 * API, Google's token endpoint and RevenueCat). Each test makes its own account, plan and coupon.
 */
class RedeemClientStackTest {
    @Test
    fun signUpThenSignInOnAnotherClientReachesTheSameAccount() {
        val (first, email) = signedUpClient()
        val mine = blocking { first.account() }
        assertEquals(email, mine.email)
        val second = RedeemClient(StackEnv.gateway, MemoryPendingStore())
        val result = blocking { second.signIn(email, "a long android passphrase") }
        assertEquals(mine.id, result.account.id)
        assertEquals(mine.appUserId, blocking { second.account() }.appUserId)
        assertEquals(result.session, second.session)
        // RevenueCat knows no store subscription of this account: nowhere to manage one.
        assertNull(blocking { second.managementUrl() })

        val wrong = assertThrows(RedeemApiException::class.java) {
            blocking { RedeemClient(StackEnv.gateway, MemoryPendingStore()).signIn(email, "not the passphrase") }
        }
        assertEquals(401, wrong.status)
        assertEquals("invalidCredentials", wrong.code)
        val guest = assertThrows(RedeemApiException::class.java) {
            blocking { RedeemClient(StackEnv.gateway, MemoryPendingStore()).validateCoupon("ANY") }
        }
        assertEquals("notIdentified", guest.code)
        blocking { second.signOut() }
        assertNull(second.session)
        val out = assertThrows(RedeemApiException::class.java) { blocking { second.account() } }
        assertEquals("notIdentified", out.code)
    }

    @Test
    fun aClientWithAnAppIdReachesThatAppsCoupons() {
        val made = Operator.call("POST", "/v1/apps", JSONObject().put("name", "Android app"))
        assertEquals(201, made.status, made.text)
        val app = made.json().getString("id")
        val code = StackEnv.unique("APP")
        val coupon = JSONObject().put("code", code).put("kind", "freePeriod")
            .put("duration", JSONObject().put("unit", "month").put("count", 1)).put("allowInApp", true)
        val created = Operator.call("POST", "/v1/coupons", coupon, app = app)
        assertEquals(201, created.status, created.text)
        val (plain, _) = signedUpClient()
        val elsewhere = blocking { plain.validateCoupon(code) }
        assertFalse(elsewhere.valid)
        assertEquals("notFound", elsewhere.reason)
        val inApp = RedeemClient(StackEnv.gateway, MemoryPendingStore(), plain.session, appId = app)
        assertTrue(blocking { inApp.validateCoupon(code) }.valid)
    }

    @Test
    fun aPlaySubscriberSeesWhereToManageItAndItsStoreEntitlement() {
        // The suite gave RevenueCat an active Play subscription for this account.
        val client = RedeemClient(StackEnv.gateway, MemoryPendingStore())
        blocking { client.signIn(StackEnv.subscriberEmail, StackEnv.subscriberPassword) }
        assertEquals("https://play.google.com/store/account/subscriptions", blocking { client.managementUrl() })
        val entitlements = blocking { client.entitlements() }
        assertTrue(entitlements.data.any { it.entitlementId == "pro" && it.source == "play_store" }, entitlements.toString())
        assertTrue(entitlements.isActive("pro"))
    }

    @Test
    fun validateNamesTheBasePlansWhoseOfferIsLive() {
        val (code, plan) = Operator.readyDiscount()
        val (client, _) = signedUpClient()
        val check = blocking { client.validateCoupon(code, plan) }
        assertTrue(check.valid, check.toString())
        assertEquals(listOf(StackEnv.basePlan), check.basePlanIds())
        assertEquals(listOf(StackEnv.basePlan), check.basePlanIds(plan))
        assertEquals(emptyList<String>(), check.basePlanIds("some.other.plan"))
        assertEquals(CouponKind.PERCENT_OFF, check.coupon?.kind)
        assertEquals(30, check.coupon?.percentOff)
        assertNotNull(check.playStore?.offerId)
        assertTrue(check.playStore!!.offerTags.contains("redeem-coupon"))
        assertNull(check.error)

        val unknown = blocking { client.validateCoupon("NO-SUCH-" + UUID.randomUUID().toString().substring(0, 8)) }
        assertFalse(unknown.valid)
        assertEquals("notFound", unknown.reason)
        assertTrue(unknown.error is CouponException.Rejected)
    }

    @Test
    fun aPlayDiscountIsBoughtPostedAndAwaitedToCompleted() {
        val (code, plan) = Operator.readyDiscount()
        val (client, _) = signedUpClient()
        val launcher = FakePlayLauncher()
        val redemption = blocking { client.redeemCoupon(launcher, code, plan, StackEnv.basePlan, StackEnv.playProduct) }
        assertEquals(RedemptionStatus.COMPLETED, redemption.status, redemption.toString())
        assertEquals(Money("6.99", "USD"), redemption.pricePaid, "the offer's price at Google: 30 % off 9.99")
        val launch = launcher.launches.single()
        assertEquals(StackEnv.playProduct, launch.productId)
        assertEquals(StackEnv.basePlan, launch.basePlanId)
        assertEquals(64, launch.obfuscatedAccountId.length)
        assertEquals(blocking { client.validateCoupon(code, plan) }.reason, "alreadyRedeemed")
        val awaited = blocking { client.awaitCouponCompletion(redemption.redemptionId, 10_000) }
        assertEquals(RedemptionStatus.COMPLETED, awaited.status)
        assertEquals(redemption.redemptionId, awaited.redemptionId)
        assertTrue(blocking { client.pendingRedemptions() }.isEmpty())
    }

    @Test
    fun itemAlreadyOwnedGivesTheUseBack() {
        // The account buys the subscription through one coupon; Play then refuses a second offer
        // of the same product as ITEM_ALREADY_OWNED.
        val plan = Operator.playPlan()
        val (first, _) = Operator.readyDiscount(plan)
        val (second, _) = Operator.readyDiscount(plan, cap = 1)
        val (client, _) = signedUpClient()
        val launcher = FakePlayLauncher()
        val bought = blocking { client.redeemCoupon(launcher, first, plan, StackEnv.basePlan, StackEnv.playProduct) }
        assertEquals(RedemptionStatus.COMPLETED, bought.status)
        assertEquals(0, Operator.coupon(second).getInt("reservedCount") + Operator.coupon(second).getInt("redeemedCount"))
        assertThrows(CouponException.AlreadyOwned::class.java) {
            blocking { client.redeemCoupon(launcher, second, plan, StackEnv.basePlan, StackEnv.playProduct) }
        }
        assertEquals(2, launcher.launches.size)
        val coupon = Operator.coupon(second)
        assertEquals(1, coupon.getInt("remaining"), coupon.toString())
        assertEquals(0, coupon.getInt("reservedCount"), coupon.toString())
        val rows = Operator.call("GET", "/v1/coupons/$second/redemptions").json().getJSONArray("data")
        assertEquals("released", rows.getJSONObject(0).getString("status"))
        assertTrue(blocking { client.pendingRedemptions() }.isEmpty())
    }

    @Test
    fun anOfferNotLiveYetIsOfferNotAvailableYet() {
        // A base plan Google doesn't have: the offer is never made, so never ready.
        val plan = Operator.playPlan(listOf("missing-" + UUID.randomUUID().toString().substring(0, 8)))
        val code = Operator.discount(plan)
        val (client, _) = signedUpClient()
        val check = blocking { client.validateCoupon(code, plan) }
        assertFalse(check.valid)
        assertEquals("notReady", check.reason)
        assertTrue(check.error is CouponException.OfferNotAvailableYet)
        val refused = assertThrows(CouponException.OfferNotAvailableYet::class.java) {
            blocking { client.redeemCoupon(NoLauncher, code, plan, "missing") }
        }
        assertEquals("notReady", refused.reason)
        assertEquals(0, Operator.coupon(code).getInt("reservedCount"))
    }

    @Test
    fun aFreePeriodIsGrantedWithoutPlayAndShowsInEntitlements() {
        val code = StackEnv.unique("FREE")
        val entitlement = "pro-" + code.toLowerCase()
        val made = Operator.call("POST", "/v1/coupons", JSONObject().put("code", code).put("kind", "freePeriod")
            .put("duration", JSONObject().put("unit", "month").put("count", 1)).put("entitlementId", entitlement))
        assertEquals(201, made.status, made.text)
        val (client, _) = signedUpClient()
        assertFalse(blocking { client.entitlements() }.isActive(entitlement))
        val redemption = blocking { client.redeemCoupon(NoLauncher, code, "pro.any", "none") }
        assertTrue(redemption.status == RedemptionStatus.GRANTING || redemption.status == RedemptionStatus.COMPLETED, redemption.toString())
        val done = blocking { client.awaitCouponCompletion(redemption.redemptionId, 20_000) }
        assertEquals(RedemptionStatus.COMPLETED, done.status, done.toString())
        assertEquals(entitlement, done.entitlement?.entitlementId)
        val entitlements = blocking { client.entitlements() }
        assertTrue(entitlements.isActive(entitlement), entitlements.toString())
        assertEquals(done.entitlement?.expiresAt?.substring(0, 16), entitlements.data.first { it.entitlementId == entitlement }.expiresAt.substring(0, 16))
    }

    @Test
    fun aPendingRedemptionSurvivesARelaunch() {
        val (code, plan) = Operator.readyDiscount()
        val file = File(StackEnv.stateDirectory, "pending-${UUID.randomUUID()}.json")
        val (before, _) = signedUpClient(FilePendingStore(file))
        // The process dies while Play's sheet is up, after Play took the purchase.
        val launcher = FakePlayLauncher(dieAfterBuying = true)
        assertThrows(FakePlayLauncher.AppKilled::class.java) {
            blocking { before.redeemCoupon(launcher, code, plan, StackEnv.basePlan, StackEnv.playProduct) }
        }
        assertTrue(file.exists())

        // The next launch: a new client over the same file and the kept session.
        val after = RedeemClient(StackEnv.gateway, FilePendingStore(file), before.session)
        val pending = blocking { after.pendingRedemptions() }.single()
        assertEquals(code, pending.code)
        assertEquals(plan, pending.productId)
        assertEquals(StackEnv.basePlan, pending.basePlanId)
        assertEquals(StackEnv.playProduct, pending.playProductId)
        assertNull(pending.purchaseToken)
        // Nobody posted the purchase yet: a short await times out and leaves it pending.
        val waiting = blocking { after.awaitCouponCompletion(pending.redemptionId, 1_500) }
        assertEquals(RedemptionStatus.RESERVED, waiting.status)
        assertEquals(1, blocking { after.pendingRedemptions() }.size)
        // Play's queryPurchasesAsync finds the purchase of the plan's Play product; the client posts it.
        val resumed = blocking { after.resumePending(5_000) { p -> p.playProductId?.let { launcher.tokens[it] } } }
        assertEquals(RedemptionStatus.COMPLETED, resumed.single().status, resumed.toString())
        assertEquals(pending.redemptionId, resumed.single().redemptionId)
        assertTrue(blocking { RedeemClient(StackEnv.gateway, FilePendingStore(file), before.session).pendingRedemptions() }.isEmpty())
    }
}
