package dev.redeem.android

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.net.HttpURLConnection
import java.net.URL
import java.net.URLEncoder

/** Sign in with Apple's web flow as the app drives it: PKCE, the start URL, the code it comes back with. */
class AppleSignInTest {
    @Test
    fun theChallengeIsRfc7636sS256() {
        // RFC 7636, appendix B.
        assertEquals("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            AppleSignInFlow.challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"))
        val verifier = AppleSignInFlow.newVerifier()
        assertEquals(43, verifier.length)
        assertTrue(verifier.matches(Regex("[A-Za-z0-9_-]+")))
        assertNotEquals(verifier, AppleSignInFlow.newVerifier())
    }

    @Test
    fun theStartUrlCarriesTheReturnAndTheChallenge() {
        val flow = AppleSignInFlow.start("https://redeem.example.com/", "myapp://signed-in?x=1", "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        assertEquals("https://redeem.example.com/v1/sessions/apple/start?return=myapp%3A%2F%2Fsigned-in%3Fx%3D1" +
            "&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256", flow.url)
    }

    @Test
    fun theCodeIsReadFromTheDeepLinkAndAnErrorIsThrown() {
        assertEquals("sc_abc/+", AppleSignInFlow.codeIn("myapp://signed-in?x=1&code=sc_abc%2F%2B"))
        val cancelled = assertThrows(RedeemApiException::class.java) {
            AppleSignInFlow.codeIn("myapp://signed-in?error=user_cancelled_authorize")
        }
        assertEquals("user_cancelled_authorize", cancelled.code)
    }

    @Test
    fun theWebFlowWithPkceEndsInASessionThatReadsTheAccount() {
        val client = RedeemClient(StackEnv.gateway, MemoryPendingStore())
        val flow = client.startAppleSignIn(StackEnv.appleReturn)
        // The Custom Tab: the start sets the flow's cookie and sends it to (the fake) Apple, whose
        // page posts its form back to the gateway, which sends it to the app's deep link.
        val start = Browser.go(flow.url)
        assertEquals(302, start.status, start.text)
        val cookie = Regex("__Host-redeem-apple=([^;]*)").find(start.setCookie ?: "")?.groupValues?.get(1)
        assertNotNull(cookie, start.setCookie)
        val page = Browser.go(start.location!!)
        assertEquals(200, page.status, page.text)
        val (action, fields) = Browser.formOf(page.text)
        val back = Browser.go(action, form = fields, cookie = "__Host-redeem-apple=$cookie")
        assertEquals(303, back.status, back.text)
        val deepLink = back.location!!
        assertTrue(deepLink.startsWith(StackEnv.appleReturn + "?code="), deepLink)

        // The app holds no cookie: the verifier binds the code to it. Another verifier is refused
        // and leaves the code unused.
        val stranger = AppleSignInFlow.start(StackEnv.gateway, StackEnv.appleReturn)
        val refused = assertThrows(RedeemApiException::class.java) {
            blocking { RedeemClient(StackEnv.gateway, MemoryPendingStore()).completeAppleSignIn(deepLink, stranger) }
        }
        assertEquals(400, refused.status, refused.message)
        assertEquals("stateMismatch", refused.code)

        val result = blocking { client.completeAppleSignIn(deepLink, flow) }
        assertEquals(result.session, client.session)
        val account = blocking { client.account() }
        assertEquals(result.account.id, account.id)
        assertTrue(account.appUserId.isNotEmpty())
        val again = assertThrows(RedeemApiException::class.java) {
            blocking { RedeemClient(StackEnv.gateway, MemoryPendingStore()).exchangeSignInCode(AppleSignInFlow.codeIn(deepLink), flow.codeVerifier) }
        }
        assertEquals("signInCodeUsed", again.code)
    }

    @Test
    fun anUnknownCodeIsRefusedByTheServerWithItsCode() {
        val client = RedeemClient(StackEnv.gateway, MemoryPendingStore())
        val flow = client.startAppleSignIn("myapp://signed-in")
        val refused = assertThrows(RedeemApiException::class.java) {
            blocking { client.completeAppleSignIn("myapp://signed-in?code=sc_never_given_out", flow) }
        }
        assertEquals(401, refused.status, refused.message)
        assertEquals("invalidSignInCode", refused.code)
    }
}

/** A browser for the flow, as a Custom Tab goes through it: no redirect followed, the cookie carried by hand. */
private object Browser {
    class Page(val status: Int, val location: String?, val setCookie: String?, val text: String)

    fun go(url: String, form: Map<String, String>? = null, cookie: String? = null): Page {
        val c = URL(url).openConnection() as HttpURLConnection
        c.instanceFollowRedirects = false
        if (cookie != null) c.setRequestProperty("Cookie", cookie)
        if (form != null) {
            c.requestMethod = "POST"
            c.doOutput = true
            c.setRequestProperty("Content-Type", "application/x-www-form-urlencoded")
            val body = form.entries.joinToString("&") { URLEncoder.encode(it.key, "UTF-8") + "=" + URLEncoder.encode(it.value, "UTF-8") }
            c.outputStream.use { it.write(body.toByteArray()) }
        }
        val status = c.responseCode
        val text = (if (status >= 400) c.errorStream else c.inputStream)?.use { String(it.readBytes()) } ?: ""
        val page = Page(status, c.getHeaderField("Location"), c.getHeaderField("Set-Cookie"), text)
        c.disconnect()
        return page
    }

    /** Where the fake Apple's page posts its form, and the form's hidden fields. */
    fun formOf(html: String): Pair<String, Map<String, String>> {
        fun unescape(s: String) = s.replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        val action = Regex("<form[^>]*action=\"([^\"]*)\"").find(html)?.groupValues?.get(1) ?: throw AssertionError(html)
        val fields = Regex("<input type=\"hidden\" name=\"([^\"]*)\" value=\"([^\"]*)\">").findAll(html)
            .associate { unescape(it.groupValues[1]) to unescape(it.groupValues[2]) }
        return Pair(unescape(action), fields)
    }
}
