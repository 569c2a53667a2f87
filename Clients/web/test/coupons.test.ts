// Validate, redeem, await, entitlements and refusals against the real stack.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CouponRefusedError, MemoryStorage, RedeemClient } from "../src/index.js";
import { createApp, createCoupon, gateway, rejection, signedUp, unique } from "./stack.js";

test("validates, redeems a free period on the web, awaits it and sees the entitlement", async () => {
  const code = await createCoupon({ duration: { unit: "month", count: 1 } });
  const storage = new MemoryStorage();
  const { client: c } = await signedUp(storage);

  const validation = await c.validateCoupon(code.toLowerCase(), { platform: "web" });
  assert.equal(validation.valid, true);
  assert.equal(validation.coupon?.code, code);
  assert.equal(validation.coupon?.kind, "freePeriod");
  assert.deepEqual(validation.coupon?.duration, { unit: "month", count: 1 });

  const redemption = await c.redeemCoupon(code);
  assert.equal(redemption.code, code);
  assert.equal(redemption.platform, "web");
  const again = await c.redeemCoupon(code);
  assert.equal(again.redemptionId, redemption.redemptionId, "a retry answers the same redemption");
  if (RedeemClient.isSettled(redemption.status)) assert.deepEqual(c.pendingRedemptions(), []);
  else assert.deepEqual(c.pendingRedemptions(), [redemption.redemptionId]);

  // The page is reloaded: a new client on the same storage resumes the pending redemption.
  const reloaded = new RedeemClient({ baseUrl: gateway, storage });
  reloaded.restoreSession(c.session);
  const completion = await reloaded.awaitCouponCompletion(redemption.redemptionId, { timeout: 30_000 });
  assert.equal(completion.outcome, "completed", JSON.stringify(completion));
  assert.equal(completion.redemption?.status, "completed");
  assert.equal(completion.redemption?.entitlement?.entitlementId, "pro");
  const until = completion.redemption?.entitlement?.expiresAt as Date;
  const days = (until.getTime() - Date.now()) / 86_400_000;
  assert.ok(days > 27 && days < 32, `one month of Pro, not ${days} days`);
  assert.deepEqual(reloaded.pendingRedemptions(), [], "a settled redemption leaves the pending ids");

  const entitlements = await reloaded.entitlements();
  const pro = entitlements.find((e) => e.entitlementId === "pro");
  assert.ok(pro, JSON.stringify(entitlements));
  assert.equal(pro.sandbox, false);
  assert.equal(pro.expiresAt.getTime(), until.getTime());

  const page = await reloaded.redemptions({ limit: 10 });
  assert.deepEqual(page.data.map((r) => r.redemptionId), [redemption.redemptionId]);
  assert.equal(page.data[0].status, "completed");
  assert.equal(page.nextCursor, null);
});

test("an unknown code is refused as notFound by validate and by redeem", async () => {
  const { client: c } = await signedUp();
  const code = unique("NOPE");
  const validation = await c.validateCoupon(code);
  assert.equal(validation.valid, false);
  assert.equal(validation.reason, "notFound");
  const refused = await rejection(c.redeemCoupon(code), CouponRefusedError);
  assert.equal(refused.reason, "notFound");
  assert.equal(refused.code, "notFound");
  assert.equal(refused.status, 422);
});

test("a used-up coupon is refused as exhausted", async () => {
  const code = await createCoupon({ maxRedemptions: 1 });
  const { client: first } = await signedUp();
  await first.redeemCoupon(code);
  const { client: second } = await signedUp();
  const validation = await second.validateCoupon(code);
  assert.equal(validation.valid, false);
  assert.equal(validation.reason, "exhausted");
  const refused = await rejection(second.redeemCoupon(code), CouponRefusedError);
  assert.equal(refused.reason, "exhausted");
  assert.deepEqual(second.pendingRedemptions(), []);
});

test("a coupon for other plans is notEligible for the product asked about", async () => {
  const code = await createCoupon({ productIds: ["pro.monthly"] });
  const { client: c } = await signedUp();
  assert.equal((await c.validateCoupon(code, { productId: "pro.monthly" })).valid, true);
  const other = await c.validateCoupon(code, { productId: "pro.yearly" });
  assert.equal(other.valid, false);
  assert.equal(other.reason, "notEligible");
});

test("bad input is an error with the server's code and field", async () => {
  const { client: c } = await signedUp();
  const e = await rejection(c.validateCoupon("SPRING", { platform: "windows" as never }));
  assert.equal(e.code, "invalid");
  assert.equal(e.status, 422);
  assert.equal(e.field, "platform");
  const missing = await rejection(c.redemption("00000000-0000-4000-8000-000000000000"));
  assert.equal(missing.code, "notFound");
  assert.equal(missing.status, 404);
});

test("awaitCouponCompletion of a redemption that is not there fails and forgets it", async () => {
  const storage = new MemoryStorage();
  const { client: c } = await signedUp(storage);
  const id = "00000000-0000-4000-8000-000000000001";
  storage.setItem("redeem.pendingRedemptions", JSON.stringify([id]));
  const e = await rejection(c.awaitCouponCompletion(id, { timeout: 5000 }));
  assert.equal(e.status, 404);
  assert.deepEqual(c.pendingRedemptions(), []);
});

test("a client with an app id redeems that app's coupons and lists that app's redemptions", async () => {
  const app = await createApp("Web client app");
  const code = await createCoupon({ platforms: ["web"] }, app);
  const { client: plain } = await signedUp();
  const elsewhere = await plain.validateCoupon(code, { platform: "web" });
  assert.equal(elsewhere.valid, false, "the code is another app's");
  assert.equal(elsewhere.reason, "notFound");

  const inApp = new RedeemClient({ baseUrl: gateway, app });
  inApp.restoreSession(plain.session);
  assert.equal((await inApp.validateCoupon(code, { platform: "web" })).valid, true);
  const redemption = await inApp.redeemCoupon(code);
  assert.equal(redemption.code, code);
  const page = await inApp.redemptions({ limit: 10 });
  assert.deepEqual(page.data.map((r) => r.redemptionId), [redemption.redemptionId]);
  assert.deepEqual((await plain.redemptions({ limit: 10 })).data, [], "the default app's list holds none of it");
});
