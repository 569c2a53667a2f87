"use strict";
(function () {
  var session = null;
  var checkedCode = null;
  // The server shows the Sign in with Apple button when its web flow is configured.
  var appleOffered = false;
  var $ = function (id) { return document.getElementById(id); };

  var refusals = /*REFUSALS*/;
  var somethingWrong = "Something went wrong. Please try again.";
  var offline = "We couldn't reach the server. Check your connection and try again.";

  function say(text, isError) {
    var s = $("status");
    s.textContent = text;
    s.className = isError ? "status error" : "status";
  }

  // The server's message for a failed call, as a sentence: a capital first, a full stop last.
  function serverMessage(r) {
    var m = r.data && r.data.error && typeof r.data.error.message === "string" ? r.data.error.message.trim() : "";
    if (!m) return somethingWrong;
    m = m.charAt(0).toUpperCase() + m.slice(1);
    return /[.!?]$/.test(m) ? m : m + ".";
  }

  // An access token lasts 15 minutes: on a 401 the session is refreshed once and the call
  // made again; if that fails too, the sign-in form comes back.
  function api(method, path, body) {
    return send(method, path, body).then(function (r) {
      if (r.status !== 401 || !session || !session.refreshToken || path === "/v1/sessions/refresh") return r;
      var spent = session;
      return send("POST", "/v1/sessions/refresh", { refreshToken: spent.refreshToken }).then(function (fresh) {
        if (fresh.status === 200 && fresh.data && fresh.data.session) {
          if (session === spent) session = fresh.data.session;
          return send(method, path, body);
        }
        signedOut("Your session has ended. Please sign in again.");
        return r;
      });
    });
  }

  // Requests carry no cookie, except the sign-in code's exchange (`withCookie`): the Apple
  // flow's cookie binds the code to this browser.
  function send(method, path, body, withCookie) {
    var headers = { "Accept": "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (session) headers["Authorization"] = "Bearer " + session.accessToken;
    return fetch(path, { method: method, headers: headers, body: body === undefined ? undefined : JSON.stringify(body),
                         credentials: withCookie ? "same-origin" : "omit", cache: "no-store" })
      .then(function (r) {
        return r.text().then(function (t) {
          var data = null;
          try { data = t ? JSON.parse(t) : null; } catch (e) { data = null; }
          return { status: r.status, data: data };
        });
      }, function () {
        throw new Error("network");
      });
  }

  function describe(c) {
    if (!c) return "";
    var n = c.duration ? c.duration.count : 1;
    var unit = c.duration ? c.duration.unit : "month";
    var span = n + " " + unit + (n === 1 ? "" : "s");
    if (c.kind === "freePeriod") return span + " of Pro, free.";
    var periods = c.periodCount || 1;
    var off = c.kind === "percentOff" ? c.percentOff + "% off" : (c.amountOff ? c.amountOff.amount + " " + c.amountOff.currency + " off" : "A discount");
    return off + " for " + periods + " billing period" + (periods === 1 ? "" : "s") + " of " + span + ".";
  }

  function signedIn(result) {
    session = result.session;
    $("auth-form").hidden = true;
    $("apple-area").hidden = true;
    $("signed-in").hidden = false;
    $("signed-in-email").textContent = result.account.email || "your account";
    $("password").value = "";
    say("You're signed in. Now enter your code.");
    $("code").focus();
  }

  function signedOut(message) {
    session = null;
    $("auth-form").hidden = false;
    $("apple-area").hidden = !appleOffered;
    $("signed-in").hidden = true;
    say(message);
    $("email").focus();
  }

  function authenticate(path) {
    var email = $("email").value.trim();
    var password = $("password").value;
    if (!email || !password) { say("Enter your email and password.", true); return; }
    say("One moment…");
    api("POST", path, { email: email, password: password }).then(function (r) {
      if (r.status === 200 || r.status === 201) { signedIn(r.data); return; }
      say(serverMessage(r), true);
    }).catch(function () { say(offline, true); });
  }

  function check() {
    var code = $("code").value.trim();
    $("redeem-button").disabled = true;
    $("offer").hidden = true;
    if (!code) { say("Enter a code.", true); return; }
    if (!session) { say("Please sign in first.", true); $("email").focus(); return; }
    say("Checking the code…");
    api("POST", "/v1/coupons/validate", { code: code, platform: "web" }).then(function (r) {
      if (r.status !== 200) { say(serverMessage(r), true); return; }
      if (!r.data.valid) { say(refusals[r.data.reason] || somethingWrong, true); return; }
      checkedCode = code;
      $("offer").textContent = describe(r.data.coupon);
      $("offer").hidden = false;
      $("redeem-button").disabled = false;
      say("This code is valid. Press Redeem to use it.");
    }).catch(function () { say(offline, true); });
  }

  function finish(redemption) {
    if (redemption.status === "completed") {
      var until = redemption.entitlement ? new Date(redemption.entitlement.expiresAt) : null;
      var text = until ? "Pro until " + until.toLocaleDateString(undefined, { year: "numeric", month: "long", day: "numeric" }) : "Your purchase is confirmed.";
      $("result-text").textContent = text;
      $("result").hidden = false;
      $("redeem-button").disabled = true;
      say("Done! " + text + ".");
      $("result-title").focus();
    } else if (redemption.status === "failed" || redemption.status === "released") {
      say("We couldn't apply this code. Your code was not used up; please try again later.", true);
    } else if (redemption.status === "reserved") {
      say("Your discount is reserved. Finish the purchase in the app store to use it.");
    } else {
      say("Still working on it… this can take a moment.");
      wait(redemption.redemptionId, 1);
    }
  }

  function wait(id, attempt) {
    if (attempt > 6) { say("This is taking longer than usual. Check back in a few minutes.", true); return; }
    api("GET", "/v1/redemptions/" + encodeURIComponent(id) + "?wait=20").then(function (r) {
      if (r.status !== 200) { say(serverMessage(r), true); return; }
      if (r.data.status === "granting") { wait(id, attempt + 1); return; }
      finish(r.data);
    }).catch(function () { say(offline, true); });
  }

  function redeem() {
    if (!session || !checkedCode) return;
    $("redeem-button").disabled = true;
    say("Redeeming…");
    api("POST", "/v1/redemptions", { code: checkedCode, platform: "web" }).then(function (r) {
      if (r.status === 200 || r.status === 201) { finish(r.data); return; }
      $("redeem-button").disabled = false;
      say(serverMessage(r), true);
    }).catch(function () {
      $("redeem-button").disabled = false;
      say(offline, true);
    });
  }

  // Sign in with Apple: the server sends the browser to Apple and back here with a one-time
  // code (never a token), which is exchanged once for the session. The code being typed
  // travels along as `coupon`.
  function appleSignIn() {
    var code = $("code").value.trim();
    var back = "/redeem?apple=1" + (code ? "&coupon=" + encodeURIComponent(code) : "");
    say("Taking you to Apple…");
    // Only a sign-in started in this tab is finished here (with the flow's cookie, which
    // the server checks too): a code in a link someone else sent is never exchanged.
    try { window.sessionStorage.setItem("redeem.appleStarted", "1"); } catch (e) { /* storage off: no exchange */ }
    window.location.href = "/v1/sessions/apple/start?return=" + encodeURIComponent(back);
  }

  function backFromApple(params) {
    var coupon = params.get("coupon");
    var signInCode = params.get("code");
    var error = params.get("error");
    if (coupon) $("code").value = coupon.slice(0, 64);
    // The one-time code leaves the address bar and the history at once.
    window.history.replaceState(null, "", "/redeem" + (coupon ? "?code=" + encodeURIComponent(coupon) : ""));
    var started = false;
    try { started = window.sessionStorage.getItem("redeem.appleStarted") === "1"; window.sessionStorage.removeItem("redeem.appleStarted"); } catch (e) { started = false; }
    if (signInCode && !started) {
      say("This sign-in was not started on this page. Sign in with Apple again.", true);
      return;
    }
    if (error || !signInCode) {
      say(error === "user_cancelled_authorize" ? "Sign in with Apple was cancelled." : "Sign in with Apple didn't finish. Please try again.", true);
      return;
    }
    say("Signing you in…");
    send("POST", "/v1/sessions/exchange", { code: signInCode }, true).then(function (r) {
      if (r.status === 200) { signedIn(r.data); return; }
      say(serverMessage(r), true);
    }).catch(function () { say(offline, true); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var params = new URLSearchParams(window.location.search);
    var code = params.get("code");
    appleOffered = !$("apple-area").hidden;
    $("apple-sign-in").addEventListener("click", appleSignIn);
    if (params.get("apple") === "1") backFromApple(params);
    else if (code) $("code").value = code.slice(0, 64);
    $("auth-form").addEventListener("submit", function (e) { e.preventDefault(); authenticate("/v1/sessions"); });
    $("sign-up").addEventListener("click", function () { authenticate("/v1/accounts"); });
    $("code-form").addEventListener("submit", function (e) { e.preventDefault(); check(); });
    $("code").addEventListener("input", function () { $("redeem-button").disabled = true; $("offer").hidden = true; });
    $("redeem-button").addEventListener("click", redeem);
    $("sign-out").addEventListener("click", function () {
      if (session) api("DELETE", "/v1/sessions/current").catch(function () {});
      signedOut("You're signed out.");
    });
    $("email").focus();
  });
})();
