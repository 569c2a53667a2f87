package dev.redeem.android

import org.json.JSONObject
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Assertions.fail
import org.junit.jupiter.api.Test

/**
 * The client reads what the gateway says it answers: every example body `/openapi.json` holds is
 * decoded with the client's own parsers ([RedeemJson]): the success answers of the operations the
 * client calls and of those that answer the same bodies, and every error body. A server change that breaks the client fails here; so does an
 * operation the client calls with a JSON answer but no example (when REDEEM_REQUIRE_EXAMPLES=1;
 * named and skipped otherwise), and an example of an operation this test does not know (add it to
 * [operations] or [sameBodies], or to [leftToOthers]).
 */
class OpenApiContractTest {
    /** The operations the client calls, and how it reads their success bodies. */
    private val operations: Map<String, (JSONObject) -> Any> = mapOf(
        "POST /v1/accounts" to RedeemJson::authResult,
        "POST /v1/sessions" to RedeemJson::authResult,
        "POST /v1/sessions/refresh" to RedeemJson::authResult,
        "POST /v1/sessions/exchange" to RedeemJson::authResult,
        "POST /v1/sessions/password/reset/confirm" to RedeemJson::authResult,
        "DELETE /v1/sessions/current" to { o: JSONObject -> o },
        "GET /v1/me" to RedeemJson::account,
        "POST /v1/coupons/validate" to { o: JSONObject -> RedeemJson.couponCheck(o) },
        "POST /v1/redemptions" to RedeemJson::redemption,
        "GET /v1/redemptions/{id}" to RedeemJson::redemption,
        "POST /v1/redemptions/{id}/purchase" to RedeemJson::redemption,
        "POST /v1/redemptions/{id}/release" to RedeemJson::redemption,
        "GET /v1/me/entitlements" to RedeemJson::entitlements
    )

    /** Operations the client does not call whose answers are bodies it reads: their examples are read too. */
    private val sameBodies: Map<String, (JSONObject) -> Any> = mapOf(
        "POST /v1/sessions/apple" to RedeemJson::authResult,
        "POST /v1/members/accept" to RedeemJson::authResult,
        "POST /v1/me/apple" to RedeemJson::account,
        "POST /v1/test_helpers/redemptions/{id}/purchase" to RedeemJson::redemption,
        "GET /v1/me/redemptions" to { o: JSONObject -> redemptions(o) },
        "GET /v1/coupons/{code}/redemptions" to { o: JSONObject -> redemptions(o) }
    )

    /** Operations with examples of bodies the Android client has no type for, and why. */
    private val leftToOthers: Map<String, String> = mapOf(
        "POST /v1/me/cloudkit" to "RedeemKit's: linking a CloudKit record name is for Apple platforms",
        "POST /v1/coupons/{code}/codes" to "an operator's: unique codes are made with the CLI, the dashboard or MCP",
        "POST /v1/coupons/{code}/redemption-exports" to "an operator's: a one-time CSV address, for MCP's export_redemptions_csv",
        "GET /v1/customers" to "an operator's: finding a customer, on the dashboard's Customers page",
        "GET /v1/apps" to "a deployment admin's: the deployment's apps",
        "POST /v1/apps" to "a deployment admin's: making an app",
        "GET /v1/customers/{appUserId}" to "an operator's: a customer's account, redemptions and entitlements, on the dashboard"
    )

    /** A page of redemptions (`{data, nextCursor}`), read item by item. */
    private fun redemptions(o: JSONObject): List<Redemption> {
        val data = o.getJSONArray("data")
        return (0 until data.length()).map { RedeemJson.redemption(data.getJSONObject(it)) }
    }

    @Test
    fun everyExampleBodyOfTheDocumentDecodes() {
        val reply = Operator.call("GET", "/openapi.json", token = null)
        assertEquals(200, reply.status)
        val document = reply.json()
        val paths = document.getJSONObject("paths")
        for (name in operations.keys) {
            val (method, path) = name.split(" ")
            assertTrue(paths.optJSONObject(path)?.has(method.toLowerCase()) == true, "the document has no $name")
        }
        var decoded = 0
        val missing = mutableListOf<String>()
        val unread = mutableListOf<String>()
        for (path in paths.keys().asSequence().map { it as String }.sorted()) {
            val methods = paths.getJSONObject(path)
            for (method in methods.keys().asSequence().map { it as String }.sorted()) {
                val name = "${method.toUpperCase()} $path"
                val parse = operations[name] ?: sameBodies[name]
                val responses = methods.getJSONObject(method).optJSONObject("responses") ?: continue
                var successExamples = 0
                var answersJson = false
                for (status in responses.keys().asSequence().map { it as String }.sorted()) {
                    val media = responses.getJSONObject(status).optJSONObject("content")?.optJSONObject("application/json") ?: continue
                    val success = status.startsWith("2")
                    if (success) answersJson = true
                    for (example in examplesIn(media, document)) {
                        if (success && parse == null) {
                            // An example made from the schema, not written as a sample: no client need read it.
                            if (name !in leftToOthers && !media.optBoolean("x-example-from-schema")) unread += "$name $status"
                            continue
                        }
                        try {
                            if (success) parse!!(example) else RedeemJson.apiError(example, status.toInt())
                        } catch (error: Exception) {
                            fail<Unit>("$name $status: the client can't read the document's example ($error): $example")
                        }
                        decoded += 1
                        if (success) successExamples += 1
                    }
                }
                if (name in operations && answersJson && successExamples == 0) missing += name
            }
        }
        assertEquals(emptyList<String>(), unread, "examples of operations this test does not know: add them to operations, sameBodies or leftToOthers")
        if (missing.isNotEmpty()) {
            val message = "no example of a success body in /openapi.json for ${missing.joinToString(", ")}"
            if (System.getenv("REDEEM_REQUIRE_EXAMPLES") == "1") fail<Unit>(message)
            System.err.println("OpenApiContractTest: $decoded examples decoded; skipped (set REDEEM_REQUIRE_EXAMPLES=1 to fail): $message")
        }
        assertTrue(decoded >= operations.size - missing.size, "$decoded examples decoded")
    }

    /**
     * A media type's examples: `example`, each of `examples` (`value`), or its schema's `example`
     * (through a `$ref` to `components.schemas`).
     */
    private fun examplesIn(media: JSONObject, document: JSONObject): List<JSONObject> {
        val found = mutableListOf<JSONObject>()
        media.optJSONObject("example")?.let { found += it }
        media.optJSONObject("examples")?.let { named ->
            val keys = named.keys()
            while (keys.hasNext()) named.getJSONObject(keys.next() as String).optJSONObject("value")?.let { found += it }
        }
        var schema = media.optJSONObject("schema")
        val ref = schema?.optString("\$ref", "") ?: ""
        if (ref.startsWith("#/components/schemas/")) {
            schema = document.optJSONObject("components")?.optJSONObject("schemas")?.optJSONObject(ref.removePrefix("#/components/schemas/"))
        }
        if (found.isEmpty()) schema?.optJSONObject("example")?.let { found += it }
        return found
    }
}
