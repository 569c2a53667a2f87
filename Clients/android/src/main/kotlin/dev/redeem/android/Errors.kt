package dev.redeem.android

/** Anything a call of [RedeemClient] can fail with. */
open class RedeemException(message: String, cause: Throwable? = null) : Exception(message, cause)

/**
 * The server answered with an error: its HTTP [status], its machine [code] (`invalidToken`,
 * `notFound`, `invalid`, …: docs/api.md), its sentence for people, the [field] it names, if any,
 * and the request id to quote to the operator.
 */
class RedeemApiException(
    val status: Int,
    val code: String,
    message: String,
    val field: String? = null,
    val requestId: String? = null,
    /** `webOnly`'s redeem page (read into [CouponException.Rejected.redeemUrl]). */
    internal val redeemUrl: String? = null
) : RedeemException(message)

/** The server could not be reached, or answered something that is not the API's JSON. */
class RedeemNetworkException(message: String, cause: Throwable? = null) : RedeemException(message, cause)

/**
 * A coupon that can't be redeemed, or a store hand-off that did not end in a purchase. [reason]
 * is the server's refusal reason (`notFound`, `expired`, `notReady`, `alreadyOwned`, …), and the
 * message its sentence for people.
 */
sealed class CouponException(val reason: String, message: String) : RedeemException(message) {
    /** `notReady`: the coupon's Google Play offer is not live yet; try again later. */
    class OfferNotAvailableYet(message: String) : CouponException("notReady", message)

    /**
     * `alreadyOwned`: the store account already holds this plan. The server said so before any
     * purchase, or Play Billing answered `ITEM_ALREADY_OWNED` (the use was then given back).
     */
    class AlreadyOwned(message: String) : CouponException("alreadyOwned", message)

    /**
     * Any other refusal: the code does not exist, expired, was used up, was redeemed already…
     * For `webOnly` (a free period Redeem grants, which App Review lets only the web redeem),
     * [redeemUrl] is the redeem page for the code: open it in the browser. Null for other reasons,
     * and from a server that does not send it.
     */
    class Rejected(reason: String, message: String, val redeemUrl: String? = null) : CouponException(reason, message)

    /**
     * Play Billing ended without a purchase ([PlayBillingResult.Cancelled] or
     * [PlayBillingResult.Failed]). The reservation stays pending until the server gives it up.
     */
    class BillingFailed(val responseCode: String, message: String) : CouponException("billing", message)

    companion object {
        /** The exception for a refusal reason and its sentence. */
        fun of(reason: String, message: String, redeemUrl: String? = null): CouponException = when (reason) {
            "notReady" -> OfferNotAvailableYet(message)
            "alreadyOwned" -> AlreadyOwned(message)
            else -> Rejected(reason, message, redeemUrl)
        }

        /** The refusal reasons the server has (`RefusalReason`): a 422 with one of them is a coupon's. */
        val reasons = setOf(
            "notFound", "inactive", "notStarted", "expired", "exhausted", "alreadyRedeemed", "notEligible",
            "notReady", "alreadyOwned", "webOnly"
        )
    }
}
