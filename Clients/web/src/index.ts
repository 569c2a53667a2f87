// Redeem's web client: one ES module with no dependency but `fetch`, so that the gateway can serve
// it as it is to the /redeem page (which imports it) and an app can bundle it.

// MARK: - Wire types

export type Platform = "ios" | "android" | "web";
export type CouponKind = "freePeriod" | "percentOff" | "amountOff";
export type RedemptionStatus = "reserved" | "granting" | "completed" | "failed" | "released";
export type Environment = "production" | "sandbox";

/**
 * Why validate or redeem refused a code. Validate answers it as `reason`; redeem throws `CouponRefusedError`.
 * `webOnly`: a free period Redeem grants, which an iOS app may not redeem (App Review 3.1.1); `redeemUrl`
 * is the redeem page for the code.
 */
export type RefusalReason =
  | "notFound" | "inactive" | "notStarted" | "expired" | "exhausted"
  | "alreadyRedeemed" | "notEligible" | "notReady" | "alreadyOwned" | "webOnly"
  | "mistyped" | "codeUsed";

export const refusalReasons: readonly RefusalReason[] = [
  "notFound", "inactive", "notStarted", "expired", "exhausted", "alreadyRedeemed", "notEligible", "notReady", "alreadyOwned",
  "webOnly", "mistyped", "codeUsed",
];

/** The server's machine codes a client may meet, and the client's own (`network`, `decoding`). */
export type ErrorCode =
  | RefusalReason
  | "notIdentified" | "invalidToken" | "invalidCredentials" | "invalidIdentityToken"
  | "invalidSignInCode" | "signInCodeUsed" | "signInCodeExpired" | "stateMismatch" | "returnNotAllowed"
  | "forbidden" | "notFound" | "routeNotFound" | "methodNotAllowed" | "emailInUse" | "invalid" | "weakPassword"
  | "invalidState" | "mailNotConfigured"
  | "malformedJson" | "unsupportedMediaType" | "tooLarge" | "rateLimited" | "unavailable" | "timeout" | "internal"
  | "network" | "decoding";

/** `{ "amount": "4.99", "currency": "EUR" }`: a decimal string, never a float. */
export interface Money { amount: string; currency: string }

export interface CouponDuration { unit: "day" | "week" | "month" | "year"; count: number }

/** A coupon as end users see it. */
export interface Coupon {
  code: string;
  kind: CouponKind;
  percentOff?: number;
  amountOff?: Money;
  duration: CouponDuration;
  periodCount?: number;
  entitlementId?: string;
}

export interface CouponValidation {
  valid: boolean;
  reason?: RefusalReason;
  coupon?: Coupon;
  /** The plans the coupon covers; empty: any. */
  eligibleProductIds: string[];
  /** With `webOnly`: the redeem page for the code (a server that does not send it leaves it out). */
  redeemUrl?: string;
}

export interface Redemption {
  redemptionId: string;
  code: string;
  status: RedemptionStatus;
  platform: Platform;
  productId: string | null;
  pricePaid: Money | null;
  sandbox: boolean;
  reservedAt: Date;
  completedAt?: Date;
  failureReason?: string;
  entitlement?: { entitlementId: string; expiresAt: Date };
  /** On the web, for a coupon sold through Stripe: the Checkout page to send the user to. */
  stripe?: { checkoutUrl: string };
}

export interface Entitlement { entitlementId: string; expiresAt: Date; sandbox: boolean; source: string }

export interface Identity { type: string; email?: string; recordName?: string }

export interface Account {
  id: string;
  email?: string;
  emailVerified: boolean;
  appUserId: string;
  identities: Identity[];
  createdAt: Date;
  /** `me()` only: where the store subscription is managed; null without one. */
  managementUrl?: string | null;
}

/** `expiresAt` is the access token's. */
export interface Session { accessToken: string; refreshToken: string; expiresAt: Date }

export interface AuthResult { account: Account; session: Session }

export interface Page<T> { data: T[]; nextCursor: string | null }

/** What `awaitCouponCompletion` saw: settled, or still on its way when the time ran out. */
export type CouponCompletion =
  | { outcome: "completed"; redemption: Redemption }
  | { outcome: "failed"; redemption: Redemption }
  | { outcome: "timedOut"; redemption: Redemption | null };

// MARK: - Errors

/** Every failure: the server's `error.code` (or `network`, `decoding`), its message and field. */
export class RedeemError extends Error {
  /** The HTTP status; 0 when no answer came. */
  readonly status: number;
  readonly code: ErrorCode | (string & {});
  readonly field?: string;
  readonly requestId?: string;
  /** With `webOnly` (a `CouponRefusedError`): the redeem page for the code, `error.redeemUrl`. */
  readonly redeemUrl?: string;

  constructor(code: string, message: string, status = 0, field?: string, requestId?: string, redeemUrl?: string) {
    super(message);
    this.name = "RedeemError";
    this.code = code;
    this.status = status;
    this.field = field;
    this.requestId = requestId;
    this.redeemUrl = redeemUrl;
  }
}

/**
 * Redeem refused the code: `reason` says why (the server's 422 `error.code`); with `webOnly`,
 * `redeemUrl` is the redeem page for the code (`error.redeemUrl`), when the server sends it.
 */
export class CouponRefusedError extends RedeemError {
  readonly reason: RefusalReason;

  constructor(reason: RefusalReason, message: string, status = 422, requestId?: string, redeemUrl?: string) {
    super(reason, message, status, undefined, requestId, redeemUrl);
    this.name = "CouponRefusedError";
    this.reason = reason;
  }
}

export function isRefusalReason(value: unknown): value is RefusalReason {
  return typeof value === "string" && (refusalReasons as readonly string[]).includes(value);
}

// MARK: - Parsers: the server's JSON, checked, with its times as `Date`s

type JSONObject = Record<string, unknown>;

function fail(path: string, what: string): never {
  throw new RedeemError("decoding", `${path}: expected ${what}`);
}
function object(v: unknown, path: string): JSONObject {
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as JSONObject) : fail(path, "an object");
}
function string(v: unknown, path: string): string {
  return typeof v === "string" ? v : fail(path, "a string");
}
function optionalString(v: unknown, path: string): string | undefined {
  return v === undefined || v === null ? undefined : string(v, path);
}
function number(v: unknown, path: string): number {
  return typeof v === "number" && Number.isFinite(v) ? v : fail(path, "a number");
}
function boolean(v: unknown, path: string): boolean {
  return typeof v === "boolean" ? v : fail(path, "a boolean");
}
function date(v: unknown, path: string): Date {
  const d = new Date(string(v, path));
  return Number.isNaN(d.getTime()) ? fail(path, "an ISO 8601 time") : d;
}
function array<T>(v: unknown, path: string, item: (v: unknown, path: string) => T): T[] {
  return Array.isArray(v) ? v.map((x, i) => item(x, `${path}[${i}]`)) : fail(path, "an array");
}
function oneOf<T extends string>(v: unknown, path: string, values: readonly T[]): T {
  return typeof v === "string" && (values as readonly string[]).includes(v) ? (v as T) : fail(path, values.join(" | "));
}
function money(v: unknown, path: string): Money {
  const o = object(v, path);
  return { amount: string(o.amount, `${path}.amount`), currency: string(o.currency, `${path}.currency`) };
}

const platforms: readonly Platform[] = ["ios", "android", "web"];
const statuses: readonly RedemptionStatus[] = ["reserved", "granting", "completed", "failed", "released"];

export function parseCoupon(v: unknown, path = "coupon"): Coupon {
  const o = object(v, path);
  const d = object(o.duration, `${path}.duration`);
  const c: Coupon = {
    code: string(o.code, `${path}.code`),
    kind: oneOf(o.kind, `${path}.kind`, ["freePeriod", "percentOff", "amountOff"] as const),
    duration: { unit: oneOf(d.unit, `${path}.duration.unit`, ["day", "week", "month", "year"] as const),
                count: number(d.count, `${path}.duration.count`) },
  };
  if (o.percentOff != null) c.percentOff = number(o.percentOff, `${path}.percentOff`);
  if (o.amountOff != null) c.amountOff = money(o.amountOff, `${path}.amountOff`);
  if (o.periodCount != null) c.periodCount = number(o.periodCount, `${path}.periodCount`);
  if (o.entitlementId != null) c.entitlementId = string(o.entitlementId, `${path}.entitlementId`);
  return c;
}

export function parseValidation(v: unknown, path = "validation"): CouponValidation {
  const o = object(v, path);
  const r: CouponValidation = {
    valid: boolean(o.valid, `${path}.valid`),
    eligibleProductIds: array(o.eligibleProductIds, `${path}.eligibleProductIds`, string),
  };
  if (o.reason != null) r.reason = oneOf(o.reason, `${path}.reason`, refusalReasons);
  if (o.coupon != null) r.coupon = parseCoupon(o.coupon, `${path}.coupon`);
  if (o.redeemUrl != null) r.redeemUrl = string(o.redeemUrl, `${path}.redeemUrl`);
  if (!r.valid && !r.reason) fail(`${path}.reason`, "a reason when valid is false");
  return r;
}

export function parseRedemption(v: unknown, path = "redemption"): Redemption {
  const o = object(v, path);
  const r: Redemption = {
    redemptionId: string(o.redemptionId, `${path}.redemptionId`),
    code: string(o.code, `${path}.code`),
    status: oneOf(o.status, `${path}.status`, statuses),
    platform: oneOf(o.platform, `${path}.platform`, platforms),
    productId: optionalString(o.productId, `${path}.productId`) ?? null,
    pricePaid: o.pricePaid == null ? null : money(o.pricePaid, `${path}.pricePaid`),
    sandbox: boolean(o.sandbox, `${path}.sandbox`),
    reservedAt: date(o.reservedAt, `${path}.reservedAt`),
  };
  if (o.completedAt != null) r.completedAt = date(o.completedAt, `${path}.completedAt`);
  if (o.failureReason != null) r.failureReason = string(o.failureReason, `${path}.failureReason`);
  if (o.entitlement != null) {
    const e = object(o.entitlement, `${path}.entitlement`);
    r.entitlement = { entitlementId: string(e.entitlementId, `${path}.entitlement.entitlementId`),
                      expiresAt: date(e.expiresAt, `${path}.entitlement.expiresAt`) };
  }
  if (o.stripe != null) {
    const s = object(o.stripe, `${path}.stripe`);
    r.stripe = { checkoutUrl: string(s.checkoutUrl, `${path}.stripe.checkoutUrl`) };
  }
  return r;
}

export function parseEntitlement(v: unknown, path = "entitlement"): Entitlement {
  const o = object(v, path);
  return { entitlementId: string(o.entitlementId, `${path}.entitlementId`), expiresAt: date(o.expiresAt, `${path}.expiresAt`),
           sandbox: boolean(o.sandbox, `${path}.sandbox`), source: string(o.source, `${path}.source`) };
}

export function parseEntitlements(v: unknown, path = "entitlements"): Entitlement[] {
  return array(object(v, path).data, `${path}.data`, parseEntitlement);
}

export function parseAccount(v: unknown, path = "account"): Account {
  const o = object(v, path);
  const a: Account = {
    id: string(o.id, `${path}.id`),
    emailVerified: o.emailVerified === undefined ? false : boolean(o.emailVerified, `${path}.emailVerified`),
    appUserId: string(o.appUserId, `${path}.appUserId`),
    identities: array(o.identities, `${path}.identities`, (x, p) => {
      const i = object(x, p);
      const identity: Identity = { type: string(i.type, `${p}.type`) };
      if (i.email != null) identity.email = string(i.email, `${p}.email`);
      if (i.recordName != null) identity.recordName = string(i.recordName, `${p}.recordName`);
      return identity;
    }),
    createdAt: date(o.createdAt, `${path}.createdAt`),
  };
  if (o.email != null) a.email = string(o.email, `${path}.email`);
  if ("managementUrl" in o) a.managementUrl = optionalString(o.managementUrl, `${path}.managementUrl`) ?? null;
  return a;
}

export function parseAuthResult(v: unknown, path = "auth"): AuthResult {
  const o = object(v, path);
  const s = object(o.session, `${path}.session`);
  return {
    account: parseAccount(o.account, `${path}.account`),
    session: { accessToken: string(s.accessToken, `${path}.session.accessToken`),
               refreshToken: string(s.refreshToken, `${path}.session.refreshToken`),
               expiresAt: date(s.expiresAt, `${path}.session.expiresAt`) },
  };
}

/** An error body, `{error: {code, message, field?, redeemUrl?}}`. */
export function parseErrorBody(v: unknown, path = "error"): { code: string; message: string; field?: string; redeemUrl?: string } {
  const e = object(object(v, path).error, `${path}.error`);
  const r: { code: string; message: string; field?: string; redeemUrl?: string } = {
    code: string(e.code, `${path}.error.code`), message: string(e.message, `${path}.error.message`),
  };
  if (e.field != null) r.field = string(e.field, `${path}.error.field`);
  if (e.redeemUrl != null) r.redeemUrl = string(e.redeemUrl, `${path}.error.redeemUrl`);
  return r;
}

export function parsePage<T>(v: unknown, item: (v: unknown, path: string) => T, path = "page"): Page<T> {
  const o = object(v, path);
  return { data: array(o.data, `${path}.data`, item), nextCursor: optionalString(o.nextCursor, `${path}.nextCursor`) ?? null };
}

// MARK: - The client

/** What `localStorage` and `sessionStorage` offer; the client keeps pending redemption ids in one. */
export interface KeyValueStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

/** A storage for tests and for pages that must not persist anything. */
export class MemoryStorage implements KeyValueStorage {
  private readonly values = new Map<string, string>();
  getItem(key: string): string | null { return this.values.get(key) ?? null; }
  setItem(key: string, value: string): void { this.values.set(key, value); }
  removeItem(key: string): void { this.values.delete(key); }
}

export interface RedeemClientOptions {
  /** The gateway, e.g. `https://redeem.example.com`; `""` for the page's own origin. */
  baseUrl: string;
  /** Defaults to the global `fetch`. */
  fetch?: typeof fetch;
  /** Where pending redemption ids survive a reload (e.g. `window.localStorage`); memory by default. */
  storage?: KeyValueStorage;
  /** `sandbox` for test builds: the redemption is labelled sandbox and granted by the sandbox provider. */
  environment?: Environment;
  /** Called when the session changes: signed in, refreshed, or gone (null). Tokens are otherwise kept in memory only. */
  onSessionChange?: (session: AuthResult | null) => void;
  /**
   * The app's id in a deployment that serves several apps, sent as `Redeem-App` with every call:
   * codes, redemptions and entitlements are then that app's. Leave it out for the default app.
   */
  app?: string;
}

const pendingKey = "redeem.pendingRedemptions";

interface Answer { status: number; body: unknown; requestId?: string }

export class RedeemClient {
  private readonly baseUrl: string;
  private readonly fetcher: typeof fetch;
  private readonly storage: KeyValueStorage;
  private readonly environment: Environment;
  private readonly onSessionChange?: (session: AuthResult | null) => void;
  private readonly app?: string;
  private current: AuthResult | null = null;
  private refreshing: Promise<Session> | null = null;

  constructor(options: RedeemClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.fetcher = options.fetch ?? ((input, init) => fetch(input, init));
    this.storage = options.storage ?? new MemoryStorage();
    this.environment = options.environment ?? "production";
    this.onSessionChange = options.onSessionChange;
    this.app = options.app;
  }

  /** The signed-in account and its tokens, or null. */
  get session(): AuthResult | null { return this.current; }
  get isSignedIn(): boolean { return this.current !== null; }

  /** Takes a session kept by the app (from `onSessionChange`), e.g. after a reload. */
  restoreSession(session: AuthResult | null): void { this.current = session; }

  // Sessions

  /** `POST /v1/accounts`. */
  async signUp(email: string, password: string): Promise<AuthResult> {
    return this.signedIn(await this.call("POST", "/v1/accounts", { email, password }, { auth: false }));
  }

  /** `POST /v1/sessions`. A wrong email or password: `invalidCredentials`. */
  async signIn(email: string, password: string): Promise<AuthResult> {
    return this.signedIn(await this.call("POST", "/v1/sessions", { email, password }, { auth: false }));
  }

  /**
   * Where to send the browser for Sign in with Apple (`GET /v1/sessions/apple/start`). It comes
   * back to `returnTo` (the gateway's `/redeem…`, or an allow-listed URL) with `?code=<one-time
   * code>` or `?error=`; pass the code to `completeAppleSignIn`.
   */
  appleSignInUrl(returnTo: string, options: { codeChallenge?: string } = {}): string {
    let url = `${this.baseUrl}/v1/sessions/apple/start?return=${encodeURIComponent(returnTo)}`;
    if (options.codeChallenge) url += `&code_challenge=${encodeURIComponent(options.codeChallenge)}&code_challenge_method=S256`;
    return url;
  }

  /**
   * `POST /v1/sessions/exchange`: the one-time code for a session. A browser sends the flow's
   * cookie (set by the start, HttpOnly); an app that started with a PKCE challenge sends its verifier.
   */
  async completeAppleSignIn(code: string, options: { codeVerifier?: string } = {}): Promise<AuthResult> {
    const body: JSONObject = { code };
    if (options.codeVerifier) body.codeVerifier = options.codeVerifier;
    return this.signedIn(await this.call("POST", "/v1/sessions/exchange", body, { auth: false, cookie: true }));
  }

  /** `DELETE /v1/sessions/current` (best effort), then the session and the pending ids are forgotten. */
  async signOut(): Promise<void> {
    if (this.current) {
      try { await this.call("DELETE", "/v1/sessions/current"); } catch { /* signed out here either way */ }
    }
    this.storage.removeItem(pendingKey);
    this.setSession(null);
  }

  /**
   * `POST /v1/sessions/refresh`: rotates the tokens. Single-flight: calls that find the token
   * refused at once share one refresh. A refresh token the server refuses signs the client out.
   */
  refreshSession(): Promise<Session> {
    if (!this.refreshing) {
      this.refreshing = this.refreshOnce().finally(() => { this.refreshing = null; });
    }
    return this.refreshing;
  }

  private async refreshOnce(): Promise<Session> {
    const spent = this.current;
    if (!spent) throw new RedeemError("notIdentified", "Sign in first.", 401);
    try {
      const answer = await this.call("POST", "/v1/sessions/refresh", { refreshToken: spent.session.refreshToken }, { auth: false });
      return this.signedIn(answer).session;
    } catch (e) {
      if (e instanceof RedeemError && (e.code === "invalidToken" || e.status === 401)) this.setSession(null);
      throw e;
    }
  }

  /** `GET /v1/me`, with `managementUrl`. */
  async me(): Promise<Account> {
    return parseAccount((await this.call("GET", "/v1/me")).body, "me");
  }

  // Email verification and password reset: the server mails a code, which the user pastes back.

  /**
   * `POST /v1/me/email/verify`: mails a verification code (`ev_…`, 24 hours) to the account's
   * email. `invalidState` (409) when it is verified already or there is none; `mailNotConfigured`
   * (403) when the server sends no mail.
   */
  async requestEmailVerification(): Promise<void> {
    await this.call("POST", "/v1/me/email/verify");
  }

  /** `POST /v1/accounts/email/confirm`: verifies the email with the mailed code (no session needed). A wrong, used or expired code: `invalidToken`. */
  async verifyEmail(code: string): Promise<void> {
    await this.call("POST", "/v1/accounts/email/confirm", { token: code }, { auth: false });
  }

  /** `POST /v1/sessions/password/reset`: mails a reset code (`pr_…`, 1 hour) if an account has the email; it answers the same either way. */
  async requestPasswordReset(email: string): Promise<void> {
    await this.call("POST", "/v1/sessions/password/reset", { email }, { auth: false });
  }

  /**
   * `POST /v1/sessions/password/reset/confirm`: sets the new password with the mailed code and
   * signs in. The account's other sessions end, and its email counts as verified. `weakPassword`
   * leaves the code usable; a wrong, used or expired code: `invalidToken`.
   */
  async resetPassword(code: string, newPassword: string): Promise<AuthResult> {
    return this.signedIn(await this.call("POST", "/v1/sessions/password/reset/confirm", { token: code, password: newPassword }, { auth: false }));
  }

  // Coupons

  /**
   * `POST /v1/coupons/validate`. A refused code is `valid: false` with its `reason`, not an error.
   * With `productId`, a coupon that covers other plans only answers `notEligible`.
   */
  async validateCoupon(code: string, options: { productId?: string; platform?: Platform } = {}): Promise<CouponValidation> {
    const answer = await this.call("POST", "/v1/coupons/validate",
                                   { code, platform: options.platform ?? "web", environment: this.environment });
    const v = parseValidation(answer.body);
    const { productId } = options;
    if (v.valid && productId && v.eligibleProductIds.length > 0 && !v.eligibleProductIds.includes(productId)) {
      return { ...v, valid: false, reason: "notEligible" };
    }
    return v;
  }

  /**
   * `POST /v1/redemptions`: reserves one use and starts the grant; a retry answers the same
   * redemption. A refusal throws `CouponRefusedError`. A redemption not yet settled is kept in
   * the storage, so `pendingRedemptions()` finds it after a reload.
   */
  async redeemCoupon(code: string, options: { productId?: string; platform?: Platform } = {}): Promise<Redemption> {
    const body: JSONObject = { code, platform: options.platform ?? "web", environment: this.environment };
    if (options.productId) body.productId = options.productId;
    let answer: Answer;
    try {
      answer = await this.call("POST", "/v1/redemptions", body);
    } catch (e) {
      if (e instanceof RedeemError && e.status === 422 && isRefusalReason(e.code)) {
        throw new CouponRefusedError(e.code, e.message, e.status, e.requestId, e.redeemUrl);
      }
      throw e;
    }
    const redemption = parseRedemption(answer.body);
    if (!RedeemClient.isSettled(redemption.status)) this.addPending(redemption.redemptionId);
    return redemption;
  }

  /** `GET /v1/redemptions/{id}`: as it is now. */
  async redemption(redemptionId: string): Promise<Redemption> {
    return parseRedemption((await this.call("GET", `/v1/redemptions/${encodeURIComponent(redemptionId)}`)).body);
  }

  /**
   * Waits until the redemption completes or fails, with the server's long poll
   * (`GET /v1/redemptions/{id}?wait=…`, at most 30 s a request), for `timeout` ms in all
   * (60 s by default). A dropped connection is asked again. A settled redemption leaves the
   * pending ids. A discount waiting for its store purchase (`reserved`) is `timedOut`.
   */
  async awaitCouponCompletion(redemptionId: string, options: { timeout?: number } = {}): Promise<CouponCompletion> {
    const deadline = Date.now() + (options.timeout ?? 60_000);
    const path = `/v1/redemptions/${encodeURIComponent(redemptionId)}`;
    let last: Redemption | null = null;
    let pause = 200;
    for (;;) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) return { outcome: "timedOut", redemption: last };
      const wait = Math.min(30, Math.floor(remaining / 1000));
      try {
        last = parseRedemption((await this.call("GET", `${path}?wait=${wait}`)).body);
      } catch (e) {
        if (e instanceof RedeemError && e.status === 404) this.removePending(redemptionId);
        if (!(e instanceof RedeemError) || !(e.code === "network" || [502, 503, 504].includes(e.status))) throw e;
        await sleep(Math.min(pause, Math.max(deadline - Date.now(), 0)));
        pause = Math.min(pause * 2, 5000);
        continue;
      }
      pause = 200;
      if (last.status === "completed") { this.removePending(redemptionId); return { outcome: "completed", redemption: last }; }
      if (last.status === "failed" || last.status === "released") {
        this.removePending(redemptionId);
        return { outcome: "failed", redemption: last };
      }
      if (wait === 0 || last.status === "reserved") return { outcome: "timedOut", redemption: last };
    }
  }

  /** The redemptions made here that had not settled yet, oldest first (they survive a reload). */
  pendingRedemptions(): string[] {
    try {
      const ids: unknown = JSON.parse(this.storage.getItem(pendingKey) ?? "[]");
      return Array.isArray(ids) ? ids.filter((x): x is string => typeof x === "string") : [];
    } catch {
      return [];
    }
  }

  /** `GET /v1/me/redemptions`, newest first. */
  async redemptions(options: { limit?: number; cursor?: string } = {}): Promise<Page<Redemption>> {
    const query = new URLSearchParams();
    if (options.limit !== undefined) query.set("limit", String(options.limit));
    if (options.cursor !== undefined) query.set("cursor", options.cursor);
    const suffix = query.toString() ? `?${query}` : "";
    return parsePage((await this.call("GET", `/v1/me/redemptions${suffix}`)).body, parseRedemption, "redemptions");
  }

  /** `GET /v1/me/entitlements`: the active ones. */
  async entitlements(): Promise<Entitlement[]> {
    return parseEntitlements((await this.call("GET", "/v1/me/entitlements")).body);
  }

  static isSettled(status: RedemptionStatus): boolean {
    return status === "completed" || status === "failed" || status === "released";
  }

  // Transport

  private signedIn(answer: Answer): AuthResult {
    const result = parseAuthResult(answer.body);
    this.setSession(result);
    return result;
  }

  private setSession(session: AuthResult | null): void {
    this.current = session;
    this.onSessionChange?.(session);
  }

  private addPending(id: string): void {
    const ids = this.pendingRedemptions();
    if (!ids.includes(id)) this.storage.setItem(pendingKey, JSON.stringify([...ids, id]));
  }

  private removePending(id: string): void {
    const ids = this.pendingRedemptions().filter((x) => x !== id);
    if (ids.length) this.storage.setItem(pendingKey, JSON.stringify(ids));
    else this.storage.removeItem(pendingKey);
  }

  /**
   * One request. With `auth` (the default) it carries the access token, and a token the server
   * refuses (401 `invalidToken`) is refreshed once and the request sent again.
   */
  private async call(method: string, path: string, body?: unknown,
                     options: { auth?: boolean; cookie?: boolean } = {}): Promise<Answer> {
    const auth = options.auth ?? true;
    if (auth && !this.current) throw new RedeemError("notIdentified", "Sign in first.", 401);
    const token = auth ? this.current?.session.accessToken : undefined;
    const answer = await this.send(method, path, body, token, options.cookie ?? false);
    if (answer.status === 401 && auth && errorOf(answer).code === "invalidToken") {
      // Refreshed already by a call refused at the same time: use its tokens, don't refresh again.
      const current = this.current?.session;
      const fresh = current && current.accessToken !== token ? current : await this.refreshSession();
      return this.check(await this.send(method, path, body, fresh.accessToken, false));
    }
    return this.check(answer);
  }

  private check(answer: Answer): Answer {
    if (answer.status >= 200 && answer.status < 300) return answer;
    const e = errorOf(answer);
    throw new RedeemError(e.code, e.message, answer.status, e.field, answer.requestId, e.redeemUrl);
  }

  private async send(method: string, path: string, body: unknown, token: string | undefined, cookie: boolean): Promise<Answer> {
    const headers: Record<string, string> = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (token) headers.Authorization = `Bearer ${token}`;
    if (this.app) headers["Redeem-App"] = this.app;
    let response: Response;
    try {
      response = await this.fetcher(this.baseUrl + path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
        credentials: cookie ? "include" : "omit", cache: "no-store",
      });
    } catch (e) {
      throw new RedeemError("network", `The server could not be reached (${e instanceof Error ? e.message : String(e)}).`);
    }
    const text = await response.text();
    let parsed: unknown = null;
    if (text) {
      try { parsed = JSON.parse(text); } catch { parsed = null; }
    }
    return { status: response.status, body: parsed, requestId: response.headers.get("X-Request-Id") ?? undefined };
  }
}

/** An error body's fields (`{error: {code, message, field?, redeemUrl?}}`), or a stand-in for a body that is not one. */
function errorOf(answer: Answer): { code: string; message: string; field?: string; redeemUrl?: string } {
  const error = typeof answer.body === "object" && answer.body !== null ? (answer.body as JSONObject).error : undefined;
  if (typeof error === "object" && error !== null) {
    const e = error as JSONObject;
    if (typeof e.code === "string") {
      return { code: e.code, message: typeof e.message === "string" ? e.message : e.code,
               field: typeof e.field === "string" ? e.field : undefined,
               redeemUrl: typeof e.redeemUrl === "string" ? e.redeemUrl : undefined };
    }
  }
  return { code: answer.status >= 500 ? "internal" : "decoding", message: `The server answered ${answer.status}.` };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
