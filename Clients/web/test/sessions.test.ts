// Sign-up, sign-in, errors, refresh and sign-out against the real stack.
import { test } from "node:test";
import assert from "node:assert/strict";
import { AuthResult, RedeemClient } from "../src/index.js";
import { client, gateway, rejection, signedUp } from "./stack.js";

test("signs up, signs in with the same password, and reads the account", async () => {
  const { client: first, email, password } = await signedUp();
  assert.equal(first.session?.account.email, email);
  const c = client();
  const result = await c.signIn(email.toUpperCase(), password);
  assert.equal(result.account.id, first.session?.account.id);
  assert.ok(result.session.expiresAt instanceof Date && result.session.expiresAt.getTime() > Date.now());
  const me = await c.me();
  assert.equal(me.email, email);
  assert.ok(me.identities.some((i) => i.type === "email"));
  assert.ok("managementUrl" in me, "me() carries managementUrl (null without a store subscription)");
});

test("a wrong password, a taken email and a weak password are typed errors with the server's code", async () => {
  const { email } = await signedUp();
  const wrong = await rejection(client().signIn(email, "not the right passphrase"));
  assert.equal(wrong.code, "invalidCredentials");
  assert.equal(wrong.status, 401);
  const taken = await rejection(client().signUp(email, "another long passphrase"));
  assert.equal(taken.code, "emailInUse");
  assert.equal(taken.status, 409);
  const weak = await rejection(client().signUp(`weak-${Date.now()}@example.com`, "short"));
  assert.equal(weak.code, "weakPassword");
  assert.equal(weak.status, 422);
  assert.equal(weak.field, "password");
});

test("a call without a session is refused before any request", async () => {
  const e = await rejection(client().entitlements());
  assert.equal(e.code, "notIdentified");
});

test("refreshes the tokens, and a refused access token is refreshed on its own", async () => {
  const { client: c } = await signedUp();
  const before = c.session as AuthResult;
  const fresh = await c.refreshSession();
  assert.notEqual(fresh.refreshToken, before.session.refreshToken, "the refresh token rotates");
  assert.equal(c.session?.session.refreshToken, fresh.refreshToken);
  // An access token the server refuses (as an expired one is): the client refreshes and retries.
  const current = c.session as AuthResult;
  c.restoreSession({ ...current, session: { ...current.session, accessToken: "expired.or.forged" } });
  const me = await c.me();
  assert.equal(me.id, current.account.id);
  assert.notEqual(c.session?.session.accessToken, "expired.or.forged");
  assert.notEqual(c.session?.session.refreshToken, fresh.refreshToken);
});

test("calls refused together share one refresh", async () => {
  const { client: c } = await signedUp();
  const kept = c.session as AuthResult;
  const heard: (AuthResult | null)[] = [];
  const watched = new RedeemClient({ baseUrl: gateway, onSessionChange: (s) => heard.push(s) });
  watched.restoreSession({ ...kept, session: { ...kept.session, accessToken: "expired.or.forged" } });
  const accounts = await Promise.all([watched.me(), watched.entitlements(), watched.me(), watched.redemptions()]);
  assert.equal((accounts[0] as { id: string }).id, kept.account.id);
  assert.equal(heard.length, 1, "one refresh for the four calls");
  assert.equal(heard[0]?.session.accessToken, watched.session?.session.accessToken);
  assert.notEqual(watched.session?.session.refreshToken, kept.session.refreshToken);
});

test("signs out: the session is revoked on the server and forgotten here", async () => {
  const { client: c } = await signedUp();
  const kept = c.session as AuthResult;
  await c.signOut();
  assert.equal(c.isSignedIn, false);
  // The old tokens no longer work anywhere, including their refresh.
  const other = client();
  other.restoreSession(kept);
  const deadline = Date.now() + 5000;
  for (;;) {
    try {
      await other.me();
    } catch (e) {
      const error = e as { code?: string };
      assert.equal(error.code, "invalidToken");
      break;
    }
    assert.ok(Date.now() < deadline, "the revoked session still works after 5 s");
    other.restoreSession(kept);
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(other.isSignedIn, false, "a refused refresh signs the client out");
});
