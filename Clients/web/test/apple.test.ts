// Sign in with Apple's redirect flow, against the stack's fake Apple. The test plays the browser:
// it follows the redirects by hand and carries the flow's cookie (node's fetch keeps no cookie jar).
import { test } from "node:test";
import assert from "node:assert/strict";
import { RedeemClient } from "../src/index.js";
import { appleConfigured, gateway, rejection } from "./stack.js";

/** The hidden fields of the fake Apple's authorize page, and where its form posts them. */
function formOf(html: string): { action: string; fields: Record<string, string> } {
  const unescape = (s: string) => s.replace(/&quot;/g, "\"").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
  const action = /<form[^>]*action="([^"]*)"/.exec(html);
  assert.ok(action, html);
  const fields: Record<string, string> = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) fields[unescape(m[1])] = unescape(m[2]);
  return { action: unescape(action[1]), fields };
}

/** Start → Apple → callback, as a browser goes: answers where the gateway sends it back, and the cookie. */
async function throughApple(c: RedeemClient, returnTo: string): Promise<{ back: URL; cookie: string }> {
  const start = await fetch(c.appleSignInUrl(returnTo), { redirect: "manual" });
  assert.equal(start.status, 302);
  const setCookie = start.headers.get("set-cookie") ?? "";
  const cookie = /__Host-redeem-apple=([^;]*)/.exec(setCookie)?.[1];
  assert.ok(cookie, setCookie);
  const page = await fetch(start.headers.get("location") as string);
  assert.equal(page.status, 200);
  const form = formOf(await page.text());
  const callback = await fetch(form.action, {
    method: "POST", redirect: "manual",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Cookie: `__Host-redeem-apple=${cookie}` },
    body: new URLSearchParams(form.fields).toString(),
  });
  assert.equal(callback.status, 303, await callback.text());
  return { back: new URL(callback.headers.get("location") as string, gateway), cookie };
}

/** A client whose requests carry the cookie, as the browser that started the flow sends it. */
function browserClient(cookie: string): RedeemClient {
  return new RedeemClient({
    baseUrl: gateway,
    fetch: (input, init) => {
      const headers = new Headers(init?.headers);
      if (init?.credentials === "include") headers.set("Cookie", `__Host-redeem-apple=${cookie}`);
      return fetch(input, { ...init, headers });
    },
  });
}

test("signs in with Apple through the redirect flow and the one-time code", { skip: !appleConfigured && "no fake Apple" }, async () => {
  const c = browserClient("");
  assert.equal(c.appleSignInUrl("/redeem?apple=1"), `${gateway}/v1/sessions/apple/start?return=%2Fredeem%3Fapple%3D1`);
  const { back, cookie } = await throughApple(c, "/redeem?apple=1&coupon=SPRING");
  assert.equal(back.pathname, "/redeem");
  assert.equal(back.searchParams.get("apple"), "1");
  assert.equal(back.searchParams.get("coupon"), "SPRING");
  const code = back.searchParams.get("code");
  assert.ok(code, back.toString());

  // Without the browser's cookie, the code is worth nothing.
  const stranger = await rejection(browserClient("not-the-cookie").completeAppleSignIn(code));
  assert.equal(stranger.status, 400, `${stranger.code}: ${stranger.message}`);
  assert.equal(stranger.code, "stateMismatch");

  const signedIn = browserClient(cookie);
  const result = await signedIn.completeAppleSignIn(code);
  assert.ok(result.account.identities.some((i) => i.type === "apple"), JSON.stringify(result.account));
  assert.equal((await signedIn.me()).id, result.account.id);
  // The code works once.
  const again = await rejection(browserClient(cookie).completeAppleSignIn(code));
  assert.equal(again.status, 401);
  assert.equal(again.code, "signInCodeUsed");
});
