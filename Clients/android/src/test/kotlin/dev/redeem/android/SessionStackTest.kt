package dev.redeem.android

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.util.Collections
import java.util.concurrent.CountDownLatch
import kotlin.concurrent.thread

/**
 * Sessions over time against the real stack, whose access tokens last 5 s
 * (`REDEEM_ACCESS_TOKEN_TTL`, set by AndroidClientTests): the automatic refresh, and the codes
 * that email verification and password reset mail (read from the stack's SMTP sink).
 */
class SessionStackTest {
    @Test
    fun anExpiredAccessTokenIsRefreshedOnceForCallsRefusedTogether() {
        val (client, email) = signedUpClient()
        val first = client.session!!
        val heard = Collections.synchronizedList(mutableListOf<Session?>())
        client.onSessionChange = { heard += it }
        // Wait until the server itself refuses the access token as expired.
        Operator.eventually(20_000) { Operator.call("GET", "/v1/me", token = first.accessToken).status == 401 }
        assertEquals("invalidToken", Operator.call("GET", "/v1/me", token = first.accessToken).json().getJSONObject("error").getString("code"))

        val start = CountDownLatch(1)
        val accounts = Collections.synchronizedList(mutableListOf<Account>())
        val failures = Collections.synchronizedList(mutableListOf<Throwable>())
        val callers = (1..4).map {
            thread {
                start.await()
                try {
                    accounts += blocking { client.account() }
                } catch (error: Throwable) {
                    failures += error
                }
            }
        }
        start.countDown()
        callers.forEach { it.join() }
        assertEquals(emptyList<Throwable>(), failures)
        assertEquals(listOf(email, email, email, email), accounts.map { it.email })
        // One refresh for the four calls: one new session, which the app was told of.
        assertEquals(1, heard.size, heard.toString())
        val second = client.session!!
        assertEquals(second, heard.single())
        assertNotEquals(first.accessToken, second.accessToken)
        assertNotEquals(first.refreshToken, second.refreshToken, "the refresh token rotates")
    }

    @Test
    fun aRefusedRefreshSignsTheClientOut() {
        val (client, _) = signedUpClient()
        val kept = client.session!!
        val heard = Collections.synchronizedList(mutableListOf<Session?>())
        // The session ends at the server (signed out on another device); this client still holds it.
        val other = RedeemClient(StackEnv.gateway, MemoryPendingStore(), kept)
        blocking { other.signOut() }
        val elsewhere = RedeemClient(StackEnv.gateway, MemoryPendingStore(), kept)
        elsewhere.onSessionChange = { heard += it }
        Operator.eventually(5_000) { Operator.call("GET", "/v1/me", token = kept.accessToken).status == 401 }
        val refused = assertThrows(RedeemApiException::class.java) { blocking { elsewhere.entitlements() } }
        assertEquals(401, refused.status)
        assertEquals("invalidToken", refused.code)
        assertNull(elsewhere.session)
        assertEquals(listOf<Session?>(null), heard)
        val out = assertThrows(RedeemApiException::class.java) { blocking { elsewhere.account() } }
        assertEquals("notIdentified", out.code)
    }

    @Test
    fun anEmailIsVerifiedWithTheMailedCode() {
        val (client, email) = signedUpClient()
        assertEquals(false, blocking { client.account() }.emailVerified)
        blocking { client.requestEmailVerification() }
        val code = Mailbox.code(email, "ev_")
        // A wrong code is refused, and does not end the session.
        val wrong = assertThrows(RedeemApiException::class.java) { blocking { client.verifyEmail("ev_not-the-code") } }
        assertEquals(401, wrong.status)
        assertEquals("invalidToken", wrong.code)
        assertNotNull(client.session)

        blocking { client.verifyEmail(code) }
        assertEquals(true, blocking { client.account() }.emailVerified)
        val used = assertThrows(RedeemApiException::class.java) { blocking { client.verifyEmail(code) } }
        assertEquals("invalidToken", used.code)
        val again = assertThrows(RedeemApiException::class.java) { blocking { client.requestEmailVerification() } }
        assertEquals(409, again.status)
        assertEquals("invalidState", again.code)
    }

    @Test
    fun aForgottenPasswordIsResetWithTheMailedCode() {
        val (before, email) = signedUpClient()
        val forgetful = RedeemClient(StackEnv.gateway, MemoryPendingStore())
        blocking { forgetful.requestPasswordReset(email) }
        // An email without an account is answered the same, and mailed nothing.
        val nobody = "nobody-" + StackEnv.unique("").toLowerCase() + "@example.com"
        blocking { forgetful.requestPasswordReset(nobody) }
        val code = Mailbox.code(email, "pr_")

        val weak = assertThrows(RedeemApiException::class.java) { blocking { forgetful.resetPassword(code, "short") } }
        assertEquals("weakPassword", weak.code)
        assertNull(forgetful.session)
        val result = blocking { forgetful.resetPassword(code, "a new long android passphrase") }
        assertEquals(result.session, forgetful.session, "the reset signs in")
        assertEquals(email, blocking { forgetful.account() }.email)
        assertEquals(true, result.account.emailVerified, "the mailed code proved the address")

        // The reset ended the account's other sessions: the old client's refresh is refused.
        val ended = assertThrows(RedeemApiException::class.java) { blocking { before.refreshSession() } }
        assertEquals(401, ended.status)
        assertNull(before.session)
        val old = assertThrows(RedeemApiException::class.java) {
            blocking { RedeemClient(StackEnv.gateway, MemoryPendingStore()).signIn(email, "a long android passphrase") }
        }
        assertEquals("invalidCredentials", old.code)
        val again = RedeemClient(StackEnv.gateway, MemoryPendingStore())
        assertEquals(result.account.id, blocking { again.signIn(email, "a new long android passphrase") }.account.id)
        assertFalse(blocking { again.entitlements() }.isActive("pro"))
        assertTrue(Mailbox.messages(nobody).isEmpty())
    }
}
