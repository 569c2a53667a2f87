// Redeem's web client: one ES module with no dependency but `fetch`, so that the gateway can serve
// it as it is to the /redeem page (which imports it) and an app can bundle it.
export const refusalReasons = [
    "notFound", "inactive", "notStarted", "expired", "exhausted", "alreadyRedeemed", "notEligible", "notReady", "alreadyOwned",
    "webOnly", "mistyped", "codeUsed",
];
// MARK: - Errors
/** Every failure: the server's `error.code` (or `network`, `decoding`), its message and field. */
export class RedeemError extends Error {
    constructor(code, message, status = 0, field, requestId, redeemUrl) {
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
    constructor(reason, message, status = 422, requestId, redeemUrl) {
        super(reason, message, status, undefined, requestId, redeemUrl);
        this.name = "CouponRefusedError";
        this.reason = reason;
    }
}
export function isRefusalReason(value) {
    return typeof value === "string" && refusalReasons.includes(value);
}
function fail(path, what) {
    throw new RedeemError("decoding", `${path}: expected ${what}`);
}
function object(v, path) {
    return typeof v === "object" && v !== null && !Array.isArray(v) ? v : fail(path, "an object");
}
function string(v, path) {
    return typeof v === "string" ? v : fail(path, "a string");
}
function optionalString(v, path) {
    return v === undefined || v === null ? undefined : string(v, path);
}
function number(v, path) {
    return typeof v === "number" && Number.isFinite(v) ? v : fail(path, "a number");
}
function boolean(v, path) {
    return typeof v === "boolean" ? v : fail(path, "a boolean");
}
function date(v, path) {
    const d = new Date(string(v, path));
    return Number.isNaN(d.getTime()) ? fail(path, "an ISO 8601 time") : d;
}
function array(v, path, item) {
    return Array.isArray(v) ? v.map((x, i) => item(x, `${path}[${i}]`)) : fail(path, "an array");
}
function oneOf(v, path, values) {
    return typeof v === "string" && values.includes(v) ? v : fail(path, values.join(" | "));
}
function money(v, path) {
    const o = object(v, path);
    return { amount: string(o.amount, `${path}.amount`), currency: string(o.currency, `${path}.currency`) };
}
const platforms = ["ios", "android", "web"];
const statuses = ["reserved", "granting", "completed", "failed", "released"];
export function parseCoupon(v, path = "coupon") {
    const o = object(v, path);
    const d = object(o.duration, `${path}.duration`);
    const c = {
        code: string(o.code, `${path}.code`),
        kind: oneOf(o.kind, `${path}.kind`, ["freePeriod", "percentOff", "amountOff"]),
        duration: { unit: oneOf(d.unit, `${path}.duration.unit`, ["day", "week", "month", "year"]),
            count: number(d.count, `${path}.duration.count`) },
    };
    if (o.percentOff != null)
        c.percentOff = number(o.percentOff, `${path}.percentOff`);
    if (o.amountOff != null)
        c.amountOff = money(o.amountOff, `${path}.amountOff`);
    if (o.periodCount != null)
        c.periodCount = number(o.periodCount, `${path}.periodCount`);
    if (o.entitlementId != null)
        c.entitlementId = string(o.entitlementId, `${path}.entitlementId`);
    return c;
}
export function parseValidation(v, path = "validation") {
    const o = object(v, path);
    const r = {
        valid: boolean(o.valid, `${path}.valid`),
        eligibleProductIds: array(o.eligibleProductIds, `${path}.eligibleProductIds`, string),
    };
    if (o.reason != null)
        r.reason = oneOf(o.reason, `${path}.reason`, refusalReasons);
    if (o.coupon != null)
        r.coupon = parseCoupon(o.coupon, `${path}.coupon`);
    if (o.redeemUrl != null)
        r.redeemUrl = string(o.redeemUrl, `${path}.redeemUrl`);
    if (!r.valid && !r.reason)
        fail(`${path}.reason`, "a reason when valid is false");
    return r;
}
export function parseRedemption(v, path = "redemption") {
    const o = object(v, path);
    const r = {
        redemptionId: string(o.redemptionId, `${path}.redemptionId`),
        code: string(o.code, `${path}.code`),
        status: oneOf(o.status, `${path}.status`, statuses),
        platform: oneOf(o.platform, `${path}.platform`, platforms),
        productId: optionalString(o.productId, `${path}.productId`) ?? null,
        pricePaid: o.pricePaid == null ? null : money(o.pricePaid, `${path}.pricePaid`),
        sandbox: boolean(o.sandbox, `${path}.sandbox`),
        reservedAt: date(o.reservedAt, `${path}.reservedAt`),
    };
    if (o.completedAt != null)
        r.completedAt = date(o.completedAt, `${path}.completedAt`);
    if (o.failureReason != null)
        r.failureReason = string(o.failureReason, `${path}.failureReason`);
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
export function parseEntitlement(v, path = "entitlement") {
    const o = object(v, path);
    return { entitlementId: string(o.entitlementId, `${path}.entitlementId`), expiresAt: date(o.expiresAt, `${path}.expiresAt`),
        sandbox: boolean(o.sandbox, `${path}.sandbox`), source: string(o.source, `${path}.source`) };
}
export function parseEntitlements(v, path = "entitlements") {
    return array(object(v, path).data, `${path}.data`, parseEntitlement);
}
export function parseAccount(v, path = "account") {
    const o = object(v, path);
    const a = {
        id: string(o.id, `${path}.id`),
        emailVerified: o.emailVerified === undefined ? false : boolean(o.emailVerified, `${path}.emailVerified`),
        appUserId: string(o.appUserId, `${path}.appUserId`),
        identities: array(o.identities, `${path}.identities`, (x, p) => {
            const i = object(x, p);
            const identity = { type: string(i.type, `${p}.type`) };
            if (i.email != null)
                identity.email = string(i.email, `${p}.email`);
            if (i.recordName != null)
                identity.recordName = string(i.recordName, `${p}.recordName`);
            return identity;
        }),
        createdAt: date(o.createdAt, `${path}.createdAt`),
    };
    if (o.email != null)
        a.email = string(o.email, `${path}.email`);
    if ("managementUrl" in o)
        a.managementUrl = optionalString(o.managementUrl, `${path}.managementUrl`) ?? null;
    return a;
}
export function parseAuthResult(v, path = "auth") {
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
export function parseErrorBody(v, path = "error") {
    const e = object(object(v, path).error, `${path}.error`);
    const r = {
        code: string(e.code, `${path}.error.code`), message: string(e.message, `${path}.error.message`),
    };
    if (e.field != null)
        r.field = string(e.field, `${path}.error.field`);
    if (e.redeemUrl != null)
        r.redeemUrl = string(e.redeemUrl, `${path}.error.redeemUrl`);
    return r;
}
export function parsePage(v, item, path = "page") {
    const o = object(v, path);
    return { data: array(o.data, `${path}.data`, item), nextCursor: optionalString(o.nextCursor, `${path}.nextCursor`) ?? null };
}
/** A storage for tests and for pages that must not persist anything. */
export class MemoryStorage {
    constructor() {
        this.values = new Map();
    }
    getItem(key) { return this.values.get(key) ?? null; }
    setItem(key, value) { this.values.set(key, value); }
    removeItem(key) { this.values.delete(key); }
}
const pendingKey = "redeem.pendingRedemptions";
export class RedeemClient {
    constructor(options) {
        this.current = null;
        this.refreshing = null;
        this.baseUrl = options.baseUrl.replace(/\/+$/, "");
        this.fetcher = options.fetch ?? ((input, init) => fetch(input, init));
        this.storage = options.storage ?? new MemoryStorage();
        this.environment = options.environment ?? "production";
        this.onSessionChange = options.onSessionChange;
        this.app = options.app;
    }
    /** The signed-in account and its tokens, or null. */
    get session() { return this.current; }
    get isSignedIn() { return this.current !== null; }
    /** Takes a session kept by the app (from `onSessionChange`), e.g. after a reload. */
    restoreSession(session) { this.current = session; }
    // Sessions
    /** `POST /v1/accounts`. */
    async signUp(email, password) {
        return this.signedIn(await this.call("POST", "/v1/accounts", { email, password }, { auth: false }));
    }
    /** `POST /v1/sessions`. A wrong email or password: `invalidCredentials`. */
    async signIn(email, password) {
        return this.signedIn(await this.call("POST", "/v1/sessions", { email, password }, { auth: false }));
    }
    /**
     * Where to send the browser for Sign in with Apple (`GET /v1/sessions/apple/start`). It comes
     * back to `returnTo` (the gateway's `/redeem…`, or an allow-listed URL) with `?code=<one-time
     * code>` or `?error=`; pass the code to `completeAppleSignIn`.
     */
    appleSignInUrl(returnTo, options = {}) {
        let url = `${this.baseUrl}/v1/sessions/apple/start?return=${encodeURIComponent(returnTo)}`;
        if (options.codeChallenge)
            url += `&code_challenge=${encodeURIComponent(options.codeChallenge)}&code_challenge_method=S256`;
        return url;
    }
    /**
     * `POST /v1/sessions/exchange`: the one-time code for a session. A browser sends the flow's
     * cookie (set by the start, HttpOnly); an app that started with a PKCE challenge sends its verifier.
     */
    async completeAppleSignIn(code, options = {}) {
        const body = { code };
        if (options.codeVerifier)
            body.codeVerifier = options.codeVerifier;
        return this.signedIn(await this.call("POST", "/v1/sessions/exchange", body, { auth: false, cookie: true }));
    }
    /** `DELETE /v1/sessions/current` (best effort), then the session and the pending ids are forgotten. */
    async signOut() {
        if (this.current) {
            try {
                await this.call("DELETE", "/v1/sessions/current");
            }
            catch { /* signed out here either way */ }
        }
        this.storage.removeItem(pendingKey);
        this.setSession(null);
    }
    /**
     * `POST /v1/sessions/refresh`: rotates the tokens. Single-flight: calls that find the token
     * refused at once share one refresh. A refresh token the server refuses signs the client out.
     */
    refreshSession() {
        if (!this.refreshing) {
            this.refreshing = this.refreshOnce().finally(() => { this.refreshing = null; });
        }
        return this.refreshing;
    }
    async refreshOnce() {
        const spent = this.current;
        if (!spent)
            throw new RedeemError("notIdentified", "Sign in first.", 401);
        try {
            const answer = await this.call("POST", "/v1/sessions/refresh", { refreshToken: spent.session.refreshToken }, { auth: false });
            return this.signedIn(answer).session;
        }
        catch (e) {
            if (e instanceof RedeemError && (e.code === "invalidToken" || e.status === 401))
                this.setSession(null);
            throw e;
        }
    }
    /** `GET /v1/me`, with `managementUrl`. */
    async me() {
        return parseAccount((await this.call("GET", "/v1/me")).body, "me");
    }
    // Email verification and password reset: the server mails a code, which the user pastes back.
    /**
     * `POST /v1/me/email/verify`: mails a verification code (`ev_…`, 24 hours) to the account's
     * email. `invalidState` (409) when it is verified already or there is none; `mailNotConfigured`
     * (403) when the server sends no mail.
     */
    async requestEmailVerification() {
        await this.call("POST", "/v1/me/email/verify");
    }
    /** `POST /v1/accounts/email/confirm`: verifies the email with the mailed code (no session needed). A wrong, used or expired code: `invalidToken`. */
    async verifyEmail(code) {
        await this.call("POST", "/v1/accounts/email/confirm", { token: code }, { auth: false });
    }
    /** `POST /v1/sessions/password/reset`: mails a reset code (`pr_…`, 1 hour) if an account has the email; it answers the same either way. */
    async requestPasswordReset(email) {
        await this.call("POST", "/v1/sessions/password/reset", { email }, { auth: false });
    }
    /**
     * `POST /v1/sessions/password/reset/confirm`: sets the new password with the mailed code and
     * signs in. The account's other sessions end, and its email counts as verified. `weakPassword`
     * leaves the code usable; a wrong, used or expired code: `invalidToken`.
     */
    async resetPassword(code, newPassword) {
        return this.signedIn(await this.call("POST", "/v1/sessions/password/reset/confirm", { token: code, password: newPassword }, { auth: false }));
    }
    // Coupons
    /**
     * `POST /v1/coupons/validate`. A refused code is `valid: false` with its `reason`, not an error.
     * With `productId`, a coupon that covers other plans only answers `notEligible`.
     */
    async validateCoupon(code, options = {}) {
        const answer = await this.call("POST", "/v1/coupons/validate", { code, platform: options.platform ?? "web", environment: this.environment });
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
    async redeemCoupon(code, options = {}) {
        const body = { code, platform: options.platform ?? "web", environment: this.environment };
        if (options.productId)
            body.productId = options.productId;
        let answer;
        try {
            answer = await this.call("POST", "/v1/redemptions", body);
        }
        catch (e) {
            if (e instanceof RedeemError && e.status === 422 && isRefusalReason(e.code)) {
                throw new CouponRefusedError(e.code, e.message, e.status, e.requestId, e.redeemUrl);
            }
            throw e;
        }
        const redemption = parseRedemption(answer.body);
        if (!RedeemClient.isSettled(redemption.status))
            this.addPending(redemption.redemptionId);
        return redemption;
    }
    /** `GET /v1/redemptions/{id}`: as it is now. */
    async redemption(redemptionId) {
        return parseRedemption((await this.call("GET", `/v1/redemptions/${encodeURIComponent(redemptionId)}`)).body);
    }
    /**
     * Waits until the redemption completes or fails, with the server's long poll
     * (`GET /v1/redemptions/{id}?wait=…`, at most 30 s a request), for `timeout` ms in all
     * (60 s by default). A dropped connection is asked again. A settled redemption leaves the
     * pending ids. A discount waiting for its store purchase (`reserved`) is `timedOut`.
     */
    async awaitCouponCompletion(redemptionId, options = {}) {
        const deadline = Date.now() + (options.timeout ?? 60000);
        const path = `/v1/redemptions/${encodeURIComponent(redemptionId)}`;
        let last = null;
        let pause = 200;
        for (;;) {
            const remaining = deadline - Date.now();
            if (remaining <= 0)
                return { outcome: "timedOut", redemption: last };
            const wait = Math.min(30, Math.floor(remaining / 1000));
            try {
                last = parseRedemption((await this.call("GET", `${path}?wait=${wait}`)).body);
            }
            catch (e) {
                if (e instanceof RedeemError && e.status === 404)
                    this.removePending(redemptionId);
                if (!(e instanceof RedeemError) || !(e.code === "network" || [502, 503, 504].includes(e.status)))
                    throw e;
                await sleep(Math.min(pause, Math.max(deadline - Date.now(), 0)));
                pause = Math.min(pause * 2, 5000);
                continue;
            }
            pause = 200;
            if (last.status === "completed") {
                this.removePending(redemptionId);
                return { outcome: "completed", redemption: last };
            }
            if (last.status === "failed" || last.status === "released") {
                this.removePending(redemptionId);
                return { outcome: "failed", redemption: last };
            }
            if (wait === 0 || last.status === "reserved")
                return { outcome: "timedOut", redemption: last };
        }
    }
    /** The redemptions made here that had not settled yet, oldest first (they survive a reload). */
    pendingRedemptions() {
        try {
            const ids = JSON.parse(this.storage.getItem(pendingKey) ?? "[]");
            return Array.isArray(ids) ? ids.filter((x) => typeof x === "string") : [];
        }
        catch {
            return [];
        }
    }
    /** `GET /v1/me/redemptions`, newest first. */
    async redemptions(options = {}) {
        const query = new URLSearchParams();
        if (options.limit !== undefined)
            query.set("limit", String(options.limit));
        if (options.cursor !== undefined)
            query.set("cursor", options.cursor);
        const suffix = query.toString() ? `?${query}` : "";
        return parsePage((await this.call("GET", `/v1/me/redemptions${suffix}`)).body, parseRedemption, "redemptions");
    }
    /** `GET /v1/me/entitlements`: the active ones. */
    async entitlements() {
        return parseEntitlements((await this.call("GET", "/v1/me/entitlements")).body);
    }
    static isSettled(status) {
        return status === "completed" || status === "failed" || status === "released";
    }
    // Transport
    signedIn(answer) {
        const result = parseAuthResult(answer.body);
        this.setSession(result);
        return result;
    }
    setSession(session) {
        this.current = session;
        this.onSessionChange?.(session);
    }
    addPending(id) {
        const ids = this.pendingRedemptions();
        if (!ids.includes(id))
            this.storage.setItem(pendingKey, JSON.stringify([...ids, id]));
    }
    removePending(id) {
        const ids = this.pendingRedemptions().filter((x) => x !== id);
        if (ids.length)
            this.storage.setItem(pendingKey, JSON.stringify(ids));
        else
            this.storage.removeItem(pendingKey);
    }
    /**
     * One request. With `auth` (the default) it carries the access token, and a token the server
     * refuses (401 `invalidToken`) is refreshed once and the request sent again.
     */
    async call(method, path, body, options = {}) {
        const auth = options.auth ?? true;
        if (auth && !this.current)
            throw new RedeemError("notIdentified", "Sign in first.", 401);
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
    check(answer) {
        if (answer.status >= 200 && answer.status < 300)
            return answer;
        const e = errorOf(answer);
        throw new RedeemError(e.code, e.message, answer.status, e.field, answer.requestId, e.redeemUrl);
    }
    async send(method, path, body, token, cookie) {
        const headers = { Accept: "application/json" };
        if (body !== undefined)
            headers["Content-Type"] = "application/json";
        if (token)
            headers.Authorization = `Bearer ${token}`;
        if (this.app)
            headers["Redeem-App"] = this.app;
        let response;
        try {
            response = await this.fetcher(this.baseUrl + path, {
                method, headers, body: body === undefined ? undefined : JSON.stringify(body),
                credentials: cookie ? "include" : "omit", cache: "no-store",
            });
        }
        catch (e) {
            throw new RedeemError("network", `The server could not be reached (${e instanceof Error ? e.message : String(e)}).`);
        }
        const text = await response.text();
        let parsed = null;
        if (text) {
            try {
                parsed = JSON.parse(text);
            }
            catch {
                parsed = null;
            }
        }
        return { status: response.status, body: parsed, requestId: response.headers.get("X-Request-Id") ?? undefined };
    }
}
/** An error body's fields (`{error: {code, message, field?, redeemUrl?}}`), or a stand-in for a body that is not one. */
function errorOf(answer) {
    const error = typeof answer.body === "object" && answer.body !== null ? answer.body.error : undefined;
    if (typeof error === "object" && error !== null) {
        const e = error;
        if (typeof e.code === "string") {
            return { code: e.code, message: typeof e.message === "string" ? e.message : e.code,
                field: typeof e.field === "string" ? e.field : undefined,
                redeemUrl: typeof e.redeemUrl === "string" ? e.redeemUrl : undefined };
        }
    }
    return { code: answer.status >= 500 ? "internal" : "decoding", message: `The server answered ${answer.status}.` };
}
function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}
