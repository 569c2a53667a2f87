package dev.redeem.android

import org.json.JSONObject
import java.io.File
import java.net.URLEncoder

/**
 * Redeem for Android and the JVM: sign-in, coupons with the Google Play hand-off, redemptions that
 * survive a relaunch, and entitlements, over the gateway's HTTP API (docs/api.md).
 *
 * Every `suspend` call does its blocking HTTP on the client's own I/O threads, so it may be called
 * from any coroutine (Android's main thread included). Calls are not cancellable mid-request: a
 * cancelled caller's request still runs to its timeout.
 *
 * @param baseUrl the gateway, such as `https://redeem.example.com`
 * @param pendingStore where redemptions in progress are kept across launches
 * @param session a session the app kept from an earlier launch, if any
 * @param timeoutMillis how long one request may take (a long poll adds its wait)
 */
class RedeemClient(
    val baseUrl: String,
    private val pendingStore: PendingStore,
    session: Session? = null,
    timeoutMillis: Int = 30_000
) {
    /** A client keeping its pending redemptions in `redeem-pending.json` under [directory]
     * (on Android, `context.filesDir`). */
    constructor(baseUrl: String, directory: File, session: Session? = null) :
        this(baseUrl, FilePendingStore(File(directory, "redeem-pending.json")), session)

    private val transport = Transport(baseUrl, timeoutMillis)
    private val pendingLock = Any()

    /** The current session; null when signed out. */
    @Volatile
    var session: Session? = session
        private set

    /** Called with each new session (null at sign-out), so the app can keep it (encrypted). */
    @Volatile
    var onSessionChange: ((Session?) -> Unit)? = null

    // MARK: Sign-in

    /** Makes an account with an email and a password, and signs in to it. */
    suspend fun signUp(email: String, password: String): AuthResult =
        signedIn(onIoThread { transport.json("POST", "/v1/accounts", JSONObject().put("email", email).put("password", password)) })

    /** Signs in with an email and a password. */
    suspend fun signIn(email: String, password: String): AuthResult =
        signedIn(onIoThread { transport.json("POST", "/v1/sessions", JSONObject().put("email", email).put("password", password)) })

    /** Starts Sign in with Apple (Android has no native API): open the flow's `url` in a Custom Tab. */
    fun startAppleSignIn(returnUrl: String): AppleSignInFlow = AppleSignInFlow.start(baseUrl, returnUrl)

    /** Finishes Sign in with Apple with the deep link the flow came back to (`…?code=`). */
    suspend fun completeAppleSignIn(callbackUrl: String, flow: AppleSignInFlow): AuthResult =
        exchangeSignInCode(AppleSignInFlow.codeIn(callbackUrl), flow.codeVerifier)

    /** Exchanges a one-time sign-in code for a session (`POST /v1/sessions/exchange`). */
    suspend fun exchangeSignInCode(code: String, codeVerifier: String): AuthResult = signedIn(onIoThread {
        transport.json("POST", "/v1/sessions/exchange", JSONObject().put("code", code).put("codeVerifier", codeVerifier))
    })

    /** Rotates the session's refresh token for a new pair. */
    suspend fun refreshSession(): AuthResult {
        val current = session ?: throw notSignedIn()
        return signedIn(onIoThread {
            transport.json("POST", "/v1/sessions/refresh", JSONObject().put("refreshToken", current.refreshToken))
        })
    }

    /** Signs out at the server and forgets the session. */
    suspend fun signOut() {
        val current = session ?: return
        onIoThread {
            val answer = transport.send("DELETE", "/v1/sessions/current", token = current.accessToken)
            if (answer.status !in 200..299 && answer.status != 401) throw Transport.apiError(answer)
        }
        setSession(null)
    }

    /** The signed-in account, with its [Account.managementUrl]. */
    suspend fun account(): Account = RedeemJson.account(authorized("GET", "/v1/me"))

    /** Where the user manages their store subscription (null when there is nowhere to send them). */
    suspend fun managementUrl(): String? = account().managementUrl

    // MARK: Coupons

    /**
     * Checks [code] for this account on Android. For a Play discount, the answer names the base
     * plans whose offer is live ([CouponCheck.basePlanIds] of [productId]).
     */
    suspend fun validateCoupon(code: String, productId: String? = null): CouponCheck {
        val body = JSONObject().put("code", code).put("platform", "android")
        return RedeemJson.couponCheck(authorized("POST", "/v1/coupons/validate", body), productId)
    }

    /**
     * Redeems [code] for [productId]'s [basePlanId]. A free period is granted by the server: the
     * answer is `GRANTING` or `COMPLETED` ([awaitCouponCompletion] waits). A Play discount reserves
     * a use, hands the offer to [launcher], posts the purchase token the app reports back and
     * answers the completed redemption; `ITEM_ALREADY_OWNED` gives the use back and throws
     * [CouponException.AlreadyOwned]. The redemption is a [PendingRedemption] until it settles, so a
     * relaunch finishes it ([resumePending]).
     *
     * @param productId the Redeem plan (as validate names it in `basePlanIds`)
     * @param basePlanId the Play base plan to buy, one of [CouponCheck.basePlanIds]
     * @param playProductId the plan's Play subscription product id, when it is not [productId]
     * @throws CouponException a refusal (`OfferNotAvailableYet` while the Play offer is not live)
     */
    suspend fun redeemCoupon(
        launcher: PlayBillingLauncher,
        code: String,
        productId: String,
        basePlanId: String,
        playProductId: String = productId
    ): Redemption {
        val body = JSONObject().put("code", code).put("platform", "android").put("productId", productId)
        val reserved = RedeemJson.redemption(authorized("POST", "/v1/redemptions", body))
        val play = reserved.playStore
        if (reserved.status != RedemptionStatus.RESERVED || play == null) return reserved
        val offerId = play.offerId
        val account = play.obfuscatedAccountId
        if (offerId == null || account == null) {
            throw RedeemNetworkException("the server reserved ${reserved.redemptionId} without a Play offer to launch")
        }
        val pending = PendingRedemption(reserved.redemptionId, reserved.code, productId, basePlanId, playProductId = playProductId)
        onIoThread { remember(pending) }
        val outcome = launcher.launch(PlayOfferLaunch(playProductId, basePlanId, offerId, play.offerTags, account))
        return when (outcome) {
            is PlayBillingResult.Purchased -> {
                onIoThread { remember(pending.copy(purchaseToken = outcome.purchaseToken)) }
                completePlayPurchase(reserved.redemptionId, outcome.purchaseToken)
            }
            is PlayBillingResult.AlreadyOwned -> {
                releaseAlreadyOwned(reserved.redemptionId)
                throw CouponException.AlreadyOwned(CouponCheck.refusalSentences.getValue("alreadyOwned"))
            }
            is PlayBillingResult.Cancelled ->
                throw CouponException.BillingFailed("USER_CANCELED", "The purchase was cancelled.")
            is PlayBillingResult.Failed ->
                throw CouponException.BillingFailed(outcome.responseCode.toString(), outcome.debugMessage)
        }
    }

    /**
     * Posts a Play purchase token for a redemption (`POST /v1/redemptions/{id}/purchase`): the
     * server reads the purchase from Google, acknowledges it and completes the redemption. Use it
     * also for a purchase Play reports later (`queryPurchasesAsync` after a relaunch).
     */
    suspend fun completePlayPurchase(redemptionId: String, purchaseToken: String): Redemption {
        val done = RedeemJson.redemption(
            authorized("POST", "/v1/redemptions/${path(redemptionId)}/purchase", JSONObject().put("purchaseToken", purchaseToken))
        )
        if (done.status.isSettled) onIoThread { forget(redemptionId) }
        return done
    }

    /** Gives a reserved use back because Play Billing answered `ITEM_ALREADY_OWNED`. */
    suspend fun releaseAlreadyOwned(redemptionId: String): Redemption {
        val released = RedeemJson.redemption(
            authorized("POST", "/v1/redemptions/${path(redemptionId)}/release", JSONObject().put("reason", "alreadyOwned"))
        )
        onIoThread { forget(redemptionId) }
        return released
    }

    /**
     * Waits, by long polls of at most 30 s each, until the redemption settles or [timeoutMillis]
     * pass, and answers it as it then is (check [RedemptionStatus.isSettled]). A settled one is no
     * longer pending.
     */
    suspend fun awaitCouponCompletion(redemptionId: String, timeoutMillis: Long = 60_000): Redemption {
        val deadline = System.currentTimeMillis() + timeoutMillis
        while (true) {
            val left = deadline - System.currentTimeMillis()
            val wait = maxOf(0L, minOf(30_000L, left)) / 1000
            val redemption = RedeemJson.redemption(
                authorized("GET", "/v1/redemptions/${path(redemptionId)}?wait=$wait", extraReadMillis = (wait * 1000).toInt())
            )
            if (redemption.status.isSettled) {
                onIoThread { forget(redemptionId) }
                return redemption
            }
            if (wait == 0L || System.currentTimeMillis() >= deadline) return redemption
        }
    }

    /** The redemptions this app started and has not seen settle (from the [PendingStore]). */
    suspend fun pendingRedemptions(): List<PendingRedemption> = onIoThread { synchronized(pendingLock) { pendingStore.load() } }

    /**
     * Call after launch and sign-in: finishes each pending redemption. A purchase token the app
     * reported but the client could not post is posted; for one without a token, [playPurchaseToken]
     * may answer the token of the purchase Play holds for it (`queryPurchasesAsync`, matching the
     * product and `obfuscatedAccountId`), which is then posted; otherwise the client waits up to
     * [timeoutMillis] for the server to complete it (Google's notification of a purchase made while
     * the app was away does). Answers them as they then are; those still unsettled stay pending.
     */
    suspend fun resumePending(
        timeoutMillis: Long = 30_000,
        playPurchaseToken: suspend (PendingRedemption) -> String? = { null }
    ): List<Redemption> = pendingRedemptions().map { pending ->
        val token = pending.purchaseToken ?: playPurchaseToken(pending)
        if (token != null) completePlayPurchase(pending.redemptionId, token)
        else awaitCouponCompletion(pending.redemptionId, timeoutMillis)
    }

    // MARK: Entitlements

    /** The account's active entitlements (Redeem's grants, merged with RevenueCat's when it is the provider). */
    suspend fun entitlements(): Entitlements = RedeemJson.entitlements(authorized("GET", "/v1/me/entitlements"))

    // MARK: Internals

    private suspend fun authorized(method: String, path: String, body: JSONObject? = null, extraReadMillis: Int = 0): JSONObject {
        val token = session?.accessToken ?: throw notSignedIn()
        return onIoThread {
            try {
                transport.json(method, path, body, token, extraReadMillis)
            } catch (error: RedeemApiException) {
                if (error.status == 422 && error.code in CouponException.reasons) throw CouponException.of(error.code, error.message ?: error.code)
                throw error
            }
        }
    }

    private fun signedIn(json: JSONObject): AuthResult {
        val result = RedeemJson.authResult(json)
        setSession(result.session)
        return result
    }

    private fun setSession(next: Session?) {
        session = next
        onSessionChange?.invoke(next)
    }

    private fun remember(pending: PendingRedemption) = synchronized(pendingLock) {
        pendingStore.save(pendingStore.load().filter { it.redemptionId != pending.redemptionId } + pending)
    }

    private fun forget(redemptionId: String) = synchronized(pendingLock) {
        val all = pendingStore.load()
        if (all.any { it.redemptionId == redemptionId }) pendingStore.save(all.filter { it.redemptionId != redemptionId })
    }

    private fun path(segment: String) = URLEncoder.encode(segment, "UTF-8")

    private fun notSignedIn() = RedeemApiException(401, "notIdentified", "Sign in first.")
}
