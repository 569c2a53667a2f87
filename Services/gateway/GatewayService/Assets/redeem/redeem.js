// The redeem page: every call goes through the web client (Clients/web, served as
// /redeem/client.js), so the page is that client's first user.
import { RedeemClient, RedeemError, CouponRefusedError } from "/redeem/client.js";

var checkedCode = null;
// The server shows the Sign in with Apple button when its web flow is configured.
var appleOffered = false;
// Set while the page signs out on purpose, so the session's end is not reported as expired.
var signingOut = false;
// Back from Stripe Checkout signed out (the session lives in this page's memory only, and the
// checkout was another page): what to pick up once the user signs in again.
var afterSignIn = null;
var $ = function (id) { return document.getElementById(id); };

var refusals = /*REFUSALS*/;
var somethingWrong = "Something went wrong. Please try again.";
var offline = "We couldn't reach the server. Check your connection and try again.";

// Tokens stay in the client's memory: never in the URL, storage or logs. An access token that
// the server refuses is refreshed once by the client; if that fails too, the session ends here.
var client = new RedeemClient({
  baseUrl: "",
  onSessionChange: function (session) {
    if (session === null && !signingOut) signedOut("Your session has ended. Please sign in again.");
  },
});

function say(text, isError) {
  var s = $("status");
  s.textContent = text;
  s.className = isError ? "status error" : "status";
}

// The server's message for a failed call, as a sentence: a capital first, a full stop last.
function serverMessage(e) {
  if (e instanceof RedeemError && e.code === "network") return offline;
  var m = e instanceof RedeemError && e.status > 0 && typeof e.message === "string" ? e.message.trim() : "";
  if (!m) return somethingWrong;
  m = m.charAt(0).toUpperCase() + m.slice(1);
  return /[.!?]$/.test(m) ? m : m + ".";
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
  $("auth-form").hidden = true;
  $("apple-area").hidden = true;
  $("signed-in").hidden = false;
  $("signed-in-email").textContent = result.account.email || "your account";
  $("password").value = "";
  say("You're signed in. Now enter your code.");
  $("code").focus();
  if (afterSignIn) { var next = afterSignIn; afterSignIn = null; next(); }
}

function signedOut(message) {
  $("auth-form").hidden = false;
  $("apple-area").hidden = !appleOffered;
  $("signed-in").hidden = true;
  say(message);
  $("email").focus();
}

function authenticate(signUp) {
  var email = $("email").value.trim();
  var password = $("password").value;
  if (!email || !password) { say("Enter your email and password.", true); return; }
  say("One moment…");
  (signUp ? client.signUp(email, password) : client.signIn(email, password))
    .then(signedIn, function (e) { say(serverMessage(e), true); });
}

function check() {
  var code = $("code").value.trim();
  $("redeem-button").disabled = true;
  $("offer").hidden = true;
  if (!code) { say("Enter a code.", true); return; }
  if (!client.isSignedIn) { say("Please sign in first.", true); $("email").focus(); return; }
  say("Checking the code…");
  client.validateCoupon(code, { platform: "web" }).then(function (v) {
    if (!v.valid) { say(refusals[v.reason] || somethingWrong, true); return; }
    checkedCode = code;
    $("offer").textContent = describe(v.coupon);
    $("offer").hidden = false;
    $("redeem-button").disabled = false;
    say("This code is valid. Press Redeem to use it.");
  }, function (e) { say(serverMessage(e), true); });
}

function finish(redemption) {
  if (redemption.status === "completed") {
    var until = redemption.entitlement ? redemption.entitlement.expiresAt : null;
    var text = until ? "Pro until " + until.toLocaleDateString(undefined, { year: "numeric", month: "long", day: "numeric" }) : "Your purchase is confirmed.";
    $("result-text").textContent = text;
    $("result").hidden = false;
    $("redeem-button").disabled = true;
    say("Done! " + (/[.!?]$/.test(text) ? text : text + "."));
    $("result-title").focus();
  } else if (redemption.status === "failed" || redemption.status === "released") {
    say("We couldn't apply this code. Your code was not used up; please try again later.", true);
  } else if (redemption.status === "reserved" && redemption.stripe) {
    // Sold through Stripe Checkout: pay there; Stripe sends the user back here.
    say("Taking you to checkout…");
    window.location.href = redemption.stripe.checkoutUrl;
  } else if (redemption.status === "reserved") {
    say("Your discount is reserved. Finish the purchase in the app store to use it.");
  } else {
    say("Still working on it… this can take a moment.");
    client.awaitCouponCompletion(redemption.redemptionId, { timeout: 120000 }).then(function (done) {
      if (done.outcome === "timedOut" && (!done.redemption || done.redemption.status === "granting")) {
        say("This is taking longer than usual. Check back in a few minutes.", true);
        return;
      }
      finish(done.redemption);
    }, function (e) { say(serverMessage(e), true); });
  }
}

function redeem() {
  if (!client.isSignedIn || !checkedCode) return;
  $("redeem-button").disabled = true;
  say("Redeeming…");
  client.redeemCoupon(checkedCode, { platform: "web" }).then(finish, function (e) {
    $("redeem-button").disabled = false;
    say(e instanceof CouponRefusedError ? refusals[e.reason] || serverMessage(e) : serverMessage(e), true);
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
  window.location.href = client.appleSignInUrl(back);
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
  client.completeAppleSignIn(signInCode).then(signedIn, function (e) { say(serverMessage(e), true); });
}

// Back from Stripe Checkout (`checkout=success` or `cancel`, with the redemption): a paid
// checkout completes once Stripe's event arrives, so the page waits for it (after the user signs
// in again). A cancelled one keeps the code reserved until Stripe expires the session, so Redeem
// takes the user back to checkout, without checking the code again (which would say it is in use).
function backFromCheckout(params) {
  var id = params.get("redemption");
  var code = $("code").value.trim();
  if (params.get("checkout") !== "success") {
    var retry = function () {
      if (code) { checkedCode = code; $("redeem-button").disabled = false; }
      say("Checkout was cancelled. Nothing was charged." + (code ? " Press Redeem to go back to checkout." : ""), true);
    };
    if (client.isSignedIn) retry();
    else { afterSignIn = retry; say("Checkout was cancelled. Nothing was charged.", true); }
    return;
  }
  if (!id) { say("Payment received. Sign in to see your subscription."); return; }
  if (!client.isSignedIn) {
    afterSignIn = function () { awaitCheckout(id); };
    say("Payment received. Sign in to see your subscription.");
    return;
  }
  awaitCheckout(id);
}

function awaitCheckout(id) {
  say("Payment received. Confirming your subscription…");
  client.awaitCouponCompletion(id, { timeout: 120000 }).then(function (done) {
    if (!done.redemption || done.redemption.status === "reserved") {
      say("Your payment is still being confirmed. Check back in a few minutes.");
      return;
    }
    finish(done.redemption);
  }, function (e) { say(serverMessage(e), true); });
}

function start() {
  var params = new URLSearchParams(window.location.search);
  var code = params.get("code");
  appleOffered = !$("apple-area").hidden;
  $("apple-sign-in").addEventListener("click", appleSignIn);
  if (params.get("apple") === "1") backFromApple(params);
  else if (code) $("code").value = code.slice(0, 64);
  if (params.get("checkout")) backFromCheckout(params);
  $("auth-form").addEventListener("submit", function (e) { e.preventDefault(); authenticate(false); });
  $("sign-up").addEventListener("click", function () { authenticate(true); });
  $("code-form").addEventListener("submit", function (e) { e.preventDefault(); check(); });
  $("code").addEventListener("input", function () { $("redeem-button").disabled = true; $("offer").hidden = true; });
  $("redeem-button").addEventListener("click", redeem);
  $("sign-out").addEventListener("click", function () {
    signingOut = true;
    client.signOut().finally(function () { signingOut = false; });
    signedOut("You're signed out.");
  });
  $("email").focus();
}

// A module runs once the document is parsed.
if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
