// The contract: every example body the gateway's OpenAPI document holds is read with the client's
// own parsers: the success answers of the operations the client calls and of those that answer the
// same bodies, and every error body. A
// server change that breaks the client (a renamed field, a new status or reason) fails here; so do
// an operation the client calls without an example, and an example the client does not know how
// to read (add its operation to those read here, or to the ones left to other clients).
import { test } from "node:test";
import assert from "node:assert/strict";
import { CouponRefusedError, RedeemClient, parseAccount, parseAuthResult, parseEntitlements, parseErrorBody, parsePage,
         parseRedemption, parseValidation } from "../src/index.js";
import { gateway, rejection } from "./stack.js";

/** The operations the client calls (method, path), with how it reads their success answers. */
const operations: [string, string, (body: unknown, path: string) => unknown][] = [
  ["post", "/v1/accounts", parseAuthResult],
  ["post", "/v1/sessions", parseAuthResult],
  ["post", "/v1/sessions/refresh", parseAuthResult],
  ["post", "/v1/sessions/exchange", parseAuthResult],
  ["post", "/v1/sessions/password/reset/confirm", parseAuthResult],
  ["get", "/v1/me", parseAccount],
  ["post", "/v1/coupons/validate", parseValidation],
  ["post", "/v1/redemptions", parseRedemption],
  ["get", "/v1/redemptions/{id}", parseRedemption],
  ["get", "/v1/me/redemptions", (body, path) => parsePage(body, parseRedemption, path)],
  ["get", "/v1/me/entitlements", parseEntitlements],
];

/** Operations the client does not call whose answers are bodies it reads: their examples are read too. */
const sameBodies: [string, string, (body: unknown, path: string) => unknown][] = [
  ["post", "/v1/sessions/apple", parseAuthResult],
  ["post", "/v1/members/accept", parseAuthResult],
  ["post", "/v1/me/apple", parseAccount],
  ["post", "/v1/redemptions/{id}/purchase", parseRedemption],
  ["post", "/v1/redemptions/{id}/release", parseRedemption],
  ["post", "/v1/test_helpers/redemptions/{id}/purchase", parseRedemption],
  ["get", "/v1/coupons/{code}/redemptions", (body, path) => parsePage(body, parseRedemption, path)],
];

/** Operations with examples of bodies this client has no type for, and why. */
const leftToOthers: Record<string, string> = {
  "POST /v1/me/cloudkit": "RedeemKit's: linking a CloudKit record name is for Apple platforms",
  "POST /v1/coupons/{code}/codes": "operators': making unique codes (RedeemKit's OperatorClient, the redeem command)",
  "POST /v1/coupons/{code}/redemption-exports": "operators': a one-time CSV address (MCP's export_redemptions_csv)",
  "GET /v1/customers": "operators': finding a customer (the dashboard's Customers page)",
  "GET /v1/apps": "deployment admins': the deployment's apps",
  "POST /v1/apps": "deployment admins': making an app",
  "GET /v1/customers/{appUserId}": "operators': a customer's account, redemptions and entitlements (the dashboard)",
};

interface MediaType { example?: unknown; examples?: Record<string, { value: unknown }>; "x-example-from-schema"?: boolean }
interface Operation { responses: Record<string, { content?: Record<string, MediaType> }> }

function examplesOf(media: MediaType): [string, unknown][] {
  if (media.examples) return Object.entries(media.examples).map(([name, e]) => [name, e.value]);
  return media.example !== undefined ? [["example", media.example]] : [];
}

test("every example body of the document decodes with the client's parsers", async () => {
  const response = await fetch(`${gateway}/openapi.json`);
  assert.equal(response.status, 200);
  const document = await response.json() as { paths: Record<string, Record<string, Operation>> };
  const parsers = new Map([...operations, ...sameBodies].map(([method, path, parse]) => [`${method.toUpperCase()} ${path}`, parse]));
  const read: string[] = [];
  const unread: string[] = [];
  for (const [method, path] of operations) {
    const name = `${method.toUpperCase()} ${path}`;
    assert.ok(document.paths[path]?.[method], `${name} is not in the document`);
    for (const [status, answer] of Object.entries(document.paths[path][method].responses)) {
      const media = answer.content?.["application/json"];
      if (status.startsWith("2") && media) assert.ok(examplesOf(media).length > 0, `${name} ${status} has no example`);
    }
  }
  for (const [path, methods] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      const name = `${method.toUpperCase()} ${path}`;
      for (const [status, answer] of Object.entries(operation.responses ?? {})) {
        const media = answer.content?.["application/json"];
        if (!media) continue;
        for (const [example, body] of examplesOf(media)) {
          const where = `${name} ${status} ${example}`;
          if (!status.startsWith("2")) parseErrorBody(body, where);
          else if (parsers.has(name)) parsers.get(name)!(body, where);
          // Made from the schema, not written as a sample: no client need read it.
          else if (name in leftToOthers || media["x-example-from-schema"]) continue;
          else { unread.push(where); continue; }
          read.push(where);
        }
      }
    }
  }
  assert.deepEqual(unread, [], "examples this client does not read: add their operations to `operations` or `leftToOthers`");
  // A refusal is among validate's examples, and reads as one.
  const validate = document.paths["/v1/coupons/validate"].post.responses["200"].content?.["application/json"];
  const refusals = Object.values(validate?.examples ?? {}).map((e) => parseValidation(e.value)).filter((v) => !v.valid);
  assert.ok(refusals.length > 0 && refusals.every((v) => v.reason !== undefined), "validate has a refusal example");
  assert.ok(read.length >= operations.length, read.join("\n"));
});

test("the parsers refuse a body that breaks the contract", () => {
  const redemption = { redemptionId: "r", code: "C", status: "completed", platform: "web", productId: null, pricePaid: null,
                       sandbox: false, reservedAt: "2026-04-01T00:00:00.000Z" };
  assert.equal(parseRedemption(redemption).status, "completed");
  assert.throws(() => parseRedemption({ ...redemption, status: "done" }), /status/);
  assert.throws(() => parseRedemption({ ...redemption, reservedAt: "yesterday" }), /reservedAt/);
  assert.throws(() => parseValidation({ valid: false, eligibleProductIds: [], reason: "tooLate" }), /reason/);
  assert.throws(() => parseErrorBody({ error: { message: "no code" } }), /code/);
});

test("a webOnly refusal carries the redeem page, and its absence still reads", async () => {
  const page = "https://redeem.example.com/redeem?code=SPRING-25";
  const checked = parseValidation({ valid: false, reason: "webOnly", redeemUrl: page, eligibleProductIds: [] });
  assert.equal(checked.reason, "webOnly");
  assert.equal(checked.redeemUrl, page);
  assert.equal(parseValidation({ valid: false, reason: "expired", eligibleProductIds: [] }).redeemUrl, undefined);

  // Redeem's 422, as the server words it, through the client's own transport.
  const answering = (error: Record<string, unknown>) => new RedeemClient({
    baseUrl: "https://redeem.example.com",
    fetch: async () => new Response(JSON.stringify({ error }), { status: 422, headers: { "Content-Type": "application/json" } }),
  });
  const signedIn = { account: parseAccount({ id: "a", emailVerified: false, appUserId: "u", identities: [], createdAt: "2026-04-01T00:00:00Z" }),
                     session: { accessToken: "t", refreshToken: "r", expiresAt: new Date(Date.now() + 60_000) } };
  const client = answering({ code: "webOnly", message: "Redeem this code on the web.", redeemUrl: page });
  client.restoreSession(signedIn);
  const refused = await rejection(client.redeemCoupon("SPRING-25", { platform: "ios" }), CouponRefusedError);
  assert.equal(refused.reason, "webOnly");
  assert.equal(refused.redeemUrl, page);
  assert.equal(refused.message, "Redeem this code on the web.");
  const older = answering({ code: "exhausted", message: "Used up." });
  older.restoreSession(signedIn);
  const plain = await rejection(older.redeemCoupon("SPRING-25"), CouponRefusedError);
  assert.equal(plain.redeemUrl, undefined);
});
