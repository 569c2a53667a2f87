package dev.redeem.android

import org.json.JSONArray
import org.json.JSONException
import org.json.JSONObject

/**
 * Reads the gateway's JSON into the client's values. Public so that the contract test decodes the
 * OpenAPI document's examples with exactly the code the client runs. A required field that is
 * missing or of another type throws [JSONException].
 */
object RedeemJson {
    fun account(o: JSONObject) = Account(
        id = o.getString("id"),
        email = o.text("email"),
        appUserId = o.getString("appUserId"),
        emailVerified = if (o.has("emailVerified") && !o.isNull("emailVerified")) o.getBoolean("emailVerified") else null,
        managementUrl = o.text("managementUrl")
    )

    fun session(o: JSONObject) = Session(o.getString("accessToken"), o.getString("refreshToken"), o.getString("expiresAt"))

    fun authResult(o: JSONObject) = AuthResult(account(o.getJSONObject("account")), session(o.getJSONObject("session")))

    fun money(o: JSONObject) = Money(o.getString("amount"), o.getString("currency"))

    fun coupon(o: JSONObject) = CouponInfo(
        code = o.getString("code"),
        kind = when (o.getString("kind")) {
            "freePeriod" -> CouponKind.FREE_PERIOD
            "percentOff" -> CouponKind.PERCENT_OFF
            "amountOff" -> CouponKind.AMOUNT_OFF
            else -> CouponKind.UNKNOWN
        },
        percentOff = o.int("percentOff"),
        amountOff = o.obj("amountOff")?.let(::money),
        duration = o.getJSONObject("duration").let { CouponDuration(it.getString("unit"), it.getInt("count")) },
        periodCount = o.int("periodCount"),
        entitlementId = o.text("entitlementId")
    )

    fun playHandoff(o: JSONObject) = PlayHandoff(
        offerId = o.text("offerId"),
        offerTags = o.array("offerTags")?.strings() ?: emptyList(),
        obfuscatedAccountId = o.text("obfuscatedAccountId")
    )

    fun couponCheck(o: JSONObject, productId: String? = null): CouponCheck {
        val plans = LinkedHashMap<String, List<String>>()
        o.obj("basePlanIds")?.let { byProduct ->
            val keys = byProduct.keys()
            while (keys.hasNext()) {
                val key = keys.next() as String
                plans[key] = byProduct.getJSONArray(key).strings()
            }
        }
        return CouponCheck(
            valid = o.getBoolean("valid"),
            reason = o.text("reason"),
            coupon = o.obj("coupon")?.let(::coupon),
            eligibleProductIds = o.array("eligibleProductIds")?.strings() ?: emptyList(),
            basePlanIdsByProduct = plans,
            playStore = o.obj("playStore")?.let(::playHandoff),
            redeemUrl = o.text("redeemUrl"),
            productId = productId
        )
    }

    fun redemption(o: JSONObject) = Redemption(
        redemptionId = o.getString("redemptionId"),
        code = o.getString("code"),
        status = when (o.getString("status")) {
            "reserved" -> RedemptionStatus.RESERVED
            "granting" -> RedemptionStatus.GRANTING
            "completed" -> RedemptionStatus.COMPLETED
            "failed" -> RedemptionStatus.FAILED
            "released" -> RedemptionStatus.RELEASED
            else -> RedemptionStatus.UNKNOWN
        },
        platform = o.getString("platform"),
        productId = o.text("productId"),
        pricePaid = o.obj("pricePaid")?.let(::money),
        sandbox = o.getBoolean("sandbox"),
        entitlement = o.obj("entitlement")?.let { GrantedEntitlement(it.getString("entitlementId"), it.getString("expiresAt")) },
        failureReason = o.text("failureReason"),
        playStore = o.obj("playStore")?.let(::playHandoff)
    )

    fun entitlements(o: JSONObject): Entitlements {
        val data = o.getJSONArray("data")
        val list = (0 until data.length()).map { i ->
            val e = data.getJSONObject(i)
            Entitlement(e.getString("entitlementId"), e.getString("expiresAt"), e.getBoolean("sandbox"), e.getString("source"))
        }
        return Entitlements(list, o.optBoolean("partial", false))
    }

    fun apiError(o: JSONObject, status: Int): ApiError {
        val e = o.getJSONObject("error")
        return ApiError(status, e.getString("code"), e.text("message"), e.text("field"), e.text("redeemUrl"))
    }

    private fun JSONObject.text(key: String): String? = if (has(key) && !isNull(key)) getString(key) else null
    private fun JSONObject.int(key: String): Int? = if (has(key) && !isNull(key)) getInt(key) else null
    private fun JSONObject.obj(key: String): JSONObject? = if (has(key) && !isNull(key)) getJSONObject(key) else null
    private fun JSONObject.array(key: String): JSONArray? = if (has(key) && !isNull(key)) getJSONArray(key) else null
    private fun JSONArray.strings(): List<String> = (0 until length()).map { getString(it) }
}
