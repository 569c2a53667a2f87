// The contract: every example body the gateway's OpenAPI document gives for an operation this
// client calls is read with the client's own parsers. A server change that breaks the client
// (a renamed field, a new status or reason) fails here; so does an operation without an example.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseAccount, parseAuthResult, parseEntitlements, parsePage, parseRedemption, parseValidation } from "../src/index.js";
import { gateway } from "./stack.js";

/** The operations the client calls (method, path), with how it reads their success answers. */
const operations: [string, string, (body: unknown, path: string) => unknown][] = [
  ["post", "/v1/accounts", parseAuthResult],
  ["post", "/v1/sessions", parseAuthResult],
  ["post", "/v1/sessions/refresh", parseAuthResult],
  ["post", "/v1/sessions/exchange", parseAuthResult],
  ["get", "/v1/me", parseAccount],
  ["post", "/v1/coupons/validate", parseValidation],
  ["post", "/v1/redemptions", parseRedemption],
  ["get", "/v1/redemptions/{id}", parseRedemption],
  ["get", "/v1/me/redemptions", (body, path) => parsePage(body, parseRedemption, path)],
  ["get", "/v1/me/entitlements", parseEntitlements],
];

interface MediaType { example?: unknown; examples?: Record<string, { value: unknown }> }
interface Operation { responses: Record<string, { content?: Record<string, MediaType> }> }

test("every example body of an operation the client calls decodes with the client's parsers", async () => {
  const response = await fetch(`${gateway}/openapi.json`);
  assert.equal(response.status, 200);
  const document = await response.json() as { paths: Record<string, Record<string, Operation>> };
  const read: string[] = [];
  for (const [method, path, parse] of operations) {
    const operation = document.paths[path]?.[method];
    assert.ok(operation, `${method.toUpperCase()} ${path} is not in the document`);
    for (const [status, answer] of Object.entries(operation.responses)) {
      const media = answer.content?.["application/json"];
      if (!status.startsWith("2") || !media) continue;
      const examples = media.examples ? Object.entries(media.examples).map(([name, e]) => [name, e.value] as const)
        : media.example !== undefined ? [["example", media.example] as const] : [];
      assert.ok(examples.length > 0, `${method.toUpperCase()} ${path} ${status} has no example`);
      for (const [name, body] of examples) {
        parse(body, `${method.toUpperCase()} ${path} ${status} ${name}`);
        read.push(`${method} ${path} ${status} ${name}`);
      }
    }
  }
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
});
