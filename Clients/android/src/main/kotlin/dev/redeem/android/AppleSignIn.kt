package dev.redeem.android

import java.net.URLEncoder
import java.security.MessageDigest
import java.security.SecureRandom
import java.util.Base64

/**
 * One Sign in with Apple through the gateway's web flow (docs/api.md, "Sign in with Apple on the
 * web and Android"): open [url] in a Custom Tab; the flow comes back to the app's deep link with
 * `?code=…`, which [RedeemClient.completeAppleSignIn] exchanges together with [codeVerifier]. Keep
 * the verifier until then (it is what binds the code to this app: PKCE, RFC 7636).
 */
data class AppleSignInFlow(val url: String, val codeVerifier: String) {
    companion object {
        /** The flow's start URL for [returnUrl] (one of the server's `REDEEM_APPLE_RETURN_URLS`). */
        fun start(baseUrl: String, returnUrl: String, codeVerifier: String = newVerifier()): AppleSignInFlow {
            val query = "return=" + URLEncoder.encode(returnUrl, "UTF-8") +
                "&code_challenge=" + challenge(codeVerifier) + "&code_challenge_method=S256"
            return AppleSignInFlow(baseUrl.trimEnd('/') + "/v1/sessions/apple/start?" + query, codeVerifier)
        }

        /** 32 random bytes, base64url: a verifier of 43 characters. */
        fun newVerifier(): String {
            val bytes = ByteArray(32)
            SecureRandom().nextBytes(bytes)
            return Base64.getUrlEncoder().withoutPadding().encodeToString(bytes)
        }

        /** S256: base64url (no padding) of the verifier's SHA-256. */
        fun challenge(verifier: String): String {
            val digest = MessageDigest.getInstance("SHA-256").digest(verifier.toByteArray(Charsets.US_ASCII))
            return Base64.getUrlEncoder().withoutPadding().encodeToString(digest)
        }

        /** The one-time code in the URL the flow came back to, or the error Apple reported. */
        fun codeIn(callbackUrl: String): String {
            val query = callbackUrl.substringAfter('?', "").substringBefore('#')
            val params = query.split('&').filter { it.contains('=') }.associate {
                it.substringBefore('=') to java.net.URLDecoder.decode(it.substringAfter('='), "UTF-8")
            }
            params["error"]?.let { throw RedeemApiException(400, it, "Sign in with Apple ended: $it") }
            return params["code"] ?: throw RedeemApiException(400, "invalidSignInCode", "no code in $callbackUrl")
        }
    }
}
