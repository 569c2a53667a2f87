// What the tests share: the stack they run against (from the environment WebClientTests sets),
// an operator's calls to make coupons, and fresh users.
import assert from "node:assert/strict";
import { RedeemClient, RedeemError, MemoryStorage, KeyValueStorage } from "../src/index.js";

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through WebClientTests`);
  return value;
}

export const gateway = required("REDEEM_GATEWAY").replace(/\/+$/, "");
export const adminKey = required("REDEEM_ADMIN_KEY");
/** The stack's SMTP sink over HTTP (`GET /messages?to=`). */
export const mailbox = required("REDEEM_MAILBOX").replace(/\/+$/, "");
/** Set when the stack has Sign in with Apple's web flow against its fake Apple. */
export const appleConfigured = process.env.REDEEM_APPLE_WEB === "1";

export function unique(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 10)}`.toUpperCase();
}

/** `POST /v1/apps` with the admin key (a deployment admin's): the new app's id. */
export async function createApp(name: string): Promise<string> {
  const r = await fetch(`${gateway}/v1/apps`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${adminKey}` },
    body: JSON.stringify({ name }),
  });
  assert.equal(r.status, 201);
  return ((await r.json()) as { id: string }).id;
}

/** `POST /v1/coupons` with the admin key: an operator's call, not the client's; in `app` when given. */
export async function createCoupon(fields: Record<string, unknown>, app?: string): Promise<string> {
  const code = (fields.code as string | undefined) ?? unique("WEB");
  const headers: Record<string, string> = { "Content-Type": "application/json", Authorization: `Bearer ${adminKey}` };
  if (app) headers["Redeem-App"] = app;
  const r = await fetch(`${gateway}/v1/coupons`, {
    method: "POST",
    headers,
    body: JSON.stringify({ kind: "freePeriod", duration: { unit: "month", count: 1 }, entitlementId: "pro", ...fields, code }),
  });
  assert.equal(r.status, 201, await r.text());
  return code;
}

export function client(storage: KeyValueStorage = new MemoryStorage()): RedeemClient {
  return new RedeemClient({ baseUrl: gateway, storage });
}

/** A client signed in as a new user. */
export async function signedUp(storage?: KeyValueStorage): Promise<{ client: RedeemClient; email: string; password: string }> {
  const c = client(storage);
  const email = `web-${Math.random().toString(36).slice(2, 10)}@example.com`;
  const password = "a long web client passphrase";
  await c.signUp(email, password);
  return { client: c, email, password };
}

/** The error `promise` rejects with, which must be a `RedeemError` (or the class given). */
export async function rejection<E extends RedeemError>(promise: Promise<unknown>,
                                                       type: new (...args: never[]) => E = RedeemError as never): Promise<E> {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof type, `expected ${type.name}, got ${String(e)}`);
    return e as E;
  }
  return assert.fail(`expected a ${type.name}, but the call succeeded`);
}

/** The mails to `to` the stack sent (headers and body as sent), oldest first. */
export async function mailTo(to: string): Promise<string[]> {
  const r = await fetch(`${mailbox}/messages?to=${encodeURIComponent(to)}`);
  assert.equal(r.status, 200);
  return ((await r.json()) as { messages: string[] }).messages;
}

/** Waits (up to 20 s) for a mail to `to` carrying a code that begins with `prefix` (`ev_`, `pr_`); answers the newest. */
export async function mailedCode(to: string, prefix: string): Promise<string> {
  const pattern = new RegExp(`\\b(${prefix}[A-Za-z0-9_-]{40,})`);
  const deadline = Date.now() + 20_000;
  for (;;) {
    const codes = (await mailTo(to)).map((m) => pattern.exec(m)?.[1]).filter((c): c is string => c !== undefined);
    if (codes.length > 0) return codes[codes.length - 1];
    assert.ok(Date.now() < deadline, `no mail with a ${prefix} code to ${to} within 20 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
