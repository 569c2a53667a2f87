package dev.redeem.android

import org.json.JSONObject
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/**
 * Refusals as the server words them: `webOnly` (validate's `reason` with `redeemUrl`, redeem's 422
 * with `error.redeemUrl`) is a [CouponException.Rejected] carrying the page; a server that sends
 * no `redeemUrl` still reads.
 */
class CouponRefusalTest {
    private val page = "https://redeem.example.com/redeem?code=SPRING-25"

    @Test
    fun validatesWebOnlyRefusalCarriesTheRedeemPage() {
        val check = RedeemJson.couponCheck(JSONObject(
            """{"valid": false, "reason": "webOnly", "redeemUrl": "$page", "eligibleProductIds": []}"""))
        assertEquals("webOnly", check.reason)
        assertEquals(page, check.redeemUrl)
        val error = check.error as CouponException.Rejected
        assertEquals("webOnly", error.reason)
        assertEquals(page, error.redeemUrl)
        assertEquals("This coupon can be redeemed on the web only.", error.message)

        val older = RedeemJson.couponCheck(JSONObject("""{"valid": false, "reason": "expired", "eligibleProductIds": []}"""))
        assertNull(older.redeemUrl)
        assertNull((older.error as CouponException.Rejected).redeemUrl)
    }

    @Test
    fun redeemsWebOnlyErrorCarriesTheRedeemPage() {
        val body = JSONObject("""{"error": {"code": "webOnly", "message": "Redeem this code on the web.", "redeemUrl": "$page"}}""")
        val error = RedeemJson.apiError(body, 422)
        val refusal = CouponException.of(error.code, error.message!!, error.redeemUrl)
        assertTrue(refusal is CouponException.Rejected)
        assertEquals("webOnly", refusal.reason)
        assertEquals(page, (refusal as CouponException.Rejected).redeemUrl)
        assertEquals("Redeem this code on the web.", refusal.message)
        assertTrue("webOnly" in CouponException.reasons, "a 422 webOnly is a coupon's refusal")

        val plain = RedeemJson.apiError(JSONObject("""{"error": {"code": "exhausted", "message": "Used up."}}"""), 422)
        assertNull(plain.redeemUrl)
        assertTrue(CouponException.of(plain.code, plain.message!!, plain.redeemUrl) is CouponException.Rejected)
    }
}
