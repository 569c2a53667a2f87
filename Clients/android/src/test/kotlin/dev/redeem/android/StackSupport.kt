package dev.redeem.android

import org.json.JSONArray
import org.json.JSONObject
import java.io.File
import java.net.HttpURLConnection
import java.net.URL
import java.net.URLEncoder
import java.util.UUID

/**
 * What the integration suite (Tests/IntegrationTests/AndroidClientTests.swift) hands the Kotlin
 * tests: the stack's gateway and admin key, the fake Play Billing the fake launcher buys through,
 * and a Play subscription with a base plan registered at the fake Play Developer API.
 */
object StackEnv {
    private fun required(name: String): String =
        System.getenv(name) ?: throw IllegalStateException("$name is not set: run this suite through AndroidClientTests")

    val gateway: String get() = required("REDEEM_GATEWAY_URL")
    val adminKey: String get() = required("REDEEM_ADMIN_KEY")
    val billing: String get() = required("REDEEM_TEST_PLAY_BILLING_URL")
    val playProduct: String get() = required("REDEEM_TEST_PLAY_PRODUCT")
    val basePlan: String get() = required("REDEEM_TEST_PLAY_BASE_PLAN")
    /** An account RevenueCat holds an active Play subscription (entitlement `pro`) for. */
    val subscriberEmail: String get() = required("REDEEM_TEST_SUBSCRIBER_EMAIL")
    val subscriberPassword: String get() = required("REDEEM_TEST_SUBSCRIBER_PASSWORD")
    /** The stack's SMTP sink, over HTTP (`GET /messages?to=`). */
    val mailbox: String get() = required("REDEEM_TEST_MAILBOX_URL")
    /** A deep link the stack's Sign in with Apple flow may return to (`REDEEM_APPLE_RETURN_URLS`). */
    val appleReturn: String get() = required("REDEEM_TEST_APPLE_RETURN")
    val stateDirectory: File
        get() = File(System.getenv("REDEEM_TEST_STATE_DIR") ?: System.getProperty("java.io.tmpdir"))

    fun unique(prefix: String) = prefix + UUID.randomUUID().toString().replace("-", "").substring(0, 8).toUpperCase()
}

/** Plain HTTP for what the tests do as the operator (the client under test has no operator calls). */
object Operator {
    class Reply(val status: Int, val text: String) {
        fun json() = JSONObject(text)
    }

    fun call(
        method: String, path: String, body: JSONObject? = null, base: String = StackEnv.gateway,
        token: String? = StackEnv.adminKey, app: String? = null
    ): Reply {
        val c = URL(base.trimEnd('/') + path).openConnection() as HttpURLConnection
        c.requestMethod = method
        c.connectTimeout = 10_000
        c.readTimeout = 30_000
        if (token != null) c.setRequestProperty("Authorization", "Bearer $token")
        if (app != null) c.setRequestProperty("Redeem-App", app)
        if (body != null) {
            c.doOutput = true
            c.setRequestProperty("Content-Type", "application/json")
            c.outputStream.use { it.write(body.toString().toByteArray()) }
        }
        val status = c.responseCode
        val text = (if (status >= 400) c.errorStream else c.inputStream)?.use { String(it.readBytes()) } ?: ""
        c.disconnect()
        return Reply(status, text)
    }

    /** A plan on the test's Play subscription, over [basePlans]. */
    fun playPlan(basePlans: List<String> = listOf(StackEnv.basePlan)): String {
        val plan = "pro." + StackEnv.unique("").toLowerCase()
        val store = JSONObject().put("productId", StackEnv.playProduct).put("basePlanIds", JSONArray(basePlans))
        val made = call("POST", "/v1/plans", JSONObject().put("productId", plan).put("name", "Pro").put("playStore", store))
        check(made.status == 201) { "plan: ${made.status} ${made.text}" }
        return plan
    }

    /** A 30 % off coupon for three months of [plan] on Android. */
    fun discount(plan: String, cap: Int = 100): String {
        val code = StackEnv.unique("ANDROID")
        val body = JSONObject().put("code", code).put("kind", "percentOff").put("percentOff", 30)
            .put("duration", JSONObject().put("unit", "month").put("count", 1)).put("periodCount", 3)
            .put("productIds", JSONArray(listOf(plan))).put("platforms", JSONArray(listOf("android")))
            .put("maxRedemptions", cap)
            .put("expiresAt", java.time.Instant.now().plusSeconds(30L * 86_400).toString())
        val made = call("POST", "/v1/coupons", body)
        check(made.status == 201) { "coupon: ${made.status} ${made.text}" }
        return code
    }

    /** The coupon's first store offer's state (`creating`, `ready`, `failed`, …). */
    fun offerState(code: String): String? {
        val coupon = call("GET", "/v1/coupons/$code").json()
        val offers = coupon.optJSONArray("storeOffers") ?: return null
        return if (offers.length() == 0) null else offers.getJSONObject(0).optString("state")
    }

    /** A discount whose Play offer is `ready` (made, activated, settled). */
    fun readyDiscount(plan: String = playPlan(), cap: Int = 100): Pair<String, String> {
        val code = discount(plan, cap)
        eventually(30_000) { offerState(code) == "ready" }
        return Pair(code, plan)
    }

    fun coupon(code: String): JSONObject = call("GET", "/v1/coupons/$code").json()

    /** Waits for [condition], checking every 100 ms, and fails after [millis]. */
    fun eventually(millis: Long, condition: () -> Boolean) {
        val deadline = System.currentTimeMillis() + millis
        while (!condition()) {
            check(System.currentTimeMillis() < deadline) { "not within $millis ms" }
            Thread.sleep(100)
        }
    }
}

/** The mail the stack sent, as its SMTP sink kept it (Tests/TestSupport/SMTPMailbox.swift). */
object Mailbox {
    /** The messages to [to] (headers and body, as sent), oldest first. */
    fun messages(to: String): List<String> {
        val reply = Operator.call("GET", "/messages?to=" + URLEncoder.encode(to, "UTF-8"), base = StackEnv.mailbox, token = null)
        check(reply.status == 200) { "mailbox: ${reply.status} ${reply.text}" }
        val list = reply.json().getJSONArray("messages")
        return (0 until list.length()).map { list.getString(it) }
    }

    /** Waits for a mail to [to] carrying a code that begins with [prefix] (`ev_`, `pr_`); answers the newest. */
    fun code(to: String, prefix: String): String {
        val pattern = Regex("\\b(" + Regex.escape(prefix) + "[A-Za-z0-9_-]{40,})")
        var found: String? = null
        Operator.eventually(20_000) {
            found = messages(to).mapNotNull { pattern.find(it)?.groupValues?.get(1) }.lastOrNull()
            found != null
        }
        return found!!
    }
}

/**
 * A [PlayBillingLauncher] for tests: "buys" at the fake Play Billing, which records the purchase at
 * the fake Play Developer API as Play would and answers Play's response code. [tokens] keeps each
 * bought token by product, as `queryPurchasesAsync` would find it after a relaunch.
 */
class FakePlayLauncher(private val dieAfterBuying: Boolean = false) : PlayBillingLauncher {
    val launches = mutableListOf<PlayOfferLaunch>()
    val tokens = mutableMapOf<String, String>()

    /** The app's process ending while Play's sheet is up. */
    class AppKilled : RuntimeException("the app was killed during the purchase")

    override suspend fun launch(offer: PlayOfferLaunch): PlayBillingResult {
        launches += offer
        val body = JSONObject().put("productId", offer.productId).put("basePlanId", offer.basePlanId)
            .put("offerId", offer.offerId).put("offerTags", JSONArray(offer.offerTags))
            .put("obfuscatedAccountId", offer.obfuscatedAccountId)
        val reply = Operator.call("POST", "/launch", body, base = StackEnv.billing, token = null)
        check(reply.status == 200) { "billing: ${reply.status} ${reply.text}" }
        val answer = reply.json()
        return when (val code = answer.getString("responseCode")) {
            "OK" -> {
                val token = answer.getString("purchaseToken")
                tokens[offer.productId] = token
                if (dieAfterBuying) throw AppKilled()
                PlayBillingResult.Purchased(token)
            }
            "ITEM_ALREADY_OWNED" -> PlayBillingResult.AlreadyOwned
            else -> PlayBillingResult.Failed(-1, code)
        }
    }
}

/** A launcher that must not be reached (a free period, a refusal). */
object NoLauncher : PlayBillingLauncher {
    override suspend fun launch(offer: PlayOfferLaunch): PlayBillingResult =
        throw AssertionError("Play Billing launched for $offer")
}

/** A client signed up as a new account, keeping its pending redemptions in [store]. */
fun signedUpClient(store: PendingStore = MemoryPendingStore()): Pair<RedeemClient, String> {
    val client = RedeemClient(StackEnv.gateway, store)
    val email = "android-${UUID.randomUUID()}@example.com"
    blocking { client.signUp(email, "a long android passphrase") }
    return Pair(client, email)
}
