package dev.redeem.android

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

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
