// Email verification and password reset against the real stack: the codes come from the stack's
// SMTP sink, which WebClientTests serves over HTTP (REDEEM_MAILBOX).
import { test } from "node:test";
import assert from "node:assert/strict";
import { client, mailedCode, mailTo, rejection, signedUp } from "./stack.js";

test("verifies the email with the mailed code", async () => {
  const { client: c, email } = await signedUp();
  assert.equal((await c.me()).emailVerified, false);
  await c.requestEmailVerification();
  const code = await mailedCode(email, "ev_");
  const wrong = await rejection(c.verifyEmail("ev_not-the-code"));
  assert.equal(wrong.status, 401);
  assert.equal(wrong.code, "invalidToken");
  assert.ok(c.isSignedIn, "a wrong code is not a refused session");

  await c.verifyEmail(code);
  assert.equal((await c.me()).emailVerified, true);
  assert.equal((await rejection(c.verifyEmail(code))).code, "invalidToken", "a code works once");
  const again = await rejection(c.requestEmailVerification());
  assert.equal(again.status, 409);
  assert.equal(again.code, "invalidState");
});

test("resets a forgotten password with the mailed code and signs in", async () => {
  const { client: before, email, password } = await signedUp();
  const forgetful = client();
  await forgetful.requestPasswordReset(email);
  const nobody = `nobody-${Math.random().toString(36).slice(2, 10)}@example.com`;
  await forgetful.requestPasswordReset(nobody);   // answered the same, and mailed nothing
  const code = await mailedCode(email, "pr_");

  const weak = await rejection(forgetful.resetPassword(code, "short"));
  assert.equal(weak.code, "weakPassword");
  assert.equal(forgetful.isSignedIn, false);
  const result = await forgetful.resetPassword(code, "a new long web passphrase");
  assert.equal(forgetful.session?.session.accessToken, result.session.accessToken, "the reset signs in");
  assert.equal(result.account.emailVerified, true, "the mailed code proved the address");
  assert.equal((await forgetful.me()).email, email);

  // The account's other sessions ended: the old client's refresh is refused, which signs it out.
  const ended = await rejection(before.refreshSession());
  assert.equal(ended.status, 401);
  assert.equal(before.isSignedIn, false);
  assert.equal((await rejection(client().signIn(email, password))).code, "invalidCredentials");
  assert.equal((await client().signIn(email, "a new long web passphrase")).account.id, result.account.id);
  assert.deepEqual(await mailTo(nobody), []);
});
