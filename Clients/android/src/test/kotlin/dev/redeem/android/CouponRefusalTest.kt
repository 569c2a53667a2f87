package dev.redeem.android

import com.sun.net.httpserver.HttpServer
import org.json.JSONObject
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Test
import java.net.InetSocketAddress

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
        // A gateway that refuses every redemption with the error body it is given.
        var refusal = """{"error": {"code": "webOnly", "message": "Redeem this code on the web.", "redeemUrl": "$page"}}"""
        val server = HttpServer.create(InetSocketAddress("127.0.0.1", 0), 0)
        server.createContext("/v1/redemptions") { exchange ->
            val body = refusal.toByteArray()
            exchange.responseHeaders.add("Content-Type", "application/json")
            exchange.sendResponseHeaders(422, body.size.toLong())
            exchange.responseBody.use { it.write(body) }
        }
        server.start()
        try {
            val client = RedeemClient("http://127.0.0.1:${server.address.port}", MemoryPendingStore(),
                Session("access", "refresh", "2030-01-01T00:00:00Z"))
            val webOnly = assertThrows(CouponException.Rejected::class.java) {
                blocking { client.redeemCoupon(NoLauncher, "SPRING-25", "pro.monthly", "monthly") }
            }
            assertEquals("webOnly", webOnly.reason)
            assertEquals(page, webOnly.redeemUrl)
            assertEquals("Redeem this code on the web.", webOnly.message)

            refusal = """{"error": {"code": "exhausted", "message": "This coupon has been used up."}}"""
            val plain = assertThrows(CouponException.Rejected::class.java) {
                blocking { client.redeemCoupon(NoLauncher, "SPRING-25", "pro.monthly", "monthly") }
            }
            assertEquals("exhausted", plain.reason)
            assertNull(plain.redeemUrl)
        } finally {
            server.stop(0)
        }
    }
}
