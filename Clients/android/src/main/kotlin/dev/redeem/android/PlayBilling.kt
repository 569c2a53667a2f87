package dev.redeem.android

/**
 * What the app launches with Play Billing for a discount: the Play subscription's [productId] and
 * its [basePlanId], the coupon's [offerId] (find its `offerToken` in `ProductDetails` by id, or by
 * [offerTags]), and the [obfuscatedAccountId] to pass to
 * `BillingFlowParams.Builder.setObfuscatedAccountId`, which is how the server knows the purchase is
 * this account's.
 */
data class PlayOfferLaunch(
    val productId: String,
    val basePlanId: String,
    val offerId: String,
    val offerTags: List<String>,
    val obfuscatedAccountId: String
)

/** How a Play Billing flow ended, as the app reports it. */
sealed class PlayBillingResult {
    /** Play sold the offer: `Purchase.getPurchaseToken()`. */
    data class Purchased(val purchaseToken: String) : PlayBillingResult()

    /** `BillingResponseCode.ITEM_ALREADY_OWNED`: the client gives the coupon's use back. */
    object AlreadyOwned : PlayBillingResult()

    /** `BillingResponseCode.USER_CANCELED`. */
    object Cancelled : PlayBillingResult()

    /** Any other response code, with Play's debug message. */
    data class Failed(val responseCode: Int, val debugMessage: String) : PlayBillingResult()
}

/**
 * The app's Play Billing: Redeem never links the Play Billing Library, so the app keeps its own
 * `BillingClient`, activity and version of it. [launch] shows Play's purchase sheet for the offer
 * and suspends until `onPurchasesUpdated` reports how it ended (README: an implementation).
 */
interface PlayBillingLauncher {
    suspend fun launch(offer: PlayOfferLaunch): PlayBillingResult
}
