package dev.redeem.android

// The values an app sees, read from the gateway's JSON (docs/api.md) by [RedeemJson]. Closed sets
// the server may grow (statuses, kinds) read a value this version does not know as `UNKNOWN`.

/** An amount of money: a decimal string ("4.99") and an ISO 4217 currency. */
data class Money(val amount: String, val currency: String)

/** A length of time: `unit` is `day`, `week`, `month` or `year`. */
data class CouponDuration(val unit: String, val count: Int)

/** The signed-in account. [managementUrl] is where the user manages their store subscription
 * (RevenueCat's `management_url`), read by `GET /v1/me` only; null without one. */
data class Account(
    val id: String,
    val email: String?,
    val appUserId: String,
    val emailVerified: Boolean?,
    val managementUrl: String?
)

/** A session's tokens; [expiresAt] (ISO 8601) is the access token's expiry. */
data class Session(val accessToken: String, val refreshToken: String, val expiresAt: String)

/** The answer of sign-up, sign-in, refresh and the sign-in code exchange. */
data class AuthResult(val account: Account, val session: Session)

/** What a coupon gives. */
enum class CouponKind { FREE_PERIOD, PERCENT_OFF, AMOUNT_OFF, UNKNOWN }

/** A coupon as end users see it. */
data class CouponInfo(
    val code: String,
    val kind: CouponKind,
    val percentOff: Int?,
    val amountOff: Money?,
    val duration: CouponDuration,
    val periodCount: Int?,
    val entitlementId: String?
)

/** The Google Play side of a discount: the offer to launch and the account id to launch it with. */
data class PlayHandoff(val offerId: String?, val offerTags: List<String>, val obfuscatedAccountId: String?)

/**
 * The answer of [RedeemClient.validateCoupon]. A refused code is `valid == false` with the
 * server's [reason]; [error] is the same refusal as the exception redeem would throw.
 */
data class CouponCheck(
    val valid: Boolean,
    val reason: String?,
    val coupon: CouponInfo?,
    val eligibleProductIds: List<String>,
    val basePlanIdsByProduct: Map<String, List<String>>,
    val playStore: PlayHandoff?,
    /** For `webOnly`: the redeem page for the code, to open in the browser (null otherwise). */
    val redeemUrl: String? = null,
    /** The product the check was asked about, if any. */
    val productId: String? = null
) {
    /**
     * The Play base plans of [productId] whose offer is live, to launch one of them; empty when the
     * coupon is not a Play discount or none is ready. Without a product id: the one asked about, or
     * the only plan there is.
     */
    fun basePlanIds(productId: String? = this.productId): List<String> {
        val product = productId ?: basePlanIdsByProduct.keys.singleOrNull() ?: return emptyList()
        return basePlanIdsByProduct[product] ?: emptyList()
    }

    /** The refusal as an exception (null when valid). */
    val error: CouponException?
        get() = reason?.let { CouponException.of(it, refusalSentences[it] ?: it, redeemUrl) }

    companion object {
        /** The server's sentence per refusal reason (`RefusalReason.sentence`). */
        val refusalSentences = mapOf(
            "notFound" to "There is no coupon with this code.",
            "inactive" to "This coupon is no longer active.",
            "notStarted" to "This coupon can't be used yet.",
            "expired" to "This coupon has expired.",
            "exhausted" to "This coupon has been used up.",
            "alreadyRedeemed" to "You have already redeemed this coupon.",
            "notEligible" to "This coupon doesn't apply to your account, platform or product.",
            "notReady" to "This offer isn't available in the store yet; try again later.",
            "alreadyOwned" to "Your store account already has this plan, so this coupon can't be used for it.",
            "webOnly" to "This coupon can be redeemed on the web only.",
            "mistyped" to "This code has a typing error: check each character and try again.",
            "codeUsed" to "This code has already been used."
        )
    }
}

/** Where a redemption is: `RESERVED` → `GRANTING` → `COMPLETED` | `FAILED`, or `RELEASED`. */
enum class RedemptionStatus {
    RESERVED, GRANTING, COMPLETED, FAILED, RELEASED, UNKNOWN;

    /** Whether it will change no more (where a long poll stops). */
    val isSettled: Boolean
        get() = this == COMPLETED || this == FAILED || this == RELEASED
}

/** What a completed free period granted. */
data class GrantedEntitlement(val entitlementId: String, val expiresAt: String)

/** A redemption of a coupon by the signed-in account. */
data class Redemption(
    val redemptionId: String,
    val code: String,
    val status: RedemptionStatus,
    val platform: String,
    val productId: String?,
    val pricePaid: Money?,
    val sandbox: Boolean,
    val entitlement: GrantedEntitlement?,
    val failureReason: String?,
    val playStore: PlayHandoff?
)

/** One active entitlement and where it comes from (`source`: `play_store`, `revenuecat`, `local`, …). */
data class Entitlement(val entitlementId: String, val expiresAt: String, val sandbox: Boolean, val source: String)

/** The account's active entitlements; [partial] when the store could not be read in time. */
data class Entitlements(val data: List<Entitlement>, val partial: Boolean) {
    /** Whether [entitlementId] is active (sandbox grants count only when [sandbox] is true). */
    fun isActive(entitlementId: String, sandbox: Boolean = false): Boolean =
        data.any { it.entitlementId == entitlementId && (sandbox || !it.sandbox) }
}

/** An error body of the API. */
data class ApiError(val status: Int, val code: String, val message: String?, val field: String?, val redeemUrl: String? = null)
