"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  let session = null;          // {accessToken}: the refresh token is in an HttpOnly cookie the page never reads
  let mode = "live";
  let app = null;              // the app worked in (its id, sent as Redeem-App); null: the default app
  let couponCursors = [null];  // the cursor of each page seen, for Previous
  let couponPage = 0;
  let currentCoupon = null;
  let redemptionRows = [];
  let redemptionsCursor = null;
  let auditCursor = null;
  let currentCustomer = null;  // the appUserId shown on the Customers page
  let customerCursor = null;
  let dryRunTimer = null;
  let dryRunSeq = 0;
  let inviteToken = null;

  function say(text, isError) {
    const s = $("status");
    s.textContent = text || "";
    s.className = isError ? "status error" : "status";
  }

  function sentence(message) {
    const m = String(message || "Something went wrong").trim();
    const s = m.charAt(0).toUpperCase() + m.slice(1);
    return /[.!?]$/.test(s) ? s : s + ".";
  }

  function el(tag, text, className) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (className) e.className = className;
    return e;
  }

  function row(cells) {
    const tr = document.createElement("tr");
    cells.forEach((c) => {
      const td = document.createElement("td");
      if (c instanceof Node) td.appendChild(c); else td.textContent = c === undefined || c === null ? "—" : String(c);
      tr.appendChild(td);
    });
    return tr;
  }

  function button(text, onClick, className) {
    const b = el("button", text, className || "secondary small");
    b.type = "button";
    b.addEventListener("click", onClick);
    return b;
  }

  function time(iso) { return iso ? String(iso).replace("T", " ").replace(/\.\d+Z$/, "Z") : "—"; }
  function money(m) { return m ? m.amount + " " + m.currency : "—"; }

  class APIError extends Error {
    constructor(status, error) { super(error && error.message || "request failed"); this.status = status; this.error = error || {}; }
  }

  async function api(method, path, body, options) {
    options = options || {};
    const headers = {"Redeem-Mode": mode};
    if (app) headers["Redeem-App"] = app;
    if (session) headers["Authorization"] = "Bearer " + session.accessToken;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (options.accept) headers["Accept"] = options.accept;
    let response;
    try {
      response = await fetch(path, {method: method, headers: headers, body: body === undefined ? undefined : JSON.stringify(body)});
    } catch (e) {
      throw new APIError(0, {code: "offline", message: "We couldn't reach the server. Check your connection and try again"});
    }
    if (response.status === 401 && session && !options.retried) {
      if (await refresh()) return api(method, path, body, Object.assign({}, options, {retried: true}));
    }
    if (options.accept === "text/csv" && response.ok) return response.text();
    if (response.status === 204) return null;
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) throw new APIError(response.status, data && data.error);
    return data;
  }

  // A new access token from the session cookie (which rotates with it): the dashboard's session.
  async function renew() {
    const r = await fetch("/dashboard/session/refresh", {method: "POST", credentials: "same-origin"});
    return r.ok ? r.json() : null;
  }

  async function refresh() {
    try {
      const data = await renew();
      if (!data) { signedOut("Your session ended. Sign in again."); return false; }
      session = {accessToken: data.accessToken};
      return true;
    } catch (e) { return false; }
  }

  function fail(e) {
    if (e instanceof APIError && e.status === 401) { signedOut("Your session ended. Sign in again."); return; }
    if (e instanceof APIError && e.status === 403) { say("Your role may not do that.", true); return; }
    say(sentence(e && e.message), true);
  }

  // MARK: fields and their errors

  function clearErrors(form) { form.querySelectorAll(".field-error").forEach((p) => { p.textContent = ""; }); }

  function showFieldError(prefix, e) {
    const field = e.error && e.error.field;
    const target = (field && $(prefix + field)) || $(prefix + "form");
    if (target) target.textContent = sentence(e.message);
    return !!target;
  }

  // MARK: views

  const views = ["signin", "reset", "invite", "overview", "coupons", "new", "coupon", "customers", "plans", "webhooks", "stores", "keys", "members", "audit"];

  function show(name) {
    views.forEach((v) => { $("view-" + v).hidden = v !== name; });
    document.querySelectorAll("nav a").forEach((a) => {
      if (a.getAttribute("href") === "#" + name) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    });
    const h = $("view-" + name).querySelector("h1");
    if (h) h.focus();
  }

  function route() {
    const hash = decodeURIComponent(location.hash.replace(/^#/, ""));
    if (hash.indexOf("invite=") === 0) {
      inviteToken = hash.slice("invite=".length);
      history.replaceState(null, "", location.pathname);  // the token leaves the address bar
      show("invite");
      return;
    }
    if (!session) { show(inviteToken ? "invite" : hash === "reset" ? "reset" : "signin"); return; }
    say("");
    if (hash.indexOf("coupon/") === 0) { openCoupon(hash.slice("coupon/".length)); return; }
    if (hash.indexOf("customer/") === 0) { openCustomer(hash.slice("customer/".length)); return; }
    const name = views.indexOf(hash) >= 0 && hash !== "signin" && hash !== "reset" && hash !== "invite" && hash !== "coupon" ? hash : "coupons";
    show(name);
    if (name === "coupons") { couponCursors = [null]; couponPage = 0; loadCoupons(); }
    if (name === "new") resetCouponForm();
    if (name === "plans") loadPlans();
    if (name === "customers") { $("customer").hidden = true; currentCustomer = null; }
    if (name === "overview") loadOverview();
    if (name === "webhooks") loadWebhooks();
    if (name === "stores") loadStores();
    if (name === "keys") loadKeys();
    if (name === "members") loadMembers();
    if (name === "audit") { auditCursor = null; $("audit-table").tBodies[0].textContent = ""; loadAudit(); }
  }

  // MARK: session

  async function signedIn(data) {
    session = {accessToken: data.accessToken || data.session.accessToken};
    $("who").textContent = data.account.email || "";
    $("nav").hidden = false;
    $("session").hidden = false;
    inviteToken = null;
    await loadApps();
    if (location.hash === "" || location.hash === "#signin") location.hash = "#coupons"; else route();
  }

  // The app switcher: the apps this member may work in (every app for a deployment admin). The
  // choice is remembered in this browser (an app id, no secret); without one, the first app.
  const appKey = "redeem.dashboard.app";
  async function loadApps() {
    let apps = [];
    try {
      apps = (await api("GET", "/v1/apps?limit=100")).data || [];
    } catch (e) { /* no apps to switch between */ }
    const select = $("app");
    select.replaceChildren();
    apps.forEach((a) => {
      const o = el("option", a.name);
      o.value = a.id;
      select.appendChild(o);
    });
    let stored = null;
    try { stored = localStorage.getItem(appKey); } catch (e) { /* storage refused */ }
    const chosen = apps.find((a) => a.id === stored) || apps[0];
    app = chosen ? chosen.id : null;
    if (chosen) select.value = chosen.id;
    $("app-field").hidden = apps.length === 0;
  }

  function signedOut(message) {
    session = null;
    $("nav").hidden = true;
    $("session").hidden = true;
    $("signin-password").value = "";
    show("signin");
    say(message || "", !!message);
  }

  $("signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    say("Signing in…");
    try {
      const body = {email: $("signin-email").value.trim(), password: $("signin-password").value};
      if (!$("signin-totp-field").hidden) body.totpCode = $("signin-totp").value.trim();
      let data;
      try {
        data = await api("POST", "/dashboard/session", body);
      } catch (e) {
        // A member with TOTP: the same form asks for the code, then signs in with all three.
        if (e instanceof APIError && e.error && e.error.code === "totpRequired") {
          $("signin-totp-field").hidden = false;
          say("");
          $("signin-totp").focus();
          return;
        }
        if (e instanceof APIError && e.error && e.error.field === "totpCode") { $("err-signin-totp").textContent = sentence(e.message); say(""); return; }
        throw e;
      }
      $("signin-totp").value = "";
      $("err-signin-totp").textContent = "";
      $("signin-totp-field").hidden = true;
      session = {accessToken: data.accessToken};
      // A member has a role in at least one app; anyone else is listed none.
      let apps = [];
      try {
        apps = (await api("GET", "/v1/apps?limit=1")).data || [];
      } catch (e) {
        if (!(e instanceof APIError && e.status === 403)) throw e;
      }
      if (!apps.length) {
        try { await api("DELETE", "/dashboard/session"); } catch (e2) { /* its cookie goes either way */ }
        session = null;
        say("This account is not a member of the team.", true);
        return;
      }
      say("");
      signedIn(data);
    } catch (e) { session = null; fail(e); }
  });

  $("invite-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors($("invite-form"));
    try {
      const data = await api("POST", "/v1/members/accept", {token: inviteToken || "", password: $("invite-password").value});
      say("Welcome to the team.");
      location.hash = "#coupons";
      signedIn(data);
    } catch (e) {
      if (e.error && e.error.field === "password") $("err-invite-password").textContent = sentence(e.message); else fail(e);
      return;
    }
    // The invitation's own session lives in this page only; a dashboard session (its cookie) keeps
    // the member signed in across reloads. A member with TOTP signs in again on the next load.
    try {
      const email = ($("who").textContent || "").trim();
      const data = await api("POST", "/dashboard/session", {email: email, password: $("invite-password").value});
      session = {accessToken: data.accessToken};
    } catch (e) { /* signed in for this page */ }
  });

  // Forgot password: a code mailed to the account's email, then a new password with it. The
  // server answers alike whether or not an account has the email.
  $("reset-request-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors($("reset-request-form"));
    try {
      await api("POST", "/v1/sessions/password/reset", {email: $("reset-email").value.trim()});
      $("reset-request-form").hidden = true;
      $("reset-confirm-form").hidden = false;
      say("");
      $("reset-code").focus();
    } catch (e) {
      if (e instanceof APIError && e.error && e.error.code === "mailNotConfigured") {
        say("This server sends no mail, so passwords can't be reset here. Ask an admin to invite you again.", true);
      } else if (!showFieldError("err-reset-", e)) fail(e);
    }
  });

  $("reset-confirm-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors($("reset-confirm-form"));
    const email = $("reset-email").value.trim(), password = $("reset-password").value;
    try {
      await api("POST", "/v1/sessions/password/reset/confirm", {token: $("reset-code").value.trim(), password: password});
      const data = await api("POST", "/dashboard/session", {email: email, password: password});
      $("reset-password").value = "";
      $("reset-request-form").hidden = false;
      $("reset-confirm-form").hidden = true;
      say("Your password is changed.");
      signedIn(data);
    } catch (e) {
      if (e instanceof APIError && e.status === 401 && e.error && e.error.code === "invalidToken") {
        $("err-reset-token").textContent = "This code is not right, was used, or has expired.";
      } else if (e instanceof APIError && e.error && e.error.code === "totpRequired") {
        say("Your password is changed. Sign in with it and your authenticator app's code.");
        location.hash = "#signin";
      } else if (!showFieldError("err-reset-", e)) fail(e);
    }
  });

  $("sign-out").addEventListener("click", async () => {
    try { await api("DELETE", "/dashboard/session"); } catch (e) { /* signed out either way */ }
    signedOut("You are signed out.");
    $("status").className = "status";
  });

  $("app").addEventListener("change", () => {
    app = $("app").value || null;
    try { if (app) localStorage.setItem(appKey, app); } catch (e) { /* remembered for this page only */ }
    if (location.hash.indexOf("#coupon/") === 0) location.hash = "#coupons"; else route();
  });

  $("mode").addEventListener("change", () => {
    mode = $("mode").value;
    $("test-banner").hidden = mode !== "test";
    if (location.hash.indexOf("#coupon/") === 0) location.hash = "#coupons"; else route();
  });

  window.addEventListener("hashchange", route);

  // MARK: coupons

  function discount(c) {
    if (c.kind === "percentOff") return c.percentOff + " % for " + c.periodCount + " × " + c.duration.count + " " + c.duration.unit;
    if (c.kind === "amountOff") return money(c.amountOff) + " off for " + c.periodCount + " × " + c.duration.count + " " + c.duration.unit;
    return c.duration.count + " " + c.duration.unit + (c.duration.count === 1 ? "" : "s") + " free";
  }

  function offersState(c) {
    if (!c.storeOffers || !c.storeOffers.length) return "—";
    return (c.mode === "test" ? "simulated, " : "") + c.storeOffers.map((o) => o.productId + ": " + o.state).join(", ");
  }

  async function loadCoupons() {
    const tbody = $("coupons-table").tBodies[0];
    const filter = $("coupons-filter").value;
    let path = "/v1/coupons?limit=20";
    if (filter) path += "&active=" + filter;
    const cursor = couponCursors[couponPage];
    if (cursor) path += "&cursor=" + encodeURIComponent(cursor);
    try {
      const page = await api("GET", path);
      tbody.textContent = "";
      page.data.forEach((c) => {
        const link = el("a", c.code, "mono");
        link.href = "#coupon/" + encodeURIComponent(c.code);
        tbody.appendChild(row([link, c.kind, discount(c), c.redeemedCount + " / " + (c.maxRedemptions === null || c.maxRedemptions === undefined ? "∞" : c.maxRedemptions),
                               c.active ? "active" : "inactive", offersState(c)]));
      });
      if (!page.data.length) tbody.appendChild(row(["No coupons yet.", "", "", "", "", ""]));
      couponCursors[couponPage + 1] = page.nextCursor;
      $("coupons-next").disabled = !page.nextCursor;
      $("coupons-prev").disabled = couponPage === 0;
    } catch (e) { fail(e); }
  }

  $("coupons-filter").addEventListener("change", () => { couponCursors = [null]; couponPage = 0; loadCoupons(); });
  $("coupons-next").addEventListener("click", () => { couponPage += 1; loadCoupons(); });
  $("coupons-prev").addEventListener("click", () => { couponPage = Math.max(0, couponPage - 1); loadCoupons(); });

  // MARK: the coupon form, with the store limits checked as the operator types (dryRun)

  function isoFromLocal(value) { return value ? new Date(value + "Z").toISOString() : undefined; }
  function localFromIso(iso) { return iso ? String(iso).slice(0, 16) : ""; }

  function couponInput() {
    const kind = $("f-kind").value;
    const body = {code: $("f-code").value.trim(), kind: kind,
                  duration: {unit: $("f-duration-unit").value, count: Number($("f-duration-count").value || 0)}};
    if (kind === "percentOff" && $("f-percentOff").value) body.percentOff = Number($("f-percentOff").value);
    if (kind === "amountOff") body.amountOff = {amount: $("f-amount").value.trim(), currency: $("f-currency").value.trim().toUpperCase()};
    if (kind !== "freePeriod" && $("f-periodCount").value) body.periodCount = Number($("f-periodCount").value);
    const products = $("f-productIds").value.split(",").map((s) => s.trim()).filter((s) => s);
    if (products.length) body.productIds = products;
    body.platforms = ["f-ios", "f-android", "f-web"].filter((id) => $(id).checked).map((id) => $(id).value);
    const starts = isoFromLocal($("f-startsAt").value), expires = isoFromLocal($("f-expiresAt").value);
    if (starts) body.startsAt = starts;
    if (expires) body.expiresAt = expires;
    if ($("f-maxRedemptions").value) body.maxRedemptions = Number($("f-maxRedemptions").value);
    body.newCustomersOnly = $("f-newCustomersOnly").checked;
    if (body.kind === "freePeriod" && $("f-allowInApp").checked) body.allowInApp = true;
    return body;
  }

  function showKindFields() {
    const kind = $("f-kind").value;
    document.querySelectorAll("#coupon-form [data-kind]").forEach((d) => {
      const k = d.getAttribute("data-kind");
      d.hidden = !(k === kind || (k === "discount" && kind !== "freePeriod"));
    });
  }

  function resetCouponForm() {
    clearErrors($("coupon-form"));
    $("limits-list").textContent = "";
    $("limits-state").textContent = "Type to check the coupon against the stores' limits.";
    showKindFields();
  }

  function limitText(l) {
    const names = {maxRedemptions: "at most " + l.value + " uses", expiresWithinMonths: "ends within " + l.value + " months",
                   usesPerAccount: l.value + " use per account", activeCouponsPerProduct: "at most " + l.value + " active codes per plan"};
    return (l.store === "appStore" ? "App Store: " : l.store + ": ") + (names[l.limit] || l.limit + " " + l.value);
  }

  async function dryRun() {
    const seq = ++dryRunSeq;
    const form = $("coupon-form");
    const body = couponInput();
    if (!body.code) { $("limits-state").textContent = "Type a code to check the coupon."; return; }
    try {
      const preview = await api("POST", "/v1/coupons?dryRun=true", body);
      if (seq !== dryRunSeq) return;
      clearErrors(form);
      const list = $("limits-list");
      list.textContent = "";
      (preview.storeLimits || []).forEach((l) => list.appendChild(el("li", limitText(l))));
      $("limits-state").textContent = preview.storeLimits && preview.storeLimits.length
        ? "Within the stores' limits:" : "No store limits apply: Redeem grants this coupon itself.";
      $("limits-state").className = "";
    } catch (e) {
      if (seq !== dryRunSeq) return;
      clearErrors(form);
      if (e instanceof APIError && e.status === 422) {
        showFieldError("err-", e);
        $("limits-state").textContent = e.error.code === "storeLimit" ? "Over a store limit: " + sentence(e.message) : "Not valid yet: " + sentence(e.message);
        $("limits-state").className = "field-error";
      } else if (e instanceof APIError && e.status === 409) {
        $("err-code").textContent = sentence(e.message);
      } else { fail(e); }
    }
  }

  function scheduleDryRun() {
    clearTimeout(dryRunTimer);
    dryRunTimer = setTimeout(dryRun, 300);
  }

  $("coupon-form").addEventListener("input", scheduleDryRun);
  $("coupon-form").addEventListener("change", () => { showKindFields(); scheduleDryRun(); });
  $("coupon-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearTimeout(dryRunTimer);
    dryRunSeq++;
    clearErrors($("coupon-form"));
    try {
      const c = await api("POST", "/v1/coupons", couponInput());
      say("Coupon " + c.code + " created.");
      location.hash = "#coupon/" + encodeURIComponent(c.code);
    } catch (e) {
      if (e instanceof APIError && (e.status === 422 || e.status === 409)) { showFieldError("err-", e); say(sentence(e.message), true); }
      else fail(e);
    }
  });

  // MARK: one coupon

  function figure(dl, name, value) {
    const d = el("div");
    d.appendChild(el("dt", name));
    d.appendChild(el("dd", value === undefined || value === null ? "—" : value));
    dl.appendChild(d);
  }

  async function openCoupon(code) {
    show("coupon");
    try {
      const c = await api("GET", "/v1/coupons/" + encodeURIComponent(code));
      currentCoupon = c;
      $("coupon-title").textContent = "Coupon " + c.code;
      const dl = $("coupon-figures");
      dl.textContent = "";
      figure(dl, "State", c.active ? "active" : "inactive");
      figure(dl, "Kind", c.kind);
      figure(dl, "Gives", discount(c));
      figure(dl, "Redeemed", c.redeemedCount);
      figure(dl, "Reserved", c.reservedCount);
      figure(dl, "Cap", c.maxRedemptions === null || c.maxRedemptions === undefined ? "none" : c.maxRedemptions);
      figure(dl, "Remaining", c.remaining === null || c.remaining === undefined ? "no cap" : c.remaining);
      figure(dl, "Plans", c.productIds && c.productIds.length ? c.productIds.join(", ") : "all");
      figure(dl, "Platforms", (c.platforms || []).join(", "));
      figure(dl, "Starts", time(c.startsAt));
      figure(dl, "Expires", time(c.expiresAt));
      figure(dl, "Mode", c.mode);
      if (c.kind === "freePeriod" && (c.platforms || []).includes("ios") && !(c.storeOffers || []).some((o) => o.store === "appStore")) {
        figure(dl, "In the iOS app", c.allowInApp ? "allowed" : "no: iOS users redeem on the web");
      }
      const offers = $("coupon-offers");
      offers.tBodies[0].textContent = "";
      (c.storeOffers || []).forEach((o) => offers.tBodies[0].appendChild(row([o.store, o.productId, o.customCode || (o.store === "playStore" ? "—" : c.code), o.state, o.offerId, o.message])));
      offers.hidden = !(c.storeOffers && c.storeOffers.length);
      $("coupon-offers-empty").hidden = !offers.hidden;
      $("coupon-offers-simulated").hidden = offers.hidden || c.mode !== "test";
      $("p-maxRedemptions").value = c.maxRedemptions === null || c.maxRedemptions === undefined ? "" : c.maxRedemptions;
      $("p-expiresAt").value = localFromIso(c.expiresAt);
      $("deactivate").disabled = !c.active;
      $("codes-note").textContent = "";
      $("codes-download").hidden = true;
      clearErrors($("codes-form"));
      clearErrors($("patch-form"));
      redemptionRows = [];
      redemptionsCursor = null;
      await loadRedemptions();
    } catch (e) { fail(e); }
  }

  async function loadRedemptions() {
    let path = "/v1/coupons/" + encodeURIComponent(currentCoupon.code) + "/redemptions?limit=100";
    if (redemptionsCursor) path += "&cursor=" + encodeURIComponent(redemptionsCursor);
    const page = await api("GET", path);
    redemptionRows = redemptionRows.concat(page.data);
    redemptionsCursor = page.nextCursor;
    $("redemptions-more").hidden = !page.nextCursor;
    renderRedemptions();
  }

  function renderRedemptions() {
    const tbody = $("redemptions-table").tBodies[0];
    const status = $("redemptions-filter").value;
    tbody.textContent = "";
    const shown = redemptionRows.filter((r) => !status || r.status === status);
    shown.forEach((r) => {
      // An account's appUserId leads to its customer page.
      const who = el(r.appUserId ? "a" : "span", r.appUserId || r.accountId || "not claimed yet", "mono");
      if (r.appUserId) who.href = "#customer/" + encodeURIComponent(r.appUserId);
      tbody.appendChild(row([who, r.platform, r.productId, money(r.pricePaid), r.status, time(r.completedAt || r.reservedAt), r.sandbox ? "yes" : "no",
                             r.uniqueCodeLast4 ? "…" + r.uniqueCodeLast4 : "—"]));
    });
    if (!shown.length) tbody.appendChild(row(["No redemptions" + (status ? " with this status." : " yet."), "", "", "", "", "", "", ""]));
  }

  $("redemptions-filter").addEventListener("change", renderRedemptions);
  $("redemptions-more").addEventListener("click", () => loadRedemptions().catch(fail));

  $("csv").addEventListener("click", async () => {
    try {
      const text = await api("GET", "/v1/coupons/" + encodeURIComponent(currentCoupon.code) + "/redemptions", undefined, {accept: "text/csv"});
      const url = URL.createObjectURL(new Blob([text], {type: "text/csv"}));
      const a = el("a");
      a.href = url;
      a.download = "redemptions-" + currentCoupon.code + ".csv";
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
      say("CSV downloaded.");
    } catch (e) { fail(e); }
  });

  // The codes exist in plain text only in their CSV, which the server gives once: it is saved
  // as a file at once, never put into the page.
  function saveFile(text, name) {
    const url = URL.createObjectURL(new Blob([text], {type: "text/csv"}));
    const a = el("a");
    a.href = url;
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  async function downloadCodes() {
    const code = currentCoupon.code;
    const text = await api("GET", "/v1/coupons/" + encodeURIComponent(code) + "/codes.csv", undefined, {accept: "text/csv"});
    saveFile(text, "codes-" + code + ".csv");
    $("codes-download").hidden = true;
    $("codes-note").textContent = "Codes downloaded. Keep the file safe: it can't be downloaded again.";
  }

  $("codes-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors($("codes-form"));
    const prefix = $("c-prefix").value.trim();
    try {
      const made = await api("POST", "/v1/coupons/" + encodeURIComponent(currentCoupon.code) + "/codes",
                             {count: Number($("c-count").value), prefix: prefix || undefined});
      $("codes-note").textContent = "Made " + made.count + " codes. Downloading their CSV…";
      $("codes-download").hidden = false;
      try { await downloadCodes(); } catch (e) { $("codes-note").textContent = "Made " + made.count + " codes: download their CSV now (once)."; fail(e); }
    } catch (e) {
      if (e instanceof APIError && e.status === 422) { showFieldError("err-c-", e); say(sentence(e.message), true); } else fail(e);
    }
  });

  $("codes-download").addEventListener("click", () => downloadCodes().catch(fail));

  $("patch-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors($("patch-form"));
    const cap = $("p-maxRedemptions").value, expires = $("p-expiresAt").value;
    try {
      await api("PATCH", "/v1/coupons/" + encodeURIComponent(currentCoupon.code),
                {maxRedemptions: cap ? Number(cap) : null, expiresAt: expires ? isoFromLocal(expires) : null});
      say("Saved.");
      openCoupon(currentCoupon.code);
    } catch (e) {
      if (e instanceof APIError && e.status === 422) { showFieldError("err-p-", e); say(sentence(e.message), true); } else fail(e);
    }
  });

  $("deactivate").addEventListener("click", async () => {
    if (!window.confirm("Deactivate " + currentCoupon.code + "? It will redeem no more.")) return;
    try {
      await api("DELETE", "/v1/coupons/" + encodeURIComponent(currentCoupon.code));
      say("Deactivated.");
      openCoupon(currentCoupon.code);
    } catch (e) { fail(e); }
  });

  // MARK: customers: one end user's account, its entitlements and its redemptions in this mode

  function customerPath(appUserId) {
    return "/v1/customers/" + encodeURIComponent(appUserId) + "?limit=50" +
      (customerCursor ? "&cursor=" + encodeURIComponent(customerCursor) : "");
  }

  function showCustomer(c, more) {
    currentCustomer = c.appUserId;
    $("customer-query").value = c.appUserId;
    $("customer-title").textContent = "Account " + c.appUserId;
    const dl = $("customer-facts");
    dl.textContent = "";
    figure(dl, "appUserId", c.appUserId);
    figure(dl, "Email", c.email ? c.email + (c.emailVerified ? " (verified)" : " (not verified)") : null);
    figure(dl, "Since", time(c.createdAt));
    const ways = [["email", "password"], ["apple", "Apple"], ["cloudkit", "CloudKit"]].filter((w) => c.signIns[w[0]]).map((w) => w[1]);
    figure(dl, "Signs in with", ways.length ? ways.join(", ") : "nothing yet");
    const ents = $("customer-entitlements").tBodies[0];
    ents.textContent = "";
    const now = Date.now();
    c.entitlements.data.forEach((e) => {
      const active = Date.parse(e.expiresAt) > now;
      ents.appendChild(row([el("span", e.entitlementId, "mono"), active ? "active" : "expired", time(e.expiresAt), e.source, e.sandbox ? "yes" : "no"]));
    });
    if (!c.entitlements.data.length) ents.appendChild(row(["No entitlements.", "", "", "", ""]));
    if (c.entitlements.partial) say("The store could not be read in time: these are Redeem's own grants only.");
    const tbody = $("customer-redemptions").tBodies[0];
    if (!more) tbody.textContent = "";
    c.redemptions.data.forEach((r) => {
      const link = el("a", r.code, "mono");
      link.href = "#coupon/" + encodeURIComponent(r.code);
      tbody.appendChild(row([link, r.platform, r.productId, r.status, time(r.reservedAt), time(r.completedAt),
                             r.sandbox ? "yes" : "no", r.uniqueCodeLast4 ? "…" + r.uniqueCodeLast4 : "—"]));
    });
    if (!tbody.rows.length) tbody.appendChild(row(["No redemptions in " + mode + " mode.", "", "", "", "", "", "", ""]));
    customerCursor = c.redemptions.nextCursor;
    $("customer-more").hidden = !customerCursor;
    $("customer").hidden = false;
  }

  async function openCustomer(appUserId) {
    show("customers");
    $("customer").hidden = true;
    $("err-customer-query").textContent = "";
    customerCursor = null;
    try {
      showCustomer(await api("GET", customerPath(appUserId)), false);
    } catch (e) {
      if (e instanceof APIError && e.status === 404) { $("customer-query").value = appUserId; $("err-customer-query").textContent = "No account has this appUserId."; } else fail(e);
    }
  }

  function goToCustomer(appUserId) {
    const hash = "#customer/" + encodeURIComponent(appUserId);
    if (location.hash === hash) openCustomer(appUserId); else location.hash = hash;
  }

  // An email is looked up in the list; anything else is an id the account holds.
  $("customer-search").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    $("err-customer-query").textContent = "";
    const q = $("customer-query").value.trim();
    if (!q) { $("err-customer-query").textContent = "Type an appUserId or an email."; return; }
    if (q.indexOf("@") < 0) { goToCustomer(q); return; }
    try {
      const found = await api("GET", "/v1/customers?email=" + encodeURIComponent(q));
      if (!found.data.length) { $("customer").hidden = true; $("err-customer-query").textContent = "No account has this email."; return; }
      goToCustomer(found.data[0].appUserId);
    } catch (e) { if (e instanceof APIError && e.status === 422) showFieldError("err-customer-", {error: {field: "query"}, message: e.message}); else fail(e); }
  });

  $("customer-more").addEventListener("click", async () => {
    if (!currentCustomer) return;
    try { showCustomer(await api("GET", customerPath(currentCustomer)), true); } catch (e) { fail(e); }
  });

  // MARK: webhooks

  async function loadWebhooks() {
    const tbody = $("webhooks-table").tBodies[0];
    try {
      const page = await api("GET", "/v1/webhooks?limit=100");
      tbody.textContent = "";
      page.data.forEach((w) => {
        const actions = el("div", null, "buttons");
        actions.appendChild(button("Deliveries", () => loadDeliveries(w)));
        actions.appendChild(button("Send test event", async () => {
          try { await api("POST", "/v1/webhooks/" + w.id + "/test"); say("Test event queued."); loadDeliveries(w); } catch (e) { fail(e); }
        }));
        actions.appendChild(button(w.active ? "Disable" : "Enable", async () => {
          try {
            await api("PATCH", "/v1/webhooks/" + w.id, {enabled: !w.active});
            say(w.active ? "Endpoint disabled." : "Endpoint enabled.");
            loadWebhooks();
          } catch (e) { fail(e); }
        }));
        actions.appendChild(button("Rotate secret", async () => {
          if (!window.confirm("Give " + w.url + " a new secret? The old one keeps signing for 24 hours.")) return;
          try {
            const r = await api("POST", "/v1/webhooks/" + w.id + "/rotate-secret");
            const p = $("webhook-secret");
            p.textContent = "New signing secret (shown once; the old one also signs until " + time(r.previousSecretExpiresAt) + "): " + r.secret;
            p.hidden = false;
          } catch (e) { fail(e); }
        }));
        actions.appendChild(button("Remove", async () => {
          if (!window.confirm("Remove the endpoint " + w.url + "?")) return;
          try { await api("DELETE", "/v1/webhooks/" + w.id); say("Endpoint removed."); loadWebhooks(); } catch (e) { fail(e); }
        }));
        tbody.appendChild(row([el("span", w.url, "mono"), w.events.join(", "), w.active ? "yes" : "no", actions]));
      });
      if (!page.data.length) tbody.appendChild(row(["No endpoints yet.", "", "", ""]));
    } catch (e) { fail(e); }
  }

  async function loadDeliveries(w) {
    try {
      const page = await api("GET", "/v1/webhooks/" + w.id + "/deliveries?limit=20");
      const table = $("deliveries-table");
      table.tBodies[0].textContent = "";
      page.data.forEach((d) => {
        const retry = button("Retry", async () => {
          try {
            await api("POST", "/v1/webhooks/" + w.id + "/deliveries/" + d.id + "/retry");
            say("Delivery sent again.");
            loadDeliveries(w);
          } catch (e) { fail(e); }
        });
        table.tBodies[0].appendChild(row([d.type, d.status, d.attempts,
          d.lastStatusCode ? String(d.lastStatusCode) : (d.lastError || "—"), time(d.createdAt), retry]));
      });
      if (!page.data.length) table.tBodies[0].appendChild(row(["No deliveries yet.", "", "", "", "", ""]));
      table.hidden = false;
      $("deliveries-hint").textContent = "Deliveries to " + w.url;
    } catch (e) { fail(e); }
  }

  $("webhook-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors($("webhook-form"));
    const events = ["w-redeemed", "w-failed", "w-released", "w-exhausted", "w-offer-ready", "w-offer-failed", "w-app-user"]
      .filter((id) => $(id).checked).map((id) => $(id).value);
    try {
      const made = await api("POST", "/v1/webhooks", {url: $("w-url").value.trim(), events: events});
      const p = $("webhook-secret");
      p.textContent = "Signing secret (shown once, keep it safe): " + made.secret;
      p.hidden = false;
      $("w-url").value = "";
      loadWebhooks();
    } catch (e) { if (e instanceof APIError && e.status === 422) showFieldError("err-", e); else fail(e); }
  });

  // MARK: store and RevenueCat settings

  // An app's own settings, per mode (docs/apps.md): listed without a secret, set a provider at a
  // time, removed. A secret the member typed leaves its field once saved, and is never kept.
  const defaultApp = "00000000-0000-0000-0000-000000000001";
  const providers = {appstore: "App Store", googleplay: "Google Play", stripe: "Stripe", revenuecat: "RevenueCat"};

  function storeFacts(s) {
    const facts = [];
    if (s.issuerId) facts.push("issuer " + s.issuerId);
    if (s.keyId) facts.push("key " + s.keyId);
    if (s.appAppleId) facts.push("Apple id " + s.appAppleId);
    if (s.packageName) facts.push("package " + s.packageName);
    if (s.serviceAccountEmail) facts.push(s.serviceAccountEmail);
    if (s.webhookSecretSet !== undefined && s.webhookSecretSet !== null) facts.push(s.webhookSecretSet ? "webhook secret set" : "no webhook secret");
    if (s.stripePublicKey) facts.push("Stripe app key " + s.stripePublicKey);
    return facts.length ? facts.join(" · ") : "—";
  }

  async function loadStores() {
    const own = !!app && app.toLowerCase() !== defaultApp;
    $("stores-default").hidden = own;
    $("stores-app").hidden = !own;
    if (!own) return;
    $("stores-mode").textContent = mode;
    const tbody = $("stores-table").tBodies[0];
    tbody.textContent = "";
    try {
      const page = await api("GET", "/v1/apps/" + encodeURIComponent(app) + "/stores");
      page.data.forEach((s) => {
        const name = providers[s.provider] || s.provider;
        const remove = button("Remove", async () => {
          if (!window.confirm("Remove this app's " + name + " settings in " + s.mode + " mode?")) return;
          try {
            await api("DELETE", "/v1/apps/" + encodeURIComponent(app) + "/stores/" + s.provider);
            say(name + " settings removed.");
            loadStores();
          } catch (e) { fail(e); }
        });
        remove.setAttribute("aria-label", "Remove the " + name + " settings");
        tbody.appendChild(row([name, s.mode, storeFacts(s), el("span", "…" + s.secretEnding, "mono"), time(s.updatedAt), remove]));
      });
      if (!page.data.length) tbody.appendChild(row(["No settings in " + mode + " mode yet.", "", "", "", "", ""]));
    } catch (e) { fail(e); }
  }

  document.querySelectorAll(".store-form").forEach((form) => {
    const provider = form.getAttribute("data-provider");
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      clearErrors(form);
      const fields = Array.from(form.querySelectorAll("[data-field]"));
      const body = {};
      fields.forEach((f) => {
        const value = f.hasAttribute("data-secret") && f.tagName === "TEXTAREA" ? f.value : f.value.trim();
        if (value.trim()) body[f.getAttribute("data-field")] = value;
      });
      try {
        const saved = await api("PUT", "/v1/apps/" + encodeURIComponent(app) + "/stores/" + provider, body);
        fields.forEach((f) => { if (f.hasAttribute("data-secret")) f.value = ""; });
        say(providers[provider] + " settings saved in " + saved.mode + " mode; the secret ends with " + saved.secretEnding + ".");
        loadStores();
      } catch (e) { if (!(e instanceof APIError && e.status === 422 && showFieldError("err-s-" + provider + "-", e))) fail(e); }
    });
  });

  // MARK: API keys

  // MARK: overview

  const svgNS = "http://www.w3.org/2000/svg";

  // A bar per day, its platforms stacked, scaled to the busiest day; each bar's title says its figures.
  function drawChart(days) {
    const svg = $("overview-chart");
    svg.textContent = "";
    const width = 720, height = 200, most = Math.max(1, ...days.map((d) => d.ios + d.android + d.web));
    const step = width / days.length, barWidth = Math.max(1, step * 0.8);
    days.forEach((d, i) => {
      let top = height;
      const group = document.createElementNS(svgNS, "g");
      const title = document.createElementNS(svgNS, "title");
      title.textContent = d.date + ": " + d.ios + " iOS, " + d.android + " Android, " + d.web + " web";
      group.appendChild(title);
      ["ios", "android", "web"].forEach((p) => {
        if (!d[p]) return;
        const h = d[p] / most * (height - 10);
        top -= h;
        const r = document.createElementNS(svgNS, "rect");
        r.setAttribute("x", String(i * step + (step - barWidth) / 2));
        r.setAttribute("y", String(top));
        r.setAttribute("width", String(barWidth));
        r.setAttribute("height", String(h));
        r.setAttribute("class", "bar-" + p);
        group.appendChild(r);
      });
      svg.appendChild(group);
    });
  }

  async function loadOverview() {
    try {
      const stats = await api("GET", "/v1/stats/redemptions?days=" + $("overview-days").value);
      drawChart(stats.days);
      const p = stats.platforms;
      $("overview-platforms").textContent = "iOS " + p.ios + " · Android " + p.android + " · web " + p.web +
        (stats.sandbox ? " · and " + stats.sandbox + " in the sandbox" : "");
      const tbody = $("overview-coupons").tBodies[0];
      tbody.textContent = "";
      stats.coupons.forEach((c) => {
        const link = el("a", c.code);
        link.href = "#coupon/" + encodeURIComponent(c.code);
        tbody.appendChild(row([link, c.redemptions]));
      });
      if (!tbody.rows.length) tbody.appendChild(row(["Nothing redeemed yet.", ""]));
    } catch (e) { fail(e); }
  }

  $("overview-days").addEventListener("change", loadOverview);

  // MARK: plans

  async function loadPlans() {
    const tbody = $("plans-table").tBodies[0];
    try {
      const page = await api("GET", "/v1/plans?limit=100");
      tbody.textContent = "";
      page.data.forEach((p) => {
        const play = p.playStore ? p.playStore.productId + (p.playStore.basePlanIds && p.playStore.basePlanIds.length ? " (" + p.playStore.basePlanIds.join(", ") + ")" : "") : null;
        tbody.appendChild(row([el("span", p.productId, "mono"), p.name, p.appStore && p.appStore.subscriptionId, play,
                               p.stripe && p.stripe.priceId, time(p.createdAt)]));
      });
      if (!tbody.rows.length) tbody.appendChild(row(["No plans yet.", "", "", "", "", ""]));
    } catch (e) { fail(e); }
  }

  $("plan-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors($("plan-form"));
    const text = (id) => $(id).value.trim();
    const body = {productId: text("p-productId"), name: text("p-name")};
    if (text("p-appStore")) body.appStore = {subscriptionId: text("p-appStore")};
    if (text("p-play")) {
      body.playStore = {productId: text("p-play")};
      const bases = text("p-basePlans").split(",").map((s) => s.trim()).filter((s) => s);
      if (bases.length) body.playStore.basePlanIds = bases;
    }
    if (text("p-stripe")) body.stripe = {priceId: text("p-stripe")};
    try {
      await api("POST", "/v1/plans", body);
      ["p-productId", "p-name", "p-appStore", "p-play", "p-basePlans", "p-stripe"].forEach((id) => { $(id).value = ""; });
      say("Plan added.");
      loadPlans();
    } catch (e) { if (!showFieldError("err-plan-", e)) fail(e); }
  });

  async function loadKeys() {
    const tbody = $("keys-table").tBodies[0];
    try {
      const page = await api("GET", "/v1/api-keys?limit=100");
      tbody.textContent = "";
      page.data.forEach((k) => {
        tbody.appendChild(row([k.name, el("span", k.prefix + "…", "mono"), k.role, k.mode, time(k.lastUsedAt), button("Revoke", async () => {
          if (!window.confirm("Revoke the key " + k.name + "? Anything using it stops working.")) return;
          try { await api("DELETE", "/v1/api-keys/" + k.id); say("Key revoked."); loadKeys(); } catch (e) { fail(e); }
        })]));
      });
    } catch (e) { fail(e); }
  }

  $("key-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors($("key-form"));
    try {
      const made = await api("POST", "/v1/api-keys", {name: $("k-name").value, role: $("k-role").value, mode: mode});
      const p = $("key-secret");
      p.textContent = "New " + made.mode + " key (shown once, keep it safe): " + made.key;
      p.hidden = false;
      $("k-name").value = "";
      loadKeys();
    } catch (e) { if (e instanceof APIError && e.status === 422) showFieldError("err-", e); else fail(e); }
  });

  // MARK: members

  async function loadMembers() {
    const tbody = $("members-table").tBodies[0];
    try {
      const page = await api("GET", "/v1/members?limit=100");
      tbody.textContent = "";
      page.data.forEach((m) => {
        const select = el("select");
        select.setAttribute("aria-label", "Role of " + m.email);
        ["readonly", "support", "admin"].forEach((r) => { const o = el("option", r); o.value = r; select.appendChild(o); });
        select.value = m.role;
        select.addEventListener("change", async () => {
          try { await api("PATCH", "/v1/members/" + m.id, {role: select.value}); say("Role changed; their sessions ended."); } catch (e) { fail(e); loadMembers(); }
        });
        tbody.appendChild(row([m.email, select, time(m.createdAt), button("Remove", async () => {
          if (!window.confirm("Remove " + m.email + " from the team?")) return;
          try { await api("DELETE", "/v1/members/" + m.id); say("Member removed."); loadMembers(); } catch (e) { fail(e); }
        })]));
      });
      if (!page.data.length) tbody.appendChild(row(["No members yet.", "", "", ""]));
    } catch (e) { fail(e); }
  }

  $("member-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors($("member-form"));
    try {
      const made = await api("POST", "/v1/members", {email: $("m-email").value.trim(), role: $("m-role").value});
      const p = $("invite-url");
      p.textContent = "Send this one-time link to " + made.email + " (valid until " + time(made.expiresAt) + "): " + made.inviteUrl;
      p.hidden = false;
      $("m-email").value = "";
      loadMembers();
    } catch (e) { if (e instanceof APIError && e.status === 422) showFieldError("err-", e); else fail(e); }
  });

  // MARK: audit log

  async function loadAudit() {
    let path = "/v1/audit?limit=50";
    const type = $("audit-type").value, object = $("audit-object").value.trim();
    if (type) path += "&objectType=" + encodeURIComponent(type);
    if (object) path += "&objectId=" + encodeURIComponent(object);
    if (auditCursor) path += "&cursor=" + encodeURIComponent(auditCursor);
    try {
      const page = await api("GET", path);
      const tbody = $("audit-table").tBodies[0];
      page.data.forEach((a) => {
        const change = el("details");
        change.appendChild(el("summary", "Before and after"));
        change.appendChild(el("pre", "before: " + JSON.stringify(a.before, null, 1) + "\nafter: " + JSON.stringify(a.after, null, 1)));
        const who = a.actor ? (a.actor.type === "member" ? "member " : "key ") + a.actor.id : "—";
        tbody.appendChild(row([time(a.createdAt), el("span", who, "mono"), a.action, el("span", a.objectType + " " + a.objectId, "mono"), change]));
      });
      if (!tbody.rows.length) tbody.appendChild(row(["No changes recorded.", "", "", "", ""]));
      auditCursor = page.nextCursor;
      $("audit-more").hidden = !page.nextCursor;
    } catch (e) { fail(e); }
  }

  $("audit-apply").addEventListener("click", () => { auditCursor = null; $("audit-table").tBodies[0].textContent = ""; loadAudit(); });
  $("audit-more").addEventListener("click", loadAudit);

  // A reload: the session cookie, if there is one, signs the member in again.
  (async () => {
    if (!location.hash.startsWith("#invite=")) {
      try {
        const data = await renew();
        if (data) { signedIn(data); return; }
      } catch (e) { /* not signed in */ }
    }
    route();
  })();
})();
