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
 * An access token lasts minutes. A call the server refuses with `invalidToken` (the token
 * expired) refreshes the session once and is sent again; calls refused together share that one
 * refresh. A refresh the server refuses (the session was revoked or ended) signs the client out:
 * [session] becomes null, [onSessionChange] hears it, and the call throws the refusal.
 *
 * @param baseUrl the gateway, such as `https://redeem.example.com`
 * @param pendingStore where redemptions in progress are kept across launches
 * @param session a session the app kept from an earlier launch, if any
 * @param timeoutMillis how long one request may take (a long poll adds its wait)
 * @param appId the app's id in a deployment that serves several apps, sent as `Redeem-App` with
 *   every call (codes, redemptions and entitlements are then that app's); null for the default app
 */
class RedeemClient(
    val baseUrl: String,
    private val pendingStore: PendingStore,
    session: Session? = null,
    timeoutMillis: Int = 30_000,
    val appId: String? = null
) {
    /** A client keeping its pending redemptions in `redeem-pending.json` under [directory]
     * (on Android, `context.filesDir`). */
    constructor(baseUrl: String, directory: File, session: Session? = null) :
        this(baseUrl, FilePendingStore(File(directory, "redeem-pending.json")), session)

    private val transport = Transport(baseUrl, timeoutMillis, appId)
    private val pendingLock = Any()
    private val refreshLock = Any()

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

    /**
     * Rotates the session's refresh token for a new pair (calls do it on their own when the access
     * token has expired). A refresh token the server refuses signs the client out.
     */
    suspend fun refreshSession(): AuthResult = onIoThread {
        synchronized(refreshLock) { refresh(session ?: throw notSignedIn()) }
    }

    /** Signs out at the server (refreshing an expired access token to do so) and forgets the session. */
    suspend fun signOut() {
        if (session == null) return
        try {
            authorizedAnswer("DELETE", "/v1/sessions/current")
        } catch (error: RedeemApiException) {
            if (error.status != 401) throw error
        }
        if (session != null) setSession(null)
    }

    /** The signed-in account, with its [Account.managementUrl]. */
    suspend fun account(): Account = RedeemJson.account(authorized("GET", "/v1/me"))

    /** Where the user manages their store subscription (null when there is nowhere to send them). */
    suspend fun managementUrl(): String? = account().managementUrl

    // MARK: Email verification and password reset

    /**
     * Mails a verification code (`ev_…`, 24 hours) to the signed-in account's email
     * (`POST /v1/me/email/verify`); the user pastes it into the app, which passes it to
     * [verifyEmail]. 409 `invalidState` when the email is verified already or the account has
     * none; 403 `mailNotConfigured` when the server sends no mail.
     */
    suspend fun requestEmailVerification() {
        authorizedAnswer("POST", "/v1/me/email/verify")
    }

    /**
     * Verifies the email with the mailed [code] (`POST /v1/accounts/email/confirm`): the account
     * then reads `emailVerified == true`. Needs no session. A wrong, used or expired code is 401
     * `invalidToken`.
     */
    suspend fun verifyEmail(code: String) {
        onIoThread { transport.checked("POST", "/v1/accounts/email/confirm", JSONObject().put("token", code)) }
    }

    /**
     * Mails a password reset code (`pr_…`, 1 hour) to [email] if an account has it
     * (`POST /v1/sessions/password/reset`). It answers the same either way, so it never tells
     * whether the email has an account.
     */
    suspend fun requestPasswordReset(email: String) {
        onIoThread { transport.checked("POST", "/v1/sessions/password/reset", JSONObject().put("email", email)) }
    }

    /**
     * Sets [newPassword] with the mailed [code] (`POST /v1/sessions/password/reset/confirm`) and
     * signs in with the new session. The account's other sessions end, and its email counts as
     * verified. 422 `weakPassword` keeps the code usable; a wrong, used or expired code is 401
     * `invalidToken`.
     */
    suspend fun resetPassword(code: String, newPassword: String): AuthResult = signedIn(onIoThread {
        transport.json("POST", "/v1/sessions/password/reset/confirm", JSONObject().put("token", code).put("password", newPassword))
    })

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

    private suspend fun authorized(method: String, path: String, body: JSONObject? = null, extraReadMillis: Int = 0): JSONObject =
        authorizedAnswer(method, path, body, extraReadMillis).json()

    /** A call with the access token, refreshed once if it has expired; a coupon's refusal is a [CouponException]. */
    private suspend fun authorizedAnswer(method: String, path: String, body: JSONObject? = null, extraReadMillis: Int = 0): Answer {
        val token = session?.accessToken ?: throw notSignedIn()
        return onIoThread {
            try {
                try {
                    transport.checked(method, path, body, token, extraReadMillis)
                } catch (error: RedeemApiException) {
                    if (error.status != 401 || error.code != "invalidToken") throw error
                    transport.checked(method, path, body, refreshedAfter(token).accessToken, extraReadMillis)
                }
            } catch (error: RedeemApiException) {
                if (error.status == 422 && error.code in CouponException.reasons) {
                    throw CouponException.of(error.code, error.message ?: error.code, error.redeemUrl)
                }
                throw error
            }
        }
    }

    /**
     * The session after the refused access token [spent]: refreshed here, or already by a call
     * that was refused at the same time (the lock lets one refresh at a time).
     */
    private fun refreshedAfter(spent: String): Session = synchronized(refreshLock) {
        val current = session ?: throw notSignedIn()
        if (current.accessToken != spent) current else refresh(current).session
    }

    /** `POST /v1/sessions/refresh`, under [refreshLock]; a refused refresh token signs out. */
    private fun refresh(current: Session): AuthResult = try {
        signedIn(transport.json("POST", "/v1/sessions/refresh", JSONObject().put("refreshToken", current.refreshToken)))
    } catch (error: RedeemApiException) {
        if (error.status == 401 && session == current) setSession(null)
        throw error
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
